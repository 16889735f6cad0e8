//! Filling a next-token bitmask from the level caches of [`crate::vocab::ci_cache`].
//!
//! Level 0 is a copy of the cached context-independent set. For each group of trie nodes
//! where terminals could end, the parser pushes one row (the only context-dependent work),
//! the terminals that row expects give the key of the next level, whose cached token list
//! is ORed in, and so on down. Configurations too large for a key take a plain walk.
//!
//! The levels do not merge paths: a trie node reached through two different sequences of
//! groups gets two parser rows, one per path, where the plain walk's chart has one. On
//! grammars where terminals of different lengths end all along a token (`root ::= "" |
//! root "ab" | root .+`), the number of paths grows exponentially with the token's length
//! (1.5x per byte there: 0.2 s for a 32-byte token, 1 s for 36 bytes; on the grammar of
//! `tests/test_fill_hang.py`, about 2.3x per level, a fill on a 37-byte token ran for over
//! six minutes without finishing). So a fill pushes at most [`MAX_LEVEL_ROWS`] rows through
//! the levels (fewer on a small trie); past that it starts over with the plain walk, whose
//! chart has one row per trie node at most (exact either way).

use crate::parser::cfg::Cfg;
use crate::vocab::ci_cache::{CiCache, CiEntry, Level, Lexer, MAX_KEY_LEXEMES};
use crate::parser::earley::Parser;
use crate::parser::step::{start_lexemes, step, Lexeme, StepScratch};
use crate::vocab::token_set::{set_ids, TokenSet, MAX_LISTED};
use crate::vocab::toktrie::TokTrie;
use std::sync::Arc;

/// Reusable scratch space for mask filling (one per matcher).
#[derive(Debug, Clone, Default)]
pub(crate) struct Filler {
    /// Per level: the sorted lexemes and their key.
    lex: Vec<(Vec<Lexeme>, Vec<(u32, u32)>)>,
    completed: Vec<(u32, u32)>,
    work: Vec<Lexeme>,
    frames: Vec<(u32, u32, u32)>,
    scratch: StepScratch,
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
    /// Parser rows the levels of the current fill may still push ([`MAX_LEVEL_ROWS`]).
    rows_left: usize,
    /// When the current fill's time budget ends, if it has one.
    deadline: Option<std::time::Instant>,
    /// Steps since the deadline was last read.
    ticks: u32,
    /// The current fill ran past its deadline (it stopped; the mask is incomplete).
    timed_out: bool,
}

/// Trie nodes a plain walk steps between two reads of the clock (a step costs from tens of
/// nanoseconds to, with rows of thousands of items, a millisecond).
const NODES_PER_CLOCK_READ: u32 = 16;

/// Parser rows the levels push between two reads of the clock (a row costs a microsecond
/// or more; the clock about 25 ns).
const ROWS_PER_CLOCK_READ: u32 = 4;

