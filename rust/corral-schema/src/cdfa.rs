//! Deterministic automata over Unicode code points, used where the schema compiler needs
//! Boolean operations on regular languages (pattern ∧ length, key sets minus declared names,
//! numeric bound ∧ integer ∧ multipleOf, negation) before handing a plain [`Rx`] to the core.
//!
//! Code points are `u32` scalar values; transitions are sorted, disjoint inclusive ranges.
//! A missing transition goes to an implicit dead state.

use corral_core::predecessor_lists;
use corral_core::Rx;
use rustc_hash::FxHashMap;

/// Largest Unicode scalar value.
pub const MAXC: u32 = 0x10FFFF;

/// The automaton (or an intermediate) grew past its size bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooBig;

/// A DFA over code points.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CDfa {
    /// Per state: sorted disjoint `(lo, hi, target)`.
    pub trans: Vec<Vec<(u32, u32, u32)>>,
    /// Accepting states.
    pub accept: Vec<bool>,
    /// Start state.
    pub start: u32,
}

/// A Thompson automaton under construction. Each state's epsilon edges and character edges
/// are chains through two shared pools, in the order they were added (a list per state was
/// half of the allocations of a bounded number's compile).
#[derive(Default)]
struct Nfa {
    /// Per state: its first and last epsilon edge in `eps` ([`NIL`]: none).
    eps_ends: Vec<(u32, u32)>,
    /// Epsilon edges: target and the next edge of the same state.
    eps: Vec<(u32, u32)>,
    /// Per state: its first and last character edge in `edges`.
    edge_ends: Vec<(u32, u32)>,
    /// Character edges: `(lo, hi, target)` and the next edge of the same state.
    edges: Vec<((u32, u32, u32), u32)>,
    limit: usize,
}

/// No edge.
const NIL: u32 = u32::MAX;

/// Appends `item` to the chain of edges whose ends are `ends`, in `pool`.
fn chain_push<T>(ends: &mut (u32, u32), pool: &mut Vec<(T, u32)>, item: T) {
    let k = pool.len() as u32;
    pool.push((item, NIL));
    if ends.0 == NIL {
        ends.0 = k;
    } else {
        pool[ends.1 as usize].1 = k;
    }
    ends.1 = k;
}

/// The items of the chain that starts at `first`, in order.
fn chain<T: Copy>(pool: &[(T, u32)], first: u32) -> impl Iterator<Item = T> + '_ {
    let mut k = first;
    std::iter::from_fn(move || {
        let (item, next) = *pool.get(k as usize)?;
        k = next;
        Some(item)
    })
}

impl Nfa {
    fn add(&mut self) -> Result<u32, TooBig> {
        if self.eps_ends.len() >= self.limit {
            return Err(TooBig);
        }
        self.eps_ends.push((NIL, NIL));
        self.edge_ends.push((NIL, NIL));
        Ok((self.eps_ends.len() - 1) as u32)
    }

    /// Adds an epsilon edge `s → t`.
    fn eps_edge(&mut self, s: u32, t: u32) {
        chain_push(&mut self.eps_ends[s as usize], &mut self.eps, t);
    }

    /// Adds the edge `s → t` on the characters `lo..=hi`.
    fn char_edge(&mut self, s: u32, lo: u32, hi: u32, t: u32) {
        chain_push(&mut self.edge_ends[s as usize], &mut self.edges, (lo, hi, t));
    }

    /// The epsilon targets of `s`.
    fn eps_of(&self, s: u32) -> impl Iterator<Item = u32> + '_ {
        chain(&self.eps, self.eps_ends[s as usize].0)
    }

    /// The character edges of `s`.
    fn edges_of(&self, s: u32) -> impl Iterator<Item = (u32, u32, u32)> + '_ {
        chain(&self.edges, self.edge_ends[s as usize].0)
    }

    fn build(&mut self, rx: &Rx, from: u32) -> Result<u32, TooBig> {
        Ok(match rx {
            Rx::Empty => from,
            Rx::Nothing => self.add()?,
            Rx::Literal(bytes) => {
                let mut cur = from;
                for c in String::from_utf8_lossy(bytes).chars() {
                    let n = self.add()?;
                    self.char_edge(cur, c as u32, c as u32, n);
                    cur = n;
                }
                cur
            }
            Rx::Bytes(r) => {
                let n = self.add()?;
                for &(a, b) in r {
                    self.char_edge(from, a as u32, b as u32, n);
                }
                n
            }
            Rx::Chars(r) => {
                let n = self.add()?;
                for &(a, b) in r {
                    self.char_edge(from, a, b, n);
                }
                n
            }
            // Byte automata are JSON-encoded output ([`crate::encode`]), never a code-point
            // language given to this automaton; refuse rather than misread bytes as characters.
            Rx::Automaton(_) => return Err(TooBig),
            Rx::Concat(xs) => {
                let mut cur = from;
                for x in xs {
                    cur = self.build(x, cur)?;
                }
                cur
            }
            Rx::Alt(xs) => {
                let end = self.add()?;
                for x in xs {
                    let s = self.add()?;
                    self.eps_edge(from, s);
                    let e = self.build(x, s)?;
                    self.eps_edge(e, end);
                }
                end
            }
            Rx::Repeat { inner, min, max } => {
                let mut cur = from;
                for _ in 0..*min {
                    let s = self.add()?;
                    self.eps_edge(cur, s);
                    cur = self.build(inner, s)?;
                }
                match max {
                    None => {
                        let s = self.add()?;
                        self.eps_edge(cur, s);
                        let e = self.build(inner, s)?;
                        self.eps_edge(e, s);
                        let end = self.add()?;
                        self.eps_edge(s, end);
                        end
                    }
                    Some(mx) => {
                        let end = self.add()?;
                        for _ in *min..*mx {
                            self.eps_edge(cur, end);
                            let s = self.add()?;
                            self.eps_edge(cur, s);
                            cur = self.build(inner, s)?;
                        }
                        self.eps_edge(cur, end);
                        end
                    }
                }
            }
        })
    }

    /// Extends `set` by every state reachable through epsilon edges, then keeps the states
    /// that matter to a subset (with edges, or accepting ends), sorted. `sc` is scratch space
    /// reused across calls (a hash set and a stack per call were a third of a bounded number's
    /// subset construction).
    fn closure(&self, set: &mut Vec<u32>, sc: &mut Closure) {
        if sc.mark.len() < self.eps_ends.len() {
            sc.mark.resize(self.eps_ends.len(), 0);
        }
        sc.stamp = sc.stamp.wrapping_add(1);
        if sc.stamp == 0 {
            sc.mark.iter_mut().for_each(|m| *m = 0);
            sc.stamp = 1;
        }
        let stamp = sc.stamp;
        sc.stack.clear();
        for &s in set.iter() {
            if sc.mark[s as usize] != stamp {
                sc.mark[s as usize] = stamp;
                sc.stack.push(s);
            }
        }
        set.clear();
        while let Some(s) = sc.stack.pop() {
            if self.edge_ends[s as usize].0 != NIL || self.eps_ends[s as usize].0 == NIL {
                set.push(s);
            }
            for t in self.eps_of(s) {
                if sc.mark[t as usize] != stamp {
                    sc.mark[t as usize] = stamp;
                    sc.stack.push(t);
                }
            }
        }
        set.sort_unstable();
    }
}

