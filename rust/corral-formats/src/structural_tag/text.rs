//! Free text that must not contain given strings, as exact byte automata.
//!
//! Structural tags let the model write free text until a trigger string appears (then a tag
//! must follow), and forbid some strings (`excludes`, the enclosing tag's end) in free text.
//! Both are languages over UTF-8 text defined by substring occurrences, built here as
//! deterministic byte automata: an Aho-Corasick automaton over the patterns, in product with
//! a UTF-8 validator (so free text is always well-formed UTF-8) and, for `max_chars`, with a
//! code point counter.
//!
//! Occurrences are found in the order the text is written: the first pattern whose last byte
//! is read decides. When several patterns end at the same byte, the longest trigger among
//! them is the one dispatched, unless an excluded pattern also ends there (then the text is
//! rejected): the rule xgrammar's matcher follows.

use corral_core::byte_automaton::ByteAutomaton;
use std::collections::HashMap;

/// What a pattern is for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    /// A trigger: its occurrence ends the free text and starts a tag.
    Trigger(usize),
    /// A forbidden string (an exclude or an enclosing end): its occurrence is not allowed.
    Forbidden,
}

/// An Aho-Corasick automaton over bytes, made total (a `goto` for every byte of every node).
struct Ac {
    /// `next[node * 256 + byte]`.
    next: Vec<u32>,
    /// What completes at a node: `None` when nothing does, else the decision.
    done: Vec<Option<Decision>>,
}

/// The decision at a node where at least one pattern ends.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Decision {
    /// A forbidden pattern ends here: the text is rejected.
    Reject,
    /// Only triggers end here; the longest one (its index) is dispatched.
    Dispatch(usize),
}

impl Ac {
    /// Builds the automaton; `patterns` are non-empty byte strings with their roles.
    fn new(patterns: &[(Vec<u8>, Role)]) -> Ac {
        // Trie.
        let mut children: Vec<HashMap<u8, u32>> = vec![HashMap::new()];
        let mut depth: Vec<usize> = vec![0];
        // Per node: (longest trigger ending exactly at this node, with its length), forbidden.
        let mut own_trigger: Vec<Option<(usize, usize)>> = vec![None];
        let mut own_forbidden: Vec<bool> = vec![false];
        for (p, role) in patterns {
            let mut n = 0u32;
            for &b in p {
                let next = match children[n as usize].get(&b) {
                    Some(&c) => c,
                    None => {
                        let c = children.len() as u32;
                        children.push(HashMap::new());
                        depth.push(depth[n as usize] + 1);
                        own_trigger.push(None);
                        own_forbidden.push(false);
                        children[n as usize].insert(b, c);
                        c
                    }
                };
                n = next;
            }
            match role {
                Role::Trigger(i) => {
                    if own_trigger[n as usize].is_none() {
                        own_trigger[n as usize] = Some((*i, p.len()));
                    }
                }
                Role::Forbidden => own_forbidden[n as usize] = true,
            }
        }
        let count = children.len();
        let mut next = vec![0u32; count * 256];
        let mut fail = vec![0u32; count];
        // Outputs merged along failure links (BFS order: a node's failure target is done first).
        let mut trig: Vec<Option<(usize, usize)>> = own_trigger.clone();
        let mut forb: Vec<bool> = own_forbidden.clone();
        let mut queue = std::collections::VecDeque::new();
        for b in 0..256usize {
            match children[0].get(&(b as u8)) {
                Some(&c) => {
                    next[b] = c;
                    fail[c as usize] = 0;
                    queue.push_back(c);
                }
                None => next[b] = 0,
            }
        }
        while let Some(n) = queue.pop_front() {
            let n = n as usize;
            let f = fail[n] as usize;
            forb[n] |= forb[f];
            trig[n] = match (trig[n], trig[f]) {
                (Some(a), Some(b)) => Some(if b.1 > a.1 { b } else { a }),
                (a, b) => a.or(b),
            };
            for b in 0..256usize {
                match children[n].get(&(b as u8)) {
                    Some(&c) => {
                        fail[c as usize] = next[f * 256 + b];
                        next[n * 256 + b] = c;
                        queue.push_back(c);
                    }
                    None => next[n * 256 + b] = next[f * 256 + b],
                }
            }
        }
        let done = (0..count)
            .map(|n| {
                if forb[n] {
                    Some(Decision::Reject)
                } else {
                    trig[n].map(|(i, _)| Decision::Dispatch(i))
                }
            })
            .collect();
        Ac { next, done }
    }
}

