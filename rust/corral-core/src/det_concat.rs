//! Terminals that are already deterministic, built as byte automata without subset
//! construction: literals, byte classes, embedded [`ByteAutomaton`]s and concatenations of
//! them where each join stays deterministic. JSON Schema keys (`"` + one encoded automaton
//! per character + `"`) and constrained string values (`"` + encoded automaton + `"`) are
//! all of this shape; subset construction spent most of a schema compile re-discovering
//! that each of their state sets is a single state.
//!
//! A join `A · B` is deterministic when, at every accepting state of `A`, the bytes leaving
//! it and the bytes leaving `B`'s start are disjoint: that state then takes both rows (and
//! accepts when `B` accepts the empty string). Anything else returns `None` and the caller
//! falls back to subset construction.
//!
//! [`ByteAutomaton`]: crate::byte_automaton::ByteAutomaton

use crate::rx::Rx;

/// A deterministic byte automaton under construction: per state, sorted disjoint inclusive
/// `(lo, hi, target)` rows and acceptance.
#[derive(Debug, Default)]
pub(crate) struct Rows {
    /// Per state: sorted, disjoint, inclusive byte ranges and their targets.
    pub rows: Vec<Vec<(u8, u8, u32)>>,
    /// Per state: whether the input read so far is in the language.
    pub accept: Vec<bool>,
    /// Start state.
    pub start: u32,
}

impl Rows {
    fn add(&mut self, row: Vec<(u8, u8, u32)>, accept: bool) -> u32 {
        self.rows.push(row);
        self.accept.push(accept);
        (self.rows.len() - 1) as u32
    }
}

/// The automaton of `rx` when it is a deterministic concatenation of literals, ASCII or byte
/// classes and embedded automata, with at most `max_states` states; `None` otherwise.
pub(crate) fn deterministic_rows(rx: &Rx, max_states: usize) -> Option<Rows> {
    let parts: &[Rx] = match rx {
        Rx::Concat(xs) => xs,
        other => std::slice::from_ref(other),
    };
    let mut out = Rows::default();
    out.start = out.add(Vec::new(), true); // the empty string so far
    for part in parts {
        if !append(&mut out, part, max_states) {
            return None;
        }
    }
    Some(reachable(out))
}

/// Only the states reachable from the start (a join leaves each part's own start state
/// behind when nothing else enters it), numbered in breadth-first order.
fn reachable(r: Rows) -> Rows {
    let mut id = vec![u32::MAX; r.rows.len()];
    let mut order = vec![r.start];
    id[r.start as usize] = 0;
    let mut i = 0;
    while i < order.len() {
        for &(_, _, t) in &r.rows[order[i] as usize] {
            if id[t as usize] == u32::MAX {
                id[t as usize] = order.len() as u32;
                order.push(t);
            }
        }
        i += 1;
    }
    let rows = order.iter().map(|&s| r.rows[s as usize].iter().map(|&(lo, hi, t)| (lo, hi, id[t as usize])).collect()).collect();
    let accept = order.iter().map(|&s| r.accept[s as usize]).collect();
    Rows { rows, accept, start: 0 }
}

/// Appends `part` to `out` (`out · part`); false when the join is not deterministic, the part
/// is not of a supported kind or the size bound is passed.
fn append(out: &mut Rows, part: &Rx, max_states: usize) -> bool {
    // The part as its own automaton, numbered from `base`.
    let base = out.rows.len() as u32;
    let (rows, accept, start): (Vec<Vec<(u8, u8, u32)>>, Vec<bool>, u32) = match part {
        Rx::Empty => return true,
        Rx::Literal(bytes) => {
            let n = bytes.len() as u32;
            let rows = bytes.iter().enumerate().map(|(i, &b)| vec![(b, b, base + i as u32 + 1)]).chain(std::iter::once(Vec::new())).collect();
            let accept = (0..=n).map(|i| i == n).collect();
            (rows, accept, base)
        }
        Rx::Bytes(ranges) => (vec![ranges.iter().map(|&(lo, hi)| (lo, hi, base + 1)).collect(), Vec::new()], vec![false, true], base),
        Rx::Chars(ranges) if ranges.iter().all(|&(_, hi)| hi < 0x80) => {
            (vec![ranges.iter().map(|&(lo, hi)| (lo as u8, hi as u8, base + 1)).collect(), Vec::new()], vec![false, true], base)
        }
        Rx::Automaton(a) => {
            let rows = (0..a.len()).map(|s| a.edges(s).iter().map(|&(lo, hi, t)| (lo, hi, base + t)).collect()).collect();
            let accept = (0..a.len()).map(|s| a.accepts(s)).collect();
            (rows, accept, base + a.start())
        }
        _ => return false,
    };
    if out.rows.len() + rows.len() > max_states || rows.is_empty() {
        return false;
    }
    let start_row = rows[(start - base) as usize].clone();
    let start_accepts = accept[(start - base) as usize];
    for s in 0..out.rows.len() {
        if !out.accept[s] {
            continue;
        }
        match union_disjoint(&out.rows[s], &start_row) {
            Some(row) => {
                out.rows[s] = row;
                out.accept[s] = start_accepts;
            }
            None => return false,
        }
    }
    out.rows.extend(rows);
    out.accept.extend(accept);
    true
}

