//! Filling a next-token bitmask from the level caches of [`crate::vocab::ci_cache`].
//!
//! Level 0 is a copy of the cached context-independent set. For each group of trie nodes
//! where terminals could end, the parser pushes one row (the only context-dependent work),
//! the terminals that row expects give the key of the next level, whose cached token list
//! is ORed in, and so on down. Configurations too large for a key take a plain walk.
//!
//! Below a group whose row continues the parse as the row its level was built under did
//! (equal [`Parser::future_hash`]) and starts the same lexemes, the next level is built
//! below the group's nodes the level was not built from ([`Level::rest`]): below the others
//! the level itself has gone on already. Where a symbol can end after every byte and start
//! again (Lark's dynamic lexer: `ab` is also `a` `b`), that replaces a chain of levels, one
//! per possible end, each over most of the trie below it.
//!
//! Otherwise the levels do not merge paths: a trie node reached through two different
//! sequences of groups gets two parser rows, one per path, where the plain walk's chart has
//! one (runs of operators inside long tokens, ` ****` in C, push a row per operator where
//! lowering could not make the run one terminal: `crate::parser::lower`). On
//! grammars where terminals of different lengths end all along a token (`root ::= "" |
//! root "ab" | root .+`), the number of paths grows exponentially with the token's length
//! (1.5x per byte there: 0.2 s for a 32-byte token, 1 s for 36 bytes; on the grammar of
//! `tests/test_fill_hang.py`, about 2.3x per level, a fill on a 37-byte token ran for over
//! six minutes without finishing). So a fill pushes [`MIN_LEVEL_ROWS`] rows through the
//! levels (fewer on a small trie), and more only while they take less time than a few
//! plain walks would (up to [`MAX_LEVEL_ROWS`]); past that it starts over with the plain
//! walk, whose chart has one row per trie node at most and whose steps are done once per
//! state ([`StepMemo`]), exact either way.

use crate::automata::dfa::DEAD;
use crate::parser::cfg::Cfg;
use crate::vocab::ci_cache::{CiCache, CiEntry, Level, Lexer, MAX_KEY_LEXEMES, REST};
use crate::parser::earley::{Item, Parser};
use crate::parser::step::{advance, start_lexemes, Lexeme};
use crate::runtime::hash::hash_step;
use rustc_hash::FxHashMap;
use crate::vocab::token_set::{set_ids, TokenSet, MAX_LISTED};
use crate::vocab::toktrie::TokTrie;
use std::sync::Arc;

/// Reusable scratch space for mask filling (one per matcher).
#[derive(Debug, Clone, Default)]
pub(crate) struct Filler {
    /// Per level: its lexemes sorted by key element, and its key ([`Filler::set_level`]).
    lex: Vec<LevelLexemes>,
    completed: Vec<(u32, u32)>,
    work: Vec<Lexeme>,
    /// Per depth of the plain walk: its position ([`Frame`]).
    frames: Vec<Frame>,
    /// Longest token in bytes (the trie's depth): states equal up to it share cache entries.
    depth: usize,
    /// Scratch for [`Filler::set_level`]: each lexeme with its key element.
    keyed: Vec<((u32, u32), Lexeme)>,
    /// The ids the last fill set besides `base`, while they are few ([`Filler::kept`]).
    ids: Vec<u32>,
    /// The cached level-0 entry whose bitmask the last fill started from, when it was one.
    base: Option<Arc<CiEntry>>,
    /// Whether the last fill set more than [`MAX_LISTED`] ids besides `base`, or ones it did
    /// not list.
    dense: bool,
    /// Parser rows the levels of the current fill may still push ([`MAX_LEVEL_ROWS`]), the
    /// first `rows_free` of them in any case, the others while the time since `rows_since`
    /// (the last free row) is under `rows_budget`.
    rows_left: usize,
    rows_free: usize,
    rows_since: Option<std::time::Instant>,
    rows_budget: std::time::Duration,
    /// When the current fill's time budget ends, if it has one.
    deadline: Option<std::time::Instant>,
    /// Steps since the deadline was last read.
    ticks: u32,
    /// The current fill ran past its deadline (it stopped; the mask is incomplete).
    timed_out: bool,
    /// The rows the current plain walk pushed, for copying instead of rebuilding.
    memo: RowMemo,
    /// The steps the current plain walk took, by state and byte.
    steps: StepMemo,
}

