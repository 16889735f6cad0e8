//! Token trie laid out flat in depth-first order: the subtree of a node is the contiguous
//! run of nodes after it, so a dead automaton state skips a whole subtree in one jump.

use crate::runtime::byteset::ByteSet;

/// One trie node (one byte of one or more tokens): 8 bytes, so a walk of the whole trie
/// streams half the memory it did with the token range inline (the range is in
/// [`TokTrie::tok_starts`], read only at nodes where tokens end).
#[derive(Debug, Clone, Copy)]
pub struct Node {
    /// Nodes in this subtree, this node included.
    pub subtree_len: u32,
    /// Depth (1 for a first byte).
    pub depth: u16,
    /// The byte on the edge into this node.
    pub byte: u8,
    /// Whether some token's bytes end exactly here.
    pub has_tokens: bool,
}

/// The flat trie.
#[derive(Debug, Clone, Default)]
pub struct TokTrie {
    /// Nodes in depth-first (pre)order, children sorted by byte.
    pub nodes: Vec<Node>,
    /// Token ids, grouped by the node they end at.
    pub token_ids: Vec<u32>,
    /// Node `i`'s token ids are `token_ids[tok_starts[i]..tok_starts[i + 1]]`.
    tok_starts: Vec<u32>,
    /// Greatest node depth (the longest token's length).
    max_depth: usize,
    /// For each node, the greatest depth in its subtree.
    reach: Vec<u16>,
    /// For each first byte, the number of nodes in its subtree (a walk's cost bound).
    first_byte_nodes: Vec<u32>,
    /// For each first byte, the node it leads to (`u32::MAX`: no token starts with it).
    first_byte_node: Vec<u32>,
    /// For each node, the index in `byte_sets` of the bytes on the edges strictly below it.
    below: Vec<u32>,
    /// For each node, the index in `child_sets` of the bytes on its child edges.
    children: Vec<u32>,
    /// The distinct sets of `children` (index 0: the empty set of a leaf): far fewer than
    /// `byte_sets`, so a scan can tabulate them ([`TokTrie::with_child_in`]).
    child_sets: Vec<ByteSet>,
    /// The distinct byte sets of `below` (index 0: the empty set of a leaf).
    byte_sets: Vec<ByteSet>,
    /// The nodes with a child edge on byte `b`, sorted, are
    /// `parents[parent_starts[b]..parent_starts[b + 1]]` ([`TokTrie::with_child_in`]).
    parents: Vec<u32>,
    parent_starts: Vec<u32>,
    /// The plain-text slice (`TokTrie::plain_slice`, [`crate::vocab::slice`]), built on first use.
    slice: MemoSlot,
}

/// What a module above the trie memoizes per trie: the plain-text slice
/// ([`crate::vocab::slice`]), which reads the trie. Held type-erased, so that the trie does not
/// import the slice.
pub(crate) trait TrieMemo: std::any::Any + Send + Sync + std::fmt::Debug {
    /// Heap bytes held (counted in [`TokTrie::memory_bytes`]).
    fn memory_bytes(&self) -> usize;
    /// A copy, for a cloned trie.
    fn clone_box(&self) -> Box<dyn TrieMemo>;
}

/// The memo of [`TrieMemo`]; a clone copies it, as a typed memo would.
#[derive(Debug, Default)]
struct MemoSlot(std::sync::OnceLock<Box<dyn TrieMemo>>);

impl Clone for MemoSlot {
    fn clone(&self) -> Self {
        let slot = std::sync::OnceLock::new();
        if let Some(m) = self.0.get() {
            let _ = slot.set(m.clone_box());
        }
        MemoSlot(slot)
    }
}

