//! A process-wide map from inputs to built results, under corral's memory budget: automata of
//! patterns, formats, character classes and key sets recur across schemas, and building them
//! again would cost milliseconds per compile, but a server that sees thousands of schemas
//! must not keep every one it ever built.
//!
//! Each cache charges its entries' bytes ([`Weigh`]) to the budget under
//! [`Kind::SchemaAutomata`], and the budget's eviction
//! passes evict its least recently used entries (weighed by what they took to build) like any
//! other cache's. A count bound stays as a backstop when the budget is unlimited. Unlike the
//! core's caches, it does not tell entries in use apart: evicting one that a grammar being
//! compiled holds drops only the cache's reference (the memory goes with the last holder).

use corral_core::memory::{self, Account, Kind, Victim};
use rustc_hash::{FxBuildHasher, FxHashSet};
use std::hash::{BuildHasher, Hash};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// Heap bytes a cached key or value holds (an estimate: what it would free).
pub(crate) trait Weigh {
    /// Bytes held on the heap.
    fn heap_bytes(&self) -> usize;
}

impl Weigh for String {
    fn heap_bytes(&self) -> usize {
        self.capacity()
    }
}

impl<T: Weigh> Weigh for Vec<T> {
    fn heap_bytes(&self) -> usize {
        self.capacity() * std::mem::size_of::<T>() + self.iter().map(Weigh::heap_bytes).sum::<usize>()
    }
}

impl Weigh for (u32, u32) {
    fn heap_bytes(&self) -> usize {
        0
    }
}

impl<T: Weigh> Weigh for Arc<T> {
    fn heap_bytes(&self) -> usize {
        std::mem::size_of::<T>() + 16 + (**self).heap_bytes()
    }
}

impl<T: Weigh, E: Weigh> Weigh for Result<T, E> {
    fn heap_bytes(&self) -> usize {
        match self {
            Ok(t) => t.heap_bytes(),
            Err(e) => e.heap_bytes(),
        }
    }
}

impl Weigh for corral_core::ByteAutomaton {
    fn heap_bytes(&self) -> usize {
        self.memory_bytes()
    }
}

/// An entry: its key's hash (keys can be whole automata, thousands of transitions: a map that
/// rehashed them each time it grew spent 5.6% of the slowest schemas' first compiles doing so),
/// the bytes charged, when it was last used and what it took to build.
struct Entry<K, V> {
    hash: u64,
    key: K,
    value: V,
    bytes: usize,
    stamp: u64,
    cost_ns: u64,
}

/// The map and its account; registered with the budget on first use.
struct Inner<K, V> {
    map: Mutex<hashbrown::HashTable<Entry<K, V>>>,
    account: Account,
    max: usize,
}

/// Bytes of an entry besides its key's and value's heap: the table slot and hash.
const ENTRY_OVERHEAD: usize = 48;

/// A bounded, thread-safe cache; results are cloned out (use `Arc` values).
pub(crate) struct SharedCache<K, V> {
    inner: OnceLock<Arc<Inner<K, V>>>,
    max: usize,
}

