//! Code-point automata to byte automata: the UTF-8 or JSON-encoded forms of a [`CDfa`]'s
//! language, built deterministically and directly (no expression in between).
//!
//! A code point is read as raw UTF-8 bytes or, inside a JSON string, also as a short escape
//! (`\n`, `\"`…), a `\uXXXX` escape (hex digits either case) or a surrogate pair
//! `\uD8xx\uDCxx`. Each CDfa state becomes one byte state "between characters"; the bytes
//! of one character go through intermediate states, each standing for "the rest of a
//! character whose value lies in a block, mapped to next CDfa states". Intermediate states
//! are shared by everything with the same remaining mapping (memoized), so the result is
//! close to minimal: "any of the 4,096 values after `\u0`" is one state however many CDfa
//! states lead there. Building an expression instead (the CDfa as a regex, each class
//! spelled out with its escapes) and determinizing it made automata up to ten times larger
//! than minimal and took milliseconds per key set.

use crate::cdfa::CDfa;
use corral_core::{ByteAutomaton, FlatTables, LazyFacts};
use hashbrown::HashTable;
use rustc_hash::FxHashMap;
use crate::shared_cache::SharedCache;
use std::sync::{Arc, OnceLock};

/// Largest code-point automaton made one terminal (and four times that in bytes); larger
/// ones become one rule per state. `uri-reference` has 182 states; the exact leap seconds of
/// `date-time` (11,007) stay rules.
pub(crate) const AUTOMATON_TERMINAL_STATES: usize = 2000;

/// What the bytes still to come encode.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Kind {
    /// `k` UTF-8 continuation bytes (6 bits each).
    Cont(u8),
    /// `k` hex digits (4 bits each).
    Hex(u8),
    /// `\u` and four hex digits of a low surrogate; the mapping is over its 10 bits.
    LowSurrogate,
}

impl Kind {
    /// Number of distinct kinds ([`Kind::index`]).
    const COUNT: usize = 8;

    /// A dense index: `Cont(1..=3)`, `Hex(1..=4)`, `LowSurrogate`.
    fn index(self) -> usize {
        debug_assert!(matches!(self, Kind::Cont(1..=3) | Kind::Hex(1..=4) | Kind::LowSurrogate), "{self:?}");
        match self {
            Kind::Cont(k) => k as usize - 1,
            Kind::Hex(k) => 2 + k as usize,
            Kind::LowSurrogate => 7,
        }
    }
}

/// A value-to-state mapping: sorted, disjoint `(lo, hi, target)`; values not covered are dead.
type Map = Vec<(u32, u32, u32)>;

/// One byte range and its target: `(lo, hi, target)`, inclusive.
type Edge = (u8, u8, u32);

struct Builder<'a> {
    d: &'a CDfa,
    out: FlatTables,
    /// Intermediate states by what they still read: one table per kind ([`Kind::index`]) of
    /// `(hash, key start, key length, state)`, the keys back to back in `keys`: a lookup, hit
    /// or miss, allocates nothing. (The builder made three to four allocations per state —
    /// the memo key, the row, scratch maps — and on the cold caches of a first compile each
    /// one is a cache miss.)
    memo: [HashTable<(u64, u32, u32, u32)>; Kind::COUNT],
    keys: Vec<(u32, u32, u32)>,
    /// Lead-byte edges of states whose non-ASCII characters all go to one state, by it.
    uniform_leads: FxHashMap<u32, Vec<Edge>>,
    /// Spare maps and edge lists (the builder recurses through [`Builder::node`]; each level
    /// takes its own and gives it back).
    maps: Vec<Map>,
    rows: Vec<Vec<Edge>>,
}

fn map_hash(map: &[(u32, u32, u32)]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    map.hash(&mut h);
    h.finish()
}

/// Appends the part of `map` inside `[lo, hi]` to `out`, shifted so that `origin` becomes 0.
fn slice_into(map: &[(u32, u32, u32)], lo: u32, hi: u32, origin: u32, out: &mut Map) {
    let i = map.partition_point(|&(_, b, _)| b < lo);
    for &(a, b, t) in &map[i..] {
        if a > hi {
            break;
        }
        out.push((a.max(lo) - origin, b.min(hi) - origin, t));
    }
}

/// Appends `map` without the values in any of `holes` (sorted, disjoint) to `out`, in one pass.
fn remove_all_into(map: &[(u32, u32, u32)], holes: &[(u32, u32)], out: &mut Map) {
    out.reserve(map.len() + holes.len());
    let mut h = 0;
    for &(a, b, t) in map {
        let mut a = a;
        while h < holes.len() && holes[h].1 < a {
            h += 1;
        }
        let mut k = h;
        while a <= b {
            match holes.get(k) {
                Some(&(lo, hi)) if lo <= b => {
                    if a < lo {
                        out.push((a, lo - 1, t));
                    }
                    if hi >= b {
                        break;
                    }
                    a = a.max(hi + 1);
                    k += 1;
                }
                _ => {
                    out.push((a, b, t));
                    break;
                }
            }
        }
    }
}

/// The target of value `v`, if any.
fn lookup(map: &[(u32, u32, u32)], v: u32) -> Option<u32> {
    let i = map.partition_point(|&(_, b, _)| b < v);
    map.get(i).filter(|&&(a, _, _)| a <= v).map(|&(_, _, t)| t)
}

