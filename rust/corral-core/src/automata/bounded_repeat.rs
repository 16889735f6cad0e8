//! The dense DFA of a length-bounded JSON string, `p a{min,max} s` — one byte before and
//! after `max` copies of one deterministic automaton `a` (the encoded forms of one
//! character) — written copy by copy from a template of `a`'s rows.
//!
//! [`crate::automata::det_concat`] builds the same automaton generically: it stamps the copies' rows,
//! merges the closing byte into every copy that may end the string, renumbers the states
//! breadth first, and [`Dfa::from_rows`] then finds the byte classes, the live states and each
//! state's live bytes over all of its edges before writing the table. A `maxLength: 160`
//! string is 3,204 states and about 13,000 edges: those passes took 245 µs warm (`dfa_build`),
//! about half of o21460's first compile on cold caches (`compile_prof`: 1.06–1.12 ms before,
//! 0.47–0.65 after), and that schema's compile reached 1.7–2.6 ms in some benchmark runs. Here the classes come from `a`'s edges, liveness from `a` alone
//! (every copy of a trimmed `a` reaches the string's end), and each copy's rows are its
//! template's with the copy's first state id added to the targets inside the copies.
//!
//! States: [`DEAD`], before `p`, after `p` (the first copy's start row), after `s` (the only
//! accepting state), then copy `i`'s states (`a`'s states but its start, which no edge
//! enters) from `FIRST + i * k` on. `None` whenever the shortcut does not apply — the shape
//! differs, a join is not deterministic, `a` has states that cannot be reached or cannot reach
//! acceptance, the automaton would be sparse or over `max_states` — and the caller builds it
//! the generic way.

use crate::frontend::byte_automaton::ByteAutomaton;
use crate::runtime::byteset::ByteSet;
use crate::automata::dfa::{Dfa, DEAD};
use crate::frontend::rx::Rx;

/// The state before the opening byte.
const BEFORE: usize = 1;
/// The state after the opening byte: no character yet.
const OPENED: usize = 2;
/// The state after the closing byte.
const CLOSED: usize = 3;
/// The first state of the first copy.
const FIRST: usize = 4;

