//! A deterministic byte automaton built directly by a front end and embedded in an [`Rx`]
//! as one piece ([`Rx::Automaton`]): languages whose expression form would be large (the
//! JSON-encoded forms of a code-point automaton, with escapes and surrogate pairs) go to the
//! NFA as states and edges, never spelled out as an expression tree.
//!
//! [`Rx`]: crate::frontend::rx::Rx
//! [`Rx::Automaton`]: crate::frontend::rx::Rx::Automaton

/// A deterministic automaton over bytes. It keys the process-wide terminal cache like any
/// other expression, so it carries a fingerprint of its whole structure, computed once at
/// construction: hashing is O(1) and unequal automata almost always differ at the first
/// comparison (automata of thousands of states were hashed in full at every lookup).
///
/// A front end may also give one to be built on first use ([`ByteAutomaton::lazy`]), with
/// what lowering asks of it before that (nullability, [`Summary`], size bounds): the JSON
/// encoding of a large schema's "any other key" automata was 45% of its compile (session 19),
/// and a generation may never reach those keys.
#[derive(Debug, Clone)]
pub struct ByteAutomaton {
    tables: std::sync::OnceLock<Tables>,
    /// Set for an automaton built on first use.
    lazy: Option<Lazy>,
    start: u32,
    fingerprint: u64,
    /// Set by [`ByteAutomaton::single_char`] and [`ByteAutomaton::json_literal`].
    spelling: Spelling,
    /// What joins and unions with other pieces need to know without building them (computed
    /// on first use, or given with a lazy automaton).
    summary: std::sync::OnceLock<Summary>,
}

/// A byte automaton's states and edges, flat: state `s`'s sorted, disjoint, inclusive
/// `(lo, hi, target)` ranges are `edges[span[s].0..][..span[s].1]`, in any order in `edges`
/// (a builder may write a state's row after its successors'). One buffer instead of a list
/// per state: a JSON key set's encoding has hundreds of states of one or two edges each, and
/// an allocation per state was a large part of building it on cold caches.
#[derive(Debug, Clone, Default)]
pub struct FlatTables {
    /// Every state's edges.
    pub edges: Vec<(u8, u8, u32)>,
    /// Per state: where its edges start in `edges`, and how many.
    pub span: Vec<(u32, u32)>,
    /// Per state: whether the input read so far is in the language.
    pub accept: Vec<bool>,
}

impl FlatTables {
    /// Empty tables with room for `states` states and `edges` edges.
    pub fn with_capacity(states: usize, edges: usize) -> FlatTables {
        FlatTables { edges: Vec::with_capacity(edges), span: Vec::with_capacity(states), accept: Vec::with_capacity(states) }
    }

    /// Adds a state with the edges `row`; its number.
    pub fn push_state(&mut self, row: impl IntoIterator<Item = (u8, u8, u32)>, accept: bool) -> u32 {
        let at = self.edges.len();
        self.edges.extend(row);
        self.span.push((at as u32, (self.edges.len() - at) as u32));
        self.accept.push(accept);
        (self.span.len() - 1) as u32
    }

    /// Tables from one edge list per state.
    pub fn from_rows(trans: Vec<Vec<(u8, u8, u32)>>, accept: Vec<bool>) -> FlatTables {
        debug_assert_eq!(trans.len(), accept.len());
        let mut t = FlatTables::with_capacity(trans.len(), trans.iter().map(Vec::len).sum());
        for (row, acc) in trans.iter().zip(accept) {
            t.push_state(row.iter().copied(), acc);
        }
        t
    }

    /// State `s`'s edges.
    pub fn row(&self, s: usize) -> &[(u8, u8, u32)] {
        let (at, n) = self.span[s];
        &self.edges[at as usize..(at + n) as usize]
    }

    /// Number of states.
    pub fn len(&self) -> usize {
        self.span.len()
    }