/// Scratch space for [`Nfa::closure`]: a visit stamp per NFA state and a stack.
#[derive(Default)]
struct Closure {
    mark: Vec<u32>,
    stamp: u32,
    stack: Vec<u32>,
}

/// Scratch space for [`sweep`], reused across calls.
struct Sweep<T> {
    pts: Vec<u32>,
    active: Vec<(u32, u32, T)>,
}

impl<T> Default for Sweep<T> {
    fn default() -> Self {
        Sweep { pts: Vec::new(), active: Vec::new() }
    }
}

/// Splits overlapping `(lo, hi, x)` items (sorted here by `lo`) into disjoint segments and
/// calls `each(lo, hi, covering)` for every segment some item covers, in order; stops at the
/// first error.
fn sweep<T: Copy, E>(items: &mut [(u32, u32, T)], sc: &mut Sweep<T>, mut each: impl FnMut(u32, u32, &[(u32, u32, T)]) -> Result<(), E>) -> Result<(), E> {
    let pts = &mut sc.pts;
    pts.clear();
    for &(a, b, _) in items.iter() {
        pts.push(a);
        if b < u32::MAX {
            pts.push(b + 1);
        }
    }
    pts.sort_unstable();
    pts.dedup();
    items.sort_unstable_by_key(|x| x.0);
    let active = &mut sc.active;
    active.clear();
    let mut j = 0;
    // (the last point only closes segments)
    for k in 0..pts.len().saturating_sub(1) {
        let (lo, hi) = (pts[k], pts[k + 1] - 1);
        while j < items.len() && items[j].0 <= lo {
            active.push(items[j]);
            j += 1;
        }
        active.retain(|x| x.1 >= lo);
        if !active.is_empty() {
            each(lo, hi, active)?;
        }
    }
    Ok(())
}

/// Splits overlapping `(lo, hi, x)` items into disjoint segments, each with the list of `x`.
fn segments<T: Copy + Ord>(items: &[(u32, u32, T)]) -> Vec<(u32, u32, Vec<T>)> {
    let mut sorted = items.to_vec();
    let mut out = Vec::new();
    let _ = sweep::<T, ()>(&mut sorted, &mut Sweep::default(), |lo, hi, active| {
        let mut ts: Vec<T> = active.iter().map(|x| x.2).collect();
        ts.sort_unstable();
        ts.dedup();
        out.push((lo, hi, ts));
        Ok(())
    });
    out
}

/// Joins neighbouring ranges of a sorted row that go to the same target, in place (a compile
/// calls this for every row it builds: a new list each time was a twentieth of a schema
/// compile's allocations).
fn merge_adjacent(v: &mut Vec<(u32, u32, u32)>) {
    let mut n = 0usize;
    for i in 0..v.len() {
        let (a, b, t) = v[i];
        if n > 0 && v[n - 1].2 == t && v[n - 1].1.checked_add(1) == Some(a) {
            v[n - 1].1 = b;
        } else {
            v[n] = (a, b, t);
            n += 1;
        }
    }
    v.truncate(n);
}

/// Rows of code-point transitions in one buffer: state `s`'s are
/// `edges[at[s] as usize..at[s + 1] as usize]` (no list per state: minimizing a bounded
/// number's automaton made two per state).
struct FlatRows {
    edges: Vec<(u32, u32, u32)>,
    at: Vec<u32>,
}

impl FlatRows {
    fn with_capacity(states: usize, edges: usize) -> FlatRows {
        let mut at = Vec::with_capacity(states + 1);
        at.push(0);
        FlatRows { edges: Vec::with_capacity(edges), at }
    }

    /// Ends the current row (its edges pushed since the last call).
    fn end_row(&mut self) {
        self.at.push(self.edges.len() as u32);
    }

    /// Pushes an edge onto the current row, merged into the previous one when it continues
    /// its range into the same target (as [`merge_adjacent`]).
    fn push_merged(&mut self, (a, b, t): (u32, u32, u32)) {
        let row_start = *self.at.last().unwrap_or(&0) as usize;
        if self.edges.len() > row_start {
            let last = self.edges.last_mut().expect("a row with an edge");
            if last.2 == t && last.1.checked_add(1) == Some(a) {
                last.1 = b;
                return;
            }
        }
        self.edges.push((a, b, t));
    }

    /// The rows of `lists`, as they are.
    #[cfg(test)]
    fn from_lists(lists: &[Vec<(u32, u32, u32)>]) -> FlatRows {
        let mut r = FlatRows::with_capacity(lists.len(), lists.iter().map(Vec::len).sum());
        for row in lists {
            r.edges.extend_from_slice(row);
            r.end_row();
        }
        r
    }

    fn len(&self) -> usize {
        self.at.len() - 1
    }

    fn row(&self, s: usize) -> &[(u32, u32, u32)] {
        &self.edges[self.at[s] as usize..self.at[s + 1] as usize]
    }
}