/// A level's lexemes in key order and its cache key: one element per distinct
/// [`Lexer::key`], the lexemes sharing it side by side.
///
/// Lexemes with one key element end at the same trie nodes and allow the same tokens, so
/// the level is walked once per element: a symbol that may have started after any earlier
/// byte (a Lark comment that may end anywhere, followed by symbols) is several lexemes in one
/// state, their number growing along the text, and a key counting them would miss the cache
/// at every step. A group's [`crate::vocab::ci_cache::EndGroup::ending`] bit `j` ends every
/// lexeme of element `j`.
#[derive(Debug, Clone, Default)]
struct LevelLexemes {
    sorted: Vec<Lexeme>,
    key: Vec<(u32, u32)>,
    /// Per key element: the end of its lexemes in `sorted` (they start at the previous end).
    ends: Vec<u32>,
}

impl LevelLexemes {
    /// The lexemes of key element `j`.
    fn members(&self, j: usize) -> &[Lexeme] {
        let a = if j == 0 { 0 } else { self.ends[j - 1] as usize };
        &self.sorted[a..self.ends[j] as usize]
    }
}

/// Fewest nodes of a group below which [`Filler::descend`] looks for a [`Level::rest`].
const REST_MIN_NODES: usize = 16;

/// The sorted `a` less the sorted `b`.
fn difference(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = Vec::new();
    let mut j = 0;
    for &x in a {
        while j < b.len() && b[j] < x {
            j += 1;
        }
        if j == b.len() || b[j] != x {
            out.push(x);
        }
    }
    out
}

/// A position of the plain walk ([`Filler::walk_full`]).
#[derive(Debug, Clone, Copy, Default)]
struct Frame {
    /// Whether its lexemes are `StepMemo::lex[lex0..lex1]` (else the walk's own buffer's).
    kept: bool,
    lex0: u32,
    lex1: u32,
    /// Length of the walk's own buffer of lexemes with this position's.
    work: u32,
    /// Parser rows (the parser may hold fewer: see [`RowMemo::step`]).
    rows: u32,
    /// The [`RowMemo`] entry whose lexemes also continue here ([`NO_TAIL`]: none).
    tail: u32,
    /// Fingerprint of the state: `path`, `rows`, `tail` and the lexemes.
    fp: u128,
    /// Fingerprint of the [`RowMemo`] entries of the rows the walk pushed on the way here.
    path: u128,
}

/// What stepping a plain-walk state by a byte gave.
#[derive(Debug, Clone, Copy, Default)]
struct StepResult {
    ok: bool,
    rows: u32,
    tail: u32,
    lex0: u32,
    lex1: u32,
    fp: u128,
    path: u128,
}

/// Most lexemes [`StepMemo`] keeps (12 bytes each); past that, new steps are not kept.
const STEP_MAX_LEXEMES: usize = 1 << 20;

/// Most steps [`StepMemo`] keeps.
const STEP_MAX: usize = 1 << 20;

/// The steps one plain walk took, keyed by the fingerprint of the state and the byte.
///
/// Exact up to fingerprint collisions (128 bits): a state's future is a function of its
/// lexemes, the number of rows, the entry whose lexemes continue, and the contents of the
/// rows the walk pushed, which the [`RowMemo`] entries on the path determine.
#[derive(Debug, Clone, Default)]
struct StepMemo {
    map: FxHashMap<u128, u32>,
    results: Vec<StepResult>,
    lex: Vec<Lexeme>,
}

impl StepMemo {
    fn reset(&mut self) {
        self.map.clear();
        self.results.clear();
        self.lex.clear();
    }

    /// Lets go of large buffers (a matcher keeps its filler between fills).
    fn trim(&mut self) {
        const KEEP: usize = 1 << 14;
        if self.lex.capacity() > 4 * KEEP || self.map.capacity() > KEEP {
            *self = StepMemo::default();
        }
    }

    /// Copies `lex` into the memo's lexemes; an empty range when it is full.
    fn keep(&mut self, lex: &[Lexeme]) -> (u32, u32) {
        let a = self.lex.len();
        if a + lex.len() > STEP_MAX_LEXEMES || self.results.len() >= STEP_MAX {
            return (a as u32, a as u32);
        }
        self.lex.extend_from_slice(lex);
        (a as u32, self.lex.len() as u32)
    }

    fn record(&mut self, key: u128, r: StepResult) {
        if self.results.len() < STEP_MAX {
            self.map.insert(key, self.results.len() as u32);
            self.results.push(r);
        }
    }
}