    /// True when there is no state.
    pub fn is_empty(&self) -> bool {
        self.span.is_empty()
    }

    /// Gives the edge buffer's spare room back when it is more than a quarter of what it
    /// holds (builders grow it by doubling, and shared caches keep automata for long).
    fn trim_spare(&mut self) {
        if self.edges.capacity() > self.edges.len() + self.edges.len() / 4 {
            self.edges.shrink_to_fit();
        }
    }

    /// Gives state `s` the edges `row` (appended; a row set before is left unused).
    pub fn set_row(&mut self, s: u32, row: impl IntoIterator<Item = (u8, u8, u32)>) {
        let at = self.edges.len();
        self.edges.extend(row);
        self.span[s as usize] = (at as u32, (self.edges.len() - at) as u32);
    }
}

/// Equal when every state has the same edges and acceptance (wherever its row is stored).
impl PartialEq for FlatTables {
    fn eq(&self, other: &Self) -> bool {
        self.accept == other.accept && (0..self.len()).all(|s| self.row(s) == other.row(s))
    }
}

impl Eq for FlatTables {}

/// The states and edges of a built automaton.
#[derive(Debug, Clone)]
struct Tables {
    flat: FlatTables,
    /// States plus edges ([`ByteAutomaton::size`]), counted at construction.
    size: usize,
    /// Heap bytes ([`ByteAutomaton::memory_bytes`]), counted at construction: expressions
    /// sum them when they are made ([`crate::frontend::rx::RxList`]).
    memory: usize,
}

impl Tables {
    fn new(mut flat: FlatTables) -> Tables {
        debug_assert_eq!(flat.span.len(), flat.accept.len());
        flat.trim_spare();
        let size = flat.len() + flat.span.iter().map(|&(_, n)| n as usize).sum::<usize>();
        let memory = flat.edges.capacity() * std::mem::size_of::<(u8, u8, u32)>() + flat.span.capacity() * 8 + flat.accept.capacity();
        Tables { flat, size, memory }
    }
}

/// What a front end promises about the strings of an automaton ([`ByteAutomaton::single_char`],
/// [`ByteAutomaton::json_literal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spelling {
    /// Nothing.
    Any,
    /// The encoded forms of one code point.
    OneChar,
    /// The quoted, encoded forms of one JSON string.
    Literal,
}

/// The tables of an automaton built on first use.
pub(crate) type BuildTables = dyn Fn() -> FlatTables + Send + Sync;

/// What a lazy automaton is built from and what is known of it before.
#[derive(Clone)]
struct Lazy {
    /// The front end's description of what it builds from: equal keys build equal automata.
    key: std::sync::Arc<[u32]>,
    build: std::sync::Arc<BuildTables>,
    facts: LazyFacts,
}

impl std::fmt::Debug for Lazy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lazy").field("key_len", &self.key.len()).field("facts", &self.facts).finish()
    }
}

/// What a front end states about an automaton it gives to be built on first use
/// ([`ByteAutomaton::lazy`]); checked against the built automaton in debug builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LazyFacts {
    /// Whether the empty string is in the language.
    pub nullable: bool,
    /// Exactly what [`ByteAutomaton::summary`] of the built automaton gives.
    pub summary: Summary,
    /// At least its number of states.
    pub len_bound: usize,
    /// Its states plus edges as lowering weighs them against its expression limit (an
    /// estimate: [`ByteAutomaton::size`] gives it, built or not).
    pub size_estimate: usize,
}

/// Facts about a [`ByteAutomaton`], computed once, for deciding without
/// building it whether a terminal made of such pieces is deterministic and how large it is
/// (see [`crate::automata::det_concat::deferrable`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Bytes leaving the start state.
    pub start_out: crate::runtime::byteset::ByteSet,
    /// Bytes leaving any accepting state.
    pub accept_out: crate::runtime::byteset::ByteSet,
    /// Whether some non-empty string is in the language.
    pub has_nonempty: bool,
}

