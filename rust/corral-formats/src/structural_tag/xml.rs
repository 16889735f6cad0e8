//! The XML argument styles of `json_schema`: tool arguments written as XML parameters, laid
//! out as xgrammar 0.2.8 lays them out (checked against its matcher by
//! `tests/test_structural_tag.py`).
//!
//! | style | one parameter |
//! |---|---|
//! | `qwen_xml` | `<parameter=k>v</parameter>` |
//! | `minimax_xml` | `<parameter name="k">v</parameter>` |
//! | `glm_xml` | `<arg_key>k</arg_key><arg_value>v</arg_value>` |
//! | `deepseek_xml` | `<｜DSML｜parameter name="k" string="true\|false">v</｜DSML｜parameter>` |
//! | `deepseek_v4_1_xml` | `<｜DSML｜ parameter name="k" string="…">v</｜DSML｜ parameter>` |
//! | `kimi_k3_xml` | `<\|open\|>argument key="k" type="t"<\|sep\|>v<\|close\|>argument<\|sep\|>` |
//! | `cohere_xml` | `<cofl:value name="k" type="raw\|json\|dict\|list">v</cofl:value>` |
//! | `minimax_m3_xml` | `]<]minimax[>[<k>v]<]minimax[>[</k>` |
//!
//! The root schema is an object whose properties are the parameters, separated by whitespace.
//! A plain string value is raw text that does not contain the style's closing delimiter.
//! The first six styles write other values as JSON; `cohere_xml` and `minimax_m3_xml` write
//! objects and arrays as nested parameters (recursively), and scalars as their JSON text.

use super::{array, child, close_objects, invalid, kind, string, unsupported, Compiler, Goal, IGNORED_KEYWORDS};
use corral_core::ebnf::{Expr, PermSpec};
use corral_core::{Dfa, Rx};
use serde_json::{Map, Value};
use std::sync::Arc;

/// The key suffix standing for the DeepSeek styles' `string="true|false"` attribute.
const STRING_ATTR: &str = "\0string-attr";

/// The namespace marker of `minimax_m3_xml`.
const M3_MARK: &str = "]<]minimax[>[";

/// XML names as the flat styles read other keys.
const IDENTIFIER: &str = "[A-Za-z_][A-Za-z0-9_]*";

/// `cohere_xml`'s attribute values: characters but `"`, `&`, `<`, `>` and NUL, or an entity.
const COHERE_KEY: &str = "([^\\x00\"&<>]|&amp;|&lt;|&gt;|&quot;)+";

/// `kimi_k3_xml`'s type names.
const KIMI_TYPES: [&str; 7] = ["string", "number", "integer", "boolean", "object", "array", "null"];

/// How a style writes parameters and nested values.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    /// One level of parameters, other values as JSON (`qwen_xml`, `minimax_xml`, `glm_xml`,
    /// the DeepSeek styles).
    Flat,
    /// `kimi_k3_xml`: flat, with a `type` attribute.
    Kimi,
    /// `cohere_xml`: nested objects and lists as parameters, a `type` attribute per value.
    Cohere,
    /// `minimax_m3_xml`: nested objects and lists as parameters, no whitespace around values.
    MinimaxM3,
}

/// The delimiters of an XML argument style.
#[derive(Clone, Copy)]
struct Xml {
    family: Family,
    key_prefix: &'static str,
    key_suffix: &'static str,
    value_prefix: &'static str,
    close: &'static str,
}

