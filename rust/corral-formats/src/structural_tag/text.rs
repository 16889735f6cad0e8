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

use corral_core::{ByteAutomaton, Dfa, DEAD};
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
    /// Trie edges (forward only): `(node, byte) -> child`.
    children: Vec<HashMap<u8, u32>>,
    /// Whether a longer pattern (trigger or forbidden) may still complete from this node going
    /// forward in the trie (some proper descendant ends a pattern).
    extends: Vec<bool>,
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
    #[allow(clippy::needless_range_loop)]
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
        // Nodes are numbered parents first, so one reverse pass sees children before parents.
        let mut extends = vec![false; count];
        for n in (0..count).rev() {
            extends[n] = children[n].values().any(|&c| own_trigger[c as usize].is_some() || own_forbidden[c as usize] || extends[c as usize]);
        }
        Ac { next, done, children, extends }
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
///
/// A trigger that completes where a longer pattern may still complete (the text so far ends
/// with a proper prefix of a longer trigger or excluded string) is pending, as in xgrammar:
/// if the text goes on to complete the longer pattern, that one decides (a longer trigger is
/// dispatched, an excluded string rejects the text); as soon as it cannot, the pending
/// trigger is dispatched. So the text up to trigger `t` is: no pattern completes before a
/// point where `t` is the longest trigger completing, except triggers completing while a
/// longer pattern stays possible and the text follows that pattern forward.
pub fn automaton(patterns: &[(Vec<u8>, Role)], goal: Goal, max_chars: Option<u32>, max_states: usize) -> Option<ByteAutomaton> {
    build(patterns, goal, None, max_chars, max_states)
}

/// The text up to trigger `t` (as [`Goal::UpToTrigger`]) followed by `rest`, the remainder of
/// a tag's begin after the trigger: where `t` was pending (a longer pattern could still
/// complete), `rest` must not complete that longer pattern — had the text gone on to complete
/// it, that pattern would have decided instead of `t`. (Only `rest` is looked at: a tag whose
/// whole begin stays on the way to a longer pattern is accepted whatever its content does.)
pub fn lead_then(patterns: &[(Vec<u8>, Role)], t: usize, rest: &[u8], max_states: usize) -> Option<ByteAutomaton> {
    build(patterns, Goal::UpToTrigger(t), Some(rest), None, max_states)
}

/// Whether trigger `t` can be pending anywhere (complete where a longer pattern may still
/// complete); when it cannot, [`lead_then`] is [`automaton`] followed by the literal `rest`.
pub fn may_pend(patterns: &[(Vec<u8>, Role)], t: usize) -> bool {
    let ac = Ac::new(patterns);
    (0..ac.done.len()).any(|n| ac.done[n] == Some(Decision::Dispatch(t)) && ac.extends[n])
}

/// No trie node: the pending path has been left.
const OFF_PATH: u32 = u32::MAX;

