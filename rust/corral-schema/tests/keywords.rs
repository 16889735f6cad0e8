//! Unit tests per keyword family, whitespace modes, strict/non-strict diagnostics.

mod common;

use common::Checker;
use corral_schema::{compile_schema, Draft, Options, PropertyOrder, SchemaError, Whitespace};
use serde_json::{json, Value};

fn compact() -> Options {
    Options { whitespace: Whitespace::Compact, ..Default::default() }
}

fn ck(schema: Value) -> Checker {
    ck_with(schema, &compact())
}

fn ck_with(schema: Value, o: &Options) -> Checker {
    let c = compile_schema(&schema, o).unwrap_or_else(|e| panic!("{schema}: {e}"));
    Checker::new(&c.grammar)
}

fn yes(c: &Checker, inputs: &[&str]) {
    for i in inputs {
        assert!(c.accepts(i), "should accept {i}");
    }
}

fn no(c: &Checker, inputs: &[&str]) {
    for i in inputs {
        assert!(!c.accepts(i), "should reject {i}");
    }
}

#[test]
fn types() {
    let c = ck(json!({"type": ["string", "null"]}));
    yes(&c, &["null", "\"a\""]);
    no(&c, &["1", "true", "[]", "{}"]);
    let c = ck(json!({"type": "integer"}));
    yes(&c, &["0", "-12", "1.0", "1.000", "1e16", "1.5e20"]);
    no(&c, &["1.5", "01", "-", "1e2x", "1.", "00"]);
    let c = ck(json!({"type": "number"}));
    yes(&c, &["0", "-1.5e-3", "1E+2", "0.0"]);
    no(&c, &["+1", ".5", "1.e3", "NaN"]);
    let c = ck(json!(true));
    yes(&c, &["{\"a\":[1,{\"b\":null}]}", "\"x\"", "[]"]);
}

#[test]
fn enum_const() {
    let c = ck(json!({"enum": [1, "a/b", null, {"x": [1, 2]}]}));
    yes(&c, &["1", "1.0", "1e0", "\"a/b\"", "\"a\\/b\"", "\"\\u0061/b\"", "null", "{\"x\":[1,2]}", "{\"x\":[1.0,2]}"]);
    no(&c, &["2", "\"a\"", "{\"x\":[2,1]}", "{}", "true"]);
    let c = ck(json!({"const": {"a": 1, "b": 2}}));
    yes(&c, &["{\"a\":1,\"b\":2}", "{\"b\":2,\"a\":1}"]);
    no(&c, &["{\"a\":1}", "{\"a\":1,\"b\":2,\"a\":1}", "{\"a\":1,\"a\":1}"]);
    // enum filtered by other constraints
    let c = ck(json!({"enum": ["a", "bb", 3], "type": "string", "minLength": 2}));
    yes(&c, &["\"bb\""]);
    no(&c, &["\"a\"", "3"]);
}

#[test]
fn strings() {
    let c = ck(json!({"type": "string", "minLength": 2, "maxLength": 3}));
    yes(&c, &["\"ab\"", "\"\\u00e9\\n\"", "\"😀😀\"", "\"\\ud83d\\ude00ab\""]);
    no(&c, &["\"a\"", "\"abcd\"", "\"\\ud83d\"", "\"\u{1}a\""]);
    let c = ck(json!({"type": "string", "pattern": "^[a-z]+-\\d{2}$"}));
    yes(&c, &["\"ab-12\"", "\"\\u0061-12\""]);
    no(&c, &["\"ab-1\"", "\"Ab-12\"", "\"ab-123\""]);
    let c = ck(json!({"type": "string", "pattern": "b"}));
    yes(&c, &["\"abc\"", "\"b\""]);
    no(&c, &["\"ac\""]);
    let c = ck(json!({"type": "string", "pattern": "^[a-z]+$", "maxLength": 3}));
    yes(&c, &["\"abc\""]);
    no(&c, &["\"abcd\"", "\"\""]);
    // pattern + length that needs the automaton product
    let c = ck(json!({"type": "string", "pattern": "^(ab|c)+$", "minLength": 3, "maxLength": 4}));
    yes(&c, &["\"abc\"", "\"cab\"", "\"abab\"", "\"ccc\""]);
    no(&c, &["\"ab\"", "\"ababc\"", "\"abca\""]);
    // large maxLength
    let c = ck(json!({"type": "string", "maxLength": 100000}));
    yes(&c, &["\"\"", &format!("\"{}\"", "x".repeat(5000))]);
    let c = ck(json!({"type": "string", "minLength": 300, "maxLength": 301}));
    yes(&c, &[&format!("\"{}\"", "x".repeat(300)), &format!("\"{}\"", "x".repeat(301))]);
    no(&c, &[&format!("\"{}\"", "x".repeat(299)), &format!("\"{}\"", "x".repeat(302))]);
    // look-around is unsupported, with the keyword's pointer (after the chunked lengths below)
    chunked_lengths();
    let e = compile_schema(&json!({"properties": {"a": {"pattern": "(?=x)"}}}), &compact()).unwrap_err();
    assert!(matches!(&e, SchemaError::Unsupported { pointer, keyword, .. } if pointer == "/properties/a/pattern" && keyword == "pattern"), "{e}");
    // A `not` that cannot negate what it holds names that keyword once: /not/oneOf (it said
    // /not/not).
    // (A `oneOf` of 13 branches that all overlap: 78 pairs, past what its negation expands.)
    let one_of = json!({"not": {"oneOf": (0..13).map(|i| json!({"minimum": i})).collect::<Vec<_>>()}});
    let e = compile_schema(&one_of, &compact()).unwrap_err();
    assert!(matches!(&e, SchemaError::Unsupported { pointer, keyword, .. } if pointer == "/not/oneOf" && keyword == "not"), "{e}");
}