/// Moore refinement of states with `rows` (targets are state indices) and acceptance `acc`
/// into equivalence classes, numbered by first appearance (state 0's class is 0).
///
/// A round re-examines only the predecessors of states that changed class in the previous
/// one (any other state's signature is unchanged): a length-bounded string is a chain of
/// thousands of states that splits one class per round, and re-signing every state each round
/// made that quadratic. A class keeps its id for the states whose signature did not change,
/// so the untouched members stay correct.
fn refine(rows: &FlatRows, acc: &[bool]) -> Vec<u32> {
    let m = rows.len();
    let mut class: Vec<u32> = acc.iter().map(|&a| a as u32).collect();
    let mut members: Vec<Vec<u32>> = vec![Vec::new(), Vec::new()];
    for s in 0..m {
        members[class[s] as usize].push(s as u32);
    }
    let (pred_start, preds) = predecessor_lists(m, |s| rows.row(s).iter().map(|e| e.2));
    // A state's signature: its ranges with target classes, adjacent ranges into one class merged.
    let sign = |class: &[u32], s: usize, out: &mut Vec<u32>| {
        let base = out.len();
        for &(a, b, t) in rows.row(s) {
            let c = class[t as usize];
            let n = out.len();
            if n > base && out[n - 1] == c && out[n - 2].checked_add(1) == Some(a) {
                out[n - 2] = b;
            } else {
                out.extend_from_slice(&[a, b, c]);
            }
        }
    };
    let mut cand: Vec<u32> = (0..m as u32).collect();
    let mut stamp = vec![0u32; m];
    let mut queued = vec![0u32; m];
    let mut arena: Vec<u32> = Vec::new();
    let mut off: Vec<(usize, usize)> = Vec::new();
    let mut reference: Vec<u32> = Vec::new();
    let mut changes: Vec<(u32, u32)> = Vec::new();
    let mut round = 0u32;
    while !cand.is_empty() {
        round += 1;
        arena.clear();
        off.clear();
        for &s in &cand {
            stamp[s as usize] = round;
            let a = arena.len();
            sign(&class, s as usize, &mut arena);
            off.push((a, arena.len()));
        }
        let mut order: Vec<usize> = (0..cand.len()).collect();
        order.sort_unstable_by(|&x, &y| class[cand[x] as usize].cmp(&class[cand[y] as usize]).then_with(|| arena[off[x].0..off[x].1].cmp(&arena[off[y].0..off[y].1])));
        changes.clear();
        let mut i = 0;
        while i < order.len() {
            let c = class[cand[order[i]] as usize];
            let mut j = i;
            while j < order.len() && class[cand[order[j]] as usize] == c {
                j += 1;
            }
            // The signature the class's untouched members still have, if any is untouched.
            let untouched = corral_core::untouched_member(&mut members[c as usize], &class, c, &stamp, round);
            reference.clear();
            if let Some(q) = untouched {
                sign(&class, q as usize, &mut reference);
            }
            let sig = |k: usize| &arena[off[order[k]].0..off[order[k]].1];
            // With no untouched member, the largest group keeps the id: only the smaller ones
            // change class and wake their predecessors (moving the large part instead made a
            // chain of n states cost n candidates per round).
            let mut largest = (0, i);
            if untouched.is_none() {
                let mut g = i;
                while g < j {
                    let mut h = g + 1;
                    while h < j && sig(h) == sig(g) {
                        h += 1;
                    }
                    if h - g > largest.0 {
                        largest = (h - g, g);
                    }
                    g = h;
                }
            }
            let mut g = i;
            while g < j {
                let mut h = g + 1;
                while h < j && sig(h) == sig(g) {
                    h += 1;
                }
                let keeps = if untouched.is_some() { sig(g) == &reference[..] } else { g == largest.1 };
                if !keeps {
                    let id = members.len() as u32;
                    members.push(Vec::new());
                    for k in g..h {
                        changes.push((cand[order[k]], id));
                    }
                }
                g = h;
            }
            i = j;
        }
        for &(s, id) in &changes {
            class[s as usize] = id;
            members[id as usize].push(s);
        }
        cand.clear();
        for &(s, _) in &changes {
            for &p in &preds[pred_start[s as usize] as usize..pred_start[s as usize + 1] as usize] {
                if queued[p as usize] != round {
                    queued[p as usize] = round;
                    cand.push(p);
                }
            }
        }
    }
    // Number classes by first appearance.
    let mut id = vec![u32::MAX; members.len()];
    let mut next = 0u32;
    for c in class.iter_mut() {
        if id[*c as usize] == u32::MAX {
            id[*c as usize] = next;
            next += 1;
        }
        *c = id[*c as usize];
    }
    class
}

impl CDfa {
    /// Compiles a code-point regular expression (literals are UTF-8 text).
    pub fn from_rx(rx: &Rx, limit: usize) -> Result<CDfa, TooBig> {
        Ok(CDfa::from_rx_unminimized(rx, limit)?.minimize())
    }

    /// [`CDfa::from_rx`] without the minimization: for an operand of [`CDfa::product`], which
    /// minimizes its result anyway.
    pub fn from_rx_unminimized(rx: &Rx, limit: usize) -> Result<CDfa, TooBig> {
        let mut nfa = Nfa { limit: limit * 20 + 1000, ..Default::default() };
        let start = nfa.add()?;
        let accept = nfa.build(rx, start)?;
        let mut sc = Closure::default();
        let mut init = vec![start];
        nfa.closure(&mut init, &mut sc);
        // The subsets back to back (`set_ends[i]`: where subset `i` ends), found by content
        // through a table of their ids: no list per subset, twice.
        let hash = |s: &[u32]| {
            use std::hash::BuildHasher;
            rustc_hash::FxBuildHasher.hash_one(s)
        };
        let mut set_items: Vec<u32> = init;
        let mut set_ends: Vec<usize> = vec![set_items.len()];
        let mut ids: hashbrown::HashTable<u32> = hashbrown::HashTable::new();
        ids.insert_unique(hash(&set_items), 0, |_| unreachable!("no other entry yet"));
        let set = |ends: &[usize], i: usize| -> (usize, usize) { (if i == 0 { 0 } else { ends[i - 1] }, ends[i]) };
        let mut trans = Vec::new();
        let mut acc = Vec::new();
        let mut i = 0;
        // Scratch reused across states (what `segments` allocates per call): the subset's
        // edges, the sweep's points and live edges, a target set.
        let mut items: Vec<(u32, u32, u32)> = Vec::new();
        let mut sw: Sweep<u32> = Sweep::default();
        let mut t: Vec<u32> = Vec::new();
        while i < set_ends.len() {
            let (a, b) = set(&set_ends, i);
            acc.push(set_items[a..b].binary_search(&accept).is_ok());
            items.clear();
            for &s in &set_items[a..b] {
                items.extend(nfa.edges_of(s));
            }
            let mut row = Vec::new();
            // Each segment: the closure of the targets of the edges covering it.
            sweep(&mut items, &mut sw, |lo, hi, active| {
                t.clear();
                t.extend(active.iter().map(|x| x.2));
                nfa.closure(&mut t, &mut sc);
                let h = hash(&t);
                let found = ids.find(h, |&id| {
                    let (a, b) = set(&set_ends, id as usize);
                    set_items[a..b] == t[..]
                });
                let id = match found {
                    Some(&id) => id,
                    None => {
                        if set_ends.len() >= limit {
                            return Err(TooBig);
                        }
                        let id = set_ends.len() as u32;
                        set_items.extend_from_slice(&t);
                        set_ends.push(set_items.len());
                        ids.insert_unique(h, id, |&id| {
                            let (a, b) = set(&set_ends, id as usize);
                            hash(&set_items[a..b])
                        });
                        id
                    }
                };
                row.push((lo, hi, id));
                Ok(())
            })?;
            merge_adjacent(&mut row);
            trans.push(row);
            i += 1;
        }
        Ok(CDfa { trans, accept: acc, start: 0 })
    }