/// The union of two sorted disjoint rows, or `None` when they share a byte.
fn union_disjoint(a: &[(u8, u8, u32)], b: &[(u8, u8, u32)]) -> Option<Vec<(u8, u8, u32)>> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let take_a = j == b.len() || (i < a.len() && a[i].0 < b[j].0);
        let x = if take_a {
            i += 1;
            a[i - 1]
        } else {
            j += 1;
            b[j - 1]
        };
        if let Some(&(_, hi, _)) = out.last() {
            if x.0 <= hi {
                return None;
            }
        }
        out.push(x);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::byte_automaton::ByteAutomaton;
    use std::sync::Arc;

    fn run(r: &Rows, input: &[u8]) -> bool {
        let mut s = r.start as usize;
        for &b in input {
            match r.rows[s].iter().find(|&&(lo, hi, _)| lo <= b && b <= hi) {
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
        let rx = Rx::Concat(vec![Rx::Literal(b"\"".to_vec()), Rx::Automaton(Arc::new(body)), Rx::Literal(b"\"".to_vec())]);
        let r = deterministic_rows(&rx, 100).unwrap();
        for (s, ok) in [("\"\"", true), ("\"abba\"", true), ("\"ab", false), ("\"a\"b", false), ("\"c\"", false), ("", false)] {
            assert_eq!(run(&r, s.as_bytes()), ok, "{s}");
        }
        // A nullable middle part: the join skips it.
        let rx = Rx::Concat(vec![Rx::Literal(b"x".to_vec()), Rx::Repeat { inner: Box::new(Rx::Literal(b"y".to_vec())), min: 0, max: None }]);
        assert!(deterministic_rows(&rx, 100).is_none(), "repeats are left to subset construction");
        let opt = ByteAutomaton::new(vec![vec![(b'y', b'y', 1)], vec![]], vec![true, true], 0);
        let rx = Rx::Concat(vec![Rx::Literal(b"x".to_vec()), Rx::Automaton(Arc::new(opt)), Rx::Bytes(vec![(b'0', b'9')])]);
        let r = deterministic_rows(&rx, 100).unwrap();
        for (s, ok) in [("x5", true), ("xy5", true), ("xy", false), ("x", false), ("xyy5", false)] {
            assert_eq!(run(&r, s.as_bytes()), ok, "{s}");
        }
    }

    #[test]
    fn overlapping_joins_and_other_shapes_fall_back() {
        // a* · a: the accepting state of a* and the start of `a` share the byte `a`.
        let star = ByteAutomaton::new(vec![vec![(b'a', b'a', 0)]], vec![true], 0);
        let rx = Rx::Concat(vec![Rx::Automaton(Arc::new(star)), Rx::Literal(b"a".to_vec())]);
        assert!(deterministic_rows(&rx, 100).is_none());
        assert!(deterministic_rows(&Rx::Alt(vec![Rx::Literal(b"a".to_vec()), Rx::Literal(b"b".to_vec())]), 100).is_none());
        assert!(deterministic_rows(&Rx::Chars(vec![(0x41, 0x100)]), 100).is_none(), "multi-byte UTF-8");
        assert!(deterministic_rows(&Rx::Literal(b"abcdef".to_vec()), 4).is_none(), "size bound");
    }

    #[test]
    fn parts_left_behind_are_dropped() {
        // Each embedded automaton's own start state is replaced by the join and unreachable.
        let one = Arc::new(ByteAutomaton::new(vec![vec![(b'a', b'a', 1)], vec![]], vec![false, true], 0));
        let rx = Rx::Concat(vec![Rx::Automaton(one.clone()), Rx::Automaton(one.clone()), Rx::Automaton(one)]);
        let r = deterministic_rows(&rx, 100).unwrap();
        assert_eq!(r.rows.len(), 4, "a a a: four states");
        assert!(run(&r, b"aaa") && !run(&r, b"aa") && !run(&r, b"aaaa"));
    }
}
