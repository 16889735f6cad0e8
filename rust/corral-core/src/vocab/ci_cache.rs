//! Context-independent token sets, cached per lexer configuration and per level.
//!
//! Given the terminals in progress and their DFA states (the *key*, parser rows left out),
//! the tokens whose bytes can be consumed by continuing one of those terminals — without
//! ending any — are allowed whatever the parser stack holds. One lexer-only walk of the
//! token trie computes that set and also records the trie nodes where some terminals could
//! end with more bytes still to come, grouped by which terminals end there. Below such a
//! group the parser pushes one row; the terminals that row expects form the key of the next
//! level, whose walk (below the group's nodes only) is cached the same way, as a child of
//! the entry. Every accepted path is counted by its terminal ends, so the union over levels
//! is the exact mask, and a fill on a warm cache is a copy plus one parser row per group.

use crate::runtime::byteset::ByteSet;
use crate::automata::dfa::{Dfa, DEAD};
use crate::vocab::token_set::{TokenCollector, TokenSet, MAX_NEAR};
use crate::vocab::toktrie::TokTrie;
use rustc_hash::FxHashMap;
use crate::runtime::memory::{self, Account, Kind, Victim};
use crate::runtime::miss_diag;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, RwLock, Weak};

/// Most lexemes a key may hold; larger configurations take the plain trie walk.
pub(crate) const MAX_KEY_LEXEMES: usize = 64;

/// A state's entry is derived from a near state's ([`CiEntry::derive`]) when the two agree
/// on inputs of at least this many bytes...
pub(crate) const MIN_DERIVE_DEPTH: usize = 6;

/// ...or when at most this many first bytes continue one of them but not the other.
pub(crate) const MAX_FIRST_BYTE_DIFFERENCE: usize = 4;

/// Fresh single-lexeme walks under at least this many trie nodes try the plain-text slice.
const SLICE_MIN_NODES: usize = 20_000;

/// Most lexemes a key may hold for [`CiCache::joint_slice`]: the joint walk of the other tokens
/// steps every lexeme at every node, so a key position with many declared names (each cheap
/// on its own) takes the union of single entries.
const MAX_JOINT_SLICE_LEXEMES: usize = 4;

/// Most printable ASCII bytes among a lexeme's exception bytes for the plain slice with
/// exceptions ([`CiEntry::build_excepted`]).
const MAX_ASCII_EXCEPTIONS: usize = 8;

/// Walks continued by at most this many first bytes visit only those bytes' subtrees
/// ([`TokTrie::first_byte_ranges`]); others step over the first-level nodes.
const FEW_FIRST_BYTES: usize = 32;

/// Fresh walks that may visit at least this many trie nodes run on two threads.
const PARALLEL_WALK_NODES: usize = 100_000;

/// A key: the [`Lexer::key`] of each lexeme in progress, in canonical order.
/// Terminal ids are process-wide ([`crate::automata::intern`]), so entries are shared by all grammars
/// compiled against one vocabulary (the cache lives in the [`crate::Vocabulary`]).
pub(crate) type Key = Vec<(u32, u32)>;

/// One lexeme to walk: its automaton, its state, and its terminal's process-wide id.
#[derive(Debug, Clone, Copy)]
pub struct Lexer<'d> {
    /// The terminal's automaton.
    pub dfa: &'d Dfa,
    /// The lexeme's state in it.
    pub state: u32,
    /// The terminal's id ([`crate::automata::intern`]).
    pub gid: u32,
}

/// Fewest first bytes for which a lexeme's key is its language ([`Lexer::key`]).
const MIN_LANGUAGE_KEY_BYTES: usize = 16;

/// Marks a key element that is a language id rather than a terminal id.
const LANGUAGE: u32 = 1 << 31;

impl Lexer<'_> {
    /// This lexeme's element of a cache key: the id of the language it still accepts when
    /// that language is small enough to have one ([`crate::automata::fingerprint`], shared by every
    /// automaton), else its terminal id and canonical state (states alike on every token of
    /// at most `k` bytes share it).
    ///
    /// Only states that many first bytes continue look up their language: their walks are the
    /// expensive ones worth sharing across automata, while computing an id costs tens of
    /// microseconds the first time (a literal key's states, continued by one byte or an
    /// escape, would pay it at every position for nothing).
    #[inline]
    pub fn key(&self, k: usize) -> (u32, u32) {
        let id = if self.dfa.live_bytes(self.state).len() >= MIN_LANGUAGE_KEY_BYTES { self.dfa.language_id(self.state) } else { None };
        match id {
            Some(id) => (LANGUAGE | id, 0),
            None => {
                debug_assert!(self.gid < LANGUAGE);
                (self.gid, self.dfa.canonical_state(self.state, k))
            }
        }
    }
}

/// Trie nodes below which the parser must be consulted, grouped by which key lexemes end there.
#[derive(Debug, Clone)]
pub struct EndGroup {
    /// Bit `i` set: key lexeme `i` is in an accepting state at these nodes.
    pub ending: u64,
    /// Trie node indices (each has children; [`TokTrie::child_bytes`] tells which bytes
    /// follow, so nodes none of whose children can start the next terminals are skipped).
    pub nodes: Vec<u32>,
}

/// One level of the walk for one key.
#[derive(Debug, Default)]
pub struct Level {
    /// Tokens allowed at this level (below level 0; level 0 keeps a bitmask instead), when
    /// they are fewer than the words of a bitmask of them...
    pub tokens: Vec<u32>,
    /// ...else that bitmask (its words up to the largest id's): a fill ORs it in instead of
    /// setting tens of thousands of bits one by one (an identifier-like terminal that ends all
    /// along the trie allows most of the vocabulary again at each level below).
    pub bits: Option<Box<[u32]>>,
    /// Where terminals end with bytes to follow.
    pub groups: Vec<EndGroup>,
    /// Cached next levels by group and key: one map keyed by the group's index and the key's
    /// hash ([`key_hash`]), holding the key itself to compare (one probe per lookup, where a
    /// map per group took two, each a likely cache miss on a cold level). The cache's map of
    /// levels by content owns them (and charges them to the budget); a level it evicted is
    /// gone from here too.
    children: RwLock<FxHashMap<(u32, u64), (Box<[(u32, u32)]>, Weak<Level>)>>,
    /// When it was last used ([`memory::now`]).
    stamp: AtomicU64,
    /// Per group: its nodes this level was not built from, computed on first use
    /// ([`Level::rest`]).
    rests: RwLock<FxHashMap<u32, Option<Arc<[u32]>>>>,
    /// Bytes of `rests` charged to the cache's budget on top of the level's own (refunded
    /// with the level).
    rest_bytes: AtomicUsize,
    /// Whether the cache holds this level (or its entry) charged: only then are its rests
    /// charged and kept.
    charged: AtomicBool,
}

/// Flag on a group's index in [`Level::child`]: the level below the group's nodes this level
/// was not built from ([`Level::rest`]), not below all of them.
pub const REST: u32 = 1 << 31;

impl Level {
    fn memory_bytes(&self) -> usize {
        self.tokens.len() * 4 + self.bits.as_ref().map_or(0, |b| b.len() * 4) + self.groups.iter().map(|g| g.nodes.len() * 4 + 48).sum::<usize>() + 64
    }

    /// The cached next level below group `g` for `key`, if present.
    pub fn child(&self, g: u32, key: &[(u32, u32)]) -> Option<Arc<Level>> {
        let map = self.children.read().unwrap_or_else(|p| p.into_inner());
        let (k, l) = map.get(&(g, key_hash(key)))?;
        if **k != *key {
            return None;
        }
        let l = l.upgrade()?;
        l.touch();
        Some(l)
    }

    /// Group `g`'s nodes this level was not built from (`compute` gives them the first time),
    /// or `None` when that is all of them. Below a group whose row continues the parse as the
    /// row this level was built under did, and whose key is this level's, the level below the
    /// other nodes is this one's again: a fill needs one below these only.
    ///
    /// The answer is kept (for later fills) only on a level the cache holds, and only when
    /// `charge` takes its bytes; else it is computed again next time.
    fn rest(&self, g: u32, compute: impl FnOnce() -> Vec<u32>, charge: impl FnOnce(usize) -> bool) -> Option<Arc<[u32]>> {
        if let Some(r) = self.rests.read().unwrap_or_else(|p| p.into_inner()).get(&g) {
            return r.clone();
        }
        let r = compute();
        let r: Option<Arc<[u32]>> = (r.len() < self.groups[g as usize].nodes.len()).then(|| r.into());
        // (The map's slot and, for a proper subset, its copy.)
        let size = 32 + r.as_ref().map_or(0, |r| r.len() * 4 + 16);
        if !self.charged.load(Relaxed) || !charge(size) {
            return r;
        }
        let mut rests = self.rests.write().unwrap_or_else(|p| p.into_inner());
        if let Some(other) = rests.get(&g) {
            // Computed meanwhile by another fill: that one is kept.
            let other = other.clone();
            drop(rests);
            return other;
        }
        self.rest_bytes.fetch_add(size, Relaxed);
        rests.insert(g, r.clone());
        r
    }

    /// Marks it held (charged) by the cache.
    fn set_charged(&self) {
        self.charged.store(true, Relaxed);
    }

    /// Marks it dropped by the cache: the bytes its rests were charged, to refund.
    fn uncharge(&self) -> usize {
        self.charged.store(false, Relaxed);
        self.rest_bytes.swap(0, Relaxed)
    }

    fn insert_child(&self, g: u32, key: &[(u32, u32)], level: &Arc<Level>) {
        // (Two keys with one hash below one group: the later one is kept.)
        let mut map = self.children.write().unwrap_or_else(|p| p.into_inner());
        map.insert((g, key_hash(key)), (key.into(), Arc::downgrade(level)));
    }

    /// Stamps it used now (a store only when the clock moved since).
    #[inline]
    fn touch(&self) {
        let now = memory::now();
        if self.stamp.load(Relaxed) != now {
            self.stamp.store(now, Relaxed);
        }
    }
}

/// Records trie node `i` (which has children) in the group of lexemes `ending`.
fn record_end(i: usize, ending: u64, groups: &mut Vec<EndGroup>, group_of: &mut FxHashMap<u64, usize>) {
    // (Runs of nodes in one group are common: an identifier ends at every byte of a word.)
    if let Some(last) = groups.last_mut() {
        if last.ending == ending {
            last.nodes.push(i as u32);
            return;
        }
    }
    let gi = *group_of.entry(ending).or_insert_with(|| {
        groups.push(EndGroup { ending, nodes: Vec::new() });
        groups.len() - 1
    });
    groups[gi].nodes.push(i as u32);
}

/// Sorts each group's nodes and drops duplicates: a node reached below several roots
/// continues the same way (the next level starts from the group's parser row), so walking it
/// once is enough — without this, ambiguous grammars (`root ::= "a"+ root | ""`) would
/// revisit nodes exponentially often across levels.
fn dedup_groups(groups: &mut [EndGroup]) {
    for g in groups {
        if g.nodes.windows(2).all(|w| w[0] < w[1]) {
            continue;
        }
        // (The walk below each root adds its nodes in increasing order: the stable sort
        // merges those runs.)
        g.nodes.sort();
        g.nodes.dedup();
    }
}

/// The `(start, end, base depth)` node ranges below each of `roots`.
fn below(trie: &TokTrie, roots: &[u32]) -> Vec<(usize, usize, usize)> {
    roots
        .iter()
        .map(|&root| {
            let r = root as usize;
            (r + 1, r + trie.nodes[r].subtree_len as usize, trie.nodes[r].depth as usize)
        })
        .collect()
}

/// The whole trie as `parts` contiguous ranges of whole first-byte subtrees, balanced by size.
fn whole(trie: &TokTrie, parts: usize) -> Vec<(usize, usize, usize)> {
    let n = trie.nodes.len();
    if parts <= 1 {
        // (Stepping over the first-byte subtrees reads a node in each: hundreds of cache
        // misses on a large trie, for nothing.)
        return vec![(0, n, 0)];
    }
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < n {
        i += trie.nodes[i].subtree_len as usize;
        if i >= (out.len() + 1) * n / parts.max(1) || i >= n {
            out.push((start, i, 0));
            start = i;
        }
    }
    out
}

