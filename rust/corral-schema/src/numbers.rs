//! Number languages: exact decimal comparisons against arbitrary-size bounds, integers,
//! `multipleOf`, as regular expressions over the JSON number text.
//!
//! Without value constraints, every JSON number text is allowed. With value constraints
//! (bounds, `multipleOf`, `enum`/`const`, integer), a number must be written either without
//! exponent (`-?(0|[1-9][0-9]*)(\.[0-9]+)?`, any number of trailing zeros) or in *normalized*
//! scientific notation: a mantissa with exactly one non-zero integer digit
//! (`-?[1-9](\.[0-9]+)?[eE][+-]?[0-9]+`) or a zero mantissa (`-?0(\.0+)?[eE][+-]?[0-9]+`);
//! `12e3` or `0.5e1` are not produced nor accepted then (an exact grammar over every exponent
//! form does not exist: comparing the mantissa length with the exponent needs counting).
//! With `multipleOf`, exponents are not allowed at all. Integers (`type: integer`) accept a zero
//! fraction (`1.0`, as JSON Schema 2020-12 counts 1.0 as an integer) and exponent forms with
//! exponent ≥ 16 and at most 16 fraction digits (what JSON serializers emit for large values);
//! in draft 4, whose validators count only numbers written as integers, neither
//! ([`plain_integer`]).

use crate::cdfa::{CDfa, TooBig};
pub use crate::decimal::Dec;
use crate::decimal::Op;
use crate::strings::{lit, rep, star};
use corral_core::Rx;
use std::sync::OnceLock;

/// One end of an interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bound {
    /// No bound.
    None,
    /// Inclusive.
    Incl(Dec),
    /// Exclusive.
    Excl(Dec),
}

fn digits(a: u8, b: u8) -> Rx {
    Rx::Bytes(vec![(b'0' + a, b'0' + b)])
}

fn any_digits() -> Rx {
    star(digits(0, 9))
}

fn frac_any() -> Rx {
    rep(Rx::concat(vec![lit("."), rep(digits(0, 9), 1, None)]), 0, Some(1))
}

fn exp_any() -> Rx {
    Rx::concat(vec![Rx::Bytes(vec![(b'E', b'E'), (b'e', b'e')]), rep(Rx::Bytes(vec![(b'+', b'+'), (b'-', b'-')]), 0, Some(1)), rep(digits(0, 9), 1, None)])
}

fn opt(r: Rx) -> Rx {
    rep(r, 0, Some(1))
}

/// Every JSON number text.
pub fn any_number() -> Rx {
    // (Built once: every `number` leaf of every schema uses it.)
    static RX: OnceLock<Rx> = OnceLock::new();
    RX.get_or_init(|| Rx::concat(vec![opt(lit("-")), uint_canon(), frac_any(), opt(exp_any())])).clone()
}

fn uint_canon() -> Rx {
    Rx::alt(vec![lit("0"), Rx::concat(vec![digits(1, 9), any_digits()])])
}

/// Integers without value constraints (see the module docs).
pub fn any_integer() -> Rx {
    static RX: OnceLock<Rx> = OnceLock::new();
    RX.get_or_init(any_integer_rx).clone()
}

fn any_integer_rx() -> Rx {
    Rx::alt(vec![
        Rx::concat(vec![opt(lit("-")), uint_canon(), opt(Rx::concat(vec![lit("."), rep(lit("0"), 1, None)]))]),
        Rx::concat(vec![opt(lit("-")), big_exp_integer()]),
        Rx::concat(vec![opt(lit("-")), zero_exp()]),
    ])
}

/// Integers as draft 4 counts them: written without fraction or exponent (its validators
/// take `1.0` and `1e3` for non-integers).
pub fn plain_integer() -> Rx {
    static RX: OnceLock<Rx> = OnceLock::new();
    RX.get_or_init(|| Rx::concat(vec![opt(lit("-")), uint_canon()])).clone()
}

fn big_exp_integer() -> Rx {
    // [1-9](\.[0-9]{1,16})?[eE]\+?0*(1[6-9]|[2-9][0-9]|[1-9][0-9]{2,})
    Rx::concat(vec![
        digits(1, 9),
        opt(Rx::concat(vec![lit("."), rep(digits(0, 9), 1, Some(16))])),
        Rx::Bytes(vec![(b'E', b'E'), (b'e', b'e')]),
        opt(lit("+")),
        star(lit("0")),
        Rx::alt(vec![
            Rx::concat(vec![lit("1"), digits(6, 9)]),
            Rx::concat(vec![digits(2, 9), digits(0, 9)]),
            Rx::concat(vec![digits(1, 9), rep(digits(0, 9), 2, None)]),
        ]),
    ])
}

