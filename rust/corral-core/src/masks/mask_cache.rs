//! Whole-mask cache: a bounded map from the structural state of a matcher to its finished mask.
//!
//! The key hashes (128 bits) the lexemes in progress — terminal, DFA state and the future
//! hash of the parser row each started at ([`crate::parser::earley::Parser::future_hash`]:
//! what the parse accepts from there, whatever the stack below) — so states that recur (they
//! dominate JSON: every array element, every object member at one depth; in code, every
//! expression at one nesting of blocks, however deep its operators nest) cost one copy. A position whose key is new looks again by a coarser key that names what
//! its lexemes' states still accept rather than the states ([`crate::Matcher`]'s
//! `state_key`): states alike on every token then share the mask, which is filed under the
//! new key too. A mask whose few ids the fill listed is kept as that list (most masks
//! outside string bodies allow a handful of tokens, and storing each as a fresh 16 KB block
//! was the largest cost of a miss). A mask made of a cached context-independent entry's
//! bitmask and a few more ids (a string body and the tokens that close it) is kept as that
//! bitmask, shared ([`TokenSet::with_ids`]), and the ids: copying it was a fresh 16 KB block
//! per miss, whose first touch (page faults, 2 MB huge pages zeroed) cost more than the fill
//! itself. Bounded by a byte budget that counts shared bitmasks too (the token-set cache may
//! drop their entries first), each once per cache however many masks share it: charging it
//! to every mask (16 KB each with the Llama 3 vocabulary) kept a fraction of the masks the
//! memory allowed. Under the process's memory budget ([`crate::runtime::memory`]),
//! with a cap of its own; when full it evicts its oldest, cheapest masks, never all of them.

use crate::runtime::memory::{self, Account, Kind, Sample, Victim};
use crate::vocab::token_set::TokenSet;
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, Weak};

/// Default cap per compiled grammar (the process's memory budget bounds them all together).
pub(crate) const DEFAULT_MASK_CACHE_BYTES: usize = 64 << 20;

/// Bytes charged for a map entry besides its mask: a slot (its 16-byte key, the entry and a
/// control byte) in a table at most 7/8 full.
const ENTRY_BYTES: u64 = 64;

/// Bytes charged for a mask besides its ids and bitmask: its reference-counted header. (With
/// a shared bitmask counted once, most masks are a few ids, and these overheads are most of
/// what they hold.)
const MASK_BYTES: u64 = std::mem::size_of::<TokenSet>() as u64 + 16;

/// A mask and what its keys share: when it was last used under any of them
/// ([`memory::now`]), what the fill that made it took, how many keys it is filed under and
/// what they were charged together (so that an eviction pass weighs a mask without grouping
/// its keys). Changed under the map's lock only.
#[derive(Debug)]
struct Held {
    set: TokenSet,
    stamp: AtomicU64,
    cost_ns: u64,
    keys: AtomicU64,
    bytes: AtomicU64,
}

/// One key's entry: its mask, the bytes charged for the entry and when it was last used
/// under this key (at most its mask's stamp: a pass skips the key by it without reading the
/// mask).
#[derive(Debug)]
struct Entry {
    mask: Arc<Held>,
    bytes: u64,
    stamp: u64,
    /// The entry its mask was inserted with (the others are aliases).
    first: bool,
}

/// The entries by key, and the shared bitmasks their masks are over, by address: how many
/// entries (keys) point at each and what it was charged (once, by the entry that brought it).
#[derive(Debug, Default)]
struct Map {
    keys: FxHashMap<u128, Entry>,
    shared: FxHashMap<usize, (u64, u64)>,
}

/// The bitmask `m` is kept over (its own or a shared base), which other holders may share.
fn bitmask(m: &TokenSet) -> Option<&Arc<[u32]>> {
    match m {
        TokenSet::Bits(b) | TokenSet::Near { base: b, .. } => Some(b),
        TokenSet::Ids(_) => None,
    }
}

/// The cache (one per compiled grammar, shared by its matchers). A mask may sit under
/// several keys (one finer, one coarser: [`MaskCache::get_as`]); it is charged once, and
/// evicted with all its keys.
#[derive(Debug)]
pub(crate) struct MaskCache {
    map: Mutex<Map>,
    /// Bytes held by the masks (this cache's share of its account's kind).
    account: Account,
    /// This grammar's own cap.
    budget: usize,
    words: usize,
}

