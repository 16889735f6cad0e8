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
    /// Structural hashes of the first `hashes.len()` rows (see [`Parser::row_hash`]).
    hashes: Vec<u128>,
    /// Future hashes of the first `futures.len()` rows (see [`Parser::future_hash`]).
    futures: Vec<u128>,
}

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
            self.hashes.truncate(n);
            self.futures.truncate(n);
        }
    }

    /// A 128-bit hash of row `r`'s structure: its items' dots and, recursively, the structure of
    /// their origin rows (not their positions). Equal hashes mean the parser continues the same
    /// way from both rows, so masks can be cached by it. Memoised; computed bottom-up without
    /// recursion.
    ///
    /// Only the items from earlier rows are hashed: the items a row predicts (origin the row
    /// itself) are a function of those (the closure is static, key-set states included), so
    /// they add nothing to the key. A key set of 1,000 members predicts 1,000 items at each
    /// member's end, which the hash read at every such position.
    pub(crate) fn row_hash(&mut self, r: u32) -> u128 {
        while self.hashes.len() <= r as usize {
            let i = self.hashes.len();
            let row = self.rows[i];
            let mut h: u128 = hash_step(0, row.accepting as u64);
            for k in row.items_start..row.items_end {
                let it = self.items[k as usize];
                if it.origin as usize == i {
                    continue;
                }
                h = self.item_step(h, it, self.hashes[it.origin as usize]);
            }
            self.hashes.push(h);
        }
        self.hashes[r as usize]
    }

    /// A 128-bit hash of what row `r` does to the parse from here on: like
    /// [`Parser::row_hash`], but over the items still waiting for a symbol only (and
    /// whether the row accepts), combined in any order. A completed item is never read
    /// again: a later row completing a nonterminal reads the items of its origin row that
    /// wait for it, and a row's own predictions are a function of its other items. So two
    /// rows with equal future hashes (in two different parser stacks) accept the same
    /// continuations and build rows with equal future hashes from equal completions.
    ///
    /// A row after `a b` read as one symbol and one after `a` `b` read as two differ only
    /// in completed items' origins (`atom ::= SYMBOL .` from the row before `b` or before
    /// `a`) when the repetition is left-recursive, as lowered: their future hashes are equal.
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
                h = h.wrapping_add(self.item_step(0, it, self.futures[it.origin as usize]));
            }
            self.futures.push(h);
        }
        self.futures[r as usize]
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
