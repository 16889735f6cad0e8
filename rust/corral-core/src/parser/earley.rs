//! Earley parser over terminals, kept as a stack of rows so that a token trie walk
//! (and rollback) can push and pop parser steps cheaply.
//!
//! Rows are created only at terminal boundaries; inside a terminal the DFA does the work.

use crate::parser::cfg::{Cfg, Sym};
use crate::runtime::hash::hash_step;
use crate::parser::perm::PermStates;
use rustc_hash::FxHashSet;

/// An Earley item: a dotted position, the row where its production started and, for an item
/// before a key set, the key-set state (an index into the parser's [`PermStates`]; else 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Item {
    /// Dot id (see [`Cfg::dots`]).
    pub dot: u32,
    /// Origin row.
    pub origin: u32,
    /// Key-set state (see [`crate::parser::perm`]); 0 for every other item.
    pub aux: u32,
}

#[derive(Debug, Clone, Copy)]
struct Row {
    items_start: u32,
    items_end: u32,
    terms_start: u32,
    terms_end: u32,
    accepting: bool,
}

/// The parser's chart: a stack of rows.
#[derive(Debug, Clone, Default)]
pub(crate) struct Parser {
    items: Vec<Item>,
    rows: Vec<Row>,
    row_terms: Vec<u32>,
    /// Keys of this row's items whose origin is an earlier row (few; linear dedup).
    extra: Vec<u128>,
    /// Hash dedup once `extra` grows large.
    seen: FxHashSet<u128>,
    /// Key-set states referred to by items.
    perm_states: PermStates,
    nt_stamp: Vec<u32>,
    term_stamp: Vec<u32>,
    dot_stamp: Vec<u32>,
    /// Per dot: the row stamp and origin of the first item from an earlier row (and without
    /// key-set state) added at that dot to the row being built ([`Parser::add`]).
    kernel_stamp: Vec<(u32, u32)>,
    stamp: u32,
    /// Future hashes of the first `futures.len()` rows (see [`Parser::future_hash`]).
    futures: Vec<u128>,
    /// Per row: up to two nonterminals' [`Parser::completion_hash`]es there (`u32::MAX`: none).
    completions: Vec<[(u32, u128); 2]>,
}

/// Deepest recursion of [`Parser::completion_hash`] (it is memoised, so a chain of right
/// recursion recurses one level per row; this bounds a row with many waiters).
const MAX_COMPLETION_DEPTH: u32 = 64;

/// Most items of a row [`Parser::completion_hash`] reads.
const MAX_COMPLETION_ITEMS: u32 = 64;

/// Tags of the forms a waiting item's hash takes in [`Parser::future_hash`]: the last
/// symbol, then a completion; a completion named by its origin row as a whole; the start
/// rule completing.
const LAST_TAG: u128 = 0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c834;
const WHOLE_TAG: u128 = 0x6a09_e667_f3bc_c908_b2fb_1366_ea95_7d3e;
const ACCEPT_TAG: u128 = 0xbb67_ae85_84ca_a73b_3c6e_f372_fe94_f82b;

const LINEAR_DEDUP: usize = 24;

impl Parser {
    /// A parser positioned at the start of the input (row 0 holds the predictions of the start rule).
    pub(crate) fn new(cfg: &Cfg) -> Parser {
        let mut p = Parser {
            nt_stamp: vec![0; cfg.nt_names.len()],
            term_stamp: vec![0; cfg.terminals.len()],
            dot_stamp: vec![0; cfg.dots.len()],
            kernel_stamp: vec![(0, 0); cfg.dots.len()],
            ..Default::default()
        };
        p.begin_row();
        p.predict(cfg, cfg.start, 0);
        p.close_row(cfg);
        p.rows[0].accepting = cfg.nullable[cfg.start as usize];
        p
    }

    /// Number of rows.
    #[inline]
    pub(crate) fn num_rows(&self) -> usize {
        self.rows.len()
    }

    /// Pops rows until `n` remain.
    #[inline]
    pub(crate) fn truncate(&mut self, n: usize) {
        if n < self.rows.len() {
            let r = self.rows[n];
            self.items.truncate(r.items_start as usize);
            self.row_terms.truncate(r.terms_start as usize);
            self.rows.truncate(n);
            self.futures.truncate(n);
            self.completions.truncate(n);
        }
    }