impl MaskCache {
    /// A cache of at most `budget` bytes of masks of `words` words each, registered with the
    /// process's memory budget.
    pub(crate) fn new(budget: usize, words: usize) -> Arc<MaskCache> {
        let c = Arc::new(MaskCache { map: Mutex::new(Map::default()), account: Account::new(Kind::WholeMasks), budget, words });
        let weak: Weak<dyn memory::Cache> = Arc::downgrade(&c) as Weak<MaskCache>;
        memory::register(weak);
        c
    }

    /// Copies the cached mask for `key` into `out` (its first words); false when there is
    /// none (not counted as a miss: the caller goes on to [`MaskCache::get_as`]).
    pub(crate) fn get(&self, key: u128, out: &mut [u32]) -> bool {
        // (Written under the lock: a 16 KB copy at most, and no reference count touched.)
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        match map.keys.get_mut(&key) {
            Some(e) => {
                e.stamp = memory::now();
                e.mask.stamp.store(e.stamp, Relaxed);
                e.mask.set.write_to(out, self.words);
                drop(map);
                self.account.hit();
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
        let now = memory::now();
        let Some(m) = map.keys.get_mut(&key).map(|e| {
            e.stamp = now;
            e.mask.stamp.store(now, Relaxed);
            e.mask.clone()
        }) else {
            drop(map);
            self.account.miss();
            return false;
        };
        // (Not when that would pass the budget.)
        if self.account.bytes() as u64 + ENTRY_BYTES <= self.budget as u64 && self.account.try_charge(ENTRY_BYTES as usize) {
            if let Some(b) = bitmask(&m.set) {
                if let Some(s) = map.shared.get_mut(&(Arc::as_ptr(b) as *const u32 as usize)) {
                    s.0 += 1;
                }
            }
            self.file(&mut map, alias, Entry { mask: m.clone(), bytes: ENTRY_BYTES, stamp: now, first: false });
        }
        drop(map);
        m.set.write_to(out, self.words);
        self.account.hit();
        true
    }

    /// Stores a finished mask, which took `cost_ns` to fill, under each of `keys` (charged
    /// once, with an entry's bytes per further key). When it does not fit this grammar's cap,
    /// the cache evicts its oldest masks first; when it does not fit the process's budget, it
    /// is not kept.
    pub(crate) fn insert(&self, keys: &[u128], mask: TokenSet, cost_ns: u64) {
        // Its bitmask is charged only when no entry here holds it yet.
        let shared = bitmask(&mask).map(|b| (Arc::as_ptr(b) as *const u32 as usize, b.len() as u64 * 4));
        let own = mask.retained_bytes() as u64 - shared.map_or(0, |s| s.1) + MASK_BYTES;
        let new_bits = shared.filter(|s| !self.map.lock().unwrap_or_else(|p| p.into_inner()).shared.contains_key(&s.0)).map_or(0, |s| s.1);
        let size = own + ENTRY_BYTES;
        let all = (size + new_bits + ENTRY_BYTES * keys.len().saturating_sub(1) as u64) as usize;
        if self.account.bytes() + all > self.budget {
            // (To 7/8 of the cap: one scan per eighth of it filled, not one per insert.)
            memory::Cache::shrink_to(self, (self.budget - self.budget / 8).min(self.budget.saturating_sub(all)));
        }
        if self.account.bytes() + all > self.budget || !self.account.try_charge(all) {
            return;
        }
        let now = memory::now();
        let m = Arc::new(Held { set: mask, stamp: now.into(), cost_ns, keys: 0.into(), bytes: 0.into() });
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((p, _)) = shared {
            // (Another insert may have brought the bitmask meanwhile: this one's charge for it
            // comes back. One evicted meanwhile is kept uncharged until its entries go.)
            let s = map.shared.entry(p).or_insert((0, new_bits));
            if s.0 > 0 && new_bits > 0 {
                self.account.refund(new_bits as usize, false);
            }
            s.0 += keys.len() as u64;
        }
        for (i, &key) in keys.iter().enumerate() {
            self.file(&mut map, key, Entry { mask: m.clone(), bytes: if i == 0 { size } else { ENTRY_BYTES }, stamp: now, first: i == 0 });
        }
    }

    /// Files `e` under `key` (charged by the caller; what the entry it replaces was charged
    /// comes off).
    fn file(&self, map: &mut Map, key: u128, e: Entry) {
        e.mask.keys.fetch_add(1, Relaxed);
        e.mask.bytes.fetch_add(e.bytes, Relaxed);
        if let Some(old) = map.keys.insert(key, e) {
            old.mask.keys.fetch_sub(1, Relaxed);
            old.mask.bytes.fetch_sub(old.bytes, Relaxed);
            let bits = Self::release(&mut map.shared, &old);
            self.account.refund((old.bytes + bits) as usize, false);
        }
    }

    /// Counts off a shared bitmask's entry that went (in the map's table of them); the
    /// bitmask's charge when it was the last (to refund).
    fn release(shared: &mut FxHashMap<usize, (u64, u64)>, gone: &Entry) -> u64 {
        let Some(b) = bitmask(&gone.mask.set) else { return 0 };
        let p = Arc::as_ptr(b) as *const u32 as usize;
        match shared.get_mut(&p) {
            Some(s) if s.0 > 1 => {
                s.0 -= 1;
                0
            }
            Some(_) => shared.remove(&p).map_or(0, |s| s.1),
            None => 0,
        }
    }

    /// A mask's eviction priority and the bytes evicting it (with all its keys) frees: its
    /// keys' charges, and its bitmask's when they are all the entries over it. A shared
    /// bitmask's charge is spread over the entries that point at it for the priority (what a
    /// mask costs per byte held).
    fn weigh(shared: &FxHashMap<usize, (u64, u64)>, m: &Held) -> (f64, u64) {
        let (n, bits) = bitmask(&m.set).and_then(|b| shared.get(&(Arc::as_ptr(b) as *const u32 as usize))).copied().unwrap_or((1, 0));
        let (bytes, keys) = (m.bytes.load(Relaxed), m.keys.load(Relaxed));
        let frees = bytes + if keys >= n { bits } else { 0 };
        (memory::priority(m.stamp.load(Relaxed), m.cost_ns, (bytes + bits * keys / n.max(1)) as usize), frees)
    }

    /// (hits, misses) so far.
    pub(crate) fn stats(&self) -> (u64, u64) {
        let [h, m, _, _] = self.account.counts();
        (h, m)
    }

    /// Bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.account.bytes()
    }
}

impl memory::Cache for MaskCache {
    fn account(&self) -> &Account {
        &self.account
    }

