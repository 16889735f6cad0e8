//! Terminals that are already deterministic, built as byte automata without subset
//! construction: literals, byte classes, embedded [`ByteAutomaton`]s, and concatenations and
//! repetitions of them where each join stays deterministic. JSON Schema keys (`"` + one encoded automaton
//! per character + `"`) and constrained string values (`"` + encoded automaton + `"`) are
//! all of this shape; subset construction spent most of a schema compile re-discovering
//! that each of their state sets is a single state.
//!
//! A join `A · B` is deterministic when, at every accepting state of `A`, the bytes leaving
//! it and the bytes leaving `B`'s start are disjoint: that state then takes both rows (and
//! accepts when `B` accepts the empty string). Anything else returns `None` and the caller
//! falls back to subset construction.
//!
//! An alternation of such parts (a string enum, a set of keys) is their union, built over
//! sets of one state per alternative: the alternatives are deterministic already, so a set
//! only grows while they share a prefix.
//!
//! [`ByteAutomaton`]: crate::frontend::byte_automaton::ByteAutomaton

use crate::frontend::byte_automaton::{ByteAutomaton, FlatTables};
use crate::frontend::rx::Rx;

/// One byte range and its target: `(lo, hi, target)`, inclusive.
type Edge = (u8, u8, u32);

/// A deterministic byte automaton under construction: its states' rows in one edge buffer
/// ([`FlatTables`]: building costs no allocation per state; a row that changes is written
/// again at the end and the old span is left unused), and its start state.
#[derive(Debug, Default)]
pub(crate) struct Rows {
    /// States, rows and acceptance.
    pub flat: FlatTables,
    /// Start state.
    pub start: u32,
}

impl std::ops::Deref for Rows {
    type Target = FlatTables;
    fn deref(&self) -> &FlatTables {
        &self.flat
    }
}

impl std::ops::DerefMut for Rows {
    fn deref_mut(&mut self) -> &mut FlatTables {
        &mut self.flat
    }
}

impl Rows {
    fn with_capacity(states: usize, edges: usize) -> Rows {
        Rows { flat: FlatTables::with_capacity(states, edges), start: 0 }
    }

    /// Adds a state with this row.
    fn add(&mut self, row: impl IntoIterator<Item = Edge>, accept: bool) -> u32 {
        self.flat.push_state(row, accept)
    }

    /// Every state's edges, state by state.
    pub(crate) fn all_edges(&self) -> impl Iterator<Item = &Edge> + '_ {
        (0..self.len()).flat_map(move |s| self.row(s).iter())
    }

    /// Merges `extra` (sorted, disjoint) into state `s`'s row; false when they share a byte.
    fn merge_into(&mut self, s: usize, extra: &[Edge]) -> bool {
        if extra.is_empty() {
            return true;
        }
        let (at, n) = self.span[s];
        let new_at = self.edges.len();
        let (mut i, mut j) = (at as usize, 0);
        let end = (at + n) as usize;
        while i < end || j < extra.len() {
            let take_a = j == extra.len() || (i < end && self.edges[i].0 < extra[j].0);
            let x = if take_a {
                i += 1;
                self.edges[i - 1]
            } else {
                j += 1;
                extra[j - 1]
            };
            if self.edges.len() > new_at && x.0 <= self.edges[self.edges.len() - 1].1 {
                self.edges.truncate(new_at);
                return false;
            }
            self.edges.push(x);
        }
        self.span[s] = (new_at as u32, (self.edges.len() - new_at) as u32);
        true
    }
}

/// The automaton of `rx` when it is a deterministic concatenation of literals, ASCII or byte
/// classes and embedded automata, with at most `max_states` states; `None` otherwise.
pub(crate) fn deterministic_rows(rx: &Rx, max_states: usize) -> Option<Rows> {
    if let Rx::Alt(xs) = rx {
        // The union follows only what is reachable, so the alternatives need no trimming.
        let alts: Vec<Rows> = xs
            .iter()
            .map(|x| match x {
                Rx::Alt(_) => deterministic_rows(x, max_states),
                x => chain_rows(parts(x), max_states),
            })
            .collect::<Option<_>>()?;
        return union(&alts, max_states);
    }
    chain_rows(parts(rx), max_states).map(reachable)
}

/// The parts of `x` as a concatenation (itself alone when it is not one).
fn parts(x: &Rx) -> &[Rx] {
    match x {
        Rx::Concat(xs) => xs,
        other => std::slice::from_ref(other),
    }
}

/// The rows of the concatenation `parts` as joined (each part's unentered start state left
/// in), or `None` as [`deterministic_rows`].
fn chain_rows(parts: &[Rx], max_states: usize) -> Option<Rows> {
    let (states, edges) = parts.iter().fold((1, 0), |(s, e), p| {
        let (ps, pe) = part_estimate(p);
        (s + ps, e + pe)
    });
    let mut out = Rows::with_capacity(states.min(max_states + 1), edges.min(4 * max_states));
    out.start = out.add([], true); // the empty string so far
    // The accepting states so far, kept as the parts are joined (every join continues from
    // them; scanning all states for them made a long chain quadratic).
    let mut acc = vec![out.start as usize];
    let mut scratch = Vec::new();
    for part in parts {
        if !append(&mut out, part, &mut acc, &mut scratch, max_states) {
            return None;
        }
    }
    Some(out)
}

/// What lowering needs of a terminal whose automaton is built later ([`deferrable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Deferred {
    /// Whether the expression matches the empty string.
    pub nullable: bool,
    /// Whether it matches no non-empty string (the automaton's language is empty).
    pub empty: bool,
    /// Most states the automaton can have (its dead state included).
    pub max_states: usize,
}