impl Builder<'_> {
    /// An empty map from the spares.
    fn take_map(&mut self) -> Map {
        let mut m = self.maps.pop().unwrap_or_default();
        m.clear();
        m
    }

    /// An empty edge list from the spares.
    fn take_row(&mut self) -> Vec<Edge> {
        let mut r = self.rows.pop().unwrap_or_default();
        r.clear();
        r
    }

    /// The state reading the rest of a character of kind `kind` whose remaining value is
    /// mapped by `map` (relative to the block), or `None` when every value is dead.
    fn node(&mut self, kind: Kind, map: &[(u32, u32, u32)]) -> Option<u32> {
        if map.is_empty() {
            return None;
        }
        let h = map_hash(map);
        let keys = &self.keys;
        if let Some(&(_, _, _, s)) = self.memo[kind.index()].find(h, |&(kh, at, n, _)| kh == h && &keys[at as usize..(at + n) as usize] == map) {
            return Some(s);
        }
        // (Its row comes after its successors': `set_row` below.)
        let s = self.out.push_state([], false);
        self.memo[kind.index()].insert_unique(h, (h, self.keys.len() as u32, map.len() as u32, s), |e| e.0);
        self.keys.extend_from_slice(map);
        let mut edges = self.take_row();
        match kind {
            Kind::Cont(k) => {
                let unit = 1u32 << (6 * (k as u32 - 1));
                self.digits(map, 64, unit, cont_bytes, Kind::Cont(k - 1), &mut edges);
            }
            Kind::Hex(k) => {
                let unit = 1u32 << (4 * (k as u32 - 1));
                self.digits(map, 16, unit, hex_bytes, Kind::Hex(k - 1), &mut edges);
            }
            Kind::LowSurrogate => {
                let mut shifted = self.take_map();
                shifted.extend(map.iter().map(|&(a, b, t)| (a + 0xDC00, b + 0xDC00, t)));
                let hex = self.node(Kind::Hex(4), &shifted).expect("non-empty mapping");
                self.maps.push(shifted);
                let u = self.out.push_state([(b'u', b'u', hex)], false);
                edges.push((b'\\', b'\\', u));
            }
        }
        edges.sort_unstable();
        self.out.set_row(s, edges.iter().copied());
        self.rows.push(edges);
        Some(s)
    }

    /// Edges for one digit position of radix `radix` (each digit covering `unit` values):
    /// runs of digits whose values all go to one target share one child.
    fn digits(&mut self, map: &[(u32, u32, u32)], radix: u32, unit: u32, bytes: impl Fn((u32, u32)) -> DigitBytes, child_kind: Kind, edges: &mut Vec<Edge>) {
        let mut d = 0u32;
        while d < radix {
            let (lo, hi) = (d * unit, d * unit + unit - 1);
            let i = map.partition_point(|&(_, b, _)| b < lo);
            // A digit whose whole block is inside one segment (or one gap).
            let uniform = match map.get(i) {
                Some(&(a, b, t)) if a <= lo => (b >= hi).then_some((Some(t), b)),
                Some(&(a, _, _)) => (a > hi).then_some((None, a - 1)),
                None => Some((None, radix * unit - 1)),
            };
            let (end, child) = match uniform {
                Some((t, last)) => {
                    let end = ((last as u64 + 1) / unit as u64).min(radix as u64) as u32;
                    let child = t.and_then(|t| self.child(child_kind, unit, &[(0, unit - 1, t)]));
                    (end, child)
                }
                None => (d + 1, {
                    let mut m = self.take_map();
                    slice_into(map, lo, hi, lo, &mut m);
                    let c = self.child(child_kind, unit, &m);
                    self.maps.push(m);
                    c
                }),
            };
            if let Some(c) = child {
                let (n, ranges) = bytes((d, end - 1));
                for &(a, b) in &ranges[..n] {
                    edges.push((a, b, c));
                }
            }
            d = end;
        }
    }

    /// The state after one more digit: a CDfa state when no digit remains.
    fn child(&mut self, kind: Kind, unit: u32, map: &[(u32, u32, u32)]) -> Option<u32> {
        if unit == 1 {
            return map.first().map(|&(_, _, t)| t);
        }
        self.node(kind, map)
    }

    /// Edges of CDfa state `q`'s byte state: raw UTF-8 and (when `json`) escapes.
    fn boundary(&mut self, q: usize, json: bool) {
        let d = self.d;
        let full: &[(u32, u32, u32)] = &d.trans[q];
        // What raw bytes may spell: no surrogates; in JSON no control characters, `"` or `\`.
        let mut raw = self.take_map();
        remove_all_into(full, if json { &JSON_RAW_HOLES } else { &[(0xD800, 0xDFFF)] }, &mut raw);
        let mut edges = self.take_row();
        // One byte.
        for &(a, b, t) in &raw {
            if a > 0x7F {
                break;
            }
            edges.push((a as u8, b.min(0x7F) as u8, t));
        }
        // Lead bytes of 2, 3 and 4 byte sequences. When every non-ASCII character goes to one
        // state (all but the last states of a key trie, any-character loops), the edges
        // depend on that state alone and are built once.
        let i = raw.partition_point(|&(_, b, _)| b < 0x80);
        let uniform = match raw[i..] {
            [(a, b, t), (c, e, t2)] if a <= 0x80 && b == 0xD7FF && c == 0xE000 && e >= 0x10FFFF && t == t2 => Some(t),
            _ => None,
        };
        // (Lead edges are merged before they are kept: a uniform state's 51 lead bytes go to
        // a handful of states.)
        match uniform.and_then(|t| self.uniform_leads.get(&t)) {
            Some(e) => edges.extend_from_slice(e),
            None => {
                let mut leads = self.take_row();
                self.lead_edges(&raw, &mut leads);
                merge_edges(&mut leads);
                edges.extend_from_slice(&leads);
                match uniform {
                    Some(t) => {
                        self.uniform_leads.insert(t, leads);
                    }
                    None => self.rows.push(leads),
                }
            }
        }
        self.maps.push(raw);
        // The edges are sorted already (one-byte ranges below 0x80, lead bytes above), and
        // disjoint: `\` (not in `raw`) goes in its place.
        if json {
            if let Some(e) = self.escape_state(full) {
                let at = edges.partition_point(|&(lo, _, _)| lo < b'\\');
                edges.insert(at, (b'\\', b'\\', e));
            }
        }
        debug_assert!(edges.windows(2).all(|w| w[0].1 < w[1].0), "sorted, disjoint");
        merge_edges(&mut edges);
        self.out.set_row(q as u32, edges.iter().copied());
        self.rows.push(edges);
    }

    /// Edges on the lead bytes of 2, 3 and 4 byte sequences for the raw mapping `raw`.
    fn lead_edges(&mut self, raw: &[(u32, u32, u32)], edges: &mut Vec<Edge>) {
        let mut m = self.take_map();
        for (leads, bits, k, min) in [(0xC2u32..=0xDF, 6u32, 1u8, 0x80u32), (0xE0..=0xEF, 12, 2, 0x800), (0xF0..=0xF4, 18, 3, 0x10000)] {
            let mask = (1u32 << (8 - k as u32 - 2)) - 1;
            for lead in leads {
                let base = (lead & mask) << bits;
                let (lo, hi) = (base.max(min), (base + (1 << bits) - 1).min(0x10FFFF));
                if lo > hi {
                    continue;
                }
                m.clear();
                slice_into(raw, lo, hi, base, &mut m);
                if let Some(c) = self.node(Kind::Cont(k), &m) {
                    edges.push((lead as u8, lead as u8, c));
                }
            }
        }
        self.maps.push(m);
    }

    /// The state after `\` for the mapping `full` of one CDfa state.
    fn escape_state(&mut self, full: &[(u32, u32, u32)]) -> Option<u32> {
        let mut edges = self.take_row();
        for (byte, c) in [(b'"', '"'), (b'\\', '\\'), (b'/', '/'), (b'b', '\u{8}'), (b'f', '\u{c}'), (b'n', '\n'), (b'r', '\r'), (b't', '\t')] {
            if let Some(t) = lookup(full, c as u32) {
                edges.push((byte, byte, t));
            }
        }
        // `\uXXXX`: BMP values except surrogates go straight to targets; a high surrogate
        // leads to the low surrogate of its block of 1,024 astral code points.
        let (mut bmp, mut block) = (self.take_map(), self.take_map());
        slice_into(full, 0, 0xFFFF, 0, &mut block);
        remove_all_into(&block, &[(0xD800, 0xDFFF)], &mut bmp);
        let mut h = 0xD800u32;
        while h <= 0xDBFF {
            let base = 0x10000 + ((h - 0xD800) << 10);
            block.clear();
            slice_into(full, base, base + 0x3FF, base, &mut block);
            // Blocks wholly inside one segment share one low-surrogate state.
            let run_end = match block.as_slice() {
                [(0, 0x3FF, _)] => {
                    let i = full.partition_point(|&(_, b, _)| b < base);
                    let last = full[i].1.min(0x10FFFF);
                    (0xD800 + ((last + 1 - 0x10000) >> 10) - 1).clamp(h, 0xDBFF)
                }
                [] => {
                    let i = full.partition_point(|&(_, b, _)| b < base);
                    let next = full.get(i).map(|s| s.0).unwrap_or(0x110000);
                    (0xD800 + ((next.min(0x110000) - 0x10000) >> 10)).saturating_sub(1).clamp(h, 0xDBFF)
                }
                _ => h,
            };
            if let Some(low) = self.node(Kind::LowSurrogate, &block) {
                bmp.push((h, run_end, low));
            }
            h = run_end + 1;
        }
        bmp.sort_unstable();
        if let Some(u) = self.node(Kind::Hex(4), &bmp) {
            edges.push((b'u', b'u', u));
        }
        self.maps.push(bmp);
        self.maps.push(block);
        if edges.is_empty() {
            self.rows.push(edges);
            return None;
        }
        edges.sort_unstable();
        let e = self.out.push_state(edges.iter().copied(), false);
        self.rows.push(edges);
        Some(e)
    }
}

