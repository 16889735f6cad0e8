//! The compiled-grammar cache: compiled grammars by (grammar source, fill time budget,
//! vocabulary), under the process's memory budget ([`crate::runtime::memory`]).
//!
//! A serving engine compiles the schema of every request; a schema seen before is a lookup.
//! Entries are evicted by recency and by what they cost to compile, never while in use: a
//! grammar some matcher or caller still holds is not a victim (evicting it would free nothing),
//! and evicting one that is not frees its tables and its whole-mask cache.

use crate::masks::matcher::CompiledGrammar;
use crate::parser::grammar::Grammar;
use crate::runtime::memory::{self, Account, Kind, Victim};
use crate::vocab::vocab::Vocabulary;
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// (grammar source, its fill time budget, the vocabulary's address: the entry keeps it alive).
type Key = (Box<str>, u64, usize);

struct Slot {
    g: Arc<CompiledGrammar>,
    handle: u64,
    stamp: u64,
    cost_ns: u64,
    /// Bytes charged for the entry itself (the grammar's tables are pinned by the grammar).
    bytes: usize,
}

struct CompileCache {
    map: Mutex<FxHashMap<Key, Slot>>,
    account: Account,
    next: std::sync::atomic::AtomicU64,
}

fn cache() -> &'static CompileCache {
    static C: OnceLock<Arc<CompileCache>> = OnceLock::new();
    C.get_or_init(|| {
        let c = Arc::new(CompileCache { map: Mutex::new(FxHashMap::default()), account: Account::new(Kind::CompiledGrammars), next: 0.into() });
        let weak: Weak<dyn memory::Cache> = Arc::downgrade(&c) as Weak<CompileCache>;
        memory::register(weak);
        c
    })
}

impl memory::Cache for CompileCache {
    fn account(&self) -> &Account {
        &self.account
    }

    /// Grammars only the cache holds; evicting one frees its entry, its tables and its masks.
    fn victims(&self, out: &mut Vec<Victim>) {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        out.extend(map.values().filter(|s| Arc::strong_count(&s.g) == 1).map(|s| {
            let bytes = s.bytes + s.g.table_bytes() + s.g.mask_bytes();
            Victim { priority: memory::priority(s.stamp, s.cost_ns, bytes), bytes, handle: s.handle }
        }));
    }

    fn evict(&self, handles: &[u64]) {
        let set: FxHashSet<u64> = handles.iter().copied().collect();
        let mut gone = Vec::new();
        {
            let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            let keys: Vec<Key> = map.iter().filter(|(_, s)| set.contains(&s.handle) && Arc::strong_count(&s.g) == 1).map(|(k, _)| k.clone()).collect();
            gone.extend(keys.iter().filter_map(|k| map.remove(k)));
        }
        for s in &gone {
            self.account.refund(s.bytes, true);
        }
        // (The grammars, their tables and masks, are freed here, after the lock.)
        drop(gone);
    }
}

/// `grammar` compiled against `vocab` ([`CompiledGrammar::prepared`]), from the cache when it
/// was compiled before and is still there; kept within the memory budget.
pub fn compiled(grammar: &Grammar, vocab: Arc<Vocabulary>) -> Arc<CompiledGrammar> {
    let c = cache();
    let key: Key = (grammar.source_key().into(), grammar.max_fill_ms(), Arc::as_ptr(&vocab) as usize);
    if let Some(s) = c.map.lock().unwrap_or_else(|p| p.into_inner()).get_mut(&key) {
        s.stamp = memory::now();
        c.account.hit();
        return s.g.clone();
    }
    c.account.miss();
    let t0 = std::time::Instant::now();
    let g = CompiledGrammar::prepared(grammar, vocab);
    let bytes = key.0.len() + 96;
    if c.account.try_charge(bytes) {
        let slot = Slot { g: g.clone(), handle: c.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed), stamp: memory::now(), cost_ns: t0.elapsed().as_nanos() as u64, bytes };
        let old = c.map.lock().unwrap_or_else(|p| p.into_inner()).insert(key, slot);
        if let Some(old) = old {
            c.account.refund(old.bytes, false);
        }
    }
    g
}