#[test]
fn formats() {
    let c = ck(json!({"format": "date-time"}));
    yes(&c, &["\"1985-04-12T23:20:50.52Z\"", "\"1998-12-31T23:59:60Z\"", "\"1998-12-31T15:59:60-08:00\"", "\"2020-02-29t00:00:00+01:00\"", "5"]);
    no(&c, &["\"1998-12-31T23:58:60Z\"", "\"2021-02-29T00:00:00Z\"", "\"1985-04-12T23:20:50\"", "\"1985-04-12 23:20:50Z\""]);
    // Leap seconds in every hour's piece, escaped characters included (the leap part is one
    // automaton per local hour).
    yes(&c, &["\"1998-12-31T00:59:60.5+01:00\"", "\"1998-12-31T12:29:60-11:30\"", "\"1998-12-31T23:59:6\\u0030z\"", "\"1998-12-31T0\\u0037:59:60+08:00\""]);
    no(&c, &["\"1998-12-31T00:59:60+02:00\"", "\"1998-12-31T12:29:60+11:30\"", "\"1998-12-31T22:59:6\\u0030Z\"", "\"1998-12-31T07:59:60+08:01\"", "\"1998-12-31T07:59:60.+08:00\""]);
    let t = ck(json!({"type": "string", "format": "time"}));
    yes(&t, &["\"23:59:60Z\"", "\"15:59:60.123-08:00\"", "\"08:30:15.25-05:00\""]);
    no(&t, &["\"22:59:60Z\"", "\"15:59:60-07:00\"", "\"1998-12-31T23:59:60Z\""]);
    let c = ck(json!({"type": "string", "format": "email"}));
    yes(&c, &["\"a.b@example.com\"", "\"\\\"joe bloggs\\\"@example.com\"", "\"x@[127.0.0.1]\""]);
    no(&c, &["\"a..b@example.com\"", "\"ab\"", "\"a@-b.com\""]);
    let c = ck(json!({"type": "string", "format": "uuid"}));
    yes(&c, &["\"2eb8aa08-aa98-11ea-b4aa-73b441d16380\""]);
    no(&c, &["\"2eb8aa08aa9811eab4aa73b441d16380\""]);
    // Length bounds every date-time meets are dropped (the format alone decides); bounds
    // that cut into the language still hold, and bounds no string meets leave nothing.
    let c = ck(json!({"type": "string", "format": "date-time", "minLength": 1}));
    yes(&c, &["\"1998-12-31T23:59:60Z\"", "\"1985-04-12T23:20:50.52Z\""]);
    no(&c, &["\"\"", "\"1998-12-31T23:58:60Z\""]);
    let c = ck(json!({"type": "string", "format": "date", "minLength": 1, "maxLength": 100}));
    yes(&c, &["\"2020-02-29\""]);
    no(&c, &["\"\"", "\"2021-02-29\""]);
    let c = ck(json!({"type": ["string", "integer"], "format": "date", "maxLength": 9}));
    yes(&c, &["5"]);
    no(&c, &["\"2020-01-01\"", "\"\""]);
    let c = ck(json!({"type": "string", "pattern": "^[a-z]{3}$", "minLength": 2, "maxLength": 10}));
    yes(&c, &["\"abc\""]);
    no(&c, &["\"ab\"", "\"abcd\""]);
    // not enforceable: strict error, non-strict warning
    let e = compile_schema(&json!({"format": "hostname"}), &compact()).unwrap_err();
    assert!(matches!(e, SchemaError::Unsupported { ref keyword, .. } if keyword == "format"));
    let c = compile_schema(&json!({"format": "hostname"}), &Options { strict: false, ..compact() }).unwrap();
    assert_eq!(c.warnings.len(), 1);
    assert_eq!(c.warnings[0].pointer, "/format");
    // unknown format: annotation with a notice
    let c = compile_schema(&json!({"format": "int32"}), &compact()).unwrap();
    assert_eq!(c.warnings.len(), 1);
}

#[test]
fn numbers() {
    let c = ck(json!({"type": "integer", "minimum": -5, "exclusiveMaximum": 100}));
    yes(&c, &["-5", "0", "99", "99.0", "-0"]);
    no(&c, &["-6", "100", "100.0", "1000", "5.5"]);
    let c = ck(json!({"type": "number", "minimum": 0.5, "maximum": 1e3}));
    yes(&c, &["0.5", "0.50", "1000", "5e2", "1E3", "999.999", "5.0e-1"]);
    no(&c, &["0.49", "1000.01", "-1", "1.1e3", "4.9e-1"]);
    let c = ck(json!({"type": "integer", "minimum": 12345678901234567890u64}));
    yes(&c, &["12345678901234567890", "99999999999999999999"]);
    no(&c, &["12345678901234567889", "1"]);
    let c = ck(json!({"type": "integer", "multipleOf": 3}));
    yes(&c, &["0", "3", "-9", "12", "3.0"]);
    no(&c, &["1", "10", "4.0"]);
    let c = ck(json!({"type": "number", "multipleOf": 0.01, "maximum": 10}));
    yes(&c, &["0.01", "9.99", "10", "-3.5"]);
    no(&c, &["0.001", "10.01"]);
    // draft 4 boolean exclusiveMinimum
    let c = ck_with(json!({"$schema": "http://json-schema.org/draft-04/schema#", "minimum": 1, "exclusiveMinimum": true}), &compact());
    yes(&c, &["1.5", "2"]);
    no(&c, &["1", "0"]);
}

