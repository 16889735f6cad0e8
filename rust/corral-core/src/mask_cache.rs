//! Whole-mask cache: a bounded map from the structural state of a matcher to its finished mask.
//!
//! The key hashes (128 bits) the lexemes in progress — terminal, DFA state and the structural
//! hash of the parser row each started at ([`crate::earley::Parser::row_hash`]) — so states
//! that recur (they dominate JSON: every array element, every object member at one depth)
//! cost one copy. A mask whose few ids the fill listed is kept as that list (most masks
//! outside string bodies allow a handful of tokens, and storing each as a fresh 16 KB block
//! was the largest cost of a miss). A mask made of a cached context-independent entry's
//! bitmask and a few more ids (a string body and the tokens that close it) is kept as that
//! bitmask, shared ([`TokenSet::with_ids`]), and the ids: copying it was a fresh 16 KB block
//! per miss, whose first touch (page faults, 2 MB huge pages zeroed) cost more than the fill
//! itself. Bounded by a byte budget that counts shared bitmasks too (the token-set cache may
//! drop their entries first); when full it starts over.

use crate::token_set::TokenSet;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Default byte budget per compiled grammar.
pub const DEFAULT_MASK_CACHE_BYTES: usize = 64 << 20;

/// The cache (one per compiled grammar, shared by its matchers).
#[derive(Debug)]
pub struct MaskCache {
    map: Mutex<FxHashMap<u128, Arc<TokenSet>>>,
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
    pub fn insert(&self, key: u128, mask: TokenSet) {
        let m = Arc::new(mask);
        let size = (m.retained_bytes() + 48) as u64;
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if self.bytes.load(Relaxed) + size > self.budget as u64 {
            map.clear();
            self.bytes.store(0, Relaxed);
        }
        if let Some(old) = map.insert(key, m) {
            self.bytes.fetch_sub((old.retained_bytes() + 48) as u64, Relaxed);
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

    /// A mask kept as a shared bitmask plus ids comes back as both, and the budget counts
    /// the bitmask (the cache may be the last to hold it).
    #[test]
    fn masks_over_a_shared_bitmask_write_it_and_their_ids() {
        let words = 4;
        let bits = TokenSet::Bits(vec![0b1011u32, 0, u32::MAX, 1 << 31].into());
        let cache = MaskCache::new(1 << 20, words);
        cache.insert(7, bits.with_ids(&[2, 40, 2]));
        cache.insert(8, TokenSet::Ids(vec![5].into_boxed_slice()));
        let mut out = vec![u32::MAX; words];
        assert!(cache.get(7, &mut out));
        assert_eq!(out, vec![0b1111, 1 << 8, u32::MAX, 1 << 31]);
        assert!(cache.get(8, &mut out));
        assert_eq!(out, vec![1 << 5, 0, 0, 0]);
        assert!(!cache.get(9, &mut out));
        let counted = cache.memory_bytes();
        assert!((16..16 + 200).contains(&counted), "the shared bitmask counted once: {counted}");
    }
}
