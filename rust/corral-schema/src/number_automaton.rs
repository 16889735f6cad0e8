//! Automata of number magnitudes compared with decimal bounds, built directly.
//!
//! The language is the one [`crate::numbers`] describes: the restricted magnitude forms (no
//! sign) — `(0|[1-9][0-9]*)(\.[0-9]+)?` (U1), normalized scientific notation
//! `[1-9](\.[0-9]+)?[eE][+-]?[0-9]+` (U2) and zero with an exponent `0(\.0+)?[eE][+-]?[0-9]+`
//! (U3) — whose value compares with every bound as asked. A state is what the text read so far
//! says about each comparison: the integer, fraction, mantissa and exponent digits compared
//! with the bound's digits as they come (equal so far, smaller, larger), and the few counts the
//! end of the number needs (how many integer, fraction or exponent digits were read, up to the
//! longest bound). The states are explored from the start, so only reachable ones are made,
//! and those from which no accepting state is reachable are dropped.
//!
//! Built as expressions (one per bound and per form, with every exponent spelled out) and
//! determinized, then intersected by product, a bounded number took 30–70 µs on warm caches
//! and about a sixth of the compile of the benchmark's slowest schemas, whose bounds are
//! each used once (session 23).

use crate::cdfa::CDfa;
use crate::decimal::{Dec, Op};
use std::cmp::Ordering;

/// A comparison so far: equal, smaller, larger (`Ordering` as one byte).
type Rel = Ordering;

/// Where in the number text the automaton is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Phase {
    Start,
    /// In the integer digits.
    Int,
    /// Right after `.` (a digit must follow).
    Dot,
    /// In the fraction digits.
    Frac,
    /// Right after `e`/`E`.
    ExpMark,
    /// Right after the exponent's sign (a digit must follow).
    ExpSign,
    /// In the exponent digits.
    Exp,
}

/// One bound, as its digits.
struct Target {
    op: Op,
    zero: bool,
    /// Integer digits without leading zeros ("" for a magnitude below 1).
    int: Vec<u8>,
    /// Fraction digits without trailing zeros.
    frac: Vec<u8>,
    /// Mantissa digits of normalized scientific notation (first non-zero, no trailing zeros).
    mant: Vec<u8>,
    /// Exponent of normalized scientific notation: negative, and its magnitude's digits
    /// ("" for 0).
    exp_neg: bool,
    exp: Vec<u8>,
}

impl Target {
    fn new(b: &Dec, op: Op) -> Target {
        let digits = |s: &str| s.bytes().map(|c| c - b'0').collect::<Vec<u8>>();
        let (e, mant) = if b.is_zero() { (0, String::new()) } else { b.sci() };
        let exp = if e == 0 { Vec::new() } else { digits(&e.unsigned_abs().to_string()) };
        Target { op, zero: b.is_zero(), int: digits(&b.int), frac: digits(&b.frac), mant: digits(&mant), exp_neg: e < 0, exp }
    }

    fn holds(&self, r: Rel) -> bool {
        match self.op {
            Op::Le => r != Ordering::Greater,
            Op::Lt => r == Ordering::Less,
            Op::Ge => r != Ordering::Less,
            Op::Gt => r == Ordering::Greater,
        }
    }
}

/// Per bound: the integer, fraction, mantissa and exponent digits compared so far.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Cmp {
    int: Rel,
    frac: Rel,
    mant: Rel,
    exp: Rel,
}

const EQ: Cmp = Cmp { int: Ordering::Equal, frac: Ordering::Equal, mant: Ordering::Equal, exp: Ordering::Equal };

/// What the text read so far says (see the module docs); fields that no longer matter are
/// reset, so that states differing only in them are one.
#[derive(Clone, Copy, Debug)]
struct State {
    phase: Phase,
    /// The integer part is `0`.
    int_zero: bool,
    /// Integer digits read (up to the cap).
    int_len: u32,
    /// Fraction digits read (up to the cap).
    frac_len: u32,
    /// Every fraction digit read is 0.
    frac_zero: bool,
    /// The exponent is negative.
    exp_neg: bool,
    /// Exponent digits read after its leading zeros (up to the cap).
    exp_len: u32,
    /// Per bound (the first `targets.len()` used), its comparisons so far.
    cmp: [Cmp; 2],
}