/// `h` extended with the lexemes `lex`, in order.
#[inline]
fn lexemes_fingerprint(mut h: u128, lex: &[Lexeme]) -> u128 {
    h = hash_step(h, lex.len() as u64);
    for l in lex {
        h = hash_step(h, (l.row as u64) << 32 | l.term as u64);
        h = hash_step(h, l.state as u64);
    }
    h
}

/// Most items [`RowMemo`] keeps (12 bytes each); past that, rows are built, not kept.
const MEMO_MAX_ITEMS: usize = 1 << 18;

/// The parser rows one plain walk ([`Filler::walk_full`]) pushed, each with the lexemes it
/// starts, keyed by what determines them: the new row's index and its completions `(row,
/// terminal)`, where a row pushed during the walk also names the entry it was copied from.
///
/// A terminal that ends at many trie nodes (an identifier ending after every byte of every
/// identifier-like token) pushes the same row at each of them, and with a large grammar a
/// row costs microseconds of completion and prediction while a copy costs tens of
/// nanoseconds. Exact: a row is a function of its index, the completed terminals and the
/// contents of the rows they started at; rows below the walk's first row do not change
/// during the walk, and a row the walk pushed is identified by its entry (by induction).
#[derive(Debug, Clone, Default)]
struct RowMemo {
    map: FxHashMap<Vec<u32>, u32>,
    /// Per entry: end of its items, terms and lexemes in the arrays below, and whether the
    /// row accepts (the starts are the previous entry's ends).
    entries: Vec<(u32, u32, u32, bool)>,
    items: Vec<Item>,
    terms: Vec<u32>,
    lex: Vec<Lexeme>,
    /// The entry (or, for a row not kept, a unique id) of each row on the current path,
    /// indexed by row - `base`.
    path: Vec<u32>,
    /// The first row the walk may push.
    base: u32,
    /// Ids for rows not kept (never equal to an entry's index).
    fresh: u32,
    key: Vec<u32>,
    completed: Vec<(u32, u32)>,
    /// Per entry and byte: 0, or 1 + the index in `tres` of [`RowMemo::tail`]'s answer.
    tab: Vec<u32>,
    /// Ranges into `tlex` and `tcomp`.
    tres: Vec<(u32, u32, u32, u32)>,
    tlex: Vec<Lexeme>,
    tcomp: Vec<(u32, u32)>,
    /// Per depth (modulo [`RECENT`]): the last key looked up there and its entry.
    recent: Vec<(Vec<u32>, u32)>,
}

/// Slots of [`RowMemo::recent`].
const RECENT: usize = 64;

/// No [`RowMemo`] entry's lexemes continue at this depth.
const NO_TAIL: u32 = u32::MAX;

impl RowMemo {
    /// Lets go of large buffers (a matcher keeps its filler between fills).
    fn trim(&mut self) {
        const KEEP: usize = 1 << 12;
        if self.items.capacity() > 4 * KEEP || self.map.capacity() > KEEP || self.tab.capacity() > 64 * KEEP {
            *self = RowMemo::default();
        }
    }

    fn reset(&mut self, base: u32) {
        self.map.clear();
        self.entries.clear();
        self.items.clear();
        self.terms.clear();
        self.lex.clear();
        self.path.clear();
        self.tab.clear();
        self.tres.clear();
        self.tlex.clear();
        self.tcomp.clear();
        self.recent.clear();
        self.base = base;
        self.fresh = u32::MAX / 2;
    }

    /// The lexemes of entry `e`'s row that byte `b` continues, and the terminals among them
    /// that `b` completes (ranges into `tlex` and `tcomp`), computed on first use.
    #[inline]
    fn tail(&mut self, cfg: &Cfg, e: u32, b: u8) -> (usize, usize, usize, usize) {
        let slot = e as usize * 256 + b as usize;
        let k = self.tab[slot];
        if k == 0 {
            let l0 = if e == 0 { 0 } else { self.entries[e as usize - 1].2 as usize };
            let l1 = self.entries[e as usize].2 as usize;
            let (a, c) = (self.tlex.len() as u32, self.tcomp.len() as u32);
            for lx in &self.lex[l0..l1] {
                let dfa = cfg.terminals[lx.term as usize].dfa();
                let s = dfa.next(lx.state, b);
                if s == DEAD {
                    continue;
                }
                self.tlex.push(Lexeme { state: s, ..*lx });
                if dfa.is_accepting(s) {
                    self.tcomp.push((lx.row, lx.term));
                }
            }
            self.tres.push((a, self.tlex.len() as u32, c, self.tcomp.len() as u32));
            self.tab[slot] = self.tres.len() as u32;
        }
        let r = self.tres[self.tab[slot] as usize - 1];
        (r.0 as usize, r.1 as usize, r.2 as usize, r.3 as usize)
    }