impl PartialEq for ByteAutomaton {
    fn eq(&self, other: &Self) -> bool {
        if std::ptr::eq(self, other) {
            return true;
        }
        if self.fingerprint != other.fingerprint || self.start != other.start || self.spelling != other.spelling {
            return false;
        }
        match (&self.lazy, &other.lazy) {
            (None, None) => {
                self.tables().flat == other.tables().flat
            }
            (Some(a), Some(b)) => a.key == b.key,
            // (A lazy automaton and a built one are never equal: at worst the same language
            // gets two terminal ids.)
            _ => false,
        }
    }
}

impl Eq for ByteAutomaton {}

impl std::hash::Hash for ByteAutomaton {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.fingerprint);
    }
}

impl ByteAutomaton {
    /// An automaton from its parts. `trans[s]` holds state `s`'s sorted, disjoint, inclusive
    /// `(lo, hi, target)` byte ranges (a byte with no range has no continuation);
    /// `accept[s]` says whether the input read so far is in the language.
    pub fn new(trans: Vec<Vec<(u8, u8, u32)>>, accept: Vec<bool>, start: u32) -> ByteAutomaton {
        ByteAutomaton::from_flat(FlatTables::from_rows(trans, accept), start)
    }

    /// The minimal automaton of a finite set of byte strings (in any order, duplicates
    /// allowed; see [`minimal_acyclic`]). For long alternations of literals, where an
    /// expression tree would be lowered through an NFA of every byte.
    pub fn literal_set(words: &[&[u8]]) -> ByteAutomaton {
        let states = minimal_acyclic(words);
        let edges: usize = states.iter().map(|s| s.1.len()).sum();
        let mut flat = FlatTables::with_capacity(states.len(), edges);
        for (acc, row) in &states {
            flat.push_state(row.iter().map(|&(b, t)| (b, b, t)), *acc);
        }
        ByteAutomaton::from_flat(flat, 0)
    }

    /// [`ByteAutomaton::new`] from flat tables.
    pub fn from_flat(flat: FlatTables, start: u32) -> ByteAutomaton {
        // FNV-1a-style mixing over the whole structure, 64 bits per step.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ (start as u64);
        let mut mix = |x: u64| h = (h ^ x).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(29);
        mix(flat.len() as u64);
        for (s, &acc) in flat.accept.iter().enumerate() {
            let edges = flat.row(s);
            mix(((edges.len() as u64) << 1) | acc as u64);
            for &(lo, hi, t) in edges {
                mix(((lo as u64) << 40) | ((hi as u64) << 32) | t as u64);
            }
        }
        let tables = std::sync::OnceLock::from(Tables::new(flat));
        ByteAutomaton { tables, lazy: None, start, fingerprint: h, spelling: Spelling::Any, summary: std::sync::OnceLock::new() }
    }

    /// An automaton built by `build` when its states are first needed. `key` describes what
    /// it is built from (automata with equal keys must be equal); `facts` is what lowering
    /// asks before that. Its [`ByteAutomaton::size`] is then `facts.size_estimate` whether it
    /// is built or not, so that decisions made from it do not depend on when it was built.
    pub fn lazy(key: Vec<u32>, start: u32, facts: LazyFacts, build: std::sync::Arc<BuildTables>) -> ByteAutomaton {
        let mut h: u64 = 0x9e37_79b9_7f4a_7c15 ^ (start as u64);
        let mut mix = |x: u64| h = (h ^ x).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(31);
        mix(key.len() as u64);
        for &k in &key {
            mix(k as u64);
        }
        let summary = std::sync::OnceLock::from(facts.summary);
        ByteAutomaton { tables: std::sync::OnceLock::new(), lazy: Some(Lazy { key: key.into(), build, facts }), start, fingerprint: h, spelling: Spelling::Any, summary }
    }

