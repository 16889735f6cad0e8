//! Whole-mask cache: a bounded map from the structural state of a matcher to its finished mask.
//!
//! The key hashes (128 bits) the lexemes in progress — terminal, DFA state and the structural
//! hash of the parser row each started at ([`crate::earley::Parser::row_hash`]) — so states
//! that recur (they dominate JSON: every array element, every object member at one depth)
//! cost one copy. Bounded by a byte budget; when full it starts over.

use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Default byte budget per compiled grammar.
pub const DEFAULT_MASK_CACHE_BYTES: usize = 64 << 20;

/// The cache (one per compiled grammar, shared by its matchers).
#[derive(Debug)]
pub struct MaskCache {
    map: Mutex<FxHashMap<u128, Arc<[u32]>>>,
    max_entries: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl MaskCache {
    /// A cache of at most `budget` bytes of masks of `words` words each.
    pub fn new(budget: usize, words: usize) -> MaskCache {
        MaskCache { map: Mutex::new(FxHashMap::default()), max_entries: (budget / (words * 4).max(1)).max(1), hits: 0.into(), misses: 0.into() }
    }

    /// Copies the cached mask for `key` into `out` (its first words); false on a miss.
    pub fn get(&self, key: u128, out: &mut [u32]) -> bool {
        let hit = self.map.lock().unwrap_or_else(|p| p.into_inner()).get(&key).cloned();
        match hit {
            Some(m) => {
                out[..m.len()].copy_from_slice(&m);
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
    pub fn insert(&self, key: u128, mask: &[u32]) {
        let m: Arc<[u32]> = Arc::from(mask);
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= self.max_entries {
            map.clear();
        }
        map.insert(key, m);
    }

    /// (hits, misses) so far.
    pub fn stats(&self) -> (u64, u64) {
        (self.hits.load(Relaxed), self.misses.load(Relaxed))
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.values().map(|m| m.len() * 4 + 48).sum()
    }
}