    /// [`crate::parser::step::step`] for the plain walk at a position with `cur` parser
    /// rows (the parser holds the first of them; the others are entries of `path`, copied
    /// in only when a row must be built): advances `lex[from]` and the lexemes of entry `tail`
    /// ([`NO_TAIL`]: none) by `b`, and where terminals complete, adds the row (an entry when
    /// an equal row was built before in this walk). The new row's lexemes are appended to
    /// `lex` when the row is not kept, else left to the returned entry. Returns whether the
    /// position is viable, the new number of rows, and that entry or [`NO_TAIL`].
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn step(&mut self, cfg: &Cfg, parser: &mut Parser, lex: &mut Vec<Lexeme>, from: std::ops::Range<usize>, tail: u32, cur: u32, b: u8) -> (bool, u32, u32) {
        let out_start = lex.len();
        self.completed.clear();
        advance(cfg, lex, from, b, &mut self.completed);
        if tail != NO_TAIL {
            let (l0, l1, c0, c1) = self.tail(cfg, tail, b);
            lex.extend_from_slice(&self.tlex[l0..l1]);
            self.completed.extend_from_slice(&self.tcomp[c0..c1]);
        }
        if self.completed.is_empty() {
            return (lex.len() > out_start, cur, NO_TAIL);
        }
        if self.completed.len() > 1 {
            self.completed.sort_unstable();
            self.completed.dedup();
        }
        debug_assert!(cur >= self.base);
        let depth = (cur - self.base) as usize;
        self.path.truncate(depth);
        self.key.clear();
        self.key.push(cur);
        for &(r, t) in &self.completed {
            let id = if r < self.base { u32::MAX } else { self.path[(r - self.base) as usize] };
            self.key.extend_from_slice(&[r, t, id]);
        }
        // The last entry found at this depth is most often the one wanted: compare before hashing.
        let slot = depth % RECENT;
        let found = match self.recent.get(slot) {
            // (An inline loop: keys hold a few words, a memcmp call costs more.)
            Some((k, id)) if k.len() == self.key.len() && k.iter().zip(&self.key).all(|(a, b)| a == b) => Some(*id),
            _ => self.map.get(self.key.as_slice()).copied(),
        };
        if let Some(id) = found {
            if self.recent.len() > slot && self.recent[slot].1 != id {
                self.recent[slot].0.clear();
                self.recent[slot].0.extend_from_slice(&self.key);
                self.recent[slot].1 = id;
            }
            self.path.push(id);
            return (true, cur + 1, id);
        }
        // Build the row: first copy in the rows of the path the parser does not hold yet.
        let mut real = parser.num_rows() as u32;
        debug_assert!(real <= cur);
        while real < cur {
            let id = self.path[(real - self.base) as usize] as usize;
            let (i0, t0) = if id == 0 { (0, 0) } else { let p = self.entries[id - 1]; (p.0 as usize, p.1 as usize) };
            let e = self.entries[id];
            parser.push_row_copy(&self.items[i0..e.0 as usize], &self.terms[t0..e.1 as usize], e.3);
            real += 1;
        }
        let row = parser.push_row(cfg, &self.completed);
        let l0 = lex.len();
        start_lexemes(cfg, parser, row, lex);
        let (items, terms, accepting) = parser.row_parts(row);
        if self.items.len() + items.len() <= MEMO_MAX_ITEMS {
            let id = self.entries.len() as u32;
            self.items.extend_from_slice(items);
            self.terms.extend_from_slice(terms);
            self.lex.extend_from_slice(&lex[l0..]);
            lex.truncate(l0);
            self.entries.push((self.items.len() as u32, self.terms.len() as u32, self.lex.len() as u32, accepting));
            self.tab.resize(self.entries.len() * 256, 0);
            self.map.insert(self.key.clone(), id);
            if self.recent.len() <= slot {
                self.recent.resize_with(slot + 1, || (Vec::new(), u32::MAX));
            }
            self.recent[slot].0.clear();
            self.recent[slot].0.extend_from_slice(&self.key);
            self.recent[slot].1 = id;
            self.path.push(id);
            (true, cur + 1, id)
        } else {
            self.fresh += 1;
            self.path.push(self.fresh);
            (true, cur + 1, NO_TAIL)
        }
    }
}