/// Up to three byte ranges spelling a run of digits: how many, and the ranges.
type DigitBytes = (usize, [(u8, u8); 3]);

/// Bytes of hex digit values `d.0..=d.1` (either case for A–F).
fn hex_bytes(d: (u32, u32)) -> DigitBytes {
    let mut out = (0, [(0, 0); 3]);
    let mut push = |r: (u8, u8)| {
        out.1[out.0] = r;
        out.0 += 1;
    };
    let (a, b) = d;
    if a <= 9 {
        push((b'0' + a as u8, b'0' + b.min(9) as u8));
    }
    if b >= 10 {
        let (x, y) = (a.max(10) as u8 - 10, b as u8 - 10);
        push((b'A' + x, b'A' + y));
        push((b'a' + x, b'a' + y));
    }
    out
}

/// Bytes of UTF-8 continuation values `d.0..=d.1` (six bits each).
fn cont_bytes(d: (u32, u32)) -> DigitBytes {
    (1, [(0x80 + d.0 as u8, 0x80 + d.1 as u8), (0, 0), (0, 0)])
}

/// Merges adjacent ranges with the same target (edges sorted), in place.
fn merge_edges(edges: &mut Vec<(u8, u8, u32)>) {
    merge_edges_from(edges, 0);
}

/// [`merge_edges`] on the edges from `at` on (one row at the end of a buffer of rows).
fn merge_edges_from(edges: &mut Vec<(u8, u8, u32)>, at: usize) {
    let mut n = at;
    for i in at..edges.len() {
        let (a, b, t) = edges[i];
        if n > at {
            let last = &mut edges[n - 1];
            if last.2 == t && last.1 as u16 + 1 == a as u16 {
                last.1 = b;
                continue;
            }
        }
        edges[n] = (a, b, t);
        n += 1;
    }
    edges.truncate(n);
}

/// The states and edges of [`build`]'s automaton.
fn build_tables(d: &CDfa, json: bool) -> FlatTables {
    if !json && d.trans.iter().all(|row| row.last().is_none_or(|&(_, b, _)| b < 0x80)) {
        // ASCII only (a bounded number's forms): each code point is its byte, so the states
        // and edges are the code-point automaton's — what the builder below gives them, in a
        // twelfth of a bounded number's compile less.
        let mut t = FlatTables { edges: Vec::with_capacity(d.trans.iter().map(Vec::len).sum()), span: Vec::with_capacity(d.len()), accept: d.accept.clone() };
        for row in &d.trans {
            let at = t.edges.len();
            t.edges.extend(row.iter().map(|&(a, b, t)| (a as u8, b as u8, t)));
            merge_edges_from(&mut t.edges, at);
            t.span.push((at as u32, (t.edges.len() - at) as u32));
        }
        return t;
    }
    built_tables(d, json)
}

/// [`build_tables`] through the byte-sequence builder (any code points).
fn built_tables(d: &CDfa, json: bool) -> FlatTables {
    let n = d.len();
    let out = FlatTables { edges: Vec::with_capacity(n * 8), span: vec![(0, 0); n], accept: d.accept.clone() };
    let mut b = Builder { d, out, memo: Default::default(), keys: Vec::new(), uniform_leads: FxHashMap::default(), maps: Vec::new(), rows: Vec::new() };
    // Every state of a key trie has its own `\uXXXX` path (one new node per hex digit):
    // room for them up front instead of rehashing as they come.
    if json {
        for k in 1..=4 {
            b.memo[Kind::Hex(k).index()].reserve(n, |e| e.0);
        }
        b.keys.reserve(n * 8);
    }
    for q in 0..n {
        b.boundary(q, json);
    }
    b.out
}