fn build(patterns: &[(Vec<u8>, Role)], goal: Goal, then: Option<&[u8]>, max_chars: Option<u32>, max_states: usize) -> Option<ByteAutomaton> {
    let ac = Ac::new(patterns);
    // Product states (ac node, utf8 state, chars so far, pending, tail), numbered in BFS
    // order. `tail` is 0 while the text before the trigger is read, k + 1 once k bytes of
    // `then` have been (then `node` is the trie node on the pending path, or OFF_PATH).
    type Key = (u32, u8, u32, bool, u32);
    let mut ids: HashMap<Key, u32> = HashMap::new();
    let mut keys: Vec<Key> = Vec::new();
    let mut trans: Vec<Vec<(u8, u8, u32)>> = Vec::new();
    let mut accept: Vec<bool> = Vec::new();
    let start: Key = (0, 0, 0, false, 0);
    ids.insert(start, 0);
    keys.push(start);
    let mut intern = |key: Key, keys: &mut Vec<Key>| -> Option<u32> {
        if let Some(&id) = ids.get(&key) {
            return Some(id);
        }
        if keys.len() >= max_states {
            return None;
        }
        let id = keys.len() as u32;
        ids.insert(key, id);
        keys.push(key);
        Some(id)
    };
    let mut i = 0;
    while i < keys.len() {
        let (node, u, c, pending, tail) = keys[i];
        let mut row: Vec<(u8, u8, u32)> = Vec::new();
        if tail > 0 {
            // Reading `then` (a literal), checking the pending path.
            let rest = then.unwrap_or_default();
            let k = (tail - 1) as usize;
            if let Some(&b) = rest.get(k) {
                let next = if node == OFF_PATH {
                    Some(OFF_PATH)
                } else {
                    match ac.children[node as usize].get(&b) {
                        None => Some(OFF_PATH),
                        // The longer pattern completes: it, not the trigger, decides.
                        Some(&ch) if ac.done[ch as usize].is_some() => None,
                        Some(&ch) => Some(if ac.extends[ch as usize] { ch } else { OFF_PATH }),
                    }
                };
                if let Some(n2) = next {
                    let id = intern((n2, 0, 0, false, tail + 1), &mut keys)?;
                    row.push((b, b, id));
                }
            }
            trans.push(row);
            accept.push(k == rest.len());
            i += 1;
            continue;
        }
        let n = node as usize;
        let acc = u == 0
            && match goal {
                Goal::Free => !pending && ac.done[n].is_none(),
                Goal::UpToTrigger(t) => ac.done[n] == Some(Decision::Dispatch(t)),
            };
        if pending || ac.done[n].is_none() {
            for b in 0..=255u8 {
                let Some(u2) = utf8_step(u, b) else { continue };
                let c2 = if u2 == 0 { c + 1 } else { c };
                if let Some(m) = max_chars {
                    if c2 > m || (u2 != 0 && c + 1 > m) {
                        continue;
                    }
                }
                // While a trigger is pending, only the way on to a longer pattern is open.
                let n2 = if pending {
                    match ac.children[n].get(&b) {
                        Some(&ch) => ch,
                        None => continue,
                    }
                } else {
                    ac.next[n * 256 + b as usize]
                };
                let d = ac.done[n2 as usize];
                let ext = ac.extends[n2 as usize];
                let pending2 = match (goal, d) {
                    (_, Some(Decision::Reject)) => continue,
                    (Goal::Free, Some(Decision::Dispatch(_))) => continue,
                    (Goal::UpToTrigger(t), Some(Decision::Dispatch(j))) if j == t || ext => true,
                    (Goal::UpToTrigger(_), Some(Decision::Dispatch(_))) => continue,
                    (_, None) if pending && !ext => continue,
                    (_, None) => pending,
                };
                let key = match (goal, d, then) {
                    // The trigger is found: `then` follows, from this node's pending path.
                    (Goal::UpToTrigger(t), Some(Decision::Dispatch(j)), Some(_)) if j == t => (if ext { n2 } else { OFF_PATH }, 0, 0, false, 1),
                    _ => (n2, u2, if max_chars.is_some() { c2 } else { 0 }, pending2, 0),
                };
                let id = intern(key, &mut keys)?;
                match row.last_mut() {
                    Some(last) if last.2 == id && last.1 as u16 + 1 == b as u16 => last.1 = b,
                    _ => row.push((b, b, id)),
                }
            }
        }
        trans.push(row);
        accept.push(acc && then.is_none());
        i += 1;
    }
    Some(ByteAutomaton::new(trans, accept, 0))
}

