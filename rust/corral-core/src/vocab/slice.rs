//! The plain-text slice of a vocabulary: tokens made only of characters a JSON string may
//! hold raw (valid UTF-8, no control characters, no `"` or `\`), precomputed once per
//! vocabulary, and a second trie of every other token.
//!
//! Inside a string body every plain token is allowed, and a fresh walk of the whole trie
//! (about 270,000 nodes at 128k tokens, ~2 ms) re-derives that token by token. When a
//! lexeme's state survives every plain byte string up to the longest plain token without
//! ever being able to end ([`PlainSlice::covers`]), its token set is the slice plus a walk
//! of the small trie of the remaining tokens — the same set, found in a tenth of the time.

use crate::runtime::byteset::ByteSet;
use crate::automata::dfa::{Dfa, PlainMoves, DEAD};
use crate::vocab::toktrie::TokTrie;

/// Most (DFA state, plain-prefix state) pairs [`PlainSlice::exceptions`] explores: a
/// pattern's body has a few dozen (its states times the few inside a UTF-8 character); a
/// set of declared key names or a length-bounded string has hundreds or thousands, and no
/// use for exceptions.
const MAX_EXCEPTION_PAIRS: usize = 256;

/// States of the automaton of prefixes of plain strings: between characters, or inside a
/// multi-byte character (how many continuation bytes remain, and the first one's range).
const BOUNDARY: u8 = 0;
const CONT1: u8 = 1; // one continuation byte 80..BF
const CONT2: u8 = 2; // two continuation bytes 80..BF
const CONT3: u8 = 3; // three continuation bytes 80..BF
const E0: u8 = 4; // after E0: A0..BF then one
const ED: u8 = 5; // after ED: 80..9F then one (no surrogates)
const F0: u8 = 6; // after F0: 90..BF then two
const F4: u8 = 7; // after F4: 80..8F then two
const STATES: usize = crate::automata::dfa::PLAIN_STATES;

/// The next plain-prefix state after byte `b`, or `None` when no plain string continues so.
fn step(p: u8, b: u8) -> Option<u8> {
    let cont = (0x80..=0xBF).contains(&b);
    match p {
        BOUNDARY => match b {
            0x20..=0x7F if b != b'"' && b != b'\\' => Some(BOUNDARY),
            0xC2..=0xDF => Some(CONT1),
            0xE0 => Some(E0),
            0xED => Some(ED),
            0xE1..=0xEF => Some(CONT2),
            0xF0 => Some(F0),
            0xF1..=0xF3 => Some(CONT3),
            0xF4 => Some(F4),
            _ => None,
        },
        CONT1 => cont.then_some(BOUNDARY),
        CONT2 => cont.then_some(CONT1),
        CONT3 => cont.then_some(CONT2),
        E0 => (0xA0..=0xBF).contains(&b).then_some(CONT1),
        ED => (0x80..=0x9F).contains(&b).then_some(CONT1),
        F0 => (0x90..=0xBF).contains(&b).then_some(CONT2),
        F4 => (0x80..=0x8F).contains(&b).then_some(CONT2),
        _ => None,
    }
}


/// [`build_plain_moves`], memoized per automaton: every state of a key automaton that a
/// slice might serve asks for it (building it was 7% of cold fills at key positions).
fn plain_moves(dfa: &Dfa) -> &PlainMoves {
    dfa.plain_moves(build_plain_moves)
}

/// Builds the [`PlainMoves`] of `dfa`.
fn build_plain_moves(dfa: &Dfa) -> PlainMoves {
    let mut groups: [Vec<(u8, u8, ByteSet)>; STATES] = Default::default();
    let mut slot = vec![u16::MAX; 256 * STATES];
    for (p, g) in groups.iter_mut().enumerate() {
        slot.iter_mut().for_each(|x| *x = u16::MAX);
        for b in 0..=255u8 {
            if let Some(q) = step(p as u8, b) {
                let k = dfa.class_of(b) as usize * STATES + q as usize;
                if slot[k] == u16::MAX {
                    slot[k] = g.len() as u16;
                    g.push((b, q, ByteSet::default()));
                }
                g[slot[k] as usize].2.insert(b);
            }
        }
    }
    groups
}

