//! Filling a next-token bitmask: the token trie walked level by level.
//!
//! Level 0 is the cached context-independent set of [`crate::ci_cache`]. Below a trie node
//! where some terminals could end, the parser pushes one row per distinct set of ending
//! terminals — not one per node — and the next level walks every such node's subtree with
//! the lexer alone from the new row's terminals, again grouping the nodes where terminals
//! end. Each accepted path is counted by its terminal ends, so the union over levels is the
//! exact mask, and parser work grows with the number of distinct ending sets, which is
//! small, rather than with the number of tokens that cross a terminal boundary.

use crate::byteset::ByteSet;
use crate::cfg::Cfg;
use crate::ci_cache::{CiCache, MAX_KEY_LEXEMES};
use crate::dfa::DEAD;
use crate::earley::Parser;
use crate::step::{start_lexemes, step, Lexeme, StepScratch};
use crate::toktrie::TokTrie;

#[derive(Debug, Clone, Default)]
struct Level {
    states: Vec<u32>,
    groups: Vec<(u64, Vec<u32>)>,
    lex: Vec<Lexeme>,
}

/// Reusable scratch space for mask filling (one per matcher; no allocation once warm).
#[derive(Debug, Clone, Default)]
pub struct Filler {
    sorted: Vec<Lexeme>,
    key: Vec<(u32, u32)>,
    completed: Vec<(u32, u32)>,
    levels: Vec<Level>,
    work: Vec<Lexeme>,
    frames: Vec<(u32, u32, u32)>,
    scratch: StepScratch,
}

#[inline(always)]
fn set_bits(mask: &mut [u32], ids: &[u32]) {
    for &t in ids {
        mask[t as usize / 32] |= 1 << (t % 32);
    }
}

fn first_bytes(cfg: &Cfg, lex: &[Lexeme]) -> ByteSet {
    let mut f = ByteSet::default();
    for lx in lex {
        f.union_with(cfg.terminals[lx.term as usize].dfa.live_bytes(lx.state));
    }
    f
}

impl Filler {
    /// ORs into `mask` every token allowed after the position whose lexemes are `cur`
    /// (parser rows as in `parser`, which is restored before returning). `mask` must be zeroed.
    pub fn fill(&mut self, cfg: &Cfg, ci: &CiCache, trie: &TokTrie, mask_words: usize, parser: &mut Parser, cur: &[Lexeme], mask: &mut [u32]) {
        if cur.is_empty() {
            return;
        }
        let rows = parser.num_rows();
        if cur.len() > MAX_KEY_LEXEMES {
            let all: Vec<u32> = (0..trie.nodes.len() as u32).filter(|&i| trie.nodes[i as usize].depth == 1).collect();
            self.walk_full(cfg, trie, parser, &all, 0, cur, mask);
            return;
        }
        // Canonical lexeme order, so equal configurations share one cache entry.
        self.sorted.clear();
        self.sorted.extend_from_slice(cur);
        self.sorted.sort_unstable_by_key(|l| (l.term, l.state, l.row));
        self.key.clear();
        self.key.extend(self.sorted.iter().map(|l| (l.term, l.state)));
        let entry = ci.get(cfg, trie, &self.key, mask_words);
        mask[..entry.allowed.len()].copy_from_slice(&entry.allowed);
        let mut roots: Vec<u32> = Vec::new();
        for group in &entry.groups {
            self.completed.clear();
            let mut bits = group.ending;
            while bits != 0 {
                let j = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                self.completed.push((self.sorted[j].row, self.sorted[j].term));
            }
            let row = parser.push_row(cfg, &self.completed);
            let mut next = std::mem::take(&mut self.work);
            next.clear();
            start_lexemes(cfg, parser, row, &mut next);
            if !next.is_empty() {
                let first = first_bytes(cfg, &next);
                roots.clear();
                roots.extend(group.nodes.iter().zip(&group.child_bytes).filter(|(_, cb)| cb.intersects(&first)).map(|(&n, _)| n));
                if !roots.is_empty() {
                    self.walk_level(cfg, trie, parser, 1, &roots, &next, &first, mask);
                }
            }
            self.work = next;
            parser.truncate(rows);
        }
    }