    /// Concatenation `self · o` (via an NFA-free construction: subset of (left state, right states)).
    pub fn concat(&self, o: &CDfa) -> CDfa {
        // Simple approach: states are (Option<left>, sorted set of right states).
        type Key = (Option<u32>, Vec<u32>);
        let close = |l: Option<u32>, mut r: Vec<u32>| -> Key {
            if let Some(l) = l {
                if self.accept[l as usize] {
                    r.push(o.start);
                }
            }
            r.sort_unstable();
            r.dedup();
            (l, r)
        };
        let start = close(Some(self.start), vec![]);
        let mut map: FxHashMap<Key, u32> = FxHashMap::default();
        let mut keys = vec![start.clone()];
        map.insert(start, 0);
        let mut trans = Vec::new();
        let mut acc = Vec::new();
        let mut i = 0;
        while i < keys.len() {
            let (l, r) = keys[i].clone();
            acc.push(r.iter().any(|&q| o.accept[q as usize]));
            let mut items: Vec<(u32, u32, (u32, u32))> = Vec::new();
            if let Some(l) = l {
                for &(a, b, t) in &self.trans[l as usize] {
                    items.push((a, b, (0, t)));
                }
            }
            for &q in &r {
                for &(a, b, t) in &o.trans[q as usize] {
                    items.push((a, b, (1, t)));
                }
            }
            let mut row = Vec::new();
            for (a, b, ts) in segments(&items) {
                let nl = ts.iter().find(|x| x.0 == 0).map(|x| x.1);
                let nr: Vec<u32> = ts.iter().filter(|x| x.0 == 1).map(|x| x.1).collect();
                let k = close(nl, nr);
                let id = match map.get(&k) {
                    Some(&id) => id,
                    None => {
                        let id = keys.len() as u32;
                        map.insert(k.clone(), id);
                        keys.push(k);
                        id
                    }
                };
                row.push((a, b, id));
            }
            merge_adjacent(&mut row);
            trans.push(row);
            i += 1;
        }
        CDfa { trans, accept: acc, start: 0 }.minimize()
    }

    /// Every string except the given ones (the keys an object may have besides its declared
    /// properties), built directly as a trie of the strings whose other edges lead to an
    /// accepting sink, minimized as it is built: what `any.minus(alt(strings))` computes, without
    /// determinizing the alternation, completing and complementing it.
    pub fn all_except(strings: &[&str]) -> CDfa {
        // Trie nodes in flat lists (no list per node: this runs once per object of a schema,
        // and per-node lists were a tenth of a compile's allocations): each node's first
        // child, next sibling, character, and whether a string ends there.
        let mut first: Vec<u32> = vec![NIL];
        let mut sibling: Vec<u32> = vec![NIL];
        let mut chr: Vec<u32> = vec![0];
        let mut ends: Vec<bool> = vec![false];
        for s in strings {
            let mut v = 0usize;
            for c in s.chars() {
                let c = c as u32;
                let mut k = first[v];
                while k != NIL && chr[k as usize] != c {
                    k = sibling[k as usize];
                }
                if k == NIL {
                    k = first.len() as u32;
                    first.push(NIL);
                    sibling.push(first[v]);
                    chr.push(c);
                    ends.push(false);
                    first[v] = k;
                }
                v = k as usize;
            }
            ends[v] = true;
        }
        // Minimized as it is built: the trie is acyclic below the sink and a child's id is
        // larger than its parent's, so from the last node back every child is already mapped to
        // its class, and a node's class is its (acceptance, row over classes) — bottom-up
        // hash-consing, linear, where the general refinement took a tenth of a large schema's
        // compile. Class 0 is the sink (every other string: accepting, every character to
        // itself); a node with the same signature (the root, when no name is given) is it.
        let sink_row = vec![(0, 0xD7FF, 0), (0xE000, MAXC, 0)];
        let hash = |acc: bool, row: &[(u32, u32, u32)]| {
            use std::hash::BuildHasher;
            rustc_hash::FxBuildHasher.hash_one((acc, row))
        };
        let mut trans: Vec<Vec<(u32, u32, u32)>> = vec![sink_row];
        let mut accept = vec![true];
        // Class ids by their (acceptance, row), which `trans` and `accept` hold.
        let mut classes: hashbrown::HashTable<u32> = hashbrown::HashTable::new();
        classes.insert_unique(hash(true, &trans[0]), 0, |&c| hash(accept[c as usize], &trans[c as usize]));
        let gap = |row: &mut Vec<(u32, u32, u32)>, lo: u32, hi: u32| {
            // [lo, hi] minus the surrogates, to the sink
            if lo < 0xD800 {
                row.push((lo, hi.min(0xD7FF), 0));
            }
            if hi > 0xDFFF {
                row.push((lo.max(0xE000), hi, 0));
            }
        };
        let mut class = vec![0u32; first.len()];
        // (children as (character, node); the row being built)
        let mut ks: Vec<(u32, u32)> = Vec::new();
        let mut row: Vec<(u32, u32, u32)> = Vec::new();
        for v in (0..first.len()).rev() {
            ks.clear();
            let mut k = first[v];
            while k != NIL {
                ks.push((chr[k as usize], k));
                k = sibling[k as usize];
            }
            ks.sort_unstable();
            row.clear();
            let mut next = 0u32;
            for &(c, t) in &ks {
                if c > next {
                    gap(&mut row, next, c - 1);
                }
                row.push((c, c, class[t as usize]));
                next = c + 1;
            }
            if next <= MAXC {
                gap(&mut row, next, MAXC);
            }
            merge_adjacent(&mut row);
            let acc = !ends[v];
            let h = hash(acc, &row);
            class[v] = match classes.find(h, |&c| accept[c as usize] == acc && trans[c as usize] == row) {
                Some(&c) => c,
                None => {
                    let c = trans.len() as u32;
                    trans.push(row.clone());
                    accept.push(acc);
                    classes.insert_unique(h, c, |&c| hash(accept[c as usize], &trans[c as usize]));
                    c
                }
            };
        }
        CDfa { trans, accept, start: class[0] }
    }

