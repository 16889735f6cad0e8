//! Dense byte-level DFA of one terminal: byte equivalence classes, a dead state 0,
//! trimmed so every live state can still reach acceptance.
//!
//! Exactness depends on trimming: a live state always has a completion, so a token
//! whose bytes keep the DFA live really is a prefix of some string of the terminal.

use crate::runtime::byteset::ByteSet;
use crate::runtime::error::{Error, Result};
use crate::runtime::limits::{Limits, LIMIT_HINT};
use crate::automata::nfa::Nfa;
use rustc_hash::FxHashMap;

/// The dead state: no continuation is possible.
pub const DEAD: u32 = 0;

/// Most states a DFA may have: state ids are 16-bit in the transition table (half the
/// memory of 32-bit ids; the dense tables of literal-heavy automata were a fifth of a large
/// schema's compile, mostly first touches of fresh memory). `max_dfa_states` above it is
/// lowered to it.
pub(crate) const MAX_STATES: usize = 1 << 16;

/// Automata built from deterministic rows with at most this many live edges per state on
/// average keep them sparse ([`Dfa::from_rows`]).
pub(crate) const SPARSE_EDGES_PER_STATE: usize = 2;

/// The successor on byte `b` among one state's sorted, disjoint edges ([`DEAD`] if none).
#[inline(always)]
fn sparse_next(edges: &[(u8, u8, u16)], b: u8) -> u32 {
    for &(lo, hi, t) in edges {
        if b < lo {
            break;
        }
        if b <= hi {
            return t as u32;
        }
    }
    DEAD
}

/// Each state's live bytes in a dense table (`trans[s * n_classes + c]`, already trimmed:
/// every non-dead entry leads to a live state).
fn live_sets_of_table(trans: &[u16], classes: &[u8; 256], n_classes: usize) -> crate::automata::live_sets::LiveSets {
    let mut class_bytes = vec![ByteSet::default(); n_classes];
    for b in 0..=255u8 {
        class_bytes[classes[b as usize] as usize].insert(b);
    }
    let mut live = crate::automata::live_sets::LiveSetsBuilder::with_capacity(trans.len() / n_classes.max(1));
    for row in trans.chunks(n_classes) {
        let mut set = ByteSet::default();
        for (c, &t) in row.iter().enumerate() {
            if t as u32 != DEAD {
                set.union_with(&class_bytes[c]);
            }
        }
        live.push(set);
    }
    live.finish()
}

/// One byte of each of the `n` classes of `classes`.
fn class_representatives(classes: &[u8; 256], n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    for b in (0..=255u8).rev() {
        out[classes[b as usize] as usize] = b;
    }
    out
}

/// The error for a terminal whose DFA needs more states than [`state_limit`] allows; at
/// [`MAX_STATES`] itself, raising the limit cannot help and the hint says so.
pub(crate) fn state_limit_error(limits: &Limits) -> Error {
    let limit = state_limit(limits);
    let (what, hint) = if limit == MAX_STATES {
        ("a terminal's DFA has too many states (65,536 is the most any terminal may have)".to_string(), "split the rule into smaller pieces or simplify it")
    } else {
        ("a terminal's DFA has too many states".to_string(), LIMIT_HINT)
    };
    Error::Limit { name: "max_dfa_states", limit, what, hint }
}

/// The state limit a construction under `limits` works to.
pub(crate) fn state_limit(limits: &Limits) -> usize {
    limits.max_dfa_states.min(MAX_STATES)
}

/// A deterministic automaton over bytes.
#[derive(Debug, Clone)]
pub struct Dfa {
    classes: [u8; 256],
    n_classes: usize,
    /// `trans[state * n_classes + class]` (state ids are below [`MAX_STATES`]); empty for a
    /// sparse automaton.
    trans: Vec<u16>,
    /// A sparse automaton's edges ([`Dfa::from_rows`]): state `s` moves on the sorted,
    /// disjoint byte ranges `edges[span[s]..span[s + 1]]` (live targets only); both empty
    /// for a dense one.
    span: Vec<u32>,
    edges: Vec<(u8, u8, u16)>,
    /// A byte of each class (for [`Dfa::next_class`] on a sparse automaton; empty when dense).
    class_byte: Vec<u8>,
    accepting: Vec<bool>,
    start: u32,
    /// Whether the original expression matched the empty string (the DFA itself never does).
    nullable: bool,
    /// For each state of a dense automaton, the bytes leading to a live state (a sparse one's
    /// are its edges' bytes: [`Dfa::live_bytes`]).
    live_bytes: crate::automata::live_sets::LiveSets,
    /// Canonical states for inputs of at most `.0` bytes (see [`Dfa::canonical_state`]).
    canon: std::sync::OnceLock<(usize, crate::automata::kequiv::KEquiv)>,
    /// While the canonical states are being computed in the background: the id of the process
    /// whose thread computes them (see [`Dfa::defer_canonical`]); 0 otherwise.
    canon_deferred: Deferral,
    /// Per state, its memoized [`crate::automata::fingerprint::language_id`] (`LANG_UNKNOWN` until
    /// computed, `LANG_NONE` when it has none).
    lang: LangMemo,
    /// The automaton's moves along plain-string bytes ([`crate::vocab::slice`]), built on first use.
    plain: PlainMemo,
}

/// States of the plain-text slice's automaton of string prefixes ([`crate::vocab::slice`]).
pub(crate) const PLAIN_STATES: usize = 8;

/// Per plain-prefix state ([`crate::vocab::slice`]), an automaton's bytes grouped by (its
/// class, next plain-prefix state): one representative byte, the next state and every byte
/// of the group. Built by the slice, memoized here per automaton.
pub(crate) type PlainMoves = [Vec<(u8, u8, ByteSet)>; PLAIN_STATES];

/// Memo of [`PlainMoves`] (a clone starts empty).
#[derive(Debug, Default)]
struct PlainMemo(std::sync::OnceLock<Box<PlainMoves>>);

impl Clone for PlainMemo {
    fn clone(&self) -> Self {
        PlainMemo::default()
    }
}

/// Memo of language ids (a clone starts empty).
#[derive(Debug, Default)]
struct LangMemo(std::sync::OnceLock<Vec<std::sync::atomic::AtomicU32>>);

impl Clone for LangMemo {
    fn clone(&self) -> Self {
        LangMemo::default()
    }
}

/// A process id, or 0 (a clone starts at 0: nobody computes the clone's table for it).
#[derive(Debug, Default)]
struct Deferral(std::sync::atomic::AtomicU32);

impl Clone for Deferral {
    fn clone(&self) -> Self {
        Deferral::default()
    }
}