fn build(d: &CDfa, json: bool) -> ByteAutomaton {
    ByteAutomaton::from_flat(build_tables(d, json), d.start)
}

/// Code points a JSON string never holds raw (control characters, `"`, `\`, surrogates).
const JSON_RAW_HOLES: [(u32, u32); 4] = [(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0xD800, 0xDFFF)];

/// A key-set-shaped CDfa state ([`lazy_facts`]) seen from its edges `full`: the bytes
/// leaving its byte state in the JSON encoding — what [`Builder::boundary`] gives it, without
/// building it: raw ASCII but what JSON escapes, every lead byte when its non-ASCII
/// characters go somewhere, and `\` when any character can be escaped (every scalar value
/// can) — and where its non-ASCII characters go: `Some(None)` nowhere, `Some(Some(t))` all to
/// `t`; `None` when they are split (not key-set-shaped). Allocates nothing.
fn key_set_state(full: &[(u32, u32, u32)]) -> Option<(corral_core::ByteSet, Option<u32>)> {
    const NON_ASCII: u64 = (0xD7FF - 0x80 + 1) + (0x10FFFF - 0xE000 + 1);
    let mut first = corral_core::ByteSet::default();
    let (mut target, mut covered, mut any, mut pieces) = (None, 0u64, false, 0);
    for &(a, b, t) in full {
        for (lo, hi) in [(a, b.min(0xD7FF)), (a.max(0xE000), b)] {
            if lo > hi {
                continue;
            }
            any = true;
            for c in lo..=hi.min(0x7F) {
                if !JSON_RAW_HOLES.iter().any(|&(a, b)| a <= c && c <= b) {
                    first.insert(c as u8);
                }
            }
            let lo = lo.max(0x80);
            if lo <= hi {
                if target.is_some_and(|x| x != t) {
                    return None;
                }
                target = Some(t);
                covered += (hi - lo + 1) as u64;
                pieces += 1;
            }
        }
    }
    // (All of them in the two merged pieces around the surrogates: adjacent edges to one
    // state left unmerged would add nodes the state bound does not count.)
    if covered != 0 && (covered != NON_ASCII || pieces > 2) {
        return None;
    }
    if covered != 0 {
        first.insert_range(0xC2, 0xF4);
    }
    if any {
        first.insert(b'\\');
    }
    Some((first, target))
}

/// What `map` does on the aligned block `[lo, hi]`: `Some(None)` nothing, `Some(Some(t))`
/// all of it to `t`, `None` split.
fn block(map: &[(u32, u32, u32)], lo: u32, hi: u32) -> Option<Option<u32>> {
    let i = map.partition_point(|&(_, b, _)| b < lo);
    match map.get(i) {
        Some(&(a, b, t)) if a <= lo && b >= hi => Some(Some(t)),
        Some(&(a, _, _)) if a <= hi => None,
        _ => Some(None),
    }
}

/// What lowering needs of `d`'s JSON encoding without building it ([`ByteAutomaton::lazy`]),
/// when `d` is shaped like a key set ("any name but these"): every state sends all its
/// non-ASCII characters to one state, or none. Patterns and formats over ASCII (or over any
/// character past a prefix) have that shape too and are built lazily alike. `None` for
/// anything else, whose encoding is then built at once.
///
/// The state bound: each CDfa state's byte state, its `\` state, and the nodes of its own
/// `\uXXXX` paths (the `\u` state, `\u0`, `\u00`, and one per 16-character ASCII block
/// its characters do not all send to one state: at most 13); plus at most 32 nodes shared by
/// all states per target that a whole 16-character block or all non-ASCII characters go to
/// (the continuation bytes of raw characters, the rest of `\uXXXX` and of surrogate pairs).
fn lazy_facts(d: &CDfa) -> Option<LazyFacts> {
    let n = d.len();
    if n == 0 {
        return None;
    }
    let mut shared_targets: Vec<u32> = Vec::new();
    let mut own = 0usize;
    let mut summary = corral_core::Summary::default();
    for (q, full) in d.trans.iter().enumerate() {
        let (first, target) = key_set_state(full)?;
        shared_targets.extend(target);
        for blk in 0..8u32 {
            match block(full, blk * 16, blk * 16 + 15) {
                Some(t) => shared_targets.extend(t),
                None => own += 1,
            }
        }
        own += 5;
        if q == d.start as usize {
            summary.start_out = first;
        }
        if d.accept[q] {
            summary.accept_out.union_with(&first);
        }
    }
    shared_targets.sort_unstable();
    shared_targets.dedup();
    let len_bound = own + 32 * shared_targets.len() + 16;
    if len_bound > AUTOMATON_TERMINAL_STATES * 4 {
        return None;
    }
    // An accepting state reached over at least one character that has a spelling (every
    // scalar value; not a lone surrogate).
    let spellable = |&(a, b, _): &(u32, u32, u32)| !(a >= 0xD800 && b <= 0xDFFF);
    let mut seen = vec![false; n];
    let mut stack: Vec<u32> = d.trans[d.start as usize].iter().filter(|e| spellable(e)).map(|e| e.2).collect();
    while let Some(q) = stack.pop() {
        let q = q as usize;
        if seen[q] {
            continue;
        }
        seen[q] = true;
        if d.accept[q] {
            summary.has_nonempty = true;
            break;
        }
        stack.extend(d.trans[q].iter().filter(|e| spellable(e)).map(|e| e.2));
    }
    Some(LazyFacts { nullable: d.accept[d.start as usize], summary, len_bound, size_estimate: len_bound * LAZY_EDGES_PER_STATE })
}

/// States plus edges per state assumed for a lazy automaton's size ([`lazy_facts`]; the size
/// only weighs it against lowering's expression limit of 200,000 by default; a key set of
/// JSONSchemaBench's o12409 has 1,228 states and 10,452 states plus edges, under a stated
/// bound of 1,270 states).
const LAZY_EDGES_PER_STATE: usize = 8;

/// `d` as a flat list of numbers (what a lazy automaton of it is keyed by).
fn cdfa_key(d: &CDfa, json: bool) -> Vec<u32> {
    let mut k = Vec::with_capacity(3 + d.len() * 2 + d.trans.iter().map(|t| t.len() * 3).sum::<usize>());
    k.extend([json as u32, d.start, d.len() as u32]);
    for (t, &acc) in d.trans.iter().zip(&d.accept) {
        k.push(((t.len() as u32) << 1) | acc as u32);
        for &(a, b, x) in t {
            k.extend([a, b, x]);
        }
    }
    k
}

