//! A deterministic byte automaton built directly by a front end and embedded in an [`Rx`]
//! as one piece ([`Rx::Automaton`]): languages whose expression form would be large (the
//! JSON-encoded forms of a code-point automaton, with escapes and surrogate pairs) go to the
//! NFA as states and edges, never spelled out as an expression tree.
//!
//! [`Rx`]: crate::rx::Rx
//! [`Rx::Automaton`]: crate::rx::Rx::Automaton

/// A deterministic automaton over bytes. It keys the process-wide terminal cache like any
/// other expression, so it carries a fingerprint of its whole structure, computed once at
/// construction: hashing is O(1) and unequal automata almost always differ at the first
/// comparison (automata of thousands of states were hashed in full at every lookup).
#[derive(Debug, Clone)]
pub struct ByteAutomaton {
    trans: Vec<Vec<(u8, u8, u32)>>,
    accept: Vec<bool>,
    start: u32,
    fingerprint: u64,
    /// States plus edges ([`ByteAutomaton::size`]), counted at construction.
    size: usize,
    /// Heap bytes ([`ByteAutomaton::memory_bytes`]), counted at construction: expressions
    /// sum them when they are made ([`crate::rx::RxList`]).
    memory: usize,
    /// Set by [`ByteAutomaton::single_char`].
    single_char: bool,
    /// What joins and unions with other pieces need to know without building them (computed
    /// on first use).
    summary: std::sync::OnceLock<Summary>,
}

/// Facts about a [`ByteAutomaton`], computed once, for deciding without
/// building it whether a terminal made of such pieces is deterministic and how large it is
/// (see [`crate::det_concat::deferrable`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Bytes leaving the start state.
    pub start_out: crate::byteset::ByteSet,
    /// Bytes leaving any accepting state.
    pub accept_out: crate::byteset::ByteSet,
    /// Whether some non-empty string is in the language.
    pub has_nonempty: bool,
}

impl PartialEq for ByteAutomaton {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
            || (self.fingerprint == other.fingerprint
                && self.start == other.start
                && self.accept == other.accept
                && self.trans == other.trans
                && self.single_char == other.single_char)
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
        debug_assert_eq!(trans.len(), accept.len());
        // FNV-1a-style mixing over the whole structure, 64 bits per step.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ (start as u64);
        let mut mix = |x: u64| h = (h ^ x).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(29);
        mix(trans.len() as u64);
        let mut size = trans.len();
        for (edges, &acc) in trans.iter().zip(&accept) {
            size += edges.len();
            mix(((edges.len() as u64) << 1) | acc as u64);
            for &(lo, hi, t) in edges {
                mix(((lo as u64) << 40) | ((hi as u64) << 32) | t as u64);
            }
        }
        let memory = trans.iter().map(|e| e.capacity() * 12 + 24).sum::<usize>() + accept.len();
        ByteAutomaton { trans, accept, start, fingerprint: h, size, memory, single_char: false, summary: std::sync::OnceLock::new() }
    }

    /// Marks the automaton as the encoded forms of one code point (its raw UTF-8 bytes and,
    /// in JSON, its escapes), promising: every spelling ends in the one accepting state,
    /// which has no edges; every other state is reached only by spellings of a prefix that
    /// differ at most in the case of hex digits; and `"` is read only right after `\`. This
    /// bounds unions of JSON literals made of such pieces (see
    /// [`crate::det_concat::deferrable`]). Only front ends that build exactly that call it.
    pub fn single_char(mut self) -> ByteAutomaton {
        self.single_char = true;
        self.fingerprint = self.fingerprint.rotate_left(1) ^ 1;
        self
    }

    /// Whether the front end marked it as one code point's spellings
    /// ([`ByteAutomaton::single_char`]).
    pub fn is_single_char(&self) -> bool {
        self.single_char
    }

    /// Facts about the automaton ([`Summary`]), computed on first use.
    pub fn summary(&self) -> &Summary {
        self.summary.get_or_init(|| summarize(&self.trans, &self.accept, self.start))
    }

    /// State `s`'s sorted, disjoint, inclusive `(lo, hi, target)` byte ranges.
    pub fn edges(&self, s: usize) -> &[(u8, u8, u32)] {
        &self.trans[s]
    }

    /// Whether state `s` accepts.
    pub fn accepts(&self, s: usize) -> bool {
        self.accept[s]
    }

    /// Start state.
    pub fn start(&self) -> u32 {
        self.start
    }

    /// Number of states.
    pub fn len(&self) -> usize {
        self.trans.len()
    }

    /// True when the automaton has no state at all.
    pub fn is_empty(&self) -> bool {
        self.trans.is_empty()
    }

    /// Whether the empty string is in the language.
    pub fn nullable(&self) -> bool {
        self.accept.get(self.start as usize).copied().unwrap_or(false)
    }

    /// Whether `bytes` is in the language (a direct run, for tests and checks).
    pub fn matches(&self, bytes: &[u8]) -> bool {
        let mut s = self.start as usize;
        if s >= self.len() {
            return false;
        }
        for &b in bytes {
            match self.trans[s].iter().find(|&&(lo, hi, _)| lo <= b && b <= hi) {
                Some(&(_, _, t)) => s = t as usize,
                None => return false,
            }
        }
        self.accept[s]
    }

    /// Heap bytes held (edges and acceptance flags).
    pub fn memory_bytes(&self) -> usize {
        self.memory
    }

    /// Number of states plus edges (a size measure for limits).
    pub fn size(&self) -> usize {
        self.size
    }
}

/// The [`Summary`] of an automaton: out-bytes of the start and of the
/// accepting states, and whether an accepting state is reachable over at least one byte.
fn summarize(trans: &[Vec<(u8, u8, u32)>], accept: &[bool], start: u32) -> Summary {
    let mut sum = Summary::default();
    if start as usize >= trans.len() {
        return sum;
    }
    for (s, edges) in trans.iter().enumerate() {
        for &(lo, hi, _) in edges {
            if s == start as usize {
                sum.start_out.insert_range(lo, hi);
            }
            if accept[s] {
                sum.accept_out.insert_range(lo, hi);
            }
        }
    }
    let n = trans.len();
    // Reachable over at least one byte: from the start's successors.
    let mut seen = vec![false; n];
    let mut stack: Vec<u32> = trans[start as usize].iter().map(|e| e.2).collect();
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
        stack.extend(trans[s].iter().map(|e| e.2));
    }
    sum
}
