//! A process-wide map from inputs to built results, bounded by entry count (cleared when
//! full): automata of patterns, formats, character classes and key sets recur across schemas,
//! and building them again would cost milliseconds per compile.

use rustc_hash::FxHashMap;
use std::hash::Hash;
use std::sync::Mutex;

/// A bounded, thread-safe cache; results are cloned out (use `Arc` values).
pub(crate) struct SharedCache<K, V> {
    map: Mutex<Option<FxHashMap<K, V>>>,
    max: usize,
}

impl<K: Hash + Eq, V: Clone> SharedCache<K, V> {
    /// An empty cache holding at most `max` entries.
    pub(crate) const fn new(max: usize) -> Self {
        SharedCache { map: Mutex::new(None), max }
    }

    /// The cached result for `key`, else `build()` (run without the lock held), cached.
    pub(crate) fn get_or_build(&self, key: K, build: impl FnOnce() -> V) -> V {
        match self.get(&key) {
            Some(v) => v,
            None => self.insert(key, build()),
        }
    }

    /// [`SharedCache::get_or_build`] looked up by reference: the owned key (`owned()`) is
    /// made only on a miss.
    pub(crate) fn get_or_build_by<Q: Hash + Eq + ?Sized>(&self, key: &Q, owned: impl FnOnce() -> K, build: impl FnOnce() -> V) -> V
    where
        K: std::borrow::Borrow<Q>,
    {
        match self.get(key) {
            Some(v) => v,
            None => {
                let v = build();
                self.insert(owned(), v)
            }
        }
    }

    /// The cached result for `key`.
    fn get<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
    {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).as_ref().and_then(|m| m.get(key)).cloned()
    }

    /// Caches `v` under `key` (starting over when full) and returns it.
    fn insert(&self, key: K, v: V) -> V {
        let mut guard = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let map = guard.get_or_insert_with(FxHashMap::default);
        if map.len() >= self.max {
            map.clear();
        }
        map.insert(key, v.clone());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