    /// The states and edges, built now if they were not; never waits for another thread
    /// building them ([`crate::runtime::race_once`]).
    fn tables(&self) -> &Tables {
        crate::runtime::race_once::get_or_race(&self.tables, || {
            let lazy = self.lazy.as_ref().expect("an automaton without tables is lazy");
            let t = Tables::new((lazy.build)());
            debug_assert!(t.flat.len() <= lazy.facts.len_bound, "lazy automaton over its state bound: {} states ({:?})", t.flat.len(), lazy.facts);
            debug_assert_eq!(summarize(&t.flat, self.start), lazy.facts.summary, "lazy automaton's summary");
            debug_assert_eq!(t.flat.accept.get(self.start as usize).copied().unwrap_or(false), lazy.facts.nullable);
            t
        })
    }

    /// Whether the states are built (always, unless it was made [`ByteAutomaton::lazy`]).
    pub fn is_built(&self) -> bool {
        self.tables.get().is_some()
    }

    /// Marks the automaton as the encoded forms of one code point (its raw UTF-8 bytes and,
    /// in JSON, its escapes), promising: every spelling ends in the one accepting state,
    /// which has no edges; every other state is reached only by spellings of a prefix that
    /// differ at most in the case of hex digits; and `"` is read only right after `\`. This
    /// bounds unions of JSON literals made of such pieces (see
    /// [`crate::automata::det_concat::deferrable`]). Only front ends that build exactly that call it.
    pub fn single_char(mut self) -> ByteAutomaton {
        self.spelling = Spelling::OneChar;
        self.fingerprint = self.fingerprint.rotate_left(1) ^ 1;
        self
    }

    /// Whether the front end marked it as one code point's spellings
    /// ([`ByteAutomaton::single_char`]).
    pub fn is_single_char(&self) -> bool {
        self.spelling == Spelling::OneChar
    }

    /// Marks the automaton as the spellings of one JSON string: `"`, then for each character
    /// the states of its [`ByteAutomaton::single_char`] automaton (its accepting state the
    /// next one's start), then `"` — exactly the concatenation of those pieces, so it keeps
    /// their promise for unions of JSON literals (see [`crate::automata::det_concat::deferrable`]).
    /// Only front ends that build exactly that call it.
    pub fn json_literal(mut self) -> ByteAutomaton {
        self.spelling = Spelling::Literal;
        self.fingerprint = self.fingerprint.rotate_left(1) ^ 2;
        self
    }

    /// Whether the front end marked it as one JSON string's spellings
    /// ([`ByteAutomaton::json_literal`]).
    pub fn is_json_literal(&self) -> bool {
        self.spelling == Spelling::Literal
    }

    /// Facts about the automaton ([`Summary`]), computed on first use.
    pub fn summary(&self) -> &Summary {
        crate::runtime::race_once::get_or_race(&self.summary, || {
            summarize(&self.tables().flat, self.start)
        })
    }

    /// State `s`'s sorted, disjoint, inclusive `(lo, hi, target)` byte ranges.
    pub fn edges(&self, s: usize) -> &[(u8, u8, u32)] {
        self.tables().flat.row(s)
    }

    /// Whether state `s` accepts.
    pub fn accepts(&self, s: usize) -> bool {
        self.tables().flat.accept[s]
    }

    /// Start state.
    pub fn start(&self) -> u32 {
        self.start
    }

    /// Number of states (building a lazy automaton).
    pub fn len(&self) -> usize {
        self.tables().flat.len()
    }

    /// At least the number of states, without building a lazy automaton (its stated bound,
    /// built or not); exact for the others.
    pub fn len_bound(&self) -> usize {
        match &self.lazy {
            Some(l) => l.facts.len_bound,
            None => self.len(),
        }
    }

    /// True when the automaton has no state at all.
    pub fn is_empty(&self) -> bool {
        // (A lazy automaton is never empty: its front end builds those at once.)
        self.lazy.is_none() && self.tables().flat.is_empty()
    }

