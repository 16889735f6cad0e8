//! Building a terminal's DFA from its [`Rx`]: [`Dfa::from_rx`] picks the construction (a
//! bounded repeat, a deterministic concatenation, or the subset construction over an NFA).

use crate::automata::dfa::{state_limit, Dfa};
use crate::automata::nfa::Nfa;
use crate::frontend::rx::Rx;
use crate::runtime::error::Result;
use crate::runtime::limits::Limits;

impl Dfa {
    /// Compiles `rx` to a DFA for its language minus the empty string.
    /// [`Dfa::nullable`] tells whether the empty string was in the language.
    pub fn from_rx(rx: &Rx, limits: &Limits) -> Result<Dfa> {
        if let Some(d) = crate::automata::bounded_repeat::build(rx, state_limit(limits)) {
            return Ok(d);
        }
        if let Some(rows) = crate::automata::det_concat::deterministic_rows(rx, state_limit(limits).saturating_sub(1)) {
            return Ok(Self::from_rows(&rows));
        }
        let nfa = Nfa::build(rx, limits)?;
        Self::from_nfa(&nfa, limits)
    }
}