/// How many printable ASCII bytes a plain string may start with (all but `"` and `\`) end or
/// kill the lexeme of `dfa` in `state` at once: most states no slice serves have some (a key
/// among declared names), found before any table is built.
fn ascii_stops(dfa: &Dfa, state: u32) -> usize {
    (0x20..0x7Fu8)
        .filter(|&b| b != b'"' && b != b'\\')
        .filter(|&b| {
            let q = dfa.next(state, b);
            q == DEAD || dfa.is_accepting(q)
        })
        .count()
}

/// For each node of `sub` (a trie of some of `full`'s tokens), the node of `full` with the
/// same bytes (both tries list nodes in the same depth-first byte order).
fn map_nodes(full: &TokTrie, sub: &TokTrie) -> Vec<u32> {
    let nodes = &full.nodes;
    let mut out = Vec::with_capacity(sub.nodes.len());
    let mut at: Vec<usize> = Vec::new(); // full-trie node per depth on the current path
    for n in &sub.nodes {
        let d = n.depth as usize;
        at.truncate(d - 1);
        let (mut j, end) = match at.last() {
            Some(&p) => (p + 1, p + nodes[p].subtree_len as usize),
            None => (0, nodes.len()),
        };
        while j < end && !(nodes[j].depth as usize == d && nodes[j].byte == n.byte) {
            j += nodes[j].subtree_len as usize;
        }
        debug_assert!(j < end, "every prefix of a token is a node of the full trie");
        at.push(j);
        out.push(j as u32);
    }
    out
}

impl TokTrie {
    /// The plain-text slice of this trie's tokens, built on first use ([`crate::Vocabulary`]
    /// builds it with the vocabulary, so no mask fill pays for it).
    pub fn plain_slice(&self) -> &PlainSlice {
        self.memo(PlainSlice::new)
    }
}

impl crate::vocab::toktrie::TrieMemo for PlainSlice {
    fn memory_bytes(&self) -> usize {
        PlainSlice::memory_bytes(self)
    }
    fn clone_box(&self) -> Box<dyn crate::vocab::toktrie::TrieMemo> {
        Box::new(self.clone())
    }
}

/// A vocabulary's plain tokens and the trie of the others.
#[derive(Debug, Clone)]
pub struct PlainSlice {
    /// Bit `t` set: token `t` is plain.
    pub bits: Vec<u32>,
    /// The trie of every token that is not plain.
    pub rest: TokTrie,
    /// For each node of `rest`, the node of the full trie with the same bytes.
    pub rest_to_full: Vec<u32>,
    /// The longest plain token, in bytes.
    pub max_len: usize,
    /// For states safe only to a smaller depth (a length-bounded string): per threshold `t`
    /// of [`THRESHOLDS`] below `max_len`, the plain tokens of at most `t` bytes and the trie of
    /// the longer ones.
    pub by_length: Vec<Partial>,
}

/// Depths below the longest plain token for which [`Partial`] slices are kept. 8 and 12
/// serve a length-bounded string 8–15 characters from its bound (`maxLength: 20` after five
/// characters walked the whole trie, ~2 ms; the trie of plain tokens over 12 bytes has 44k
/// nodes, over 8 bytes 134k, against 275k): 3.4 MB more per vocabulary, ~10 ms more to
/// preprocess it.
pub(crate) const THRESHOLDS: [usize; 5] = [8, 12, 16, 32, 64];