    /// Whether the empty string is in the language.
    pub fn nullable(&self) -> bool {
        match &self.lazy {
            Some(l) => l.facts.nullable,
            None => self.tables().flat.accept.get(self.start as usize).copied().unwrap_or(false),
        }
    }

    /// Whether `bytes` is in the language (a direct run, for tests and checks).
    pub fn matches(&self, bytes: &[u8]) -> bool {
        let t = &self.tables().flat;
        let mut s = self.start as usize;
        if s >= t.len() {
            return false;
        }
        for &b in bytes {
            match t.row(s).iter().find(|&&(lo, hi, _)| lo <= b && b <= hi) {
                Some(&(_, _, n)) => s = n as usize,
                None => return false,
            }
        }
        t.accept[s]
    }

    /// Heap bytes held (edges and acceptance flags); for a lazy automaton, an estimate from
    /// its stated size, built or not.
    pub fn memory_bytes(&self) -> usize {
        match &self.lazy {
            // (Its tables once built, its key, and the front end's source it keeps.)
            Some(l) => l.facts.size_estimate * 12 + l.key.len() * 8,
            None => self.tables().memory,
        }
    }

    /// Number of states plus edges (a size measure for limits); for a lazy automaton, its
    /// stated estimate, built or not.
    pub fn size(&self) -> usize {
        match &self.lazy {
            Some(l) => l.facts.size_estimate,
            None => self.tables().size,
        }
    }
}

/// The [`Summary`] of an automaton: out-bytes of the start and of the
/// accepting states, and whether an accepting state is reachable over at least one byte.
pub fn summarize(t: &FlatTables, start: u32) -> Summary {
    let accept = &t.accept;
    let mut sum = Summary::default();
    if start as usize >= t.len() {
        return sum;
    }
    for s in 0..t.len() {
        let edges = t.row(s);
        for &(lo, hi, _) in edges {
            if s == start as usize {
                sum.start_out.insert_range(lo, hi);
            }
            if accept[s] {
                sum.accept_out.insert_range(lo, hi);
            }
        }
    }
    let n = t.len();
    // Reachable over at least one byte: from the start's successors.
    let mut seen = vec![false; n];
    let mut stack: Vec<u32> = t.row(start as usize).iter().map(|e| e.2).collect();
    while let Some(s) = stack.pop() {
        let s = s as usize;
        if s >= n || seen[s] {
            continue;
        }
        seen[s] = true;
        if accept[s] {
            sum.has_nonempty = true;
            break;
        }
        stack.extend(t.row(s).iter().map(|e| e.2));
    }
    sum
}

/// The minimal deterministic automaton of a finite set of words over symbols `T` (in any
/// order, duplicates allowed), built in one pass over them sorted (Daciuk et al.'s
/// incremental construction): time and states linear in their total length, common
/// prefixes and suffixes shared. State 0 is the start; each state is (accepting, edges
/// sorted by symbol). A 100,000-value enum `"value-0"` … `"value-99999"` takes a few dozen
/// states where a trie takes hundreds of thousands.
pub fn minimal_acyclic<T: Ord + Copy + std::hash::Hash>(words: &[&[T]]) -> Vec<(bool, Vec<(T, u32)>)> {
    minimal_acyclic_impl(words, false).expect("no budget is checked")
}

/// The states of [`minimal_acyclic`]: per state, whether it accepts and its edges.
pub type AcyclicStates<T> = Vec<(bool, Vec<(T, u32)>)>;

/// [`minimal_acyclic`] under the current thread's compile budget
/// ([`crate::runtime::budget`]): fails with [`crate::Error::CompileTimeout`] soon after the
/// deadline (a million words take about half a second).
pub fn minimal_acyclic_within_budget<T: Ord + Copy + std::hash::Hash>(words: &[&[T]]) -> crate::Result<AcyclicStates<T>> {
    minimal_acyclic_impl(words, true)
}