    /// The automaton accepting nothing.
    pub fn empty() -> CDfa {
        CDfa { trans: vec![vec![]], accept: vec![false], start: 0 }
    }

    /// Number of states.
    pub fn len(&self) -> usize {
        self.trans.len()
    }

    /// Runs the automaton on a string.
    pub fn accepts(&self, s: &str) -> bool {
        let mut st = self.start;
        for c in s.chars() {
            match self.next(st, c as u32) {
                Some(t) => st = t,
                None => return false,
            }
        }
        self.accept[st as usize]
    }

    /// The successor on code point `c`.
    pub fn next(&self, s: u32, c: u32) -> Option<u32> {
        let row = &self.trans[s as usize];
        let i = row.partition_point(|x| x.1 < c);
        row.get(i).filter(|x| x.0 <= c).map(|x| x.2)
    }

    /// True when the language is empty.
    pub fn is_empty(&self) -> bool {
        let mut seen = vec![false; self.len()];
        let mut stack = vec![self.start];
        seen[self.start as usize] = true;
        while let Some(s) = stack.pop() {
            if self.accept[s as usize] {
                return false;
            }
            for &(_, _, t) in &self.trans[s as usize] {
                if !seen[t as usize] {
                    seen[t as usize] = true;
                    stack.push(t);
                }
            }
        }
        true
    }

    /// Intersection (`and = true`) or union of two automata.
    pub fn product(&self, o: &CDfa, and: bool, limit: usize) -> Result<CDfa, TooBig> {
        // (an intersection reads the automata as they are; a union needs them complete)
        let (a, b): (std::borrow::Cow<CDfa>, std::borrow::Cow<CDfa>) =
            if and { (std::borrow::Cow::Borrowed(self), std::borrow::Cow::Borrowed(o)) } else { (std::borrow::Cow::Owned(self.complete()), std::borrow::Cow::Owned(o.complete())) };
        let mut map: FxHashMap<(u32, u32), u32> = FxHashMap::default();
        let mut pairs = vec![(a.start, b.start)];
        map.insert((a.start, b.start), 0);
        let mut trans = Vec::new();
        let mut acc = Vec::new();
        let mut i = 0;
        while i < pairs.len() {
            let (p, q) = pairs[i];
            acc.push(if and { a.accept[p as usize] && b.accept[q as usize] } else { a.accept[p as usize] || b.accept[q as usize] });
            let mut row = Vec::new();
            let (ra, rb) = (&a.trans[p as usize], &b.trans[q as usize]);
            let (mut x, mut y) = (0, 0);
            while x < ra.len() && y < rb.len() {
                let (a0, a1, at) = ra[x];
                let (b0, b1, bt) = rb[y];
                let lo = a0.max(b0);
                let hi = a1.min(b1);
                if lo <= hi {
                    let key = (at, bt);
                    let id = match map.get(&key) {
                        Some(&id) => id,
                        None => {
                            if pairs.len() >= limit {
                                return Err(TooBig);
                            }
                            let id = pairs.len() as u32;
                            map.insert(key, id);
                            pairs.push(key);
                            id
                        }
                    };
                    row.push((lo, hi, id));
                }
                if a1 < b1 {
                    x += 1;
                } else {
                    y += 1;
                }
            }
            merge_adjacent(&mut row);
            trans.push(row);
            i += 1;
        }
        Ok(CDfa { trans, accept: acc, start: 0 }.minimize())
    }

    /// Adds a dead state so every scalar value has a transition.
    fn complete(&self) -> CDfa {
        let dead = self.len() as u32;
        let mut trans = Vec::with_capacity(self.len() + 1);
        for row in self.trans.iter().chain(std::iter::once(&Vec::new())) {
            let mut out = Vec::new();
            let mut next = 0u32;
            for &(a, b, t) in row {
                if a > next {
                    out.push((next, a - 1, dead));
                }
                out.push((a, b, t));
                next = b + 1;
            }
            if next <= MAXC {
                out.push((next, MAXC, dead));
            }
            // drop surrogates from the alphabet
            let mut clean = Vec::new();
            for (a, b, t) in out {
                if b < 0xD800 || a > 0xDFFF {
                    clean.push((a, b, t));
                } else {
                    if a < 0xD800 {
                        clean.push((a, 0xD7FF, t));
                    }
                    if b > 0xDFFF {
                        clean.push((0xE000, b, t));
                    }
                }
            }
            trans.push(clean);
        }
        let mut accept = self.accept.clone();
        accept.push(false);
        CDfa { trans, accept, start: self.start }
    }

    /// The complement over all strings of scalar values restricted to `alphabet`
    /// (`None` = every scalar value).
    pub fn complement(&self, alphabet: Option<&[(u32, u32)]>) -> CDfa {
        let mut c = self.complete();
        for a in c.accept.iter_mut() {
            *a = !*a;
        }
        if let Some(alpha) = alphabet {
            let star = CDfa::from_rx(&Rx::Repeat { inner: std::sync::Arc::new(Rx::Chars(alpha.to_vec())), min: 0, max: None }, 100).expect("small");
            return c.product(&star, true, usize::MAX).expect("no limit");
        }
        c.minimize()
    }

    /// `self ∖ other`.
    pub fn minus(&self, o: &CDfa, limit: usize) -> Result<CDfa, TooBig> {
        self.product(&o.complement(None), true, limit)
    }