    fn samples(&self) -> bool {
        true
    }

    /// One victim per mask (with all its keys), handled by one of its keys' low 64 bits.
    fn victims(&self, out: &mut Vec<Victim>) {
        self.sample(out, Sample::ALL);
    }

    /// The masks `s` picks by address, each once: its keys share its stamp and what they
    /// were charged ([`Held`]), so a mask is weighed from any of its keys, without grouping
    /// them (which copied and hashed every key, under this grammar's lock, on every pass).
    fn sample(&self, out: &mut Vec<Victim>, s: Sample) {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let mut seen: FxHashSet<usize> = FxHashSet::default();
        for (&k, e) in &map.keys {
            let p = Arc::as_ptr(&e.mask) as usize;
            if s.picks(p as u64) && seen.insert(p) {
                let (priority, frees) = Self::weigh(&map.shared, &e.mask);
                out.push(Victim { priority, bytes: frees as usize, handle: k as u64 });
            }
        }
    }

    /// Evicts every mask (with all its keys) of priority at most `threshold`, in one walk of
    /// the keys under the lock.
    fn evict_below(&self, threshold: f64) -> usize {
        let mut gone: Vec<Entry> = Vec::new();
        {
            let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            // (Chosen first, removed after: removing a key changes its mask's weight.)
            // (A priority is at least its stamp, and a mask's stamp at least its keys'.)
            let doomed: Vec<u128> = map.keys.iter().filter(|(_, e)| e.stamp as f64 <= threshold && Self::weigh(&map.shared, &e.mask).0 <= threshold).map(|(&k, _)| k).collect();
            let Map { keys, shared } = &mut *map;
            for k in doomed {
                if let Some(mut e) = keys.remove(&k) {
                    e.bytes += Self::release(shared, &e);
                    gone.push(e);
                }
            }
        }
        let mut freed = 0;
        for e in &gone {
            self.account.refund(e.bytes as usize, e.first);
            freed += e.bytes as usize;
        }
        freed
    }