impl Xml {
    fn of(style: &str) -> Option<Xml> {
        let flat = |key_prefix, key_suffix, value_prefix, close| Xml { family: Family::Flat, key_prefix, key_suffix, value_prefix, close };
        Some(match style {
            "qwen_xml" => flat("<parameter=", ">", "", "</parameter>"),
            "minimax_xml" => flat("<parameter name=\"", "\">", "", "</parameter>"),
            "glm_xml" => flat("<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"),
            // The key suffix is `" string="true">` before a raw string value, `" string="false">`
            // before a JSON one (see `XmlCtx::param`).
            "deepseek_xml" => flat("<｜DSML｜parameter name=\"", STRING_ATTR, "", "</｜DSML｜parameter>"),
            "deepseek_v4_1_xml" => flat("<｜DSML｜ parameter name=\"", STRING_ATTR, "", "</｜DSML｜ parameter>"),
            "kimi_k3_xml" => Xml { family: Family::Kimi, key_prefix: "<|open|>argument key=\"", key_suffix: "\" type=\"", value_prefix: "\"<|sep|>", close: "<|close|>argument<|sep|>" },
            "cohere_xml" => Xml { family: Family::Cohere, key_prefix: "<cofl:value name=\"", key_suffix: "\"", value_prefix: "", close: "</cofl:value>" },
            "minimax_m3_xml" => Xml { family: Family::MinimaxM3, key_prefix: "", key_suffix: "", value_prefix: "", close: "" },
            _ => return None,
        })
    }

    /// What a raw string value may not contain (the delimiter that ends it).
    fn string_end(&self) -> &'static str {
        if self.family == Family::MinimaxM3 {
            M3_MARK
        } else {
            self.close
        }
    }

    /// Whether objects and arrays are written as nested parameters (not as JSON).
    fn nested(&self) -> bool {
        matches!(self.family, Family::Cohere | Family::MinimaxM3)
    }
}

/// What kind of text a value alternative is: `cohere_xml` names it in its `type` attribute,
/// the DeepSeek styles say whether it is a raw string.
#[derive(Clone, Copy, PartialEq, Eq)]
enum VKind {
    Raw,
    Json,
    Dict,
    List,
}

impl VKind {
    fn cohere_name(self) -> &'static str {
        match self {
            VKind::Raw => "raw",
            VKind::Json => "json",
            VKind::Dict => "dict",
            VKind::List => "list",
        }
    }
}

/// A parameter's key: a declared property name, or any other name (an automaton).
enum Key<'a> {
    Name(&'a str),
    Other(Expr),
}

/// What the values of one XML-style schema are compiled with.
struct XmlCtx<'a> {
    w: Xml,
    ws: Expr,
    max_ws: Option<u32>,
    any_order: bool,
    root: &'a Value,
}

fn lit(s: &str) -> Expr {
    Expr::Literal(s.as_bytes().to_vec())
}

