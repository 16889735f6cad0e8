//! `json_schema.excludes`: strings that may not occur in the strings a `json_schema` format
//! writes (string values without `pattern`/`format`, property names, `const`/`enum` values),
//! nested values included.
//!
//! In JSON the excluded strings are matched against the decoded string (so an escaped spelling
//! such as `"a\u0062"` of an excluded `ab` is refused too), which the schema compiler enforces
//! as a `not` `pattern` on each string; in the XML styles raw strings are matched as written.
//! Property names: a declared property whose name contains one is dropped (an error when it is
//! required), and other keys (`additionalProperties`) are refused in JSON values, whose keys
//! would need the same filter.

use super::{child, invalid, unsupported};
use serde_json::{Map, Value};

/// Checks the list for a style (as xgrammar does, plus what corral cannot match exactly).
pub(super) fn check(excludes: &[String], style: &str, at: &str) -> crate::Result<()> {
    let at = child(at, "excludes");
    if !excludes.is_empty() && matches!(style, "cohere_xml" | "minimax_m3_xml") {
        return Err(unsupported("excludes", &at, format!("excludes are not supported with the style '{style}' (as in xgrammar)")));
    }
    for (i, e) in excludes.iter().enumerate() {
        let here = format!("{at}/{i}");
        if e.is_empty() {
            return Err(invalid(&here, "excludes must be non-empty strings"));
        }
        if style != "json" && (e.starts_with(char::is_whitespace) || e.ends_with(char::is_whitespace)) {
            return Err(invalid(&here, "in an XML style, an excluded string may not start or end with whitespace (as in xgrammar)"));
        }
        if e.chars().any(|c| c == '"' || c == '\\' || (c as u32) < 0x20) {
            return Err(unsupported(
                "excludes",
                &here,
                "an excluded string with a quote, a backslash or a control character: xgrammar matches it against JSON's escaped text, corral against the decoded string",
            ));
        }
    }
    Ok(())
}

/// Whether `s` contains one of `excludes`.
pub(super) fn hits(s: &str, excludes: &[String]) -> bool {
    excludes.iter().any(|e| s.contains(e.as_str()))
}

/// An ECMA pattern that finds any of `excludes` in a string.
fn search_pattern(excludes: &[String]) -> String {
    let escape = |e: &str| -> String {
        let mut out = String::new();
        for c in e.chars() {
            if "\\^$.|?*+()[]{}/".contains(c) {
                out.push('\\');
            }
            out.push(c);
        }
        out
    };
    excludes.iter().map(|e| escape(e)).collect::<Vec<_>>().join("|")
}

/// `schema` (already closed, see `close_objects`) with `excludes` applied: a `not` pattern
/// on every string that has no `pattern`/`format`, excluded `const`/`enum` strings and
/// declared names removed. `at` is the schema's place, for errors.
pub(super) fn apply(schema: &Value, excludes: &[String], at: &str) -> crate::Result<Value> {
    let pattern = search_pattern(excludes);
    walk(schema, None, false, &Ctx { excludes, pattern: &pattern }, at, 0)
}

struct Ctx<'a> {
    excludes: &'a [String],
    pattern: &'a str,
}

/// The types a schema admits, as listed by its `type` (None: any).
fn types_of(o: &Map<String, Value>) -> Option<Vec<String>> {
    match o.get("type")? {
        Value::String(t) => Some(vec![t.clone()]),
        Value::Array(a) => Some(a.iter().filter_map(Value::as_str).map(String::from).collect()),
        _ => None,
    }
}

