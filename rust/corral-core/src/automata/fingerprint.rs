//! Language ids: one process-wide number per distinct language a DFA state accepts, so that
//! states of different automata that accept the same strings share token-set cache entries.
//!
//! Every object in a JSON Schema gets its own key automaton (any string except the declared
//! names), yet past the declared names they are all the same "rest of a JSON string" state,
//! whose token set is a walk of nearly the whole vocabulary. Keyed by automaton and state,
//! each object pays that walk again; keyed by language, once per process.
//!
//! The id is exact, not a hash: the states reachable from the state (at most
//! [`MAX_STATES`], else there is no id) are minimised, numbered in breadth-first order by
//! byte, and the resulting table — byte ranges rather than the automaton's own byte classes —
//! is interned. Two states get the same id only if their reachable automata are isomorphic
//! after minimisation, that is only if they accept the same language (and they do while the
//! table, bounded by [`crate::automata::id_table`], holds it: after an eviction a language may get a
//! second id, never another language's).

use crate::automata::dfa::{Dfa, DEAD};
use crate::automata::id_table::{IdTable, SharedTable};
use crate::runtime::memory::Kind;
use rustc_hash::FxHashMap;
use std::sync::{Mutex, OnceLock};

/// Most reachable states for which a language id is computed. The languages worth sharing
/// are small (the rest of any JSON string: 14 states with escapes and UTF-8); a key's state
/// partway through a declared name reaches that name's remaining characters, six states
/// each with their escapes, and would pay up to a few hundred microseconds for an id only
/// that object uses. Over the 100 benchmark schemas' walks, 64 → 32 took fills over 100 µs
/// from 480–493 to 354–385 with the same cache sharing (16 lost it: 6,672 entries, not 6,455).
pub(crate) const MAX_STATES: usize = 32;

/// An empty table of serialized automata, weighed by their bytes, under the memory budget.
fn id_table() -> std::sync::Arc<SharedTable<Vec<u32>>> {
    SharedTable::new(Kind::LanguageIds, |t| t.len() * 4 + 64)
}

/// Minimal automata (numbered canonically) and their language ids.
fn table() -> &'static Mutex<IdTable<Vec<u32>>> {
    static T: OnceLock<std::sync::Arc<SharedTable<Vec<u32>>>> = OnceLock::new();
    &T.get_or_init(id_table).table
}

/// Marks the dead state in a serialized table.
const NONE: u32 = u32::MAX;

impl Dfa {
    /// The process-wide id of the language `state` accepts, if it has one; computed once per
    /// state (only a loop state has one: see `Dfa::memo_language_id`).
    pub fn language_id(&self, state: u32) -> Option<u32> {
        self.memo_language_id(state, language_id)
    }
}

/// The language id of `state` of `dfa`, or `None` when more than [`MAX_STATES`] states are
/// reachable from it.
pub(crate) fn language_id(dfa: &Dfa, state: u32) -> Option<u32> {
    // Byte runs of equal class, in byte order.
    let mut runs: Vec<(u8, u8, u8)> = Vec::new();
    for b in 0..=255u8 {
        let c = dfa.class_of(b);
        match runs.last_mut() {
            Some(r) if r.2 == c => r.1 = b,
            _ => runs.push((b, b, c)),
        }
    }
    let classes = dfa.num_classes();
    // Reachable states (discovery order) and their successors by class, as local numbers
    // (`NONE`: dead).
    let mut local = LocalIds::default();
    let mut states = vec![state];
    local.insert(state, 0);
    let mut succ_tab: Vec<u32> = Vec::with_capacity(MAX_STATES * classes);
    let mut i = 0;
    while i < states.len() {
        let s = states[i];
        for c in 0..classes {
            let t = dfa.next_class(s, c);
            if t == DEAD {
                succ_tab.push(NONE);
                continue;
            }
            let id = match local.get(t) {
                Some(id) => id,
                None => {
                    if states.len() == MAX_STATES {
                        return None;
                    }
                    let id = states.len() as u32;
                    local.insert(t, id);
                    states.push(t);
                    id
                }
            };
            succ_tab.push(id);
        }
        i += 1;
    }
    let n = states.len();
    let succ = |i: usize, c: usize| -> u32 { succ_tab[i * classes + c] };
    // The reachable automaton as it is: automata built by the same code for different
    // schemas (every object's "rest of the key" state) are usually isomorphic already, and
    // then the id is known without minimising.
    let raw = serialize(&runs, 0, n, |i| dfa.is_accepting(states[i]), |i, c| match succ(i, c) {
        NONE => None,
        t => Some(t as usize),
    });
    if let Some(id) = raw_table().lock().unwrap_or_else(|p| p.into_inner()).get(&raw[..]) {
        return Some(id);
    }
    // Byte classes that no reachable state tells apart are one column for minimisation
    // (an object's key automaton has classes for every declared name; its "rest of the key"
    // part sees two or three).
    let columns: Vec<usize> = {
        let mut seen: FxHashMap<Vec<u32>, usize> = FxHashMap::default();
        (0..classes).filter(|&c| seen.insert((0..n).map(|i| succ(i, c)).collect(), c).is_none()).collect()
    };
    // Minimisation: plain equivalence is bounded equivalence for inputs as long as the
    // automaton has states; the worklist refinement re-examines only predecessors of states
    // that changed class (a chain of escapes and suffixes takes one round per state, and a
    // round that re-signed every state made this the bulk of a cold fill).
    let cols = columns.len();
    let mut trans = vec![DEAD; (n + 1) * cols];
    for i in 0..n {
        for (x, &c) in columns.iter().enumerate() {
            let t = succ(i, c);
            if t != NONE {
                trans[(i + 1) * cols + x] = t + 1;
            }
        }
    }
    let accepting: Vec<bool> = std::iter::once(false).chain((0..n).map(|i| dfa.is_accepting(states[i]))).collect();
    let rep = crate::automata::kequiv::k_equivalence(&trans, cols, &accepting, DEAD, n + 1).rep;
    let mut block_of_rep = vec![NONE; n + 1];
    let mut count = 0usize;
    let block: Vec<u32> = (1..=n)
        .map(|i| {
            let r = rep[i] as usize;
            if block_of_rep[r] == NONE {
                block_of_rep[r] = count as u32;
                count += 1;
            }
            block_of_rep[r]
        })
        .collect();
    // The minimal automaton, numbered canonically: its blocks, each through one member.
    let member: Vec<usize> = {
        let mut m = vec![usize::MAX; count];
        for i in 0..n {
            if m[block[i] as usize] == usize::MAX {
                m[block[i] as usize] = i;
            }
        }
        m
    };
    let out = serialize(&runs, block[0] as usize, count, |b| dfa.is_accepting(states[member[b]]), |b, c| match succ(member[b], c) {
        NONE => None,
        t => Some(block[t as usize] as usize),
    });
    let id = table().lock().unwrap_or_else(|p| p.into_inner()).intern(out)?;
    raw_table().lock().unwrap_or_else(|p| p.into_inner()).insert(raw, id);
    Some(id)
}