impl<K, V> SharedCache<K, V>
where
    K: Hash + Eq + Weigh + Send + Sync + 'static,
    V: Clone + Weigh + Send + Sync + 'static,
{
    /// An empty cache holding at most `max` entries (and what the budget allows).
    pub(crate) const fn new(max: usize) -> Self {
        SharedCache { inner: OnceLock::new(), max }
    }

    fn inner(&self) -> &Inner<K, V> {
        self.inner.get_or_init(|| {
            let c = Arc::new(Inner { map: Mutex::new(hashbrown::HashTable::new()), account: Account::new(Kind::SchemaAutomata), max: self.max });
            let weak: Weak<dyn memory::Cache> = Arc::downgrade(&c) as Weak<Inner<K, V>>;
            memory::register(weak);
            c
        })
    }

    /// The cached result for `key`, else `build()` (run without the lock held), cached.
    pub(crate) fn get_or_build(&self, key: K, build: impl FnOnce() -> V) -> V {
        let hash = FxBuildHasher.hash_one(&key);
        match self.get(hash, &key) {
            Some(v) => v,
            None => {
                let t0 = std::time::Instant::now();
                let v = build();
                self.insert(hash, key, v, t0.elapsed().as_nanos() as u64)
            }
        }
    }

    /// [`SharedCache::get_or_build`] looked up by reference: the owned key (`owned()`) is
    /// made only on a miss.
    pub(crate) fn get_or_build_by<Q: Hash + Eq + ?Sized>(&self, key: &Q, owned: impl FnOnce() -> K, build: impl FnOnce() -> V) -> V
    where
        K: std::borrow::Borrow<Q>,
    {
        // (`Borrow` promises that `Q` hashes as `K` does.)
        let hash = FxBuildHasher.hash_one(key);
        match self.get(hash, key) {
            Some(v) => v,
            None => {
                let t0 = std::time::Instant::now();
                let v = build();
                self.insert(hash, owned(), v, t0.elapsed().as_nanos() as u64)
            }
        }
    }

    /// The cached result for `key`, whose hash is `hash`, stamped used.
    fn get<Q: Eq + ?Sized>(&self, hash: u64, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
    {
        let c = self.inner();
        let hit = {
            let mut map = c.map.lock().unwrap_or_else(|p| p.into_inner());
            map.find_mut(hash, |e| e.hash == hash && e.key.borrow() == key).map(|e| {
                e.stamp = memory::now();
                e.value.clone()
            })
        };
        match &hit {
            Some(_) => c.account.hit(),
            None => c.account.miss(),
        }
        hit
    }

    /// Caches `v` under `key` when the budget has room for it (starting over when the count
    /// bound is reached) and returns it.
    fn insert(&self, hash: u64, key: K, v: V, cost_ns: u64) -> V {
        let c = self.inner();
        let bytes = ENTRY_OVERHEAD + key.heap_bytes() + v.heap_bytes();
        if !c.account.try_charge(bytes) {
            return v; // (the budget is full: kept for this caller only)
        }
        let mut cleared = Vec::new();
        let mut refund = 0;
        {
            let mut map = c.map.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(e) = map.find(hash, |e| e.hash == hash && e.key == key) {
                // (Built meanwhile by another thread: the first stays, and every caller gets it.)
                let first = e.value.clone();
                drop(map);
                c.account.refund(bytes, false);
                return first;
            }
            if map.len() >= c.max {
                refund = map.iter().map(|e| e.bytes).sum::<usize>();
                cleared.extend(map.drain());
            }
            map.insert_unique(hash, Entry { hash, key, value: v.clone(), bytes, stamp: memory::now(), cost_ns }, |e| e.hash);
        }
        if refund > 0 {
            c.account.refund(refund, false);
        }
        drop(cleared); // (freed outside the lock)
        v
    }
}

impl<K, V> memory::Cache for Inner<K, V>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Send + Sync + 'static,
{
    fn account(&self) -> &Account {
        &self.account
    }

    fn victims(&self, out: &mut Vec<Victim>) {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        out.extend(map.iter().map(|e| Victim { priority: memory::priority(e.stamp, e.cost_ns, e.bytes), bytes: e.bytes, handle: e.hash }));
    }

    fn evict(&self, handles: &[u64]) {
        let set: FxHashSet<u64> = handles.iter().copied().collect();
        let mut gone = Vec::new();
        {
            let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            gone.extend(map.extract_if(|e| set.contains(&e.hash)));
        }
        for e in &gone {
            self.account.refund(e.bytes, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Weigh for u32 {
        fn heap_bytes(&self) -> usize {
            0
        }
    }

    #[test]
    fn builds_once_and_stays_bounded() {
        let c: SharedCache<u32, u32> = SharedCache::new(2);
        let mut builds = 0;
        for k in [1, 1, 2, 1] {
            c.get_or_build(k, || {
                builds += 1;
                k * 10
            });
        }
        assert_eq!(builds, 2);
        assert_eq!(c.get_or_build(3, || 30), 30); // full: cleared, then 3 cached
        assert_eq!(c.get_or_build(1, || 11), 11, "1 was dropped by the clear and rebuilt");
    }

    /// Entries are charged to the budget, refunded when the count bound clears them, and
    /// evicted (least recently used first) by the budget's passes.
    #[test]
    fn entries_are_charged_and_evicted_by_the_budget() {
        use memory::Cache;
        let c: SharedCache<String, Arc<String>> = SharedCache::new(100);
        let big = |n: usize| Arc::new("x".repeat(n));
        c.get_or_build("a".into(), || big(10_000));
        c.get_or_build("b".into(), || big(10_000));
        let inner = c.inner();
        assert!(inner.account().bytes() >= 20_000, "charged: {}", inner.account().bytes());
        let _ = c.get_or_build("a".into(), || unreachable!("cached"));
        inner.shrink_to(15_000);
        assert!(inner.account().bytes() < 15_000);
        let mut rebuilt = 0;
        for k in ["a", "b"] {
            c.get_or_build(k.into(), || {
                rebuilt += 1;
                big(1)
            });
        }
        assert_eq!(rebuilt, 1, "one of the two went");
        assert_eq!(inner.account().counts()[2], 1, "one eviction counted");
    }
}