fn zero_exp() -> Rx {
    Rx::concat(vec![lit("0"), opt(Rx::concat(vec![lit("."), rep(lit("0"), 1, None)])), exp_any()])
}

/// Restricted magnitude forms (no sign): U1 ∪ U2 ∪ U3.
fn mag_forms() -> Rx {
    Rx::alt(vec![
        Rx::concat(vec![uint_canon(), frac_any()]),
        Rx::concat(vec![digits(1, 9), frac_any(), exp_any()]),
        zero_exp(),
    ])
}

/// Restricted signed forms.
pub fn restricted_number() -> Rx {
    static RX: OnceLock<Rx> = OnceLock::new();
    RX.get_or_init(|| Rx::concat(vec![opt(lit("-")), mag_forms()])).clone()
}

/// Fixed-length digit strings between `lo` and `hi` (same length, lexicographic).
fn same_len(lo: &[u8], hi: &[u8]) -> Rx {
    if lo.is_empty() {
        return Rx::Empty;
    }
    let n = lo.len();
    let (a, b) = (lo[0] - b'0', hi[0] - b'0');
    if a == b {
        return Rx::concat(vec![digits(a, a), same_len(&lo[1..], &hi[1..])]);
    }
    let nines = vec![b'9'; n - 1];
    let zeros = vec![b'0'; n - 1];
    let lo_rest_min = lo[1..].iter().all(|&c| c == b'0');
    let hi_rest_max = hi[1..].iter().all(|&c| c == b'9');
    let mut alts = Vec::new();
    let mut first = a;
    if !lo_rest_min {
        alts.push(Rx::concat(vec![digits(a, a), same_len(&lo[1..], &nines)]));
        first += 1;
    }
    let mut last = b as i32;
    let tail = if !hi_rest_max {
        last -= 1;
        Some(Rx::concat(vec![digits(b, b), same_len(&zeros, &hi[1..])]))
    } else {
        None
    };
    if first as i32 <= last {
        alts.push(Rx::concat(vec![digits(first, last as u8), rep(digits(0, 9), (n - 1) as u32, Some((n - 1) as u32))]));
    }
    if let Some(t) = tail {
        alts.push(t);
    }
    Rx::alt(alts)
}

/// Canonical unsigned integers (no leading zeros) in `[lo, hi]`.
fn uint_in(lo: u64, hi: Option<u64>) -> Rx {
    let ls = lo.to_string();
    match hi {
        Some(h) if h < lo => Rx::Nothing,
        Some(h) => {
            let hs = h.to_string();
            if ls.len() == hs.len() {
                return same_len(ls.as_bytes(), hs.as_bytes());
            }
            let mut alts = vec![same_len(ls.as_bytes(), "9".repeat(ls.len()).as_bytes())];
            if hs.len() > ls.len() + 1 {
                alts.push(Rx::concat(vec![digits(1, 9), rep(digits(0, 9), ls.len() as u32, Some(hs.len() as u32 - 2))]));
            }
            let low = format!("1{}", "0".repeat(hs.len() - 1));
            alts.push(same_len(low.as_bytes(), hs.as_bytes()));
            Rx::alt(alts)
        }
        None => Rx::alt(vec![
            same_len(ls.as_bytes(), "9".repeat(ls.len()).as_bytes()),
            Rx::concat(vec![digits(1, 9), rep(digits(0, 9), ls.len() as u32, None)]),
        ]),
    }
}

/// Exponent part `[eE][+-]?[0-9]+` whose value lies in `[lo, hi]`.
fn exp_in(lo: Option<i64>, hi: Option<i64>) -> Rx {
    let e = Rx::Bytes(vec![(b'E', b'E'), (b'e', b'e')]);
    let mut alts = Vec::new();
    // non-negative values
    let a = lo.unwrap_or(i64::MIN).max(0);
    if hi.is_none_or(|h| h >= a) {
        alts.push(Rx::concat(vec![opt(lit("+")), star(lit("0")), uint_in(a as u64, hi.map(|h| h as u64))]));
    }
    // negative values -v, v in [max(1,-hi), -lo]
    let vmin = hi.map(|h| (-h).max(1)).unwrap_or(1);
    let vmax = lo.map(|l| -l);
    if vmax.is_none_or(|m| m >= vmin) && vmin > 0 {
        alts.push(Rx::concat(vec![lit("-"), star(lit("0")), uint_in(vmin as u64, vmax.map(|m| m as u64))]));
    }
    // "-0"
    if lo.is_none_or(|l| l <= 0) && hi.is_none_or(|h| h >= 0) {
        alts.push(Rx::concat(vec![lit("-"), rep(lit("0"), 1, None)]));
    }
    Rx::concat(vec![e, Rx::alt(alts)])
}