/// The local numbers of at most [`MAX_STATES`] automaton states: a small open-addressing
/// table (an array indexed by state would be allocated and cleared at the size of the whole
/// automaton, thousands of states for a key among many declared names, at every call).
struct LocalIds([(u32, u32); LOCAL_SLOTS]);

/// Slots of [`LocalIds`]: a power of two, at least four times [`MAX_STATES`].
const LOCAL_SLOTS: usize = 128;
const _: () = assert!(LOCAL_SLOTS.is_power_of_two() && LOCAL_SLOTS >= 4 * MAX_STATES && LOCAL_SLOTS == 1 << (32 - 25));

impl Default for LocalIds {
    fn default() -> Self {
        LocalIds([(NONE, 0); LOCAL_SLOTS])
    }
}

impl LocalIds {
    fn slot(&self, state: u32) -> usize {
        let mut i = (state.wrapping_mul(0x9E37_79B9) >> 25) as usize;
        while self.0[i].0 != NONE && self.0[i].0 != state {
            i = (i + 1) % LOCAL_SLOTS;
        }
        i
    }

    fn get(&self, state: u32) -> Option<u32> {
        let e = self.0[self.slot(state)];
        (e.0 == state).then_some(e.1)
    }

    fn insert(&mut self, state: u32, id: u32) {
        let i = self.slot(state);
        self.0[i] = (state, id);
    }
}

/// Serialized automata as they were met (not minimised) and their language ids.
fn raw_table() -> &'static Mutex<IdTable<Vec<u32>>> {
    static T: OnceLock<std::sync::Arc<SharedTable<Vec<u32>>>> = OnceLock::new();
    &T.get_or_init(id_table).table
}