/// Lexer-only walk over `roots` (their subtrees, or the whole trie when `roots` is `None`).
/// Calls `on_token` for tokens allowed by pure continuation; returns the end groups.
fn walk(trie: &TokTrie, lexers: &[Lexer], ranges: &[(usize, usize, usize)], first: &ByteSet, on_token: impl FnMut(&[u32])) -> Vec<EndGroup> {
    if lexers.len() == 1 {
        return walk_one(trie, lexers[0].state, lexers[0].dfa, ranges, first, on_token);
    }
    let mut on_token = on_token;
    let k = lexers.len();
    let nodes = &trie.nodes;
    let mut groups: Vec<EndGroup> = Vec::new();
    let mut group_of: FxHashMap<u64, usize> = FxHashMap::default();
    let mut states: Vec<u32> = vec![DEAD; (trie.max_depth() + 1) * k];
    for &(start, end, base) in ranges {
        for (j, l) in lexers.iter().enumerate() {
            states[j] = l.state;
        }
        let mut i = start;
        while i < end {
            let node = nodes[i];
            let d = node.depth as usize - base;
            if d == 1 && !first.contains(node.byte) {
                i += node.subtree_len as usize;
                continue;
            }
            let (prev, cur) = states.split_at_mut(d * k);
            let prev = &prev[(d - 1) * k..];
            let mut alive = false;
            let mut ending = 0u64;
            for j in 0..k {
                let s = if prev[j] == DEAD { DEAD } else { lexers[j].dfa.next(prev[j], node.byte) };
                cur[j] = s;
                if s != DEAD {
                    alive = true;
                    if lexers[j].dfa.is_accepting(s) {
                        ending |= 1 << j;
                    }
                }
            }
            if !alive {
                i += node.subtree_len as usize;
                continue;
            }
            if node.has_tokens {
                on_token(trie.tokens_at(i));
            }
            if ending != 0 && node.subtree_len > 1 {
                record_end(i, ending, &mut groups, &mut group_of);
            }
            i += 1;
        }
    }
    dedup_groups(&mut groups);
    groups
}

/// [`walk`] below each of `roots` (in increasing order, some inside the subtrees of others)
/// in one pass over the trie. Where a terminal ends all along a token (an identifier), every
/// node of a token is a root and walking below each one alone visits a node once per root
/// above it (and records it in a group as often); here a node is visited once, with the
/// lexer states reached from each root above it, equal ones merged (an identifier's state
/// is the same whatever byte it started at). Same tokens and groups as [`walk`] (tokens
/// reported once per node, groups in another order).
fn walk_nested(trie: &TokTrie, lexers: &[Lexer], roots: &[u32], on_token: impl FnMut(&[u32])) -> Vec<EndGroup> {
    // One lexeme (a Lark symbol that may start again after every byte of one: 100 k nested
    // starts) compares single states, not slices.
    if lexers.len() == 1 {
        walk_nested_k::<true>(trie, lexers, roots, on_token)
    } else {
        walk_nested_k::<false>(trie, lexers, roots, on_token)
    }
}

/// [`walk_nested`]; `ONE`: `lexers` has one lexeme.
fn walk_nested_k<const ONE: bool>(trie: &TokTrie, lexers: &[Lexer], roots: &[u32], mut on_token: impl FnMut(&[u32])) -> Vec<EndGroup> {
    let nodes = &trie.nodes;
    let k = lexers.len();
    let mut groups: Vec<EndGroup> = Vec::new();
    let mut group_of: FxHashMap<u64, usize> = FxHashMap::default();
    let start: Vec<u32> = lexers.iter().map(|l| l.state).collect();
    // The state vectors (k states each) live on the current path: those of the node at
    // depth d (below the top root) are `buf[off[d]..off[d + 1]]`.
    let mut buf: Vec<u32> = Vec::new();
    let mut off: Vec<usize> = vec![0; trie.max_depth() + 2];
    let mut endings: Vec<u64> = Vec::new();
    let mut r = 0;
    while r < roots.len() {
        let top = roots[r] as usize;
        let end = top + nodes[top].subtree_len as usize;
        let base = nodes[top].depth as usize;
        r += 1;
        buf.clear();
        buf.extend_from_slice(&start);
        off[0] = 0;
        off[1] = k;
        let mut i = top + 1;
        while i < end {
            let node = nodes[i];
            let d = node.depth as usize - base;
            let (p0, p1) = (off[d - 1], off[d]);
            buf.truncate(p1);
            endings.clear();
            let mut t = p0;
            while t < p1 {
                let w = buf.len();
                let mut alive = false;
                let mut ending = 0u64;
                for j in 0..k {
                    let s = buf[t + j];
                    let s = if s == DEAD { DEAD } else { lexers[j].dfa.next(s, node.byte) };
                    buf.push(s);
                    if s != DEAD {
                        alive = true;
                        if lexers[j].dfa.is_accepting(s) {
                            ending |= 1 << j;
                        }
                    }
                }
                let seen = if ONE { buf[p1..w].contains(&buf[w]) } else { (p1..w).step_by(k).any(|u| buf[u..u + k] == buf[w..w + k]) };
                if !alive || seen {
                    buf.truncate(w);
                } else if ending != 0 && !endings.contains(&ending) {
                    endings.push(ending);
                }
                t += k;
            }
            if buf.len() > p1 && node.has_tokens {
                on_token(trie.tokens_at(i));
            }
            if node.subtree_len > 1 {
                for &e in &endings {
                    record_end(i, e, &mut groups, &mut group_of);
                }
            }
            if r < roots.len() && roots[r] as usize == i {
                // A root: a walk starts below it too.
                r += 1;
                let seen = if ONE { buf[p1..].contains(&start[0]) } else { (p1..buf.len()).step_by(k).any(|u| buf[u..u + k] == start[..]) };
                if !seen {
                    buf.extend_from_slice(&start);
                }
            }
            off[d + 1] = buf.len();
            let next = i + node.subtree_len as usize;
            if buf.len() == p1 {
                // Nothing goes on below this node, except below the roots in its subtree.
                if r < roots.len() && (roots[r] as usize) < next {
                    let root = roots[r] as usize;
                    let dr = nodes[root].depth as usize - base;
                    for o in &mut off[d + 1..=dr] {
                        *o = p1;
                    }
                    i = root;
                } else {
                    i = next;
                }
                continue;
            }
            i += 1;
        }
    }
    dedup_groups(&mut groups);
    groups
}

/// [`walk`] for a single lexeme: the common case (inside a string, a number...), kept tight.
fn walk_one(trie: &TokTrie, s0: u32, dfa: &Dfa, ranges: &[(usize, usize, usize)], first: &ByteSet, mut on_token: impl FnMut(&[u32])) -> Vec<EndGroup> {
    let nodes = &trie.nodes;
    let mut groups: Vec<EndGroup> = Vec::new();
    let mut group_of: FxHashMap<u64, usize> = FxHashMap::default();
    let mut states: Vec<u32> = vec![DEAD; trie.max_depth() + 1];
    let mut loops = LoopMemo::default();
    for &(start, end, base) in ranges {
        assert!(end <= nodes.len() && s0 != DEAD);
        states[0] = s0;
        let mut i = start;
        while i < end {
            // SAFETY: `i < end <= nodes.len()`; node depths are in `base + 1 ..= max_depth`, so
            // `d` indexes `states` (length max_depth + 1); `states[d - 1]` holds a live state of
            // `dfa` (written below or `s0`), as `next_unchecked` requires.
            let node = unsafe { *nodes.get_unchecked(i) };
            let d = node.depth as usize - base;
            let prev = unsafe { *states.get_unchecked(d - 1) };
            let s = if d == 1 && !first.contains(node.byte) { DEAD } else { unsafe { dfa.next_unchecked(prev, node.byte) } };
            if s == DEAD {
                i += node.subtree_len as usize;
                continue;
            }
            unsafe { *states.get_unchecked_mut(d) = s };
            if node.subtree_len > 1 {
                if dfa.is_accepting(s) {
                    record_end(i, 1, &mut groups, &mut group_of);
                } else if s == prev && trie.has_below_sets() && trie.below_bytes(i).is_subset(loops.get(dfa, s)) {
                    // Every byte below loops back to `s` (not accepting): the whole subtree's
                    // tokens are allowed and no lexeme ends in it.
                    on_token(trie.subtree_tokens(i));
                    i += node.subtree_len as usize;
                    continue;
                }
            }
            if node.has_tokens {
                on_token(trie.tokens_at(i));
            }
            i += 1;
        }
    }
    dedup_groups(&mut groups);
    groups
}

/// The [`Dfa::loop_bytes`] of the last few states a walk asked for (a walk through a
/// string body or a `[\w-]+` asks for one state over and over).
#[derive(Default)]
struct LoopMemo {
    slots: [(u32, ByteSet); 4],
    filled: usize,
    next: usize,
}

impl LoopMemo {
    #[inline]
    fn get(&mut self, dfa: &Dfa, s: u32) -> &ByteSet {
        if let Some(k) = self.slots[..self.filled].iter().position(|e| e.0 == s) {
            return &self.slots[k].1;
        }
        let k = self.next;
        self.next = (k + 1) % self.slots.len();
        self.filled = (self.filled + 1).min(self.slots.len());
        self.slots[k] = (s, dfa.loop_bytes(s));
        &self.slots[k].1
    }
}

/// What [`walk_lockstep`] found.
struct Lockstep {
    /// Node ranges where the two states agree on every token below (the near state's tokens
    /// and ends there are this state's too).
    same: Vec<(u32, u32)>,
    /// Nodes where this state's lexeme ends with bytes to follow, outside `same`.
    ends: Vec<usize>,
}

/// Walks the trie from state `s` and the near state `g` side by side, editing `allowed`
/// (the near state's token set) into `s`'s: a subtree is skipped as soon as the two agree on
/// everything below it, which is when its tokens are no longer than `m` bytes (the states are
/// m-equivalent) or the two paths reach k-equivalent states (`k` = the longest token).
///
/// Gives up (`None`) after visiting `budget` nodes: the two states were not alike after all.
fn walk_lockstep<E: SetEdits + ?Sized>(trie: &TokTrie, s: u32, g: u32, dfa: &Dfa, m: usize, allowed: &mut E, budget: usize) -> Option<Lockstep> {
    let nodes = &trie.nodes;
    let k = trie.max_depth();
    let mut st_s: Vec<u32> = vec![DEAD; k + 1];
    let mut st_g: Vec<u32> = vec![DEAD; k + 1];
    st_s[0] = s;
    st_g[0] = g;
    let mut out = Lockstep { same: Vec::new(), ends: Vec::new() };
    let mut visited = 0;
    // Only the first bytes after which the two differ (one dead, or not alike) can hold a
    // difference: their subtrees are walked, the rest of the trie is the same as a whole
    // (without stepping over each first-level node: a cache miss each on cold caches).
    let mut live = dfa.live_bytes(s);
    live.union_with(&dfa.live_bytes(g));
    let mut differ = ByteSet::default();
    for b in live.iter() {
        let (ns, ng) = (dfa.next(s, b), dfa.next(g, b));
        if ns == DEAD || ng == DEAD || dfa.canonical_state(ns, k) != dfa.canonical_state(ng, k) {
            differ.insert(b);
        }
    }
    let mut ranges = trie.first_byte_ranges(&differ).into_iter();
    let mut range_end = 0;
    let mut i = 0;
    while i < nodes.len() {
        if i >= range_end {
            match ranges.next() {
                Some((start, end, _)) => {
                    if start > i {
                        out.same.push((i as u32, start as u32));
                    }
                    i = start;
                    range_end = end;
                }
                None => {
                    out.same.push((i as u32, nodes.len() as u32));
                    break;
                }
            }
        }
        let node = nodes[i];
        let d = node.depth as usize;
        let end = i + node.subtree_len as usize;
        if trie.reach(i) <= m {
            out.same.push((i as u32, end as u32));
            i = end;
            continue;
        }
        let ps = st_s[d - 1];
        let pg = st_g[d - 1];
        let ns = if ps == DEAD { DEAD } else { dfa.next(ps, node.byte) };
        let ng = if pg == DEAD { DEAD } else { dfa.next(pg, node.byte) };
        if ns == DEAD {
            if ng != DEAD {
                // Only the near state lives here: none of its tokens below are allowed.
                clear_subtree_tokens(trie, i, allowed);
            }
            i = end;
            continue;
        }
        if ng != DEAD && dfa.canonical_state(ns, k) == dfa.canonical_state(ng, k) {
            out.same.push((i as u32, end as u32));
            i = end;
            continue;
        }
        st_s[d] = ns;
        st_g[d] = ng;
        visited += 1;
        if visited > budget {
            return None;
        }
        for &t in trie.tokens_at(i) {
            allowed.set(t);
        }
        if node.subtree_len > 1 && dfa.is_accepting(ns) {
            out.ends.push(i);
        }
        i += 1;
    }
    Some(out)
}