/// The JSON-encoded forms (inside the quotes) of the strings of `d`.
pub fn json_automaton(d: &CDfa) -> ByteAutomaton {
    build(d, true)
}

/// The UTF-8 forms of the strings of `d`.
pub fn utf8_automaton(d: &CDfa) -> ByteAutomaton {
    build(d, false)
}

/// [`json_automaton`] (`json`) or [`utf8_automaton`] of `d`, cached process-wide by the
/// automaton itself: formats, patterns and common key sets recur across schemas.
pub fn shared(d: &Arc<CDfa>, json: bool) -> Arc<ByteAutomaton> {
    // (Keyed by the caller's automaton itself: a miss keeps a reference to it, and a lazily
    // encoded automaton builds from the same one, instead of two copies of every state's row.)
    static JSON: SharedCache<Arc<CDfa>, Arc<ByteAutomaton>> = SharedCache::new(1024);
    static UTF8: SharedCache<Arc<CDfa>, Arc<ByteAutomaton>> = SharedCache::new(1024);
    (if json { &JSON } else { &UTF8 }).get_or_build_by(&**d, || d.clone(), || Arc::new(if json { lazy_json(d) } else { build(d, false) }))
}

/// [`json_automaton`] of `d`, built on first use when [`lazy_facts`] can tell what lowering
/// needs of it before (key sets, and patterns or formats of the same shape), else now.
fn lazy_json(d: &Arc<CDfa>) -> ByteAutomaton {
    match lazy_facts(d) {
        Some(facts) => {
            let src = d.clone();
            ByteAutomaton::lazy(cdfa_key(d, true), d.start, facts, Arc::new(move || build_tables(&src, true)))
        }
        None => build(d, true),
    }
}

/// The JSON-encoded forms of one character of `ranges` (code point ranges), cached
/// process-wide: the same classes (any character, digits, a literal's letters) recur in
/// every schema. One ASCII character (most of a literal key or enum value) is looked up in a
/// fixed table, without the shared cache's lock and key allocations.
pub fn json_class(ranges: &[(u32, u32)]) -> Arc<ByteAutomaton> {
    static CACHE: SharedCache<Vec<(u32, u32)>, Arc<ByteAutomaton>> = SharedCache::new(4096);
    if let [(a, b)] = ranges {
        if a == b && *a < 128 {
            return ascii_class(*a as u8).clone();
        }
    }
    let ranges = corral_core::normalize_ranges(ranges);
    CACHE.get_or_build(ranges.clone(), || class_automaton(&ranges))
}

/// [`json_class`] of one ASCII character, from a fixed table.
fn ascii_class(c: u8) -> &'static Arc<ByteAutomaton> {
    static ASCII: [OnceLock<Arc<ByteAutomaton>>; 128] = [const { OnceLock::new() }; 128];
    ASCII[c as usize].get_or_init(|| class_automaton(&[(c as u32, c as u32)]))
}

/// The JSON-encoded forms of one character of `ranges` (normalized).
fn class_automaton(ranges: &[(u32, u32)]) -> Arc<ByteAutomaton> {
    let d = CDfa { trans: vec![ranges.iter().map(|&(a, b)| (a, b, 1)).collect(), Vec::new()], accept: vec![false, true], start: 0 };
    match ranges[..] {
        // One code point: each intermediate state is reached by one spelling (up to the
        // case of hex digits), which bounds unions of literals made of such pieces.
        [(a, b)] if a == b => Arc::new(json_automaton(&d).single_char()),
        _ => Arc::new(json_automaton(&d)),
    }
}

/// Key tag of [`json_literal`]'s lazy automata (`cdfa_key` keys start with 0 or 1).
const LITERAL_KEY: u32 = 0x4C49_5400;

/// The quoted JSON string whose value is `s`, in every spelling: `"`, each character's
/// encoded forms ([`json_class`]), `"` — as one automaton, built on first use, instead of a
/// list of one automaton per character. A key or enum value was that list, hashed, flattened
/// into its neighbours' lists and summarized part by part through lowering (o84878's 196
/// names and values: a fifth of its compile, session 23); most are never built (the keys of
/// the branches a generation does not take). The automaton is the pieces' concatenation
/// state for state: each character's states but its start, which is the state before it
/// (the opening quote's, or the previous character's accepting state).
pub fn json_literal(s: &Arc<str>) -> Arc<ByteAutomaton> {
    Arc::new(literal_piece(s, true, true).json_literal())
}

/// A piece of a long JSON string literal whose value is `s`, in every spelling: the opening
/// quote when `open`, each character's encoded forms, the closing quote when `close` (see
/// [`json_literal`]; both quotes: the same automaton, unmarked). A string of a million
/// characters is one automaton of millions of states, over every limit a grammar's terminal
/// has; as a sequence of pieces, each is built when the generation reaches it.
pub fn json_literal_piece(s: &Arc<str>, open: bool, close: bool) -> Arc<ByteAutomaton> {
    assert!(!s.is_empty() || (open && close), "a piece without both quotes holds a character");
    Arc::new(literal_piece(s, open, close))
}

fn literal_piece(s: &Arc<str>, open: bool, close: bool) -> ByteAutomaton {
    // Exact state count: the state before `"` (when open), the first character's start, each
    // character's states but its start, the state after the closing `"` (when close).
    let len = 1 + open as usize + close as usize + s.chars().map(|c| class_len(c) - 1).sum::<usize>();
    let mut summary = corral_core::Summary::default();
    if open {
        summary.start_out.insert(b'"');
    } else {
        let c = s.chars().next().expect("a piece without its opening quote holds a character");
        with_class(c, |a| {
            for &(lo, hi, _) in a.edges(a.start() as usize) {
                for b in lo..=hi {
                    summary.start_out.insert(b);
                }
            }
        });
    }
    summary.has_nonempty = true;
    let facts = LazyFacts { nullable: false, summary, len_bound: len, size_estimate: 2 * len };
    let mut key = Vec::with_capacity(1 + s.len());
    key.push(LITERAL_KEY | (!open as u32) | ((!close as u32) << 1));
    key.extend(s.chars().map(|c| c as u32));
    let text = s.clone();
    ByteAutomaton::lazy(key, 0, facts, Arc::new(move || literal_tables(&text, len, open, close)))
}