/// The automaton reachable from node `root` as a table independent of node and byte-class
/// numbering: nodes numbered breadth first from `root` (successors in byte order); per node,
/// whether it accepts, its number of byte ranges, and each range `lo, hi, target` (adjacent
/// byte runs with one target merged; `NONE` for the dead state). `succ(node, class)` is the
/// successor node, `runs` the byte runs of equal class in byte order; nodes are below `nodes`.
fn serialize(runs: &[(u8, u8, u8)], root: usize, nodes: usize, accepting: impl Fn(usize) -> bool, succ: impl Fn(usize, usize) -> Option<usize>) -> Vec<u32> {
    let mut order: Vec<usize> = vec![root];
    let mut number: Vec<u32> = vec![NONE; nodes];
    number[root] = 0;
    let mut out: Vec<u32> = Vec::with_capacity(nodes * (2 + 3 * runs.len().min(8)));
    let mut q = 0;
    while q < order.len() {
        let node = order[q];
        out.push(accepting(node) as u32);
        let mark = out.len();
        out.push(0);
        let mut last: Option<(u8, u8, u32)> = None;
        for &(lo, hi, c) in runs {
            let t = match succ(node, c as usize) {
                None => NONE,
                Some(b) => {
                    if number[b] == NONE {
                        number[b] = order.len() as u32;
                        order.push(b);
                    }
                    number[b]
                }
            };
            // Adjacent runs with one target are one range (byte classes differ per automaton).
            match &mut last {
                Some(l) if l.2 == t => l.1 = hi,
                _ => {
                    if let Some(l) = last.take() {
                        out.extend([l.0 as u32, l.1 as u32, l.2]);
                    }
                    last = Some((lo, hi, t));
                }
            }
        }
        if let Some(l) = last {
            out.extend([l.0 as u32, l.1 as u32, l.2]);
        }
        out[mark] = ((out.len() - mark - 1) / 3) as u32;
        q += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Limits;

    fn dfa(rx: &str) -> Dfa {
        Dfa::from_rx(&crate::frontend::regex::parse_regex(rx, &Limits::default()).unwrap(), &Limits::default()).unwrap()
    }

    /// States that all hash to one slot are still told apart (linear probing), and absent
    /// states are not found.
    #[test]
    fn local_ids_survive_colliding_states() {
        let slot0: Vec<u32> = (1..u32::MAX).filter(|s| s.wrapping_mul(0x9E37_79B9) >> 25 == 0).take(MAX_STATES + 1).collect();
        let mut ids = LocalIds::default();
        for (i, &s) in slot0[..MAX_STATES].iter().enumerate() {
            assert_eq!(ids.get(s), None);
            ids.insert(s, i as u32);
        }
        for (i, &s) in slot0[..MAX_STATES].iter().enumerate() {
            assert_eq!(ids.get(s), Some(i as u32));
        }
        assert_eq!(ids.get(slot0[MAX_STATES]), None);
        assert_eq!(ids.get(12345), None);
    }

    #[test]
    fn equal_languages_share_an_id_across_automata() {
        // The state after "k" of a key automaton and the start of a plain string body.
        let a = dfa(r#""(k[^"]*|[^k"][^"]*)?""#);
        let b = dfa(r#"[^"]*""#);
        let a_mid = a.next(a.next(a.start(), b'"'), b'k');
        assert_eq!(language_id(&a, a_mid), language_id(&b, b.start()));
        assert!(language_id(&b, b.start()).is_some());
        // Different languages, different ids.
        let c = dfa(r#"[^"x]*""#);
        assert_ne!(language_id(&c, c.start()), language_id(&b, b.start()));
        assert_ne!(language_id(&a, a.start()), language_id(&b, b.start()));
        // Too many reachable states: no id.
        let d = dfa("[a-z]{100}");
        assert_eq!(language_id(&d, d.start()), None);
    }

    #[test]
    fn ids_are_equal_exactly_when_languages_are() {
        // States of random small automata over {a, b}: same id iff the same strings of up to
        // 12 bytes are accepted from both (enough to tell apart automata this small).
        let mut rnd = crate::testutil::xorshift(0x5851_f42d_4c95_7f2du64);
        let pieces = ["a", "b", "ab", "ba", "(a|b)", "a*", "b*", "(ab)*", "a?", "(a|bb)", "b{1,3}", "(a|ba)*", "(aa|b)"];
        let mut states: Vec<(std::sync::Arc<Dfa>, u32)> = Vec::new();
        for _ in 0..40 {
            let part = |rnd: &mut dyn FnMut(u64) -> u64| (0..1 + rnd(4)).map(|_| pieces[rnd(pieces.len() as u64) as usize]).collect::<String>();
            let rx = if rnd(3) == 0 { format!("({}|{})", part(&mut rnd), part(&mut rnd)) } else { part(&mut rnd) };
            let d = std::sync::Arc::new(dfa(&rx));
            for s in 1..d.num_states() as u32 {
                if d.live_bytes(s).len() > 0 || d.is_accepting(s) {
                    states.push((d.clone(), s));
                }
            }
        }
        let words: Vec<Vec<u8>> = (0..=12u32).flat_map(|len| (0..1u32 << len).map(move |bits| (0..len).map(|i| if bits >> i & 1 == 1 { b'b' } else { b'a' }).collect())).collect();
        let accepts = |d: &Dfa, s: u32| -> Vec<bool> {
            words
                .iter()
                .map(|w| {
                    let mut t = s;
                    for &b in w {
                        t = d.next(t, b);
                    }
                    t != DEAD && d.is_accepting(t)
                })
                .collect()
        };
        let langs: Vec<Vec<bool>> = states.iter().map(|(d, s)| accepts(d, *s)).collect();
        let ids: Vec<Option<u32>> = states.iter().map(|(d, s)| language_id(d, *s)).collect();
        let mut equal = 0;
        for _ in 0..4000 {
            let (x, y) = (rnd(states.len() as u64) as usize, rnd(states.len() as u64) as usize);
            let (Some(ix), Some(iy)) = (ids[x], ids[y]) else { continue };
            assert_eq!(ix == iy, langs[x] == langs[y], "states {x} and {y}");
            equal += (ix == iy && x != y) as usize;
        }
        assert!(equal > 20, "only {equal} pairs of distinct states with one language");
    }
}