    /// Removes states that cannot reach acceptance and merges equivalent states (Moore).
    pub fn minimize(&self) -> CDfa {
        let n = self.len();
        // live = reaches accept
        let (rev_at, rev) = predecessor_lists(n, |s| self.trans[s].iter().map(|e| e.2));
        let mut live = vec![false; n];
        let mut stack: Vec<u32> = (0..n as u32).filter(|&s| self.accept[s as usize]).collect();
        for &s in &stack {
            live[s as usize] = true;
        }
        while let Some(s) = stack.pop() {
            for &p in &rev[rev_at[s as usize] as usize..rev_at[s as usize + 1] as usize] {
                if !live[p as usize] {
                    live[p as usize] = true;
                    stack.push(p);
                }
            }
        }
        if !live[self.start as usize] {
            return CDfa::empty();
        }
        // reachable live states
        let mut idx = vec![u32::MAX; n];
        let mut order = vec![self.start];
        idx[self.start as usize] = 0;
        let mut i = 0;
        while i < order.len() {
            let s = order[i];
            for &(_, _, t) in &self.trans[s as usize] {
                if live[t as usize] && idx[t as usize] == u32::MAX {
                    idx[t as usize] = order.len() as u32;
                    order.push(t);
                }
            }
            i += 1;
        }
        let m = order.len();
        let mut rows = FlatRows::with_capacity(m, rev.len());
        for &s in &order {
            for &(a, b, t) in self.trans[s as usize].iter().filter(|x| live[x.2 as usize]) {
                rows.push_merged((a, b, idx[t as usize]));
            }
            rows.end_row();
        }
        let acc: Vec<bool> = order.iter().map(|&s| self.accept[s as usize]).collect();
        let class = refine(&rows, &acc);
        let nclass = class.iter().max().map_or(0, |&c| c as usize + 1);
        let mut trans = vec![Vec::new(); nclass];
        let mut accept = vec![false; nclass];
        let mut done = vec![false; nclass];
        for s in 0..m {
            let c = class[s] as usize;
            if done[c] {
                continue;
            }
            done[c] = true;
            accept[c] = acc[s];
            let mut r: Vec<(u32, u32, u32)> = rows.row(s).iter().map(|&(a, b, t)| (a, b, class[t as usize])).collect();
            merge_adjacent(&mut r);
            trans[c] = r;
        }
        CDfa { trans, accept, start: class[0] }
    }

    /// True when some state on a path from start to acceptance lies on a cycle.
    pub fn is_infinite(&self) -> bool {
        matches!(self.length_range(), Some((_, None)))
    }

    /// The shortest and longest accepted lengths in code points (`None` for the longest when
    /// it is unbounded); `None` when the language is empty.
    pub fn length_range(&self) -> Option<(u64, Option<u64>)> {
        let n = self.len();
        // live = reachable from the start and reaching acceptance
        let mut reach = vec![false; n];
        let mut stack = vec![self.start];
        reach[self.start as usize] = true;
        while let Some(s) = stack.pop() {
            for &(_, _, t) in &self.trans[s as usize] {
                if !reach[t as usize] {
                    reach[t as usize] = true;
                    stack.push(t);
                }
            }
        }
        let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (s, row) in self.trans.iter().enumerate() {
            for &(_, _, t) in row {
                preds[t as usize].push(s as u32);
            }
        }
        let mut live = vec![false; n];
        let mut stack: Vec<u32> = (0..n as u32).filter(|&s| self.accept[s as usize] && reach[s as usize]).collect();
        for &s in &stack {
            live[s as usize] = true;
        }
        while let Some(s) = stack.pop() {
            for &p in &preds[s as usize] {
                if reach[p as usize] && !live[p as usize] {
                    live[p as usize] = true;
                    stack.push(p);
                }
            }
        }
        if !live[self.start as usize] {
            return None;
        }
        // shortest: breadth-first distance to an accepting state
        let mut dist = vec![u64::MAX; n];
        let mut queue = std::collections::VecDeque::from([self.start]);
        dist[self.start as usize] = 0;
        let mut shortest = None;
        while let Some(s) = queue.pop_front() {
            if self.accept[s as usize] {
                shortest = Some(dist[s as usize]);
                break;
            }
            for &(_, _, t) in &self.trans[s as usize] {
                if live[t as usize] && dist[t as usize] == u64::MAX {
                    dist[t as usize] = dist[s as usize] + 1;
                    queue.push_back(t);
                }
            }
        }
        // longest: unbounded on a cycle through live states, else the longest path (post-order)
        let mut longest = vec![0u64; n];
        let mut color = vec![0u8; n];
        let mut stack: Vec<(u32, usize)> = vec![(self.start, 0)];
        color[self.start as usize] = 1;
        while let Some(&mut (s, ref mut i)) = stack.last_mut() {
            let row = &self.trans[s as usize];
            if *i < row.len() {
                let t = row[*i].2;
                *i += 1;
                if !live[t as usize] {
                    continue;
                }
                match color[t as usize] {
                    0 => {
                        color[t as usize] = 1;
                        stack.push((t, 0));
                    }
                    1 => return Some((shortest?, None)),
                    _ => {}
                }
            } else {
                color[s as usize] = 2;
                longest[s as usize] = row.iter().filter(|x| live[x.2 as usize]).map(|x| longest[x.2 as usize] + 1).max().unwrap_or(0);
                stack.pop();
            }
        }
        Some((shortest?, Some(longest[self.start as usize])))
    }

    /// All accepted strings when there are at most `max` of them (None if more or infinite).
    pub fn enumerate(&self, max: usize) -> Option<Vec<String>> {
        if self.is_infinite() {
            return None;
        }
        let mut out = Vec::new();
        let mut stack: Vec<(u32, String)> = vec![(self.start, String::new())];
        while let Some((s, pre)) = stack.pop() {
            if self.accept[s as usize] {
                out.push(pre.clone());
                if out.len() > max {
                    return None;
                }
            }
            for &(a, b, t) in &self.trans[s as usize] {
                if (b - a) as usize > max {
                    return None;
                }
                for c in a..=b {
                    if let Some(ch) = char::from_u32(c) {
                        let mut p = pre.clone();
                        p.push(ch);
                        stack.push((t, p));
                        if stack.len() > max * 4 + 64 {
                            return None;
                        }
                    }
                }
            }
        }
        Some(out)
    }

