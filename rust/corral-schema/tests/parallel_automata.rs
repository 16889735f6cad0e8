//! Large schemas' automata built on two threads at the end of lowering
//! (`corral_core::term_dfa::build_all`): the compile returns with every automaton built, and
//! the masks are exact — the per-token reference at every byte of valid instances — while
//! values outside the enums stay rejected. Many compiles back to back (distinct names, so no
//! cache serves them) race the pool's helper against the compiling thread.

mod common;

use common::{fragment_vocab, walk_checking_masks};
use corral_core::{CompiledGrammar, Matcher};
use corral_schema::{compile_schema, Options, Whitespace};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// Twelve properties, each an enum of six values long enough that the automata add up to
/// thousands of states (past the threshold for a second thread).
fn schema(round: usize) -> Value {
    let mut props = Map::new();
    for p in 0..12 {
        let values: Vec<String> = (0..6).map(|v| format!("r{round} value {v} of property {p}, \"quoted\" / naïve")).collect();
        props.insert(format!("prop_{round}_{p}"), json!({"enum": values}));
    }
    json!({"type": "object", "properties": props, "required": [format!("prop_{round}_0")], "additionalProperties": false})
}

#[test]
fn automata_built_on_two_threads_are_complete_and_exact() {
    // (Its own process: Cargo runs each test file as one.)
    std::env::set_var("CORRAL_DEFER_AUTOMATA", "0");
    assert!(!corral_core::term_dfa::defer_enabled(), "CORRAL_DEFER_AUTOMATA=0 builds them before the compile returns");
    let opts = Options { whitespace: Whitespace::Compact, ..Default::default() };
    for round in 0..40 {
        let c = compile_schema(&schema(round), &opts).unwrap();
        let terms = &c.grammar.cfg().terminals;
        assert!(terms.iter().all(|t| t.automaton.if_built().is_some()), "round {round}: every automaton is built when the compile returns");
        let states: usize = terms.iter().map(|t| t.dfa().num_states()).sum();
        assert!(states > 2_000, "round {round}: {states} states, enough for the second thread");
        if round % 10 != 0 {
            continue;
        }
        let frags = ["\"", "\":", ",\"", "{\"", "\"}", "value", " of", " property", "prop_", "\\\"", "quoted", " naïve", "\\u00", "ï"];
        let v = fragment_vocab(&frags, 0x2545_f491_4f6c_dd1d ^ round as u64);
        let cg = Arc::new(CompiledGrammar::new(&c.grammar, v));
        let doc = format!(r#"{{"prop_{round}_3":"r{round} value 5 of property 3, \"quoted\" \/ na\u00efve","prop_{round}_0":"r{round} value 0 of property 0, \"quoted\" / naïve"}}"#);
        walk_checking_masks(&cg, &doc, "two threads");
        let bad = format!(r#"{{"prop_{round}_0":"r{round} value 6 of"#);
        assert!(!Matcher::new(cg.clone()).accept_bytes(bad.as_bytes()), "{bad} is rejected");
    }
}
