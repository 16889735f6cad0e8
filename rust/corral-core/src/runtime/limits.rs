//! Resource limits applied while compiling grammars, with safe defaults.

/// Bounds on grammar and automaton size. Exceeding one is an [`crate::Error::Limit`]
/// naming the field, so users know what to raise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Most NFA states one terminal (a regular sub-grammar) may compile to.
    pub max_nfa_states: usize,
    /// Most DFA states one terminal may determinize to.
    pub max_dfa_states: usize,
    /// Largest `{m,n}` bound accepted in a repetition.
    pub max_repeat: u32,
    /// Most productions the lowered context-free grammar may have.
    pub max_productions: usize,
    /// Deepest nesting of groups in grammar or regex source.
    pub max_nesting: usize,
    /// Most items in all precomputed prediction closures together (grammars whose rules
    /// start with long chains of other rules grow quadratically here).
    pub max_closure_items: usize,
    /// Time budget for compiling one grammar, in milliseconds (0 = unlimited).
    pub max_compile_ms: u64,
    /// Time budget for one mask fill of a matcher of the grammar, in milliseconds (0 =
    /// unlimited). Fills take microseconds on ordinary grammars; on a highly ambiguous one
    /// (terminals of many lengths ending all along long tokens, deep nullable recursion) a
    /// fill with a 128k vocabulary can take seconds, and a server's thread must not wait that
    /// long: past the budget the fill stops with [`crate::Error::FillTimeout`].
    pub max_fill_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_nfa_states: 200_000, max_dfa_states: 20_000, max_repeat: 10_000, max_productions: 200_000, max_nesting: 200, max_closure_items: 4_000_000, max_compile_ms: 10_000, max_fill_ms: 1_000 }
    }
}

/// Hint appended to limit errors.
pub const LIMIT_HINT: &str = "pass a larger value in `limits=` if the input is legitimate";