/// Clears every token ending in node `i`'s subtree.
fn clear_subtree_tokens<E: SetEdits + ?Sized>(trie: &TokTrie, i: usize, allowed: &mut E) {
    let end = i + trie.nodes[i].subtree_len as usize;
    for j in i..end {
        for &t in trie.tokens_at(j) {
            allowed.clear(t);
        }
    }
}

/// Where a lockstep walk ([`walk_lockstep`]) edits the near state's token set into this
/// state's: a bitmask, or the changes to a shared one ([`BaseEdits`]).
trait SetEdits {
    /// Adds token `t`.
    fn set(&mut self, t: u32);
    /// Removes token `t`.
    fn clear(&mut self, t: u32);
}

impl SetEdits for [u32] {
    #[inline]
    fn set(&mut self, t: u32) {
        self[t as usize / 32] |= 1 << (t % 32);
    }
    #[inline]
    fn clear(&mut self, t: u32) {
        self[t as usize / 32] &= !(1 << (t % 32));
    }
}

/// The changes a lockstep walk makes to a bitmask it shares rather than copies (a 16 KB copy
/// and a scan of it for the differences were a third of a key state's derivation). A walk
/// sets tokens only where this state lives and clears them only where it does not, so no
/// token is both added and removed.
///
/// Past [`MAX_NEAR`] changes (a whole subtree cleared) it switches to a bitmask of its own, so
/// the lists stay bounded.
struct BaseEdits<'a> {
    base: &'a [u32],
    add: Vec<u32>,
    remove: Vec<u32>,
    /// The edited copy of `base`, once the changes outgrew the lists.
    bits: Option<Vec<u32>>,
}

impl BaseEdits<'_> {
    fn has(&self, t: u32) -> bool {
        self.base[t as usize / 32] >> (t % 32) & 1 == 1
    }

    /// Switches to a bitmask when the lists are full.
    fn spill(&mut self) {
        if self.add.len() + self.remove.len() >= MAX_NEAR {
            let mut bits = self.base.to_vec();
            self.remove.iter().for_each(|&t| SetEdits::clear(&mut bits[..], t));
            self.add.iter().for_each(|&t| SetEdits::set(&mut bits[..], t));
            self.bits = Some(bits);
        }
    }
}

impl SetEdits for BaseEdits<'_> {
    #[inline]
    fn set(&mut self, t: u32) {
        if let Some(b) = &mut self.bits {
            SetEdits::set(&mut b[..], t);
        } else if !self.has(t) {
            self.add.push(t);
            self.spill();
        }
    }
    #[inline]
    fn clear(&mut self, t: u32) {
        if let Some(b) = &mut self.bits {
            SetEdits::clear(&mut b[..], t);
        } else if self.has(t) {
            self.remove.push(t);
            self.spill();
        }
    }
}

/// Whether a walk from `lexers` may visit at least `limit` nodes, bounded two bytes deep:
/// the subtrees of the second-level nodes some lexeme survives (whitespace opens the huge
/// space subtree, then dies on the next byte of nearly every token in it). Stops counting at
/// `limit` (a full count read every second-level node: 5% of C's first fills).
fn walk_at_least(trie: &TokTrie, lexers: &[Lexer], first: &ByteSet, limit: usize) -> bool {
    let nodes = &trie.nodes;
    let mut total = 0;
    let mut after: Vec<(usize, u32)> = Vec::with_capacity(lexers.len());
    let mut i = 0;
    while i < nodes.len() {
        let n = nodes[i];
        let end = i + n.subtree_len as usize;
        if first.contains(n.byte) {
            after.clear();
            after.extend(lexers.iter().enumerate().map(|(j, l)| (j, l.dfa.next(l.state, n.byte))).filter(|&(_, s)| s != DEAD));
            let mut c = i + 1;
            while c < end {
                let child = nodes[c];
                if after.iter().any(|&(j, s)| lexers[j].dfa.next(s, child.byte) != DEAD) {
                    total += child.subtree_len as usize;
                    if total >= limit {
                        return true;
                    }
                }
                c += child.subtree_len as usize;
            }
        }
        i = end;
    }
    false
}

/// Bytes that can continue one of the lexemes.
pub(crate) fn first_bytes(lexers: &[Lexer]) -> ByteSet {
    let mut f = ByteSet::default();
    for l in lexers {
        f.union_with(&l.dfa.live_bytes(l.state));
    }
    f
}

/// The cached result for one level-0 key.
#[derive(Debug)]
pub struct CiEntry {
    /// Tokens allowed by continuing a terminal.
    pub allowed: TokenSet,
    /// Groups and cached deeper levels.
    pub level: Level,
}

impl CiEntry {
    /// Computes the entry for `lexers`: by the vocabulary's plain-text slice and a walk of the
    /// other tokens when one lexeme's state takes every plain token ([`crate::vocab::slice`]), else
    /// by one lexer-only walk of the whole trie.
    pub fn build(trie: &TokTrie, lexers: &[Lexer], mask_words: usize) -> CiEntry {
        if let [l] = lexers {
            if let Some(partial) = Self::slice_for(trie, l) {
                return Self::build_sliced(trie.plain_slice(), partial, l, mask_words);
            }
        }
        Self::build_unsliced(trie, lexers, mask_words)
    }

    /// [`CiEntry::build`] for lexemes no plain slice serves whole: the slice with exceptions
    /// for a single lexeme that few plain bytes can kill or end, else a walk.
    fn build_unsliced(trie: &TokTrie, lexers: &[Lexer], mask_words: usize) -> CiEntry {
        if let [l] = lexers {
            if let Some(except) = Self::exceptions_for(trie, l) {
                return Self::build_excepted(trie, trie.plain_slice(), &except, l, mask_words);
            }
        }
        Self::build_walk(trie, lexers, mask_words)
    }

    /// The [`crate::vocab::slice::Exceptions`] of a fresh walk of `l` that should take the plain
    /// slice with exceptions: a large walk, with at most [`MAX_ASCII_EXCEPTIONS`] printable
    /// ASCII bytes to look for (else few subtrees are free of them, and the walk with its own
    /// subtree skips is as fast).
    fn exceptions_for(trie: &TokTrie, l: &Lexer) -> Option<crate::vocab::slice::Exceptions> {
        if trie.nodes_under(&l.dfa.live_bytes(l.state)) < SLICE_MIN_NODES {
            return None;
        }
        trie.plain_slice().exceptions(l.dfa, l.state, MAX_ASCII_EXCEPTIONS)
    }

    /// The plain-text slice a fresh walk of `l` can take: `Some(None)` when its state takes
    /// every plain token, `Some(Some(p))` when it takes those of at most `p.len` bytes, `None`
    /// when neither (or when its walk is small anyway).
    fn slice_for<'t>(trie: &'t TokTrie, l: &Lexer) -> Option<Option<&'t crate::vocab::slice::Partial>> {
        if trie.nodes_under(&l.dfa.live_bytes(l.state)) < SLICE_MIN_NODES {
            return None;
        }
        let slice = trie.plain_slice();
        let safe = slice.safe_depth(l.dfa, l.state);
        if safe >= slice.max_len {
            return Some(None);
        }
        slice.by_length.iter().rev().find(|p| p.len <= safe).map(Some)
    }

    /// [`CiEntry::build`] for a lexeme whose state takes every plain token (of at most
    /// `partial.len` bytes when given): those tokens at once, plus walks of the trie of the
    /// other tokens (and of the longer plain ones), whose lexeme ends are mapped to the full
    /// trie's nodes (the next level walks below them there).
    pub fn build_sliced(slice: &crate::vocab::slice::PlainSlice, partial: Option<&crate::vocab::slice::Partial>, l: &Lexer, mask_words: usize) -> CiEntry {
        Self::from_slice(slice, partial, None, std::slice::from_ref(l), mask_words)
    }

    /// The plain-text slice a fresh walk of several lexemes can take together
    /// ([`crate::vocab::slice::PlainSlice::joint_safe_depth`]), as [`CiEntry::slice_for`] for one.
    pub fn joint_slice_for<'t>(trie: &'t TokTrie, lexers: &[Lexer]) -> Option<Option<&'t crate::vocab::slice::Partial>> {
        let slice = trie.plain_slice();
        let states: Vec<(&Dfa, u32)> = lexers.iter().map(|l| (l.dfa, l.state)).collect();
        let safe = slice.joint_safe_depth(&states);
        if safe >= slice.max_len {
            return Some(None);
        }
        slice.by_length.iter().rev().find(|p| p.len <= safe).map(Some)
    }

    /// [`CiEntry::build`] for lexemes that together take every plain token (of at most
    /// `partial.len` bytes when given; [`CiEntry::joint_slice_for`]): those tokens at once,
    /// plus a joint walk of the trie of the other tokens (and of the longer plain ones).
    pub fn build_joint_sliced(slice: &crate::vocab::slice::PlainSlice, partial: Option<&crate::vocab::slice::Partial>, lexers: &[Lexer], mask_words: usize) -> CiEntry {
        Self::from_slice(slice, partial, None, lexers, mask_words)
    }

    /// [`CiEntry::build`] for a lexeme that all but a few plain paths leave alive and not
    /// ending (`except`: [`crate::vocab::slice::PlainSlice::exceptions`]): the plain tokens at
    /// once, corrected by a walk of the whole trie only where an exception byte lies below
    /// ([`crate::vocab::slice::PlainSlice::walk_exceptions`]), plus the walk of the other tokens.
    pub fn build_excepted(trie: &TokTrie, slice: &crate::vocab::slice::PlainSlice, except: &crate::vocab::slice::Exceptions, l: &Lexer, mask_words: usize) -> CiEntry {
        Self::from_slice(slice, None, Some((trie, except)), std::slice::from_ref(l), mask_words)
    }

    /// The plain tokens (of at most `partial.len` bytes), corrected where `except` says so
    /// (one lexeme only), plus the walks of the other tokens.
    fn from_slice(slice: &crate::vocab::slice::PlainSlice, partial: Option<&crate::vocab::slice::Partial>, except: Option<(&TokTrie, &crate::vocab::slice::Exceptions)>, lexers: &[Lexer], mask_words: usize) -> CiEntry {
        let mut allowed = vec![0u32; mask_words];
        for (a, &b) in allowed.iter_mut().zip(partial.map_or(&slice.bits, |p| &p.bits)) {
            *a = b;
        }
        let mut groups: Vec<EndGroup> = Vec::new();
        let mut group_of: FxHashMap<u64, usize> = FxHashMap::default();
        if let (Some((trie, except)), [l]) = (except, lexers) {
            // First: it clears whole subtrees, the other tokens' walk sets theirs again.
            slice.walk_exceptions(trie, l.dfa, l.state, except, &mut allowed, |i| record_end(i, 1, &mut groups, &mut group_of));
        }
        Self::walk_others(slice, partial, lexers, &mut allowed, &mut groups, &mut group_of);
        dedup_groups(&mut groups);
        CiEntry { allowed: TokenSet::from_bits(allowed), level: Level { tokens: Vec::new(), bits: None, groups, stamp: AtomicU64::new(memory::now()), ..Default::default() } }
    }

    /// Walks the trie of the tokens the slice leaves out (and, with `partial`, of the longer
    /// plain ones) with `lexers` together, adding the allowed ones to `allowed` and the lexeme
    /// ends, mapped to the full trie's nodes (the next level walks below them there), to
    /// `groups`.
    fn walk_others(slice: &crate::vocab::slice::PlainSlice, partial: Option<&crate::vocab::slice::Partial>, lexers: &[Lexer], allowed: &mut [u32], groups: &mut Vec<EndGroup>, group_of: &mut FxHashMap<u64, usize>) {
        let first = first_bytes(lexers);
        let mut tries = vec![(&slice.rest, &slice.rest_to_full)];
        if let Some(p) = partial {
            tries.push((&p.long, &p.long_to_full));
        }
        for (sub, to_full) in tries {
            let sub_groups = walk(sub, lexers, &whole(sub, 1), &first, |ids| {
                for &t in ids {
                    allowed[t as usize / 32] |= 1 << (t % 32);
                }
            });
            for g in &sub_groups {
                for &n in &g.nodes {
                    record_end(to_full[n as usize] as usize, g.ending, groups, group_of);
                }
            }
        }
    }

    /// [`CiEntry::build`] by one lexer-only walk of the whole trie.
    pub fn build_walk(trie: &TokTrie, lexers: &[Lexer], mask_words: usize) -> CiEntry {
        let first = first_bytes(lexers);
        let part = |ranges: &[(usize, usize, usize)]| {
            // Token ids are below the vocabulary size, so within `mask_words` words.
            let mut allowed = TokenCollector::new(mask_words);
            let groups = walk(trie, lexers, ranges, &first, |ids| allowed.add(ids));
            (allowed, groups)
        };
        // Large walks: two halves of the trie on two threads (this walk is the worst-case
        // fill latency), merged in node order. Only when the first bytes open most of a large
        // trie: waking a second thread costs tens to hundreds of microseconds, ten times a
        // walk under a literal key's two first bytes.
        let big = trie.nodes_under(&first) >= PARALLEL_WALK_NODES && walk_at_least(trie, lexers, &first, PARALLEL_WALK_NODES);
        let (allowed, groups) = if big && crate::runtime::warmup::may_use_pool() {
            let halves = whole(trie, 2);
            let (mid, rest) = halves.split_at(1);
            let ((mut a, mut ga), (b, gb)) = rayon::join(|| part(mid), || part(rest));
            a.merge(b);
            for g in gb {
                match ga.iter_mut().find(|h| h.ending == g.ending) {
                    Some(h) => {
                        h.nodes.extend(g.nodes);
                    }
                    None => ga.push(g),
                }
            }
            (a, ga)
        } else if first.len() <= FEW_FIRST_BYTES {
            part(&trie.first_byte_ranges(&first))
        } else {
            part(&whole(trie, 1))
        };
        CiEntry { allowed: allowed.finish(), level: Level { tokens: Vec::new(), bits: None, groups, stamp: AtomicU64::new(memory::now()), ..Default::default() } }
    }
}