    /// Walks the subtrees below `roots` with the lexer alone from lexemes `c`; recurses
    /// once per distinct set of terminals that end inside those subtrees.
    #[allow(clippy::too_many_arguments)]
    fn walk_level(&mut self, cfg: &Cfg, trie: &TokTrie, parser: &mut Parser, lvl: usize, roots: &[u32], c: &[Lexeme], first: &ByteSet, mask: &mut [u32]) {
        let k = c.len();
        if k > MAX_KEY_LEXEMES {
            self.walk_full(cfg, trie, parser, roots, 1, c, mask);
            return;
        }
        if self.levels.len() <= lvl {
            self.levels.resize_with(lvl + 1, Level::default);
        }
        let mut lv = std::mem::take(&mut self.levels[lvl]);
        lv.groups.iter_mut().for_each(|g| g.1.clear());
        let mut n_groups = 0usize;
        let nodes = &trie.nodes;
        let dfas: Vec<&crate::dfa::Dfa> = c.iter().map(|l| &cfg.terminals[l.term as usize].dfa).collect();
        for &root in roots {
            let root = root as usize;
            let base = nodes[root].depth as usize;
            let end = root + nodes[root].subtree_len as usize;
            let mut i = root + 1;
            while i < end {
                let node = nodes[i];
                let d = node.depth as usize - base;
                if d == 1 && !first.contains(node.byte) {
                    i += node.subtree_len as usize;
                    continue;
                }
                if lv.states.len() < (d + 1) * k {
                    lv.states.resize((d + 1) * k, DEAD);
                }
                if d == 1 {
                    for (j, l) in c.iter().enumerate() {
                        lv.states[j] = l.state;
                    }
                }
                let (prev, cur) = lv.states.split_at_mut(d * k);
                let prev = &prev[(d - 1) * k..];
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
                set_bits(mask, trie.tokens_at(i));
                if ending != 0 && node.subtree_len > 1 {
                    match lv.groups[..n_groups].iter_mut().find(|g| g.0 == ending) {
                        Some(g) => g.1.push(i as u32),
                        None => {
                            if lv.groups.len() == n_groups {
                                lv.groups.push((ending, Vec::new()));
                            }
                            lv.groups[n_groups].0 = ending;
                            lv.groups[n_groups].1.clear();
                            lv.groups[n_groups].1.push(i as u32);
                            n_groups += 1;
                        }
                    }
                }
                i += 1;
            }
        }
        let rows = parser.num_rows();
        for g in 0..n_groups {
            let ending = lv.groups[g].0;
            self.completed.clear();
            let mut bits = ending;
            while bits != 0 {
                let j = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                self.completed.push((c[j].row, c[j].term));
            }
            let row = parser.push_row(cfg, &self.completed);
            lv.lex.clear();
            start_lexemes(cfg, parser, row, &mut lv.lex);
            if !lv.lex.is_empty() {
                let first = first_bytes(cfg, &lv.lex);
                let next_lex = std::mem::take(&mut lv.lex);
                let group_nodes = std::mem::take(&mut lv.groups[g].1);
                self.walk_level(cfg, trie, parser, lvl + 1, &group_nodes, &next_lex, &first, mask);
                lv.groups[g].1 = group_nodes;
                lv.lex = next_lex;
            }
            parser.truncate(rows);
        }
        self.levels[lvl] = lv;
    }

    /// Plain walk with the full byte step below `roots` (or of the roots themselves when
    /// `below` is 0); used only for configurations too large for the grouped walk.
    #[allow(clippy::too_many_arguments)]
    fn walk_full(&mut self, cfg: &Cfg, trie: &TokTrie, parser: &mut Parser, roots: &[u32], below: usize, c: &[Lexeme], mask: &mut [u32]) {
        let nodes = &trie.nodes;
        let rows0 = parser.num_rows() as u32;
        for &root in roots {
            let root = root as usize;
            let (start, end, base) = if below == 1 {
                (root + 1, root + nodes[root].subtree_len as usize, nodes[root].depth as usize)
            } else {
                (root, root + nodes[root].subtree_len as usize, nodes[root].depth as usize - 1)
            };
            self.work.clear();
            self.work.extend_from_slice(c);
            self.frames.clear();
            self.frames.push((0, c.len() as u32, rows0));
            let mut i = start;
            while i < end {
                let node = nodes[i];
                let d = node.depth as usize - base;
                if self.frames.len() > d {
                    self.frames.truncate(d);
                    let p = self.frames[d - 1];
                    parser.truncate(p.2 as usize);
                    self.work.truncate(p.1 as usize);
                }
                let p = self.frames[d - 1];
                let at = self.work.len();
                let (_, ok) = step(cfg, parser, &mut self.work, p.0 as usize..p.1 as usize, node.byte, &mut self.scratch);
                if !ok {
                    parser.truncate(p.2 as usize);
                    i += node.subtree_len as usize;
                    continue;
                }
                set_bits(mask, trie.tokens_at(i));
                self.frames.push((at as u32, self.work.len() as u32, parser.num_rows() as u32));
                i += 1;
            }
            parser.truncate(rows0 as usize);
        }
    }
}