/// The digit of `t` at `i`, 0 past its end.
fn at(t: &[u8], i: u32) -> u8 {
    t.get(i as usize).copied().unwrap_or(0)
}

/// `rel` once decided, else digit `d` against digit `t`.
fn next_rel(rel: Rel, d: u8, t: u8) -> Rel {
    if rel == Ordering::Equal {
        d.cmp(&t)
    } else {
        rel
    }
}

/// Digits compared as they come, at the end: equal so far but `t` has digits left (not all
/// zeros: no trailing zeros) means smaller.
fn end_rel(rel: Rel, read: u32, t: &[u8]) -> Rel {
    if rel == Ordering::Equal && (read as usize) < t.len() {
        Ordering::Less
    } else {
        rel
    }
}

struct Explorer<'a> {
    targets: &'a [Target],
    /// Largest integer, fraction and exponent digit counts told apart: one past the longest
    /// bound's (more digits than every bound's is all that matters then; at least two integer
    /// digits, which tell a mantissa from a longer integer part).
    int_cap: u32,
    frac_cap: u32,
    exp_cap: u32,
}

impl State {
    /// The state as one number (the explorer's map key: one multiplication to hash).
    fn key(&self) -> u128 {
        let mut k = (self.phase as u128) | (self.int_zero as u128) << 3 | (self.frac_zero as u128) << 4 | (self.exp_neg as u128) << 5;
        k |= (self.int_len as u128) << 6 | (self.frac_len as u128) << 38 | (self.exp_len as u128) << 70;
        let rel = |r: Rel| (r as i8 + 1) as u128;
        for (i, c) in self.cmp.iter().enumerate() {
            k |= (rel(c.int) | rel(c.frac) << 2 | rel(c.mant) << 4 | rel(c.exp) << 6) << (102 + 8 * i);
        }
        k
    }
}