impl CiEntry {
    /// The entry of the single lexeme in state `s` of `dfa`, from the entry `near` of state
    /// `g`, which agrees with `s` on every input of at most `m` bytes: one lockstep walk
    /// ([`walk_lockstep`]) that visits only where the two can differ — the tokens longer than
    /// `m` bytes (a length bound `m` characters away) or paths on which the two have not yet
    /// converged (a key that is not yet past the declared names it must avoid).
    ///
    /// `None` when the lockstep walk would visit more than `budget` nodes (then a fresh walk
    /// is cheaper).
    #[allow(clippy::too_many_arguments)]
    pub fn derive(trie: &TokTrie, near: &CiEntry, s: u32, g: u32, dfa: &Dfa, m: usize, mask_words: usize, budget: usize) -> Option<CiEntry> {
        let (allowed, walk) = match &near.allowed {
            TokenSet::Bits(base) if base.len() == mask_words => {
                let mut edits = BaseEdits { base, add: Vec::new(), remove: Vec::new(), bits: None };
                let walk = walk_lockstep(trie, s, g, dfa, m, &mut edits, budget)?;
                let set = match edits {
                    BaseEdits { bits: Some(bits), .. } => TokenSet::from_bits(bits),
                    BaseEdits { mut add, mut remove, .. } => {
                        add.sort_unstable();
                        remove.sort_unstable();
                        TokenSet::Near { base: base.clone(), add: add.into(), remove: remove.into() }
                    }
                };
                (set, walk)
            }
            _ => {
                let mut bits = near.allowed.to_bits(mask_words);
                let walk = walk_lockstep(trie, s, g, dfa, m, &mut bits[..], budget)?;
                (TokenSet::near(bits, &near.allowed), walk)
            }
        };
        // The near state's ends inside the ranges where the two agree, merged in node order
        // with this state's own (both lists are sorted). Counted first, then written once: a
        // free-text lexeme ends at nearly every trie node with children (188 k with Llama 3),
        // and growing that list, then sorting it, was a third of a tool-call grammar's first
        // mask.
        fn kept<'a>(grp: &'a EndGroup, same: &'a [(u32, u32)]) -> impl Iterator<Item = u32> + 'a {
            debug_assert_eq!(grp.ending, 1, "a single lexeme's entry has one group");
            let mut r = 0;
            grp.nodes.iter().copied().filter(move |&n| {
                while r < same.len() && same[r].1 <= n {
                    r += 1;
                }
                r < same.len() && same[r].0 <= n
            })
        }
        let count: usize = near.level.groups.iter().map(|g| kept(g, &walk.same).count()).sum();
        let mut nodes: Vec<u32> = Vec::with_capacity(count + walk.ends.len());
        let mut own = walk.ends.iter().map(|&i| i as u32).peekable();
        for grp in &near.level.groups {
            for n in kept(grp, &walk.same) {
                while let Some(e) = own.next_if(|&e| e <= n) {
                    if e < n {
                        nodes.push(e);
                    }
                }
                nodes.push(n);
            }
        }
        nodes.extend(own);
        let mut groups: Vec<EndGroup> = if nodes.is_empty() { Vec::new() } else { vec![EndGroup { ending: 1, nodes }] };
        // (Sorted already unless the near entry had several groups.)
        dedup_groups(&mut groups);
        Some(CiEntry { allowed, level: Level { tokens: Vec::new(), bits: None, groups, stamp: AtomicU64::new(memory::now()), ..Default::default() } })
    }

    /// The entry of a key whose element `j` has entry `parts[j]`: the same result as one joint
    /// walk (a token allowed by continuing some lexeme; a node ends element `j` iff it ends it
    /// alone), without walking the trie again. (A key names each lexer state once.)
    pub fn union(parts: &[Arc<CiEntry>], mask_words: usize) -> CiEntry {
        let allowed = union_sets(parts.iter().map(|p| &p.allowed), mask_words);
        let runs: Vec<(&[u32], u64)> = parts.iter().enumerate().flat_map(|(j, p)| p.level.groups.iter().filter(|g| g.ending != 0).map(move |g| (&g.nodes[..], 1u64 << j))).collect();
        let groups = merge_ends(&runs);
        CiEntry { allowed, level: Level { tokens: Vec::new(), bits: None, groups, stamp: AtomicU64::new(memory::now()), ..Default::default() } }
    }
}

/// The groups of the lexeme ends `runs`: sorted node lists, each with the key bits of the
/// lexemes ending at its nodes. A node in several runs ends all of their lexemes.
fn merge_ends(runs: &[(&[u32], u64)]) -> Vec<EndGroup> {
    // Each group's nodes are sorted runs, each node once. The largest runs (an identifier, a
    // Scheme symbol or number ending all along the trie: 50-160 k nodes each) are read in
    // place, each copied at once up to where another run has a node; the others (a few
    // nodes each, usually) are gathered and sorted.
    let total: usize = runs.iter().map(|r| r.0.len()).sum();
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(runs[i].0.len()));
    let n_streams = order.iter().take(MAX_STREAMS).take_while(|&&i| runs[i].0.len() * 16 >= total && !runs[i].0.is_empty()).count();
    let streams: Vec<(&[u32], u64)> = order[..n_streams].iter().map(|&i| runs[i]).collect();
    let mut ends: Vec<(u32, u64)> = Vec::new();
    for &i in &order[n_streams..] {
        ends.extend(runs[i].0.iter().map(|&n| (n, runs[i].1)));
    }
    ends.sort_by_key(|e| e.0);
    debug_assert!(streams.iter().all(|s| s.0.windows(2).all(|w| w[0] < w[1])), "a group's nodes are sorted, each once");
    let mut groups: Vec<EndGroup> = Vec::new();
    let mut group_of: FxHashMap<u64, usize> = FxHashMap::default();
    let mut last = (0u64, usize::MAX);
    let mut group = |bits: u64, groups: &mut Vec<EndGroup>| -> usize {
        if last.1 == usize::MAX || last.0 != bits {
            let gi = *group_of.entry(bits).or_insert_with(|| {
                groups.push(EndGroup { ending: bits, nodes: Vec::new() });
                groups.len() - 1
            });
            last = (bits, gi);
        }
        last.1
    };
    const ENDS: usize = usize::MAX;
    let mut pos = vec![0usize; streams.len()];
    let mut i = 0;
    loop {
        // The smallest head, which source holds it (alone or not) and the next smallest.
        let (mut min, mut next, mut who, mut alone) = (u32::MAX, u32::MAX, ENDS, true);
        let mut see = |s: usize, h: u32| {
            if h < min {
                next = min;
                (min, who, alone) = (h, s, true);
            } else if h == min {
                alone = false;
            } else if h < next {
                next = h;
            }
        };
        for (s, st) in streams.iter().enumerate() {
            if let Some(&h) = st.0.get(pos[s]) {
                see(s, h);
            }
        }
        if let Some(e) = ends.get(i) {
            see(ENDS, e.0);
        }
        if min == u32::MAX {
            break; // (Node indices are below the trie's size.)
        }
        if alone && who != ENDS {
            // A stream's nodes before any other source's next node, at once.
            let (run, bits) = streams[who];
            let upto = pos[who] + run[pos[who]..].partition_point(|&n| n < next);
            let gi = group(bits, &mut groups);
            groups[gi].nodes.extend_from_slice(&run[pos[who]..upto]);
            pos[who] = upto;
            continue;
        }
        // One node, with the bits of every end there.
        let mut bits = 0;
        for (s, st) in streams.iter().enumerate() {
            if st.0.get(pos[s]) == Some(&min) {
                bits |= st.1;
                pos[s] += 1;
            }
        }
        while i < ends.len() && ends[i].0 == min {
            bits |= ends[i].1;
            i += 1;
        }
        let gi = group(bits, &mut groups);
        groups[gi].nodes.push(min);
    }
    groups
}

/// Most runs [`merge_ends`] reads in place.
const MAX_STREAMS: usize = 4;

/// The union of `parts`, levels below the same nodes for one lexeme each (or for lexemes
/// sharing a key), each with the key bits of its lexemes: the level for all of them, as
/// one walk with them together would build it.
fn union_levels(parts: &[(Arc<Level>, u64)]) -> Level {
    let (tokens, bits) = tokens_of(parts.iter().map(|(l, _)| &**l));
    let runs: Vec<(&[u32], u64)> = parts.iter().flat_map(|(l, bits)| l.groups.iter().filter(|g| g.ending != 0).map(move |g| (&g.nodes[..], *bits))).collect();
    Level { tokens, bits, groups: merge_ends(&runs), stamp: AtomicU64::new(memory::now()), ..Default::default() }
}