/// The DFA of `rx` when it has the shape `p a{min,max} s` with one-byte literals `p` and `s`,
/// `max` ≥ 3, and every condition of the module doc holds, with at most `max_states` states
/// (the dead one included); `None` otherwise.
pub(crate) fn build(rx: &Rx, max_states: usize) -> Option<Dfa> {
    let Rx::Concat(parts) = rx else { return None };
    let [Rx::Literal(p), Rx::Repeat { inner, min, max: Some(max) }, Rx::Literal(s)] = &parts[..] else { return None };
    let (&[p], &[s]) = (p.as_slice(), s.as_slice()) else { return None };
    let Rx::Automaton(a) = &**inner else { return None };
    let (min, copies) = (*min as usize, *max as usize);
    if copies < 3 || copies < min || a.is_empty() || a.nullable() || !trimmed(a) {
        return None;
    }
    let start = a.start() as usize;
    let k = a.len() - 1;
    let n = FIRST + copies * k;
    if n > max_states {
        return None;
    }
    // A copy's state ids skip `a`'s start.
    let local = |q: usize| if q < start { q } else { q - 1 };
    let start_row = a.edges(start);
    // The joins are deterministic when the bytes leaving the accepting states (each continued
    // by the next copy's start and by the closing byte) miss the start's and the closing byte,
    // as `det_concat` checks them ([`ByteAutomaton::summary`]).
    let sum = a.summary();
    if sum.accept_out.intersects(&sum.start_out) || sum.accept_out.contains(s) || sum.start_out.contains(s) {
        return None;
    }
    let (classes, nc) = Dfa::classes_of(a_edges(a).map(|&(lo, hi, _)| (lo, hi)).chain([(p, p), (s, s)]));
    // Templates per variant — bit 0: a next copy follows, bit 1: the string may end after
    // this copy — and per copy state: targets relative to the copy's first state where
    // `relative` is all ones (inside this copy, or the next one at `k` on), else absolute.
    let mut target = vec![DEAD as u16; 4 * k * nc];
    let mut relative = vec![0u16; 4 * k * nc];
    let mut sets = vec![ByteSet::default(); 4 * k];
    let mut live_edges = [0usize; 4];
    for v in 0..4 {
        let (next, end) = (v & 1 == 1, v & 2 == 2);
        for q in (0..a.len()).filter(|&q| q != start) {
            let row = (v * k + local(q)) * nc;
            let mut put = |lo: u8, hi: u8, t: u16, rel: bool| {
                for c in classes[lo as usize]..=classes[hi as usize] {
                    target[row + c as usize] = t;
                    relative[row + c as usize] = if rel { u16::MAX } else { 0 };
                }
                sets[v * k + local(q)].insert_range(lo, hi);
                live_edges[v] += 1;
            };
            for &(lo, hi, t) in a.edges(q) {
                put(lo, hi, local(t as usize) as u16, true);
            }
            if a.accepts(q) {
                if next {
                    for &(lo, hi, t) in start_row {
                        put(lo, hi, (k + local(t as usize)) as u16, true);
                    }
                }
                if end {
                    put(s, s, CLOSED as u16, false);
                }
            }
        }
    }
    let variant = |i: usize| (i + 1 < copies) as usize | ((i + 1 >= min) as usize) << 1;
    // (`Dfa::from_rows` keeps sparse rows below this many edges: leave those to it.)
    let edges: usize = (0..copies).map(|i| live_edges[variant(i)]).sum::<usize>() + 1 + start_row.len() + (min == 0) as usize;
    if edges <= crate::automata::dfa::SPARSE_EDGES_PER_STATE * n {
        return None;
    }
    let mut trans = vec![DEAD as u16; n * nc];
    let mut live = crate::automata::live_sets::LiveSetsBuilder::with_capacity(n);
    let set_of = |bytes: &[(u8, u8)]| {
        let mut set = ByteSet::default();
        for &(lo, hi) in bytes {
            set.insert_range(lo, hi);
        }
        set
    };
    trans[BEFORE * nc + classes[p as usize] as usize] = OPENED as u16;
    for &(lo, hi, t) in start_row {
        for c in classes[lo as usize]..=classes[hi as usize] {
            trans[OPENED * nc + c as usize] = (FIRST + local(t as usize)) as u16;
        }
    }
    let mut opened: Vec<(u8, u8)> = start_row.iter().map(|&(lo, hi, _)| (lo, hi)).collect();
    if min == 0 {
        trans[OPENED * nc + classes[s as usize] as usize] = CLOSED as u16;
        opened.push((s, s));
    }
    live.push(ByteSet::default()); // dead
    live.push(set_of(&[(p, p)]));
    live.push(set_of(&opened));
    live.push(ByteSet::default()); // closed
    for i in 0..copies {
        let (v, base) = (variant(i), (FIRST + i * k) as u16);
        let rows = &mut trans[(FIRST + i * k) * nc..(FIRST + (i + 1) * k) * nc];
        let from = v * k * nc..(v + 1) * k * nc;
        for ((t, &x), &r) in rows.iter_mut().zip(&target[from.clone()]).zip(&relative[from]) {
            *t = x.wrapping_add(r & base);
        }
        for set in &sets[v * k..(v + 1) * k] {
            live.push(*set);
        }
    }
    let mut accepting = vec![false; n];
    accepting[CLOSED] = true;
    Some(Dfa::from_dense_parts(classes, nc, trans, accepting, BEFORE as u32, live.finish()))
}

/// Every edge of `a`.
fn a_edges(a: &ByteAutomaton) -> impl Iterator<Item = &(u8, u8, u32)> + '_ {
    (0..a.len()).flat_map(move |q| a.edges(q).iter())
}