/// Optional fraction `(\.[0-9]+)?` with `0.frac op 0.bf`. (The expression [`interval`] was built from, kept for tests.)
#[cfg(test)]
fn frac_cmp(bf: &[u8], op: Op) -> Rx {
    let m = bf.len();
    let less_ok = matches!(op, Op::Le | Op::Lt);
    let tail = match op {
        Op::Le => star(lit("0")),
        Op::Lt => Rx::Nothing,
        Op::Ge => any_digits(),
        Op::Gt => Rx::concat(vec![star(lit("0")), digits(1, 9), any_digits()]),
    };
    // T(j) for j = m down to 1; P(j) for j < m
    let p = |j: usize, t_next: Rx| -> Rx {
        let b = bf[j] - b'0';
        let mut alts = Vec::new();
        if less_ok && b > 0 {
            alts.push(Rx::concat(vec![digits(0, b - 1), any_digits()]));
        }
        if !less_ok && b < 9 {
            alts.push(Rx::concat(vec![digits(b + 1, 9), any_digits()]));
        }
        alts.push(Rx::concat(vec![digits(b, b), t_next]));
        Rx::alt(alts)
    };
    let g0 = if m == 0 {
        match op {
            Op::Le => rep(lit("0"), 1, None),
            Op::Lt => Rx::Nothing,
            Op::Ge => rep(digits(0, 9), 1, None),
            Op::Gt => Rx::concat(vec![star(lit("0")), digits(1, 9), any_digits()]),
        }
    } else {
        let mut t = tail;
        for j in (1..m).rev() {
            let end = if less_ok { Rx::Empty } else { Rx::Nothing };
            t = Rx::alt(vec![end, p(j, t)]);
        }
        p(0, t)
    };
    let none_ok = match op {
        Op::Le => true,
        Op::Lt => m > 0,
        Op::Ge => m == 0,
        Op::Gt => false,
    };
    let dot = Rx::concat(vec![lit("."), g0]);
    if none_ok {
        Rx::alt(vec![Rx::Empty, dot])
    } else {
        dot
    }
}

/// `D(\.[0-9]+)?` with D exactly `bi.len()` digits (first non-zero), compared to `bi.bf`. (The expression [`interval`] was built from, kept for tests.)
#[cfg(test)]
fn seq_cmp(bi: &[u8], bf: &[u8], op: Op) -> Rx {
    let n = bi.len();
    let less_ok = matches!(op, Op::Le | Op::Lt);
    let mut t = frac_cmp(bf, op);
    for i in (0..n).rev() {
        let b = bi[i] - b'0';
        let min = if i == 0 { 1 } else { 0 };
        let mut alts = Vec::new();
        let rest = Rx::concat(vec![rep(digits(0, 9), (n - i - 1) as u32, Some((n - i - 1) as u32)), frac_any()]);
        if less_ok && b > min {
            alts.push(Rx::concat(vec![digits(min, b - 1), rest.clone()]));
        }
        if !less_ok && b < 9 {
            alts.push(Rx::concat(vec![digits(b + 1, 9), rest]));
        }
        alts.push(Rx::concat(vec![digits(b, b), t]));
        t = Rx::alt(alts);
    }
    t
}