    /// A 128-bit hash of what row `r` does to the parse from here on, so that masks can be
    /// cached by it: over the items from earlier rows still waiting for a symbol (and
    /// whether the row accepts), each with the future hash of its origin row, combined in
    /// any order; memoised, computed bottom-up. The items a row predicts (origin the row
    /// itself) are a function of those (the closure is static, key-set states included), so
    /// they add nothing: a key set of 1,000 members predicts 1,000 items at each member's
    /// end, which the hash would read at every such position. A completed item is never read
    /// again: a later row completing a nonterminal reads the items of its origin row that
    /// wait for it, and a row's own predictions are a function of its other items. So two
    /// rows with equal future hashes (in two different parser stacks) accept the same
    /// continuations (the same language: what a mask depends on) and build rows with equal
    /// future hashes from equal completions.
    ///
    /// A row after `a b` read as one symbol and one after `a` `b` read as two differ only
    /// in completed items' origins (`atom ::= SYMBOL .` from the row before `b` or before
    /// `a`) when the repetition is left-recursive, as lowered: their future hashes are equal.
    ///
    /// An item waiting for the last symbol of its production stands for that symbol and
    /// then what completing its left-hand side at its origin does ([`Parser::completion_hash`]),
    /// not for the origin row as a whole. Where that completion is itself the last step of a
    /// single item of the origin row (right recursion: C's `unary ::= "*" ws unary` after
    /// `* * *`), it is that item's completion in turn (Leo's reduction), so the rows along
    /// such a chain hash alike however deep it is, as their continuations are alike.
    pub(crate) fn future_hash(&mut self, cfg: &Cfg, r: u32) -> u128 {
        while self.futures.len() <= r as usize {
            let i = self.futures.len();
            let row = self.rows[i];
            let mut h: u128 = hash_step(0, row.accepting as u64);
            for k in row.items_start..row.items_end {
                let it = self.items[k as usize];
                if it.origin as usize == i || cfg.dots[it.dot as usize].next == Sym::END {
                    continue;
                }
                // (A sum: the same items in another order give the same hash; a row holds
                // an item once.)
                let w = match Self::last_symbol(cfg, it) {
                    Some(next) => {
                        let c = self.completion_hash(cfg, it.origin, cfg.dots[it.dot as usize].lhs, 0);
                        hash_step(hash_step(hash_step(LAST_TAG, next.0 as u64), c as u64), (c >> 64) as u64)
                    }
                    None => self.item_step(0, it, self.futures[it.origin as usize]),
                };
                h = h.wrapping_add(w);
            }
            self.futures.push(h);
        }
        self.futures[r as usize]
    }

    /// The symbol `it` waits for when it is the last of its production (and neither a key
    /// set nor inside one): after it, `it` completes its left-hand side.
    #[inline]
    fn last_symbol(cfg: &Cfg, it: Item) -> Option<Sym> {
        let next = cfg.dots[it.dot as usize].next;
        (it.aux == 0 && next.as_perm().is_none() && cfg.dots[it.dot as usize + 1].next == Sym::END).then_some(next)
    }

    /// A 128-bit hash of what completing nonterminal `a` at row `o` does to the parse: the
    /// sum over the items of row `o` waiting for `a` of what each does once advanced (for an
    /// item from an earlier row that `a` completes: its own completion, recursively; else
    /// the item with its origin's [`Parser::future_hash`]), plus a constant where the start
    /// rule completes. One waiter's completion is its hash unchanged, so a chain of right
    /// recursion hashes as its bottom. Rows before the last must have their future hashes.
    ///
    /// A member of a key set is also completed into the key set's items: there, the hash
    /// names `a` and the origin row's future hash as a whole. So does a row of more than
    /// [`MAX_COMPLETION_ITEMS`] items (a key set's predictions: not read at every member's
    /// end). Memoised per row (two symbols); the recursion stops at [`MAX_COMPLETION_DEPTH`]
    /// with the same whole-row form.
    fn completion_hash(&mut self, cfg: &Cfg, o: u32, a: u32, depth: u32) -> u128 {
        let row = self.rows[o as usize];
        if cfg.perm_member[a as usize].is_some() || depth >= MAX_COMPLETION_DEPTH || row.items_end - row.items_start > MAX_COMPLETION_ITEMS {
            let f = self.futures[o as usize];
            return hash_step(hash_step(hash_step(WHOLE_TAG, a as u64), f as u64), (f >> 64) as u64);
        }
        if let Some(memo) = self.completions.get(o as usize) {
            for &(sym, h) in memo {
                if sym == a {
                    return h;
                }
            }
        }
        let want = Sym::n(a);
        let mut h: u128 = if o == 0 && a == cfg.start { ACCEPT_TAG } else { 0 };
        for k in row.items_start..row.items_end {
            let it = self.items[k as usize];
            if cfg.dots[it.dot as usize].next != want {
                continue;
            }
            let c = if it.origin != o && Self::last_symbol(cfg, it).is_some() {
                self.completion_hash(cfg, it.origin, cfg.dots[it.dot as usize].lhs, depth + 1)
            } else {
                self.item_step(0, it, self.futures[it.origin as usize])
            };
            h = h.wrapping_add(c);
        }
        if self.completions.len() <= o as usize {
            self.completions.resize(o as usize + 1, [(u32::MAX, 0); 2]);
        }
        let memo = &mut self.completions[o as usize];
        if let Some(slot) = memo.iter_mut().find(|(sym, _)| *sym == u32::MAX) {
            *slot = (a, h);
        }
        h
    }

