//! The GBNF parser and lowering on arbitrary text: errors are fine, panics and hangs are not.
#![no_main]
use corral_core::{Grammar, Limits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let limits = Limits { max_nfa_states: 20_000, max_dfa_states: 2_000, max_repeat: 200, ..Limits::default() };
        let _ = Grammar::from_ebnf(text, "root", &limits);
    }
});