/// The plain tokens of at most `len` bytes, and a trie of the longer plain tokens.
#[derive(Debug, Clone)]
pub struct Partial {
    /// The threshold.
    pub len: usize,
    /// Bit `t` set: token `t` is plain and at most `len` bytes long.
    pub bits: Vec<u32>,
    /// Trie of the plain tokens longer than `len` bytes.
    pub long: TokTrie,
    /// For each node of `long`, the node of the full trie with the same bytes.
    pub long_to_full: Vec<u32>,
}

impl PlainSlice {
    /// Splits the tokens of `trie`.
    pub fn new(trie: &TokTrie) -> PlainSlice {
        let nodes = &trie.nodes;
        let max_id = trie.token_ids.iter().copied().max().unwrap_or(0) as usize;
        let mut bits = vec![0u32; max_id / 32 + 1];
        let mut rest_tokens: Vec<(u32, Vec<u8>)> = Vec::new();
        let mut plain_tokens: Vec<(u32, Vec<u8>)> = Vec::new();
        let mut path: Vec<u8> = Vec::new();
        // plain[d]: the plain-prefix state after the first d bytes of the path (None: not plain).
        let mut plain: Vec<Option<u8>> = vec![Some(BOUNDARY)];
        let mut max_len = 0;
        for (i, n) in nodes.iter().enumerate() {
            let d = n.depth as usize;
            path.truncate(d - 1);
            plain.truncate(d);
            path.push(n.byte);
            plain.push(plain[d - 1].and_then(|p| step(p, n.byte)));
            let is_plain = plain[d] == Some(BOUNDARY);
            for &t in trie.tokens_at(i) {
                if is_plain {
                    bits[t as usize / 32] |= 1 << (t % 32);
                    max_len = max_len.max(d);
                    plain_tokens.push((t, path.clone()));
                } else {
                    rest_tokens.push((t, path.clone()));
                }
            }
        }
        let rest = TokTrie::build(rest_tokens.iter().map(|(t, b)| (*t, b.as_slice())));
        let rest_to_full = map_nodes(trie, &rest);
        let mut by_length = Vec::new();
        for len in THRESHOLDS {
            if len >= max_len {
                break;
            }
            let mut short = vec![0u32; bits.len()];
            let long = TokTrie::build(plain_tokens.iter().filter(|(_, b)| b.len() > len).map(|(t, b)| (*t, b.as_slice())));
            for (t, b) in &plain_tokens {
                if b.len() <= len {
                    short[*t as usize / 32] |= 1 << (t % 32);
                }
            }
            let long_to_full = map_nodes(trie, &long);
            by_length.push(Partial { len, bits: short, long, long_to_full });
        }
        PlainSlice { bits, rest, rest_to_full, max_len, by_length }
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        let partial: usize = self.by_length.iter().map(|p| p.bits.len() * 4 + p.long.memory_bytes() + p.long_to_full.len() * 4).sum();
        self.bits.len() * 4 + self.rest.memory_bytes() + self.rest_to_full.len() * 4 + partial
    }

    /// The greatest `m` (at most [`PlainSlice::max_len`]) such that from `state` every byte
    /// string of at most `m` bytes that starts a plain string keeps `dfa` alive and not
    /// accepting: then every plain token of at most `m` bytes is allowed and no lexeme end
    /// lies on its path.
    pub fn safe_depth(&self, dfa: &Dfa, state: u32) -> usize {
        self.safe_depth_upto(dfa, state, self.max_len)
    }