/// Most parser rows one fill pushes through the levels before it takes the plain walk, nor
/// more than the trie has nodes (the most the plain walk can push). Fills push tens
/// (json.ebnf with Llama 3: at most 23; the llama.cpp GBNF samples: 29; the ambiguous
/// `root ::= item*` / `item ::= "-"+ " "? | "(" root ")"`: 260), while on a grammar whose
/// paths multiply a row can cost milliseconds (rows of thousands of items).
pub(crate) const MAX_LEVEL_ROWS: usize = 1024;

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
        if cur.len() > MAX_KEY_LEXEMES {
            self.dense = true;
            mask[..mask_words].fill(0);
            return self.walk_whole(cfg, trie, parser, cur, mask);
        }
        self.depth = trie.max_depth();
        self.set_level(cfg, 0, cur);
        let entry = ci.get(trie, &self.lex[0].1, || self.lexers_of(cfg, 0), mask_words);
        entry.allowed.write_to(mask, mask_words);
        match &entry.allowed {
            TokenSet::Ids(ids) => self.ids.extend_from_slice(ids),
            TokenSet::Bits(_) | TokenSet::Near { .. } => self.base = Some(entry.clone()),
        }
        self.rows_left = MAX_LEVEL_ROWS.min(trie.nodes.len());
        if self.descend(cfg, ci, trie, parser, &entry.level, 0, mask) {
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
        let roots: Vec<u32> = (0..trie.nodes.len() as u32).filter(|&i| trie.nodes[i as usize].depth == 1).collect();
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

    /// Stores `lex` in canonical order (and its key) as level `lvl`'s lexemes.
    fn set_level(&mut self, cfg: &Cfg, lvl: usize, lex: &[Lexeme]) {
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
        let (sorted, key) = &mut self.lex[lvl];
        sorted.clear();
        key.clear();
        for (k, l) in keyed.iter() {
            sorted.push(*l);
            key.push(*k);
        }
    }

    /// The lexers of level `lvl`'s lexemes, in key order.
    fn lexers_of<'c>(&self, cfg: &'c Cfg, lvl: usize) -> Vec<Lexer<'c>> {
        self.lex[lvl]
            .0
            .iter()
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
    fn descend(&mut self, cfg: &Cfg, ci: &CiCache, trie: &TokTrie, parser: &mut Parser, level: &Level, lvl: usize, mask: &mut [u32]) -> bool {
        let rows = parser.num_rows();
        for (g, group) in level.groups.iter().enumerate() {
            if self.rows_left == 0 || self.out_of_time(ROWS_PER_CLOCK_READ) {
                return false;
            }
            self.rows_left -= 1;
            self.completed.clear();
            let mut bits = group.ending;
            while bits != 0 {
                let j = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let l = self.lex[lvl].0[j];
                self.completed.push((l.row, l.term));
            }
            let row = parser.push_row(cfg, &self.completed);
            let mut next = std::mem::take(&mut self.work);
            next.clear();
            start_lexemes(cfg, parser, row, &mut next);
            if next.len() > MAX_KEY_LEXEMES {
                self.dense = true;
                if !self.walk_full(cfg, trie, parser, &group.nodes, true, &next, mask) {
                    self.work = next;
                    parser.truncate(rows);
                    return false;
                }
            } else if !next.is_empty() {
                self.set_level(cfg, lvl + 1, &next);
                let child = match level.child(g as u32, &self.lex[lvl + 1].1) {
                    Some(c) => c,
                    None => {
                        let lexers = self.lexers_of(cfg, lvl + 1);
                        ci.level(trie, level, g as u32, &self.lex[lvl + 1].1, &lexers)
                    }
                };
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
                    let done = self.descend(cfg, ci, trie, parser, &child, lvl + 1, mask);
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
    #[allow(clippy::too_many_arguments)]
    fn walk_full(&mut self, cfg: &Cfg, trie: &TokTrie, parser: &mut Parser, roots: &[u32], below: bool, c: &[Lexeme], mask: &mut [u32]) -> bool {
        let nodes = &trie.nodes;
        let rows0 = parser.num_rows() as u32;
        let mut work = Vec::with_capacity(c.len() * 4);
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
            self.frames.push((0, c.len() as u32, rows0));
            let mut i = start;
            while i < end {
                if self.out_of_time(NODES_PER_CLOCK_READ) {
                    parser.truncate(rows0 as usize);
                    return false;
                }
                let node = nodes[i];
                let d = node.depth as usize - base;
                if self.frames.len() > d {
                    self.frames.truncate(d);
                    let p = self.frames[d - 1];
                    parser.truncate(p.2 as usize);
                    work.truncate(p.1 as usize);
                }
                let p = self.frames[d - 1];
                let at = work.len();
                let (_, ok) = step(cfg, parser, &mut work, p.0 as usize..p.1 as usize, node.byte, &mut self.scratch);
                if !ok {
                    parser.truncate(p.2 as usize);
                    i += node.subtree_len as usize;
                    continue;
                }
                set_ids(mask, trie.tokens_at(i));
                self.frames.push((at as u32, work.len() as u32, parser.num_rows() as u32));
                i += 1;
            }
            parser.truncate(rows0 as usize);
        }
        true
    }
}