/// Trie nodes a plain walk steps between two reads of the clock (a step costs from tens of
/// nanoseconds to, with rows of thousands of items, a millisecond; the clock about 25 ns).
const NODES_PER_CLOCK_READ: u32 = 64;

/// Parser rows the levels push between two reads of the clock (a row costs a microsecond
/// or more; the clock about 25 ns).
const ROWS_PER_CLOCK_READ: u32 = 4;

/// Parser rows one fill may always push through the levels, nor more than the trie has
/// nodes (the most the plain walk can push). Fills push tens (json.ebnf with Llama 3: at
/// most 23; the llama.cpp GBNF samples: 29; the ambiguous `root ::= item*` / `item ::= "-"+
/// " "? | "(" root ")"`: 260)...
pub(crate) const MIN_LEVEL_ROWS: usize = 1024;

/// ...and up to this many (nor more than the trie has nodes) while the rows past
/// [`MIN_LEVEL_ROWS`] take less time than [`LEVEL_WALKS`] plain walks of the trie would
/// ([`PLAIN_WALK_NS_PER_NODE`]): a fill through long chains of small groups may push
/// thousands, each far cheaper than a walk; where the paths multiply exponentially a row can
/// cost milliseconds (rows of thousands of items), and the time bounds the fill.
pub(crate) const MAX_LEVEL_ROWS: usize = 1 << 16;

/// See [`MAX_LEVEL_ROWS`].
const LEVEL_WALKS: u64 = 16;

/// About what the plain walk costs per trie node (Llama 3, 274,520 nodes: 2-9 ms a walk).
const PLAIN_WALK_NS_PER_NODE: u64 = 25;

/// What a fill's mask is made of, for keeping it without a copy ([`Filler::kept`]).
#[derive(Debug)]
pub(crate) enum Kept<'a> {
    /// Exactly these ids (possibly repeated).
    Ids(&'a [u32]),
    /// This cached set (a bitmask, shared) plus these ids.
    Over(&'a TokenSet, &'a [u32]),
}