    /// A regular expression for the language by state elimination; `None` past `cap` nodes.
    pub fn to_rx(&self, cap: usize) -> Option<Rx> {
        let n = self.len();
        if self.is_empty() {
            return Some(Rx::Nothing);
        }
        let s_node = n as u32;
        let f_node = n as u32 + 1;
        let mut out: Vec<FxHashMap<u32, Rx>> = vec![FxHashMap::default(); n + 2];
        let mut inc: Vec<rustc_hash::FxHashSet<u32>> = vec![Default::default(); n + 2];
        for (s, row) in self.trans.iter().enumerate() {
            let mut by: FxHashMap<u32, Vec<(u32, u32)>> = FxHashMap::default();
            for &(a, b, t) in row {
                by.entry(t).or_default().push((a, b));
            }
            for (t, r) in by {
                out[s].insert(t, Rx::Chars(r));
                inc[t as usize].insert(s as u32);
            }
            if self.accept[s] {
                out[s].insert(f_node, Rx::Empty);
                inc[f_node as usize].insert(s as u32);
            }
        }
        out[s_node as usize].insert(self.start, Rx::Empty);
        inc[self.start as usize].insert(s_node);
        let mut alive: Vec<bool> = vec![true; n];
        let mut total: usize = out.iter().flat_map(|m| m.values()).map(rx_size).sum();
        for _ in 0..n {
            // pick the state with the least in*out
            let mut best = None;
            let mut best_cost = usize::MAX;
            for q in 0..n {
                if !alive[q] {
                    continue;
                }
                let i = inc[q].iter().filter(|&&p| p as usize != q).count();
                let o = out[q].keys().filter(|&&r| r as usize != q).count();
                let c = i * o;
                if c < best_cost {
                    best_cost = c;
                    best = Some(q);
                }
            }
            let q = best.unwrap();
            alive[q] = false;
            let self_loop = out[q].remove(&(q as u32));
            inc[q].remove(&(q as u32));
            let star = self_loop.map(|l| Rx::Repeat { inner: std::sync::Arc::new(l), min: 0, max: None });
            let succs: Vec<(u32, Rx)> = out[q].drain().collect();
            let preds: Vec<u32> = inc[q].drain().collect();
            for &p in &preds {
                let a = out[p as usize].remove(&(q as u32)).unwrap();
                total -= rx_size(&a).min(total);
                for (r, b) in &succs {
                    let mut parts = vec![a.clone()];
                    if let Some(s) = &star {
                        parts.push(s.clone());
                    }
                    parts.push(b.clone());
                    let new = Rx::concat(parts);
                    let merged = match out[p as usize].remove(r) {
                        Some(old) => {
                            total -= rx_size(&old).min(total);
                            alt2(old, new)
                        }
                        None => new,
                    };
                    total += rx_size(&merged);
                    out[p as usize].insert(*r, merged);
                    inc[*r as usize].insert(p);
                }
            }
            for (r, b) in &succs {
                inc[*r as usize].remove(&(q as u32));
                total -= rx_size(b).min(total);
            }
            if total > cap {
                return None;
            }
        }
        Some(out[s_node as usize].remove(&f_node).unwrap_or(Rx::Nothing))
    }
}

fn alt2(a: Rx, b: Rx) -> Rx {
    if a == b {
        return a;
    }
    if let (Rx::Chars(x), Rx::Chars(y)) = (&a, &b) {
        let mut r = x.clone();
        r.extend_from_slice(y);
        return Rx::Chars(corral_core::normalize_ranges(&r));
    }
    Rx::alt(vec![a, b])
}