impl TokTrie {
    /// Builds the trie from `(token id, bytes)` pairs; empty byte strings are skipped.
    pub fn build<'a>(tokens: impl Iterator<Item = (u32, &'a [u8])>) -> TokTrie {
        let mut toks: Vec<(&[u8], u32)> = tokens.filter(|(_, b)| !b.is_empty()).map(|(i, b)| (b, i)).collect();
        toks.sort_unstable();
        let mut nodes: Vec<Node> = Vec::new();
        let mut token_ids = Vec::with_capacity(toks.len());
        let mut tok_starts: Vec<u32> = Vec::new();
        // open[d] = index of the open node at depth d+1
        let mut open: Vec<usize> = Vec::new();
        let mut prev: &[u8] = &[];
        let mut reach: Vec<u16> = Vec::new();
        // Closes the deepest open node: its subtree is complete.
        let close = |open: &mut Vec<usize>, nodes: &mut Vec<Node>, reach: &mut Vec<u16>| {
            let idx = open.pop().unwrap();
            nodes[idx].subtree_len = (nodes.len() - idx) as u32;
            if let Some(&up) = open.last() {
                reach[up] = reach[up].max(reach[idx]);
            }
        };
        for (bytes, id) in toks {
            let lcp = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            while open.len() > lcp {
                close(&mut open, &mut nodes, &mut reach);
            }
            for (k, &b) in bytes.iter().enumerate().skip(lcp) {
                // Sorted input: a node's tokens come right after it is opened, before any
                // later node, so its range starts where the ids stand now.
                tok_starts.push(token_ids.len() as u32);
                nodes.push(Node { byte: b, depth: (k + 1) as u16, subtree_len: 1, has_tokens: false });
                reach.push((k + 1) as u16);
                open.push(nodes.len() - 1);
            }
            let last = *open.last().unwrap();
            debug_assert_eq!(last, nodes.len() - 1, "a token ends at the newest node");
            nodes[last].has_tokens = true;
            token_ids.push(id);
            prev = bytes;
        }
        while !open.is_empty() {
            close(&mut open, &mut nodes, &mut reach);
        }
        tok_starts.push(token_ids.len() as u32);
        let max_depth = nodes.iter().map(|n| n.depth as usize).max().unwrap_or(0);
        let mut first_byte_nodes = vec![0u32; 256];
        let mut first_byte_node = vec![u32::MAX; 256];
        for (i, n) in nodes.iter().enumerate().filter(|(_, n)| n.depth == 1) {
            first_byte_nodes[n.byte as usize] = n.subtree_len;
            first_byte_node[n.byte as usize] = i as u32;
        }
        TokTrie {
            nodes,
            token_ids,
            tok_starts,
            max_depth,
            reach,
            first_byte_nodes,
            first_byte_node,
            below: Vec::new(),
            children: Vec::new(),
            child_sets: Vec::new(),
            byte_sets: Vec::new(),
            parents: Vec::new(),
            parent_starts: Vec::new(),
            slice: Default::default(),
        }
    }

    /// Computes each node's [`TokTrie::below_bytes`] and [`TokTrie::child_bytes`] (the
    /// vocabulary's own trie has them; the plain slice's smaller tries go without).
    pub fn with_below_sets(mut self) -> TokTrie {
        let n = self.nodes.len();
        let mut sets = ByteSetTable::default();
        let mut child_sets = ByteSetTable::default();
        let mut below = vec![0u32; n];
        let mut children = vec![0u32; n];
        let mut by_byte: Vec<Vec<u32>> = vec![Vec::new(); 256];
        // Children come after their parent: from the end, every child's set is known.
        for i in (0..n).rev() {
            let end = i + self.nodes[i].subtree_len as usize;
            let mut set = ByteSet::default();
            let mut direct = ByteSet::default();
            let mut c = i + 1;
            while c < end {
                set.union_with(&sets.distinct_or_empty(below[c]));
                direct.insert(self.nodes[c].byte);
                by_byte[self.nodes[c].byte as usize].push(i as u32);
                c += self.nodes[c].subtree_len as usize;
            }
            set.union_with(&direct);
            below[i] = sets.intern(set);
            children[i] = child_sets.intern(direct);
        }
        self.below = below;
        self.children = children;
        self.byte_sets = sets.distinct;
        self.child_sets = child_sets.distinct;
        // (Pushed from the last node back: each list is in decreasing order.)
        self.parent_starts = Vec::with_capacity(257);
        self.parents = Vec::with_capacity(n);
        for list in by_byte {
            self.parent_starts.push(self.parents.len() as u32);
            self.parents.extend(list.into_iter().rev());
        }
        self.parent_starts.push(self.parents.len() as u32);
        self
    }

    /// The bytes on node `i`'s child edges (the first bytes that may follow a lexeme ending
    /// there).
    #[inline]
    pub fn child_bytes(&self, i: usize) -> ByteSet {
        if let Some(&k) = self.children.get(i) {
            return self.child_sets[k as usize];
        }
        let mut out = ByteSet::default();
        let end = i + self.nodes[i].subtree_len as usize;
        let mut c = i + 1;
        while c < end {
            out.insert(self.nodes[c].byte);
            c += self.nodes[c].subtree_len as usize;
        }
        out
    }

    /// The nodes of `nodes` (sorted) with a child edge on a byte of `bytes`, in order: where a
    /// walk of lexemes whose first bytes are `bytes` can go on below a lexeme end.
    ///
    /// A group where an identifier ends (tens of thousands of nodes: every node of every
    /// identifier-like token) has a handful of nodes where an operator or a space follows;
    /// reading each node's children costs 100-300 µs there. With the sets of
    /// [`TokTrie::with_below_sets`], the nodes with such a child (a few thousand for a
    /// dozen punctuation bytes with Llama 3) are looked up in `nodes` instead, by galloping.
    pub fn with_child_in(&self, nodes: &[u32], bytes: &ByteSet) -> Vec<u32> {
        let lists = || bytes.iter().map(|b| &self.parents[self.parent_starts[b as usize] as usize..self.parent_starts[b as usize + 1] as usize]);
        if self.parent_starts.is_empty() || lists().map(|l| l.len()).sum::<usize>() * INDEX_SPEEDUP > nodes.len() {
            if self.children.is_empty() || nodes.len() < SCAN_TABLE_NODES.max(self.child_sets.len()) {
                return nodes.iter().copied().filter(|&n| self.child_bytes(n as usize).intersects(bytes)).collect();
            }
            // Which distinct child sets meet `bytes`, once (a bit each; only for more nodes
            // than sets): each node then reads one bit instead of its set, scattered over the
            // table.
            let mut meets = vec![0u64; self.child_sets.len().div_ceil(64)];
            for (k, set) in self.child_sets.iter().enumerate() {
                if set.intersects(bytes) {
                    meets[k / 64] |= 1 << (k % 64);
                }
            }
            return nodes
                .iter()
                .copied()
                .filter(|&n| {
                    let k = self.children[n as usize] as usize;
                    meets[k / 64] >> (k % 64) & 1 == 1
                })
                .collect();
        }
        let mut out = Vec::new();
        for list in lists() {
            let mut j = 0;
            for &p in list {
                // Gallop to the first of `nodes[j..]` at least `p`.
                let mut step = 1;
                while j + step < nodes.len() && nodes[j + step] < p {
                    j += step;
                    step *= 2;
                }
                let hi = (j + step + 1).min(nodes.len());
                j += nodes[j..hi].partition_point(|&x| x < p);
                if j == nodes.len() {
                    break;
                }
                if nodes[j] == p {
                    out.push(p);
                }
            }
        }
        if bytes.len() > 1 {
            out.sort_unstable();
            out.dedup();
        }
        out
    }

    /// Whether [`TokTrie::below_bytes`] may be asked ([`TokTrie::with_below_sets`]).
    #[inline(always)]
    pub fn has_below_sets(&self) -> bool {
        !self.below.is_empty()
    }

    /// The bytes on the edges strictly below node `i` (empty for a leaf): when a state keeps
    /// itself on every one of them, every token in the subtree is allowed without a walk.
    /// Only on a trie [`TokTrie::with_below_sets`] made.
    #[inline(always)]
    pub fn below_bytes(&self, i: usize) -> &ByteSet {
        &self.byte_sets[self.below[i] as usize]
    }

    /// The token ids ending anywhere in node `i`'s subtree, `i` included (contiguous: the
    /// nodes are in depth-first order).
    #[inline(always)]
    pub fn subtree_tokens(&self, i: usize) -> &[u32] {
        let end = i + self.nodes[i].subtree_len as usize;
        &self.token_ids[self.tok_starts[i] as usize..self.tok_starts[end] as usize]
    }

    /// The memo of type `T` (one type per trie: the plain-text slice), built by `build` on
    /// first use.
    pub(crate) fn memo<T: TrieMemo>(&self, build: impl FnOnce(&TokTrie) -> T) -> &T {
        let m: &dyn std::any::Any = self.slice.0.get_or_init(|| Box::new(build(self))).as_ref();
        m.downcast_ref::<T>().expect("a trie memoizes one type")
    }

    /// Nodes under the first bytes in `bytes`: what a walk from a state whose live bytes
    /// these are may visit at most.
    pub fn nodes_under(&self, bytes: &crate::runtime::byteset::ByteSet) -> usize {
        let mut total = 0;
        for (w, &word) in bytes.0.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                total += self.first_byte_nodes[w * 64 + bits.trailing_zeros() as usize] as usize;
                bits &= bits - 1;
            }
        }
        total
    }

    /// Nodes in the subtrees of `roots` (sorted), each subtree counted once: what a walk below
    /// them visits at most.
    pub fn nodes_below(&self, roots: &[u32]) -> usize {
        let mut end = 0;
        let mut total = 0;
        for &r in roots {
            let (r, e) = (r as usize, r as usize + self.nodes[r as usize].subtree_len as usize);
            if e > end {
                total += e - r.max(end);
                end = e;
            }
        }
        total
    }

    /// `nodes` (sorted) cut into the runs under each first byte, in order.
    pub fn by_first_byte<'n>(&self, nodes: &'n [u32]) -> impl Iterator<Item = &'n [u32]> + 'n {
        let firsts: Vec<(u32, u32)> = self.first_byte_node.iter().filter(|&&i| i != u32::MAX).map(|&i| (i, i + self.nodes[i as usize].subtree_len)).collect();
        let mut rest = nodes;
        std::iter::from_fn(move || {
            let &n = rest.first()?;
            let end = firsts[firsts.partition_point(|f| f.0 <= n) - 1].1;
            let (run, more) = rest.split_at(rest.partition_point(|&x| x < end));
            rest = more;
            Some(run)
        })
    }

    /// The `(start, end, base depth)` node ranges of the subtrees of the first bytes in
    /// `bytes`, in node order (adjacent subtrees merged): a walk from a state only these bytes
    /// continue visits them instead of stepping over every first-level node (one cache miss
    /// each on a large trie: most of a literal key's walk).
    pub fn first_byte_ranges(&self, bytes: &crate::runtime::byteset::ByteSet) -> Vec<(usize, usize, usize)> {
        let mut out: Vec<(usize, usize, usize)> = Vec::new();
        for b in bytes.iter() {
            let i = self.first_byte_node[b as usize];
            if i == u32::MAX {
                continue;
            }
            let (start, end) = (i as usize, (i + self.nodes[i as usize].subtree_len) as usize);
            match out.last_mut() {
                Some(r) if r.1 == start => r.1 = end,
                _ => out.push((start, end, 0)),
            }
        }
        out
    }

    /// The greatest depth in node `i`'s subtree (its own depth for a leaf).
    #[inline(always)]
    pub fn reach(&self, i: usize) -> usize {
        self.reach[i] as usize
    }

    /// Greatest node depth (the longest token's length).
    #[inline]
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// Token ids ending at node `i`.
    #[inline(always)]
    pub fn tokens_at(&self, i: usize) -> &[u32] {
        &self.token_ids[self.tok_starts[i] as usize..self.tok_starts[i + 1] as usize]
    }

    /// The node reached by `bytes` from the root, if some token starts with them.
    pub fn find(&self, bytes: &[u8]) -> Option<usize> {
        let mut i = 0usize;
        let mut end = self.nodes.len();
        let mut found = None;
        for (d, &b) in bytes.iter().enumerate() {
            // Scan the children (depth d + 1) of the current range.
            let mut hit = None;
            while i < end {
                let n = &self.nodes[i];
                if n.depth as usize == d + 1 && n.byte == b {
                    hit = Some(i);
                    break;
                }
                i += n.subtree_len as usize;
            }
            let h = hit?;
            found = Some(h);
            end = h + self.nodes[h].subtree_len as usize;
            i = h + 1;
        }
        found
    }

    /// Whether some token's bytes strictly extend `bytes`.
    pub fn has_extension(&self, bytes: &[u8]) -> bool {
        match self.find(bytes) {
            Some(i) => self.nodes[i].subtree_len > 1,
            None => bytes.is_empty() && !self.nodes.is_empty(),
        }
    }

    /// Heap bytes used.
    pub fn memory_bytes(&self) -> usize {
        self.nodes.len() * (std::mem::size_of::<Node>() + 2 + 4) + (self.below.len() + self.children.len() + self.parents.len() + self.parent_starts.len()) * 4 + (self.byte_sets.len() + self.child_sets.len()) * 32 + self.token_ids.len() * 4 + self.slice.0.get().map_or(0, |s| s.memory_bytes())
    }
}