impl Explorer<'_> {
    /// The state after `c`, if `c` may follow.
    fn step(&self, s: &State, c: u8) -> Option<State> {
        let mut n = *s;
        let digit = c.is_ascii_digit().then(|| c - b'0');
        let u2 = !s.int_zero && s.int_len == 1;
        match (s.phase, digit, c) {
            (Phase::Start, Some(d), _) => {
                n.phase = Phase::Int;
                n.int_zero = d == 0;
                n.int_len = 1;
                if d != 0 {
                    for (k, t) in self.targets.iter().enumerate() {
                        // (A bound below 1: the length decides, not the digits.)
                        n.cmp[k].int = if t.int.is_empty() { Ordering::Equal } else { d.cmp(&t.int[0]) };
                        n.cmp[k].mant = next_rel(Ordering::Equal, d, at(&t.mant, 0));
                    }
                }
            }
            (Phase::Int, Some(d), _) if !s.int_zero => {
                for (k, t) in self.targets.iter().enumerate() {
                    if (s.int_len as usize) < t.int.len() {
                        n.cmp[k].int = next_rel(s.cmp[k].int, d, t.int[s.int_len as usize]);
                    } else {
                        // (Longer than the bound's: the length decides, not the digits.)
                        n.cmp[k].int = Ordering::Equal;
                    }
                    // (Two integer digits: not a mantissa.)
                    n.cmp[k].mant = Ordering::Equal;
                }
                n.int_len = (s.int_len + 1).min(self.int_cap);
            }
            (Phase::Int, None, b'.') => {
                // The integer part is complete: its comparisons are final, and only whether
                // the number may still be a mantissa matters of its length.
                n.phase = Phase::Dot;
                for (k, t) in self.targets.iter().enumerate() {
                    n.cmp[k].int = self.int_rel(s, k, t);
                }
                n.int_len = if u2 { 1 } else { 2 };
            }
            (Phase::Dot | Phase::Frac, Some(d), _) => {
                n.phase = Phase::Frac;
                n.frac_zero = s.frac_zero && d == 0;
                let mut decided = true;
                for (k, t) in self.targets.iter().enumerate() {
                    // (The fraction decides nothing once the integer part has.)
                    if s.cmp[k].int == Ordering::Equal {
                        n.cmp[k].frac = next_rel(s.cmp[k].frac, d, at(&t.frac, s.frac_len));
                    }
                    if u2 {
                        n.cmp[k].mant = next_rel(s.cmp[k].mant, d, at(&t.mant, s.frac_len + 1));
                    }
                    decided &= (n.cmp[k].int != Ordering::Equal || n.cmp[k].frac != Ordering::Equal) && (!u2 || n.cmp[k].mant != Ordering::Equal);
                }
                // (Once every comparison is decided, how many digits follow does not matter.)
                n.frac_len = if decided { self.frac_cap } else { (s.frac_len + 1).min(self.frac_cap) };
            }
            (Phase::Int | Phase::Frac, None, b'e' | b'E') => {
                let u3 = s.int_zero && s.frac_zero;
                if !u2 && !u3 {
                    return None;
                }
                n.phase = Phase::ExpMark;
                for (k, t) in self.targets.iter().enumerate() {
                    let mant = if u2 { end_rel(s.cmp[k].mant, s.frac_len + 1, &t.mant) } else { Ordering::Equal };
                    n.cmp[k] = Cmp { mant, ..EQ };
                }
                n.frac_len = 0;
                n.frac_zero = true;
                // (Only "mantissa or zero" matters of the integer part now.)
                n.int_len = 1;
            }
            (Phase::ExpMark, None, b'+' | b'-') => {
                n.phase = Phase::ExpSign;
                // (Zero's exponent does not matter.)
                n.exp_neg = c == b'-' && !s.int_zero;
            }
            (Phase::ExpMark | Phase::ExpSign | Phase::Exp, Some(d), _) => {
                n.phase = Phase::Exp;
                if !s.int_zero && (s.exp_len > 0 || d != 0) {
                    for (k, t) in self.targets.iter().enumerate() {
                        if (s.exp_len as usize) < t.exp.len() {
                            n.cmp[k].exp = next_rel(s.cmp[k].exp, d, t.exp[s.exp_len as usize]);
                        } else {
                            // (Longer than the bound's: the length decides, not the digits.)
                            n.cmp[k].exp = Ordering::Equal;
                        }
                    }
                    n.exp_len = (s.exp_len + 1).min(self.exp_cap);
                }
            }
            _ => return None,
        }
        (!self.doomed(&n)).then_some(n)
    }

    /// The comparison of the integer part read in `s` (complete) with bound `k`'s.
    fn int_rel(&self, s: &State, k: usize, t: &Target) -> Rel {
        if s.int_zero {
            if t.int.is_empty() {
                Ordering::Equal
            } else {
                Ordering::Less
            }
        } else {
            (s.int_len as usize).cmp(&t.int.len()).then(s.cmp[k].int)
        }
    }

    /// Whether no continuation of `s` can meet every bound (its states are not explored).
    fn doomed(&self, s: &State) -> bool {
        let u2 = !s.int_zero && s.int_len == 1;
        self.targets.iter().enumerate().any(|(k, t)| match s.phase {
            // More integer digits only make it larger, and two or more cannot be a mantissa.
            Phase::Int => !s.int_zero && s.int_len >= 2 && s.int_len as usize > t.int.len() && !t.holds(Ordering::Greater),
            // Decided by the integer part (and not a mantissa or zero with an exponent).
            Phase::Dot | Phase::Frac => !u2 && !(s.int_zero && s.frac_zero) && s.cmp[k].int != Ordering::Equal && !t.holds(s.cmp[k].int),
            // Zero with an exponent.
            Phase::ExpMark | Phase::ExpSign | Phase::Exp => s.int_zero && !t.holds(if t.zero { Ordering::Equal } else { Ordering::Less }),
            Phase::Start => false,
        })
    }

    /// Whether the text read so far is a complete form whose value meets every bound.
    fn accepts(&self, s: &State) -> bool {
        let value = |k: usize, t: &Target| -> Rel {
            let c = &s.cmp[k];
            match s.phase {
                // (After `.` the integer comparison is final already.)
                Phase::Int => self.int_rel(s, k, t).then(end_rel(c.frac, s.frac_len, &t.frac)),
                Phase::Frac => c.int.then(end_rel(c.frac, s.frac_len, &t.frac)),
                Phase::Exp if s.int_zero => {
                    if t.zero {
                        Ordering::Equal
                    } else {
                        Ordering::Less
                    }
                }
                Phase::Exp => {
                    if t.zero {
                        return Ordering::Greater;
                    }
                    let mag = (s.exp_len as usize).cmp(&t.exp.len()).then(c.exp);
                    let nonzero = s.exp_len > 0;
                    let exp = match (s.exp_neg && nonzero, t.exp_neg) {
                        (false, false) => mag,
                        (true, false) => Ordering::Less,
                        (false, true) => Ordering::Greater,
                        (true, true) => mag.reverse(),
                    };
                    exp.then(c.mant)
                }
                _ => unreachable!("only complete forms are asked"),
            }
        };
        matches!(s.phase, Phase::Int | Phase::Frac | Phase::Exp) && self.targets.iter().enumerate().all(|(k, t)| t.holds(value(k, t)))
    }
}