/// Unsigned restricted forms whose value `op` the non-negative bound `b`. (The expression [`interval`] was built from, kept for tests.)
#[cfg(test)]
fn mag_cmp(b: &Dec, op: Op) -> Rx {
    let bi = b.int.as_bytes();
    let bf = b.frac.as_bytes();
    let n = bi.len();
    let mut alts = Vec::new();
    // U1
    match op {
        Op::Le | Op::Lt => {
            if n == 0 {
                alts.push(Rx::concat(vec![lit("0"), frac_cmp(bf, op)]));
            } else {
                alts.push(Rx::concat(vec![lit("0"), frac_any()]));
                if n >= 2 {
                    alts.push(Rx::concat(vec![digits(1, 9), rep(digits(0, 9), 0, Some(n as u32 - 2)), frac_any()]));
                }
                alts.push(seq_cmp(bi, bf, op));
            }
        }
        Op::Ge | Op::Gt => {
            if n == 0 {
                alts.push(Rx::concat(vec![lit("0"), frac_cmp(bf, op)]));
                alts.push(Rx::concat(vec![digits(1, 9), any_digits(), frac_any()]));
            } else {
                alts.push(seq_cmp(bi, bf, op));
                alts.push(Rx::concat(vec![digits(1, 9), rep(digits(0, 9), n as u32, None), frac_any()]));
            }
        }
    }
    // U2
    let u2_any = Rx::concat(vec![digits(1, 9), frac_any()]);
    if b.is_zero() {
        if matches!(op, Op::Ge | Op::Gt) {
            alts.push(Rx::concat(vec![u2_any, exp_any()]));
        }
    } else {
        let (e, md) = b.sci();
        let mb = md.as_bytes();
        let mant = seq_cmp(&mb[..1], &mb[1..], op);
        match op {
            Op::Le | Op::Lt => alts.push(Rx::concat(vec![u2_any, exp_in(None, Some(e - 1))])),
            Op::Ge | Op::Gt => alts.push(Rx::concat(vec![u2_any, exp_in(Some(e + 1), None)])),
        }
        alts.push(Rx::concat(vec![mant, exp_in(Some(e), Some(e))]));
    }
    // U3
    let zero_ok = match op {
        Op::Le => true,
        Op::Lt => !b.is_zero(),
        Op::Ge => b.is_zero(),
        Op::Gt => false,
    };
    if zero_ok {
        alts.push(zero_exp());
    }
    Rx::alt(alts)
}

/// Signed restricted forms in the interval, as an automaton (not minimized: callers
/// intersect it with the number forms, which minimizes); `None` when an automaton of the
/// bounds would be too large.
pub fn interval(lo: &Bound, hi: &Bound) -> Option<CDfa> {
    // The magnitudes ≥ 0 in `[lo, hi]` as comparisons with bounds; `None` when there are none.
    let part = |lo: &Bound, hi: &Bound| -> Option<Vec<(Dec, Op)>> {
        let mut cons = Vec::new();
        match lo {
            Bound::Incl(d) if !d.neg => cons.push((d.clone(), Op::Ge)),
            Bound::Excl(d) if !d.neg => cons.push((d.clone(), Op::Gt)),
            _ => {}
        }
        match hi {
            Bound::Incl(d) if d.neg => return None,
            Bound::Excl(d) if d.neg || d.is_zero() => return None,
            Bound::Incl(d) => cons.push((d.clone(), Op::Le)),
            Bound::Excl(d) => cons.push((d.clone(), Op::Lt)),
            Bound::None => {}
        }
        Some(cons)
    };
    // (Built directly, see `number_automaton`; `None` when one would be too large.)
    let magnitudes = |cons: Vec<(Dec, Op)>| -> Option<CDfa> {
        let cons: Vec<(&Dec, Op)> = cons.iter().map(|(d, op)| (d, *op)).collect();
        crate::number_automaton::magnitudes(&cons, 20_000)
    };
    let neg_bound = |b: &Bound| match b {
        Bound::None => Bound::None,
        Bound::Incl(d) => Bound::Incl(d.negate()),
        Bound::Excl(d) => Bound::Excl(d.negate()),
    };
    // non-negative part: magnitude in [max(lo, 0), hi]
    let pos = match part(lo, hi) {
        Some(c) => Some(magnitudes(c)?),
        None => None,
    };
    // negative numbers "-m": value -m in [lo, hi] ⟺ m in [-hi, -lo]
    let neg = match part(&neg_bound(hi), &neg_bound(lo)) {
        Some(c) => Some(magnitudes(c)?),
        None => None,
    };
    signed(pos, neg)
}

/// The intersection of `parts` (every magnitude form when there are none), computed by
/// automata from expressions: how [`interval`] built its parts before
/// [`crate::number_automaton`] (kept to check that against).
#[cfg(test)]
fn conj(parts: Vec<Rx>) -> Option<CDfa> {
    let Some((first, rest)) = parts.split_first() else {
        return CDfa::from_rx_unminimized(&mag_forms(), 20_000).ok();
    };
    let mut d = CDfa::from_rx_unminimized(first, 20_000).ok()?;
    for p in rest {
        d = d.product(&CDfa::from_rx_unminimized(p, 20_000).ok()?, true, 200_000).ok()?;
    }
    Some(d)
}