/// UTF-8 well-formedness, one state per position in a code point's encoding.
/// 0 is the boundary between code points (the only accepting state).
fn utf8_step(state: u8, b: u8) -> Option<u8> {
    const B: u8 = 0;
    const C1: u8 = 1;
    const C2: u8 = 2;
    const C3: u8 = 3;
    const E0: u8 = 4;
    const ED: u8 = 5;
    const F0: u8 = 6;
    const F4: u8 = 7;
    match state {
        B => match b {
            0x00..=0x7F => Some(B),
            0xC2..=0xDF => Some(C1),
            0xE0 => Some(E0),
            0xE1..=0xEC | 0xEE..=0xEF => Some(C2),
            0xED => Some(ED),
            0xF0 => Some(F0),
            0xF1..=0xF3 => Some(C3),
            0xF4 => Some(F4),
            _ => None,
        },
        C1 => (0x80..=0xBF).contains(&b).then_some(B),
        C2 => (0x80..=0xBF).contains(&b).then_some(C1),
        C3 => (0x80..=0xBF).contains(&b).then_some(C2),
        E0 => (0xA0..=0xBF).contains(&b).then_some(C1),
        ED => (0x80..=0x9F).contains(&b).then_some(C1),
        F0 => (0x90..=0xBF).contains(&b).then_some(C2),
        F4 => (0x80..=0x8F).contains(&b).then_some(C2),
        _ => None,
    }
}

/// What the automaton accepts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Goal {
    /// Text in which no pattern occurs (the free text that ends a region).
    Free,
    /// Text whose first pattern occurrence is trigger `i`, ending the text (the free text
    /// before a tag, with the trigger that starts it).
    UpToTrigger(usize),
}