/// The characters a magnitude is written with, in code point order.
const ALPHABET: &[u8] = b"+-.0123456789Ee";

/// Restricted magnitude forms whose value compares with each `(bound, op)` as `op` says (every
/// form when `bounds` is empty; at most two bounds, each non-negative); `None` when more than
/// `limit` states are explored (dead ends included: about 2,500 for two bounds at the ends of
/// the double range written out in full). Not minimized.
pub(crate) fn magnitudes(bounds: &[(&Dec, Op)], limit: usize) -> Option<CDfa> {
    assert!(bounds.len() <= 2, "at most a lower and an upper bound");
    debug_assert!(bounds.iter().all(|(b, _)| !b.neg), "magnitudes compare with non-negative bounds");
    let targets: Vec<Target> = bounds.iter().map(|&(b, op)| Target::new(b, op)).collect();
    let cap = |len: fn(&Target) -> usize| targets.iter().map(len).max().unwrap_or(0) as u32 + 1;
    let ex = Explorer { targets: &targets, int_cap: cap(|t| t.int.len()).max(2), frac_cap: cap(|t| t.frac.len().max(t.mant.len())), exp_cap: cap(|t| t.exp.len()) };
    let start = State { phase: Phase::Start, int_zero: false, int_len: 0, frac_len: 0, frac_zero: true, exp_neg: false, exp_len: 0, cmp: [EQ; 2] };
    let mut ids: rustc_hash::FxHashMap<u128, u32> = rustc_hash::FxHashMap::with_capacity_and_hasher(256, Default::default());
    let mut states = vec![start];
    ids.insert(start.key(), 0);
    let mut trans: Vec<Vec<(u32, u32, u32)>> = Vec::new();
    let mut i = 0;
    while i < states.len() {
        let s = states[i];
        let mut row: Vec<(u32, u32, u32)> = Vec::new();
        for &c in ALPHABET {
            let Some(n) = ex.step(&s, c) else { continue };
            let id = *ids.entry(n.key()).or_insert_with(|| {
                states.push(n);
                states.len() as u32 - 1
            });
            match row.last_mut() {
                Some(last) if last.2 == id && last.1 + 1 == c as u32 => last.1 = c as u32,
                _ => row.push((c as u32, c as u32, id)),
            }
        }
        trans.push(row);
        if states.len() > limit {
            return None;
        }
        i += 1;
    }
    let accept: Vec<bool> = states.iter().map(|s| ex.accepts(s)).collect();
    Some(trimmed(trans, accept))
}

/// The automaton without the states from which no accepting state is reachable (the start
/// state stays, as the empty language's single state).
fn trimmed(trans: Vec<Vec<(u32, u32, u32)>>, accept: Vec<bool>) -> CDfa {
    let n = trans.len();
    let (at, preds) = corral_core::predecessor_lists(n, |s| trans[s].iter().map(|e| e.2));
    let mut live = accept.clone();
    let mut stack: Vec<u32> = (0..n as u32).filter(|&s| live[s as usize]).collect();
    while let Some(s) = stack.pop() {
        for &p in &preds[at[s as usize] as usize..at[s as usize + 1] as usize] {
            if !live[p as usize] {
                live[p as usize] = true;
                stack.push(p);
            }
        }
    }
    live[0] = true;
    let mut new_id = vec![u32::MAX; n];
    let mut next = 0;
    for s in 0..n {
        if live[s] {
            new_id[s] = next;
            next += 1;
        }
    }
    let mut out = CDfa { trans: Vec::with_capacity(next as usize), accept: Vec::with_capacity(next as usize), start: 0 };
    for (s, row) in trans.into_iter().enumerate() {
        if live[s] {
            out.trans.push(row.into_iter().filter(|e| live[e.2 as usize]).map(|(a, b, t)| (a, b, new_id[t as usize])).collect());
            out.accept.push(accept[s]);
        }
    }
    out
}
