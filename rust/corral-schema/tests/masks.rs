//! Token masks of compiled schemas against the per-token reference (accept, then roll back),
//! at every byte of valid instances, with a vocabulary of multi-byte fragments. Covers the
//! cache paths that derive one state's token set from another's (key strings that must avoid
//! declared names, length-bounded strings near their bound).

mod common;

use common::{fragment_vocab as vocab, walk_checking_masks};
use corral_core::{CompiledGrammar, Matcher, Vocabulary};
use corral_schema::{compile_schema, Options, Whitespace};
use serde_json::json;
use std::sync::Arc;

fn check(schema: serde_json::Value, docs: &[String], v: &Arc<Vocabulary>) {
    let opts = Options { whitespace: Whitespace::Compact, ..Default::default() };
    let c = compile_schema(&schema, &opts).unwrap_or_else(|e| panic!("{schema}: {e}"));
    let cg = Arc::new(CompiledGrammar::new(&c.grammar, v.clone()));
    for doc in docs {
        walk_checking_masks(&cg, doc, &schema.to_string());
    }
}

#[test]
fn key_masks_avoiding_declared_names_match_reference() {
    let frags = ["\"", "\":", "\":1", ",\"", "acc", "account", "Holder", "ount", "a", "c", "o", "x", "1", "2", "}", "{\"", "\"}", "Hol", "der\""];
    let v = vocab(&frags, 0x1234_5678_9abc_def1);
    let props = json!({"acc": {"type": "integer"}, "account": {"type": "integer"}, "accountHolder": {"type": "integer"}, "ax": {"type": "integer"}});
    let docs: Vec<String> = [
        r#"{"accountHolder":1,"acco":2,"accountHold":12,"account":1}"#,
        r#"{"ac":1,"acc":2,"accountHolderx":1,"x":1}"#,
        r#"{"axe":1,"ax":2,"":1,"accoun":1}"#,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    check(json!({"type": "object", "properties": props, "additionalProperties": {"type": "integer"}}), &docs, &v);
    check(json!({"type": "object", "properties": props, "patternProperties": {"^acc": {"type": "integer", "minimum": 0}}}), &docs, &v);
    let closed: Vec<String> = vec![r#"{"accountHolder":1,"acc":2,"account":1}"#.into(), r#"{"ax":1}"#.into()];
    check(json!({"type": "object", "properties": props, "additionalProperties": false}), &closed, &v);
}

#[test]
fn bounded_string_masks_match_reference() {
    let frags = ["\"", "ab", "abc", "é", " ", "\\n", "\\u00e9", "x", "\",", "\"}", "{\"s\":\""];
    let v = vocab(&frags, 0x0fed_cba9_8765_4321);
    let s = |n: usize| -> String { (0..n).map(|i| ["a", "b", "é", " ", "\\n", "x"][i % 6]).collect() };
    let docs: Vec<String> = [30usize, 29, 12, 0].iter().map(|&n| format!(r#"{{"s":"{}","t":"{}"}}"#, s(n), s(n / 2))).collect();
    check(json!({"type": "object", "properties": {"s": {"type": "string", "maxLength": 30}, "t": {"type": "string", "minLength": 0, "maxLength": 15}}, "required": ["s"], "additionalProperties": false}), &docs, &v);
    let long: Vec<String> = [300usize, 256, 255, 290].iter().map(|&n| format!(r#"{{"s":"{}"}}"#, s(n))).collect();
    check(json!({"type": "object", "properties": {"s": {"type": "string", "minLength": 250, "maxLength": 300}}, "additionalProperties": false}), &long, &v);
}

/// Two states of one terminal that accept the same language (a string body just after its
/// opening quote and after a character: the string automaton is not minimised) share one
/// whole-mask cache entry, found by the key that names the states' language: the fill after
/// the character is a hit. Both masks stay exact.
#[test]
fn string_body_states_alike_share_a_cached_mask() {
    let frags = ["\"", "ab", "abc", " ", "x", "\",", "\"}", "{\"s\":\"", "\":", "\"t\""];
    let v = vocab(&frags, 0x2468_ace0_1357_9bdf);
    let schema = json!({"type": "object", "properties": {"s": {"type": "string"}, "t": {"type": "integer"}}, "additionalProperties": false});
    let opts = Options { whitespace: Whitespace::Compact, ..Default::default() };
    let c = compile_schema(&schema, &opts).unwrap();
    let cg = Arc::new(CompiledGrammar::new(&c.grammar, v.clone()));
    let mut m = Matcher::new(cg.clone());
    let (mut first, mut second) = (vec![0u32; v.mask_words()], vec![0u32; v.mask_words()]);
    assert!(m.accept_bytes(br#"{"s":""#));
    m.fill_next_token_bitmask(&mut first).unwrap();
    let opened = m.lexeme_states();
    let (hits, misses) = cg.mask_cache_stats();
    assert!(m.accept_bytes(b"x"));
    assert_ne!(m.lexeme_states(), opened, "the automaton keeps two states (else this test shows nothing)");
    m.fill_next_token_bitmask(&mut second).unwrap();
    assert_eq!(cg.mask_cache_stats(), (hits + 1, misses), "the second position's fill is a hit");
    assert_eq!(first, second);
    for doc in [r#"{"s":"xab abc","t":12}"#, r#"{"t":1,"s":""}"#, r#"{"s":"x"}"#] {
        walk_checking_masks(&cg, doc, "string body");
    }
}

/// Keys split where the names part, and long strings as pieces: masks at every byte equal
/// the per-token reference (tokens span the pieces' edges).
#[test]
fn split_keys_and_long_literal_masks_match_reference() {
    let frags = ["\"", "\":", "p1", "p", "1", "0", "2", "\"p", "\\u0070", ",\"", "{\"", "}", "xxxx", "xx", "x\"", "\\u0078"];
    let v = vocab(&frags, 0x1357_2468_9bdf_ace0);
    let props: serde_json::Map<String, serde_json::Value> = (0..120).map(|i| (format!("p{i}"), json!({"type": "integer"}))).collect();
    let docs: Vec<String> = vec![r#"{"p1":1,"p10":2,"p100":3,"p11":4}"#.into(), r#"{"\u0070119":0,"p0":1}"#.into()];
    check(json!({"type": "object", "properties": props.clone()}), &docs, &v);
    let docs: Vec<String> = vec![r#"{"p1":1,"p1x":2,"p":3}"#.into()];
    check(json!({"type": "object", "properties": props, "additionalProperties": {"type": "integer"}}), &docs, &v);
    let s = "x".repeat(2100);
    let docs: Vec<String> = vec![format!("\"{s}\""), format!("\"{}\\u0078\"", &s[1..])];
    check(json!({"const": s}), &docs, &v);
}
