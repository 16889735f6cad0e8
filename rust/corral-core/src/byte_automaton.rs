//! A deterministic byte automaton built directly by a front end and embedded in an [`Rx`]
//! as one piece ([`Rx::Automaton`]): languages whose expression form would be large (the
//! JSON-encoded forms of a code-point automaton, with escapes and surrogate pairs) go to the
//! NFA as states and edges, never spelled out as an expression tree.
//!
//! [`Rx`]: crate::rx::Rx
//! [`Rx::Automaton`]: crate::rx::Rx::Automaton

/// A deterministic automaton over bytes. Structural equality and hashing (it keys the
/// process-wide terminal cache like any other expression).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ByteAutomaton {
    /// Per state: sorted, disjoint, inclusive `(lo, hi, target)` byte ranges; a byte with no
    /// range has no continuation.
    pub trans: Vec<Vec<(u8, u8, u32)>>,
    /// Per state: whether the input read so far is in the language.
    pub accept: Vec<bool>,
    /// Start state.
    pub start: u32,
}

impl ByteAutomaton {
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

    /// Number of states plus edges (a size measure for limits).
    pub fn size(&self) -> usize {
        self.len() + self.trans.iter().map(Vec::len).sum::<usize>()
    }
}