/// `s` as an XML attribute value (`cohere_xml`'s names).
fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The JSON type a value of a `const`/`enum` has, as `kimi_k3_xml` names it.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl XmlCtx<'_> {
    fn pad(&self, e: Expr) -> Expr {
        if self.w.family == Family::MinimaxM3 {
            e
        } else {
            Expr::Seq(vec![self.ws.clone(), e, self.ws.clone()])
        }
    }

    /// `cohere_xml`'s ` type="…">value</cofl:value>`, one alternative per value kind.
    fn cohere_typed(&self, values: &[(VKind, Expr)]) -> Expr {
        Expr::Alt(values.iter().map(|(k, v)| Expr::Seq(vec![lit(&format!(" type=\"{}\">", k.cohere_name())), v.clone(), lit(self.w.close)])).collect())
    }

    /// `kimi_k3_xml`'s type name for a property's schema: the schema's one type (`integer`
    /// written `number`), the common type of its `const`/`enum` values; any type name when
    /// the schema does not fix one (a `$ref` included, as in xgrammar).
    fn kimi_type(&self, sub: &Value) -> Expr {
        let fixed = (|| -> Option<&'static str> {
            let o = sub.as_object()?;
            if let Some(t) = o.get("type") {
                return match t.as_str()? {
                    "integer" | "number" => Some("number"),
                    t => KIMI_TYPES.iter().copied().find(|k| *k == t),
                };
            }
            let values: Vec<&Value> = match (o.get("const"), o.get("enum")) {
                (Some(c), _) => vec![c],
                (None, Some(Value::Array(a))) => a.iter().collect(),
                _ => return None,
            };
            let first = json_type(values.first()?);
            values.iter().all(|v| json_type(v) == first).then_some(first)
        })();
        match fixed {
            Some(t) => lit(t),
            None => Expr::Alt(KIMI_TYPES.iter().map(|t| lit(t)).collect()),
        }
    }

    /// One parameter: the key between the style's delimiters, then one of the `values` and
    /// the closing delimiter. `values` are (kind, expression) alternatives; with the DeepSeek
    /// styles and `cohere_xml` the attribute before the value says which kind follows;
    /// `kimi_type` is the `type` attribute of `kimi_k3_xml`.
    fn param(&self, key: Key, values: Vec<(VKind, Expr)>, kimi_type: Expr) -> Expr {
        let key_expr = |escape: bool| match &key {
            Key::Name(n) if escape => lit(&xml_escape(n)),
            Key::Name(n) => lit(n),
            Key::Other(e) => e.clone(),
        };
        let alt = |values: Vec<(VKind, Expr)>| Expr::Alt(values.into_iter().map(|(_, e)| e).collect());
        match self.w.family {
            Family::MinimaxM3 => {
                let Key::Name(n) = key else { unreachable!("minimax_m3_xml has declared names only") };
                Expr::Seq(vec![lit(&format!("{M3_MARK}<{n}>")), alt(values), lit(&format!("{M3_MARK}</{n}>"))])
            }
            Family::Cohere => Expr::Seq(vec![lit(self.w.key_prefix), key_expr(true), lit(self.w.key_suffix), self.cohere_typed(&values)]),
            Family::Kimi => Expr::Seq(vec![lit(self.w.key_prefix), key_expr(false), lit(self.w.key_suffix), kimi_type, lit(self.w.value_prefix), alt(values), lit(self.w.close)]),
            Family::Flat if self.w.key_suffix == STRING_ATTR => {
                let mut alts = Vec::new();
                for (raw, attr) in [(true, "\" string=\"true\">"), (false, "\" string=\"false\">")] {
                    let g: Vec<Expr> = values.iter().filter(|(k, _)| (*k == VKind::Raw) == raw).map(|(_, e)| e.clone()).collect();
                    if !g.is_empty() {
                        alts.push(Expr::Seq(vec![lit(attr), Expr::Alt(g)]));
                    }
                }
                Expr::Seq(vec![lit(self.w.key_prefix), key_expr(false), Expr::Alt(alts), lit(self.w.close)])
            }
            Family::Flat => {
                let mut v = vec![lit(self.w.key_prefix), key_expr(false), lit(self.w.key_suffix)];
                if !self.w.value_prefix.is_empty() {
                    v.push(self.ws.clone());
                    v.push(lit(self.w.value_prefix));
                }
                v.push(alt(values));
                v.push(lit(self.w.close));
                Expr::Seq(v)
            }
        }
    }
}