/// Builds the automaton of `goal` over `patterns` (non-empty), with at most `max_chars` code
/// points when given. Returns `None` when it would have more than `max_states` states.
pub fn automaton(patterns: &[(Vec<u8>, Role)], goal: Goal, max_chars: Option<u32>, max_states: usize) -> Option<ByteAutomaton> {
    let ac = Ac::new(patterns);
    // Product states (ac node, utf8 state, chars so far), numbered in BFS order.
    type Key = (u32, u8, u32);
    let mut ids: HashMap<Key, u32> = HashMap::new();
    let mut keys: Vec<Key> = Vec::new();
    let mut trans: Vec<Vec<(u8, u8, u32)>> = Vec::new();
    let mut accept: Vec<bool> = Vec::new();
    let start: Key = (0, 0, 0);
    ids.insert(start, 0);
    keys.push(start);
    let mut i = 0;
    while i < keys.len() {
        let (node, u, c) = keys[i];
        let mut row: Vec<(u8, u8, u32)> = Vec::new();
        let is_final_trigger = matches!(ac.done[node as usize], Some(Decision::Dispatch(_)));
        let acc = match goal {
            Goal::Free => ac.done[node as usize].is_none() && u == 0,
            Goal::UpToTrigger(t) => ac.done[node as usize] == Some(Decision::Dispatch(t)) && u == 0,
        };
        // A node where a pattern ended has no way on: the text ends there (trigger) or dies.
        if !is_final_trigger && ac.done[node as usize].is_none() {
            for b in 0..=255u8 {
                let Some(u2) = utf8_step(u, b) else { continue };
                let c2 = if u2 == 0 { c + 1 } else { c };
                if let Some(m) = max_chars {
                    if c2 > m || (u2 != 0 && c + 1 > m) {
                        continue;
                    }
                }
                let n2 = ac.next[node as usize * 256 + b as usize];
                let d = ac.done[n2 as usize];
                let useful = match (goal, d) {
                    (_, Some(Decision::Reject)) => false,
                    (Goal::Free, Some(Decision::Dispatch(_))) => false,
                    (Goal::UpToTrigger(t), Some(Decision::Dispatch(j))) => j == t,
                    _ => true,
                };
                if !useful {
                    continue;
                }
                let key = (n2, u2, if max_chars.is_some() { c2 } else { 0 });
                let id = match ids.get(&key) {
                    Some(&id) => id,
                    None => {
                        let id = keys.len() as u32;
                        if keys.len() >= max_states {
                            return None;
                        }
                        ids.insert(key, id);
                        keys.push(key);
                        id
                    }
                };
                match row.last_mut() {
                    Some(last) if last.2 == id && last.1 as u16 + 1 == b as u16 => last.1 = b,
                    _ => row.push((b, b, id)),
                }
            }
        }
        trans.push(row);
        accept.push(acc);
        i += 1;
    }
    Some(ByteAutomaton::new(trans, accept, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference: does `s` (bytes) satisfy `goal`? Scans prefixes in order.
    fn reference(patterns: &[(Vec<u8>, Role)], goal: Goal, max_chars: Option<u32>, s: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(s) else { return false };
        if let Some(m) = max_chars {
            if text.chars().count() > m as usize {
                return false;
            }
        }
        for end in 1..=s.len() {
            let prefix = &s[..end];
            let ending: Vec<&(Vec<u8>, Role)> = patterns.iter().filter(|(p, _)| prefix.ends_with(p)).collect();
            if ending.is_empty() {
                continue;
            }
            if ending.iter().any(|(_, r)| *r == Role::Forbidden) {
                return false;
            }
            let best = ending.iter().max_by_key(|(p, _)| p.len()).map(|(_, r)| *r);
            return end == s.len() && matches!((goal, best), (Goal::UpToTrigger(t), Some(Role::Trigger(j))) if t == j);
        }
        goal == Goal::Free
    }

    fn accepts(a: &ByteAutomaton, s: &[u8]) -> bool {
        a.matches(s)
    }

    #[test]
    fn matches_reference_on_all_short_strings() {
        let pats = vec![(b"ab".to_vec(), Role::Trigger(0)), (b"b".to_vec(), Role::Trigger(1)), (b"ca".to_vec(), Role::Forbidden), (b"abc".to_vec(), Role::Trigger(2))];
        let alphabet = [b'a', b'b', b'c', b'x'];
        for goal in [Goal::Free, Goal::UpToTrigger(0), Goal::UpToTrigger(1), Goal::UpToTrigger(2)] {
            for max in [None, Some(3)] {
                let a = automaton(&pats, goal, max, 10_000).unwrap();
                let mut strs: Vec<Vec<u8>> = vec![vec![]];
                for _ in 0..5 {
                    let mut more = Vec::new();
                    for s in &strs {
                        for &c in &alphabet {
                            let mut t = s.clone();
                            t.push(c);
                            more.push(t);
                        }
                    }
                    for s in &more {
                        assert_eq!(accepts(&a, s), reference(&pats, goal, max, s), "{goal:?} {max:?} {:?}", String::from_utf8_lossy(s));
                    }
                    strs = more;
                }
            }
        }
    }

    #[test]
    fn free_text_is_utf8() {
        let pats = vec![("<é>".as_bytes().to_vec(), Role::Trigger(0))];
        let a = automaton(&pats, Goal::Free, None, 10_000).unwrap();
        assert!(accepts(&a, "héllo €𝄞".as_bytes()));
        assert!(!accepts(&a, b"\xff"));
        assert!(!accepts(&a, b"\xc3"));
        assert!(!accepts(&a, b"\xed\xa0\x80"));
        assert!(!accepts(&a, "a<é>".as_bytes()));
        let t = automaton(&pats, Goal::UpToTrigger(0), None, 10_000).unwrap();
        assert!(accepts(&t, "é<é>".as_bytes()));
        assert!(!accepts(&t, "<é>x".as_bytes()));
        let m = automaton(&pats, Goal::Free, Some(2), 10_000).unwrap();
        assert!(accepts(&m, "éé".as_bytes()));
        assert!(!accepts(&m, "ééé".as_bytes()));
    }

    #[test]
    fn state_cap() {
        let pats = vec![(b"abc".to_vec(), Role::Forbidden)];
        assert!(automaton(&pats, Goal::Free, Some(10_000), 1000).is_none());
    }
}