#[test]
fn objects() {
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}}, "required": ["a"], "additionalProperties": false});
    let c = ck(s.clone());
    yes(&c, &["{\"a\":1}", "{\"b\":\"x\",\"a\":1}", "{\"c\":true,\"b\":\"\",\"a\":0}"]);
    no(&c, &["{}", "{\"b\":\"x\"}", "{\"a\":1,\"a\":2}", "{\"a\":1,\"d\":1}", "{\"a\":\"x\"}"]);
    // schema order
    let c = ck_with(s, &Options { property_order: PropertyOrder::SchemaOrder, ..compact() });
    yes(&c, &["{\"a\":1,\"b\":\"x\"}", "{\"a\":1,\"c\":true}"]);
    no(&c, &["{\"b\":\"x\",\"a\":1}", "{\"a\":1,\"a\":1}"]);
    // additional properties with a schema, keys other than the declared ones
    let c = ck(json!({"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}}));
    yes(&c, &["{\"a\":1,\"b\":\"x\"}", "{\"zz\":\"x\",\"a\":2}", "{}"]);
    no(&c, &["{\"a\":\"x\"}", "{\"\\u0061\":\"x\"}", "{\"b\":1}"]);
    // patternProperties + propertyNames + counts
    let c = ck(json!({"patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": false, "propertyNames": {"maxLength": 3}, "minProperties": 1, "maxProperties": 2}));
    yes(&c, &["{\"x-a\":1}", "{\"x-a\":1,\"x-b\":2}"]);
    no(&c, &["{}", "{\"x-ab\":1}", "{\"y\":1}", "{\"x-a\":\"s\"}", "{\"x-a\":1,\"x-b\":2,\"x-c\":3}"]);
    // dependentRequired
    let c = ck(json!({"dependentRequired": {"a": ["b"]}}));
    yes(&c, &["{\"b\":1}", "{\"a\":1,\"b\":2}", "{}"]);
    no(&c, &["{\"a\":1}"]);
}

#[test]
fn any_order_without_bound() {
    // 40 declared properties, any order, each at most once (a key set, no subset rules).
    let props: serde_json::Map<String, Value> = (0..40).map(|i| (format!("p{i}"), json!({"type": "integer"}))).collect();
    let s = json!({"type": "object", "properties": props, "required": ["p3", "p39"], "additionalProperties": false, "maxProperties": 4});
    let c = compile_schema(&s, &compact()).unwrap();
    assert!(c.warnings.is_empty());
    let k = Checker::new(&c.grammar);
    assert!(k.accepts("{\"p39\":1,\"p0\":2,\"p3\":3}"));
    assert!(k.accepts("{\"p3\":1,\"p39\":2,\"p12\":3,\"p38\":4}"));
    assert!(!k.accepts("{\"p39\":1,\"p3\":2,\"p39\":3}"), "a declared key twice");
    assert!(!k.accepts("{\"p39\":1,\"p0\":2}"), "a required key missing");
    assert!(!k.accepts("{\"p3\":1,\"p39\":2,\"p12\":3,\"p38\":4,\"p1\":5}"), "more than maxProperties");
    let c = compile_schema(&s, &Options { property_order: PropertyOrder::SchemaOrder, ..compact() }).unwrap();
    let k = Checker::new(&c.grammar);
    assert!(k.accepts("{\"p3\":1,\"p39\":2}"));
    assert!(!k.accepts("{\"p39\":1,\"p3\":2}"));
}

#[test]
fn arrays() {
    let c = ck(json!({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}));
    yes(&c, &["[1]", "[1,2,3]"]);
    no(&c, &["[]", "[1,2,3,4]", "[\"a\"]"]);
    let c = ck(json!({"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}));
    yes(&c, &["[]", "[\"a\"]", "[\"a\",1]"]);
    no(&c, &["[1]", "[\"a\",1,2]"]);
    let c = ck_with(json!({"items": [{"type": "string"}], "additionalItems": {"type": "integer"}}), &Options { default_draft: Draft::Draft7, ..compact() });
    yes(&c, &["[\"a\",1,2]", "[]"]);
    no(&c, &["[\"a\",\"b\"]"]);
    let c = ck(json!({"contains": {"const": 5}, "minContains": 2, "maxContains": 3, "items": {"type": "integer"}}));
    yes(&c, &["[5,5]", "[1,5,2,5,5]"]);
    no(&c, &["[5]", "[5,5,5,5]", "[]"]);
    let c = ck(json!({"items": {"enum": ["a", "b", "c"]}, "uniqueItems": true}));
    yes(&c, &["[]", "[\"a\",\"c\"]", "[\"c\",\"b\",\"a\"]"]);
    no(&c, &["[\"a\",\"a\"]"]);
    let e = compile_schema(&json!({"properties": {"tags": {"type": "array", "uniqueItems": true}}}), &compact()).unwrap_err();
    assert!(matches!(&e, SchemaError::Unsupported { pointer, .. } if pointer == "/properties/tags/uniqueItems"), "{e}");
    let c = compile_schema(&json!({"properties": {"tags": {"type": "array", "uniqueItems": true}}}), &Options { strict: false, ..compact() }).unwrap();
    assert_eq!(c.warnings.len(), 1);
    assert_eq!(c.warnings[0].pointer, "/properties/tags/uniqueItems");
    assert!(Checker::new(&c.grammar).accepts("{\"tags\":[1,1]}"));
}

#[test]
fn combinators() {
    let c = ck(json!({"anyOf": [{"type": "string", "maxLength": 1}, {"type": "integer"}]}));
    yes(&c, &["\"a\"", "3"]);
    no(&c, &["\"ab\"", "1.5"]);
    let c = ck(json!({"oneOf": [{"type": "integer"}, {"minimum": 2}]}));
    yes(&c, &["1", "2.5"]);
    no(&c, &["3", "1.5"]);
    let c = ck(json!({"allOf": [{"properties": {"a": {"minimum": 1}}}, {"properties": {"a": {"maximum": 3}}}], "required": ["a"]}));
    yes(&c, &["{\"a\":2}"]);
    no(&c, &["{\"a\":0}", "{\"a\":4}", "{}"]);
    let c = ck(json!({"not": {"required": ["a"]}, "type": "object"}));
    yes(&c, &["{}", "{\"b\":1}"]);
    no(&c, &["{\"a\":1}"]);
    let c = ck(json!({"not": {"enum": ["a", 1]}}));
    yes(&c, &["\"b\"", "2", "null"]);
    no(&c, &["\"a\"", "1", "1.0"]);
    let c = ck(json!({"if": {"properties": {"k": {"const": "n"}}}, "then": {"properties": {"v": {"type": "integer"}}}, "else": {"properties": {"v": {"type": "string"}}}}));
    yes(&c, &["{\"k\":\"n\",\"v\":1}", "{\"k\":\"s\",\"v\":\"x\"}"]);
    no(&c, &["{\"k\":\"n\",\"v\":\"x\"}", "{\"k\":\"s\",\"v\":1}"]);
}

#[test]
fn refs() {
    let s = json!({
        "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}}, "additionalProperties": false},
                  "a/b~c": {"type": "boolean"}, "per%cent": {"type": "null"}},
        "properties": {"list": {"$ref": "#/$defs/node"}, "x": {"$ref": "#/$defs/a~1b~0c"}, "y": {"$ref": "#/$defs/per%25cent"}}
    });
    let c = ck(s);
    yes(&c, &["{\"list\":{\"v\":1,\"next\":{\"next\":{}}}}", "{\"x\":true,\"y\":null}"]);
    no(&c, &["{\"list\":{\"next\":{\"w\":1}}}", "{\"x\":1}", "{\"y\":1}"]);
    let c = ck(json!({"definitions": {"s": {"type": "string"}}, "items": {"$ref": "#/definitions/s"}}));
    yes(&c, &["[\"a\"]"]);
    no(&c, &["[1]"]);
    let c = ck(json!({"type": "string", "nullable": true}));
    yes(&c, &["null", "\"a\""]);
}

#[test]
fn whitespace_modes() {
    let s = json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}});
    let c = ck_with(s.clone(), &Options::default());
    yes(&c, &["{ \"a\" : [ 1 , 2 ] }", " {\n  \"a\": [1, 2]\n}\n", "{}"]);
    no(&c, &[&format!("{{{}}}", " ".repeat(21))]);
    let c = ck_with(s.clone(), &compact());
    no(&c, &["{ \"a\":[1]}"]);
    let fixed = Options { whitespace: Whitespace::Fixed { indent: Some(2), item_sep: ",".into(), key_sep: ": ".into() }, ..Default::default() };
    let c = ck_with(s.clone(), &fixed);
    yes(&c, &["{\n  \"a\": [\n    1,\n    2\n  ]\n}", "{}", "{\n  \"a\": []\n}"]);
    no(&c, &["{\"a\": [1, 2]}", "{\n  \"a\": [1,2]\n}"]);
    let one_line = Options { whitespace: Whitespace::Fixed { indent: None, item_sep: ", ".into(), key_sep: ": ".into() }, ..Default::default() };
    let c = ck_with(s, &one_line);
    yes(&c, &["{\"a\": [1, 2]}"]);
    no(&c, &["{\"a\":[1,2]}"]);
}

#[test]
fn other_keys_of_names_with_nul_characters() {
    // The automaton of "every key but the declared ones" is cached across compiles: the
    // names {"a\u0000b"} and {"a", "b"} must not share an entry.
    let one = ck(json!({"properties": {"a\u{0}b": {"type": "integer"}}, "additionalProperties": {"type": "string"}}));
    yes(&one, &[r#"{"a\u0000b":1}"#, r#"{"a":"x"}"#, r#"{"b":"x"}"#]);
    no(&one, &[r#"{"a\u0000b":"x"}"#, r#"{"a":1}"#]);
    let two = ck(json!({"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "additionalProperties": {"type": "string"}}));
    yes(&two, &[r#"{"a":1}"#, r#"{"b":2}"#, r#"{"a\u0000b":"x"}"#]);
    no(&two, &[r#"{"a":"x"}"#, r#"{"a\u0000b":1}"#]);
}

#[test]
fn pointers_escape_keys() {
    // `~` and `/` in a property name are escaped in the pointer of an error (RFC 6901).
    let e = compile_schema(&json!({"properties": {"a/b~c": {"type": "array", "uniqueItems": true}}}), &compact()).unwrap_err();
    assert!(matches!(&e, SchemaError::Unsupported { pointer, .. } if pointer == "/properties/a~1b~0c/uniqueItems"), "{e}");
    let e = compile_schema(&json!({"properties": {"plain": {"type": "array", "uniqueItems": true}}}), &compact()).unwrap_err();
    assert!(matches!(&e, SchemaError::Unsupported { pointer, .. } if pointer == "/properties/plain/uniqueItems"), "{e}");
}

#[test]
fn keywords_used_and_annotations() {
    let c = compile_schema(&json!({"title": "t", "x-custom": 1, "type": "string", "description": "d"}), &compact()).unwrap();
    assert!(c.warnings.is_empty());
    assert!(c.keywords_used.contains("x-custom") && c.keywords_used.contains("type") && c.keywords_used.contains("title"));
}

#[test]
fn loose_large_object() {
    let props: serde_json::Map<String, Value> = ["cz", "dk", "fr", "de", "gr", "it", "pl", "tr", "en", "jp", "es"].iter().map(|k| (k.to_string(), json!({"type": "string"}))).collect();
    let s = json!({"type": "object", "properties": props, "required": ["en", "de"], "additionalProperties": false});
    let c = compile_schema(&s, &Options { strict: false, ..compact() }).unwrap();
    let k = Checker::new(&c.grammar);
    assert!(k.accepts("{\"de\":\"a\",\"en\":\"b\"}"));
    assert!(k.accepts("{\"cz\":\"T\",\"dk\":\"T\",\"de\":\"a\",\"en\":\"b\"}"));
    assert!(!k.accepts("{\"cz\":\"T\"}"));
}

#[test]
fn required_keys_matched_by_a_wide_pattern() {
    // JSONSchemaBench Github_medium o48427: required keys that only a many-branch pattern
    // declares. The search automaton must stay small, and a key's pattern match must never be
    // decided by whether an automaton fit a limit.
    let words = ["Normal", "Fighting", "Flying", "Poison", "Ground", "Rock", "Bug", "Ghost", "Steel", "Fire", "Water", "Grass", "Electric", "Psychic", "Ice", "Dragon", "Dark", "Fairy"];
    let s = json!({"type": "object", "patternProperties": {words.join("|"): {"type": "number"}}, "required": words, "additionalProperties": false});
    let c = compile_schema(&s, &compact()).unwrap();
    let k = Checker::new(&c.grammar);
    let all: Vec<String> = words.iter().rev().map(|w| format!("\"{w}\":1")).collect();
    assert!(k.accepts(&format!("{{{}}}", all.join(","))));
    assert!(k.accepts(&format!("{{{},\"xRocky\":2}}", all.join(","))), "another key matching the pattern");
    assert!(!k.accepts(&format!("{{{},\"Other\":2}}", all.join(","))), "a key the pattern does not match");
    assert!(!k.accepts(&format!("{{{}}}", all[1..].join(","))), "a required key missing");
}

#[test]
fn one_of_exclusive_within_its_context() {
    // The branches alone overlap; with the sibling `required: ["msg"]` their `msg` enums are
    // disjoint, so oneOf is an exact union (JSONSchemaBench Github_easy o69635).
    let s = json!({"type": "object", "properties": {"msg": {"type": "string"}}, "required": ["msg"],
        "oneOf": [{"properties": {"msg": {"enum": ["a"]}, "x": {"type": "integer"}}, "additionalProperties": false},
                  {"properties": {"msg": {"enum": ["b"]}}}]});
    let c = compile_schema(&s, &compact()).unwrap();
    let k = Checker::new(&c.grammar);
    for ok in [r#"{"msg":"a","x":1}"#, r#"{"x":1,"msg":"a"}"#, r#"{"msg":"b","y":2}"#] {
        assert!(k.accepts(ok), "{ok}");
    }
    for bad in [r#"{"msg":"a","y":1}"#, r#"{"msg":"c"}"#, r#"{"x":1}"#] {
        assert!(!k.accepts(bad), "{bad}");
    }
    // A branch whose type is only narrowed by a nested group (Github_medium o9957).
    let s = json!({"oneOf": [{"oneOf": [{"type": "string", "enum": ["A"]}, {"type": "string", "enum": ["N"]}]},
                             {"type": "object", "properties": {"t": {"type": "string"}}, "additionalProperties": false}]});
    let c = compile_schema(&s, &compact()).unwrap();
    let k = Checker::new(&c.grammar);
    assert!(k.accepts("\"A\"") && k.accepts("\"N\"") && k.accepts(r#"{"t":"x"}"#));
    assert!(!k.accepts("\"B\"") && !k.accepts(r#"{"u":1}"#));
}

/// Bounds above one terminal's 256 characters are whole 256-character chunks plus a tail:
/// every length around the chunk multiples and the bounds, with multi-byte characters and
/// escapes counted as one character each.
fn chunked_lengths() {
    let text = |n: usize| -> String {
        let unit = ["x", "é", "\\n", "😀", "\\u00e9", "\\\"", "日"];
        format!("\"{}\"", (0..n).map(|i| unit[i * 7 % unit.len()]).collect::<String>())
    };
    for (a, b) in [(0u64, Some(300u64)), (255, Some(257)), (256, Some(512)), (300, Some(1000)), (513, None), (0, Some(2000))] {
        let schema = match b {
            Some(b) => json!({"type": "string", "minLength": a, "maxLength": b}),
            None => json!({"type": "string", "minLength": a}),
        };
        let c = ck(schema);
        let top = b.unwrap_or(a + 300);
        let mut probe: Vec<u64> = vec![0, 1, a.saturating_sub(1), a, a + 1, top.saturating_sub(1), top, top + 1];
        for k in 1..=top / 256 + 1 {
            probe.extend([k * 256 - 1, k * 256, k * 256 + 1]);
        }
        for n in probe {
            let ok = n >= a && b.is_none_or(|b| n <= b);
            assert_eq!(c.accepts(&text(n as usize)), ok, "minLength {a} maxLength {b:?}: length {n}");
        }
    }
}

/// Keywords and number forms follow the declared draft, as its validators do: draft 4 has no
/// `if`/`then`/`else` (ignored, like any unknown keyword) and counts `1.0` as a non-integer.
#[test]
fn declared_draft_decides_keywords_and_integers() {
    let d4 = "http://json-schema.org/draft-04/schema#";
    let d7 = "http://json-schema.org/draft-07/schema#";
    let cond = |draft: &str| json!({"$schema": draft, "type": "object", "if": {"properties": {"a": {"const": 1}}}, "then": {"required": ["b"]}});
    let c = ck(cond(d4));
    yes(&c, &["{\"a\":1}", "{\"a\":1,\"b\":2}"]);
    let c = ck(cond(d7));
    yes(&c, &["{\"a\":1,\"b\":2}", "{\"a\":2}"]);
    no(&c, &["{\"a\":1}"]);
    let c = ck(json!({"$schema": d4, "type": "integer"}));
    yes(&c, &["1", "-0", "12345"]);
    no(&c, &["1.0", "12345.0", "1e3"]);
    let c = ck(json!({"$schema": d4, "type": "integer", "minimum": 10}));
    yes(&c, &["10", "12345"]);
    no(&c, &["12345.0", "9"]);
    let c = ck(json!({"type": "integer"}));
    yes(&c, &["1", "1.0", "12345.0"]);
    // An enum value written 3.0 is not an integer in draft 4, so nothing is left.
    assert!(compile_schema(&json!({"$schema": d4, "type": "integer", "enum": [3.0]}), &compact()).is_err());
    let c = ck(json!({"$schema": d4, "type": "integer", "enum": [3.0, 4]}));
    yes(&c, &["4"]);
    no(&c, &["3"]);
    let c = ck(json!({"type": "integer", "enum": [3.0]}));
    yes(&c, &["3"]);
}

/// Non-strict mode past eight `patternProperties`: the patterns left out still admit their
/// keys (with any value), so the grammar stays looser than the schema, never tighter.
#[test]
fn non_strict_keeps_keys_of_patterns_past_the_limit() {
    let pats: serde_json::Map<String, Value> = (0..10).map(|i| (format!("^p{i}:"), json!({"type": "integer"}))).collect();
    let s = json!({"type": "object", "patternProperties": pats, "additionalProperties": false});
    assert!(compile_schema(&s, &compact()).is_err(), "strict: too many patterns");
    let c = ck_with(s, &Options { strict: false, ..compact() });
    yes(&c, &["{\"p0:a\":1}", "{\"p9:z\":2}", "{\"p9:z\":\"any value\"}"]);
}

/// `enum`/`const` values with objects inside objects (keys in any order at every level).
#[test]
fn nested_objects_in_enum_and_const() {
    let c = ck(json!({"const": {"a": {"a": 1, "b": [true, {"c": null}]}, "d": "x"}}));
    yes(&c, &["{\"a\":{\"a\":1,\"b\":[true,{\"c\":null}]},\"d\":\"x\"}", "{\"d\":\"x\",\"a\":{\"b\":[true,{\"c\":null}],\"a\":1}}"]);
    no(&c, &["{\"a\":{\"a\":2,\"b\":[true,{\"c\":null}]},\"d\":\"x\"}", "{\"a\":{\"a\":1},\"d\":\"x\"}", "{\"d\":\"x\"}"]);
    let c = ck(json!({"enum": [{"foo": {"foo": false}}, {"foo": {"bar": 1}}]}));
    yes(&c, &["{\"foo\":{\"foo\":false}}", "{\"foo\":{\"bar\":1}}"]);
    no(&c, &["{\"foo\":{\"foo\":true}}", "{\"foo\":{\"foo\":false,\"bar\":1}}"]);
}

/// A group whose branches are all sets of values is one enum: `anyOf` the union, `oneOf` the
/// values of exactly one branch (overlapping values excluded), `type` narrowing a branch.
#[test]
fn value_branches_merge_into_one_enum() {
    let c = ck(json!({"oneOf": [{"const": "a"}, {"enum": ["a", "b", 1]}, {"const": 1.0, "title": "one"}, {"enum": [2, "c"], "type": "string"}]}));
    yes(&c, &["\"b\"", "\"c\""]);
    no(&c, &["\"a\"", "1", "1.0", "2", "\"d\""]);
    let c = ck(json!({"anyOf": [{"const": "a"}, {"enum": ["a", "b", 1]}, {"enum": [2, "c"], "type": "string"}]}));
    yes(&c, &["\"a\"", "\"b\"", "1", "1.0", "\"c\""]);
    no(&c, &["2", "\"d\""]);
    // Within a context that narrows the values.
    let c = ck(json!({"type": "string", "maxLength": 1, "oneOf": [{"const": "a"}, {"const": "bb"}, {"const": "c"}]}));
    yes(&c, &["\"a\"", "\"c\""]);
    no(&c, &["\"bb\""]);
    // A oneOf of 10,000 consts compiles (quickly: one automaton, see benches/schema_scale_bench.py).
    let k = 10_000;
    let s = json!({"oneOf": (0..k).map(|i| json!({"const": format!("c{i}")})).collect::<Vec<_>>()});
    let c = ck(s);
    yes(&c, &["\"c0\"", "\"c9999\"", "\"c5000\""]);
    no(&c, &["\"c10000\"", "\"c\"", "\"c01\""]);
}

/// A `oneOf` whose branches are more than values goes branch by branch; a const checked in
/// its branch is not validated against the whole `oneOf` again (that was quadratic), but a
/// value nested inside it still meets the schema again through a reference.
#[test]
fn one_of_branches_validated_once() {
    let s = json!({"oneOf": (0..3000).map(|i| json!({"const": format!("c{i}"), "maxLength": 4})).collect::<Vec<_>>()});
    let c = ck(s);
    yes(&c, &["\"c0\"", "\"c999\""]);
    no(&c, &["\"c1000\"", "\"c\""]);
    // Recursion: the nested value must itself satisfy the root's oneOf.
    let c = ck(json!({
        "oneOf": [
            {"const": {"a": {"b": 1}}, "type": "object"},
            {"const": {"b": 1}, "type": "object"},
            {"const": {"b": 2}, "minProperties": 1}
        ],
        "properties": {"a": {"$ref": "#"}}
    }));
    yes(&c, &["{\"a\":{\"b\":1}}", "{\"b\":1}", "{\"b\":2}"]);
    let c = ck(json!({
        "oneOf": [
            {"const": {"a": {"c": 1}}, "type": "object"},
            {"const": {"b": 1}, "type": "object"}
        ],
        "properties": {"a": {"$ref": "#"}}
    }));
    // {"a":{"c":1}}: its "a" is {"c":1}, which no branch admits.
    no(&c, &["{\"a\":{\"c\":1}}"]);
    yes(&c, &["{\"b\":1}"]);
}

/// A string longer than a piece is a sequence of pieces: every spelling of each character
/// still counts (escapes at the pieces' edges), and nothing else does.
#[test]
fn long_consts_are_exact() {
    // 5,000 characters: pieces of 1,024 with a multi-byte character and escapes around
    // each edge.
    let mut s: String = (0..5000).map(|i| ["a", "é", "\"", "😀", "b"][i % 5]).collect();
    s.replace_range(0..1, "\n");
    let c = ck(json!({"const": s}));
    let raw = serde_json::to_string(&s).unwrap();
    yes(&c, &[&raw]);
    // Each character spelt as \uXXXX (surrogate pairs for 😀) everywhere.
    let escaped: String = std::iter::once("\"".to_string())
        .chain(s.chars().map(|ch| {
            let mut b = [0u16; 2];
            ch.encode_utf16(&mut b).iter().map(|u| format!("\\u{u:04X}")).collect::<String>()
        }))
        .chain(std::iter::once("\"".to_string()))
        .collect();
    yes(&c, &[&escaped]);
    let short = serde_json::to_string(&s[..s.len() - 1]).unwrap();
    let longer = serde_json::to_string(&format!("{s}b")).unwrap();
    // A change at the edge between two pieces (character 2,048).
    let changed: String = s.chars().enumerate().map(|(i, ch)| if i == 2048 { 'c' } else { ch }).collect();
    no(&c, &[&short, &longer, &serde_json::to_string(&changed).unwrap(), "\"\""]);
    // A 1 MB const compiles (and inside an enum, with an object value).
    let big = "x".repeat(1_000_000);
    let c = ck(json!({"enum": [big, {"k": "y".repeat(3000)}, 1]}));
    yes(&c, &[&format!("\"{big}\""), &format!("{{\"k\":\"{}\"}}", "y".repeat(3000)), "1"]);
    no(&c, &[&format!("\"{}\"", &big[1..]), &format!("{{\"k\":\"{}\"}}", "y".repeat(2999))]);
}

/// The keys of an object with many properties are split where the names part: each name
/// still matches only itself.
#[test]
fn many_property_keys_are_exact() {
    let props: serde_json::Map<String, Value> = (0..300).map(|i| (format!("p{i}"), json!({"type": "integer"}))).chain([("".to_string(), json!({"const": 0})), ("é\"".to_string(), json!({"const": 1}))]).collect();
    let c = ck(json!({"type": "object", "properties": props, "required": ["p1"], "additionalProperties": false}));
    yes(&c, &["{\"p1\":1}", "{\"p10\":2,\"p1\":3,\"p100\":4,\"p299\":5}", "{\"\":0,\"p1\":1,\"\\u00e9\\\"\":1}", "{\"\\u00701\":1}"]);
    no(&c, &["{}", "{\"p10\":1}", "{\"p1\":1,\"p300\":1}", "{\"p1\":1,\"p\":1}", "{\"p1\":1,\"p1\":1}", "{\"p1\":1,\"p01\":1}", "{\"p1\":1,\"é\":1}"]);
    // With other keys allowed, a name that only begins like a declared one is another key.
    let props: serde_json::Map<String, Value> = (0..100).map(|i| (format!("p{i}"), json!({"type": "integer"}))).collect();
    let c = ck(json!({"type": "object", "properties": props, "additionalProperties": {"type": "string"}}));
    yes(&c, &["{\"p1\":1,\"p1x\":\"a\",\"p\":\"b\",\"p100\":\"c\"}"]);
    no(&c, &["{\"p1\":\"a\"}", "{\"p100\":1}"]);
}

/// `not` of a `oneOf`: no branch, or two of them.
#[test]
fn not_one_of() {
    let c = ck(json!({"not": {"oneOf": [{"type": "integer"}, {"minimum": 2}, {"type": "string"}]}}));
    // Integers >= 2 and strings (`minimum` holds for non-numbers) satisfy two branches, 1.5
    // none; 1, -3, 2.5, null, [] one.
    yes(&c, &["2", "7", "1.5", "\"a\""]);
    no(&c, &["1", "-3", "2.5", "null", "[]", "{}", "true"]);
    // Disjoint branches: the complement of their union.
    let c = ck(json!({"type": "object", "not": {"oneOf": [{"required": ["a"], "properties": {"a": {"const": 1}}}, {"required": ["a"], "properties": {"a": {"const": 2}}}]}}));
    yes(&c, &["{}", "{\"a\":3}", "{\"b\":1}"]);
    no(&c, &["{\"a\":1}", "{\"a\":2,\"b\":0}"]);
}

/// `not` of `additionalProperties` / `patternProperties`: an object with a member the negated
/// schema forbids (another key, or a value that violates the pattern's schema).
#[test]
fn not_additional_and_pattern_properties() {
    // The usual oneOf of closed objects: {} is in both, so each excludes the other.
    let c = ck(json!({"type": "object", "oneOf": [
        {"properties": {"key": {"type": "string"}}, "additionalProperties": false},
        {"properties": {"keys": {"type": "array"}}, "additionalProperties": false}
    ]}));
    yes(&c, &["{\"key\":\"a\"}", "{\"keys\":[]}"]);
    no(&c, &["{}", "{\"key\":\"a\",\"keys\":[]}", "{\"other\":1}", "{\"key\":1}"]);
    let c = ck(json!({"type": "object", "properties": {"a": {"type": "integer"}}, "not": {"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}}}));
    // Fails the negated schema only through another key whose value is not a string.
    yes(&c, &["{\"b\":1}", "{\"a\":1,\"b\":null}", "{\"b\":\"x\",\"c\":[]}"]);
    no(&c, &["{}", "{\"a\":1}", "{\"b\":\"x\"}", "{\"a\":1,\"b\":\"x\"}"]);
    let c = ck(json!({"type": "object", "properties": {"x1": {"type": "integer"}}, "not": {"patternProperties": {"^x": {"type": "integer"}}}}));
    // A key starting with x whose value is not an integer (the declared x1 included).
    yes(&c, &["{\"xa\":\"s\"}", "{\"y\":1,\"xb\":null}"]);
    no(&c, &["{}", "{\"xa\":1}", "{\"y\":\"s\"}", "{\"x1\":1}"]);
    let c = ck(json!({"type": "object", "properties": {"x1": {}}, "not": {"patternProperties": {"^x": {"type": "integer"}}}}));
    yes(&c, &["{\"x1\":\"s\"}", "{\"x1\":2,\"x2\":[]}"]);
    no(&c, &["{\"x1\":2}", "{\"x1\":2,\"x2\":3}"]);
    // Enum values are filtered by the same rule.
    let c = ck(json!({"enum": [{"a": 1}, {"a": 1, "b": 2}, {}], "not": {"properties": {"a": {}}, "additionalProperties": false}}));
    yes(&c, &["{\"a\":1,\"b\":2}"]);
    no(&c, &["{\"a\":1}", "{}"]);
}

/// Several negated property constraints on one object: each met by a declared member or an
/// other key, one member possibly meeting several.
#[test]
fn several_negated_property_constraints() {
    let c = ck(json!({"type": "object", "oneOf": [
        {"properties": {"a": {}}, "additionalProperties": false},
        {"properties": {"b": {}}, "additionalProperties": false},
        {"properties": {"c": {}}, "additionalProperties": false}
    ]}));
    yes(&c, &["{\"a\":1}", "{\"b\":1}", "{\"c\":[]}"]);
    no(&c, &["{}", "{\"a\":1,\"b\":1}", "{\"d\":1}", "{\"a\":1,\"c\":1}"]);
    // Other keys must carry a non-string and a non-number value: one member can do both.
    let c = ck(json!({"type": "object", "allOf": [
        {"not": {"additionalProperties": {"type": "string"}}},
        {"not": {"additionalProperties": {"type": "number"}}}
    ]}));
    yes(&c, &["{\"x\":null}", "{\"x\":\"s\",\"y\":1}", "{\"x\":[]}"]);
    no(&c, &["{}", "{\"x\":\"s\"}", "{\"x\":1,\"y\":2}"]);
}

/// `not` of `propertyNames`: an object with a key the names schema rejects.
#[test]
fn not_property_names() {
    let c = ck(json!({"type": "object", "not": {"propertyNames": {"pattern": "^a"}}}));
    yes(&c, &["{\"b\":1}", "{\"a\":1,\"ba\":2}"]);
    no(&c, &["{}", "{\"a\":1}", "{\"ab\":1,\"a\":[]}"]);
    let c = ck(json!({"type": "object", "properties": {"x": {}}, "not": {"propertyNames": {"maxLength": 2}}}));
    yes(&c, &["{\"abc\":1}", "{\"x\":1,\"long\":2}"]);
    no(&c, &["{\"x\":1}", "{\"ab\":1}"]);
    let c = ck(json!({"enum": [{"a": 1}, {"b": 1}], "not": {"propertyNames": {"const": "a"}}}));
    yes(&c, &["{\"b\":1}"]);
    no(&c, &["{\"a\":1}"]);
}

/// `propertyNames` holding `not`/`anyOf`/`oneOf`, positively and negated.
#[test]
fn property_names_with_combinators() {
    let c = ck(json!({"type": "object", "not": {"propertyNames": {"not": {"const": "0"}}}}));
    // Some key is "0".
    yes(&c, &["{\"0\":1}", "{\"a\":1,\"0\":2}"]);
    no(&c, &["{}", "{\"a\":1}", "{\"00\":1}"]);
    let c = ck(json!({"type": "object", "propertyNames": {"oneOf": [{"pattern": "^a"}, {"pattern": "b$"}]}}));
    yes(&c, &["{}", "{\"ax\":1,\"xb\":2}"]);
    no(&c, &["{\"ab\":1}", "{\"x\":1}"]);
}
