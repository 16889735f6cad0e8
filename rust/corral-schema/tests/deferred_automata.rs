//! Schemas compiled with deferred automata (the default; set explicitly here, see
//! `corral_core::term_dfa`): keys and enum values are left unbuilt by the compile, built by
//! the background thread or the fill that meets them first, and the masks are exact — the
//! per-token reference (accept, then roll back) at every byte of valid instances — while
//! values outside an enum stay rejected. Its own test binary, so that no other test's
//! environment decides the setting (read once per process).

mod common;

use common::{fragment_vocab, walk_checking_masks};
use corral_core::testutil::xorshift;
use corral_core::{CompiledGrammar, Matcher};
use corral_schema::{compile_schema, Options, Whitespace};
use serde_json::json;
use std::sync::Arc;

#[test]
fn deferred_keys_and_enums_give_exact_masks() {
    std::env::set_var("CORRAL_DEFER_AUTOMATA", "1");
    assert!(corral_core::term_dfa::defer_enabled());
    let schema = json!({
        "type": "object",
        "properties": {
            "status": {"enum": ["In place", "Not in place", "In-progress", "Unknown", "naïve \"quoted\""]},
            "accountHolder": {"type": "string"},
            "inner": {"type": "object", "properties": {"level": {"enum": ["Level 1", "Level 2", "L\\3"]}}, "required": ["level"], "additionalProperties": false},
        },
        "required": ["status"],
    });
    let opts = Options { whitespace: Whitespace::Compact, ..Default::default() };
    let c = compile_schema(&schema, &opts).unwrap();
    let terms = &c.grammar.cfg().terminals;
    let unbuilt = terms.iter().filter(|t| t.automaton.if_built().is_none()).count();
    assert!(unbuilt >= 4, "keys and enums are deferred ({unbuilt} of {} unbuilt)", terms.len());
    for t in terms.iter() {
        // What lowering took from the summary agrees with the automaton once built.
        let (nullable, empty) = (t.automaton.nullable(), t.automaton.is_empty_language());
        assert_eq!((t.dfa().nullable(), t.dfa().is_empty_language()), (nullable, empty), "{}", t.label);
    }
    // A fresh compile (the automata above are built now and cached) against a vocabulary.
    let c = compile_schema(&schema, &opts).unwrap();
    let frags = ["\"", "\":", ",\"", "{\"", "\"}", "status", "In", " place", "Not", "Level", " 1", "\\u00", "ï", "\\\"", "inner", "level", "acc", "Holder", "Unknown", "\\\\"];
    let v = fragment_vocab(&frags, 0x2545_f491_4f6c_dd1d);
    let cg = Arc::new(CompiledGrammar::new(&c.grammar, v.clone()));
    let docs = [
        r#"{"status":"In place"}"#,
        r#"{"accountHolder":"x","status":"Not in place","inner":{"level":"Level 2"}}"#,
        r#"{"status":"na\u00efve \"quoted\"","inner":{"level":"L\\3"}}"#,
        r#"{"\u0073tatus":"Unknown","extra":1}"#,
    ];
    for doc in docs {
        walk_checking_masks(&cg, doc, "deferred");
    }
    for bad in [r#"{"status":"In plac""#, r#"{"status":"Level 1""#, r#"{"status":"In place","inner":{"level":"Level 3""#] {
        let mut m = Matcher::new(cg.clone());
        assert!(!m.accept_bytes(bad.as_bytes()), "{bad} is rejected");
    }
}

/// The bound that lets an enum's automaton be deferred (corral-core's `automata/det_concat.rs`) holds for
/// the pieces the schema encoder really builds — short escapes (`\/`, `\n`, `\"`, `\\`),
/// control characters, multi-byte and astral characters (surrogate pairs in either hex case)
/// — under state limits around the automata's sizes: whenever the compile defers one, its
/// built automaton is within the limit the compile was given.
#[test]
fn deferred_enums_stay_within_the_state_limit() {
    std::env::set_var("CORRAL_DEFER_AUTOMATA", "1");
    let chars = ['a', 'b', '/', '\n', '\t', '\u{1}', '"', '\\', 'é', '中', '\u{1F600}', 'A'];
    let mut rnd = xorshift(0x9e37_79b9_7f4a_7c15);
    let (mut deferred, mut near_limit) = (0, 0);
    for _ in 0..600 {
        let few = rnd(2) == 0;
        let mut words: Vec<String> = Vec::new();
        for _ in 0..1 + rnd(6) {
            let len = rnd(7);
            words.push((0..len).map(|_| chars[rnd(if few { 3 } else { chars.len() as u64 }) as usize]).collect());
        }
        let limit = 30 + rnd(400) as usize;
        let mut opts = Options { whitespace: Whitespace::Compact, ..Default::default() };
        opts.limits.max_dfa_states = limit;
        let Ok(c) = compile_schema(&json!({ "enum": words }), &opts) else { continue };
        for t in c.grammar.cfg().terminals.iter().filter(|t| t.automaton.if_built().is_none()) {
            deferred += 1;
            let n = t.dfa().num_states();
            assert!(n <= limit, "{words:?}: {n} states past the limit {limit}");
            near_limit += (n * 2 > limit) as usize;
        }
    }
    assert!(deferred > 200 && near_limit > 50, "exercised: {deferred} deferred, {near_limit} within a factor of two of the limit");
}
