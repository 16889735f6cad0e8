//! Token masks of compiled schemas against the per-token reference (accept, then roll back),
//! at every byte of valid instances, with a vocabulary of multi-byte fragments. Covers the
//! cache paths that derive one state's token set from another's (key strings that must avoid
//! declared names, length-bounded strings near their bound).

mod common;

use common::{fragment_vocab as vocab, walk_checking_masks};
use corral_core::{CompiledGrammar, Vocabulary};
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