    fn evict(&self, handles: &[u64]) {
        let set: FxHashSet<u64> = handles.iter().copied().collect();
        let mut gone: Vec<Entry> = Vec::new();
        {
            let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            let masks: FxHashSet<*const Held> = map.keys.iter().filter(|(&k, _)| set.contains(&(k as u64))).map(|(_, e)| Arc::as_ptr(&e.mask)).collect();
            let keys: Vec<u128> = map.keys.iter().filter(|(_, e)| masks.contains(&Arc::as_ptr(&e.mask))).map(|(&k, _)| k).collect();
            gone.extend(keys.iter().filter_map(|k| map.keys.remove(k)));
            for e in &mut gone {
                // (The last entry over a shared bitmask refunds it too.)
                let bits = Self::release(&mut map.shared, e);
                e.bytes += bits;
            }
        }
        for e in &gone {
            self.account.refund(e.bytes as usize, e.first);
        }
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
        cache.insert(&[7], bits.with_ids(&[2, 40, 2]), 0);
        cache.insert(&[8], TokenSet::Ids(vec![5].into_boxed_slice()), 0);
        let mut out = vec![u32::MAX; words];
        assert!(cache.get(7, &mut out));
        assert_eq!(out, vec![0b1111, 1 << 8, u32::MAX, 1 << 31]);
        assert!(cache.get(8, &mut out));
        assert_eq!(out, vec![1 << 5, 0, 0, 0]);
        assert!(!cache.get(9, &mut out));
        let counted = cache.memory_bytes() as u64;
        assert!((16..16 + 2 * (MASK_BYTES + ENTRY_BYTES) + 100).contains(&counted), "the shared bitmask counted once: {counted}");
    }

    /// A mask filed under two keys is charged once (plus an entry); a lookup by a coarser key
    /// files it under the finer one, so that key hits next; only a lookup that finds nothing
    /// by either counts as a miss.
    #[test]
    fn a_mask_under_several_keys_is_charged_once() {
        let words = 4;
        let cache = MaskCache::new(1 << 20, words);
        let bits = TokenSet::Bits(vec![1u32, 2, 3, 4].into());
        let one = bits.retained_bytes() as u64 + MASK_BYTES + ENTRY_BYTES;
        cache.insert(&[1, 2], bits, 0);
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
        // Refiling a key takes off what it was charged; the bitmask stays charged while other
        // keys hold it, and goes with the last.
        cache.insert(&[1], TokenSet::Ids(vec![5].into_boxed_slice()), 0);
        let five = TokenSet::Ids(vec![5].into_boxed_slice()).retained_bytes() as u64 + MASK_BYTES;
        assert_eq!(cache.memory_bytes() as u64, 3 * ENTRY_BYTES + five + 16);
        cache.insert(&[2], TokenSet::Ids(vec![5].into_boxed_slice()), 0);
        cache.insert(&[3], TokenSet::Ids(vec![5].into_boxed_slice()), 0);
        assert_eq!(cache.memory_bytes() as u64, 3 * (ENTRY_BYTES + five));
    }

    /// Masks over one shared bitmask charge it once, and evicting them all refunds it.
    #[test]
    fn masks_sharing_a_bitmask_charge_it_once() {
        let words = 4;
        let bits = TokenSet::Bits(vec![1u32, 2, 3, 4].into());
        let cache = MaskCache::new(1 << 20, words);
        for k in 0..10u128 {
            cache.insert(&[k], bits.with_ids(&[k as u32 + 40]), 0);
        }
        let near = bits.with_ids(&[40]).memory_bytes() as u64 + MASK_BYTES;
        assert_eq!(cache.memory_bytes() as u64, 16 + 10 * (near + ENTRY_BYTES));
        let mut out = vec![0u32; words];
        assert!(cache.get(3, &mut out));
        assert_eq!(out, vec![1, 2 | 1 << 11, 3, 4]);
        let mut v = Vec::new();
        memory::Cache::victims(&*cache, &mut v);
        assert_eq!(v.iter().map(|x| x.bytes as u64).sum::<u64>(), cache.memory_bytes() as u64 - 16, "each frees its own bytes");
        cache.insert(&[20, 21], TokenSet::Bits(vec![9u32; 4].into()), 0);
        v.clear();
        memory::Cache::victims(&*cache, &mut v);
        assert!(v.iter().any(|x| x.bytes as u64 == 16 + MASK_BYTES + 2 * ENTRY_BYTES), "a bitmask held by one mask goes with it");
        memory::Cache::shrink_to(&*cache, 0);
        assert_eq!(cache.memory_bytes(), 0);
    }