    /// [`PlainSlice::safe_depth`] explored only to `limit` bytes: the smaller of the two.
    pub fn safe_depth_upto(&self, dfa: &Dfa, state: u32, limit: usize) -> usize {
        let limit = limit.min(self.max_len);
        if state == DEAD || dfa.is_accepting(state) {
            return 0;
        }
        if ascii_stops(dfa, state) > 0 {
            return 0;
        }
        let moves = plain_moves(dfa);
        // Breadth first over (DFA state, plain state) up to `limit` bytes; a pair seen at a
        // smaller depth covers every later visit.
        let mut seen = PairSet::new(dfa.num_states());
        let mut frontier = vec![(state, BOUNDARY)];
        let mut next = Vec::new();
        seen.insert(state, BOUNDARY);
        for depth in 0..limit {
            next.clear();
            for &(q, p) in &frontier {
                for &(b, p2, _) in &moves[p as usize] {
                    let q2 = dfa.next(q, b);
                    if q2 == DEAD || dfa.is_accepting(q2) {
                        return depth;
                    }
                    if seen.insert(q2, p2) {
                        next.push((q2, p2));
                    }
                }
            }
            if next.is_empty() {
                break;
            }
            std::mem::swap(&mut frontier, &mut next);
        }
        limit
    }
}

/// Most joint states (the lexemes' states and the plain-prefix state) [`PlainSlice::joint_safe_depth`]
/// explores: a key pattern and "any other key" have a few dozen.
const MAX_JOINT_STATES: usize = 4_096;

impl PlainSlice {
    /// [`PlainSlice::safe_depth`] for several lexemes walked together: the greatest `m` (at
    /// most [`PlainSlice::max_len`]) such that from their states every byte string of at most
    /// `m` bytes that starts a plain string keeps at least one of them alive and none
    /// accepting. Then every plain token of at most `m` bytes is allowed by one of them and no
    /// lexeme end lies on its path, though some of them alone may not take them all: "any other
    /// key" next to a `patternProperties` pattern that may occur anywhere in the name
    /// (`after_[a-z]`) dies wherever the pattern matches, while together with the keys that
    /// match it, it takes any string.
    ///
    /// Breadth first over joint states, as [`PlainSlice::safe_depth`] over pairs; stops (at
    /// the depth fully explored) past [`MAX_JOINT_STATES`].
    pub fn joint_safe_depth(&self, lexemes: &[(&Dfa, u32)]) -> usize {
        let live: Vec<(&Dfa, u32)> = lexemes.iter().copied().filter(|&(_, s)| s != DEAD).collect();
        if live.is_empty() || live.iter().any(|&(d, s)| d.is_accepting(s)) {
            return 0;
        }
        let k = live.len();
        // Bytes alike for every automaton (the meet of their byte classes)...
        let mut joint = [0u16; 256];
        let mut n_joint = 1usize;
        for (d, _) in &live {
            let mut ids: rustc_hash::FxHashMap<(u16, u8), u16> = Default::default();
            for b in 0..=255u8 {
                let next = ids.len() as u16;
                joint[b as usize] = *ids.entry((joint[b as usize], d.class_of(b))).or_insert(next);
            }
            n_joint = ids.len();
        }
        // ...and, per plain-prefix state, one byte per (joint class, next plain-prefix state).
        let mut moves: [Vec<(u8, u8)>; STATES] = Default::default();
        let mut taken = vec![false; n_joint * STATES];
        for (p, m) in moves.iter_mut().enumerate() {
            taken.iter_mut().for_each(|t| *t = false);
            for b in 0..=255u8 {
                if let Some(q) = step(p as u8, b) {
                    let i = joint[b as usize] as usize * STATES + q as usize;
                    if !taken[i] {
                        taken[i] = true;
                        m.push((b, q));
                    }
                }
            }
        }
        // A joint state: the lexemes' states, then the plain-prefix state.
        let mut seen: rustc_hash::FxHashSet<Box<[u32]>> = Default::default();
        let start: Box<[u32]> = live.iter().map(|&(_, s)| s).chain([BOUNDARY as u32]).collect();
        seen.insert(start.clone());
        let mut frontier = vec![start];
        let mut next: Vec<Box<[u32]>> = Vec::new();
        let mut t = vec![0u32; k + 1];
        for depth in 0..self.max_len {
            next.clear();
            for f in &frontier {
                for &(b, q) in &moves[f[k] as usize] {
                    let mut alive = false;
                    for (j, &(d, _)) in live.iter().enumerate() {
                        let s = if f[j] == DEAD { DEAD } else { d.next(f[j], b) };
                        if s != DEAD {
                            if d.is_accepting(s) {
                                return depth;
                            }
                            alive = true;
                        }
                        t[j] = s;
                    }
                    if !alive {
                        return depth;
                    }
                    t[k] = q as u32;
                    if !seen.contains(&t[..]) {
                        if seen.len() >= MAX_JOINT_STATES {
                            return depth;
                        }
                        seen.insert(t[..].into());
                        next.push(t[..].into());
                    }
                }
            }
            if next.is_empty() {
                break;
            }
            std::mem::swap(&mut frontier, &mut next);
        }
        self.max_len
    }
}