/// The tokens of `levels` together, as a [`Level`] keeps them: a sorted list, or a bitmask
/// when one of them has one or when they are many.
fn tokens_of<'a>(levels: impl Iterator<Item = &'a Level> + Clone) -> (Vec<u32>, Option<Box<[u32]>>) {
    let mut tokens: Vec<u32> = levels.clone().flat_map(|l| l.tokens.iter().copied()).collect();
    let words = levels.clone().filter_map(|l| l.bits.as_ref().map(|b| b.len())).max().unwrap_or(0).max(tokens.iter().max().map_or(0, |&m| m as usize / 32 + 1));
    let bits = (words > 0 && (levels.clone().any(|l| l.bits.is_some()) || (tokens.len() >= MIN_LEVEL_BITS && tokens.len() > words))).then(|| {
        let mut b = vec![0u32; words].into_boxed_slice();
        for lb in levels.filter_map(|l| l.bits.as_ref()) {
            for (x, y) in b.iter_mut().zip(lb.iter()) {
                *x |= *y;
            }
        }
        crate::vocab::token_set::set_ids(&mut b, &tokens);
        b
    });
    if bits.is_some() {
        tokens = Vec::new();
    } else {
        tokens.sort_unstable();
        tokens.dedup();
    }
    (tokens, bits)
}

/// The level below the nodes of `parts` together, each below the nodes under one first byte
/// ([`TokTrie::by_first_byte`]), in node order ([`CiCache::part_level`]). Walks below different
/// runs share no node and no token: the groups are each part's in turn, the tokens all of
/// them.
fn concat_levels(parts: &[Arc<Level>]) -> Level {
    let (tokens, bits) = tokens_of(parts.iter().map(|l| &**l));
    let mut groups: Vec<EndGroup> = Vec::new();
    for g in parts.iter().flat_map(|l| l.groups.iter()) {
        match groups.iter_mut().find(|h| h.ending == g.ending) {
            Some(h) => h.nodes.extend_from_slice(&g.nodes),
            None => groups.push(g.clone()),
        }
    }
    debug_assert!(groups.iter().all(|g| g.nodes.windows(2).all(|w| w[0] < w[1])), "parts in node order");
    Level { tokens, bits, groups, stamp: AtomicU64::new(memory::now()), ..Default::default() }
}

/// Fewest lexemes for which a large level is built as the union of each one's level
/// ([`CiCache::level`]).
const UNION_MIN_LEXEMES: usize = 4;

/// Fewest trie nodes below a level's starts (summed over them) for which it is built as a
/// union ([`CiCache::level`]).
const UNION_MIN_NODES: usize = 16_384;

/// The union of `sets`. Usually a key position: a few small sets (the declared names), as
/// their ids, and at most one large one ("any other key"), as its bitmask shared and the
/// others' ids added ([`TokenSet::Near`]); neither needs a 16 KB bitmask built and scanned.
fn union_sets<'a>(sets: impl Iterator<Item = &'a TokenSet> + Clone, mask_words: usize) -> TokenSet {
    let mut large = sets.clone().filter(|s| !matches!(s, TokenSet::Ids(_)));
    let (first, second) = (large.next(), large.next());
    let small = || sets.clone().filter_map(|s| if let TokenSet::Ids(ids) = s { Some(&ids[..]) } else { None });
    let n_small: usize = small().map(|ids| ids.len()).sum();
    match (first, second) {
        (None, _) => {
            let mut c = TokenCollector::new(mask_words);
            small().for_each(|ids| c.add(ids));
            return c.finish();
        }
        (Some(large), None) => {
            let changes = match large {
                TokenSet::Near { add, remove, .. } => add.len() + remove.len(),
                _ => 0,
            };
            if n_small + changes <= MAX_NEAR {
                return large.with_ids(&small().flatten().copied().collect::<Vec<u32>>());
            }
        }
        _ => {}
    }
    let mut allowed = vec![0u32; mask_words];
    for s in sets {
        s.or_into(&mut allowed);
    }
    match first {
        Some(large) => TokenSet::near(allowed, large),
        None => TokenSet::from_bits(allowed),
    }
}

/// Fewest tokens a level keeps as a bitmask ([`Level::bits`]).
const MIN_LEVEL_BITS: usize = 1024;

/// Builds the level below trie nodes `nodes` (sorted: a group's) for `lexers`, by one walk
/// of them all (the reference the cache's levels are tested against).
#[cfg(test)]
fn build_level(trie: &TokTrie, nodes: &[u32], lexers: &[Lexer]) -> Level {
    let first = first_bytes(lexers);
    level_below(trie, &trie.with_child_in(nodes, &first), &first, lexers)
}

/// The level below a group's nodes `roots` that have a child on a byte of `first` (`lexers`'
/// first bytes; [`TokTrie::with_child_in`]), by one walk of the lexemes together.
fn level_below(trie: &TokTrie, roots: &[u32], first: &ByteSet, lexers: &[Lexer]) -> Level {
    let mut tokens: Vec<u32> = Vec::new();
    let mut end = 0;
    let nested = roots.iter().any(|&r| {
        let inside = (r as usize) < end;
        end = end.max(r as usize + trie.nodes[r as usize].subtree_len as usize);
        inside
    });
    let groups = if nested {
        walk_nested(trie, lexers, roots, |ids| tokens.extend_from_slice(ids))
    } else {
        walk(trie, lexers, &below(trie, roots), first, |ids| tokens.extend_from_slice(ids))
    };
    let words = tokens.iter().max().map_or(0, |&m| m as usize / 32 + 1);
    let bits = (tokens.len() >= MIN_LEVEL_BITS && tokens.len() > words).then(|| {
        let mut b = vec![0u32; words].into_boxed_slice();
        crate::vocab::token_set::set_ids(&mut b, &tokens);
        b
    });
    if bits.is_some() {
        tokens = Vec::new();
    }
    Level { tokens, bits, groups, stamp: AtomicU64::new(memory::now()), ..Default::default() }
}

/// A state whose entry this one's is cheaply derived from ([`CiEntry::derive`]), and the `m`
/// for which the two are m-equivalent: a state agreeing with `s` on inputs up to
/// [`MIN_DERIVE_DEPTH`] bytes or more (a length-bounded string away from its bound), else
/// the successor most bytes lead to when its language is small (has a
/// [`Dfa::language_id`], so its entry is shared process-wide) and nearly the same first
/// bytes continue both — a key string before the declared names it must avoid, whose paths
/// rejoin "the rest of any string" one byte in — else a state with nearly the same first bytes.
///
/// Every candidate must also be cheap: the trie nodes under the first bytes that continue
/// only one of the two (the subtrees a derivation must clear or add) must be under half of
/// those under `s`'s own first bytes (what a fresh walk may visit). A literal key two bytes
/// wide derived from its successor would clear the successor's whole first-byte subtrees,
/// which cost ten times its own walk.
///
/// `nested` (choosing for a near state's own entry): only the first kind, a state split off
/// earlier in the refinement, so derivations cannot cycle.
fn near_state(trie: &TokTrie, dfa: &Dfa, s: u32, depth: usize, nested: bool) -> Option<(u32, usize)> {
    if dfa.live_bytes(s).len() <= 2 {
        // A literal's state (a declared name one byte in): its walk follows one or two paths,
        // cheaper than looking for a state to derive it from (dozens of these at a key
        // position).
        return None;
    }
    let own = trie.nodes_under(&dfa.live_bytes(s));
    let cheap = |t: u32| trie.nodes_under(&dfa.live_bytes(s).symmetric_difference(&dfa.live_bytes(t))) * 2 < own;
    let close = |t: u32| dfa.live_bytes(s).symmetric_difference(&dfa.live_bytes(t)).len() <= MAX_FIRST_BYTE_DIFFERENCE && cheap(t);
    let near = dfa.near_state(s, depth);
    if let Some((t, m)) = near {
        if m >= MIN_DERIVE_DEPTH && cheap(t) {
            return Some((t, m));
        }
    }
    if nested {
        return None;
    }
    if let Some(t) = dfa.main_successor(s) {
        let t = dfa.canonical_state(t, depth);
        if t != s && close(t) && dfa.language_id(t).is_some() {
            return Some((t, 0));
        }
    }
    near.filter(|&(t, _)| close(t))
}

/// A cached level-0 entry: the bytes charged for it, what it took to build, when it was last
/// used ([`memory::now`]).
#[derive(Debug)]
struct Slot {
    entry: Arc<CiEntry>,
    bytes: usize,
    cost_ns: u64,
    stamp: AtomicU64,
}

impl Slot {
    #[inline]
    fn touch(&self) {
        let now = memory::now();
        if self.stamp.load(Relaxed) != now {
            self.stamp.store(now, Relaxed);
        }
    }
}

/// A level cached by content: the parent nodes and key it was built from, the bytes charged
/// for it and what it took to build (its stamp is the level's own).
#[derive(Debug)]
struct LevelSlot {
    nodes: Arc<[u32]>,
    key: Key,
    level: Arc<Level>,
    bytes: usize,
    cost_ns: u64,
}

/// The key of the levels built below nodes whose hash is `nh` for `key` in [`CiCache`]'s map.
fn level_hash(nh: u64, key: &[(u32, u32)]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    nh.hash(&mut h);
    key.hash(&mut h);
    h.finish()
}

/// The hash of a key in [`Level`]'s links to its children.
fn key_hash(key: &[(u32, u32)]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    key.hash(&mut h);
    h.finish()
}

/// The hash of a sorted list of trie nodes (a group's) in [`level_hash`].
fn nodes_hash(nodes: &[u32]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    nodes.hash(&mut h);
    h.finish()
}

/// Levels by what they are built from: a parent group's nodes and the next key.
type LevelsByContent = FxHashMap<u64, Vec<LevelSlot>>;

/// The eviction handle of a level-0 entry (even) and of the levels under one content hash (odd).
fn entry_handle(key: &[(u32, u32)]) -> u64 {
    key_hash(key) << 1
}

fn levels_handle(h: u64) -> u64 {
    (h << 1) | 1
}

/// Shared cache of [`CiEntry`]s for one vocabulary, under the process's memory budget
/// ([`crate::runtime::memory`]): entries are charged when kept and evicted by recency and
/// build cost, never while a fill holds them.
#[derive(Debug)]
pub struct CiCache {
    map: RwLock<FxHashMap<Key, Slot>>,
    /// Every level built, by content ([`CiCache::level`]): entries derived from a near state
    /// and unions at key positions end at the same nodes as the entries they come from, and
    /// their next levels are the same walks (95% of the levels built over the benchmark's
    /// walks were such repeats). The only owner of cached levels (parents link them weakly).
    levels: RwLock<LevelsByContent>,
    account: Account,
    /// This cache's own cap in bytes, besides the process's budget ([`usize::MAX`]: none).
    cap: usize,
}

impl CiCache {
    /// An empty cache, registered with the memory budget, holding at most `cap` bytes of
    /// entries itself (`usize::MAX`: only the process's budget bounds it).
    pub fn new(cap: usize) -> Arc<CiCache> {
        let c = Arc::new(CiCache { map: RwLock::new(FxHashMap::default()), levels: RwLock::new(FxHashMap::default()), account: Account::new(Kind::TokenSets), cap });
        let weak: Weak<dyn memory::Cache> = Arc::downgrade(&c) as Weak<CiCache>;
        memory::register(weak);
        c
    }