/// `inherited`: the types of the schemas this one is conjoined with (`allOf`/`anyOf`/`oneOf`
/// branches take their parent's); `closed`: whether such a schema already allows no other
/// keys (so that a branch such as `{"required": ["a"]}` under a closed object is not read as
/// an object with any keys).
fn walk(v: &Value, inherited: Option<&[String]>, closed: bool, cx: &Ctx, at: &str, depth: usize) -> crate::Result<Value> {
    if depth > 256 {
        return Err(unsupported("excludes", at, "schema nested too deeply"));
    }
    let o = match v {
        Value::Bool(false) => return Ok(v.clone()),
        Value::Bool(true) => return Err(open_keys(at)),
        Value::Object(o) => o,
        _ => return Ok(v.clone()),
    };
    let own = types_of(o);
    let types: Option<Vec<String>> = match (own, inherited) {
        (Some(t), Some(p)) => Some(t.into_iter().filter(|x| p.contains(x) || (x == "integer" && p.iter().any(|y| y == "number"))).collect()),
        (Some(t), None) => Some(t),
        (None, p) => p.map(<[String]>::to_vec),
    };
    let admits = |t: &str| types.as_ref().is_none_or(|ts| ts.iter().any(|x| x == t));
    let closed_here = closed || o.get("additionalProperties") == Some(&Value::Bool(false));
    if let Some(req) = o.get("required").and_then(Value::as_array) {
        if let Some(i) = req.iter().position(|n| n.as_str().is_some_and(|n| hits(n, cx.excludes))) {
            return Err(unsupported("excludes", &format!("{}/{i}", child(at, "required")), "a required property's name contains an excluded string"));
        }
    }
    let mut out = Map::new();
    for (k, x) in o {
        let kat = child(at, k);
        let y = match k.as_str() {
            "properties" => match x {
                Value::Object(m) => {
                    let mut kept = Map::new();
                    for (n, s) in m {
                        if !hits(n, cx.excludes) {
                            kept.insert(n.clone(), walk(s, None, false, cx, &child(&kat, n), depth + 1)?);
                        }
                    }
                    Value::Object(kept)
                }
                _ => x.clone(),
            },
            "$defs" | "definitions" => match x {
                Value::Object(m) => Value::Object(m.iter().map(|(n, s)| Ok((n.clone(), walk(s, None, false, cx, &child(&kat, n), depth + 1)?))).collect::<crate::Result<_>>()?),
                _ => x.clone(),
            },
            "anyOf" | "oneOf" | "allOf" => match x {
                Value::Array(a) => Value::Array(a.iter().enumerate().map(|(i, s)| walk(s, types.as_deref(), closed_here, cx, &format!("{kat}/{i}"), depth + 1)).collect::<crate::Result<_>>()?),
                _ => x.clone(),
            },
            "prefixItems" => match x {
                Value::Array(a) => Value::Array(a.iter().enumerate().map(|(i, s)| walk(s, None, false, cx, &format!("{kat}/{i}"), depth + 1)).collect::<crate::Result<_>>()?),
                _ => x.clone(),
            },
            "items" | "additionalItems" | "unevaluatedItems" | "contains" => match x {
                Value::Array(a) => Value::Array(a.iter().enumerate().map(|(i, s)| walk(s, None, false, cx, &format!("{kat}/{i}"), depth + 1)).collect::<crate::Result<_>>()?),
                Value::Bool(false) => x.clone(),
                s => walk(s, None, false, cx, &kat, depth + 1)?,
            },
            "then" | "else" => walk(x, types.as_deref(), closed_here, cx, &kat, depth + 1)?,
            "additionalProperties" | "unevaluatedProperties" if x != &Value::Bool(false) && admits("object") => return Err(open_keys(&kat)),
            "patternProperties" | "dependentSchemas" if admits("object") => return Err(open_keys(&kat)),
            "enum" => match x {
                Value::Array(a) => {
                    let kept: Vec<Value> = a.iter().filter(|v| !v.as_str().is_some_and(|s| hits(s, cx.excludes))).cloned().collect();
                    if kept.is_empty() {
                        return Err(unsupported("excludes", &kat, "every enum value contains an excluded string"));
                    }
                    Value::Array(kept)
                }
                _ => x.clone(),
            },
            "const" if x.as_str().is_some_and(|s| hits(s, cx.excludes)) => {
                return Err(unsupported("excludes", &kat, "the const value contains an excluded string"));
            }
            // `not` and `if` are left as they are: a filter inside them would loosen the schema.
            _ => x.clone(),
        };
        out.insert(k.clone(), y);
    }
    let has = |k: &str| o.contains_key(k);
    let branches = has("anyOf") || has("oneOf") || has("allOf") || has("$ref");
    let fixed = has("enum") || has("const");
    // An object with keys beyond its declared ones (closed objects say additionalProperties: false).
    if admits("object") && !branches && !fixed && !closed_here {
        return Err(open_keys(at));
    }
    if admits("string") && !branches && !fixed && !has("pattern") && !has("format") {
        let not = serde_json::json!({"not": {"type": "string", "pattern": cx.pattern}});
        match out.get_mut("allOf") {
            Some(Value::Array(a)) => a.push(not),
            _ => {
                out.insert("allOf".into(), Value::Array(vec![not]));
            }
        }
    }
    Ok(Value::Object(out))
}

fn open_keys(at: &str) -> crate::FormatError {
    unsupported("excludes", at, "with excludes, a JSON object may not take keys other than its declared properties (its keys would need the same filter); declare its properties")
}