impl Filler {
    /// Writes into `mask` (its first `mask_words` words; the rest must be zero) every token
    /// allowed after the position whose lexemes are `cur`. `parser` is restored before returning.
    /// With `budget_ms > 0`, a fill that runs longer stops and returns false (the mask is then
    /// incomplete; the caller must not use it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fill(&mut self, cfg: &Cfg, ci: &CiCache, trie: &TokTrie, mask_words: usize, parser: &mut Parser, cur: &[Lexeme], mask: &mut [u32], budget_ms: u64) -> bool {
        self.ids.clear();
        self.base = None;
        self.dense = false;
        self.timed_out = false;
        self.ticks = 0;
        self.deadline = (budget_ms > 0).then(|| std::time::Instant::now() + std::time::Duration::from_millis(budget_ms));
        if cur.is_empty() {
            mask[..mask_words].fill(0);
            return true;
        }
        self.depth = trie.max_depth();
        if self.set_level(cfg, 0, cur) > MAX_KEY_LEXEMES {
            self.dense = true;
            mask[..mask_words].fill(0);
            return self.walk_whole(cfg, trie, parser, cur, mask);
        }
        let entry = ci.get(trie, &self.lex[0].key, || self.lexers_of(cfg, 0), mask_words);
        entry.allowed.write_to(mask, mask_words);
        match &entry.allowed {
            TokenSet::Ids(ids) => self.ids.extend_from_slice(ids),
            TokenSet::Bits(_) | TokenSet::Near { .. } => self.base = Some(entry.clone()),
        }
        self.rows_left = MAX_LEVEL_ROWS.min(trie.nodes.len());
        self.rows_free = MIN_LEVEL_ROWS.min(trie.nodes.len());
        self.rows_since = None;
        self.rows_budget = std::time::Duration::from_nanos(trie.nodes.len() as u64 * PLAIN_WALK_NS_PER_NODE * LEVEL_WALKS);
        if self.descend(cfg, ci, trie, parser, &entry.level, 0, None, mask) {
            return true;
        }
        if self.timed_out {
            return false;
        }
        // The paths through the levels multiply: the plain walk instead. Every token set so
        // far is allowed, and the walk sets every allowed token, so the mask stays.
        self.dense = true;
        self.walk_whole(cfg, trie, parser, cur, mask)
    }

    /// Takes one more row for the levels, if the current fill may still push one.
    fn one_more_row(&mut self) -> bool {
        if self.rows_left == 0 {
            return false;
        }
        self.rows_left -= 1;
        if self.rows_free > 0 {
            self.rows_free -= 1;
            if self.rows_free == 0 {
                self.rows_since = Some(std::time::Instant::now());
            }
            return true;
        }
        self.rows_since.is_some_and(|t| t.elapsed() < self.rows_budget)
    }

    /// Whether the current fill is past its deadline (reads the clock every `every` calls).
    fn out_of_time(&mut self, every: u32) -> bool {
        if let Some(d) = self.deadline {
            self.ticks += 1;
            if self.ticks >= every {
                self.ticks = 0;
                if std::time::Instant::now() >= d {
                    self.timed_out = true;
                }
            }
        }
        self.timed_out
    }

    /// [`Filler::walk_full`] over the whole trie; false when it ran out of time.
    fn walk_whole(&mut self, cfg: &Cfg, trie: &TokTrie, parser: &mut Parser, cur: &[Lexeme], mask: &mut [u32]) -> bool {
        // The first-level nodes, stepping over their subtrees (not a scan of every node).
        let mut roots: Vec<u32> = Vec::with_capacity(256);
        let mut i = 0;
        while i < trie.nodes.len() {
            debug_assert_eq!(trie.nodes[i].depth, 1);
            roots.push(i as u32);
            i += trie.nodes[i].subtree_len as usize;
        }
        self.walk_full(cfg, trie, parser, &roots, false, cur, mask)
    }

    /// What the last [`Filler::fill`] set, when it is a cached entry's bitmask and at most
    /// [`MAX_LISTED`] more ids, or only such ids: the mask then needs no 16 KB copy to be kept.
    pub(crate) fn kept(&self) -> Option<Kept<'_>> {
        if self.dense {
            return None;
        }
        Some(match &self.base {
            Some(b) => Kept::Over(&b.allowed, &self.ids),
            None => Kept::Ids(&self.ids),
        })
    }

    /// Stores `lex` in canonical order (and its key) as level `lvl`'s lexemes; returns the
    /// key's length.
    fn set_level(&mut self, cfg: &Cfg, lvl: usize, lex: &[Lexeme]) -> usize {
        if self.lex.len() <= lvl {
            self.lex.resize_with(lvl + 1, Default::default);
        }
        let depth = self.depth;
        let keyed = &mut self.keyed;
        keyed.clear();
        keyed.extend(lex.iter().map(|l| {
            let t = &cfg.terminals[l.term as usize];
            (Lexer { dfa: t.dfa(), state: l.state, gid: t.gid }.key(depth), *l)
        }));
        // Lexemes with equal keys behave alike; the row only orders them deterministically.
        keyed.sort_unstable_by_key(|(k, l)| (*k, l.row, l.term, l.state));
        let LevelLexemes { sorted, key, ends } = &mut self.lex[lvl];
        sorted.clear();
        key.clear();
        ends.clear();
        for (k, l) in keyed.iter() {
            if key.last() == Some(k) {
                *ends.last_mut().unwrap() += 1;
            } else {
                key.push(*k);
                ends.push(sorted.len() as u32 + 1);
            }
            sorted.push(*l);
        }
        key.len()
    }

    /// The lexers of level `lvl`'s lexemes, in key order.
    fn lexers_of<'c>(&self, cfg: &'c Cfg, lvl: usize) -> Vec<Lexer<'c>> {
        let lex = &self.lex[lvl];
        (0..lex.key.len())
            .map(|j| lex.members(j)[0])
            .map(|l| {
                let t = &cfg.terminals[l.term as usize];
                Lexer { dfa: t.dfa(), state: l.state, gid: t.gid }
            })
            .collect()
    }

    /// Pushes a row for each group of `level` and goes down to the next levels. Returns false,
    /// with `parser` restored, when that would take more rows than `rows_left` or the fill
    /// ran out of time (some of the mask is then set, not all).
    #[allow(clippy::too_many_arguments)]
    ///
    /// `from`: for a level below level 0, the row it was built under (its
    /// [`Parser::future_hash`] is computed when needed) and the trie nodes it was built from.
    fn descend(&mut self, cfg: &Cfg, ci: &CiCache, trie: &TokTrie, parser: &mut Parser, level: &Level, lvl: usize, from: Option<(u32, &[u32])>, mask: &mut [u32]) -> bool {
        let rows = parser.num_rows();
        for (g, group) in level.groups.iter().enumerate() {
            if self.out_of_time(ROWS_PER_CLOCK_READ) || !self.one_more_row() {
                return false;
            }
            self.completed.clear();
            let mut bits = group.ending;
            while bits != 0 {
                let j = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                self.completed.extend(self.lex[lvl].members(j).iter().map(|l| (l.row, l.term)));
            }
            let row = parser.push_row(cfg, &self.completed);
            // A row of thousands of items (a key set of 20,000 members) costs a millisecond:
            // it counts for one step per 256 items towards the next read of the clock.
            if self.deadline.is_some() {
                self.ticks += (parser.row_parts(row).0.len() / 256) as u32;
            }
            let mut next = std::mem::take(&mut self.work);
            next.clear();
            start_lexemes(cfg, parser, row, &mut next);
            let too_many = !next.is_empty() && self.set_level(cfg, lvl + 1, &next) > MAX_KEY_LEXEMES;
            if too_many {
                self.dense = true;
                if !self.walk_full(cfg, trie, parser, &group.nodes, true, &next, mask) {
                    self.work = next;
                    parser.truncate(rows);
                    return false;
                }
            } else if !next.is_empty() {
                // Under a row with the future hash of the one `level` was built under, the
                // same lexemes go on below the nodes `level` was built from as they did there:
                // only the group's other nodes need a level ([`Level::rest`]).
                // (Not on a few nodes: on chains of small groups, looking costs more than it
                // saves; nearly all of a Scheme chain's groups are large.)
                let same = group.nodes.len() >= REST_MIN_NODES
                    && from.is_some_and(|(r, _)| self.lex[lvl + 1].key == self.lex[lvl].key && parser.future_hash(cfg, row) == parser.future_hash(cfg, r));
                // (`None`: the level was built from none of the group's nodes.)
                let rest = if same { ci.rest(level, g as u32, || difference(&group.nodes, from.unwrap().1)) } else { None };
                // The level below the group's nodes, or below its rest (indexed apart).
                let (index, nodes): (u32, &[u32]) = match &rest {
                    Some(r) if r.is_empty() => {
                        self.work = next;
                        parser.truncate(rows);
                        continue;
                    }
                    Some(r) => (g as u32 | REST, r),
                    None => (g as u32, &group.nodes),
                };
                let child = match level.child(index, &self.lex[lvl + 1].key) {
                    Some(c) => c,
                    None => {
                        let lexers = self.lexers_of(cfg, lvl + 1);
                        ci.level(trie, level, index, nodes, &self.lex[lvl + 1].key, &lexers)
                    }
                };
                if let Some(bits) = &child.bits {
                    for (m, b) in mask.iter_mut().zip(bits.iter()) {
                        *m |= *b;
                    }
                    self.dense = true;
                }
                set_ids(mask, &child.tokens);
                if !self.dense {
                    if self.ids.len() + child.tokens.len() > MAX_LISTED {
                        self.dense = true;
                    } else {
                        self.ids.extend_from_slice(&child.tokens);
                    }
                }
                if !child.groups.is_empty() {
                    self.work = next;
                    let done = self.descend(cfg, ci, trie, parser, &child, lvl + 1, Some((row, nodes)), mask);
                    next = std::mem::take(&mut self.work);
                    if !done {
                        self.work = next;
                        parser.truncate(rows);
                        return false;
                    }
                }
            }
            self.work = next;
            parser.truncate(rows);
        }
        true
    }

    /// Plain walk with the full byte step over the subtrees of `roots` (below them when
    /// `below`); used for configurations too large for a cache key and when the levels'
    /// paths multiply. False, with `parser` restored, when the fill ran out of time.
    ///
    /// Each position's state (its lexemes, the entries of the rows on its path and the
    /// entry whose lexemes continue there) gets a 128-bit fingerprint of its content, and a
    /// step from a fingerprint by a byte is done once ([`StepMemo`]): on an ambiguous
    /// grammar, where every node at a depth has the same state, a node costs a hash lookup
    /// instead of stepping its lexemes (one per earlier boundary, hundreds on a long text).
    #[allow(clippy::too_many_arguments)]
    fn walk_full(&mut self, cfg: &Cfg, trie: &TokTrie, parser: &mut Parser, roots: &[u32], below: bool, c: &[Lexeme], mask: &mut [u32]) -> bool {
        let nodes = &trie.nodes;
        let rows0 = parser.num_rows() as u32;
        let mut work = Vec::with_capacity(c.len() * 4);
        self.memo.reset(rows0);
        self.steps.reset();
        let fp0 = lexemes_fingerprint(hash_step(0, rows0 as u64), c);
        for &root in roots {
            let root = root as usize;
            let (start, end, base) = if below {
                (root + 1, root + nodes[root].subtree_len as usize, nodes[root].depth as usize)
            } else {
                (root, root + nodes[root].subtree_len as usize, nodes[root].depth as usize - 1)
            };
            work.clear();
            work.extend_from_slice(c);
            self.frames.clear();
            self.frames.push(Frame { kept: false, lex0: 0, lex1: c.len() as u32, work: c.len() as u32, rows: rows0, tail: NO_TAIL, fp: fp0, path: 0 });
            let mut i = start;
            while i < end {
                if self.out_of_time(NODES_PER_CLOCK_READ) {
                    parser.truncate(rows0 as usize);
                    self.memo.trim();
                    self.steps.trim();
                    return false;
                }
                let node = nodes[i];
                let d = node.depth as usize - base;
                if self.frames.len() > d {
                    self.frames.truncate(d);
                    let p = self.frames[d - 1];
                    parser.truncate(p.rows as usize);
                    work.truncate(p.work as usize);
                }
                let p = self.frames[d - 1];
                let key = hash_step(p.fp, node.byte as u64);
                if let Some(&k) = self.steps.map.get(&key) {
                    let r = self.steps.results[k as usize];
                    if !r.ok {
                        parser.truncate(p.rows as usize);
                        i += node.subtree_len as usize;
                        continue;
                    }
                    if r.rows > p.rows {
                        self.memo.path.truncate((p.rows - rows0) as usize);
                        self.memo.path.push(r.tail);
                    }
                    set_ids(mask, trie.tokens_at(i));
                    self.frames.push(Frame { kept: true, lex0: r.lex0, lex1: r.lex1, work: work.len() as u32, rows: r.rows, tail: r.tail, fp: r.fp, path: r.path });
                    i += 1;
                    continue;
                }
                // Not stepped from this state by this byte yet: step the lexemes themselves.
                let from = if p.kept {
                    let a = work.len();
                    work.extend_from_slice(&self.steps.lex[p.lex0 as usize..p.lex1 as usize]);
                    a..work.len()
                } else {
                    p.lex0 as usize..p.lex1 as usize
                };
                let at = work.len();
                let built = parser.num_rows();
                let (ok, rows, tail) = self.memo.step(cfg, parser, &mut work, from, p.tail, p.rows, node.byte);
                if parser.num_rows() > built {
                    // A row was built (up to a millisecond on a large grammar): read the clock next.
                    self.ticks = NODES_PER_CLOCK_READ;
                }
                // A row not kept by the RowMemo has no entry to name it: such a step is not memoised.
                let memoise = rows == p.rows || tail != NO_TAIL;
                if !ok {
                    if memoise {
                        self.steps.record(key, StepResult { ok: false, ..Default::default() });
                    }
                    parser.truncate(p.rows as usize);
                    work.truncate(p.work as usize);
                    i += node.subtree_len as usize;
                    continue;
                }
                set_ids(mask, trie.tokens_at(i));
                let path = if rows > p.rows { hash_step(p.path, self.memo.path[(p.rows - rows0) as usize] as u64) } else { p.path };
                let fp = lexemes_fingerprint(hash_step(hash_step(path, rows as u64), tail as u64), &work[at..]);
                if memoise {
                    let (lex0, lex1) = self.steps.keep(&work[at..]);
                    if lex1 > lex0 || at == work.len() {
                        self.steps.record(key, StepResult { ok: true, rows, tail, lex0, lex1, fp, path });
                    }
                }
                self.frames.push(Frame { kept: false, lex0: at as u32, lex1: work.len() as u32, work: work.len() as u32, rows, tail, fp, path });
                i += 1;
            }
            parser.truncate(rows0 as usize);
        }
        self.memo.trim();
        self.steps.trim();
        true
    }
}