/// Rough size of an expression (node count).
pub fn rx_size(rx: &Rx) -> usize {
    match rx {
        Rx::Empty | Rx::Nothing | Rx::Chars(_) | Rx::Bytes(_) => 1,
        Rx::Literal(b) => b.len().max(1),
        Rx::Concat(xs) | Rx::Alt(xs) => 1 + xs.iter().map(rx_size).sum::<usize>(),
        Rx::Repeat { inner, min, max } => 1 + rx_size(inner) * (max.unwrap_or(*min).max(*min) as usize).max(1),
        Rx::Automaton(a) => a.size(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> Rx {
        Rx::Literal(s.as_bytes().to_vec())
    }

    #[test]
    fn length_range_of_languages() {
        let chars = |lo: char, hi: char| Rx::Chars(vec![(lo as u32, hi as u32)]);
        let rep = |x: Rx, min, max| Rx::Repeat { inner: std::sync::Arc::new(x), min, max };
        let range = |rx: &Rx| CDfa::from_rx(rx, 1000).unwrap().length_range();
        assert_eq!(range(&rep(chars('a', 'z'), 2, Some(5))), Some((2, Some(5))));
        assert_eq!(range(&Rx::alt(vec![lit("abc"), lit("de")])), Some((2, Some(3))));
        assert_eq!(range(&Rx::concat(vec![lit("a"), rep(lit("b"), 0, None)])), Some((1, None)));
        assert_eq!(range(&Rx::Empty), Some((0, Some(0))));
        assert_eq!(range(&Rx::Nothing), None);
        // multi-byte characters count once; a dead branch off a cycle does not make it longer
        assert_eq!(range(&Rx::concat(vec![lit("é"), rep(chars('😀', '😀'), 1, Some(2))])), Some((2, Some(3))));
        let mut d = CDfa::from_rx(&lit("ab"), 100).unwrap();
        let loop_state = d.trans.len() as u32;
        d.trans.push(vec![(b'x' as u32, b'x' as u32, loop_state)]);
        d.accept.push(false);
        d.trans[d.start as usize].push((b'z' as u32, b'z' as u32, loop_state));
        assert_eq!(d.length_range(), Some((2, Some(2))));
    }

    #[test]
    fn basics() {
        let a = CDfa::from_rx(&Rx::alt(vec![lit("ab"), lit("ac"), lit("b")]), 1000).unwrap();
        assert!(a.accepts("ab") && a.accepts("b") && !a.accepts("a"));
        let star = Rx::Repeat { inner: std::sync::Arc::new(Rx::Chars(vec![('a' as u32, 'c' as u32)])), min: 0, max: None };
        let b = CDfa::from_rx(&star, 1000).unwrap();
        let d = b.minus(&a, 1000).unwrap();
        assert!(d.accepts("") && d.accepts("abc") && !d.accepts("ab") && !d.accepts("b"));
        let rx = d.to_rx(10000).unwrap();
        let d2 = CDfa::from_rx(&rx, 1000).unwrap();
        for s in ["", "a", "ab", "ac", "b", "bb", "abc", "ca"] {
            assert_eq!(d.accepts(s), d2.accepts(s), "{s}");
        }
        assert_eq!(a.enumerate(10).unwrap().len(), 3);
    }

    #[test]
    fn all_except_is_the_complement_of_the_names() {
        let names = ["id", "ids", "name", "", "\u{e9}t\u{e9}", "\u{1F600}", "nam", "x\u{10FFFF}"];
        let built = CDfa::all_except(&names);
        let any = CDfa::from_rx(&Rx::Repeat { inner: std::sync::Arc::new(Rx::Chars(vec![(0, 0xD7FF), (0xE000, MAXC)])), min: 0, max: None }, 10).unwrap();
        let slow = any.minus(&CDfa::from_rx(&Rx::alt(names.iter().map(|s| lit(s)).collect()), 1000).unwrap(), 1000).unwrap();
        assert_eq!(built.len(), slow.len(), "both minimal");
        let probes = ["", "i", "id", "ids", "idss", "n", "na", "nam", "name", "names", "\u{e9}", "\u{e9}t\u{e9}", "\u{e9}t\u{e8}", "\u{1F600}", "\u{1F601}", "x", "x\u{10FFFF}", "x\u{10FFFE}", "\u{D7FF}", "\u{E000}", "zzz"];
        for p in probes {
            assert_eq!(built.accepts(p), slow.accepts(p), "{p:?}");
            assert_eq!(built.accepts(p), !names.contains(&p), "{p:?}");
        }
        // No edge into the surrogate block.
        assert!(built.trans.iter().flatten().all(|&(a, b, _)| b < 0xD800 || a > 0xDFFF));
        assert!(CDfa::all_except(&[]).accepts("") && CDfa::all_except(&[]).len() == 1);
    }

    /// The trie minimized as it is built equals the complement computed the general way, in
    /// size (both minimal) and language, on random name sets over a small alphabet (shared
    /// prefixes and suffixes, names that are prefixes of others, the empty name).
    #[test]
    fn all_except_random_name_sets() {
        let mut rnd = corral_core::testutil::xorshift(0x5eed_1234_abcd_ef01);
        let any = CDfa::from_rx(&Rx::Repeat { inner: std::sync::Arc::new(Rx::Chars(vec![(0, 0xD7FF), (0xE000, MAXC)])), min: 0, max: None }, 10).unwrap();
        let word = |rnd: &mut dyn FnMut(u64) -> u64| -> String { (0..rnd(5)).map(|_| ['a', 'b', 'c', '\u{e9}'][rnd(4) as usize]).collect() };
        for _ in 0..300 {
            let names: Vec<String> = (0..rnd(7)).map(|_| word(&mut rnd)).collect();
            let refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
            let built = CDfa::all_except(&refs);
            let alt = CDfa::from_rx(&Rx::alt(refs.iter().map(|s| lit(s)).collect()), 1000).unwrap();
            let slow = any.minus(&alt, 1000).unwrap();
            assert_eq!(built.len(), slow.len(), "{names:?}");
            for _ in 0..40 {
                let p = word(&mut rnd);
                assert_eq!(built.accepts(&p), !refs.contains(&p.as_str()), "{names:?} {p:?}");
            }
        }
    }

    /// Merging in place joins exactly the neighbouring ranges that touch and share a target:
    /// the same row as collecting the merged ranges into a new list, on random rows (runs of
    /// touching ranges, gaps, repeated targets, the top code point).
    #[test]
    fn merge_adjacent_in_place_matches_a_fresh_list() {
        let mut rnd = corral_core::testutil::xorshift(0x3e46_0a11_5eed_0002);
        for _ in 0..2000 {
            let mut row = Vec::new();
            let mut c = 0u32;
            for _ in 0..rnd(12) {
                let a = c + rnd(3) as u32;
                let b = (a + rnd(4) as u32).min(MAXC);
                row.push((a, b, rnd(3) as u32));
                if b == MAXC {
                    break;
                }
                c = b + 1;
            }
            let mut want: Vec<(u32, u32, u32)> = Vec::new();
            for &(a, b, t) in &row {
                match want.last_mut() {
                    Some(l) if l.2 == t && l.1 + 1 == a => l.1 = b,
                    _ => want.push((a, b, t)),
                }
            }
            let mut got = row.clone();
            merge_adjacent(&mut got);
            assert_eq!(got, want, "{row:?}");
        }
    }

    /// The worklist refinement finds the same partition as plain Moore rounds (every state
    /// re-signed until nothing splits), on random automata and on a long chain.
    #[test]
    fn refine_matches_plain_moore() {
        fn plain(rows: &[Vec<(u32, u32, u32)>], acc: &[bool]) -> usize {
            let mut class: Vec<u32> = acc.iter().map(|&a| a as u32).collect();
            let mut n = 0;
            loop {
                let mut map: FxHashMap<(u32, Vec<(u32, u32, u32)>), u32> = FxHashMap::default();
                let next: Vec<u32> = (0..rows.len())
                    .map(|s| {
                        let mut sig: Vec<(u32, u32, u32)> = rows[s].iter().map(|&(a, b, t)| (a, b, class[t as usize])).collect();
                        merge_adjacent(&mut sig);
                        let l = map.len() as u32;
                        *map.entry((class[s], sig)).or_insert(l)
                    })
                    .collect();
                class = next;
                if map.len() == n {
                    return n;
                }
                n = map.len();
            }
        }
        let mut rnd = corral_core::testutil::xorshift(0x2545_f491_4f6c_dd1du64);
        for _ in 0..500 {
            let n = 1 + rnd(9) as usize;
            let mut rows: Vec<Vec<(u32, u32, u32)>> = vec![Vec::new(); n];
            for row in rows.iter_mut() {
                for c in 0..3u32 {
                    if rnd(3) != 0 {
                        row.push((97 + 2 * c, 98 + 2 * c, rnd(n as u64) as u32));
                    }
                }
            }
            let acc: Vec<bool> = (0..n).map(|_| rnd(2) == 0).collect();
            let got = refine(&FlatRows::from_lists(&rows), &acc);
            let classes = got.iter().max().map_or(0, |&c| c as usize + 1);
            assert_eq!(classes, plain(&rows, &acc), "{rows:?} {acc:?}");
            // states in one class behave alike on every input of up to 4 symbols
            let run = |mut s: usize, w: &[u32]| {
                for &c in w {
                    match rows[s].iter().find(|x| x.0 <= c && c <= x.1) {
                        Some(x) => s = x.2 as usize,
                        None => return None,
                    }
                }
                Some(acc[s])
            };
            for _ in 0..40 {
                let w: Vec<u32> = (0..rnd(5)).map(|_| 97 + rnd(6) as u32).collect();
                let (a, b) = (rnd(n as u64) as usize, rnd(n as u64) as usize);
                if got[a] == got[b] {
                    assert_eq!(run(a, &w), run(b, &w));
                }
            }
        }
        // A length bound: "a{0,3000}" is a chain that splits one class per round.
        let n = 3001;
        let rows: Vec<Vec<(u32, u32, u32)>> = (0..n).map(|s| if s + 1 < n { vec![(97, 97, s as u32 + 1)] } else { vec![] }).collect();
        let got = refine(&FlatRows::from_lists(&rows), &vec![true; n]);
        assert_eq!(got.iter().max().copied(), Some(n as u32 - 1), "a chain is minimal");
    }
}

impl crate::shared_cache::Weigh for CDfa {
    fn heap_bytes(&self) -> usize {
        self.trans.capacity() * std::mem::size_of::<Vec<(u32, u32, u32)>>() + self.trans.iter().map(|r| r.capacity() * 12).sum::<usize>() + self.accept.capacity()
    }
}