/// Sorts `v` under the current thread's compile budget, read every [`SORT_PIECE`] elements:
/// pieces sorted alone, then merged pairwise (one `sort_unstable` of a million words ran for
/// 70 ms without a look at the clock).
fn sort_within_budget<T: Ord + Copy>(v: &mut Vec<T>) -> crate::Result<()> {
    crate::runtime::budget::check()?;
    if v.len() <= SORT_PIECE {
        v.sort_unstable();
        return Ok(());
    }
    for c in v.chunks_mut(SORT_PIECE) {
        c.sort_unstable();
        crate::runtime::budget::check()?;
    }
    let mut buf: Vec<T> = Vec::with_capacity(v.len());
    let mut width = SORT_PIECE;
    while width < v.len() {
        buf.clear();
        let mut start = 0;
        while start < v.len() {
            let mid = (start + width).min(v.len());
            let end = (start + 2 * width).min(v.len());
            let (mut i, mut j) = (start, mid);
            while i < mid && j < end {
                if v[j] < v[i] {
                    buf.push(v[j]);
                    j += 1;
                } else {
                    buf.push(v[i]);
                    i += 1;
                }
                if buf.len().is_multiple_of(SORT_PIECE) {
                    crate::runtime::budget::check()?;
                }
            }
            buf.extend_from_slice(&v[i..mid]);
            buf.extend_from_slice(&v[j..end]);
            start = end;
        }
        std::mem::swap(v, &mut buf);
        width *= 2;
    }
    Ok(())
}

/// Elements [`sort_within_budget`] handles between two reads of the clock.
const SORT_PIECE: usize = 1 << 14;