/// This process's id, read again every 256 calls per thread: `std::process::id` is a system
/// call, and a walk asks once per trie node while an automaton's canonical states are being
/// computed in the background (a tenth of the first fills at key positions). A forked child
/// notices within 256 calls; until then it only keys its caches by raw states.
fn current_pid() -> u32 {
    thread_local! {
        static PID: std::cell::Cell<(u32, u32)> = const { std::cell::Cell::new((0, 0)) };
    }
    PID.with(|c| {
        let (pid, n) = c.get();
        if pid != 0 && n < 256 {
            c.set((pid, n + 1));
            return pid;
        }
        let pid = std::process::id();
        c.set((pid, 0));
        pid
    })
}

const LANG_UNKNOWN: u32 = u32::MAX;
const LANG_NONE: u32 = u32::MAX - 1;

impl Dfa {
    // `Dfa::from_rx`, which picks a construction (bounded repeat, deterministic concatenation,
    // subset construction), is in `crate::automata::construct`: the constructions build `Dfa`s.

    /// Byte equivalence classes from the boundaries of byte ranges: per byte its class, and
    /// the number of classes.
    pub(crate) fn classes_of(ranges: impl Iterator<Item = (u8, u8)>) -> ([u8; 256], usize) {
        let mut boundary = [false; 257];
        for (lo, hi) in ranges {
            boundary[lo as usize] = true;
            boundary[hi as usize + 1] = true;
        }
        let mut classes = [0u8; 256];
        let mut n_classes = 0usize;
        for b in 0..256usize {
            if b == 0 || boundary[b] {
                n_classes += 1;
            }
            classes[b] = (n_classes - 1) as u8;
        }
        (classes, n_classes)
    }

    /// The DFA of an automaton that is deterministic already (see [`crate::automata::det_concat`]):
    /// state `s` becomes `s + 1` after the dead state; its start state has no incoming edge.
    /// Trimmed and given its live bytes on the sparse rows. A literal-heavy automaton (at most
    /// [`SPARSE_EDGES_PER_STATE`] live edges per state on average: literal keys and enums with
    /// every JSON escape, about 1.2 edges per state against dozens of byte classes) keeps the
    /// rows as its transitions instead of a dense table: o84878's 85 automata, 8,375 states,
    /// 0.76 MB of 16-bit tables (97% dead entries, their first touches a large part of the
    /// cost) against 75 KB of edges, its first compile 2.00–2.10 → 1.88–1.95 ms.
    pub(crate) fn from_rows(r: &crate::automata::det_concat::Rows) -> Dfa {
        let (classes, n_classes) = Self::classes_of(r.all_edges().map(|&(lo, hi, _)| (lo, hi)));
        let n = r.len() + 1;
        let mut accepting: Vec<bool> = std::iter::once(false).chain(r.accept.iter().copied()).collect();
        let start = r.start + 1;
        let nullable = accepting[start as usize];
        accepting[start as usize] = false;
        // Live: the states that reach acceptance, found backwards over the rows' edges.
        let mut first = vec![0u32; n + 1];
        for &(_, _, t) in r.all_edges() {
            first[t as usize + 2] += 1;
        }
        for i in 0..n {
            first[i + 1] += first[i];
        }
        let mut fill = first.clone();
        let mut preds = vec![0u32; first[n] as usize];
        for s in 0..r.len() {
            for &(_, _, t) in r.row(s) {
                let at = &mut fill[t as usize + 1];
                preds[*at as usize] = s as u32 + 1;
                *at += 1;
            }
        }
        let mut live = accepting.clone();
        let mut stack: Vec<u32> = (0..n as u32).filter(|&s| live[s as usize]).collect();
        while let Some(s) = stack.pop() {
            for &p in &preds[first[s as usize] as usize..first[s as usize + 1] as usize] {
                if !live[p as usize] {
                    live[p as usize] = true;
                    stack.push(p);
                }
            }
        }
        // (A sparse automaton keeps no live-byte table: `Dfa::live_bytes` reads its edges.)
        let mut live_bytes = crate::automata::live_sets::LiveSets::default();
        let live_edges = r.all_edges().filter(|e| live[e.2 as usize + 1]).count();
        let (mut trans, mut span, mut edges) = (Vec::new(), Vec::new(), Vec::new());
        if live_edges <= SPARSE_EDGES_PER_STATE * n {
            // Sparse: the live edges as they are, sorted per state.
            span.reserve(n + 1);
            span.extend([0u32, 0]);
            edges.reserve(live_edges);
            for s in 0..r.len() {
                let from = edges.len();
                for &(lo, hi, t) in r.row(s) {
                    if live[t as usize + 1] {
                        edges.push((lo, hi, (t + 1) as u16));
                    }
                }
                // (Rows come sorted from their construction; `sparse_next` relies on it.)
                if !edges[from..].is_sorted_by_key(|e| e.0) {
                    edges[from..].sort_unstable_by_key(|e| e.0);
                }
                span.push(edges.len() as u32);
            }
        } else {
            trans = vec![DEAD as u16; n * n_classes];
            let mut sets = crate::automata::live_sets::LiveSetsBuilder::with_capacity(n);
            sets.push(ByteSet::default()); // the dead state
            for s in 0..r.len() {
                let at = (s + 1) * n_classes;
                let mut set = ByteSet::default();
                for &(lo, hi, t) in r.row(s) {
                    if live[t as usize + 1] {
                        for c in classes[lo as usize]..=classes[hi as usize] {
                            trans[at + c as usize] = (t + 1) as u16;
                        }
                        set.insert_range(lo, hi);
                    }
                }
                sets.push(set);
            }
            live_bytes = sets.finish();
        }
        let start = if live[start as usize] { start } else { DEAD };
        let class_byte = if span.is_empty() { Vec::new() } else { class_representatives(&classes, n_classes) };
        Self::assemble(classes, n_classes, (trans, span, edges, class_byte), accepting, start, nullable, live_bytes)
    }

    /// An automaton from its tables — `(trans, span, edges, class_byte)`: a dense table, or a
    /// sparse automaton's spans, edges and class bytes — with its memos empty.
    #[allow(clippy::type_complexity)]
    fn assemble(classes: [u8; 256], n_classes: usize, tables: (Vec<u16>, Vec<u32>, Vec<(u8, u8, u16)>, Vec<u8>), accepting: Vec<bool>, start: u32, nullable: bool, live_bytes: crate::automata::live_sets::LiveSets) -> Dfa {
        let (trans, span, edges, class_byte) = tables;
        Dfa { classes, n_classes, trans, span, edges, class_byte, accepting, start, nullable, live_bytes, canon: std::sync::OnceLock::new(), canon_deferred: Deferral::default(), lang: LangMemo::default(), plain: PlainMemo::default() }
    }