/// The number of states of the [`json_class`] automaton of the one character `c`; for an
/// ASCII character from a table of 128 bytes (a literal's characters are counted when it is
/// made, on cold caches: following each one's automaton was a cache miss or four).
fn class_len(c: char) -> usize {
    use std::sync::atomic::{AtomicU8, Ordering};
    static ASCII_LENS: [AtomicU8; 128] = [const { AtomicU8::new(0) }; 128];
    if (c as u32) < 128 {
        let slot = &ASCII_LENS[c as usize];
        let n = slot.load(Ordering::Relaxed);
        if n != 0 {
            return n as usize;
        }
        let n = ascii_class(c as u8).len();
        debug_assert!((1..256).contains(&n), "an ASCII character's spellings take a handful of states");
        slot.store(n as u8, Ordering::Relaxed);
        return n;
    }
    with_class(c, |a| a.len())
}

/// `f` of the [`json_class`] automaton of the one character `c` (without cloning it for an
/// ASCII character).
fn with_class<T>(c: char, f: impl FnOnce(&ByteAutomaton) -> T) -> T {
    let r = [(c as u32, c as u32)];
    if (c as u32) < 128 {
        return f(ascii_class(c as u8));
    }
    f(&json_class(&r))
}

/// The states of [`json_literal_piece`]`(s, open, close)` (`len` of them), numbered in the
/// order they are met.
fn literal_tables(s: &str, len: usize, open: bool, close: bool) -> FlatTables {
    let mut t = FlatTables::with_capacity(len, 2 * len);
    // State 0 reads the opening quote into state 1, the first character's start.
    if open {
        t.push_state([(b'"', b'"', 1)], false);
    }
    let mut at = t.push_state([], false); // the current character's start
    for c in s.chars() {
        at = with_class(c, |a| {
            debug_assert!(a.is_single_char());
            // Its states but the start follow those so far, in order; the start is `at`.
            let (start, base) = (a.start(), t.len() as u32);
            let id = |q: u32| match q.cmp(&start) {
                std::cmp::Ordering::Equal => at,
                std::cmp::Ordering::Less => base + q,
                std::cmp::Ordering::Greater => base + q - 1,
            };
            let mut end = at;
            for q in 0..a.len() as u32 {
                let row = a.edges(q as usize).iter().map(|&(lo, hi, x)| (lo, hi, id(x)));
                if q == start {
                    t.set_row(at, row);
                } else {
                    debug_assert!(!a.accepts(q as usize) || a.edges(q as usize).is_empty(), "a character's accepting state ends it");
                    t.push_state(row, false);
                    if a.accepts(q as usize) {
                        end = id(q);
                    }
                }
            }
            end
        });
    }
    if close {
        let last = t.push_state([], true);
        t.set_row(at, [(b'"', b'"', last)]);
    } else {
        t.accept[at as usize] = true;
    }
    debug_assert_eq!(t.len(), len);
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_core::Rx;

    /// Characters a JSON string must escape (control characters, `"` and `\`).
    fn must_escape(c: u32) -> bool {
        c < 0x20 || c == '"' as u32 || c == '\\' as u32
    }

    fn json_forms(c: char) -> Vec<String> {
        let mut out = vec![];
        if !must_escape(c as u32) {
            out.push(c.to_string());
        }
        let short = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '/' => Some("\\/"),
            '\u{8}' => Some("\\b"),
            '\u{c}' => Some("\\f"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            _ => None,
        };
        out.extend(short.map(String::from));
        let mut units = [0u16; 2];
        let enc: Vec<String> = c.encode_utf16(&mut units).iter().map(|u| format!("\\u{u:04x}")).collect();
        out.push(enc.concat());
        out.push(enc.concat().to_uppercase().replace("\\U", "\\u"));
        out
    }

    /// ASCII-only automata (bounded numbers) skip the byte-sequence builder and get exactly
    /// its tables.
    #[test]
    fn ascii_automata_take_the_direct_path_with_the_builders_result() {
        // Random ASCII automata, unmerged adjacent edges included, and a bounded number's.
        let mut rnd = corral_core::testutil::xorshift(0x5151_ab1e_0dd_c0de);
        for _ in 0..300 {
            let n = 1 + rnd(6) as usize;
            let trans: Vec<Vec<(u32, u32, u32)>> = (0..n)
                .map(|_| {
                    let mut row = Vec::new();
                    let mut c = rnd(20) as u32;
                    while c < 0x7F {
                        let w = rnd(8) as u32;
                        let hi = (c + w).min(0x7F);
                        row.push((c, hi, rnd(n as u64) as u32));
                        c = hi + 1 + rnd(3) as u32 * (rnd(2) as u32);
                    }
                    row
                })
                .collect();
            let accept = (0..n).map(|_| rnd(2) == 0).collect();
            let d = CDfa { trans, accept, start: 0 };
            assert_eq!(build_tables(&d, false), built_tables(&d, false), "{d:?}");
        }
        let num = CDfa::from_rx(&crate::numbers::restricted_number(), 10_000).unwrap();
        let bounded = num.product(&crate::numbers::interval(&crate::numbers::Bound::Incl(crate::numbers::Dec::parse("256").unwrap()), &crate::numbers::Bound::None).unwrap(), true, 10_000).unwrap();
        for d in [num, bounded] {
            assert_eq!(build_tables(&d, false), built_tables(&d, false));
        }
    }

    /// `remove_all_into` appends exactly the mapped values outside every hole, with their targets,
    /// on random maps whose boundaries fall next to the holes' (checked value by value at
    /// every boundary and its neighbours).
    #[test]
    fn remove_all_into_keeps_exactly_the_values_outside_the_holes() {
        let mut rnd = corral_core::testutil::xorshift(0x9E37_79B9_7F4A_7C15);
        let holes = [(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0xD800, 0xDFFF)];
        let points = [0u32, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7F, 0xD7FF, 0xD800, 0xDFFF, 0xE000, 0x10FFFF];
        for _ in 0..2000 {
            let mut cuts: Vec<u32> = (0..rnd(8)).map(|_| if rnd(2) == 0 { points[rnd(points.len() as u64) as usize] } else { rnd(0x11_0000) as u32 }).collect();
            cuts.sort_unstable();
            cuts.dedup();
            let mut map = Vec::new();
            for w in cuts.chunks(2) {
                match *w {
                    // Sometimes a single value (`a..=a`).
                    [a, b] => map.push((a, if rnd(4) == 0 { a } else { b }, rnd(5) as u32)),
                    [a] => map.push((a, a, rnd(5) as u32)),
                    _ => {}
                }
            }
            let mut out = vec![(7, 7, 7)];
            remove_all_into(&map, &holes, &mut out);
            assert_eq!(out.remove(0), (7, 7, 7), "appended after what the list held");
            assert!(out.windows(2).all(|w| w[0].1 < w[1].0) && out.iter().all(|r| r.0 <= r.1), "{out:x?}");
            let bounds = map.iter().map(|&(a, b, _)| (a, b)).chain(holes);
            let probes = bounds.flat_map(|(a, b)| [a.saturating_sub(1), a, a + 1, b.saturating_sub(1), b, b + 1]);
            for v in probes {
                let kept = if holes.iter().any(|&(lo, hi)| lo <= v && v <= hi) { None } else { lookup(&map, v) };
                assert_eq!(lookup(&out, v), kept, "value {v:#x} of {map:x?}");
            }
        }
    }

    /// Every character near the interesting boundaries, in each of its encodings, is
    /// accepted exactly when it is in the class; broken encodings never are.
    #[test]
    fn class_accepts_exactly_the_encodings_of_its_members() {
        let classes: Vec<Vec<(u32, u32)>> = vec![
            vec![(0, 0xD7FF), (0xE000, 0x10FFFF)],
            vec![('a' as u32, 'z' as u32)],
            vec![(0x7F, 0x800), (0xFFFF, 0x10000)],
            vec![(0x1F600, 0x1F64F), ('"' as u32, '"' as u32)],
            vec![(0, 0x1F)],
            vec![(0x10300, 0x10300), (0x10400, 0x107FF), (0x10FFFF, 0x10FFFF)],
        ];
        let probes: Vec<u32> = [0u32, 8, 9, 0x1F, 0x20, 0x22, 0x2F, 0x5C, 0x60, 0x61, 0x7A, 0x7B, 0x7F, 0x80, 0x7FF, 0x800, 0x801, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x102FF, 0x10300, 0x10301, 0x103FF, 0x10400, 0x107FF, 0x10800, 0x1F5FF, 0x1F600, 0x1F64F, 0x1F650, 0x10FFFE, 0x10FFFF]
            .to_vec();
        for ranges in &classes {
            let a = json_class(ranges);
            for &v in &probes {
                let c = char::from_u32(v).unwrap();
                let member = ranges.iter().any(|&(x, y)| x <= v && v <= y);
                for form in json_forms(c) {
                    assert_eq!(a.matches(form.as_bytes()), member, "{ranges:x?} {v:#x} {form:?}");
                }
            }
            for bad in ["\\ud800", "\\udc00", "\\ud800\\u0041", "\\x41", "\\", "\"", "\\u12", "\u{1}", "\\U0041"] {
                assert!(!a.matches(bad.as_bytes()), "{ranges:x?} {bad:?}");
            }
        }
    }

    /// A key set "any string but these names" (the compiler's main use) agrees with a direct
    /// decode-and-compare on encoded probes.
    #[test]
    fn key_set_automaton_agrees_with_decoding() {
        let names = ["dog", "cat", "dot", "é", "😀x"];
        let any = CDfa::from_rx(&Rx::Repeat { inner: std::sync::Arc::new(Rx::any_char()), min: 0, max: None }, 10_000).unwrap();
        let mut declared = CDfa::from_rx(&Rx::alt(names.iter().map(|n| Rx::Literal(n.as_bytes().to_vec())).collect()), 10_000).unwrap();
        declared = declared.minimize();
        let others = any.minus(&declared, 10_000).unwrap().minimize();
        let a = json_automaton(&others);
        let probes = ["", "do", "dog", "dogs", "cat", "ca", "dot", "d", "é", "éé", "😀x", "😀", "x"];
        for p in probes {
            let expected = !names.contains(&p);
            // Every encoding of every character, mixed per position.
            let per_char: Vec<Vec<String>> = p.chars().map(json_forms).collect();
            for variant in 0..4 {
                let s: String = per_char.iter().map(|f| f[variant.min(f.len() - 1)].clone()).collect();
                assert_eq!(a.matches(s.as_bytes()), expected, "{p:?} as {s:?}");
            }
        }
    }

    /// Random automata whose states send every non-ASCII character to one state (the lead
    /// bytes built once per target) or split them, checked on raw UTF-8 strings.
    #[test]
    fn random_automata_agree_on_raw_strings() {
        let mut rnd = corral_core::testutil::xorshift(0x51a7_e0c1_d00d_f00du64);
        let pool = ['a', 'b', '\u{e9}', '\u{800}', '\u{ffff}', '\u{10000}', '\u{1f600}'];
        for case in 0..300 {
            let n = 1 + rnd(5) as u32;
            let mut trans = Vec::new();
            for _ in 0..n {
                let mut row = vec![('a' as u32, 'a' as u32, rnd(n as u64) as u32)];
                if rnd(2) == 0 {
                    row.push((0x80, 0xD7FF, rnd(n as u64) as u32));
                    row.push((0xE000, 0x10FFFF, rnd(n as u64) as u32));
                } else {
                    // uniform: every non-ASCII character to one state
                    let t = rnd(n as u64) as u32;
                    row.push((0x80, 0xD7FF, t));
                    row.push((0xE000, 0x10FFFF, t));
                }
                trans.push(row);
            }
            let accept: Vec<bool> = (0..n).map(|_| rnd(2) == 0).collect();
            let d = CDfa { trans, accept, start: 0 };
            let a = utf8_automaton(&d);
            for _ in 0..40 {
                let s: String = (0..rnd(4)).map(|_| pool[rnd(pool.len() as u64) as usize]).collect();
                assert_eq!(a.matches(s.as_bytes()), d.accepts(&s), "case {case}: {s:?}");
            }
        }
    }

    /// Plain UTF-8 mode: escapes are ordinary characters.
    #[test]
    fn utf8_mode_reads_raw_bytes_only() {
        let d = CDfa::from_rx(&Rx::Repeat { inner: std::sync::Arc::new(Rx::Chars(vec![(0, 0x10FFFF)])), min: 1, max: Some(2) }, 10_000).unwrap().minimize();
        let a = utf8_automaton(&d);
        for (s, ok) in [("a", true), ("\\u", true), ("😀é", true), ("abc", false), ("", false)] {
            assert_eq!(a.matches(s.as_bytes()), ok, "{s:?}");
        }
        assert!(!a.matches(&[0xED, 0xA0, 0x80]), "an encoded surrogate is not UTF-8");
        assert!(!a.matches(&[0xC0, 0x80]), "overlong");
    }

    /// A literal's one automaton is the concatenation of `"`, its characters' automata and
    /// `"` state for state (the same terminal automaton once built, state numbers included),
    /// with the facts it states; and it keeps the union bound for enums of literals.
    #[test]
    fn literal_automata_are_their_pieces_concatenated() {
        use corral_core::summarize;
        use corral_core::Dfa;
        use corral_core::Limits;
        let words = ["", "a", "name", "\"q\"", "back\\slash", "tab\t\u{1}", "é", "中文", "😀x", "\u{7f}\u{80}\u{7ff}\u{800}\u{ffff}\u{10000}", "a/b c"];
        let mut enc = crate::strings::Encoder::default();
        for w in words {
            let lazy = json_literal(&Arc::from(w));
            assert!(!lazy.is_built());
            let Rx::Automaton(one) = enc.literal(w) else { panic!("a literal is one automaton") };
            assert_eq!(*one, *lazy, "equal keys, equal automata");
            let pieces = enc.quoted(&Rx::Literal(w.as_bytes().to_vec()));
            let (a, b) = (Dfa::from_rx(&Rx::Automaton(lazy.clone()), &Limits::default()).unwrap(), Dfa::from_rx(&pieces, &Limits::default()).unwrap());
            assert_eq!(a.num_states(), b.num_states(), "{w:?}");
            for s in 0..a.num_states() as u32 {
                for byte in 0..=255u8 {
                    assert_eq!(a.next(s, byte), b.next(s, byte), "{w:?}: state {s} byte {byte}");
                }
                assert_eq!(a.is_accepting(s), b.is_accepting(s));
            }
            // Stated before the build, checked after it.
            assert_eq!(lazy.len(), lazy.len_bound(), "{w:?}: exact state count");
            let flat = FlatTables::from_rows((0..lazy.len()).map(|q| lazy.edges(q).to_vec()).collect(), (0..lazy.len()).map(|q| lazy.accepts(q)).collect());
            assert_eq!(summarize(&flat, lazy.start()), *lazy.summary());
            assert!(!lazy.nullable());
            assert!(a.matches(serde_json::to_string(w).unwrap().as_bytes()), "{w:?}");
        }
        // An enum of them is left to be built on first use (the union bound holds).
        let rx = Rx::Alt(words.iter().map(|w| Rx::Automaton(json_literal(&Arc::from(*w)))).collect());
        let (t, _) = corral_core::intern::terminal(&rx, &Limits::default(), true).unwrap();
        assert!(t.if_built().is_none(), "an enum of literals is deferrable");
    }

    /// The facts a lazy JSON automaton states before it is built (nullability, the summary
    /// joins are decided on, state and size bounds) are those of the built automaton, for
    /// key sets of random ASCII names and for random automata whose states send every
    /// non-ASCII character to one state or none (with random ASCII rows: gaps, control
    /// characters, `"` and `\`); and the lazy automaton reads what the eager one reads.
    #[test]
    fn lazy_json_facts_are_those_of_the_built_automaton() {
        use corral_core::summarize;
        let mut rnd = corral_core::testutil::xorshift(0x1a2f_0e5e_7777_0001u64);
        let any = CDfa::from_rx(&Rx::Repeat { inner: std::sync::Arc::new(Rx::any_char()), min: 0, max: None }, 10_000).unwrap();
        let mut checked = 0;
        for case in 0..400 {
            let d = if case % 2 == 0 {
                let letters = b"abcdefgh_-\"09 \x01";
                let names: Vec<Vec<u8>> = (0..1 + rnd(12)).map(|_| (0..rnd(9)).map(|_| letters[rnd(letters.len() as u64) as usize]).collect()).collect();
                let declared = CDfa::from_rx(&Rx::alt(names.into_iter().map(Rx::Literal).collect()), 10_000).unwrap().minimize();
                any.minus(&declared, 10_000).unwrap().minimize()
            } else {
                let n = 1 + rnd(6) as u32;
                let mut trans = Vec::new();
                for _ in 0..n {
                    let mut row = Vec::new();
                    let mut c = 0u32;
                    while c < 0x80 {
                        let end = (c + rnd(40) as u32).min(0x7F);
                        if rnd(3) != 0 {
                            row.push((c, end, rnd(n as u64) as u32));
                        }
                        c = end + 1;
                    }
                    match rnd(3) {
                        0 => {}
                        _ => {
                            let t = rnd(n as u64) as u32;
                            row.push((0x80, 0xD7FF, t));
                            row.push((0xE000, 0x10FFFF, t));
                        }
                    }
                    trans.push(row);
                }
                CDfa { trans, accept: (0..n).map(|_| rnd(3) == 0).collect(), start: 0 }
            };
            let Some(facts) = lazy_facts(&d) else { continue };
            checked += 1;
            let t = build_tables(&d, true);
            let size = t.len() + t.span.iter().map(|&(_, n)| n as usize).sum::<usize>();
            assert_eq!(summarize(&t, d.start), facts.summary, "case {case}");
            assert_eq!(t.accept[d.start as usize], facts.nullable, "case {case}");
            assert!(t.len() <= facts.len_bound, "case {case}: {} states, bound {}", t.len(), facts.len_bound);
            assert!(size <= 2 * facts.size_estimate, "case {case}: size {size}, estimate {}", facts.size_estimate);
            let lazy = lazy_json(&Arc::new(d.clone()));
            let eager = json_automaton(&d);
            assert!(!lazy.is_built());
            for _ in 0..30 {
                let s: String = (0..rnd(6)).map(|_| ['a', 'b', '"', '\\', '\u{1}', 'é', '😀', 'h', '_'][rnd(9) as usize]).collect();
                for form in [s.clone(), s.chars().map(|c| json_forms(c).pop().unwrap()).collect::<String>()] {
                    assert_eq!(lazy.matches(form.as_bytes()), eager.matches(form.as_bytes()), "case {case}: {form:?}");
                }
            }
            assert_eq!(lazy.len(), eager.len());
        }
        assert!(checked > 250, "only {checked} automata were lazy");
    }
}