/// Automata with at most this many states mark [`PlainSlice::safe_depth`]'s visited pairs
/// in a bitmap (a bit per pair: 8 KB at the bound); larger ones in a hash set.
const BITMAP_PAIR_STATES: usize = 8_192;

/// A set of (DFA state, plain-prefix state) pairs. Inside a length-bounded string the
/// breadth-first search of [`PlainSlice::safe_depth`] visits thousands of pairs (every
/// position up to the longest token ahead): hashed, that search was a third of the fills'
/// time on o21460 (`maxLength: 160`), each first fill at a new position 140–150 µs.
enum PairSet {
    Bits(Vec<u64>),
    Hashed(rustc_hash::FxHashSet<(u32, u8)>),
}

impl PairSet {
    /// An empty set for an automaton of `states` states.
    fn new(states: usize) -> PairSet {
        if states <= BITMAP_PAIR_STATES {
            PairSet::Bits(vec![0; (states * STATES).div_ceil(64)])
        } else {
            PairSet::Hashed(Default::default())
        }
    }

    /// Adds the pair; whether it was new.
    #[inline]
    fn insert(&mut self, q: u32, p: u8) -> bool {
        match self {
            PairSet::Bits(bits) => {
                let i = q as usize * STATES + p as usize;
                let (w, m) = (i / 64, 1u64 << (i % 64));
                let new = bits[w] & m == 0;
                bits[w] |= m;
                new
            }
            PairSet::Hashed(set) => set.insert((q, p)),
        }
    }
}

/// Where a lexeme state parts from "every plain token is allowed and no lexeme ends in it"
/// ([`PlainSlice::exceptions`]): byte sets such that a trie subtree whose bytes avoid them
/// holds no plain path on which the automaton dies or accepts.
#[derive(Debug, Clone, Default)]
pub struct Exceptions {
    /// The last bytes of such paths from any reachable point: a subtree without one of them
    /// holds none.
    pub last: ByteSet,
    /// Hubs: (DFA state, plain-prefix state) pairs with a loop, each with the first bytes of
    /// the paths from it that die or accept before coming back to it. A subtree entered at a
    /// hub without one of those bytes holds none: every step out of the hub either cannot
    /// go wrong or comes back to the hub first.
    pub hubs: Vec<(u32, u8, ByteSet)>,
    /// Per pair `q * 8 + p` (DFA state, plain-prefix state) reachable from the start: the
    /// fewest plain bytes after which the automaton can die or accept, capped at 255; 0 for a
    /// pair not reached (or an automaton too large for the table: empty). A subtree whose
    /// longest path below is shorter holds no such path. (255 stands for "255 or more", which
    /// includes "never": tokens are far shorter.)
    pub dist: Vec<u8>,
}

/// Largest automaton (in states) [`Exceptions::dist`] is kept for: eight bytes a state.
const MAX_DIST_STATES: usize = 1 << 14;

/// Most hubs [`PlainSlice::exceptions`] keeps.
const MAX_HUBS: usize = 8;