/// How many times smaller than a group the lists [`TokTrie::with_child_in`] looks up must
/// be (a lookup costs several reads of a node's child set).
const INDEX_SPEEDUP: usize = 8;

/// Fewest nodes (and no fewer than the distinct child sets) for which
/// [`TokTrie::with_child_in`]'s scan first tabulates which child sets meet the bytes.
const SCAN_TABLE_NODES: usize = 2048;

/// The distinct byte sets of [`TokTrie::with_below_sets`], numbered as they come.
#[derive(Default)]
struct ByteSetTable {
    /// Distinct sets, the empty one first.
    distinct: Vec<ByteSet>,
    index: rustc_hash::FxHashMap<ByteSet, u32>,
}

impl ByteSetTable {
    /// The set numbered `k` (the empty set before any was added).
    fn distinct_or_empty(&self, k: u32) -> ByteSet {
        self.distinct.get(k as usize).copied().unwrap_or_default()
    }

    /// The index of `set` in `distinct`, adding it when new.
    fn intern(&mut self, set: ByteSet) -> u32 {
        if self.distinct.is_empty() {
            self.distinct.push(ByteSet::default());
            self.index.insert(ByteSet::default(), 0);
        }
        if set.is_empty() {
            return 0;
        }
        let distinct = &mut self.distinct;
        *self.index.entry(set).or_insert_with(|| {
            distinct.push(set);
            distinct.len() as u32 - 1
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes cut by first byte: every run under one first byte, in order, each first byte
    /// once; `nodes_below` counts each node under them once.
    #[test]
    fn runs_by_first_byte_and_nodes_below() {
        let toks = crate::testutil::random_tokens(5_000, 6, b"abc d;", 7);
        let trie = TokTrie::build(toks.iter().enumerate().map(|(i, b)| (i as u32, &b[..])));
        let nodes: Vec<u32> = (0..trie.nodes.len() as u32).filter(|n| n % 7 == 0 || n % 11 == 0).collect();
        let runs: Vec<&[u32]> = trie.by_first_byte(&nodes).collect();
        assert_eq!(runs.concat(), nodes);
        let first = |n: u32| {
            let mut i = n as usize;
            while trie.nodes[i].depth > 1 {
                i -= 1;
            }
            i
        };
        for run in &runs {
            assert!(!run.is_empty() && run.iter().all(|&n| first(n) == first(run[0])));
        }
        assert!(runs.windows(2).all(|w| first(w[0][0]) != first(w[1][0])));
        let mut seen = vec![false; trie.nodes.len()];
        for &r in &nodes {
            seen[r as usize..r as usize + trie.nodes[r as usize].subtree_len as usize].iter_mut().for_each(|s| *s = true);
        }
        assert_eq!(trie.nodes_below(&nodes), seen.iter().filter(|&&s| s).count());
    }

    /// `with_child_in` gives what filtering each node's child set gives, by the index
    /// (rare bytes, many nodes) and by the scan (common bytes or few nodes; over many nodes,
    /// through a table of which child sets meet the bytes).
    #[test]
    fn with_child_in_matches_the_filter() {
        // Mostly letters, sometimes a space, a semicolon or a parenthesis.
        let toks = crate::testutil::random_tokens(3000, 9, b"abcdefgh abcdefgh;abcdefgh(abcdefgh", 0x9e37_79b9_7f4a_7c15);
        let t = TokTrie::build(toks.iter().enumerate().map(|(i, b)| (i as u32, &b[..]))).with_below_sets();
        let all: Vec<u32> = (0..t.nodes.len() as u32).collect();
        let odd: Vec<u32> = all.iter().copied().filter(|n| n % 3 != 0).collect();
        let few: Vec<u32> = all.iter().copied().step_by(97).collect();
        assert!(odd.len() >= SCAN_TABLE_NODES.max(t.child_sets.len()) && few.len() < SCAN_TABLE_NODES, "the scans with and without the table");
        for bytes in [&b";"[..], b"(", b";(", b" ;(", b"abc", b"z", b""] {
            let mut set = crate::runtime::byteset::ByteSet::default();
            bytes.iter().for_each(|&b| set.insert(b));
            for nodes in [&all, &odd, &few] {
                let want: Vec<u32> = nodes.iter().copied().filter(|&n| t.child_bytes(n as usize).intersects(&set)).collect();
                assert_eq!(t.with_child_in(nodes, &set), want, "bytes {bytes:?}, {} nodes", nodes.len());
            }
        }
        // The index is taken where it should be: a rare byte below every node.
        let mut semi = crate::runtime::byteset::ByteSet::default();
        semi.insert(b';');
        let n_semi = t.parent_starts[b';' as usize + 1] - t.parent_starts[b';' as usize];
        assert!((n_semi as usize) * INDEX_SPEEDUP <= all.len(), "{n_semi} parents of ';' of {}", all.len());
    }

    /// The ranges of some first bytes hold exactly the nodes under those bytes, in order,
    /// adjacent subtrees as one range; absent bytes add nothing.
    #[test]
    fn first_byte_ranges_cover_exactly_their_subtrees() {
        let toks: Vec<(u32, &[u8])> = vec![(0, b"ab"), (1, b"a"), (2, b"b"), (3, b"abc"), (4, b"c"), (5, b"cd"), (6, b"e")];
        let t = TokTrie::build(toks.into_iter());
        let mut set = crate::runtime::byteset::ByteSet::default();
        for &b in b"acez" {
            set.insert(b);
        }
        let ranges = t.first_byte_ranges(&set);
        let covered: Vec<usize> = ranges.iter().flat_map(|&(s, e, _)| s..e).collect();
        let mut want = Vec::new();
        let mut i = 0;
        while i < t.nodes.len() {
            let end = i + t.nodes[i].subtree_len as usize;
            if b"ace".contains(&t.nodes[i].byte) {
                want.extend(i..end);
            }
            i = end;
        }
        assert_eq!(covered, want);
        assert_eq!(ranges.len(), 2, "c and e are adjacent: {ranges:?}");
        assert!(ranges.iter().all(|r| r.2 == 0));
    }

    #[test]
    fn layout() {
        let toks: Vec<(u32, &[u8])> = vec![(0, b"ab"), (1, b"a"), (2, b"b"), (3, b"abc"), (4, b"a")];
        let t = TokTrie::build(toks.into_iter()).with_below_sets();
        // a(1,4) b(0) c(3) | b(2)
        assert_eq!(t.nodes.len(), 4);
        assert_eq!(t.nodes[0].byte, b'a');
        assert_eq!(t.nodes[0].subtree_len, 3);
        assert_eq!(std::mem::size_of::<Node>(), 8);
        assert!(t.nodes[0].has_tokens && !t.tokens_at(0).is_empty());
        let mut at0 = t.tokens_at(0).to_vec();
        at0.sort();
        assert_eq!(at0, vec![1, 4]);
        assert_eq!(t.tokens_at(1), &[0]);
        assert_eq!(t.nodes[2].depth, 3);
        assert_eq!(t.nodes[3].byte, b'b');
        assert_eq!(t.nodes[3].depth, 1);
        assert_eq!(t.tokens_at(3), &[2]);
        assert_eq!(t.find(b"abc"), Some(2));
        assert_eq!(t.find(b"ac"), None);
        assert!(t.has_extension(b"ab") && !t.has_extension(b"abc") && !t.has_extension(b"b"));
        assert_eq!((t.reach(0), t.reach(1), t.reach(2), t.reach(3)), (3, 3, 3, 1));
        let bytes = |i: usize| (0..=255u8).filter(|&b| t.below_bytes(i).contains(b)).collect::<Vec<u8>>();
        assert_eq!((bytes(0), bytes(1), bytes(2), bytes(3)), (b"bc".to_vec(), b"c".to_vec(), vec![], vec![]));
        let only = |b: u8| {
            let mut s = ByteSet::default();
            s.insert(b);
            s
        };
        assert_eq!((t.child_bytes(0), t.child_bytes(1), t.child_bytes(2)), (only(b'b'), only(b'c'), ByteSet::default()));
        let plain = TokTrie::build(vec![(0u32, &b"ab"[..]), (1, b"ac"), (2, b"a")].into_iter());
        assert!(plain.child_bytes(0).contains(b'b') && plain.child_bytes(0).contains(b'c') && plain.child_bytes(0).len() == 2, "computed without the sets");
        let mut sub = t.subtree_tokens(0).to_vec();
        sub.sort();
        assert_eq!(sub, vec![0, 1, 3, 4]);
        assert_eq!(t.subtree_tokens(1), &[0, 3]);
        assert_eq!(t.subtree_tokens(3), &[2]);
    }
}