    /// The entry for `key` (the [`Lexer::key`]s of `lexers`), building it on a miss.
    pub fn get<'d>(&self, trie: &TokTrie, key: &[(u32, u32)], lexers: impl FnOnce() -> Vec<Lexer<'d>>, mask_words: usize) -> Arc<CiEntry> {
        debug_assert!(key.windows(2).all(|w| w[0] < w[1]), "a key names each lexer state once, in order");
        if let Some(s) = self.map.read().unwrap_or_else(|p| p.into_inner()).get(key) {
            s.touch();
            self.account.hit();
            return s.entry.clone();
        }
        self.account.miss();
        self.insert_built(trie, key, &lexers(), mask_words, false)
    }

    /// Charges `size` bytes for an entry or level to keep, within this cache's cap (evicting
    /// its own oldest entries first when a cap is set) and the process's budget.
    fn charge(&self, size: usize) -> bool {
        if self.cap != usize::MAX && self.account.bytes() + size > self.cap {
            memory::Cache::shrink_to(self, (self.cap - self.cap / 8).saturating_sub(size));
            if self.account.bytes() + size > self.cap {
                return false;
            }
        }
        self.account.try_charge(size)
    }

    /// The cached entry for `key`, or a fresh one (see [`CiCache::insert_built`]).
    fn entry(&self, trie: &TokTrie, key: &[(u32, u32)], lexers: &[Lexer], mask_words: usize, nested: bool) -> Arc<CiEntry> {
        // (The read guard must be gone before `insert_built` takes the write lock.)
        let hit = self.map.read().unwrap_or_else(|p| p.into_inner()).get(key).map(|s| {
            s.touch();
            s.entry.clone()
        });
        hit.unwrap_or_else(|| self.insert_built(trie, key, lexers, mask_words, nested))
    }

    /// The plain slice a key of several lexemes takes jointly ([`CiEntry::joint_slice_for`])
    /// instead of the union of each one's entry: when it has at most
    /// [`MAX_JOINT_SLICE_LEXEMES`], two of them or more would each walk a large part of the
    /// trie (at least [`SLICE_MIN_NODES`] nodes under their first bytes), and one of those has
    /// no entry cached and no slice of its own. A key name that matches
    /// `after_[create|update|destroy]` anywhere, next to "any other key" (o45263): the second
    /// dies on every `after_` and one of twelve letters, so it takes no slice and walked most
    /// of the trie (0.65–1.1 ms for the two at `{"`), while together they take every plain
    /// token.
    fn joint_slice<'t>(trie: &'t TokTrie, key: &[(u32, u32)], lexers: &[Lexer], map: &RwLock<FxHashMap<Key, Slot>>) -> Option<Option<&'t crate::vocab::slice::Partial>> {
        if lexers.len() > MAX_JOINT_SLICE_LEXEMES {
            return None;
        }
        let large: Vec<usize> = (0..lexers.len()).filter(|&j| trie.nodes_under(&lexers[j].dfa.live_bytes(lexers[j].state)) >= SLICE_MIN_NODES).collect();
        if large.len() < 2 {
            return None;
        }
        let uncached: Vec<usize> = {
            let map = map.read().unwrap_or_else(|p| p.into_inner());
            large.into_iter().filter(|&j| !map.contains_key(std::slice::from_ref(&key[j]))).collect()
        };
        // Only when one of them would walk the trie: each that takes a slice of its own costs
        // about what the joint walk does, and single entries are shared more widely (and
        // derived from near states: two length-bounded strings side by side, o9892, o82149).
        // It has one iff it is safe to the shortest slice's depth ([`CiEntry::slice_for`]),
        // searched only that deep (the entry's own build searches again, in full).
        let slice = trie.plain_slice();
        let shortest = slice.by_length.first().map_or(slice.max_len, |p| p.len);
        if !uncached.iter().any(|&j| slice.safe_depth_upto(lexers[j].dfa, lexers[j].state, shortest) < shortest) {
            return None;
        }
        CiEntry::joint_slice_for(trie, lexers)
    }

    /// Builds the entry for `key` (a miss) and caches it within budget.
    ///
    /// `nested`: building a near state's entry for a derivation; then only states split off
    /// earlier in the refinement serve as near states, so derivations cannot cycle.
    fn insert_built(&self, trie: &TokTrie, key: &[(u32, u32)], lexers: &[Lexer], mask_words: usize, nested: bool) -> Arc<CiEntry> {
        let diag = miss_diag::enabled().then(|| {
            let (b, prev) = miss_diag::start(false, &[], key, LANGUAGE, memory::now());
            if prev.is_some_and(|p| self.map.read().unwrap_or_else(|p| p.into_inner()).contains_key(&p)) {
                miss_diag::stale_cached(false);
            }
            b
        });
        let t0 = std::time::Instant::now();
        let joint = if key.len() > 1 { Self::joint_slice(trie, key, lexers, &self.map) } else { None };
        let e = if let Some(partial) = joint {
            Arc::new(CiEntry::build_joint_sliced(trie.plain_slice(), partial, lexers, mask_words))
        } else if key.len() > 1 {
            // Several lexemes: the union of each one's entry (each cached on its own, so a
            // key-set state that differs from a known one only in its literal keys reuses the
            // expensive whole-trie walk of, say, "any other key string").
            let singles: Vec<Arc<CiEntry>> = key
                .iter()
                .zip(lexers)
                .map(|(k, l)| self.entry(trie, std::slice::from_ref(k), std::slice::from_ref(l), mask_words, nested))
                .collect();
            Arc::new(CiEntry::union(&singles, mask_words))
        } else {
            let l = lexers[0];
            let depth = trie.max_depth();
            let s = l.dfa.canonical_state(l.state, depth);
            // A state the plain-text slice serves is derived only from a near state whose
            // entry is cached already, and only while the lockstep walk stays well under the
            // slice's own walk (a key that must avoid a few declared names, next to "the rest
            // of any string": a few hundred nodes instead of the ~12k of the slice's walk).
            let sliced_budget = trie.plain_slice().rest.nodes.len() / 4;
            let walk_budget = trie.nodes.len() / 8;
            // A near state's lexer and key (computed before the lock is taken: it may take a
            // while), and its cached entry.
            let near_of = |t: u32| {
                let near = Lexer { state: t, ..l };
                (near, [near.key(depth)])
            };
            // (A near state's entry that serves derivations is in use: stamped, like a hit.)
            let cached = |key: &[(u32, u32)]| {
                self.map.read().unwrap_or_else(|p| p.into_inner()).get(key).map(|s| {
                    s.touch();
                    s.entry.clone()
                })
            };
            // First a derivation from a cached near state within the smaller budget: when it
            // succeeds, whether the slice serves this state does not matter (it only chose
            // the budget), and the search for that (over the pairs the state reaches along
            // plain bytes: a whole key automaton at a key's first byte) is skipped.
            let early = if nested { None } else { near_state(trie, l.dfa, s, depth, false).map(|(t, m)| (t, m, near_of(t))) };
            let mut tried: Option<usize> = None;
            let mut derived = early.and_then(|(t, m, (_, near_key))| {
                let entry = cached(&near_key)?;
                let budget = sliced_budget.min(walk_budget);
                tried = Some(budget);
                CiEntry::derive(trie, &entry, s, t, l.dfa, m, mask_words, budget)
            });
            let sliced = if derived.is_some() { None } else { CiEntry::slice_for(trie, &l) };
            if derived.is_none() {
                let ns = match early {
                    Some(e) => Some(e),
                    None if nested && sliced.is_none() => near_state(trie, l.dfa, s, depth, true).map(|(t, m)| (t, m, near_of(t))),
                    None => None,
                };
                derived = ns.and_then(|(t, m, (near, near_key))| {
                    let entry = match cached(&near_key) {
                        Some(e) => e,
                        None if sliced.is_some() => return None,
                        // A near state whose own entry is not cached must be walked first:
                        // only worth it when that walk is no bigger than this state's own (it
                        // is then shared).
                        None if trie.nodes_under(&l.dfa.live_bytes(t)) > 2 * trie.nodes_under(&l.dfa.live_bytes(s)) => return None,
                        None => self.insert_built(trie, &near_key, &[near], mask_words, true),
                    };
                    let budget = if sliced.is_some() { sliced_budget } else { walk_budget };
                    if tried.is_some_and(|t| budget <= t) {
                        return None; // failed within this budget already
                    }
                    CiEntry::derive(trie, &entry, s, t, l.dfa, m, mask_words, budget)
                });
            }
            Arc::new(derived.unwrap_or_else(|| match sliced {
                Some(partial) => CiEntry::build_sliced(trie.plain_slice(), partial, &l, mask_words),
                None => CiEntry::build_unsliced(trie, lexers, mask_words),
            }))
        };
        if let Some(b) = diag {
            miss_diag::done(b);
        }
        let size = e.allowed.memory_bytes() + e.level.memory_bytes() + key.len() * 8 + 64;
        if self.charge(size) {
            e.level.set_charged();
            let slot = Slot { entry: e.clone(), bytes: size, cost_ns: t0.elapsed().as_nanos() as u64, stamp: AtomicU64::new(memory::now()) };
            let old = self.map.write().unwrap_or_else(|p| p.into_inner()).insert(key.to_vec(), slot);
            if let Some(old) = old {
                // Built twice at once by two threads.
                let rests = if Arc::ptr_eq(&old.entry, &e) { 0 } else { old.entry.level.uncharge() };
                self.account.refund(old.bytes + rests, false);
            }
        }
        e
    }

    /// The level below trie nodes `nodes` (sorted) for `key`, as `parent`'s child `g` (a
    /// group's index, or one with [`REST`] for that group's rest): the parent's cached child,
    /// else a level built from the same nodes for the same key under any other parent, else a
    /// fresh one (cached both ways, within budget).
    pub fn level(&self, trie: &TokTrie, parent: &Level, g: u32, nodes: &[u32], key: &[(u32, u32)], lexers: &[Lexer]) -> Arc<Level> {
        if let Some(l) = parent.child(g, key) {
            return l;
        }
        let (l, cached) = self.level_of(trie, nodes, key, lexers);
        if cached {
            parent.insert_child(g, key, &l);
        }
        l
    }

    /// The level below trie nodes `nodes` (sorted) for `key`: the one built before from the
    /// same nodes for the same key, else a fresh one. Also whether it is cached.
    fn level_of(&self, trie: &TokTrie, nodes: &[u32], key: &[(u32, u32)], lexers: &[Lexer]) -> (Arc<Level>, bool) {
        self.level_hashed(trie, nodes, nodes_hash(nodes), key, lexers)
    }

    /// [`CiCache::level_of`] with the hash of `nodes` given.
    ///
    /// Many lexemes below many nodes (a statement's first terminals after the spaces that
    /// may start a token: 18 lexemes, 100 k nodes in C with Llama 3, 2.4 ms) take the union
    /// of each one's level ([`union_levels`]), cached on its own: another context's set of
    /// first terminals (the same statements, with `}` or `else` allowed or not) then costs
    /// the levels of the lexemes it adds and a merge, not one more walk of them all.
    fn level_hashed(&self, trie: &TokTrie, nodes: &[u32], nh: u64, key: &[(u32, u32)], lexers: &[Lexer]) -> (Arc<Level>, bool) {
        debug_assert!(key.windows(2).all(|w| w[0] < w[1]), "a key names each lexer state once, in order");
        let h = level_hash(nh, key);
        if let Some(l) = self.cached_level(h, nodes, key) {
            return (l, true);
        }
        self.build_level(h, nodes, key, || {
            let first = first_bytes(lexers);
            let roots = trie.with_child_in(nodes, &first);
            if lexers.len() >= UNION_MIN_LEXEMES && trie.nodes_below(&roots) >= UNION_MIN_NODES {
                let parts: Vec<(Arc<Level>, u64)> = key.iter().zip(lexers).enumerate().map(|(j, (k, lx))| (self.part_level(trie, nodes, nh, k, lx), 1 << j)).collect();
                union_levels(&parts)
            } else {
                level_below(trie, &roots, &first, lexers)
            }
        })
    }

    /// The cached level with content hash `h`, built below `nodes` for `key`.
    fn cached_level(&self, h: u64, nodes: &[u32], key: &[(u32, u32)]) -> Option<Arc<Level>> {
        let same = |e: &&LevelSlot| e.nodes[..] == nodes[..] && e.key[..] == *key;
        let l = self.levels.read().unwrap_or_else(|p| p.into_inner()).get(&h).and_then(|v| v.iter().find(same).map(|e| e.level.clone()))?;
        l.touch();
        self.account.hit();
        Some(l)
    }

    /// Builds the level below `nodes` for `key` (a miss; `h`: its content hash) and caches
    /// it within budget. Also whether it is cached.
    fn build_level(&self, h: u64, nodes: &[u32], key: &[(u32, u32)], build: impl FnOnce() -> Level) -> (Arc<Level>, bool) {
        self.account.miss();
        let diag = miss_diag::enabled().then(|| {
            let (b, prev) = miss_diag::start(true, nodes, key, LANGUAGE, memory::now());
            let cached = |p: Key| self.levels.read().unwrap_or_else(|p| p.into_inner()).get(&level_hash(nodes_hash(nodes), &p)).is_some_and(|v| v.iter().any(|e| e.nodes[..] == nodes[..] && e.key == p));
            if prev.is_some_and(cached) {
                miss_diag::stale_cached(true);
            }
            b
        });
        let t0 = std::time::Instant::now();
        let l = Arc::new(build());
        if let Some(b) = diag {
            miss_diag::done(b);
        }
        // The level, its key in both maps, the copy of the nodes it is found by, the links.
        let size = l.memory_bytes() + 2 * key.len() * 8 + nodes.len() * 4 + 128;
        if self.charge(size) {
            let mut levels = self.levels.write().unwrap_or_else(|p| p.into_inner());
            let v = levels.entry(h).or_default();
            if let Some(e) = v.iter().find(|e| e.nodes[..] == nodes[..] && e.key[..] == *key) {
                // Built meanwhile by another thread: that one is the cached one.
                let other = e.level.clone();
                drop(levels);
                self.account.refund(size, false);
                return (other, true);
            }
            l.set_charged();
            v.push(LevelSlot { nodes: nodes[..].into(), key: key.to_vec(), level: l.clone(), bytes: size, cost_ns: t0.elapsed().as_nanos() as u64 });
            return (l, true);
        }
        (l, false)
    }

    /// One lexeme's part of a union level ([`CiCache::level_hashed`]): its level below
    /// `nodes`.
    ///
    /// Where it starts below many nodes (a Scheme symbol after a symbol's end anywhere in
    /// the trie: 20-125 k nodes), it is the concatenation of its levels below the nodes under
    /// each first byte, each cached on its own ([`concat_levels`]): another context's set of
    /// ends (another lexeme ending along with the symbol on a few first bytes, another set of
    /// nodes with children it starts on) then costs the walks below the runs whose nodes
    /// differ, not one of them all. Only the parts are kept (not their concatenation).
    fn part_level(&self, trie: &TokTrie, nodes: &[u32], nh: u64, k: &(u32, u32), lx: &Lexer) -> Arc<Level> {
        let key = std::slice::from_ref(k);
        let lexers = std::slice::from_ref(lx);
        let h = level_hash(nh, key);
        if let Some(l) = self.cached_level(h, nodes, key) {
            return l;
        }
        let first = first_bytes(lexers);
        let roots = trie.with_child_in(nodes, &first);
        if trie.nodes_below(&roots) < UNION_MIN_NODES {
            return self.build_level(h, nodes, key, || level_below(trie, &roots, &first, lexers)).0;
        }
        let parts: Vec<Arc<Level>> = trie
            .by_first_byte(&roots)
            .map(|chunk| {
                let h = level_hash(nodes_hash(chunk), key);
                self.cached_level(h, chunk, key).unwrap_or_else(|| self.build_level(h, chunk, key, || level_below(trie, chunk, &first, lexers)).0)
            })
            .collect();
        Arc::new(concat_levels(&parts))
    }

    /// Group `g`'s nodes `level` was not built from, or `None` when that is all of them
    /// ([`Level::rest`]; `compute` gives them). Kept, and charged to this cache, on a level
    /// this cache holds, within budget.
    pub fn rest(&self, level: &Level, g: u32, compute: impl FnOnce() -> Vec<u32>) -> Option<Arc<[u32]>> {
        level.rest(g, compute, |size| self.charge(size))
    }

    /// Level-0 entries currently cached.
    pub fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held by cached entries (all levels).
    pub fn memory_bytes(&self) -> usize {
        self.account.bytes()
    }

    /// (hits, misses, evictions) so far.
    pub fn stats(&self) -> (u64, u64, u64) {
        let [h, m, e, _] = self.account.counts();
        (h, m, e)
    }
}

