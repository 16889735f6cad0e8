//! Context-independent token sets, cached per lexer configuration.
//!
//! Given the terminals in progress and their DFA states (the *key*, parser rows left out),
//! the tokens whose bytes can be consumed by continuing one of those terminals — without
//! ending any — are allowed whatever the parser stack holds. One lexer-only walk of the
//! token trie computes that set and also records the trie nodes where some terminal could
//! end with more bytes still to come: only the subtrees below those nodes need the parser.
//! Every accepted path is counted exactly once, by the first terminal end it uses, so the
//! mask is `allowed ∪ (parser walks below the recorded nodes)` — exact, and cheap when
//! terminals rarely end inside tokens (strings, numbers, whitespace).

use crate::byteset::ByteSet;
use crate::cfg::Cfg;
use crate::dfa::DEAD;
use crate::toktrie::TokTrie;
use rustc_hash::FxHashMap;
use std::sync::{Arc, RwLock};

/// Most lexemes a key may hold; larger configurations take the plain trie walk.
pub const MAX_KEY_LEXEMES: usize = 64;

/// Trie nodes below which the parser must be consulted, grouped by which key lexemes end there.
#[derive(Debug, Clone)]
pub struct EndGroup {
    /// Bit `i` set: key lexeme `i` is in an accepting state at these nodes.
    pub ending: u64,
    /// Trie node indices (each has children).
    pub nodes: Vec<u32>,
    /// For each node, the set of bytes on its child edges (256 bits), so a node none of whose
    /// children can start the next terminal is skipped without walking.
    pub child_bytes: Vec<ByteSet>,
}

/// The cached result for one key.
#[derive(Debug, Clone)]
pub struct CiEntry {
    /// Mask words of tokens allowed by continuing a terminal.
    pub allowed: Vec<u32>,
    /// Where terminal ends need the parser.
    pub groups: Vec<EndGroup>,
}

impl CiEntry {
    /// Heap bytes used.
    pub fn memory_bytes(&self) -> usize {
        self.allowed.len() * 4 + self.groups.iter().map(|g| g.nodes.len() * 36 + 64).sum::<usize>()
    }

    /// Computes the entry for `key` (terminal, DFA state pairs) by one lexer-only trie walk.
    pub fn build(cfg: &Cfg, trie: &TokTrie, key: &[(u32, u32)], mask_words: usize) -> CiEntry {
        let mut allowed = vec![0u32; mask_words];
        let mut groups: Vec<EndGroup> = Vec::new();
        let mut group_of: FxHashMap<u64, usize> = FxHashMap::default();
        // states[depth * k + i] = state of key lexeme i at that depth (DEAD when gone).
        let k = key.len();
        let max_depth = trie.nodes.iter().map(|n| n.depth as usize).max().unwrap_or(0);
        let mut states = vec![DEAD; (max_depth + 1) * k];
        for (i, &(_, s)) in key.iter().enumerate() {
            states[i] = s;
        }
        let dfas: Vec<_> = key.iter().map(|&(t, _)| &cfg.terminals[t as usize].dfa).collect();
        let nodes = &trie.nodes;
        let mut i = 0;
        while i < nodes.len() {
            let node = nodes[i];
            let d = node.depth as usize;
            let (prev, cur) = states.split_at_mut(d * k);
            let prev = &prev[(d - 1) * k..];
            let cur = &mut cur[..k];
            let mut alive = false;
            let mut ending = 0u64;
            for j in 0..k {
                let s = if prev[j] == DEAD { DEAD } else { dfas[j].next(prev[j], node.byte) };
                cur[j] = s;
                if s != DEAD {
                    alive = true;
                    if dfas[j].is_accepting(s) {
                        ending |= 1 << j;
                    }
                }
            }
            if !alive {
                i += node.subtree_len as usize;
                continue;
            }
            for &t in trie.tokens_at(i) {
                allowed[t as usize / 32] |= 1 << (t % 32);
            }
            if ending != 0 && node.subtree_len > 1 {
                let gi = *group_of.entry(ending).or_insert_with(|| {
                    groups.push(EndGroup { ending, nodes: Vec::new(), child_bytes: Vec::new() });
                    groups.len() - 1
                });
                groups[gi].nodes.push(i as u32);
                let mut cb = ByteSet::default();
                let mut j = i + 1;
                while j < i + node.subtree_len as usize {
                    cb.insert(nodes[j].byte);
                    j += nodes[j].subtree_len as usize;
                }
                groups[gi].child_bytes.push(cb);
            }
            i += 1;
        }
        CiEntry { allowed, groups }
    }
}

/// Shared cache of [`CiEntry`]s for one compiled grammar, bounded by a byte budget.
#[derive(Debug)]
pub struct CiCache {
    map: RwLock<FxHashMap<Vec<(u32, u32)>, Arc<CiEntry>>>,
    bytes: std::sync::atomic::AtomicUsize,
    budget: usize,
}

impl CiCache {
    /// An empty cache holding at most `budget` bytes of entries.
    pub fn new(budget: usize) -> CiCache {
        CiCache { map: RwLock::new(FxHashMap::default()), bytes: 0.into(), budget }
    }

    /// The entry for `key`, building it on a miss.
    pub fn get(&self, cfg: &Cfg, trie: &TokTrie, key: &[(u32, u32)], mask_words: usize) -> Arc<CiEntry> {
        if let Some(e) = self.map.read().unwrap_or_else(|p| p.into_inner()).get(key) {
            return e.clone();
        }
        let e = Arc::new(CiEntry::build(cfg, trie, key, mask_words));
        let size = e.memory_bytes() + key.len() * 8 + 64;
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        use std::sync::atomic::Ordering::Relaxed;
        if self.bytes.load(Relaxed) + size > self.budget {
            // Simple and bounded: drop everything and start over (entries rebuild on demand).
            map.clear();
            self.bytes.store(0, Relaxed);
        }
        if map.insert(key.to_vec(), e.clone()).is_none() {
            self.bytes.fetch_add(size, Relaxed);
        }
        e
    }

    /// Entries currently cached.
    pub fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held by cached entries.
    pub fn memory_bytes(&self) -> usize {
        self.bytes.load(std::sync::atomic::Ordering::Relaxed)
    }
}