impl PlainSlice {
    /// The [`Exceptions`] of `dfa` from `state`, over the pairs (DFA state, plain-prefix
    /// state) reachable from `(state, between characters)` along plain bytes. `None` when the
    /// pairs are too many to explore, or when neither the last bytes nor any hub's first bytes
    /// hold at most `max_ascii` printable ASCII bytes (a walk would find few subtrees free of
    /// them).
    ///
    /// `^https://.+$` in a JSON string, after `https://a`: the last bytes are `A8` and `A9`
    /// (of U+2028 and U+2029, which `.` does not match), and the loop's hub has the single
    /// first byte `E2`, where a whole plain slice would not serve at all.
    pub fn exceptions(&self, dfa: &Dfa, state: u32, max_ascii: usize) -> Option<Exceptions> {
        if state == DEAD || dfa.is_accepting(state) {
            return None;
        }
        // Printable ASCII bytes that end or kill the lexeme at once are last bytes, and first
        // bytes of `state` if it is a hub: more than `max_ascii` of them, and the exceptions
        // would be of no use (most states of a walk end here, before the work below).
        if ascii_stops(dfa, state) > max_ascii {
            return None;
        }
        let groups = plain_moves(dfa);
        // The graph of pairs; an edge's target is `BAD` when the automaton dies or accepts
        // there (an accepting pair is also explored: a walk goes on below a lexeme end).
        const BAD: u32 = u32::MAX;
        let mut pairs: Vec<(u32, u8)> = vec![(state, BOUNDARY)];
        let mut index: rustc_hash::FxHashMap<(u32, u8), u32> = Default::default();
        index.insert((state, BOUNDARY), 0);
        let mut edges: Vec<(u32, u32, usize)> = Vec::new(); // (from, to or BAD, group index)
        let mut out = Exceptions::default();
        let mut k = 0;
        while k < pairs.len() {
            let (q, p) = pairs[k];
            for (gi, (b, p2, bytes)) in groups[p as usize].iter().enumerate() {
                let q2 = dfa.next(q, *b);
                if q2 == DEAD || dfa.is_accepting(q2) {
                    out.last.union_with(bytes);
                    edges.push((k as u32, BAD, gi));
                }
                if q2 != DEAD {
                    let n = pairs.len() as u32;
                    let to = *index.entry((q2, *p2)).or_insert(n);
                    if to == n {
                        if pairs.len() >= MAX_EXCEPTION_PAIRS {
                            return None;
                        }
                        pairs.push((q2, *p2));
                    }
                    edges.push((k as u32, to, gi));
                }
            }
            k += 1;
        }
        let mut preds: Vec<Vec<u32>> = vec![Vec::new(); pairs.len()];
        for &(from, to, _) in &edges {
            if to != BAD {
                preds[to as usize].push(from);
            }
        }
        let mut hubs: Vec<u32> = edges.iter().filter(|e| e.0 == e.1 && !dfa.is_accepting(pairs[e.0 as usize].0)).map(|e| e.0).collect();
        hubs.sort_unstable();
        hubs.dedup();
        let mut reach = vec![false; pairs.len()];
        for h in hubs.into_iter().take(MAX_HUBS) {
            // Pairs that can go wrong without passing through the hub.
            reach.iter_mut().for_each(|r| *r = false);
            let mut todo: Vec<u32> = edges.iter().filter(|e| e.1 == BAD && e.0 != h).map(|e| e.0).collect();
            while let Some(x) = todo.pop() {
                if x == h || std::mem::replace(&mut reach[x as usize], true) {
                    continue;
                }
                todo.extend(&preds[x as usize]);
            }
            let (q, p) = pairs[h as usize];
            let mut first = ByteSet::default();
            for &(from, to, gi) in &edges {
                if from == h && (to == BAD || (to != h && reach[to as usize])) {
                    first.union_with(&groups[p as usize][gi].2);
                }
            }
            out.hubs.push((q, p, first));
        }
        let few = |set: &ByteSet| (0x20..0x7Fu8).filter(|&b| set.contains(b)).count() <= max_ascii;
        if !few(&out.last) && !out.hubs.iter().any(|h| few(&h.2)) {
            return None;
        }
        // Fewest bytes to a death or an end, backwards from the pairs that have one next.
        if dfa.num_states() <= MAX_DIST_STATES {
            let mut dist = vec![u8::MAX; pairs.len()];
            let mut queue: std::collections::VecDeque<u32> = std::collections::VecDeque::new();
            for e in edges.iter().filter(|e| e.1 == BAD) {
                if dist[e.0 as usize] != 1 {
                    dist[e.0 as usize] = 1;
                    queue.push_back(e.0);
                }
            }
            while let Some(x) = queue.pop_front() {
                let next = dist[x as usize].saturating_add(1);
                for &y in &preds[x as usize] {
                    if dist[y as usize] > next {
                        dist[y as usize] = next;
                        queue.push_back(y);
                    }
                }
            }
            out.dist = vec![0; dfa.num_states() * STATES];
            for (k, &(q, p)) in pairs.iter().enumerate() {
                out.dist[q as usize * STATES + p as usize] = dist[k];
            }
        }
        Some(out)
    }