/// Most states of a repetition in a deferred automaton. A larger one — a long
/// length-bounded string, thousands of states — is built with the compile: built instead by
/// the fill that first meets it, it took 1–2 ms of that fill (o9892's `maxLength: 255` and
/// 256-character chunks: fills of 2–8 ms in `fill_profile`, 2.1 ms in the benchmark, against
/// the 2 ms bound on every fill), while a short one (an id of a few characters, a `[0-9a-f]{8}`
/// group) costs tens of microseconds wherever it is built. (Session 24 raised the bound to
/// 4,096 states, a `maxLength` up to 195: o21460's first compile 1.02 → 0.31 ms in
/// `compile_prof`, but in the benchmark sp_412's `maxLength: 128` string, built by its 15th
/// fill, made fills of 1.4–2.1 ms, and three runs had more multi-millisecond compile spikes
/// than any run before; back to 256. Since session 28 the common shape, a whole string of
/// one bounded repetition, is written from a template instead, [`crate::automata::bounded_repeat`]:
/// about 50 µs for `maxLength: 160`, so building it with the compile costs little.)
const MAX_DEFERRED_REPEAT_STATES: usize = 256;

/// One concatenation of literals and embedded automata, summarized without building it.
struct Chain {
    /// States `deterministic_rows` gives it at most (before trimming), dead state excluded.
    size: usize,
    nullable: bool,
    /// Whether some string (maybe empty) is in the language.
    has_any: bool,
    /// Whether some non-empty string is in the language.
    has_nonempty: bool,
    /// Every part a `"` or the encoded forms of one code point: a JSON string literal.
    json_literal: bool,
}

/// Summarizes `x` as a chain when it is a concatenation of literals, embedded automata and
/// repetitions of one non-nullable embedded automaton (of at most
/// [`MAX_DEFERRED_REPEAT_STATES`] states), whose every join is deterministic; `None`
/// otherwise. The joins are checked on byte
/// summaries ([`crate::frontend::byte_automaton::Summary`]): the bytes leaving the accepting states
/// built so far must miss the bytes leaving the next part's start, exactly the condition
/// under which [`join`] merges the start's row into those states without a conflict.
fn chain(x: &Rx) -> Option<Chain> {
    use crate::runtime::byteset::ByteSet;
    let mut c = Chain { size: 1, nullable: true, has_any: true, has_nonempty: false, json_literal: true };
    // Bytes leaving the accepting states so far (the initial state accepts, with no edges).
    let mut accept_out = ByteSet::default();
    for part in parts(x) {
        match part {
            Rx::Literal(b) if b.is_empty() => c.size += 1, // `join` adds its one state
            Rx::Literal(b) => {
                if accept_out.contains(b[0]) {
                    return None;
                }
                accept_out = ByteSet::default(); // the literal's end has no edges
                c.size += b.len() + 1;
                c.nullable = false;
                c.has_nonempty = true;
                c.json_literal &= b.as_slice() == b"\"";
            }
            Rx::Automaton(a) if !a.is_empty() => {
                let s = a.summary();
                if accept_out.intersects(&s.start_out) {
                    return None;
                }
                let mut out = s.accept_out;
                if a.nullable() {
                    // The states accepting so far stay accepting, with the start's edges added.
                    out.union_with(&accept_out);
                    out.union_with(&s.start_out);
                }
                accept_out = out;
                c.size += a.len_bound();
                c.has_nonempty |= s.has_nonempty;
                c.has_any &= a.nullable() || s.has_nonempty;
                c.nullable &= a.nullable();
                c.json_literal &= a.is_single_char() || a.is_json_literal();
            }
            Rx::Repeat { inner, min, max } => {
                // A length-bounded string's body: copies of one encoded character, joined as
                // `append` joins them (`x{2,4}` = `x x (x x?)?`, `x{2,}` = `x x x*`).
                let Rx::Automaton(a) = &**inner else { return None };
                if a.is_empty() || a.nullable() || max.is_some_and(|m| m < *min) {
                    return None;
                }
                let s = a.summary();
                if !s.has_nonempty {
                    return None;
                }
                let (once, optional, star) = (*min as usize, max.map_or(0, |m| (m - min) as usize), max.is_none());
                if once + optional == 0 && !star {
                    // `x{0}`: nothing joined, but `append` still weighs one copy against the
                    // limit, so the bound counts it.
                    c.size = c.size.saturating_add(a.len_bound());
                    continue;
                }
                if (once + optional + star as usize).saturating_mul(a.len_bound()) > MAX_DEFERRED_REPEAT_STATES {
                    return None; // built with the compile (see the constant)
                }
                // The first copy continues from the accepting states so far, each later one
                // from the copy before's.
                if accept_out.intersects(&s.start_out) || ((once + optional > 1 || star) && s.accept_out.intersects(&s.start_out)) {
                    return None;
                }
                if once == 0 {
                    // Every copy may be skipped: the states accepting so far stay accepting.
                    accept_out.union_with(&s.start_out);
                    accept_out.union_with(&s.accept_out);
                } else {
                    accept_out = s.accept_out;
                    if optional > 0 || star {
                        accept_out.union_with(&s.start_out);
                    }
                }
                c.size = c.size.saturating_add((once + optional + star as usize).saturating_mul(a.len_bound()));
                c.nullable &= once == 0;
                c.has_nonempty = true;
                c.json_literal = false;
            }
            _ => return None,
        }
    }
    c.has_nonempty &= c.has_any;
    Some(c)
}