impl Compiler<'_> {
    /// A raw string value: text without the style's closing delimiter or an excluded string,
    /// of at most `max_chars` characters.
    fn raw_text(&mut self, x: &XmlCtx, max_chars: Option<u32>, at: &str) -> crate::Result<Expr> {
        let mut forbidden = vec![x.w.string_end().as_bytes().to_vec()];
        forbidden.extend(self.excludes.iter().map(|e| e.as_bytes().to_vec()));
        self.free_text(&forbidden, &[], Goal::Free, max_chars, at)
    }

    /// The rule name of a rule defined later (for recursive rules).
    fn reserve_rule(&mut self) -> String {
        self.next_id += 1;
        format!("st_{}", self.next_id)
    }

    /// `json_schema` in an XML style (see the module's table).
    pub(super) fn xml_schema(&mut self, style: &str, schema: &Value, any_order: bool, max_ws: Option<u32>, at: &str) -> crate::Result<Expr> {
        let schema_at = child(at, "json_schema");
        let Some(w) = Xml::of(style) else {
            return Err(unsupported(&format!("style '{style}'"), &child(at, "style"), "unknown XML argument style"));
        };
        if !matches!(schema, Value::Bool(_) | Value::Object(_)) {
            return Err(invalid(&schema_at, format!("a JSON schema is an object or a boolean, found {}", kind(schema))));
        }
        if schema == &Value::Bool(false) {
            return Err(unsupported("json_schema", &schema_at, "the schema 'false' admits no arguments at all"));
        }
        if w.family == Family::MinimaxM3 && schema == &Value::Bool(true) {
            return Err(unsupported("json_schema", &schema_at, "minimax_m3_xml writes fixed parameter names only; the schema 'true' has none"));
        }
        let schema = close_objects(schema);
        let ws = Expr::Terminal(Rx::Repeat { inner: Arc::new(Rx::Bytes(vec![(b'\t', b'\n'), (b'\r', b'\r'), (b' ', b' ')])), min: 0, max: max_ws });
        let x = XmlCtx { w, ws, max_ws, any_order, root: &schema };
        let empty = Map::new();
        let body = self.xml_object(&x, schema.as_object().unwrap_or(&empty), &schema_at, 0)?;
        Ok(self.rule(body))
    }

    /// An object's parameters (the root's, and nested objects' in `cohere_xml` and
    /// `minimax_m3_xml`), separated and surrounded by whitespace: the declared properties
    /// (in declared order unless `any_order`), then other keys with `additionalProperties`'
    /// schema (closed by default, as in xgrammar's strict mode).
    fn xml_object(&mut self, x: &XmlCtx, o: &Map<String, Value>, at: &str, depth: usize) -> crate::Result<Expr> {
        for (k, v) in o {
            let ok = match k.as_str() {
                "type" => v == "object" || v.as_array().is_some_and(|a| a.len() == 1 && a[0] == "object"),
                "properties" | "required" | "additionalProperties" => true,
                _ => IGNORED_KEYWORDS.contains(&k.as_str()),
            };
            if !ok {
                return Err(unsupported(k, &child(at, k), format!("'{k}' on an object in an XML style is not supported")));
            }
        }
        let props: Vec<(&String, &Value)> = match o.get("properties") {
            None => Vec::new(),
            Some(Value::Object(m)) => m.iter().collect(),
            Some(_) => return Err(invalid(&child(at, "properties"), "'properties' must be an object")),
        };
        let required: Vec<&str> = o.get("required").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        // A parameter whose name contains an excluded string cannot be written.
        if let Some(r) = required.iter().find(|r| super::excludes::hits(r, &self.excludes)) {
            return Err(unsupported("excludes", &child(at, "required"), format!("the required parameter '{r}' has an excluded string in its name")));
        }
        let props: Vec<(&String, &Value)> = props.into_iter().filter(|(n, _)| !super::excludes::hits(n, &self.excludes)).collect();
        let mut members = Vec::new();
        for (name, sub) in &props {
            let sat = child(&child(at, "properties"), name);
            let values = self.xml_value(x, sub, &sat, depth)?;
            let param = x.param(Key::Name(name), values, x.kimi_type(sub));
            members.push((self.rule(param), required.contains(&name.as_str())));
        }
        // (`close_objects` has closed every object with `properties`: absent means any.)
        let extra = match o.get("additionalProperties") {
            Some(Value::Bool(false)) => None,
            // minimax_m3_xml writes declared names only: an object without them is empty.
            None if x.w.family == Family::MinimaxM3 => None,
            Some(_) if x.w.family == Family::MinimaxM3 => {
                return Err(unsupported("additionalProperties", &child(at, "additionalProperties"), "minimax_m3_xml writes declared parameter names only"));
            }
            sub => {
                let any = Value::Bool(true);
                let sub = sub.unwrap_or(&any);
                let sat = child(at, "additionalProperties");
                let values = self.xml_value(x, sub, &sat, depth)?;
                let (pattern, names): (&str, Vec<String>) = match x.w.family {
                    Family::Cohere => (COHERE_KEY, props.iter().map(|(n, _)| xml_escape(n)).collect()),
                    _ => (IDENTIFIER, props.iter().map(|(n, _)| n.to_string()).collect()),
                };
                let names: Vec<&[u8]> = names.iter().map(|n| n.as_bytes()).collect();
                let lang = Dfa::from_rx(&corral_core::parse_regex(pattern, self.limits)?, self.limits)?;
                let avoid = match self.excludes.is_empty() {
                    true => None,
                    false => {
                        let pats: Vec<(Vec<u8>, super::Role)> = self.excludes.iter().map(|e| (e.as_bytes().to_vec(), super::Role::Forbidden)).collect();
                        super::text::automaton(&pats, Goal::Free, None, super::MAX_TEXT_STATES)
                    }
                };
                let key = Expr::Terminal(Rx::Automaton(Arc::new(super::text::excluding(&lang, &names, avoid.as_ref()))));
                let param = x.param(Key::Other(key), values, x.kimi_type(sub));
                Some(self.rule(param))
            }
        };
        let ws = x.ws.clone();
        let m3 = x.w.family == Family::MinimaxM3;
        // What an object without parameters is: whitespace, or (minimax_m3_xml) nothing.
        let none = if m3 { Expr::Seq(vec![]) } else { ws.clone() };
        let any_required = members.iter().any(|(_, r)| *r);
        if x.any_order {
            let perm = |min| Expr::Perm(Box::new(PermSpec { members: members.clone(), extra: extra.clone(), sep: ws.clone(), min, max: None }));
            return Ok(if members.is_empty() && extra.is_none() {
                none
            } else if any_required {
                Expr::Seq(vec![ws.clone(), perm(0), ws.clone()])
            } else {
                Expr::Alt(vec![none, Expr::Seq(vec![ws.clone(), perm(1), ws.clone()])])
            });
        }
        if m3 && !any_required {
            // Nothing, or whitespace, one or more parameters in order, whitespace: the first
            // parameter present is one of them, the others after it are optional.
            let mut firsts = Vec::new();
            let mut tail = Expr::Seq(vec![]);
            for (m, _) in members.iter().rev() {
                firsts.push(Expr::Seq(vec![m.clone(), ws.clone(), tail.clone()]));
                tail = self.rule(Expr::Seq(vec![Expr::Repeat { inner: Box::new(Expr::Seq(vec![m.clone(), ws.clone()])), min: 0, max: Some(1) }, tail]));
            }
            return Ok(if firsts.is_empty() { none } else { Expr::Alt(vec![none, Expr::Seq(vec![ws.clone(), Expr::Alt(firsts)])]) });
        }
        let mut seq = vec![ws.clone()];
        for (m, req) in members {
            let item = Expr::Seq(vec![m, ws.clone()]);
            seq.push(if req { item } else { Expr::Repeat { inner: Box::new(item), min: 0, max: Some(1) } });
        }
        if let Some(e) = extra {
            seq.push(Expr::Repeat { inner: Box::new(Expr::Seq(vec![e, ws.clone()])), min: 0, max: None });
        }
        Ok(Expr::Seq(seq))
    }

    /// One parameter's value, as (kind, expression) alternatives. A plain string is raw text
    /// without the style's closing delimiter; a string with `pattern` or length bounds, a
    /// `const` or an `enum` is its raw text; an unconstrained value is raw text or a JSON
    /// array or object (`cohere_xml`: any of its four kinds); objects and arrays are JSON, or
    /// nested parameters in `cohere_xml` and `minimax_m3_xml`; other values are JSON. All but
    /// the plain string may have whitespace around them (not in `minimax_m3_xml`).
    fn xml_value(&mut self, x: &XmlCtx, sub: &Value, at: &str, depth: usize) -> crate::Result<Vec<(VKind, Expr)>> {
        if depth > 32 {
            return Err(unsupported("$ref", at, "reference chain or nesting too deep"));
        }
        let o = match sub {
            Value::Bool(true) => return self.xml_any(x, at),
            Value::Bool(false) => return Err(unsupported("json_schema", at, "a property with the schema 'false' is not supported in XML styles")),
            Value::Object(o) => o,
            v => return Err(invalid(at, format!("a JSON schema is an object or a boolean, found {}", kind(v)))),
        };
        let keys: Vec<&str> = o.keys().map(String::as_str).filter(|k| !IGNORED_KEYWORDS.contains(k)).collect();
        if keys.is_empty() {
            return self.xml_any(x, at);
        }
        if let Some(k) = keys.iter().find(|k| ["oneOf", "allOf", "not", "if"].contains(k)) {
            return Err(unsupported(k, &child(at, k), format!("'{k}' in a parameter's schema is not supported in XML styles (whether the value is raw text or JSON depends on the branch)")));
        }
        if keys == ["$ref"] {
            let target = o["$ref"].as_str().and_then(|r| r.strip_prefix('#')).and_then(|p| x.root.pointer(p));
            return match target {
                Some(t) => self.xml_value(x, &t.clone(), at, depth + 1),
                None => Err(unsupported("$ref", &child(at, "$ref"), "only local references ('#/...') are supported in XML styles")),
            };
        }
        if keys.iter().all(|k| *k == "enum" || *k == "const" || *k == "type") && (o.contains_key("enum") || o.contains_key("const")) {
            let values: Vec<&Value> = match (o.get("const"), o.get("enum")) {
                (Some(c), None) => vec![c],
                (None, Some(Value::Array(a))) if !a.is_empty() => a.iter().collect(),
                _ => return Err(unsupported("enum", at, "this enum/const form is not supported in XML styles")),
            };
            let (mut strings, mut others) = (Vec::new(), Vec::new());
            for v in values {
                match v {
                    Value::String(s) if super::excludes::hits(s, &self.excludes) => {}
                    Value::String(s) => strings.push(lit(s)),
                    v => others.push(Expr::Literal(serde_json::to_string(v).unwrap_or_default().into_bytes())),
                }
            }
            if strings.is_empty() && others.is_empty() {
                return Err(unsupported("excludes", at, "every enum value contains an excluded string"));
            }
            let mut out = Vec::new();
            if !strings.is_empty() {
                out.push((VKind::Raw, x.pad(Expr::Alt(strings))));
            }
            if !others.is_empty() {
                out.push((VKind::Json, x.pad(Expr::Alt(others))));
            }
            return Ok(out);
        }
        if let Some(Value::Array(types)) = o.get("type") {
            let mut alts = Vec::new();
            for t in types {
                let mut one = o.clone();
                one.insert("type".into(), t.clone());
                alts.extend(self.xml_value(x, &Value::Object(one), at, depth + 1)?);
            }
            if alts.is_empty() {
                return Err(unsupported("type", &child(at, "type"), "an empty type list admits no value"));
            }
            return Ok(alts);
        }
        if keys == ["anyOf"] {
            let opts = array(&o["anyOf"], &child(at, "anyOf"))?;
            let mut alts = Vec::new();
            for (i, s) in opts.iter().enumerate() {
                alts.extend(self.xml_value(x, s, &format!("{at}/anyOf/{i}"), depth + 1)?);
            }
            if alts.is_empty() {
                return Err(unsupported("anyOf", &child(at, "anyOf"), "an empty anyOf admits no value"));
            }
            return Ok(alts);
        }
        let ty = o.get("type").and_then(Value::as_str);
        if ty == Some("string") {
            let has = |k: &str| o.contains_key(k);
            if has("format") {
                return Err(unsupported("format", &child(at, "format"), "string formats are not supported in XML styles"));
            }
            if let Some(other) = keys.iter().find(|k| !["type", "pattern", "minLength", "maxLength"].contains(k)) {
                return Err(unsupported(other, &child(at, other), format!("'{other}' on a string is not supported in XML styles")));
            }
            if x.w.family == Family::MinimaxM3 {
                if let Some(k) = ["pattern", "minLength", "maxLength"].into_iter().find(|k| has(k)) {
                    return Err(unsupported(k, &child(at, k), "minimax_m3_xml supports no pattern or length bound on a string (as in xgrammar)"));
                }
            }
            if let Some(p) = o.get("pattern") {
                let p = string(p, &child(at, "pattern"))?;
                return Ok(vec![(VKind::Raw, x.pad(Expr::Terminal(corral_core::parse_regex(p, self.limits)?)))]);
            }
            if has("minLength") || has("maxLength") {
                let num = |k: &str| o.get(k).and_then(Value::as_u64).map(|n| n.min(u32::MAX as u64) as u32);
                let min = num("minLength").unwrap_or(0);
                let max = num("maxLength");
                if !self.excludes.is_empty() {
                    if min > 0 {
                        return Err(unsupported("minLength", &child(at, "minLength"), "minLength on a raw string together with excludes is not supported"));
                    }
                    return Ok(vec![(VKind::Raw, x.pad(self.raw_text(x, max, at)?))]);
                }
                return Ok(vec![(VKind::Raw, x.pad(Expr::Terminal(Rx::Repeat { inner: Arc::new(Rx::any_char()), min, max })))]);
            }
            return Ok(vec![(VKind::Raw, self.raw_text(x, None, at)?)]);
        }
        if x.w.nested() {
            let object_keys = ["properties", "required", "additionalProperties"];
            let array_keys = ["items", "minItems", "maxItems"];
            let is = |t: &str, ks: &[&str]| ty == Some(t) || (ty.is_none() && keys.iter().all(|k| ks.contains(k)));
            if is("object", &object_keys) {
                let body = self.xml_object(x, o, at, depth + 1)?;
                return Ok(vec![(VKind::Dict, x.pad(body))]);
            }
            if is("array", &array_keys) {
                let body = self.xml_list(x, o, at, depth + 1)?;
                return Ok(vec![(VKind::List, x.pad(body))]);
            }
            if ty.is_none() {
                return Err(unsupported("type", at, "a value without 'type' must be an object, an array, an enum or a const in cohere_xml and minimax_m3_xml"));
            }
        }
        // Any other value: JSON, with the root's definitions at hand for its references.
        let mut with_defs = o.clone();
        for k in ["$defs", "definitions"] {
            if let (Some(d), false) = (x.root.get(k), o.contains_key(k)) {
                with_defs.insert(k.into(), d.clone());
            }
        }
        let json = self.json_rules(&Value::Object(with_defs), false, x.max_ws, at)?;
        Ok(vec![(VKind::Json, x.pad(json))])
    }

    /// An array in `cohere_xml` (`<cofl:value type="…">item</cofl:value>`, one after another)
    /// or `minimax_m3_xml` (`]<]minimax[>[<item>v]<]minimax[>[</item>`, separated and
    /// surrounded by whitespace), with `minItems`/`maxItems`. Without `items`, cohere_xml
    /// items are any values; minimax_m3_xml, which cannot write a value without a type, takes
    /// the empty array only (as xgrammar does).
    fn xml_list(&mut self, x: &XmlCtx, o: &Map<String, Value>, at: &str, depth: usize) -> crate::Result<Expr> {
        for k in o.keys() {
            if !["type", "items", "minItems", "maxItems"].contains(&k.as_str()) && !IGNORED_KEYWORDS.contains(&k.as_str()) {
                return Err(unsupported(k, &child(at, k), format!("'{k}' on an array in an XML style is not supported")));
            }
        }
        let count = |k: &str| -> crate::Result<Option<u32>> {
            match o.get(k) {
                None => Ok(None),
                Some(v) => v.as_u64().map(|n| Some(n.min(u32::MAX as u64) as u32)).ok_or_else(|| invalid(&child(at, k), format!("'{k}' must be a non-negative integer"))),
            }
        };
        let (min, max) = (count("minItems")?.unwrap_or(0), count("maxItems")?);
        let values = match o.get("items") {
            Some(Value::Bool(false)) => None,
            None if x.w.family == Family::MinimaxM3 => None,
            Some(Value::Array(_)) => return Err(unsupported("items", &child(at, "items"), "tuple 'items' is not supported in XML styles")),
            items => Some(self.xml_value(x, items.unwrap_or(&Value::Bool(true)), &child(at, "items"), depth)?),
        };
        let empty = Expr::Seq(vec![]);
        if max.is_some_and(|m| m < min) || (min > 0 && (values.is_none() || max == Some(0))) {
            return Err(unsupported("minItems", &child(at, "minItems"), "no array satisfies these bounds"));
        }
        let Some(values) = values.filter(|_| max != Some(0)) else {
            return Ok(empty);
        };
        if x.w.family == Family::Cohere {
            let item = self.rule(Expr::Seq(vec![lit("<cofl:value"), x.cohere_typed(&values)]));
            return Ok(Expr::Repeat { inner: Box::new(item), min, max });
        }
        let item = self.rule(Expr::Seq(vec![lit(&format!("{M3_MARK}<item>")), Expr::Alt(values.into_iter().map(|(_, e)| e).collect()), lit(&format!("{M3_MARK}</item>"))]));
        let ws = x.ws.clone();
        let more = Expr::Repeat { inner: Box::new(Expr::Seq(vec![ws.clone(), item.clone()])), min: min.saturating_sub(1), max: max.map(|m| m - 1) };
        let some = Expr::Seq(vec![ws.clone(), item, more, ws]);
        Ok(if min == 0 { Expr::Alt(vec![empty, some]) } else { some })
    }

    /// An unconstrained parameter value: raw text, or a JSON array or object; in
    /// `cohere_xml`, any of its four kinds (recursively).
    fn xml_any(&mut self, x: &XmlCtx, at: &str) -> crate::Result<Vec<(VKind, Expr)>> {
        let raw = self.raw_text(x, None, at)?;
        match x.w.family {
            Family::MinimaxM3 => Err(unsupported("json_schema", at, "minimax_m3_xml cannot write a value without a type (as in xgrammar)")),
            Family::Cohere => {
                // ` type="K">value</cofl:value>` for any value, named so that nested values can
                // refer to it.
                let typed = self.reserve_rule();
                let typed_ref = Expr::Ref { name: typed.clone(), offset: 0 };
                let key = Expr::Terminal(corral_core::parse_regex(COHERE_KEY, self.limits)?);
                let param = self.rule(Expr::Seq(vec![lit(x.w.key_prefix), key, lit(x.w.key_suffix), typed_ref.clone()]));
                let ws = x.ws.clone();
                let obj = self.rule(Expr::Alt(vec![
                    Expr::Seq(vec![ws.clone(), param.clone(), Expr::Repeat { inner: Box::new(Expr::Seq(vec![ws.clone(), param])), min: 0, max: None }, ws.clone()]),
                    ws.clone(),
                ]));
                let list = self.rule(Expr::Repeat { inner: Box::new(Expr::Seq(vec![lit("<cofl:value"), typed_ref])), min: 0, max: None });
                let scalar = self.json_rules(&serde_json::json!({"type": ["number", "boolean", "null"]}), false, x.max_ws, at)?;
                let values = vec![(VKind::Raw, raw), (VKind::Json, x.pad(scalar)), (VKind::Dict, x.pad(obj)), (VKind::List, x.pad(list))];
                let body = x.cohere_typed(&values);
                self.rules.push(corral_core::ebnf::RuleDef { name: typed, expr: body, offset: 0 });
                Ok(values)
            }
            Family::Flat | Family::Kimi => {
                let arr = self.json_rules(&serde_json::json!({"type": "array"}), false, x.max_ws, at)?;
                let obj = self.json_rules(&serde_json::json!({"type": "object"}), false, x.max_ws, at)?;
                Ok(vec![(VKind::Raw, raw), (VKind::Json, x.pad(Expr::Alt(vec![arr, obj])))])
            }
        }
    }
}