fn minimal_acyclic_impl<T: Ord + Copy + std::hash::Hash>(words: &[&[T]], budget: bool) -> crate::Result<AcyclicStates<T>> {
    type State<T> = (bool, Vec<(T, u32)>);
    let mut sorted: Vec<&[T]> = words.to_vec();
    if budget {
        sort_within_budget(&mut sorted)?;
    } else {
        sorted.sort_unstable();
    }
    sorted.dedup();
    let mut states: Vec<State<T>> = vec![(false, Vec::new())];
    let mut register: rustc_hash::FxHashMap<State<T>, u32> = rustc_hash::FxHashMap::default();
    // The states along the previous word (path[0] = start), not registered yet.
    let mut path: Vec<u32> = vec![0];
    // Registers path[i] for i >= keep (deepest first), each replaced by an equal registered
    // state where there is one (the parent's last edge is the one to it).
    let mut settle = |states: &mut Vec<State<T>>, path: &mut Vec<u32>, keep: usize| {
        while path.len() > keep {
            let child = path.pop().expect("longer than keep");
            let parent = *path.last().expect("the start stays");
            let target = *register.entry(states[child as usize].clone()).or_insert(child);
            if target != child {
                states[parent as usize].1.last_mut().expect("the edge to the child").1 = target;
            }
        }
    };
    let mut prev: &[T] = &[];
    for (i, w) in sorted.into_iter().enumerate() {
        if budget && i % 4096 == 4095 {
            crate::runtime::budget::check()?;
        }
        let common = prev.iter().zip(w).take_while(|(a, b)| a == b).count();
        settle(&mut states, &mut path, common + 1);
        for &c in &w[common..] {
            let id = states.len() as u32;
            states.push((false, Vec::new()));
            let at = *path.last().expect("the start stays");
            states[at as usize].1.push((c, id));
            path.push(id);
        }
        let last = *path.last().expect("the start stays");
        states[last as usize].0 = true;
        prev = w;
    }
    settle(&mut states, &mut path, 1);
    // The reachable states (replaced ones are left behind), renumbered breadth first.
    let mut new_id = vec![u32::MAX; states.len()];
    let mut order = vec![0u32];
    new_id[0] = 0;
    let mut i = 0;
    while i < order.len() {
        let s = order[i] as usize;
        i += 1;
        for &(_, t) in &states[s].1 {
            if new_id[t as usize] == u32::MAX {
                new_id[t as usize] = order.len() as u32;
                order.push(t);
            }
        }
    }
    Ok(order.iter().map(|&s| (states[s as usize].0, states[s as usize].1.iter().map(|&(c, t)| (c, new_id[t as usize])).collect())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The literal-set automaton accepts exactly its words, and shares prefixes and suffixes:
    /// "value-0" … "value-99999" need a few dozen states, not a trie's hundreds of thousands.
    #[test]
    fn literal_set_is_exact_and_minimal() {
        let mut rnd = crate::testutil::xorshift(7);
        for round in 0..50 {
            let words: Vec<Vec<u8>> = (0..rnd(40)).map(|_| (0..rnd(6)).map(|_| b"abc"[rnd(3) as usize]).collect()).collect();
            let refs: Vec<&[u8]> = words.iter().map(|w| w.as_slice()).collect();
            let a = ByteAutomaton::literal_set(&refs);
            for _ in 0..200 {
                let probe: Vec<u8> = (0..rnd(7)).map(|_| b"abcd"[rnd(4) as usize]).collect();
                assert_eq!(a.matches(&probe), words.contains(&probe), "round {round}: {probe:?} in {words:?}");
            }
        }
        let words: Vec<String> = (0..100_000).map(|i| format!("\"value-{i}\"")).collect();
        let refs: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        let a = ByteAutomaton::literal_set(&refs);
        assert!(a.matches(b"\"value-0\"") && a.matches(b"\"value-99999\"") && !a.matches(b"\"value-100000\"") && !a.matches(b"\"value-01\""));
        assert!(a.len() < 100, "{} states", a.len());
    }

    /// The budgeted sort sorts like `sort_unstable`, across piece boundaries too.
    #[test]
    fn sort_within_budget_sorts() {
        let mut rnd = crate::testutil::xorshift(11);
        for n in [0usize, 1, 5, SORT_PIECE, SORT_PIECE + 1, 3 * SORT_PIECE + 17, 5 * SORT_PIECE] {
            let v: Vec<u32> = (0..n).map(|_| rnd(1000) as u32).collect();
            let mut a = v.clone();
            sort_within_budget(&mut a).unwrap();
            let mut b = v;
            b.sort_unstable();
            assert_eq!(a, b, "n {n}");
        }
    }

    /// Flat tables compare by their states' rows, wherever each row is stored: rows written
    /// after their successors' (as the JSON encoder writes them) equal rows written in order,
    /// and automata over them are equal with the same fingerprint; a changed edge or
    /// acceptance makes them differ.
    #[test]
    fn flat_tables_compare_rows_not_their_layout() {
        let in_order = FlatTables::from_rows(vec![vec![(b'a', b'a', 1)], vec![(b'b', b'c', 2)], vec![]], vec![false, false, true]);
        let mut late = FlatTables::default();
        let s0 = late.push_state([], false);
        let s1 = late.push_state([], false);
        late.push_state([], true);
        late.set_row(s1, [(b'b', b'c', 2)]);
        late.set_row(s0, [(b'a', b'a', 1)]);
        assert_ne!(late.edges, in_order.edges, "the rows are stored in another order");
        assert_eq!(late, in_order);
        let (a, b) = (ByteAutomaton::from_flat(late.clone(), 0), ByteAutomaton::from_flat(in_order.clone(), 0));
        assert_eq!(a.fingerprint, b.fingerprint);
        assert!(a == b && a.matches(b"ab") && !a.matches(b"a"));
        let mut other_edge = late.clone();
        other_edge.set_row(s1, [(b'b', b'd', 2)]);
        assert_ne!(other_edge, in_order);
        let mut other_accept = late;
        other_accept.accept[1] = true;
        assert_ne!(other_accept, in_order);
        assert!(ByteAutomaton::from_flat(other_accept, 0) != b);
    }
}