/// Whether the automaton of `rx` can be built later with no chance of failing, and what
/// lowering needs of it now; `None` when it must be built at once. Deferred are
/// deterministic concatenations of literals, embedded automata and short repetitions of one
/// embedded automaton (a JSON key, a string with a pattern, a short length-bounded string:
/// [`chain`]), which `deterministic_rows` builds with exactly the parts' states, and unions
/// of JSON string literals (a string enum). A union's states are sets of one state per
/// alternative; for literals spelled in the same encoding (every part a `"`, one code
/// point's encoded forms, [`crate::frontend::byte_automaton::ByteAutomaton::single_char`], or a whole
/// literal made of those, [`crate::frontend::byte_automaton::ByteAutomaton::json_literal`])
/// the strings reaching one alternative's state all decode to the same prefix (up to the
/// case of an escape's hex digits), so every other alternative is in one state after any of
/// them: a set is determined by its first member, and there are at most as many sets as
/// states of all the alternatives. Both bounds must be within `max_states`.
pub(crate) fn deferrable(rx: &Rx, max_states: usize) -> Option<Deferred> {
    match rx {
        Rx::Alt(xs) => {
            let mut d = Deferred { nullable: false, empty: true, max_states: 2 };
            for x in xs {
                let c = chain(x)?;
                if !c.json_literal || c.nullable {
                    return None;
                }
                d.max_states = d.max_states.saturating_add(c.size);
                d.empty &= !c.has_nonempty;
            }
            (d.max_states <= max_states).then_some(d)
        }
        x => {
            let c = chain(x)?;
            let d = Deferred { nullable: c.nullable, empty: !c.has_nonempty, max_states: c.size + 1 };
            (d.max_states <= max_states).then_some(d)
        }
    }
}

/// The union of deterministic automata (each with a start state no edge enters): its states
/// are sets of `(alternative, state)`, at most one per alternative, numbered in the order
/// they are met; `None` past `max_states`.
fn union(alts: &[Rows], max_states: usize) -> Option<Rows> {
    const NONE: u32 = u32::MAX;
    let mut out = Rows::default();
    let start: Vec<(u32, u32)> = alts.iter().enumerate().map(|(i, a)| (i as u32, a.start)).collect();
    // Sets of several states by value; one-state sets — most of them, once the alternatives'
    // prefixes part — by alternative and state, with no hashing. Every set's members are
    // kept back to back in `members` (`span` per set), so a new set allocates nothing.
    let mut ids: rustc_hash::FxHashMap<Vec<(u32, u32)>, u32> = rustc_hash::FxHashMap::default();
    let mut single: Vec<Vec<u32>> = alts.iter().map(|a| vec![NONE; a.len()]).collect();
    let mut members: Vec<(u32, u32)> = Vec::new();
    let mut span: Vec<(u32, u32)> = Vec::new();
    let mut id_of = |target: &[(u32, u32)], members: &mut Vec<(u32, u32)>, span: &mut Vec<(u32, u32)>| -> u32 {
        let new = |members: &mut Vec<(u32, u32)>, span: &mut Vec<(u32, u32)>| {
            span.push((members.len() as u32, target.len() as u32));
            members.extend_from_slice(target);
            (span.len() - 1) as u32
        };
        if let [(i, t)] = *target {
            let slot = &mut single[i as usize][t as usize];
            if *slot == NONE {
                *slot = new(members, span);
            }
            return *slot;
        }
        if let Some(&id) = ids.get(target) {
            return id;
        }
        let id = new(members, span);
        ids.insert(target.to_vec(), id);
        id
    };
    id_of(&start, &mut members, &mut span);
    let mut cuts: Vec<u16> = Vec::new();
    let mut row: Vec<Edge> = Vec::new();
    let mut set: Vec<(u32, u32)> = Vec::new();
    let mut target: Vec<(u32, u32)> = Vec::new();
    let mut k = 0;
    while k < span.len() {
        let (at, n) = span[k];
        set.clear();
        set.extend_from_slice(&members[at as usize..(at + n) as usize]);
        let accept = set.iter().any(|&(i, s)| alts[i as usize].accept[s as usize]);
        row.clear();
        if let [(i, s)] = set[..] {
            // One alternative left: its row, renumbered.
            for &(lo, hi, t) in alts[i as usize].row(s as usize) {
                row.push((lo, hi, id_of(&[(i, t)], &mut members, &mut span)));
            }
        } else {
            // Elementary byte intervals: between consecutive range boundaries of the members.
            cuts.clear();
            for &(i, s) in &set {
                for &(lo, hi, _) in alts[i as usize].row(s as usize) {
                    cuts.push(lo as u16);
                    cuts.push(hi as u16 + 1);
                }
            }
            cuts.sort_unstable();
            cuts.dedup();
            for w in cuts.windows(2) {
                let (lo, hi) = (w[0] as u8, (w[1] - 1) as u8);
                target.clear();
                target.extend(set.iter().filter_map(|&(i, s)| alts[i as usize].row(s as usize).iter().find(|r| r.0 <= lo && lo <= r.1).map(|r| (i, r.2))));
                if target.is_empty() {
                    continue;
                }
                let id = id_of(&target, &mut members, &mut span);
                match row.last_mut() {
                    Some(last) if last.2 == id && last.1 as u16 + 1 == lo as u16 => last.1 = hi,
                    _ => row.push((lo, hi, id)),
                }
            }
        }
        if span.len() > max_states {
            return None;
        }
        out.add(row.iter().copied(), accept);
        k += 1;
    }
    Some(out)
}

