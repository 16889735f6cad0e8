//! Whole-mask cache: a bounded map from the structural state of a matcher to its finished mask.
//!
//! The key hashes (128 bits) the lexemes in progress — terminal, DFA state and the structural
//! hash of the parser row each started at ([`crate::earley::Parser::row_hash`]) — so states
//! that recur (they dominate JSON: every array element, every object member at one depth)
//! cost one copy. A mask whose few ids the fill listed is kept as that list (most masks
//! outside string bodies allow a handful of tokens, and storing each as a fresh 16 KB block
//! was the largest cost of a miss). A mask made of a cached context-independent entry's
//! bitmask and a few more ids (a string body and the tokens that close it) is kept as a
//! reference to that entry and the ids: copying it was a fresh 16 KB block per miss, whose
//! first touch (page faults, 2 MB huge pages zeroed) cost more than the fill itself. The
//! budget still counts the entry's bitmask (the token-set cache may drop the entry first).
//! Bounded by a byte budget; when full it starts over.

use crate::ci_cache::CiEntry;
use crate::token_set::TokenSet;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Default byte budget per compiled grammar.
pub const DEFAULT_MASK_CACHE_BYTES: usize = 64 << 20;

/// A kept mask.
#[derive(Debug)]
pub enum Cached {
    /// The whole set.
    Set(TokenSet),
    /// A context-independent entry's allowed tokens (shared with the vocabulary's token-set
    /// cache, and counted here too: see [`Cached::memory_bytes`]) plus these ids.
    Over(Arc<CiEntry>, Box<[u32]>),
}

impl Cached {
    /// Overwrites the first `words` words of `out` with this mask.
    pub fn write_to(&self, out: &mut [u32], words: usize) {
        match self {
            Cached::Set(s) => s.write_to(out, words),
            Cached::Over(e, ids) => {
                e.allowed.write_to(out, words);
                for &t in ids.iter() {
                    out[t as usize / 32] |= 1 << (t % 32);
                }
            }
        }
    }

    /// Heap bytes this mask keeps alive: the entry's token set is counted too, since the
    /// token-set cache may drop the entry while this mask still holds it (the entry's end
    /// groups and deeper levels, a few KB, are not).
    pub fn memory_bytes(&self) -> usize {
        match self {
            Cached::Set(s) => s.memory_bytes(),
            Cached::Over(e, ids) => e.allowed.retained_bytes() + ids.len() * 4 + 16,
        }
    }
}

/// The cache (one per compiled grammar, shared by its matchers).
#[derive(Debug)]
pub struct MaskCache {
    map: Mutex<FxHashMap<u128, Arc<Cached>>>,
    /// Bytes held by the masks.
    bytes: AtomicU64,
    budget: usize,
    words: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl MaskCache {
    /// A cache of at most `budget` bytes of masks of `words` words each.
    pub fn new(budget: usize, words: usize) -> MaskCache {
        MaskCache { map: Mutex::new(FxHashMap::default()), bytes: 0.into(), budget, words, hits: 0.into(), misses: 0.into() }
    }

    /// Copies the cached mask for `key` into `out` (its first words); false on a miss.
    pub fn get(&self, key: u128, out: &mut [u32]) -> bool {
        let hit = self.map.lock().unwrap_or_else(|p| p.into_inner()).get(&key).cloned();
        match hit {
            Some(m) => {
                m.write_to(out, self.words);
                self.hits.fetch_add(1, Relaxed);
                true
            }
            None => {
                self.misses.fetch_add(1, Relaxed);
                false
            }
        }
    }

    /// Stores a finished mask.
    pub fn insert(&self, key: u128, mask: Cached) {
        let m = Arc::new(mask);
        let size = (m.memory_bytes() + 48) as u64;
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if self.bytes.load(Relaxed) + size > self.budget as u64 {
            map.clear();
            self.bytes.store(0, Relaxed);
        }
        if let Some(old) = map.insert(key, m) {
            self.bytes.fetch_sub((old.memory_bytes() + 48) as u64, Relaxed);
        }
        self.bytes.fetch_add(size, Relaxed);
    }

    /// (hits, misses) so far.
    pub fn stats(&self) -> (u64, u64) {
        (self.hits.load(Relaxed), self.misses.load(Relaxed))
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.bytes.load(Relaxed) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ci_cache::Level;

    /// A mask kept over a cached entry comes back as that entry's bits plus its own ids,
    /// and counts the entry's bitmask against the budget (it may be the one holding it).
    #[test]
    fn masks_over_an_entry_write_its_bits_and_their_ids() {
        let words = 4;
        let bits = vec![0b1011u32, 0, u32::MAX, 1 << 31];
        let entry = Arc::new(CiEntry { allowed: TokenSet::Bits(bits.clone().into()), level: Level::default() });
        let cache = MaskCache::new(1 << 20, words);
        cache.insert(7, Cached::Over(entry, vec![2, 40, 2].into_boxed_slice()));
        cache.insert(8, Cached::Set(TokenSet::Ids(vec![5].into_boxed_slice())));
        let mut out = vec![u32::MAX; words];
        assert!(cache.get(7, &mut out));
        assert_eq!(out, vec![0b1111, 1 << 8, u32::MAX, 1 << 31]);
        assert!(cache.get(8, &mut out));
        assert_eq!(out, vec![1 << 5, 0, 0, 0]);
        assert!(!cache.get(9, &mut out));
        let counted = cache.memory_bytes();
        assert!((16..16 + 200).contains(&counted), "the entry's bitmask counted once: {counted}");
    }
}