impl memory::Cache for CiCache {
    fn account(&self) -> &Account {
        &self.account
    }

    /// Entries and levels no fill holds now (a level goes with every level under its content
    /// hash, collisions being rare).
    fn victims(&self, out: &mut Vec<Victim>) {
        for (k, s) in self.map.read().unwrap_or_else(|p| p.into_inner()).iter() {
            if Arc::strong_count(&s.entry) == 1 {
                let bytes = s.bytes + s.entry.level.rest_bytes.load(Relaxed);
                out.push(Victim { priority: memory::priority(s.stamp.load(Relaxed), s.cost_ns, bytes), bytes, handle: entry_handle(k) });
            }
        }
        for (&h, v) in self.levels.read().unwrap_or_else(|p| p.into_inner()).iter() {
            if v.iter().all(|e| Arc::strong_count(&e.level) == 1) {
                let bytes = v.iter().map(|e| e.bytes + e.level.rest_bytes.load(Relaxed)).sum();
                let stamp = v.iter().map(|e| e.level.stamp.load(Relaxed)).max().unwrap_or(0);
                let cost = v.iter().map(|e| e.cost_ns).sum();
                out.push(Victim { priority: memory::priority(stamp, cost, bytes), bytes, handle: levels_handle(h) });
            }
        }
    }

    fn evict(&self, handles: &[u64]) {
        let set: rustc_hash::FxHashSet<u64> = handles.iter().copied().collect();
        // (Found under the read locks, removed under the write locks, freed after them.)
        let keys: Vec<Key> = self.map.read().unwrap_or_else(|p| p.into_inner()).keys().filter(|k| set.contains(&entry_handle(k))).cloned().collect();
        let hashes: Vec<u64> = self.levels.read().unwrap_or_else(|p| p.into_inner()).keys().copied().filter(|&h| set.contains(&levels_handle(h))).collect();
        let mut gone: Vec<Slot> = Vec::new();
        {
            let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
            for k in &keys {
                if map.get(k).is_some_and(|s| Arc::strong_count(&s.entry) == 1) {
                    if let Some(s) = map.remove(k) {
                        if miss_diag::enabled() {
                            miss_diag::evicted(&[], k, LANGUAGE, s.stamp.load(Relaxed));
                        }
                        gone.push(s);
                    }
                }
            }
        }
        let mut gone_levels: Vec<LevelSlot> = Vec::new();
        {
            let mut levels = self.levels.write().unwrap_or_else(|p| p.into_inner());
            for h in &hashes {
                if levels.get(h).is_some_and(|v| v.iter().all(|e| Arc::strong_count(&e.level) == 1)) {
                    gone_levels.extend(levels.remove(h).into_iter().flatten());
                }
            }
        }
        for s in &gone {
            self.account.refund(s.bytes + s.entry.level.uncharge(), true);
        }
        for l in &gone_levels {
            if miss_diag::enabled() {
                miss_diag::evicted(&l.nodes, &l.key, LANGUAGE, l.level.stamp.load(Relaxed));
            }
            self.account.refund(l.bytes + l.level.uncharge(), true);
        }
    }

