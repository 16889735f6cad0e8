//! Per-state byte sets stored once per distinct set.
//!
//! Every state of a dense DFA records the bytes that lead to a live state
//! ([`crate::automata::dfa::Dfa::live_bytes`]). At 32 bytes per state that was a third of a
//! `maxLength: 160` string's 3,204-state automaton, all of it fresh memory when first built,
//! while a handful of distinct sets serve all its states (every count state has the same
//! one): each state keeps a 16-bit id into a table of the distinct sets. (A sparse automaton
//! stores none: its states' one to three edges give the set when asked.)

use crate::runtime::byteset::ByteSet;
use rustc_hash::FxHashMap;

/// Byte sets per state, each distinct set stored once.
#[derive(Debug, Clone, Default)]
pub(crate) struct LiveSets {
    /// Per state, its set's index in `sets`.
    id: Vec<u16>,
    /// The distinct sets.
    sets: Vec<ByteSet>,
}

impl LiveSets {
    /// The set of state `s`.
    #[inline(always)]
    pub(crate) fn get(&self, s: usize) -> &ByteSet {
        &self.sets[self.id[s] as usize]
    }

    /// The index of state `s`'s set: equal indices, equal sets (and the converse).
    #[cfg(test)]
    #[inline(always)]
    pub fn id(&self, s: usize) -> u16 {
        self.id[s]
    }

    /// Number of states.
    pub(crate) fn len(&self) -> usize {
        self.id.len()
    }

    /// Heap bytes.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.id.capacity() * 2 + self.sets.capacity() * std::mem::size_of::<ByteSet>()
    }
}

/// Builds a [`LiveSets`] state by state.
pub(crate) struct LiveSetsBuilder {
    out: LiveSets,
    /// The index of each set seen so far.
    index: FxHashMap<ByteSet, u16>,
}

impl LiveSetsBuilder {
    /// A builder with room for `states` states.
    pub(crate) fn with_capacity(states: usize) -> LiveSetsBuilder {
        LiveSetsBuilder { out: LiveSets { id: Vec::with_capacity(states), sets: Vec::new() }, index: FxHashMap::default() }
    }

    /// Adds the next state's set. At most 65,536 states (a DFA's state ids are 16-bit), so
    /// at most that many distinct sets and every index fits.
    pub(crate) fn push(&mut self, set: ByteSet) {
        let id = match self.out.id.last() {
            // (Consecutive states often share a set: the count states of a bounded string
            // are interleaved with few others.)
            Some(&last) if self.out.sets[last as usize] == set => last,
            _ => match self.index.get(&set) {
                Some(&id) => id,
                None => {
                    let id = self.add(set);
                    self.index.insert(set, id);
                    id
                }
            },
        };
        self.out.id.push(id);
    }

    /// Stores a new distinct set; its index.
    fn add(&mut self, set: ByteSet) -> u16 {
        debug_assert!(self.out.sets.len() <= u16::MAX as usize, "more distinct sets than 16-bit ids");
        self.out.sets.push(set);
        (self.out.sets.len() - 1) as u16
    }

    /// The sets pushed.
    pub(crate) fn finish(mut self) -> LiveSets {
        self.out.sets.shrink_to_fit();
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_sets_share_one_entry_and_keep_their_states() {
        let set = |bytes: &[u8]| {
            let mut s = ByteSet::default();
            for &b in bytes {
                s.insert(b);
            }
            s
        };
        let states = [set(b"ab"), set(b"ab"), set(b""), set(b"xyz"), set(b"ab"), set(b""), set(b"\xff")];
        let mut b = LiveSetsBuilder::with_capacity(states.len());
        for s in states {
            b.push(s);
        }
        let t = b.finish();
        assert_eq!(t.len(), states.len());
        for (i, s) in states.iter().enumerate() {
            assert_eq!(t.get(i), s, "state {i}");
            for (j, u) in states.iter().enumerate() {
                assert_eq!(t.id(i) == t.id(j), s == u, "states {i} and {j}");
            }
        }
        assert_eq!(t.sets.len(), 4, "one entry per distinct set");
    }
}