    /// A cache that cannot fit a mask with its keys evicts its oldest, cheapest masks (with
    /// all their keys) to make room, never everything.
    #[test]
    fn a_full_cache_evicts_its_cheapest_masks_not_everything() {
        let words = 4;
        let bits = || TokenSet::Bits(vec![7u32; 4].into());
        let one = bits().retained_bytes() as u64 + MASK_BYTES + ENTRY_BYTES;
        let cache = MaskCache::new((2 * one + 2 * ENTRY_BYTES) as usize, words);
        cache.insert(&[1, 2], bits(), 10);
        cache.insert(&[3, 4], bits(), 10_000_000);
        assert_eq!(cache.memory_bytes() as u64, 2 * one + 2 * ENTRY_BYTES);
        let mut out = vec![0u32; words];
        assert!(cache.get_as(1, 5, &mut out), "found, though not filed under the alias: no room");
        assert!(!cache.get(5, &mut out));
        cache.insert(&[6, 7], bits(), 10);
        assert!(!cache.get(1, &mut out) && !cache.get(2, &mut out), "the cheap mask went with both its keys");
        assert!(cache.get(3, &mut out) && cache.get(4, &mut out), "the costly one stayed");
        assert!(cache.get(7, &mut out));
        assert_eq!(cache.memory_bytes() as u64, 2 * one + 2 * ENTRY_BYTES);
    }

    /// A sampling pass weighs a mask from any of its keys: a mask used lately under an alias
    /// outlives one used under no key since, whatever key the sample found it by; evicting
    /// below a threshold takes every key of the old masks and refunds all they were charged.
    #[test]
    fn evict_below_takes_old_masks_with_all_their_keys() {
        let words = 4;
        let cache = MaskCache::new(1 << 20, words);
        let n = 200u128;
        for m in 0..n {
            cache.insert(&[2 * m], TokenSet::Ids(vec![m as u32 % 128].into_boxed_slice()), 1_000);
        }
        let mut out = vec![0u32; words];
        // Every mask gets an alias (a finer key), and the later half is used under it later.
        for m in 0..n {
            assert!(cache.get_as(2 * m, 2 * m + 1, &mut out));
        }
        let all = cache.memory_bytes();
        let mut v = Vec::new();
        memory::Cache::victims(&*cache, &mut v);
        assert_eq!(v.len(), n as usize, "one victim per mask, not per key");
        assert_eq!(v.iter().map(|x| x.bytes).sum::<usize>(), all);
        // (The newest of them: another test charging meanwhile may have ticked the clock.)
        let old = v.iter().map(|x| x.priority).fold(f64::MIN, f64::max);
        let later = memory::now() + 1000;
        {
            let map = cache.map.lock().unwrap();
            for m in n / 2..n {
                map.keys[&(2 * m + 1)].mask.stamp.store(later, Relaxed);
            }
        }
        let freed = memory::Cache::evict_below(&*cache, old + 0.5);
        assert_eq!(freed, all - cache.memory_bytes());
        v.clear();
        memory::Cache::sample(&*cache, &mut v, Sample { rate: 4, salt: 9 });
        assert!(!v.is_empty() && v.len() < (n / 2) as usize, "a sample of the masks left: {}", v.len());
        assert!(v.iter().all(|x| x.priority > old + 0.5));
        for m in 0..n {
            let kept = m >= n / 2;
            assert_eq!(cache.get(2 * m, &mut out), kept, "mask {m}, first key");
            assert_eq!(cache.get(2 * m + 1, &mut out), kept, "mask {m}, alias");
        }
        memory::Cache::shrink_to(&*cache, 0);
        assert_eq!(cache.memory_bytes(), 0);
    }
}