    fn pinned(&self) -> usize {
        let e: usize = self.map.read().unwrap_or_else(|p| p.into_inner()).values().filter(|s| Arc::strong_count(&s.entry) > 1).map(|s| s.bytes + s.entry.level.rest_bytes.load(Relaxed)).sum();
        let l: usize = self.levels.read().unwrap_or_else(|p| p.into_inner()).values().flatten().filter(|e| Arc::strong_count(&e.level) > 1).map(|e| e.bytes + e.level.rest_bytes.load(Relaxed)).sum();
        e + l
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dfa(pattern: &str) -> Dfa {
        let limits = crate::Limits::default();
        Dfa::from_rx(&crate::frontend::regex::parse_regex(pattern, &limits).unwrap(), &limits).unwrap()
    }

    /// A level of many lexemes below many nodes is the union of each lexeme's level (each
    /// cached on its own), and equals the level one walk of them together builds: the same
    /// tokens, the same nodes ending the same lexemes. (Below nested starts, one walk may put
    /// a node in two groups, the lexemes ending there from each start; the union puts it in
    /// one, ending all of them: a row completing both is the union of the two rows.)
    #[test]
    fn large_levels_are_the_union_of_each_lexemes_level() {
        let toks = crate::testutil::random_tokens(40_000, 8, b"abcdef abcdef;=(ab", 0x2545_f491_4f6c_dd1d);
        let trie = TokTrie::build(toks.iter().enumerate().map(|(i, b)| (i as u32, &b[..]))).with_below_sets();
        // Where an identifier ends: every node on a letter.
        let nodes: Vec<u32> = (0..trie.nodes.len() as u32).filter(|&n| trie.nodes[n as usize].byte.is_ascii_lowercase()).collect();
        let dfas = [dfa(" ?[a-z]+ ?;"), dfa(" ?="), dfa(";"), dfa(r" ?\(a*"), dfa("[a-f]*;")];
        let depth = trie.max_depth();
        let mut lexers: Vec<Lexer> = dfas.iter().enumerate().map(|(i, d)| Lexer { dfa: d, state: d.start(), gid: i as u32 }).collect();
        lexers.sort_by_key(|l| l.key(depth));
        let key: Vec<(u32, u32)> = lexers.iter().map(|l| l.key(depth)).collect();
        let first = first_bytes(&lexers);
        let below: usize = trie.with_child_in(&nodes, &first).iter().map(|&r| trie.nodes[r as usize].subtree_len as usize).sum();
        assert!(lexers.len() >= UNION_MIN_LEXEMES && below >= UNION_MIN_NODES, "{below} nodes below");
        let cache = CiCache::new(1 << 30);
        let (union, cached) = cache.level_of(&trie, &nodes, &key, &lexers);
        assert!(cached);
        // The union, each distinct lexeme's level below few nodes, and the parts of those
        // below many nodes, one per first byte ([`CiCache::part_level`]).
        let held = || cache.levels.read().unwrap().values().flat_map(|v| v.iter().map(|e| e.nodes.to_vec())).collect::<std::collections::BTreeSet<Vec<u32>>>();
        let before = held();
        let chunked = lexers.iter().filter(|l| trie.nodes_below(&trie.with_child_in(&nodes, &first_bytes(std::slice::from_ref(l)))) >= UNION_MIN_NODES).count();
        assert!(chunked >= 1 && before.iter().any(|n| n.len() < nodes.len()), "some lexeme's level is cut by first byte");
        let joint = build_level(&trie, &nodes, &lexers);
        let ids = |l: &Level| {
            let mut v = l.tokens.clone();
            if let Some(b) = &l.bits {
                v.extend((0..b.len() as u32 * 32).filter(|&i| b[i as usize / 32] >> (i % 32) & 1 == 1));
            }
            v.sort_unstable();
            v.dedup();
            v
        };
        let ends = |l: &Level| {
            let mut v: std::collections::BTreeMap<u32, u64> = Default::default();
            for g in &l.groups {
                for &n in &g.nodes {
                    *v.entry(n).or_default() |= g.ending;
                }
            }
            v
        };
        assert!(ids(&joint).len() > 1000 && joint.groups.len() > 2, "a large level: {} ids, {} groups", ids(&joint).len(), joint.groups.len());
        assert_eq!(ids(&union), ids(&joint));
        assert_eq!(ends(&union), ends(&joint));
        // Ends that differ under one first byte only: the parts under the others are reused.
        let mut c = 0;
        while trie.nodes[c].byte != b'c' {
            c += trie.nodes[c].subtree_len as usize;
        }
        let under_c = |n: u32| (c..c + trie.nodes[c].subtree_len as usize).contains(&(n as usize));
        let nodes2: Vec<u32> = nodes.iter().copied().filter(|&n| !under_c(n) || n % 3 != 0).collect();
        let (union2, _) = cache.level_of(&trie, &nodes2, &key, &lexers);
        let joint2 = build_level(&trie, &nodes2, &lexers);
        assert_eq!(ids(&union2), ids(&joint2));
        assert_eq!(ends(&union2), ends(&joint2));
        let new: Vec<Vec<u32>> = held().difference(&before).cloned().collect();
        assert!(new.iter().any(|n| n.len() < nodes2.len()), "a part was built under c");
        assert!(new.iter().all(|n| n[..] == nodes2[..] || n.iter().all(|&x| under_c(x))), "parts under other first bytes are reused");
    }

    /// A level is built once per (parent nodes, key): a second parent whose group ends at the
    /// same nodes gets the same level; other nodes or another key get their own, each equal
    /// to a fresh build.
    #[test]
    fn levels_are_shared_by_content() {
        let toks: Vec<&[u8]> = vec![b"a\"", b"b\"", b"\"", b"\":", b"\":1", b"a", b"b", b":", b":1", b"1", b"\"2", b"a\":", b"b\":"];
        let trie = TokTrie::build(toks.iter().enumerate().map(|(i, b)| (i as u32, *b)));
        let words = 1;
        let (key_a, key_b, key_a_only) = (dfa(r#"[ab]*""#), dfa(r#"(a|b)*""#), dfa(r#"a*""#));
        let (colon, two) = (dfa(":1?"), dfa("2"));
        fn lex(d: &Dfa, gid: u32) -> Lexer<'_> {
            Lexer { dfa: d, state: d.start(), gid }
        }
        let e1 = CiEntry::build_walk(&trie, &[lex(&key_a, 1)], words);
        let e2 = CiEntry::build_walk(&trie, &[lex(&key_b, 2)], words);
        let e3 = CiEntry::build_walk(&trie, &[lex(&key_a_only, 3)], words);
        assert_eq!(e1.level.groups[0].nodes, e2.level.groups[0].nodes, "two automata of one language end at the same nodes");
        assert_ne!(e1.level.groups[0].nodes, e3.level.groups[0].nodes);
        let depth = trie.max_depth();
        let next = [lex(&colon, 4)];
        let key = [next[0].key(depth)];
        let cache = CiCache::new(1 << 20);
        let l1 = cache.level(&trie, &e1.level, 0, &e1.level.groups[0].nodes, &key, &next);
        let l2 = cache.level(&trie, &e2.level, 0, &e2.level.groups[0].nodes, &key, &next);
        assert!(Arc::ptr_eq(&l1, &l2), "same nodes, same key: one level");
        assert!(Arc::ptr_eq(&l1, &e2.level.child(0, &key).unwrap()), "and the second parent caches it too");
        let fresh = build_level(&trie, &e1.level.groups[0].nodes, &next);
        let sorted = |mut v: Vec<u32>| {
            v.sort();
            v
        };
        assert_eq!(sorted(l1.tokens.clone()), sorted(fresh.tokens.clone()));
        assert_eq!(sorted(l1.tokens.clone()), vec![3, 4, 11, 12]);
        let l3 = cache.level(&trie, &e3.level, 0, &e3.level.groups[0].nodes, &key, &next);
        assert!(!Arc::ptr_eq(&l1, &l3), "other nodes: another level");
        assert_eq!(sorted(l3.tokens.clone()), sorted(build_level(&trie, &e3.level.groups[0].nodes, &next).tokens));
        let other = [lex(&two, 5)];
        let other_key = [other[0].key(depth)];
        let l4 = cache.level(&trie, &e2.level, 0, &e2.level.groups[0].nodes, &other_key, &other);
        assert!(!Arc::ptr_eq(&l1, &l4), "another key: another level");
        assert_eq!(sorted(l4.tokens.clone()), vec![10]);
    }

    /// A level's rests are charged to its cache with the level, kept only on a level the cache
    /// holds, and refunded when the level is evicted.
    #[test]
    fn rests_are_charged_and_refunded_with_their_level() {
        use crate::runtime::memory::Cache;
        let toks: Vec<&[u8]> = vec![b"a:", b"b:", b"a:1", b"b:12", b"ab:", b"a", b"b", b":", b"1"];
        let trie = TokTrie::build(toks.iter().enumerate().map(|(i, b)| (i as u32, *b)));
        let (word, colon) = (dfa("[ab]+"), dfa(":1*"));
        let e = CiEntry::build_walk(&trie, &[Lexer { dfa: &word, state: word.start(), gid: 1 }], 1);
        let next = [Lexer { dfa: &colon, state: colon.start(), gid: 2 }];
        let key = [next[0].key(trie.max_depth())];
        let cache = CiCache::new(1 << 20);
        let level = cache.level(&trie, &e.level, 0, &e.level.groups[0].nodes, &key, &next);
        let g = level.groups.iter().position(|g| !g.nodes.is_empty()).expect("a group below \":\"") as u32;
        let before = cache.memory_bytes();
        assert_eq!(cache.rest(&level, g, Vec::new).as_deref(), Some(&[][..]), "none of the group's nodes left");
        let charged = cache.memory_bytes() - before;
        assert!(charged > 0, "a kept rest is charged");
        assert_eq!(cache.rest(&level, g, || unreachable!("kept")).as_deref(), Some(&[][..]));
        assert_eq!(cache.memory_bytes(), before + charged, "charged once");
        // The entry's own level is not in the cache: its rest is computed each time, uncharged.
        let mut calls = 0;
        for _ in 0..2 {
            cache.rest(&e.level, 0, || {
                calls += 1;
                Vec::new()
            });
        }
        assert_eq!((calls, cache.memory_bytes()), (2, before + charged));
        let mut victims = Vec::new();
        cache.victims(&mut victims);
        assert!(victims.is_empty(), "a level a fill holds is no victim");
        drop(level);
        cache.victims(&mut victims);
        assert_eq!(victims.iter().map(|v| v.bytes).sum::<usize>(), before + charged, "a victim's bytes include its rests");
        cache.evict(&victims.iter().map(|v| v.handle).collect::<Vec<_>>());
        assert_eq!(cache.memory_bytes(), 0, "the level and its rests refunded");
    }

    /// An entry derived from a near state's ([`CiEntry::derive`]) equals the state's own walk:
    /// the same tokens, and the same end nodes, in order, where the near state's ends (kept
    /// where the two agree) and the state's own ends (where they differ) interleave — a
    /// lexeme that may end after every byte, with a length bound.
    #[test]
    fn derived_entries_equal_fresh_walks() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        let mut toks: Vec<Vec<u8>> = Vec::new();
        for _ in 0..4000 {
            let len = 1 + rnd(9) as usize;
            toks.push((0..len).map(|_| b"ab c,"[rnd(5) as usize]).collect());
        }
        toks.sort();
        toks.dedup();
        let trie = TokTrie::build(toks.iter().enumerate().map(|(i, b)| (i as u32, &b[..])));
        let mask_words = toks.len() / 32 + 1;
        let d = dfa("[ab c]{0,14}");
        let k = trie.max_depth();
        let entry = |s: u32| CiEntry::build_walk(&trie, &[Lexer { dfa: &d, state: s, gid: 1 }], mask_words);
        let mut derived = 0;
        let mut s = d.start();
        while s != DEAD {
            if let Some((t, m)) = d.near_state(s, k) {
                let near = entry(t);
                if let Some(got) = CiEntry::derive(&trie, &near, s, t, &d, m, mask_words, usize::MAX) {
                    let want = entry(s);
                    derived += 1;
                    assert_eq!(got.allowed.to_bits(mask_words), want.allowed.to_bits(mask_words), "state {s} from {t}");
                    let nodes = |e: &CiEntry| e.level.groups.iter().map(|g| (g.ending, g.nodes.clone())).collect::<Vec<_>>();
                    assert_eq!(nodes(&got), nodes(&want), "state {s} from {t} (m = {m})");
                }
            }
            s = d.next(s, b'a');
        }
        assert!(derived >= 3, "{derived} states derived");
    }

    /// One pass below nested roots finds the tokens and groups of one walk per root.
    #[test]
    fn nested_walk_matches_a_walk_per_root() {
        let toks: Vec<&[u8]> = vec![b"a", b"ab", b"abc", b"abc1", b"ab1", b"a1", b"a12", b"1", b"12", b"b", b"bc", b"x", b"xa", b"xab1", b"1a", b"ab c", b"abcd2"];
        let trie = TokTrie::build(toks.iter().enumerate().map(|(i, b)| (i as u32, *b)));
        let (ident, num, both) = (dfa("[a-z]+"), dfa("[0-9]+"), dfa("[a-z0-9]+"));
        let lexers = [Lexer { dfa: &ident, state: ident.start(), gid: 1 }, Lexer { dfa: &num, state: num.start(), gid: 2 }, Lexer { dfa: &both, state: both.start(), gid: 3 }];
        let canon = |groups: Vec<EndGroup>| {
            let mut v: Vec<(u64, Vec<u32>)> = groups.into_iter().map(|g| (g.ending, g.nodes)).collect();
            v.sort();
            v
        };
        // Every node under "a" and "x" (and some not on a path of letters) as roots, some nested.
        let all: Vec<u32> = (0..trie.nodes.len() as u32).filter(|&n| trie.nodes[n as usize].subtree_len > 1).collect();
        for roots in [all.clone(), all.iter().copied().step_by(2).collect(), all[1..].to_vec()] {
            for ks in [&lexers[..1], &lexers[..2], &lexers[..]] {
                let first = first_bytes(ks);
                let mut want_tokens = Vec::new();
                let want = walk(&trie, ks, &below(&trie, &roots), &first, |ids| want_tokens.extend_from_slice(ids));
                let mut got_tokens = Vec::new();
                let got = walk_nested(&trie, ks, &roots, |ids| got_tokens.extend_from_slice(ids));
                want_tokens.sort();
                want_tokens.dedup();
                got_tokens.sort();
                assert!(got_tokens.windows(2).all(|w| w[0] < w[1]), "each token once");
                assert_eq!(got_tokens, want_tokens, "roots {roots:?}, {} lexers", ks.len());
                assert_eq!(canon(got), canon(want), "roots {roots:?}, {} lexers", ks.len());
            }
        }
    }

    /// Edits recorded against a shared bitmask (each token at most once) give the bitmask
    /// edited in place, as lists while they are few and as a bitmask of their own past
    /// `MAX_NEAR` changes.
    #[test]
    fn base_edits_match_editing_the_bitmask() {
        let words = 200;
        let base: Vec<u32> = (0..words as u32).map(|w| w.wrapping_mul(0x9E37_79B9)).collect();
        for n in [10u32, 3000] {
            let mut want = base.clone();
            let mut edits = BaseEdits { base: &base, add: Vec::new(), remove: Vec::new(), bits: None };
            for i in 0..n {
                // Each token edited once, as in a walk (a token ends at one trie node).
                let t = i * 7 % (32 * words as u32);
                if i % 3 == 0 {
                    SetEdits::clear(&mut want[..], t);
                    edits.clear(t);
                } else {
                    SetEdits::set(&mut want[..], t);
                    edits.set(t);
                }
            }
            let got = match edits {
                BaseEdits { bits: Some(bits), .. } => bits,
                BaseEdits { add, mut remove, .. } => {
                    remove.sort_unstable();
                    TokenSet::Near { base: base.clone().into(), add: add.into(), remove: remove.into() }.to_bits(words)
                }
            };
            assert_eq!(got, want, "{n} edits");
        }
    }

    /// Each shape of union (all small, one large bitmask or near set among small ones, two
    /// large) holds exactly the OR of its parts.
    #[test]
    fn unions_of_token_sets_hold_every_part() {
        let words = 50;
        let bits = |ids: &[u32]| {
            let mut b = vec![0u32; words];
            for &t in ids {
                b[t as usize / 32] |= 1 << (t % 32);
            }
            b
        };
        let many: Vec<u32> = (0..1600).filter(|t| t % 3 == 0).collect();
        let large = TokenSet::from_bits(bits(&many));
        let mut near_ids: Vec<u32> = many.iter().copied().filter(|&t| t != 3 && t != 6).collect();
        near_ids.push(1);
        let near = TokenSet::near(bits(&near_ids), &large);
        assert!(matches!(near, TokenSet::Near { .. }));
        let small_a = TokenSet::Ids(vec![3, 4].into());
        let small_b = TokenSet::Ids(vec![1599, 4].into());
        let other_large = TokenSet::from_bits(bits(&(0..1600).filter(|t| t % 2 == 0).collect::<Vec<_>>()));
        let cases: Vec<Vec<&TokenSet>> = vec![
            vec![&small_a, &small_b],
            vec![&small_a, &large, &small_b],
            vec![&near, &small_a],
            vec![&small_b, &near],
            vec![&large, &other_large, &small_a],
            vec![&near],
        ];
        for (k, parts) in cases.iter().enumerate() {
            let mut want = vec![0u32; words];
            for p in parts {
                p.or_into(&mut want);
            }
            let got = union_sets(parts.iter().copied(), words);
            assert_eq!(got.to_bits(words), want, "case {k}");
        }
    }
}