    /// A dense automaton from its finished parts: a trimmed table (every non-dead entry leads
    /// to a live state), acceptance, start, and each state's live bytes
    /// ([`crate::automata::bounded_repeat`]). The empty string is not in its language.
    pub(crate) fn from_dense_parts(classes: [u8; 256], n_classes: usize, trans: Vec<u16>, accepting: Vec<bool>, start: u32, live_bytes: crate::automata::live_sets::LiveSets) -> Dfa {
        debug_assert!(accepting.len() <= MAX_STATES && trans.len() == accepting.len() * n_classes && live_bytes.len() == accepting.len());
        Self::assemble(classes, n_classes, (trans, Vec::new(), Vec::new(), Vec::new()), accepting, start, false, live_bytes)
    }

    pub(crate) fn from_nfa(nfa: &Nfa, limits: &Limits) -> Result<Dfa> {
        let (classes, n_classes) = Self::classes_of(nfa.edges.iter().map(|&(lo, hi, _)| (lo, hi)));

        let closure = |set: &mut Vec<u32>, stack: &mut Vec<u32>, seen: &mut Vec<bool>| {
            if set.len() == 1 && nfa.eps_of(set[0]).is_empty() {
                // The common case inside embedded automata and literals.
                if nfa.edges_of(set[0]).is_empty() && set[0] != nfa.accept {
                    set.clear();
                }
                return;
            }
            for &s in set.iter() {
                seen[s as usize] = true;
            }
            stack.clear();
            stack.extend_from_slice(set);
            while let Some(s) = stack.pop() {
                for &t in nfa.eps_of(s) {
                    if !seen[t as usize] {
                        seen[t as usize] = true;
                        set.push(t);
                        stack.push(t);
                    }
                }
            }
            for &s in set.iter() {
                seen[s as usize] = false;
            }
            // Keep only states that matter: those with byte edges or the accept state.
            set.retain(|&s| !nfa.edges_of(s).is_empty() || s == nfa.accept);
            set.sort_unstable();
            set.dedup();
        };

        // NFA state sets of DFA states, in one arena: set `d` is
        // `set_data[set_start[d]..set_start[d + 1]]`. The index maps a set's hash to the
        // first DFA state with that hash; `same_hash` chains the rest.
        let mut set_data: Vec<u32> = Vec::new();
        let mut set_start: Vec<u32> = vec![0, 0]; // state 0 = dead, the empty set
        let mut set_hash: Vec<u64> = vec![u64::MAX];
        let mut same_hash: Vec<u32> = vec![u32::MAX];
        let mut index: FxHashMap<u64, u32> = FxHashMap::default();
        let hash_of = |set: &[u32]| {
            let mut h = 0xcbf2_9ce4_8422_2325u64 ^ set.len() as u64;
            for &x in set {
                h = (h ^ x as u64).wrapping_mul(0x100_0000_01b3).rotate_left(23);
            }
            h
        };
        let mut seen = vec![false; nfa.num_states];
        let mut stack = Vec::new();
        // The start state is never looked up: it stays a state of its own (it may be
        // non-accepting while an equal later set accepts).
        let mut start_set = vec![nfa.start];
        closure(&mut start_set, &mut stack, &mut seen);
        let nullable = start_set.contains(&nfa.accept);
        set_data.extend_from_slice(&start_set);
        set_start.push(set_data.len() as u32);
        set_hash.push(u64::MAX);
        same_hash.push(u32::MAX);
        let mut trans: Vec<u32> = vec![DEAD; n_classes * 2];
        let mut work = vec![1u32];
        let mut next: Vec<u32> = Vec::new();
        // Targets per byte class of the DFA state being expanded.
        let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); n_classes];
        while let Some(d) = work.pop() {
            if d % 64 == 0 {
                crate::runtime::budget::check()?;
            }
            for i in set_start[d as usize]..set_start[d as usize + 1] {
                let s = set_data[i as usize];
                for &(lo, hi, t) in nfa.edges_of(s) {
                    for b in &mut buckets[classes[lo as usize] as usize..=classes[hi as usize] as usize] {
                        b.push(t);
                    }
                }
            }
            for c in 0..n_classes {
                if buckets[c].is_empty() {
                    continue;
                }
                next.clear();
                next.extend_from_slice(&buckets[c]);
                buckets[c].clear();
                if next.len() > 1 {
                    next.sort_unstable();
                    next.dedup();
                }
                closure(&mut next, &mut stack, &mut seen);
                if next.is_empty() {
                    continue; // no way on: the dead state
                }
                let h = hash_of(&next);
                let mut found = index.get(&h).copied().unwrap_or(u32::MAX);
                while found != u32::MAX {
                    let f = found as usize;
                    if set_data[set_start[f] as usize..set_start[f + 1] as usize] == next[..] {
                        break;
                    }
                    found = same_hash[f];
                }
                let id = if found != u32::MAX {
                    found
                } else {
                    let id = set_hash.len() as u32;
                    if id as usize >= state_limit(limits) {
                        return Err(state_limit_error(limits));
                    }
                    set_data.extend_from_slice(&next);
                    set_start.push(set_data.len() as u32);
                    set_hash.push(h);
                    same_hash.push(index.insert(h, id).unwrap_or(u32::MAX));
                    trans.extend(std::iter::repeat_n(DEAD, n_classes));
                    work.push(id);
                    id
                };
                trans[d as usize * n_classes + c] = id;
            }
        }
        let n = set_hash.len();
        let mut accepting: Vec<bool> = (0..n).map(|d| set_data[set_start[d] as usize..set_start[d + 1] as usize].contains(&nfa.accept)).collect();
        accepting[1] = false;
        Ok(Self::finish(classes, n_classes, trans, accepting, 1, nullable))
    }

    /// Trims a freshly built table and records each state's live bytes.
    fn finish(classes: [u8; 256], n_classes: usize, trans: Vec<u32>, accepting: Vec<bool>, start: u32, nullable: bool) -> Dfa {
        debug_assert!(accepting.len() <= MAX_STATES);
        let trans: Vec<u16> = trans.into_iter().map(|t| t as u16).collect();
        let mut dfa = Self::assemble(classes, n_classes, (trans, Vec::new(), Vec::new(), Vec::new()), accepting, start, nullable, Default::default());
        dfa.trim();
        dfa.live_bytes = live_sets_of_table(&dfa.trans, &classes, n_classes);
        dfa
    }

    /// Redirects every transition into a state that cannot reach acceptance to [`DEAD`].
    fn trim(&mut self) {
        let n = self.accepting.len();
        let (start, preds) = crate::automata::kequiv::predecessor_rows(&self.trans, self.n_classes, n, DEAD);
        let mut live = vec![false; n];
        let mut stack: Vec<u32> = (0..n as u32).filter(|&s| self.accepting[s as usize]).collect();
        for &s in &stack {
            live[s as usize] = true;
        }
        while let Some(s) = stack.pop() {
            for &p in &preds[start[s as usize] as usize..start[s as usize + 1] as usize] {
                if !live[p as usize] {
                    live[p as usize] = true;
                    stack.push(p);
                }
            }
        }
        live[DEAD as usize] = false;
        for t in self.trans.iter_mut() {
            if !live[*t as usize] {
                *t = DEAD as u16;
            }
        }
        if !live[self.start as usize] {
            self.start = DEAD;
        }
    }

    /// Next state after byte `b` (0 = dead).
    #[inline(always)]
    pub fn next(&self, state: u32, b: u8) -> u32 {
        // SAFETY-free indexing: states and classes are always in range by construction.
        if self.span.is_empty() {
            self.trans[state as usize * self.n_classes + self.classes[b as usize] as usize] as u32
        } else {
            sparse_next(self.sparse_edges(state), b)
        }
    }

    /// A sparse automaton's edges from `state`.
    #[inline(always)]
    fn sparse_edges(&self, state: u32) -> &[(u8, u8, u16)] {
        &self.edges[self.span[state as usize] as usize..self.span[state as usize + 1] as usize]
    }

    /// Whether the automaton keeps its edges sparse (built from deterministic rows with few
    /// edges per state) rather than a dense table.
    pub fn is_sparse(&self) -> bool {
        !self.span.is_empty()
    }

    /// The dense transition table (`[state * classes + class]`), built for a sparse automaton.
    fn dense_table(&self) -> std::borrow::Cow<'_, [u16]> {
        if !self.is_sparse() {
            return std::borrow::Cow::Borrowed(&self.trans);
        }
        let mut t = vec![DEAD as u16; self.accepting.len() * self.n_classes];
        for s in 0..self.accepting.len() {
            for &(lo, hi, q) in self.sparse_edges(s as u32) {
                for c in self.classes[lo as usize]..=self.classes[hi as usize] {
                    t[s * self.n_classes + c as usize] = q;
                }
            }
        }
        std::borrow::Cow::Owned(t)
    }

    /// The smallest state that behaves like `state` on every input of at most `k` bytes (same
    /// live and accepting prefixes): token walks from both give identical results when no
    /// token is longer than `k`, so caches keyed by state can share one entry. This is what
    /// keeps a length-bounded string (`{0,256}`: one state per count) from needing a fresh
    /// trie walk per position. Computed once per automaton (Moore refinement, at most `k`
    /// rounds) for the first `k` asked; other `k` get `state` itself, and so does every state
    /// of an automaton without a long run of alike states (where the refinement would merge
    /// nothing worth it; see `Dfa::k_equivalence`). While the table is being computed in the
    /// background ([`Dfa::defer_canonical`]) every state is its own canonical state: a valid
    /// key (equal results mean equivalent states either way), only not shared.
    pub fn canonical_state(&self, state: u32, k: usize) -> u32 {
        match self.canon_table(k) {
            Some(table) if !table.rep.is_empty() => table.rep[state as usize],
            _ => state,
        }
    }

    /// The canonical-state table for `k`: computed now unless it is being computed in the
    /// background, `None` while it is, or when it was computed for another `k`.
    fn canon_table(&self, k: usize) -> Option<&crate::automata::kequiv::KEquiv> {
        let (ck, table) = match self.canon.get() {
            Some(c) => c,
            None if self.deferred_here() => return None,
            None => self.canon.get_or_init(|| (k, self.k_equivalence(k))),
        };
        (*ck == k).then_some(table)
    }

    /// Whether this process's background thread is computing the canonical states.
    fn deferred_here(&self) -> bool {
        let pid = self.canon_deferred.0.load(std::sync::atomic::Ordering::Acquire);
        pid != 0 && pid == current_pid()
    }

    /// Whether the canonical states for inputs of at most `k` bytes are computed already.
    pub fn has_canonical(&self, k: usize) -> bool {
        self.canon.get().is_some_and(|(ck, _)| *ck == k)
    }

    /// Marks the canonical states as being computed by this process's background thread,
    /// which must then call [`Dfa::compute_canonical`]; until it has, lookups use each state
    /// itself. Returns false (and marks nothing) when they are computed or marked already.
    pub fn defer_canonical(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.canon.get().is_none() && self.canon_deferred.0.compare_exchange(0, std::process::id(), Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Computes the canonical states for `k` (if no table exists yet) and ends a deferral,
    /// whether or not the computation got to finish (a panic inside it is propagated).
    /// An automaton without a run of more than `k / 2` alike states gets an empty table (every
    /// state its own canonical state; see `Dfa::k_equivalence`).
    pub fn compute_canonical(&self, k: usize) {
        struct Clear<'a>(&'a Deferral);
        impl Drop for Clear<'_> {
            fn drop(&mut self) {
                self.0 .0.store(0, std::sync::atomic::Ordering::Release);
            }
        }
        let _clear = Clear(&self.canon_deferred);
        self.canon.get_or_init(|| (k, self.k_equivalence(k)));
    }

    /// The table for `k`, or an empty one when it would not pay: bounded equivalence merges
    /// many states only along a long run of states that look alike (same acceptance, same
    /// live bytes: a length-bounded string's count states). Without a run longer than `k / 2`
    /// it is left empty — a literal key with escapes has paths of hundreds of bytes, yet
    /// its states are told apart by their short unescaped suffixes, and refining its 100–200
    /// states took 50–180 µs inside the fill that first met it, for no merge. (Without any
    /// path that long, bounded equivalence is plain equivalence: see
    /// [`crate::automata::kequiv::has_path_longer_than`].) Near states then come from the fills' other
    /// rules ([`Dfa::near_state`] has none to give).
    fn k_equivalence(&self, k: usize) -> crate::automata::kequiv::KEquiv {
        // Alike states share (acceptance, live bytes), so a run of more than `k / 2` of them
        // needs that many states with one signature: counting them first spares the search
        // for the automata without (a key among declared names: each state's live bytes are
        // the next characters of the names still possible, few states alike; the search over
        // its hundreds of states was most of the first fill at the key position).
        // The search then follows only edges inside a signature with that many states.
        if self.accepting.len() <= k / 2 + 1 {
            return crate::automata::kequiv::KEquiv::default(); // too few states for such a run
        }
        // States continued by one or two bytes only (a literal's characters, the digits of a
        // `\uXXXX` escape of one character) are left out of runs: a walk from them follows
        // one or two paths, and merging them would save nothing — while a key among dozens of
        // declared names has thousands of them, whose grouping cost more than the fills saved.
        // (So a bounded string over one or two bytes, `[01]{0,256}`, gets no table: each count
        // state is keyed alone, and each of its walks is small.)
        let mut ids: FxHashMap<(bool, ByteSet), u32> = FxHashMap::with_capacity_and_hasher(64, Default::default());
        let mut count: Vec<usize> = vec![0];
        let sig: Vec<u32> = (0..self.accepting.len())
            .map(|s| {
                let live = self.live_bytes(s as u32);
                if live.len() < 3 {
                    count[0] += 1;
                    return 0; // signature 0: never a run
                }
                let next = ids.len() as u32 + 1;
                let id = *ids.entry((self.accepting[s], live)).or_insert(next);
                if id as usize == count.len() {
                    count.push(0);
                }
                count[id as usize] += 1;
                id
            })
            .collect();
        let big: Vec<bool> = count.iter().enumerate().map(|(i, &c)| i > 0 && c > k / 2).collect();
        if !big.iter().any(|&b| b) {
            return crate::automata::kequiv::KEquiv::default();
        }
        // A run of more than k / 2 alike states has that many states with an edge to or from
        // an alike state: each such state's alike successors, over its live bytes only (a
        // key's states continue with one or two bytes; scanning every byte class of hundreds
        // of states was the cost left), reject most automata before the search.
        let alike_succ: Vec<(usize, Vec<usize>)> = (1..sig.len())
            .filter(|&s| big[sig[s] as usize])
            .filter_map(|s| {
                let mut v: Vec<usize> = Vec::new();
                for b in self.live_bytes(s as u32).iter() {
                    let t = self.next(s as u32, b) as usize;
                    if t != DEAD as usize && sig[t] == sig[s] && !v.contains(&t) {
                        v.push(t);
                    }
                }
                (!v.is_empty()).then_some((s, v))
            })
            .collect();
        let mut linked = vec![false; sig.len()];
        for (s, v) in &alike_succ {
            linked[*s] = true;
            v.iter().for_each(|&t| linked[t] = true);
        }
        if linked.iter().filter(|&&l| l).count() <= k / 2 {
            return crate::automata::kequiv::KEquiv::default();
        }
        // The search runs on the graph of those edges alone (linked states renumbered from 1,
        // 0 dead, one column per edge), not on every byte class of the automaton.
        let mut local = vec![0u32; sig.len()];
        let mut n = 0;
        for s in (0..sig.len()).filter(|&s| linked[s]) {
            n += 1;
            local[s] = n;
        }
        let width = alike_succ.iter().map(|(_, v)| v.len()).max().unwrap_or(1);
        let mut graph = vec![0u32; (n as usize + 1) * width];
        for (s, v) in &alike_succ {
            let row = local[*s] as usize * width;
            for (j, &t) in v.iter().enumerate() {
                graph[row + j] = local[t];
            }
        }
        if !crate::automata::kequiv::has_path_longer_than(&graph, width, 0, k / 2, |_, _| true) {
            return crate::automata::kequiv::KEquiv::default();
        }
        crate::automata::kequiv::k_equivalence(&self.dense_table(), self.n_classes, &self.accepting, DEAD, k)
    }

    /// For a canonical state (see [`Dfa::canonical_state`] with the same `k`): another
    /// canonical state it agrees with on every input of at most `m` bytes, and `m`. `None`
    /// while the table is being computed in the background, and for automata left without
    /// one (see `Dfa::k_equivalence`).
    pub fn near_state(&self, state: u32, k: usize) -> Option<(u32, usize)> {
        match self.canon_table(k)?.near.get(state as usize) {
            Some(&(t, m)) if t != u32::MAX => Some((t, m as usize)),
            _ => None,
        }
    }

    /// The byte class of `b`.
    #[inline]
    pub fn class_of(&self, b: u8) -> u8 {
        self.classes[b as usize]
    }

    /// Number of byte classes.
    #[inline]
    pub fn num_classes(&self) -> usize {
        self.n_classes
    }

    /// The successor of `state` on byte class `c`.
    #[inline]
    pub fn next_class(&self, state: u32, c: usize) -> u32 {
        if self.span.is_empty() {
            self.trans[state as usize * self.n_classes + c] as u32
        } else {
            self.next(state, self.class_byte[c])
        }
    }

    /// `Dfa::language_id` (in [`crate::automata::fingerprint`]): memoized per state, `compute`
    /// giving the id of a loop state's language.
    ///
    /// Only a loop state has one (see `Dfa::loop_like`): the languages worth sharing across
    /// automata are those of loops ("the rest of any string", a pattern's repeated class). A
    /// key's state partway through the declared names goes elsewhere on every byte (the
    /// names' next characters, or the rest of any string) and its language is that object's
    /// alone; computing its id was a sixth of the cold fills inside keys, for nothing shared.
    pub(crate) fn memo_language_id(&self, state: u32, compute: fn(&Dfa, u32) -> Option<u32>) -> Option<u32> {
        use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
        let memo = self.lang.0.get_or_init(|| (0..self.accepting.len()).map(|_| AtomicU32::new(LANG_UNKNOWN)).collect());
        let slot = &memo[state as usize];
        match slot.load(Relaxed) {
            LANG_UNKNOWN => {
                let id = match self.loop_like(state) {
                    Some(t) if t == state => compute(self, state),
                    Some(t) => self.memo_language_id(t, compute),
                    None => None,
                };
                slot.store(id.unwrap_or(LANG_NONE), Relaxed);
                id
            }
            LANG_NONE => None,
            id => Some(id),
        }
    }

    /// `state` itself when it loops on at least half of its live bytes; else the state most
    /// of its bytes lead to, when that one loops so and `state` behaves exactly like it (same
    /// acceptance, same successor on every byte: the first state of a repeated class in an
    /// automaton that was not minimised); else `None`.
    fn loop_like(&self, state: u32) -> Option<u32> {
        let loops = |s: u32| {
            let live = self.live_bytes(s);
            let n = live.iter().filter(|&b| self.next(s, b) == s).count();
            n > 0 && 2 * n >= live.len()
        };
        if loops(state) {
            return Some(state);
        }
        let t = self.main_successor(state)?;
        let same_row = (0..self.n_classes).all(|c| self.next_class(t, c) == self.next_class(state, c));
        let same = t != state && self.accepting[t as usize] == self.accepting[state as usize] && same_row;
        (same && loops(t)).then_some(t)
    }

    /// The state most of `state`'s live bytes lead to (the smallest of those tied), or `None`
    /// when no byte continues it.
    pub fn main_successor(&self, state: u32) -> Option<u32> {
        let mut weight: Vec<(u32, u32)> = Vec::new();
        let mut last = usize::MAX; // the previous byte's entry (runs of bytes share a successor)
        for b in self.live_bytes(state).iter() {
            let t = self.next(state, b);
            if last >= weight.len() || weight[last].0 != t {
                last = weight.iter().position(|w| w.0 == t).unwrap_or_else(|| {
                    weight.push((t, 0));
                    weight.len() - 1
                });
            }
            weight[last].1 += 1;
        }
        weight.iter().max_by_key(|w| (w.1, std::cmp::Reverse(w.0))).map(|w| w.0)
    }

    /// The memoized [`PlainMoves`] of this automaton; never waits for another
    /// thread building them ([`crate::runtime::race_once`]).
    pub(crate) fn plain_moves(&self, build: impl FnOnce(&Dfa) -> PlainMoves) -> &PlainMoves {
        crate::runtime::race_once::get_or_race(&self.plain.0, || Box::new(build(self))).as_ref()
    }

    /// Bytes that lead from `state` to a live state.
    #[inline(always)]
    pub fn live_bytes(&self, state: u32) -> ByteSet {
        if self.span.is_empty() {
            return *self.live_bytes.get(state as usize);
        }
        // (A sparse automaton keeps only live edges, one to three per state for the most.)
        let mut set = ByteSet::default();
        for &(lo, hi, _) in self.sparse_edges(state) {
            set.insert_range(lo, hi);
        }
        set
    }

    /// Bytes that lead from `state` back to itself (the loop of `[a-z]*` or a string body).
    pub fn loop_bytes(&self, state: u32) -> ByteSet {
        let mut out = ByteSet::default();
        for b in 0..=255u8 {
            if self.next(state, b) == state {
                out.insert(b);
            }
        }
        out
    }

    /// [`Dfa::next`] without bounds checks, for the trie walks' inner loops.
    ///
    /// # Safety
    /// `state` must be a state of this DFA (every state it ever returned is).
    #[inline(always)]
    pub unsafe fn next_unchecked(&self, state: u32, b: u8) -> u32 {
        debug_assert!((state as usize) < self.accepting.len());
        if self.span.is_empty() {
            *self.trans.get_unchecked(state as usize * self.n_classes + *self.classes.get_unchecked(b as usize) as usize) as u32
        } else {
            let (from, to) = (*self.span.get_unchecked(state as usize) as usize, *self.span.get_unchecked(state as usize + 1) as usize);
            sparse_next(self.edges.get_unchecked(from..to), b)
        }
    }

    /// Whether `state` accepts (ends a non-empty match).
    #[inline(always)]
    pub fn is_accepting(&self, state: u32) -> bool {
        self.accepting[state as usize]
    }

    /// Start state; [`DEAD`] when the language (minus the empty string) is empty.
    pub fn start(&self) -> u32 {
        self.start
    }

    /// Whether the source expression matched the empty string.
    pub fn nullable(&self) -> bool {
        self.nullable
    }

    /// Whether the language, minus the empty string, is empty.
    pub fn is_empty_language(&self) -> bool {
        self.start == DEAD
    }

    /// Number of states, dead state included.
    pub fn num_states(&self) -> usize {
        self.accepting.len()
    }

    /// Heap bytes used by the tables.
    pub fn memory_bytes(&self) -> usize {
        self.trans.len() * 2 + self.span.len() * 4 + self.edges.len() * 4 + self.class_byte.len() + self.accepting.len() + self.live_bytes.memory_bytes() + 256
    }

    /// Runs the DFA over `bytes` from the start; true if it ends accepting.
    pub fn matches(&self, bytes: &[u8]) -> bool {
        let mut s = self.start;
        for &b in bytes {
            s = self.next(s, b);
            if s == DEAD {
                return false;
            }
        }
        self.is_accepting(s) || (bytes.is_empty() && self.nullable)
    }

    /// When exactly one byte leads from `state` to a live state, returns it.
    pub fn single_next_byte(&self, state: u32) -> Option<u8> {
        let mut found = None;
        for b in 0..=255u8 {
            if self.next(state, b) != DEAD {
                if found.is_some() {
                    return None;
                }
                found = Some(b);
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontend::rx::Rx;

    fn lit(s: &str) -> Rx {
        Rx::Literal(s.as_bytes().to_vec())
    }

    /// A sparse automaton answers every question as the same automaton with a dense table:
    /// transitions by byte and by class (checked and unchecked), live and loop bytes, main
    /// successors, loop-like states, language ids and bounded equivalence.
    #[test]
    fn sparse_and_dense_forms_agree() {
        let esc = |c: char| format!("({c}|\\\\u00{:02x}|\\\\u00{:02X})", c as u32, c as u32);
        let word = |w: &str| w.chars().map(esc).collect::<String>();
        let patterns = [
            format!("\"({}|{}|{})\"", word("name"), word("names"), word("type")),
            format!("{}[a-z]{{0,3}}", word("key")),
            "(alpha|beta|gamma|delta)".to_string(),
            format!("\"{}\": ?[0-9]", word("count")),
        ];
        let mut sparse_seen = 0;
        for p in &patterns {
            let rx = crate::frontend::regex::parse_regex(p, &Limits::default()).unwrap();
            let Some(rows) = crate::automata::det_concat::deterministic_rows(&rx, MAX_STATES - 1) else { continue };
            let sparse = Dfa::from_rows(&rows);
            if !sparse.is_sparse() {
                continue;
            }
            sparse_seen += 1;
            let mut dense = sparse.clone();
            dense.trans = sparse.dense_table().into_owned();
            dense.span.clear();
            dense.edges.clear();
            dense.live_bytes = live_sets_of_table(&dense.trans, &dense.classes, dense.n_classes);
            assert!(!dense.is_sparse());
            for s in 0..sparse.num_states() as u32 {
                for b in 0..=255u8 {
                    assert_eq!(sparse.next(s, b), dense.next(s, b), "{p}: state {s} byte {b}");
                    // SAFETY: `s` is a state of both automata.
                    assert_eq!(unsafe { sparse.next_unchecked(s, b) }, dense.next(s, b));
                }
                for c in 0..sparse.num_classes() {
                    assert_eq!(sparse.next_class(s, c), dense.next_class(s, c));
                }
                assert_eq!(sparse.live_bytes(s), dense.live_bytes(s));
                assert_eq!(sparse.loop_bytes(s), dense.loop_bytes(s));
                assert_eq!(sparse.main_successor(s), dense.main_successor(s));
                assert_eq!(sparse.loop_like(s), dense.loop_like(s));
                assert_eq!(sparse.language_id(s), dense.language_id(s), "{p}: state {s}");
            }
            for k in [4usize, 16, 64] {
                let (a, b) = (sparse.k_equivalence(k), dense.k_equivalence(k));
                assert_eq!((a.rep, a.near), (b.rep, b.near), "{p}: k = {k}");
            }
        }
        assert!(sparse_seen >= 3, "the patterns build sparse automata ({sparse_seen})");
    }

    #[test]
    fn literal_and_star() {
        let rx = Rx::concat(vec![lit("ab"), Rx::Repeat { inner: std::sync::Arc::new(lit("c")), min: 0, max: None }]);
        let d = Dfa::from_rx(&rx, &Limits::default()).unwrap();
        assert!(d.matches(b"ab"));
        assert!(d.matches(b"abccc"));
        assert!(!d.matches(b"a"));
        assert!(!d.matches(b"abd"));
    }

    #[test]
    fn nullable_start_not_accepting() {
        let rx = Rx::Repeat { inner: std::sync::Arc::new(lit("a")), min: 0, max: Some(3) };
        let d = Dfa::from_rx(&rx, &Limits::default()).unwrap();
        assert!(d.nullable());
        assert!(!d.is_accepting(d.start()));
        assert!(d.matches(b"aaa"));
        assert!(!d.matches(b"aaaa"));
    }

    #[test]
    fn utf8_classes() {
        let rx = Rx::char_class(&[('α' as u32, 'ω' as u32)], false);
        let d = Dfa::from_rx(&rx, &Limits::default()).unwrap();
        assert!(d.matches("β".as_bytes()));
        assert!(!d.matches(b"b"));
        let s = d.next(d.start(), "β".as_bytes()[0]);
        assert_ne!(s, DEAD);
        // Negated class: any char but a quote.
        let rx = Rx::char_class(&[('"' as u32, '"' as u32)], true);
        let d = Dfa::from_rx(&rx, &Limits::default()).unwrap();
        assert!(d.matches("😀".as_bytes()));
        assert!(!d.matches(b"\""));
        assert!(!d.matches(&[0xED, 0xA0, 0x80])); // surrogate
        assert_eq!(d.next(d.start(), 0xFF), DEAD);
    }

    /// Language ids for loop states only: a key that must avoid the name `kind` has none at
    /// its first byte or partway through the name, and the one of a plain string body once
    /// past it.
    #[test]
    fn language_ids_only_for_loops() {
        let d = |rx: &str| Dfa::from_rx(&crate::frontend::regex::parse_regex(rx, &Limits::default()).unwrap(), &Limits::default()).unwrap();
        let key = d(r#""([^k"][^"]*|k([^i"][^"]*|i([^n"][^"]*|n([^d"][^"]*|d[^"]+)?)?)?)?""#);
        let body = d(r#"[^"]*""#);
        let open = key.next(key.start(), b'"');
        let ki = key.next(key.next(open, b'k'), b'i');
        let rest = key.next(open, b'x');
        assert_eq!(key.language_id(open), None, "the first byte leads to the name or the rest");
        assert_eq!(key.language_id(ki), None, "partway through the name");
        assert!(key.language_id(rest).is_some());
        assert_eq!(key.language_id(rest), body.language_id(body.start()), "past the name: any string's body");
        assert_eq!(key.language_id(key.next(ki, b'x')), key.language_id(rest));
    }

    /// A state that behaves exactly like the loop its bytes lead to (the first letter's state
    /// of `x[a-z]*`, kept apart from the loop by the construction) shares the loop's id.
    #[test]
    fn a_state_like_its_loop_shares_the_loop_id() {
        let d = Dfa::from_rx(&crate::frontend::regex::parse_regex("x[a-z]*", &Limits::default()).unwrap(), &Limits::default()).unwrap();
        let s = d.next(d.start(), b'x');
        let t = d.next(s, b'a');
        assert_ne!(s, t, "the construction keeps the loop apart (else this test shows nothing)");
        assert_eq!(d.next(t, b'b'), t, "t loops");
        assert_eq!(d.loop_like(s), Some(t));
        assert_eq!(d.loop_like(t), Some(t));
        assert!(d.language_id(s).is_some());
        assert_eq!(d.language_id(s), d.language_id(t));
        assert_eq!(d.loop_like(d.start()), None, "the start goes to the loop only on `x`: another language");
    }

    /// The pre-filters of `Dfa::k_equivalence` (signatures without states of at most two live
    /// bytes, linked states, the compact graph) decide exactly as the search over the whole
    /// automaton with the same notion of alike states, on automata with and without long runs.
    #[test]
    fn canonical_prefilters_decide_as_the_full_search() {
        let patterns = ["[a-c]{0,40}!", "(ab|cd){0,30}", "[a-z]{25}x", "[01]{0,60}", "(abc){0,20}", "[a-z]+(q[a-z]{0,12})?", "(a|bc|def){0,15}z", "[a-f0-9]{8}-[a-f0-9]{4}", "x{0,50}", "([a-d][0-9]){0,18}"];
        let mut checked = (0, 0);
        for p in patterns {
            let d = Dfa::from_rx(&crate::frontend::regex::parse_regex(p, &Limits::default()).unwrap(), &Limits::default()).unwrap();
            for k in [4usize, 8, 12, 20, 40, 64] {
                let alike = |s: u32, t: u32| d.accepting[s as usize] == d.accepting[t as usize] && d.live_bytes(s) == d.live_bytes(t) && d.live_bytes(s).len() >= 3;
                let full = d.accepting.len() > k / 2 + 1 && crate::automata::kequiv::has_path_longer_than(&d.dense_table(), d.n_classes, DEAD, k / 2, alike);
                let fast = !d.k_equivalence(k).rep.is_empty();
                assert_eq!(fast, full, "{p} with k = {k}");
                if full {
                    checked.0 += 1;
                } else {
                    checked.1 += 1;
                }
            }
        }
        assert!(checked.0 >= 5 && checked.1 >= 5, "both outcomes exercised: {checked:?}");
    }

    #[test]
    fn cached_pid_is_the_process_id() {
        for _ in 0..600 {
            assert_eq!(current_pid(), std::process::id());
        }
    }

    #[test]
    fn canonical_states_merge_far_from_a_length_bound() {
        let rx = crate::frontend::regex::parse_regex("[a-z]{0,300}!", &Limits::default()).unwrap();
        let d = Dfa::from_rx(&rx, &Limits::default()).unwrap();
        let mut s = d.start();
        let mut states = vec![s];
        for _ in 0..300 {
            s = d.next(s, b'a');
            states.push(s);
        }
        let canon: Vec<u32> = states.iter().map(|&s| d.canonical_state(s, 10)).collect();
        // 10 or more letters left: identical on every input of at most 10 bytes.
        assert!(canon[..=290].iter().all(|&c| c == canon[0]));
        // Within 10 of the bound every state is distinct.
        let tail: std::collections::BTreeSet<u32> = canon[290..].iter().copied().collect();
        assert_eq!(tail.len(), 11);
        // Another depth: no merging done (the table was built for 10).
        assert_eq!(d.canonical_state(states[5], 11), states[5]);
    }

    #[test]
    fn canonical_states_are_skipped_where_no_run_of_alike_states_is_long() {
        // A 60-character literal with every character escapable (paths of 200+ bytes): its
        // states are told apart by their short suffixes, so no table is built (each state is
        // its own canonical state); the length-bounded string above it gets one.
        let word: String = (0..60).map(|i| (b'a' + (i % 26) as u8) as char).collect();
        let lit = format!("({})", word.chars().map(|c| format!("({c}|\\\\u00{:02x})", c as u32)).collect::<String>());
        let d = Dfa::from_rx(&crate::frontend::regex::parse_regex(&lit, &Limits::default()).unwrap(), &Limits::default()).unwrap();
        assert!(crate::automata::kequiv::has_path_longer_than(&d.dense_table(), d.n_classes, DEAD, 64, |_, _| true), "long paths through the escapes");
        let mut s = d.start();
        for b in word.bytes().take(30) {
            s = d.next(s, b);
        }
        assert_eq!(d.canonical_state(s, 128), s);
        assert!(d.canon.get().is_some_and(|(_, t)| t.rep.is_empty()), "an empty table");
        let rx = crate::frontend::regex::parse_regex("[a-z]{0,300}!", &Limits::default()).unwrap();
        let d = Dfa::from_rx(&rx, &Limits::default()).unwrap();
        let s = d.next(d.start(), b'a');
        assert_eq!(d.canonical_state(s, 128), d.canonical_state(d.start(), 128));
    }

    #[test]
    fn deferred_canonical_states_are_the_states_themselves_until_computed() {
        let rx = crate::frontend::regex::parse_regex("[a-z]{0,300}!", &Limits::default()).unwrap();
        let d = Dfa::from_rx(&rx, &Limits::default()).unwrap();
        let mut s = d.start();
        for _ in 0..5 {
            s = d.next(s, b'a');
        }
        assert!(d.defer_canonical());
        assert!(!d.defer_canonical(), "marked once");
        // Not computed on lookup while another thread is to compute it.
        assert_eq!(d.canonical_state(s, 10), s);
        assert_eq!(d.near_state(s, 10), None);
        assert!(!d.has_canonical(10));
        // A clone is nobody's job: it computes its own table on lookup.
        let c = d.clone();
        assert_eq!(c.canonical_state(s, 10), c.canonical_state(c.start(), 10));
        d.compute_canonical(10);
        assert!(d.has_canonical(10));
        assert_eq!(d.canonical_state(s, 10), d.canonical_state(d.start(), 10));
        assert!(!d.defer_canonical(), "computed: nothing to defer");
    }

    #[test]
    fn trimmed_dead_ends() {
        // "a" followed by nothing possible: Concat(a, Nothing) is Nothing.
        let rx = Rx::alt(vec![lit("ab"), Rx::Concat(vec![lit("ac"), Rx::Nothing].into())]);
        let d = Dfa::from_rx(&rx, &Limits::default()).unwrap();
        let s = d.next(d.start(), b'a');
        assert_eq!(d.next(s, b'c'), DEAD);
        assert_ne!(d.next(s, b'b'), DEAD);
    }

    /// Deterministic concatenations and their alternations built directly agree with subset
    /// construction on every input: same acceptance, same live bytes along the way (what
    /// token walks read).
    #[test]
    fn direct_construction_matches_subset_construction() {
        use crate::frontend::byte_automaton::ByteAutomaton;
        use std::sync::Arc;
        let mut rnd = crate::testutil::xorshift(0x9e37_79b9_7f4a_7c15u64);
        let alphabet = b"ab\"\\";
        let (mut direct, mut alts) = (0, 0);
        // A concatenation of random parts; sometimes one part is an alternation of such.
        fn concat(rnd: &mut dyn FnMut(u64) -> u64, alphabet: &[u8], nest: bool) -> Rx {
            let mut parts = Vec::new();
            for _ in 0..1 + rnd(4) {
                parts.push(match rnd(6) {
                    0 => Rx::Literal((0..1 + rnd(3)).map(|_| alphabet[rnd(4) as usize]).collect()),
                    1 => Rx::Bytes(vec![(b'a', b'a' + rnd(2) as u8)]),
                    2 => {
                        let min = rnd(3) as u32;
                        let max = if rnd(3) == 0 { None } else { Some(min + rnd(3) as u32) };
                        let inner = if rnd(2) == 0 { Rx::Literal(vec![alphabet[rnd(4) as usize]; 1 + rnd(2) as usize]) } else { Rx::Bytes(vec![(b'a', b'b')]) };
                        Rx::Repeat { inner: std::sync::Arc::new(inner), min, max }
                    }
                    _ => {
                        // a random small deterministic automaton over the alphabet
                        let n = 1 + rnd(4) as usize;
                        let trans = (0..n)
                            .map(|_| {
                                let mut row: Vec<(u8, u8, u32)> = Vec::new();
                                let mut bytes: Vec<u8> = alphabet.to_vec();
                                bytes.sort();
                                for b in bytes {
                                    if rnd(2) == 0 {
                                        row.push((b, b, rnd(n as u64) as u32));
                                    }
                                }
                                row
                            })
                            .collect();
                        let accept = (0..n).map(|_| rnd(2) == 0).collect();
                        Rx::Automaton(Arc::new(ByteAutomaton::new(trans, accept, 0)))
                    }
                });
            }
            if nest && rnd(4) == 0 {
                let at = rnd(parts.len() as u64 + 1) as usize;
                parts.insert(at, Rx::Alt((0..2 + rnd(2)).map(|_| concat(rnd, alphabet, false)).collect()));
            }
            Rx::Concat(parts.into())
        }
        for _ in 0..1200 {
            // Concatenations, and alternations of them (string enums, key sets).
            let rx = if rnd(3) == 0 { Rx::Alt((0..2 + rnd(3)).map(|_| concat(&mut rnd, alphabet, true)).collect()) } else { concat(&mut rnd, alphabet, true) };
            let Some(rows) = crate::automata::det_concat::deterministic_rows(&rx, 10_000) else { continue };
            direct += 1;
            alts += matches!(rx, Rx::Alt(_)) as usize;
            let fast = Dfa::from_rows(&rows);
            let slow = Dfa::from_nfa(&Nfa::build(&rx, &Limits::default()).unwrap(), &Limits::default()).unwrap();
            assert_eq!(fast.nullable(), slow.nullable(), "{rx:?}");
            for _ in 0..60 {
                let input: Vec<u8> = (0..rnd(8)).map(|_| alphabet[rnd(4) as usize]).collect();
                assert_eq!(fast.matches(&input), slow.matches(&input), "{rx:?} on {:?}", String::from_utf8_lossy(&input));
                let (mut f, mut s) = (fast.start(), slow.start());
                for &b in &input {
                    assert_eq!(fast.live_bytes(f), slow.live_bytes(s), "{rx:?}");
                    f = fast.next(f, b);
                    s = slow.next(s, b);
                    if f == DEAD || s == DEAD {
                        assert_eq!(f == DEAD, s == DEAD, "{rx:?}");
                        break;
                    }
                }
            }
        }
        assert!(direct > 300 && alts > 20, "only {direct} of 1200 were deterministic, {alts} alternations");
    }
}