/// The strings of `lang` other than those of `names`: the product of `lang`'s automaton with a
/// trie of the names (used for the keys of other properties in the XML styles, so that they
/// cannot repeat a declared one). States are (automaton state, trie node or "off the trie").
///
/// With `avoid` (free text in which some strings may not occur, see [`automaton`]), the strings
/// must also be in that language: a third component follows it.
pub fn excluding(lang: &Dfa, names: &[&[u8]], avoid: Option<&ByteAutomaton>) -> ByteAutomaton {
    const OFF: u32 = u32::MAX;
    let a_start = avoid.map_or(0, |a| a.start());
    let a_next = |s: u32, b: u8| -> Option<u32> {
        match avoid {
            None => Some(0),
            Some(a) => a.edges(s as usize).iter().find(|(lo, hi, _)| *lo <= b && b <= *hi).map(|e| e.2),
        }
    };
    // Trie of the names: children and whether a node ends a name.
    let mut children: Vec<HashMap<u8, u32>> = vec![HashMap::new()];
    let mut is_name = vec![false];
    for name in names {
        let mut n = 0usize;
        for &b in name.iter() {
            n = match children[n].get(&b) {
                Some(&c) => c as usize,
                None => {
                    children.push(HashMap::new());
                    is_name.push(false);
                    let c = children.len() - 1;
                    children[n].insert(b, c as u32);
                    c
                }
            };
        }
        is_name[n] = true;
    }
    let mut ids: HashMap<(u32, u32, u32), u32> = HashMap::new();
    let mut queue: Vec<(u32, u32, u32)> = vec![(lang.start(), 0, a_start)];
    ids.insert((lang.start(), 0, a_start), 0);
    let (mut trans, mut accept) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < queue.len() {
        let (d, t, a) = queue[i];
        let mut row: Vec<(u8, u8, u32)> = Vec::new();
        for b in 0..=255u8 {
            let d2 = lang.next(d, b);
            let Some(a2) = a_next(a, b).filter(|_| d2 != DEAD) else {
                continue;
            };
            let t2 = if t == OFF { OFF } else { children[t as usize].get(&b).copied().unwrap_or(OFF) };
            let next = ids.len() as u32;
            let id = *ids.entry((d2, t2, a2)).or_insert_with(|| {
                queue.push((d2, t2, a2));
                next
            });
            match row.last_mut() {
                Some(last) if last.2 == id && last.1 as u16 + 1 == b as u16 => last.1 = b,
                _ => row.push((b, b, id)),
            }
        }
        trans.push(row);
        accept.push(lang.is_accepting(d) && (t == OFF || !is_name[t as usize]) && avoid.is_none_or(|x| x.accepts(a as usize)));
        i += 1;
    }
    ByteAutomaton::new(trans, accept, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference: does `s` (bytes) satisfy `goal`? Scans prefixes in order, by string
    /// operations only (no automaton).
    fn reference(patterns: &[(Vec<u8>, Role)], goal: Goal, max_chars: Option<u32>, s: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(s) else { return false };
        if let Some(m) = max_chars {
            if text.chars().count() > m as usize {
                return false;
            }
        }
        // What completes on the string `w` (a text prefix, or the trie path while pending):
        // None, Some(None) = rejected, Some(Some(role of the longest trigger)).
        let completes = |w: &[u8]| -> Option<Option<Role>> {
            let ending: Vec<&(Vec<u8>, Role)> = patterns.iter().filter(|(p, _)| w.ends_with(p)).collect();
            if ending.is_empty() {
                return None;
            }
            if ending.iter().any(|(_, r)| *r == Role::Forbidden) {
                return Some(None);
            }
            Some(ending.iter().max_by_key(|(p, _)| p.len()).map(|(_, r)| *r))
        };
        let is_goal = |r: Option<Role>| matches!((goal, r), (Goal::UpToTrigger(t), Some(Role::Trigger(j))) if t == j);
        for end in 1..=s.len() {
            let Some(first) = completes(&s[..end]) else { continue };
            if first.is_none() || goal == Goal::Free {
                return false;
            }
            if is_goal(first) && end == s.len() {
                return true;
            }
            // Pending: when the longest suffix of the text that is a prefix of some pattern is
            // a proper prefix of a longer pattern.
            let longer = |w: &[u8]| patterns.iter().any(|(t, _)| t.len() > w.len() && t.starts_with(w));
            let k = (0..end).find(|&k| patterns.iter().any(|(p, _)| p.starts_with(&s[k..end]))).unwrap_or(end);
            if !longer(&s[k..end]) {
                return false;
            }
            let mut w = s[k..end].to_vec();
            for &b in &s[end..] {
                w.push(b);
                if !patterns.iter().any(|(t, _)| t.starts_with(&w)) {
                    return false;
                }
                match completes(&w) {
                    Some(None) => return false,
                    Some(r) if is_goal(r) && w.len() + k == s.len() => return true,
                    Some(_) | None => {
                        if !longer(&w) {
                            return false;
                        }
                    }
                }
            }
            return false;
        }
        goal == Goal::Free
    }

    fn accepts(a: &ByteAutomaton, s: &[u8]) -> bool {
        a.matches(s)
    }

    #[test]
    fn matches_reference_on_all_short_strings() {
        let t = |s: &str, i| (s.as_bytes().to_vec(), Role::Trigger(i));
        let f = |s: &str| (s.as_bytes().to_vec(), Role::Forbidden);
        let sets = vec![
            vec![t("ab", 0), t("b", 1), f("ca"), t("abc", 2)],
            vec![t("b", 0), t("abcb", 1), f("bb")],
            vec![t("aa", 0), t("aab", 1), f("c")],
            vec![t("ab", 0), t("ba", 1), f("aba")],
            vec![t("abc", 0), f("x"), t("c", 1)],
        ];
        let alphabet = [b'a', b'b', b'c', b'x'];
        for pats in &sets {
            let ntrig = pats.iter().filter(|(_, r)| *r != Role::Forbidden).count();
            let goals: Vec<Goal> = std::iter::once(Goal::Free).chain((0..ntrig).map(Goal::UpToTrigger)).collect();
            for &goal in &goals {
                for max in [None, Some(4)] {
                    let a = automaton(pats, goal, max, 10_000).unwrap();
                    let mut strs: Vec<Vec<u8>> = vec![vec![]];
                    assert_eq!(accepts(&a, b""), reference(pats, goal, max, b""));
                    for _ in 0..6 {
                        let mut more = Vec::new();
                        for s in &strs {
                            for &c in &alphabet {
                                let mut t = s.clone();
                                t.push(c);
                                more.push(t);
                            }
                        }
                        for s in &more {
                            assert_eq!(accepts(&a, s), reference(pats, goal, max, s), "{pats:?} {goal:?} {max:?} {:?}", String::from_utf8_lossy(s));
                        }
                        strs = more;
                    }
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
    fn lead_then_checks_the_pending_path() {
        let t = |s: &str, i| (s.as_bytes().to_vec(), Role::Trigger(i));
        let f = |s: &str| (s.as_bytes().to_vec(), Role::Forbidden);
        let pats = vec![t("b", 0), f("<b<")];
        let run = |pats: &[(Vec<u8>, Role)], tr, rest: &str, s: &str| accepts(&lead_then(pats, tr, rest.as_bytes(), 10_000).unwrap(), s.as_bytes());
        assert!(may_pend(&pats, 0));
        assert!(run(&pats, 0, "", "<b"));
        assert!(!run(&pats, 0, "<", "<b<"));
        assert!(!run(&pats, 0, "<x", "<b<x"));
        assert!(run(&pats, 0, "x", "<bx"));
        assert!(run(&pats, 0, "<", "ab<"));
        let pats = vec![t("b", 0), t("abc", 1)];
        assert!(!run(&pats, 0, "c1", "abc1"));
        assert!(run(&pats, 0, "1", "ab1"));
        assert!(run(&pats, 0, "c1", "bc1"));
        assert!(run(&pats, 1, "2", "xabc2"));
        assert!(!run(&pats, 1, "2", "xabc"));
        let pats = vec![t("<tool_call>", 0)];
        assert!(!may_pend(&pats, 0));
        assert!(run(&pats, 0, "\n{", "hi <tool_call>\n{"));
    }

    #[test]
    fn identifiers_other_than_names() {
        let limits = corral_core::Limits::default();
        let ident = Dfa::from_rx(&corral_core::parse_regex("[A-Za-z_][A-Za-z0-9_]*", &limits).unwrap(), &limits).unwrap();
        let a = excluding(&ident, &[b"city", b"ci", b"not-ident"], None);
        for (s, ok) in [("city", false), ("ci", false), ("c", true), ("cit", true), ("citys", true), ("_x9", true), ("9x", false), ("", false), ("a-b", false), ("not", true)] {
            assert_eq!(a.matches(s.as_bytes()), ok, "{s}");
        }
        // Names made of escapes (cohere_xml's keys): "a&amp;" is excluded, "a&amp;b" and "a&" are not keys or are other keys.
        let key = Dfa::from_rx(&corral_core::parse_regex("([^\\x00\"&<>]|&amp;|&lt;|&gt;|&quot;)+", &limits).unwrap(), &limits).unwrap();
        let a = excluding(&key, &[b"a&amp;"], None);
        for (s, ok) in [("a&amp;", false), ("a&amp;b", true), ("a&", false), ("a&am", false), ("a", true), ("é&lt;", true), ("a\"", false)] {
            assert_eq!(a.matches(s.as_bytes()), ok, "{s}");
        }
    }

    #[test]
    fn state_cap() {
        let pats = vec![(b"abc".to_vec(), Role::Forbidden)];
        assert!(automaton(&pats, Goal::Free, Some(10_000), 1000).is_none());
    }
}