/// `pos ∪ "-"·neg` (either may be missing). Magnitude forms never start with `-`, so the
/// union is the two automata side by side under a start state with `pos`'s first edges plus
/// `-` into `neg`; a general union (by product) only if that ever did not hold.
fn signed(pos: Option<CDfa>, neg: Option<CDfa>) -> Option<CDfa> {
    let minus = '-' as u32;
    let Some(neg) = neg else { return Some(pos.unwrap_or_else(CDfa::empty)) };
    let pos = pos.unwrap_or_else(CDfa::empty);
    let mut first = pos.trans[pos.start as usize].clone();
    let at = first.partition_point(|e| e.1 < minus);
    if first.get(at).is_some_and(|e| e.0 <= minus) {
        let m = neg.len() as u32;
        let (neg_start, mut trans, mut accept) = (neg.start, neg.trans, neg.accept);
        trans.push(vec![(minus, minus, neg_start)]);
        accept.push(false);
        return pos.product(&CDfa { trans, accept, start: m }, false, 200_000).ok();
    }
    let n = pos.len() as u32;
    first.insert(at, (minus, minus, neg.start + n));
    let start_accepts = pos.accept[pos.start as usize];
    let (mut trans, mut accept) = (pos.trans, pos.accept);
    trans.extend(neg.trans.into_iter().map(|row| row.into_iter().map(|(a, b, t)| (a, b, t + n)).collect::<Vec<_>>()));
    accept.extend(neg.accept);
    trans.push(first);
    accept.push(start_accepts);
    Some(CDfa { start: trans.len() as u32 - 1, trans, accept })
}

/// Exactly the value `v`, in every restricted form.
pub fn value_rx(v: &Dec) -> Rx {
    let sign = if v.neg { lit("-") } else { opt(lit("-")) };
    let zero_frac = opt(Rx::concat(vec![lit("."), rep(lit("0"), 1, None)]));
    if v.is_zero() {
        return Rx::concat(vec![sign, Rx::alt(vec![Rx::concat(vec![lit("0"), zero_frac]), zero_exp()])]);
    }
    let sign = if v.neg { lit("-") } else { Rx::Empty };
    let int = if v.int.is_empty() { "0".to_string() } else { v.int.clone() };
    let u1 = if v.frac.is_empty() {
        Rx::concat(vec![lit(&int), zero_frac])
    } else {
        Rx::concat(vec![lit(&int), lit("."), lit(&v.frac), star(lit("0"))])
    };
    let (e, md) = v.sci();
    let mant = if md.len() == 1 {
        Rx::concat(vec![lit(&md), opt(Rx::concat(vec![lit("."), rep(lit("0"), 1, None)]))])
    } else {
        Rx::concat(vec![lit(&md[..1]), lit("."), lit(&md[1..]), star(lit("0"))])
    };
    let u2 = Rx::concat(vec![mant, exp_in(Some(e), Some(e))]);
    Rx::concat(vec![sign, Rx::alt(vec![u1, u2])])
}

/// Exponent forms that are multiples of `d` when `d = p / 10^q` with `p` a product of 2s and
/// 5s: a normalized mantissa with at most 16 fraction digits and an exponent large enough that
/// the value is a multiple whatever the digits (plus zero with any exponent).
pub fn multiple_of_exp_rx(d: &Dec) -> Option<Rx> {
    let digits_s = format!("{}{}", d.int, d.frac);
    let mut p: u128 = digits_s.trim_start_matches('0').parse().ok()?;
    let (mut a, mut b) = (0u32, 0u32);
    while p % 2 == 0 {
        p /= 2;
        a += 1;
    }
    while p % 5 == 0 {
        p /= 5;
        b += 1;
    }
    if p != 1 {
        return None;
    }
    let j = a.max(b) as i64;
    let t = 16 + j - d.frac.len() as i64;
    let t = t.max(16) as u64;
    Some(Rx::concat(vec![
        opt(lit("-")),
        Rx::alt(vec![
            Rx::concat(vec![digits(1, 9), opt(Rx::concat(vec![lit("."), rep(digits(0, 9), 1, Some(16))])), Rx::Bytes(vec![(b'E', b'E'), (b'e', b'e')]), opt(lit("+")), star(lit("0")), uint_in(t, None)]),
            zero_exp(),
        ]),
    ]))
}

