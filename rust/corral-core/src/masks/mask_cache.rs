//! Whole-mask cache: a bounded map from the structural state of a matcher to its finished mask.
//!
//! The key hashes (128 bits) the lexemes in progress — terminal, DFA state and the structural
//! hash of the parser row each started at ([`crate::parser::earley::Parser::row_hash`]) — so states
//! that recur (they dominate JSON: every array element, every object member at one depth)
//! cost one copy. A position whose key is new looks again by a coarser key that names what
//! its lexemes' states still accept rather than the states ([`crate::Matcher`]'s
//! `state_key`): states alike on every token then share the mask, which is filed under the
//! new key too. A mask whose few ids the fill listed is kept as that list (most masks
//! outside string bodies allow a handful of tokens, and storing each as a fresh 16 KB block
//! was the largest cost of a miss). A mask made of a cached context-independent entry's
//! bitmask and a few more ids (a string body and the tokens that close it) is kept as that
//! bitmask, shared ([`TokenSet::with_ids`]), and the ids: copying it was a fresh 16 KB block
//! per miss, whose first touch (page faults, 2 MB huge pages zeroed) cost more than the fill
//! itself. Bounded by a byte budget that counts shared bitmasks too (the token-set cache may
//! drop their entries first); when full it starts over.

use crate::vocab::token_set::TokenSet;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Default byte budget per compiled grammar.
pub(crate) const DEFAULT_MASK_CACHE_BYTES: usize = 64 << 20;

/// Bytes charged for a map entry besides its mask.
const ENTRY_BYTES: u64 = 48;

/// The cache (one per compiled grammar, shared by its matchers). A mask may sit under
/// several keys (one finer, one coarser: [`MaskCache::get_as`]); it is charged once.
#[derive(Debug)]
pub(crate) struct MaskCache {
    /// Each key's mask and the bytes charged for the entry.
    map: Mutex<FxHashMap<u128, (Arc<TokenSet>, u64)>>,
    /// Bytes held by the masks.
    bytes: AtomicU64,
    budget: usize,
    words: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl MaskCache {
    /// A cache of at most `budget` bytes of masks of `words` words each.
    pub(crate) fn new(budget: usize, words: usize) -> MaskCache {
        MaskCache { map: Mutex::new(FxHashMap::default()), bytes: 0.into(), budget, words, hits: 0.into(), misses: 0.into() }
    }

    /// Copies the cached mask for `key` into `out` (its first words); false when there is
    /// none (not counted as a miss: the caller goes on to [`MaskCache::get_as`]).
    pub(crate) fn get(&self, key: u128, out: &mut [u32]) -> bool {
        // (Written under the lock: a 16 KB copy at most, and no reference count touched.)
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(&key) {
            Some(m) => {
                m.0.write_to(out, self.words);
                drop(map);
                self.hits.fetch_add(1, Relaxed);
                true
            }
            None => false,
        }
    }

    /// Copies the cached mask for the coarser key `key` into `out` and files it under the
    /// finer key `alias` too (the next lookup by `alias` then hits at once); false, counted
    /// as a miss, when there is none.
    pub(crate) fn get_as(&self, key: u128, alias: u128, out: &mut [u32]) -> bool {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let Some(m) = map.get(&key).map(|e| e.0.clone()) else {
            drop(map);
            self.misses.fetch_add(1, Relaxed);
            return false;
        };
        // (Not when that would pass the budget: starting over there would leave the mask
        // under the alias alone, charged for the entry only.)
        if self.bytes.load(Relaxed) + ENTRY_BYTES <= self.budget as u64 {
            self.file(&mut map, alias, m.clone(), ENTRY_BYTES);
        }
        drop(map);
        m.write_to(out, self.words);
        self.hits.fetch_add(1, Relaxed);
        true
    }

    /// Stores a finished mask under each of `keys` (charged once, with an entry's bytes per
    /// further key). When it does not fit the budget, the cache starts over first.
    pub(crate) fn insert(&self, keys: &[u128], mask: TokenSet) {
        let m = Arc::new(mask);
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let size = m.retained_bytes() as u64 + ENTRY_BYTES;
        if self.bytes.load(Relaxed) + size + ENTRY_BYTES * keys.len().saturating_sub(1) as u64 > self.budget as u64 {
            map.clear();
            self.bytes.store(0, Relaxed);
        }
        for (i, &key) in keys.iter().enumerate() {
            self.file(&mut map, key, m.clone(), if i == 0 { size } else { ENTRY_BYTES });
        }
    }

    /// Files `m` under `key`, charged `size` bytes (what the entry it replaces was charged
    /// comes off).
    fn file(&self, map: &mut FxHashMap<u128, (Arc<TokenSet>, u64)>, key: u128, m: Arc<TokenSet>, size: u64) {
        if let Some((_, old)) = map.insert(key, (m, size)) {
            self.bytes.fetch_sub(old, Relaxed);
        }
        self.bytes.fetch_add(size, Relaxed);
    }

    /// (hits, misses) so far.
    pub(crate) fn stats(&self) -> (u64, u64) {
        (self.hits.load(Relaxed), self.misses.load(Relaxed))
    }

    /// Bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
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
        cache.insert(&[7], bits.with_ids(&[2, 40, 2]));
        cache.insert(&[8], TokenSet::Ids(vec![5].into_boxed_slice()));
        let mut out = vec![u32::MAX; words];
        assert!(cache.get(7, &mut out));
        assert_eq!(out, vec![0b1111, 1 << 8, u32::MAX, 1 << 31]);
        assert!(cache.get(8, &mut out));
        assert_eq!(out, vec![1 << 5, 0, 0, 0]);
        assert!(!cache.get(9, &mut out));
        let counted = cache.memory_bytes();
        assert!((16..16 + 200).contains(&counted), "the shared bitmask counted once: {counted}");
    }

