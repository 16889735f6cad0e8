//! The regex front end and DFA construction on arbitrary patterns.
#![no_main]
use corral_core::{Grammar, Limits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(pattern) = std::str::from_utf8(data) {
        let limits = Limits { max_nfa_states: 20_000, max_dfa_states: 2_000, max_repeat: 200, ..Limits::default() };
        let _ = Grammar::from_regex(pattern, &limits);
    }
});