/// DFA for restricted forms without exponent whose value is a multiple of `d` (> 0).
pub fn multiple_of_dfa(d: &Dec, limit: usize) -> Result<CDfa, TooBig> {
    let digits_s = format!("{}{}", d.int, d.frac);
    let p_str = digits_s.trim_start_matches('0');
    let p: u64 = p_str.parse().map_err(|_| TooBig)?;
    let q = d.frac.len();
    if p == 0 || (p as usize).saturating_mul(q + 4) > limit {
        return Err(TooBig);
    }
    let p = p as usize;
    // state ids
    // 0 start, 1 after '-', 2 INT0 ("0"), then INT(r): 3 + r, DOT(r): 3+p + r,
    // FRAC(r, j) j=1..q: 3+2p + (j-1)*p + r, FRACZ(r): 3 + 2p + q*p + r
    let int_s = |r: usize| (3 + r) as u32;
    let dot_s = |r: usize| (3 + p + r) as u32;
    let frac_s = |r: usize, j: usize| (3 + 2 * p + (j - 1) * p + r) as u32;
    let fz_s = |r: usize| (3 + 2 * p + q * p + r) as u32;
    let n = 3 + 2 * p + q * p + p;
    let mut trans: Vec<Vec<(u32, u32, u32)>> = vec![Vec::new(); n];
    let mut accept = vec![false; n];
    let pow10 = |k: usize| -> usize {
        let mut x = 1 % p;
        for _ in 0..k {
            x = x * 10 % p;
        }
        x
    };
    let c = |ch: char| ch as u32;
    let int_digits = |r: usize| -> Vec<(u32, u32, u32)> { (0..10).map(|dg| (c('0') + dg as u32, c('0') + dg as u32, int_s((r * 10 + dg) % p))).collect() };
    for s in [0u32, 1] {
        if s == 0 {
            trans[0].push((c('-'), c('-'), 1));
        }
        trans[s as usize].push((c('0'), c('0'), 2));
        for dg in 1..10usize {
            trans[s as usize].push((c('0') + dg as u32, c('0') + dg as u32, int_s(dg % p)));
        }
    }
    trans[0].sort_unstable();
    // "0" behaves as INT(0) but takes no more digits
    accept[2] = true; // 0 is a multiple of anything
    trans[2].push((c('.'), c('.'), dot_s(0)));
    let m10q = pow10(q);
    for r in 0..p {
        let mut row = int_digits(r);
        row.insert(0, (c('.'), c('.'), dot_s(r)));
        trans[int_s(r) as usize] = row;
        accept[int_s(r) as usize] = r * m10q % p == 0;
        // after '.', at least one digit
        let first = |r: usize| -> Vec<(u32, u32, u32)> {
            if q == 0 {
                vec![(c('0'), c('0'), fz_s(r))]
            } else {
                (0..10).map(|dg| (c('0') + dg as u32, c('0') + dg as u32, frac_s((r * 10 + dg) % p, 1))).collect()
            }
        };
        trans[dot_s(r) as usize] = first(r);
        for j in 1..=q {
            let s = frac_s(r, j) as usize;
            accept[s] = r * pow10(q - j) % p == 0;
            trans[s] = if j < q {
                (0..10).map(|dg| (c('0') + dg as u32, c('0') + dg as u32, frac_s((r * 10 + dg) % p, j + 1))).collect()
            } else {
                vec![(c('0'), c('0'), fz_s(r))]
            };
        }
        accept[fz_s(r) as usize] = r == 0;
        trans[fz_s(r) as usize] = vec![(c('0'), c('0'), fz_s(r))];
    }
    for row in trans.iter_mut() {
        row.sort_unstable();
    }
    Ok(CDfa { trans, accept, start: 0 }.minimize())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Dec {
        Dec::parse(s).unwrap()
    }

    fn dfa(rx: &Rx) -> CDfa {
        CDfa::from_rx(rx, 100_000).unwrap()
    }

    #[test]
    fn parse() {
        assert_eq!(d("1.50").to_string(), "1.5");
        assert_eq!(d("-0.0").to_string(), "0");
        assert_eq!(d("1e3").to_string(), "1000");
        assert_eq!(d("1.5e-3").to_string(), "0.0015");
        assert!(d("1.0") == d("1"));
        assert!(d("-2") < d("-1.5"));
    }

    #[test]
    fn intervals() {
        let cases: &[(&str, Bound, Bound, &[&str], &[&str])] = &[
            ("[0,10]", Bound::Incl(d("0")), Bound::Incl(d("10")), &["0", "10", "10.0", "9.99", "-0", "1e1", "0e5", "0.5", "5E0"], &["10.01", "-1", "11", "1e2", "-0.1", "2e1"]),
            ("(1.5,)", Bound::Excl(d("1.5")), Bound::None, &["1.51", "2", "100", "1.5000001", "2e0", "1e10"], &["1.5", "1.50", "1", "-3", "1.4999", "1.5e0"]),
            ("(,-2.25]", Bound::None, Bound::Incl(d("-2.25")), &["-2.25", "-3", "-2.250", "-1e5", "-2.3"], &["-2.24", "0", "2.25", "-2.2"]),
            ("[0.001,0.01)", Bound::Incl(d("0.001")), Bound::Excl(d("0.01")), &["0.001", "0.005", "1e-3", "9.9e-3"], &["0.01", "0.0009", "1e-2", "0"]),
            // both signs: the negative part joins the positive one under a start state
            ("[-1.5,2]", Bound::Incl(d("-1.5")), Bound::Incl(d("2")), &["-1.5", "-1", "0", "-0", "2", "1.99", "2e0", "-1.5e0", "-0.0"], &["-1.51", "2.01", "-2", "3", "--1", "-", ""]),
            ("(-3,0)", Bound::Excl(d("-3")), Bound::Excl(d("0")), &["-2.9", "-0.1", "-1e0", "-2.99999"], &["0", "-0", "-3", "1", "-3.0", "0.5"]),
            ("(,)", Bound::None, Bound::None, &["0", "-1", "1e5", "-2.5"], &["", "-", "01"]),
        ];
        for (name, lo, hi, yes, no) in cases {
            let a = interval(lo, hi).unwrap();
            for s in *yes {
                assert!(a.accepts(s), "{name} should accept {s}");
            }
            for s in *no {
                assert!(!a.accepts(s), "{name} should reject {s}");
            }
        }
    }

    /// Every interval's forms are restricted number forms (the schema compiler relies on it to
    /// skip intersecting a plain number's bounds with them): nothing outside
    /// `restricted_number`, over random bounds of both signs, open and closed, with fractions.
    #[test]
    fn intervals_are_within_the_restricted_forms() {
        let forms = CDfa::from_rx(&restricted_number(), 20_000).unwrap();
        let mut rnd = corral_core::testutil::xorshift(0x1e7e_1e55_0f_f0c5);
        let mut bound = || -> Bound {
            let ip = ["0", "1", "2", "9", "10", "256", "1000"][rnd(7) as usize];
            let fp = ["", "5", "25", "001", "999"][rnd(5) as usize];
            let sign = if rnd(3) == 0 { "-" } else { "" };
            let text = if fp.is_empty() { format!("{sign}{ip}") } else { format!("{sign}{ip}.{fp}") };
            match rnd(3) {
                0 => Bound::None,
                1 => Bound::Incl(d(&text)),
                _ => Bound::Excl(d(&text)),
            }
        };
        let mut checked = 0;
        for _ in 0..120 {
            let (lo, hi) = (bound(), bound());
            let Some(id) = interval(&lo, &hi) else { continue };
            assert!(id.minus(&forms, 200_000).unwrap().is_empty(), "{lo:?}..{hi:?}");
            checked += 1;
        }
        assert!(checked > 100, "{checked}");
    }

    /// The magnitude automata built directly ([`crate::number_automaton`]) have exactly the
    /// language of the expressions they replaced (each form, intersected by product), over
    /// random bounds — integers, fractions, zero, long and tiny values (exponents of both
    /// signs and several digits) — alone and in pairs, with every comparison.
    #[test]
    fn direct_magnitude_automata_match_the_expressions() {
        let mut rnd = corral_core::testutil::xorshift(0x0dd_ba11_5eed);
        let dec = |rnd: &mut dyn FnMut(u64) -> u64| -> Dec {
            let text = match rnd(6) {
                0 => ["0", "1", "9", "10", "0.5", "1.25", "0.01", "100", "65535", "90"][rnd(10) as usize].to_string(),
                1 => format!("{}", rnd(1000)),
                2 => format!("{}.{}", rnd(30), rnd(1000)),
                3 => format!("0.{}{}", "0".repeat(rnd(12) as usize), 1 + rnd(99)),
                4 => format!("{}{}", 1 + rnd(9), "0".repeat(rnd(14) as usize)),
                _ => format!("{}.{}e{}", 1 + rnd(9), rnd(100), rnd(25) as i64 - 12),
            };
            d(&text)
        };
        let ops = [Op::Le, Op::Lt, Op::Ge, Op::Gt];
        let rx_of = |b: &Dec, op: Op| mag_cmp(b, op);
        let mut checked = 0;
        for case in 0..400 {
            let n = rnd(3) as usize;
            let bounds: Vec<(Dec, Op)> = (0..n).map(|_| (dec(&mut rnd), ops[rnd(4) as usize])).collect();
            let refs: Vec<(&Dec, Op)> = bounds.iter().map(|(b, op)| (b, *op)).collect();
            let direct = crate::number_automaton::magnitudes(&refs, 20_000).expect("within the limit");
            let Some(old) = conj(bounds.iter().map(|(b, op)| rx_of(b, *op)).collect()) else { continue };
            let same = direct.minus(&old, 200_000).unwrap().is_empty() && old.minus(&direct, 200_000).unwrap().is_empty();
            if !same {
                let a = direct.minus(&old, 200_000).unwrap().minimize();
                let b = old.minus(&direct, 200_000).unwrap().minimize();
                // (A shortest string of each difference.)
                let ex = |x: &CDfa| {
                    let mut seen = vec![None::<String>; x.len()];
                    seen[x.start as usize] = Some(String::new());
                    let mut queue = std::collections::VecDeque::from([x.start]);
                    while let Some(q) = queue.pop_front() {
                        let s = seen[q as usize].clone().unwrap();
                        if x.accept[q as usize] {
                            return Some(s);
                        }
                        for &(c, _, t) in &x.trans[q as usize] {
                            if seen[t as usize].is_none() {
                                seen[t as usize] = Some(format!("{s}{}", char::from_u32(c).unwrap()));
                                queue.push_back(t);
                            }
                        }
                    }
                    None
                };
                panic!("case {case}: {bounds:?}: only direct {:?}, only expressions {:?}", ex(&a), ex(&b));
            }
            checked += 1;
        }
        assert!(checked > 350, "{checked}");
    }

    /// `signed` side by side, and by product when `pos` may start with `-` itself.
    #[test]
    fn signed_union() {
        let rx = |s: &str| crate::strings::ecma_full(s).unwrap();
        for pos in ["b|d+", "-a|b"] {
            let u = signed(Some(dfa(&rx(pos))), Some(dfa(&rx("c|-e")))).unwrap();
            for (s, ok) in [("b", true), ("-c", true), ("--e", true), ("c", false), ("-", false), ("", false), ("-a", pos.starts_with('-')), ("dd", pos.starts_with('b'))] {
                assert_eq!(u.accepts(s), ok, "{pos}: {s}");
            }
        }
        assert!(signed(None, Some(dfa(&rx("1")))).unwrap().accepts("-1"));
        assert!(signed(None, None).unwrap().is_empty());
    }

    #[test]
    fn values_and_multiples() {
        let v = dfa(&value_rx(&d("1.5")));
        for s in ["1.5", "1.50", "15e-1", "1.5e0", "1.5E+0"] {
            assert_eq!(v.accepts(s), s != "15e-1", "{s}");
        }
        let m = multiple_of_dfa(&d("0.5"), 10000).unwrap();
        for (s, ok) in [("1", true), ("1.5", true), ("1.25", false), ("-2.50", true), ("0", true), ("0.0", true), ("3.0001", false)] {
            assert_eq!(m.accepts(s), ok, "{s}");
        }
        let m = multiple_of_dfa(&d("7"), 10000).unwrap();
        for (s, ok) in [("14", true), ("15", false), ("-21.0", true), ("0", true)] {
            assert_eq!(m.accepts(s), ok, "{s}");
        }
        let i = dfa(&any_integer());
        for (s, ok) in [("1", true), ("1.0", true), ("1.5", false), ("1e16", true), ("1.2345678910111214e52", true), ("1e2", false), ("0e1", true)] {
            assert_eq!(i.accepts(s), ok, "{s}");
        }
    }
}