    /// A mask filed under two keys is charged once (plus an entry); a lookup by a coarser key
    /// files it under the finer one, so that key hits next; only a lookup that finds nothing
    /// by either counts as a miss.
    #[test]
    fn a_mask_under_several_keys_is_charged_once() {
        let words = 4;
        let cache = MaskCache::new(1 << 20, words);
        let bits = TokenSet::Bits(vec![1u32, 2, 3, 4].into());
        let one = bits.retained_bytes() as u64 + ENTRY_BYTES;
        cache.insert(&[1, 2], bits);
        assert_eq!(cache.memory_bytes() as u64, one + ENTRY_BYTES);
        let mut out = vec![0u32; words];
        assert!(!cache.get(3, &mut out), "nothing under the finer key yet");
        assert!(cache.get_as(2, 3, &mut out));
        assert_eq!(out, vec![1, 2, 3, 4]);
        assert_eq!(cache.memory_bytes() as u64, one + 2 * ENTRY_BYTES);
        out.fill(0);
        assert!(cache.get(3, &mut out), "the finer key was filed");
        assert_eq!(out, vec![1, 2, 3, 4]);
        assert!(!cache.get_as(9, 8, &mut out));
        assert_eq!(cache.stats(), (2, 1));
        // Refiling a key takes off what it was charged.
        cache.insert(&[1], TokenSet::Ids(vec![5].into_boxed_slice()));
        assert_eq!(cache.memory_bytes() as u64, 3 * ENTRY_BYTES + TokenSet::Ids(vec![5].into_boxed_slice()).retained_bytes() as u64);
    }

    /// A cache that cannot fit a mask with its keys starts over before filing it (never
    /// leaving a mask charged only for an alias entry).
    #[test]
    fn a_full_cache_starts_over_before_filing() {
        let words = 4;
        let bits = || TokenSet::Bits(vec![7u32; 4].into());
        let one = bits().retained_bytes() as u64 + ENTRY_BYTES;
        let cache = MaskCache::new((2 * one + 2 * ENTRY_BYTES) as usize, words);
        cache.insert(&[1, 2], bits());
        cache.insert(&[3, 4], bits());
        assert_eq!(cache.memory_bytes() as u64, 2 * one + 2 * ENTRY_BYTES);
        let mut out = vec![0u32; words];
        assert!(cache.get_as(1, 5, &mut out), "found, though not filed under the alias: no room");
        assert!(!cache.get(5, &mut out));
        cache.insert(&[6, 7], bits());
        assert_eq!(cache.memory_bytes() as u64, one + ENTRY_BYTES, "started over");
        assert!(!cache.get(1, &mut out) && cache.get(7, &mut out));
    }
}