/// Only the states reachable from the start (a join leaves each part's own start state
/// behind when nothing else enters it), numbered in breadth-first order.
fn reachable(r: Rows) -> Rows {
    let mut id = vec![u32::MAX; r.len()];
    let mut order = vec![r.start];
    id[r.start as usize] = 0;
    let mut i = 0;
    while i < order.len() {
        for &(_, _, t) in r.row(order[i] as usize) {
            if id[t as usize] == u32::MAX {
                id[t as usize] = order.len() as u32;
                order.push(t);
            }
        }
        i += 1;
    }
    let mut out = Rows::with_capacity(order.len(), r.edges.len());
    for &s in &order {
        out.add(r.row(s as usize).iter().map(|&(lo, hi, t)| (lo, hi, id[t as usize])), r.accept[s as usize]);
    }
    out
}

/// How a part is joined: once, at most once (`x?`) or any number of times (`x*`).
#[derive(Clone, Copy, PartialEq)]
enum Times {
    Once,
    Optional,
    Star,
}

/// Appends `part` to `out` (`out · part`); false when the join is not deterministic, the part
/// is not of a supported kind or the size bound is passed. A bounded repetition of a
/// supported part is its copies joined one after another (`x{2,4}` = `x x x? x?`); an
/// unbounded one ends in `x*`, which loops each accepting state back into `x`'s start.
fn append(out: &mut Rows, part: &Rx, acc: &mut Vec<usize>, scratch: &mut Vec<Edge>, max_states: usize) -> bool {
    match part {
        Rx::Empty => true,
        Rx::Concat(xs) => xs.iter().all(|x| append(out, x, acc, scratch, max_states)),
        Rx::Repeat { inner, min, max } => {
            if let (Rx::Automaton(a), Some(max)) = (&**inner, max) {
                if let Some(ok) = stamp(out, a, *min, *max, acc, max_states) {
                    return ok;
                }
            }
            let copies = max.unwrap_or(*min).max(*min).max(1) as usize;
            if copies.saturating_mul(part_size(inner)) > max_states {
                return false;
            }
            for _ in 0..*min {
                if !join_all(out, inner, Times::Once, acc, scratch, max_states) {
                    return false;
                }
            }
            match max {
                // Nested, `(x (x (x)?)?)?`: each optional copy continues only from the
                // accepting states of the copy before it (joining every accepting state would
                // offer two copies for the same byte).
                Some(m) => {
                    let mut frontier = acc.clone();
                    for _ in *min..*m {
                        // (An optional copy leaves the states it continues from accepting.)
                        let Some((new, _)) = join(out, inner, Times::Optional, &frontier, scratch, max_states) else { return false };
                        frontier.clear();
                        frontier.extend(new.filter(|&s| out.accept[s]));
                        acc.extend_from_slice(&frontier);
                    }
                    true
                }
                None => join_all(out, inner, Times::Star, acc, scratch, max_states),
            }
        }
        _ => join_all(out, part, Times::Once, acc, scratch, max_states),
    }
}

/// Joins `a{min,max}` (a length-bounded string's body: copies of one encoded character) as
/// [`append`] would, copy by copy, but from one template: the copy's rows with targets
/// relative to the copy, the accepting states' rows already merged with the next copy's start
/// row. Each copy is then its template's rows shifted — no join, no row written twice
/// (`maxLength: 160`: 160 merges). The states are numbered as the copy-by-copy joins number
/// them (each copy's start, which no edge enters, is left behind with no edges, for
/// [`reachable`] to drop), so the automaton and every failure (a join that is not
/// deterministic, the size bound) are theirs. `None` when the shortcut does not apply (fewer
/// than three copies, a nullable `a`, a start state some edge enters): the caller joins copy
/// by copy.
fn stamp(out: &mut Rows, a: &ByteAutomaton, min: u32, max: u32, acc: &mut Vec<usize>, max_states: usize) -> Option<bool> {
    let copies = max.max(min) as usize;
    #[cfg(test)]
    if NO_STAMP.with(|n| n.get()) {
        return None;
    }
    if copies < 3 || a.is_empty() || a.nullable() {
        return None;
    }
    let (k, start) = (a.len(), a.start());
    if copies.saturating_mul(k) > max_states || out.len() + copies * k > max_states {
        return Some(false); // (`append`'s bound, and `join`'s after the last copy)
    }
    if (0..k).any(|s| a.edges(s).iter().any(|e| e.2 == start)) {
        return None;
    }
    let start_row = a.edges(start as usize);
    // Templates for a copy followed by another (accepting rows merged with the next copy's
    // start row, `k` states further on) and for the last copy.
    let (mut next, mut last) = (Rows::with_capacity(k, 2 * k), Rows::with_capacity(k, 2 * k));
    let mut merged = Vec::new();
    for s in 0..k {
        if s == start as usize {
            next.add([], false);
            last.add([], false);
            continue;
        }
        let row = a.edges(s);
        last.add(row.iter().copied(), a.accepts(s));
        if !a.accepts(s) {
            next.add(row.iter().copied(), false);
            continue;
        }
        merged.clear();
        merged.extend_from_slice(row);
        merged.extend(start_row.iter().map(|&(lo, hi, t)| (lo, hi, k as u32 + t)));
        merged.sort_unstable_by_key(|e| e.0);
        if merged.windows(2).any(|w| w[1].0 <= w[0].1) {
            return Some(false); // the second copy's join
        }
        next.add(merged.iter().copied(), true);
    }
    // The states before continue into the first copy.
    let base0 = out.len() as u32;
    let first: Vec<Edge> = start_row.iter().map(|&(lo, hi, t)| (lo, hi, base0 + t)).collect();
    for &s in acc.iter() {
        if !out.merge_into(s, &first) {
            return Some(false);
        }
        out.accept[s] = min == 0;
    }
    if min > 0 {
        acc.clear();
    }
    out.edges.reserve(copies * next.edges.len());
    out.span.reserve(copies * k);
    out.accept.reserve(copies * k);
    for i in 0..copies {
        let base = out.len() as u32;
        let t = if i + 1 == copies { &last } else { &next };
        // A copy's accepting states accept when the next copy is optional.
        let accepting = i + 1 >= min as usize;
        for s in 0..k {
            out.add(t.row(s).iter().map(|&(lo, hi, r)| (lo, hi, base + r)), t.accept[s] && accepting);
            if t.accept[s] && accepting {
                acc.push(base as usize + s);
            }
        }
    }
    Some(true)
}