    /// `h` extended with item `it` (its dot, key-set state) and `o`, a hash of its origin row.
    #[inline]
    fn item_step(&self, mut h: u128, it: Item, o: u128) -> u128 {
        h = hash_step(h, (it.dot as u64) << 1 | 1);
        if it.aux != 0 {
            h = hash_step(h, self.perm_states.hash(it.aux));
        }
        h = hash_step(h, o as u64);
        hash_step(h, (o >> 64) as u64)
    }

    /// Terminals expected at the start of row `r`.
    #[inline]
    pub(crate) fn expected(&self, r: u32) -> &[u32] {
        let row = &self.rows[r as usize];
        &self.row_terms[row.terms_start as usize..row.terms_end as usize]
    }

    /// Whether row `r` completes the start rule from the beginning.
    #[inline]
    pub(crate) fn accepting(&self, r: u32) -> bool {
        self.rows[r as usize].accepting
    }

    /// Heap bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.items.capacity() * 12 + self.rows.capacity() * 20 + self.row_terms.capacity() * 4 + self.perm_states.memory_bytes()
    }

    fn begin_row(&mut self) {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.nt_stamp.iter_mut().for_each(|s| *s = 0);
            self.term_stamp.iter_mut().for_each(|s| *s = 0);
            self.dot_stamp.iter_mut().for_each(|s| *s = 0);
            self.kernel_stamp.iter_mut().for_each(|s| *s = (0, 0));
            self.stamp = 1;
        }
        self.extra.clear();
        if !self.seen.is_empty() {
            self.seen.clear();
        }
        let start = self.items.len() as u32;
        let ts = self.row_terms.len() as u32;
        self.rows.push(Row { items_start: start, items_end: start, terms_start: ts, terms_end: ts, accepting: false });
    }

    /// Adds an item whose origin is an earlier row, unless present.
    ///
    /// The first such item at each dot is recorded by dot (a stamp and its origin): most
    /// items are the only one at their dot (a completion advances each item of one row once),
    /// so they need no key in the set below. A row of 1,000 items (a key set's members,
    /// advanced past a key piece) hashed each into that set: half the row's cost.
    #[inline]
    fn add(&mut self, it: Item) {
        if it.aux == 0 {
            let k = &mut self.kernel_stamp[it.dot as usize];
            if k.0 != self.stamp {
                *k = (self.stamp, it.origin);
                self.items.push(it);
                return;
            }
            if k.1 == it.origin {
                return;
            }
        }
        let key = ((it.aux as u128) << 64) | ((it.dot as u128) << 32) | it.origin as u128;
        if self.extra.len() < LINEAR_DEDUP {
            if self.extra.contains(&key) {
                return;
            }
        } else {
            if self.seen.is_empty() {
                self.seen.extend(self.extra.iter().copied());
            }
            if !self.seen.insert(key) {
                return;
            }
        }
        self.extra.push(key);
        self.items.push(it);
    }

    #[inline]
    fn add_term(&mut self, t: u32) {
        if self.term_stamp[t as usize] != self.stamp {
            self.term_stamp[t as usize] = self.stamp;
            self.row_terms.push(t);
        }
    }

    /// Adds the static prediction closure of `x` (items with origin `cur`).
    fn predict(&mut self, cfg: &Cfg, x: u32, cur: u32) {
        let stamp = self.stamp;
        for &y in &cfg.pred_nts[x as usize] {
            self.nt_stamp[y as usize] = stamp;
        }
        for &d in &cfg.pred_dots[x as usize] {
            if self.dot_stamp[d as usize] != stamp {
                self.dot_stamp[d as usize] = stamp;
                self.items.push(Item { dot: d, origin: cur, aux: 0 });
            }
        }
        for &t in &cfg.pred_terms[x as usize] {
            self.add_term(t);
        }
    }

    /// Row `r`'s items, expected terminals and whether it accepts (to copy it with
    /// [`Parser::push_row_copy`]).
    #[inline]
    pub(crate) fn row_parts(&self, r: u32) -> (&[Item], &[u32], bool) {
        let row = &self.rows[r as usize];
        (&self.items[row.items_start as usize..row.items_end as usize], &self.row_terms[row.terms_start as usize..row.terms_end as usize], row.accepting)
    }

    /// Pushes a row holding exactly `items` and `terms`: the parts ([`Parser::row_parts`]) of
    /// a row that [`Parser::push_row`] built at this same index from the same completions of
    /// rows with the same contents, so it equals what `push_row` would build now. Returns its index.
    #[inline]
    pub(crate) fn push_row_copy(&mut self, items: &[Item], terms: &[u32], accepting: bool) -> u32 {
        let start = self.items.len() as u32;
        let ts = self.row_terms.len() as u32;
        self.items.extend_from_slice(items);
        self.row_terms.extend_from_slice(terms);
        self.rows.push(Row { items_start: start, items_end: self.items.len() as u32, terms_start: ts, terms_end: self.row_terms.len() as u32, accepting });
        (self.rows.len() - 1) as u32
    }

    /// Pushes the row reached when each `(origin_row, terminal)` in `completed` has just been matched.
    /// Returns the new row's index.
    pub(crate) fn push_row(&mut self, cfg: &Cfg, completed: &[(u32, u32)]) -> u32 {
        self.begin_row();
        for &(r, t) in completed {
            let row = self.rows[r as usize];
            let want = Sym::t(t);
            for i in row.items_start..row.items_end {
                let it = self.items[i as usize];
                if cfg.dots[it.dot as usize].next == want {
                    self.add(Item { dot: it.dot + 1, origin: it.origin, aux: 0 });
                }
            }
        }
        self.close_row(cfg);
        (self.rows.len() - 1) as u32
    }

    /// Completion and prediction to a fixpoint for the last row. Only items whose origin is an
    /// earlier row need processing: predicted items come with their closure precomputed.
    fn close_row(&mut self, cfg: &Cfg) {
        let cur = (self.rows.len() - 1) as u32;
        let mut i = self.rows[cur as usize].items_start as usize;
        let mut accepting = false;
        while i < self.items.len() {
            let it = self.items[i];
            i += 1;
            if it.origin == cur {
                continue;
            }
            let d = cfg.dots[it.dot as usize];
            if d.next == Sym::END {
                if d.lhs == cfg.start && it.origin == 0 {
                    accepting = true;
                }
                self.complete(cfg, d.lhs, it.origin);
            } else if let Some(t) = d.next.as_terminal() {
                self.add_term(t);
            } else if let Some(k) = d.next.as_perm() {
                let p = &cfg.perms[k as usize];
                let s = self.perm_states.get(it.aux).clone();
                if p.can_finish(&s) {
                    self.complete(cfg, d.lhs, it.origin);
                }
                p.for_each_allowed(&s, |m| {
                    let x = p.member_nt(&s, m);
                    if self.nt_stamp[x as usize] != self.stamp {
                        self.predict(cfg, x, cur);
                    }
                });
            } else {
                let x = d.next.0;
                if self.nt_stamp[x as usize] != self.stamp {
                    self.predict(cfg, x, cur);
                }
                if cfg.nullable[x as usize] {
                    self.add(Item { dot: it.dot + 1, origin: it.origin, aux: 0 });
                }
            }
        }
        let row = self.rows.last_mut().unwrap();
        row.items_end = self.items.len() as u32;
        row.terms_end = self.row_terms.len() as u32;
        row.accepting = accepting;
    }

    /// Advances the items of row `origin` waiting for nonterminal `x`, which just completed.
    fn complete(&mut self, cfg: &Cfg, x: u32, origin: u32) {
        let o = self.rows[origin as usize];
        let want = Sym::n(x);
        let member = cfg.perm_member[x as usize];
        for j in o.items_start..o.items_end {
            let it2 = self.items[j as usize];
            let next = cfg.dots[it2.dot as usize].next;
            if next == want {
                self.add(Item { dot: it2.dot + 1, origin: it2.origin, aux: 0 });
            } else if let (Some(k), Some(m)) = (next.as_perm(), member) {
                if m.perm != k {
                    continue;
                }
                let p = &cfg.perms[k as usize];
                let s = self.perm_states.get(it2.aux);
                if m.next != (s.count != 0) {
                    continue;
                }
                let mi = (m.member as usize != p.len()).then_some(m.member as usize);
                if let Some(s2) = p.step(s, mi) {
                    let aux = self.perm_states.intern(s2);
                    self.add(Item { dot: it2.dot, origin: it2.origin, aux });
                }
            }
        }
    }
}