    /// Corrects [`PlainSlice::bits`] (already in `allowed`) for `dfa` from `state`: walks the
    /// plain paths of `trie` (the whole trie this slice was built from) only where `except`
    /// ([`PlainSlice::exceptions`]) says something may go wrong below, clears the tokens of
    /// subtrees where the automaton dies, and reports each node with children where it accepts.
    pub fn walk_exceptions(&self, trie: &TokTrie, dfa: &Dfa, state: u32, except: &Exceptions, allowed: &mut [u32], mut on_end: impl FnMut(usize)) {
        let nodes = &trie.nodes;
        let depth = trie.max_depth() + 1;
        let mut states: Vec<u32> = vec![DEAD; depth];
        let mut plain: Vec<u8> = vec![BOUNDARY; depth];
        states[0] = state;
        let mut i = 0;
        while i < nodes.len() {
            let node = nodes[i];
            let d = node.depth as usize;
            let len = node.subtree_len as usize;
            // Non-plain bytes: only tokens of the other trie lie below.
            let Some(p) = step(plain[d - 1], node.byte) else {
                i += len;
                continue;
            };
            let q = dfa.next(states[d - 1], node.byte);
            if q == DEAD {
                for &t in trie.subtree_tokens(i) {
                    allowed[t as usize / 32] &= !(1 << (t % 32));
                }
                i += len;
                continue;
            }
            if dfa.is_accepting(q) {
                if len > 1 {
                    on_end(i);
                }
            } else if len > 1 && trie.reach(i) - d < except.dist.get(q as usize * STATES + p as usize).map_or(0, |&x| x as usize) {
                // Every path below is shorter than the fewest bytes to a death or an end.
                i += len;
                continue;
            } else if len > 1 && trie.has_below_sets() {
                let below = trie.below_bytes(i);
                if !below.intersects(&except.last) || except.hubs.iter().any(|h| h.0 == q && h.1 == p && !below.intersects(&h.2)) {
                    i += len;
                    continue;
                }
            }
            states[d] = q;
            plain[d] = p;
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both kinds of [`PairSet`] (a small automaton's bitmap, a large one's hash set) say the
    /// same of the same insertions, repeated pairs and the highest pair of the bitmap
    /// included.
    #[test]
    fn pair_sets_of_either_kind_agree() {
        let states = 300;
        let mut bits = PairSet::new(states);
        assert!(matches!(bits, PairSet::Bits(_)));
        let mut hashed = PairSet::Hashed(Default::default());
        let mut rnd = crate::testutil::xorshift(12345);
        for i in 0..5_000 {
            let (q, p) = if i == 0 { (states as u32 - 1, STATES as u8 - 1) } else { (rnd(states as u64) as u32, rnd(STATES as u64) as u8) };
            assert_eq!(bits.insert(q, p), hashed.insert(q, p), "pair ({q}, {p}) at insertion {i}");
        }
        assert!(matches!(PairSet::new(BITMAP_PAIR_STATES + 1), PairSet::Hashed(_)));
    }

    /// The fewest bytes to a death of "any string not containing `ion`" (then `"`): three
    /// from the start, two after `i`, one after `io`, between characters.
    #[test]
    fn distances_to_a_death_count_the_bytes_left() {
        let limits = crate::runtime::limits::Limits::default();
        let rx = crate::frontend::regex::parse_regex(r#"([^i"\\\x00-\x1f]|i(i|oi)*([^io"\\\x00-\x1f]|o[^in"\\\x00-\x1f]))*(i(i|oi)*o?)?""#, &limits).unwrap();
        let dfa = Dfa::from_rx(&rx, &limits).unwrap();
        let trie = TokTrie::build([(0u32, &b"x"[..]), (1, b"ion"), (2, b"io"), (3, b"\xc3\xa9")].into_iter());
        let slice = PlainSlice::new(&trie);
        let run = |text: &[u8]| text.iter().fold(dfa.start(), |q, &b| dfa.next(q, b));
        let e = slice.exceptions(&dfa, dfa.start(), 256).expect("served with exceptions");
        let dist = |text: &[u8], p: u8| e.dist[run(text) as usize * STATES + p as usize];
        assert_eq!((dist(b"", BOUNDARY), dist(b"i", BOUNDARY), dist(b"io", BOUNDARY), dist(b"xio", BOUNDARY)), (3, 2, 1, 1));
        assert_eq!(dist(b"ix", BOUNDARY), 3, "back to the start after another character");
        // Inside a two-byte character: its last byte, then three more.
        assert_eq!(dist(b"\xc3", CONT1), 4);
    }

    #[test]
    fn plain_prefix_automaton_accepts_exactly_valid_plain_text() {
        let run = |bytes: &[u8]| bytes.iter().try_fold(BOUNDARY, |p, &b| step(p, b)) == Some(BOUNDARY);
        for s in ["", "abc", "é", "😀", "日本", " x~", "\u{7f}"] {
            assert!(run(s.as_bytes()), "{s:?}");
        }
        for b in [&b"\""[..], b"\\", b"\n", b"\x1f", &[0xC0, 0x80], &[0xED, 0xA0, 0x80], &[0xF4, 0x90, 0x80, 0x80], &[0xE0, 0x80, 0x80], &[0xFF], &[0xC3]] {
            assert!(!run(b), "{b:x?}");
        }
    }

    #[test]
    fn splits_tokens_and_maps_rest_nodes() {
        let toks: Vec<&[u8]> = vec![b"ab", b"ab\"", b"a", b"\\n", "é".as_bytes(), &[0xC3], b"x\x01", b"\""];
        let trie = TokTrie::build(toks.iter().enumerate().map(|(i, b)| (i as u32, *b)));
        let s = PlainSlice::new(&trie);
        let plain: Vec<u32> = (0..toks.len() as u32).filter(|&t| s.bits[t as usize / 32] >> (t % 32) & 1 == 1).collect();
        assert_eq!(plain, vec![0, 2, 4]);
        assert_eq!(s.max_len, 2);
        for (i, n) in s.rest.nodes.iter().enumerate() {
            let f = trie.nodes[s.rest_to_full[i] as usize];
            assert_eq!((f.byte, f.depth), (n.byte, n.depth));
        }
        let rest_tokens: Vec<u32> = (0..s.rest.nodes.len()).flat_map(|i| s.rest.tokens_at(i).to_vec()).collect();
        let mut sorted = rest_tokens.clone();
        sorted.sort();
        assert_eq!(sorted, vec![1, 3, 5, 6, 7]);
    }
}