#[cfg(test)]
thread_local! {
    /// Set by tests to join every repetition copy by copy ([`stamp`] off).
    static NO_STAMP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// [`join`] from every accepting state `acc`, which it updates: the part's accepting states,
/// plus the ones before when the part may be skipped.
fn join_all(out: &mut Rows, part: &Rx, times: Times, acc: &mut Vec<usize>, scratch: &mut Vec<Edge>, max_states: usize) -> bool {
    let Some((new, start_accepts)) = join(out, part, times, acc, scratch, max_states) else { return false };
    if !start_accepts {
        acc.clear();
    }
    acc.extend(new.filter(|&s| out.accept[s]));
    true
}

/// States and edges a part adds, about (for reserving room: a long repetition's copies are
/// most of a length-bounded string's automaton).
fn part_estimate(part: &Rx) -> (usize, usize) {
    match part {
        Rx::Repeat { inner, min, max: Some(max) } => match &**inner {
            Rx::Automaton(a) => {
                let copies = (*max).max(*min) as usize;
                (copies * a.len(), copies * (a.size() - a.len()))
            }
            _ => (64, 128),
        },
        Rx::Literal(b) => (b.len() + 1, b.len()),
        Rx::Automaton(a) => (a.len(), a.size() - a.len()),
        _ => (64, 128),
    }
}

/// States of a supported single part (a size estimate for repetitions; huge when unsupported,
/// so the repetition is left to subset construction).
fn part_size(part: &Rx) -> usize {
    match part {
        Rx::Literal(b) => b.len() + 1,
        Rx::Bytes(_) | Rx::Chars(_) => 2,
        Rx::Automaton(a) => a.len(),
        _ => usize::MAX / 2,
    }
}

/// Joins one literal, class or embedded automaton to `out`, `times` times, continuing from
/// the states in `from` (all before the part; `start_row` is scratch space). Returns the
/// part's states (its accepting ones are accepting in `out`) and whether the states in `from`
/// stay accepting (the part may be skipped), or `None` when the join is not deterministic or
/// not supported.
fn join(out: &mut Rows, part: &Rx, times: Times, from: &[usize], start_row: &mut Vec<Edge>, max_states: usize) -> Option<(std::ops::Range<usize>, bool)> {
    // The part as its own automaton, appended to `out` from state `base` on.
    let base = out.len() as u32;
    let start = match part {
        Rx::Literal(bytes) => {
            if out.len() + bytes.len() + 1 > max_states {
                return None;
            }
            for (i, &b) in bytes.iter().enumerate() {
                out.add([(b, b, base + i as u32 + 1)], false);
            }
            out.add([], true);
            base
        }
        Rx::Bytes(ranges) => {
            out.add(ranges.iter().map(|&(lo, hi)| (lo, hi, base + 1)), false);
            out.add([], true);
            base
        }
        Rx::Chars(ranges) if ranges.iter().all(|&(_, hi)| hi < 0x80) => {
            out.add(ranges.iter().map(|&(lo, hi)| (lo as u8, hi as u8, base + 1)), false);
            out.add([], true);
            base
        }
        Rx::Automaton(a) => {
            if a.is_empty() || out.len() + a.len() > max_states {
                return None;
            }
            for s in 0..a.len() {
                out.add(a.edges(s).iter().map(|&(lo, hi, t)| (lo, hi, base + t)), a.accepts(s));
            }
            base + a.start()
        }
        Rx::Alt(_) => {
            let u = deterministic_rows(part, max_states.saturating_sub(out.len()))?;
            for s in 0..u.len() {
                out.add(u.row(s).iter().map(|&(lo, hi, t)| (lo, hi, base + t)), u.accept[s]);
            }
            base + u.start
        }
        _ => return None,
    };
    if out.len() > max_states {
        return None;
    }
    let end = out.len();
    // (A copy: merging grows the edge buffer the row lives in.)
    start_row.clear();
    start_row.extend_from_slice(out.row(start as usize));
    let start_accepts = out.accept[start as usize] || times != Times::Once;
    if times == Times::Star {
        // Each accepting state of the part may also begin the next repetition.
        for s in base as usize..end {
            if out.accept[s] && s != start as usize && !out.merge_into(s, start_row) {
                return None;
            }
        }
    }
    for &s in from {
        if !out.merge_into(s, start_row) {
            return None;
        }
        out.accept[s] = start_accepts;
    }
    Some((base as usize..end, start_accepts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontend::byte_automaton::ByteAutomaton;
    use crate::automata::dfa::Dfa;
    use crate::runtime::limits::Limits;
    use std::sync::Arc;

    fn run(r: &Rows, input: &[u8]) -> bool {
        let mut s = r.start as usize;
        for &b in input {
            match r.row(s).iter().find(|&&(lo, hi, _)| lo <= b && b <= hi) {
                Some(&(_, _, t)) => s = t as usize,
                None => return false,
            }
        }
        r.accept[s]
    }

    #[test]
    fn joins_that_stay_deterministic() {
        // `"` + (a|b)* + `"`: the loop's accepting state also takes the closing quote.
        let body = ByteAutomaton::new(vec![vec![(b'a', b'b', 0)]], vec![true], 0);
        let rx = Rx::Concat(vec![Rx::Literal(b"\"".to_vec()), Rx::Automaton(Arc::new(body)), Rx::Literal(b"\"".to_vec())].into());
        let r = deterministic_rows(&rx, 100).unwrap();
        for (s, ok) in [("\"\"", true), ("\"abba\"", true), ("\"ab", false), ("\"a\"b", false), ("\"c\"", false), ("", false)] {
            assert_eq!(run(&r, s.as_bytes()), ok, "{s}");
        }
        // A nullable middle part: the join skips it.
        let rx = Rx::Concat(vec![Rx::Literal(b"x".to_vec()), Rx::Repeat { inner: std::sync::Arc::new(Rx::Literal(b"yz".to_vec())), min: 0, max: None }].into());
        let r = deterministic_rows(&rx, 100).unwrap();
        for (s, ok) in [("x", true), ("xyz", true), ("xyzyz", true), ("xy", false), ("xyzy", false), ("yz", false)] {
            assert_eq!(run(&r, s.as_bytes()), ok, "{s}");
        }
        let rx = Rx::Repeat { inner: std::sync::Arc::new(Rx::Bytes(vec![(b'0', b'9')])), min: 2, max: Some(4) };
        let r = deterministic_rows(&rx, 100).unwrap();
        for (s, ok) in [("1", false), ("12", true), ("1234", true), ("12345", false), ("", false)] {
            assert_eq!(run(&r, s.as_bytes()), ok, "{s}");
        }
        assert!(deterministic_rows(&rx, 3).is_none(), "four copies exceed the bound");
        let opt = ByteAutomaton::new(vec![vec![(b'y', b'y', 1)], vec![]], vec![true, true], 0);
        let rx = Rx::Concat(vec![Rx::Literal(b"x".to_vec()), Rx::Automaton(Arc::new(opt)), Rx::Bytes(vec![(b'0', b'9')])].into());
        let r = deterministic_rows(&rx, 100).unwrap();
        for (s, ok) in [("x5", true), ("xy5", true), ("xy", false), ("x", false), ("xyy5", false)] {
            assert_eq!(run(&r, s.as_bytes()), ok, "{s}");
        }
    }

    #[test]
    fn overlapping_joins_and_other_shapes_fall_back() {
        // a* · a: the accepting state of a* and the start of `a` share the byte `a`.
        let star = ByteAutomaton::new(vec![vec![(b'a', b'a', 0)]], vec![true], 0);
        let rx = Rx::Concat(vec![Rx::Automaton(Arc::new(star)), Rx::Literal(b"a".to_vec())].into());
        assert!(deterministic_rows(&rx, 100).is_none());
        assert!(deterministic_rows(&Rx::Alt(vec![rx.clone(), Rx::Literal(b"b".to_vec())].into()), 100).is_none(), "an alternative that is not");
        assert!(deterministic_rows(&Rx::Chars(vec![(0x41, 0x100)]), 100).is_none(), "multi-byte UTF-8");
        assert!(deterministic_rows(&Rx::Literal(b"abcdef".to_vec()), 4).is_none(), "size bound");
    }

    #[test]
    fn alternations_are_unions_sharing_prefixes() {
        let lit = |s: &str| Rx::Literal(s.as_bytes().to_vec());
        let rx = Rx::Alt(vec![lit("abc"), lit("abd"), lit("b"), lit("ab")].into());
        let r = deterministic_rows(&rx, 100).unwrap();
        for (s, ok) in [("abc", true), ("abd", true), ("b", true), ("ab", true), ("a", false), ("abe", false), ("bb", false), ("", false)] {
            assert_eq!(run(&r, s.as_bytes()), ok, "{s}");
        }
        // start, a, ab, abc, abd, b: the shared prefix is walked once.
        assert_eq!(r.len(), 6);
        // Inside a concatenation, and nullable: `"` (x | y | ) `"`.
        let rx = Rx::Concat(vec![lit("\""), Rx::Alt(vec![lit("x"), lit("yy"), Rx::Empty].into()), lit("\"")].into());
        let r = deterministic_rows(&rx, 100).unwrap();
        for (s, ok) in [("\"x\"", true), ("\"yy\"", true), ("\"\"", true), ("\"y\"", false), ("\"x", false)] {
            assert_eq!(run(&r, s.as_bytes()), ok, "{s}");
        }
        assert!(deterministic_rows(&Rx::Alt(vec![lit("abcdef"), lit("xyz")].into()), 5).is_none(), "size bound");
    }

    #[test]
    fn parts_left_behind_are_dropped() {
        // Each embedded automaton's own start state is replaced by the join and unreachable.
        let one = Arc::new(ByteAutomaton::new(vec![vec![(b'a', b'a', 1)], vec![]], vec![false, true], 0));
        let rx = Rx::Concat(vec![Rx::Automaton(one.clone()), Rx::Automaton(one.clone()), Rx::Automaton(one)].into());
        let r = deterministic_rows(&rx, 100).unwrap();
        assert_eq!(r.len(), 4, "a a a: four states");
        assert!(run(&r, b"aaa") && !run(&r, b"aa") && !run(&r, b"aaaa"));
    }

    // Deferral ([`deferrable`]): its promises against the automata built now.

    /// The JSON-encoded forms of code point `c` (raw UTF-8, `\"`/`\\` for those two, `\u`
    /// with four hex digits in either case), as the schema compiler's encoder builds them.
    fn json_char(c: char) -> Rx {
        let mut trans: Vec<Vec<(u8, u8, u32)>> = vec![Vec::new(), Vec::new()]; // 0 start, 1 end
        let add = |trans: &mut Vec<Vec<(u8, u8, u32)>>| {
            trans.push(Vec::new());
            (trans.len() - 1) as u32
        };
        let mut raw = [0u8; 4];
        // (A quote or backslash only escaped.)
        let raw = if c == '"' || c == '\\' { Vec::new() } else { c.encode_utf8(&mut raw).as_bytes().to_vec() };
        let mut s = 0u32;
        for (i, &b) in raw.iter().enumerate() {
            let t = if i + 1 == raw.len() { 1 } else { add(&mut trans) };
            trans[s as usize].push((b, b, t));
            s = t;
        }
        let esc = add(&mut trans);
        trans[0].push((b'\\', b'\\', esc));
        if c == '"' || c == '\\' {
            trans[esc as usize].push((c as u8, c as u8, 1));
        }
        let mut h = add(&mut trans);
        trans[esc as usize].push((b'u', b'u', h));
        let hex = format!("{:04x}", c as u32);
        for (i, d) in hex.bytes().enumerate() {
            let t = if i == 3 { 1 } else { add(&mut trans) };
            trans[h as usize].push((d, d, t));
            if d.is_ascii_alphabetic() {
                trans[h as usize].push((d.to_ascii_uppercase(), d.to_ascii_uppercase(), t));
            }
            h = t;
        }
        for row in &mut trans {
            row.sort_unstable();
        }
        let accept = (0..trans.len()).map(|s| s == 1).collect();
        Rx::Automaton(Arc::new(ByteAutomaton::new(trans, accept, 0).single_char()))
    }

    fn json_literal(s: &str) -> Rx {
        let mut parts = vec![Rx::Literal(b"\"".to_vec())];
        parts.extend(s.chars().map(json_char));
        parts.push(Rx::Literal(b"\"".to_vec()));
        Rx::Concat(parts.into())
    }

    /// Checks what `deferrable` promised against the automaton built now.
    fn check(rx: &Rx, d: Deferred) {
        let dfa = Dfa::from_rx(rx, &Limits::default()).unwrap();
        assert!(deterministic_rows(rx, d.max_states - 1).is_some(), "direct construction within the bound: {rx:?}");
        assert!(dfa.num_states() <= d.max_states, "{} states > bound {}: {rx:?}", dfa.num_states(), d.max_states);
        assert_eq!(dfa.nullable(), d.nullable, "{rx:?}");
        assert_eq!(dfa.is_empty_language(), d.empty, "{rx:?}");
    }

    #[test]
    fn unions_of_json_literals_stay_within_the_bound() {
        let mut rnd = crate::testutil::xorshift(0x5eed_1234_abcd_ef01);
        let chars = ['a', 'b', 'é', '"', '\\', 'k', '\u{4E2D}'];
        let mut tight = 0;
        for _ in 0..400 {
            // Few characters and short strings: many shared prefixes, escapes included.
            let mut words: Vec<String> = Vec::new();
            let few = rnd(2) == 0; // two letters only: long shared prefixes
            for _ in 0..1 + rnd(8) {
                let len = rnd(6);
                words.push((0..len).map(|_| chars[rnd(if few { 2 } else { 7 }) as usize]).collect());
            }
            let rx = Rx::Alt(words.iter().map(|w| json_literal(w)).collect());
            let d = deferrable(&rx, 20_000).unwrap_or_else(|| panic!("an enum of JSON literals is deferrable: {words:?}"));
            check(&rx, d);
            let built = Dfa::from_rx(&rx, &Limits::default()).unwrap().num_states();
            tight += (built * 2 > d.max_states) as usize;
        }
        assert!(tight > 100, "the bound is not vacuous ({tight} of 400 within a factor of two)");
        // Not every union qualifies: a piece without the single-character promise.
        let plain = Rx::Automaton(Arc::new(ByteAutomaton::new(vec![vec![(b'a', b'a', 1)], vec![]], vec![false, true], 0)));
        let rx = Rx::Alt(vec![json_literal("ab"), Rx::Concat(vec![Rx::Literal(b"\"".to_vec()), plain, Rx::Literal(b"\"".to_vec())].into())].into());
        assert!(deferrable(&rx, 20_000).is_none());
        // Nor one past the limit.
        assert!(deferrable(&Rx::Alt(vec![json_literal("abcdef"), json_literal("abc")].into()), 20).is_none());
    }

    /// A random deterministic automaton of 1 to `most` states over `alphabet`.
    fn random_automaton(rnd: &mut impl FnMut(u64) -> u64, alphabet: &[u8], most: u64) -> Arc<ByteAutomaton> {
        let n = 1 + rnd(most) as usize;
        let mut trans: Vec<Vec<(u8, u8, u32)>> = Vec::new();
        for _ in 0..n {
            let mut row = Vec::new();
            for &b in alphabet {
                if rnd(2) == 0 {
                    row.push((b, b, rnd(n as u64) as u32));
                }
            }
            row.sort_unstable();
            trans.push(row);
        }
        let accept = (0..n).map(|_| rnd(2) == 0).collect();
        Arc::new(ByteAutomaton::new(trans, accept, 0))
    }

    #[test]
    fn deferrable_chains_build_as_summarized() {
        let mut rnd = crate::testutil::xorshift(0x0dd_ba11_cafe_f00d);
        let alphabet = b"ab\"";
        let (mut some, mut none) = (0, 0);
        for _ in 0..3000 {
            let parts: Vec<Rx> = (0..1 + rnd(4))
                .map(|_| match rnd(4) {
                    0 => Rx::Literal((0..rnd(3)).map(|_| alphabet[rnd(3) as usize]).collect()),
                    1 => {
                        // A repetition of a small automaton (a length-bounded string's body):
                        // bounded, at-least, optional and empty counts.
                        let a = random_automaton(&mut rnd, alphabet, 3);
                        let min = rnd(3) as u32;
                        let max = match rnd(3) {
                            0 => None,
                            _ => Some(min + rnd(4) as u32),
                        };
                        Rx::Repeat { inner: std::sync::Arc::new(Rx::Automaton(a)), min, max }
                    }
                    // A random small deterministic automaton: cycles, nullable starts, dead
                    // ends and edges out of accepting states all occur.
                    _ => Rx::Automaton(random_automaton(&mut rnd, alphabet, 4)),
                })
                .collect();
            let rx = Rx::Concat(parts.into());
            match deferrable(&rx, 20_000) {
                Some(d) => {
                    some += 1;
                    check(&rx, d);
                }
                None => none += 1,
            }
        }
        assert!(some > 500 && none > 500, "both outcomes exercised: {some} deferrable, {none} not");
    }

    /// Stamped repetitions give the automaton, and the failures, of copy-by-copy joins:
    /// random chains with repetitions of random automata (start states entered by an edge,
    /// nullable ones and overlapping joins included), under random size bounds.
    #[test]
    fn stamped_repetitions_equal_copy_by_copy_joins() {
        let mut rnd = crate::testutil::xorshift(0x57a4_9ed0_c0b1_e5aa);
        let alphabet = b"ab\"";
        let (mut built, mut failed) = (0, 0);
        for _ in 0..4000 {
            let parts: Vec<Rx> = (0..1 + rnd(3))
                .map(|_| match rnd(3) {
                    0 => Rx::Literal((0..rnd(3)).map(|_| alphabet[rnd(3) as usize]).collect()),
                    _ => {
                        let a = random_automaton(&mut rnd, alphabet, 4);
                        let min = rnd(5) as u32;
                        let max = if rnd(8) == 0 { None } else { Some(min + rnd(5) as u32) };
                        Rx::Repeat { inner: std::sync::Arc::new(Rx::Automaton(a)), min, max }
                    }
                })
                .collect();
            let rx = Rx::Concat(parts.into());
            let limit = if rnd(3) == 0 { 5 + rnd(30) as usize } else { 20_000 };
            let by_stamp = deterministic_rows(&rx, limit).map(|r| (r.start, r.flat));
            NO_STAMP.with(|n| n.set(true));
            let by_copies = deterministic_rows(&rx, limit).map(|r| (r.start, r.flat));
            NO_STAMP.with(|n| n.set(false));
            assert_eq!(by_stamp, by_copies, "{rx:?} within {limit} states");
            if by_stamp.is_some() {
                built += 1;
            } else {
                failed += 1;
            }
        }
        assert!(built > 800 && failed > 800, "both outcomes exercised: {built} built, {failed} not");
    }

    #[test]
    fn short_length_bounded_json_strings_are_deferrable() {
        // `"` + 1 to 12 encoded characters + `"` (a `maxLength: 12` string).
        let any = json_char('a');
        let body = Rx::Repeat { inner: std::sync::Arc::new(any.clone()), min: 1, max: Some(12) };
        let rx = Rx::Concat(vec![Rx::Literal(b"\"".to_vec()), body, Rx::Literal(b"\"".to_vec())].into());
        let d = deferrable(&rx, 20_000).expect("a short length-bounded string is deferrable");
        check(&rx, d);
        assert!(!d.nullable && !d.empty);
        // At least three, no upper bound; and optional only.
        for (min, max) in [(3, None), (0, Some(5)), (0, None)] {
            let rx = Rx::Concat(vec![Rx::Literal(b"\"".to_vec()), Rx::Repeat { inner: std::sync::Arc::new(any.clone()), min, max }, Rx::Literal(b"\"".to_vec())].into());
            check(&rx, deferrable(&rx, 20_000).expect("deferrable"));
        }
        // Past the state limit: built at once (and then split by lowering).
        assert!(deferrable(&rx, 20).is_none());
        // Up to `MAX_DEFERRED_REPEAT_STATES` states of copies deferred, longer ones built with
        // the compile.
        let per = match &any {
            Rx::Automaton(a) => a.len() as u32,
            _ => unreachable!(),
        };
        let fit = MAX_DEFERRED_REPEAT_STATES as u32 / per;
        let of = |n: u32| Rx::Concat(vec![Rx::Literal(b"\"".to_vec()), Rx::Repeat { inner: std::sync::Arc::new(any.clone()), min: 1, max: Some(n) }, Rx::Literal(b"\"".to_vec())].into());
        check(&of(fit), deferrable(&of(fit), 20_000).expect("deferrable"));
        assert!(deferrable(&of(fit + 1), 20_000).is_none());
    }
}