/// Whether every state of `a` is reached from its start, no edge enters the start, and every
/// state but the start reaches an accepting state (copies of `a` joined one after another then
/// leave no state that cannot be reached or cannot finish).
fn trimmed(a: &ByteAutomaton) -> bool {
    let (n, start) = (a.len(), a.start() as usize);
    if a_edges(a).any(|e| e.2 as usize == start) {
        return false;
    }
    let mut seen = vec![false; n];
    let mut stack = vec![start];
    seen[start] = true;
    while let Some(q) = stack.pop() {
        for &(_, _, t) in a.edges(q) {
            if !std::mem::replace(&mut seen[t as usize], true) {
                stack.push(t as usize);
            }
        }
    }
    if seen.contains(&false) {
        return false;
    }
    // Backwards from the accepting states (`a` is a handful of states: a fixed point).
    let mut live: Vec<bool> = (0..n).map(|q| a.accepts(q)).collect();
    let mut changed = true;
    while changed {
        changed = false;
        for q in 0..n {
            if !live[q] && a.edges(q).iter().any(|e| live[e.2 as usize]) {
                live[q] = true;
                changed = true;
            }
        }
    }
    live.iter().all(|&l| l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::limits::Limits;
    use std::sync::Arc;

    /// The two constructions accept the same language: a walk over pairs of states from both
    /// starts, every byte, same acceptance and same death everywhere.
    fn same_language(x: &Dfa, y: &Dfa) -> bool {
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![(x.start(), y.start())];
        while let Some((p, q)) = stack.pop() {
            if !seen.insert((p, q)) {
                continue;
            }
            if x.is_accepting(p) != y.is_accepting(q) {
                return false;
            }
            for b in 0..=255u8 {
                let (p2, q2) = (x.next(p, b), y.next(q, b));
                if (p2 == DEAD) != (q2 == DEAD) {
                    return false;
                }
                if p2 != DEAD {
                    stack.push((p2, q2));
                }
            }
        }
        true
    }

    /// A character automaton shaped like JSON's: a printable ASCII byte but `"` and `\`, an
    /// escape (`\` and one of eight bytes), or a two- or three-byte UTF-8 sequence.
    fn char_automaton() -> Arc<ByteAutomaton> {
        let esc = [b'"', b'/', b'\\', b'b', b'f', b'n', b'r', b't'].map(|b| (b, b, 1));
        Arc::new(ByteAutomaton::new(
            vec![
                vec![(0x20, 0x21, 1), (0x23, 0x5B, 1), (b'\\', b'\\', 2), (0x5D, 0x7F, 1), (0xC2, 0xDF, 3), (0xE0, 0xEF, 4)],
                vec![],
                esc.to_vec(),
                vec![(0x80, 0xBF, 1)],
                vec![(0x80, 0xBF, 3)],
            ],
            vec![false, true, false, false, false],
            0,
        ))
    }

    fn string(a: Arc<ByteAutomaton>, min: u32, max: u32) -> Rx {
        Rx::concat(vec![Rx::Literal(b"\"".to_vec()), Rx::Repeat { inner: Arc::new(Rx::Automaton(a)), min, max: Some(max) }, Rx::Literal(b"\"".to_vec())])
    }

    #[test]
    fn templated_strings_equal_the_generic_construction() {
        for (min, max) in [(0, 3), (1, 3), (2, 5), (5, 5), (0, 40), (7, 160)] {
            let rx = string(char_automaton(), min, max);
            let fast = build(&rx, 1 << 20).unwrap_or_else(|| panic!("{{{min},{max}}} takes the template"));
            let rows = crate::automata::det_concat::deterministic_rows(&rx, 1 << 20).expect("deterministic");
            let generic = Dfa::from_rows(&rows);
            assert_eq!(fast.num_states(), generic.num_states(), "{{{min},{max}}}: state count");
            assert!(same_language(&fast, &generic), "{{{min},{max}}}: languages differ");
            for s in 0..fast.num_states() as u32 {
                let live: Vec<u8> = (0..=255u8).filter(|&b| fast.next(s, b) != DEAD).collect();
                assert_eq!(fast.live_bytes(s).iter().collect::<Vec<_>>(), live, "{{{min},{max}}}: live bytes of state {s}");
            }
            // Lengths: `min` to `max` characters between the quotes, any mix of forms.
            let accepts = |text: &[u8]| {
                let mut q = fast.start();
                for &b in text {
                    q = fast.next(q, b);
                }
                fast.is_accepting(q)
            };
            for len in 0..=max as usize + 1 {
                let body: Vec<u8> = (0..len).flat_map(|i| match i % 4 { 0 => b"x".to_vec(), 1 => b"\\n".to_vec(), 2 => vec![0xC3, 0xA9], _ => vec![0xE4, 0xB8, 0xAD] }).collect();
                let text = [b"\"".as_slice(), &body, b"\""].concat();
                assert_eq!(accepts(&text), (min as usize..=max as usize).contains(&len), "{{{min},{max}}}: {len} characters");
            }
        }
    }

    #[test]
    fn shapes_it_does_not_take() {
        let a = char_automaton();
        assert!(build(&string(a.clone(), 0, 2), 1 << 20).is_none(), "fewer than three copies");
        assert!(build(&string(a.clone(), 1, 100), 300).is_none(), "over the state bound");
        // A character automaton whose accepting state continues on a byte its start takes too.
        let ambiguous = Arc::new(ByteAutomaton::new(vec![vec![(b'x', b'x', 1)], vec![(b'x', b'x', 1)]], vec![false, true], 0));
        assert!(build(&string(ambiguous, 1, 5), 1 << 20).is_none(), "a join that is not deterministic");
        // A state that cannot finish.
        let stuck = Arc::new(ByteAutomaton::new(vec![vec![(b'x', b'x', 1), (b'y', b'y', 2)], vec![], vec![]], vec![false, true, false], 0));
        assert!(build(&string(stuck, 1, 5), 1 << 20).is_none(), "a state that cannot reach acceptance");
        // `from_rx` agrees with the generic construction either way.
        let rx = string(a, 1, 30);
        let d = Dfa::from_rx(&rx, &Limits::default()).expect("builds");
        let generic = Dfa::from_rows(&crate::automata::det_concat::deterministic_rows(&rx, 1 << 20).expect("deterministic"));
        assert!(same_language(&d, &generic));
    }
}
