//! xgrammar structural tags (the tool-calling format of vLLM and SGLang), compiled to a
//! [`Grammar`] whose language is exactly the set of outputs xgrammar's semantics allow.
//!
//! Two input forms are read:
//!
//! * the current one, `{"type": "structural_tag", "format": {...}}` (a bare format object is
//!   read too), with the format types of xgrammar 0.2.8: `const_string`, `json_schema`,
//!   `grammar`, `regex`, `any_text`, `sequence`, `or`, `optional`, `plus`, `star`, `repeat`,
//!   `tag`, `triggered_tags`, `tags_with_separator`, `dispatch`, the token-level `token`,
//!   `exclude_token`, `any_tokens`, `token_triggered_tags`, `token_dispatch` (and `token`
//!   as a tag's `begin`/`end`), and the deprecated `qwen_xml_parameter`;
//! * the legacy one, `{"structures": [{"begin", "schema", "end"}], "triggers": [...]}`
//!   (what `Grammar.from_structural_tag(tags, triggers)` took), read as a `triggered_tags`.
//!
//! Free text (in `any_text`, `triggered_tags` and `dispatch`) is built as exact byte automata
//! (module `text`): text in which no trigger, excluded string or enclosing end occurs, and the
//! text up to the first trigger occurrence. Token-level formats are terminals matched by
//! token id ([`corral_core::TokenClass`]): a named token, special or not, is allowed exactly
//! where the format names it, and `exclude_token`/`any_tokens` allow any token of the
//! tokenizer (special tokens included, EOS aside) but the excluded ones; `any_tokens.max_tokens`
//! bounds their number. `any_text.max_tokens` is refused with [`FormatError::Unsupported`]:
//! a token budget over text depends on how the text is tokenized, which is not a property of
//! the text (`max_chars` bounds the text). `json_schema` styles: `json` and every XML
//! argument style of xgrammar 0.2.8 (module `xml`), with `excludes` (module `excludes`).
//!
//! Semantics follow xgrammar's matcher (checked against it by `tests/test_structural_tag.py`):
//! an unlimited format (`any_text`, `triggered_tags`) inside a `tag` may not contain that
//! tag's end strings; a trigger starts a tag at its first occurrence; excluded strings win over
//! triggers ending at the same byte; `json_schema` objects with `properties` and no
//! `additionalProperties` allow no other keys (xgrammar's strict mode) and no whitespace
//! before or after the value. Differences are listed in docs/structural-tags.md.

mod excludes;
mod text;
mod xml;

use crate::embed;
use crate::FormatError;
use corral_core::ebnf::{Expr, GrammarAst, RuleDef};
use corral_core::Rx;
use corral_core::{TokenClass, TokenRef};
use corral_core::{Grammar, Limits};
use serde_json::{Map, Value};
use std::sync::Arc;
use text::{Goal, Role};

/// Most states of one free-text automaton (a `max_chars` bound times the excluded strings'
/// automaton); larger ones are refused.
const MAX_TEXT_STATES: usize = 1 << 20;

/// Whitespace bound standing for "no bound" while a schema is compiled (replaced afterwards).
const UNBOUNDED_WS: u32 = u32::MAX - 7;

/// Compiles a structural tag (the JSON object, new or legacy form).
pub fn compile(tag: &Value, limits: &Limits) -> crate::Result<Grammar> {
    let mut c = Compiler { limits, rules: Vec::new(), next_id: 0, depth: 0, excludes: Vec::new() };
    let root = c.top(tag)?;
    c.rules.insert(0, RuleDef { name: "root".into(), expr: root, offset: 0 });
    let ast = GrammarAst { rules: std::mem::take(&mut c.rules), source: String::new() };
    let key = format!("structural-tag:{}", serde_json::to_string(tag).unwrap_or_default());
    Ok(Grammar::from_ast(&ast, "root", &key, limits)?)
}

/// Builds the grammar's rules while walking the tag.
struct Compiler<'a> {
    limits: &'a Limits,
    rules: Vec<RuleDef>,
    next_id: usize,
    /// Nesting of format objects being compiled (bounded by `limits.max_nesting`).
    depth: usize,
    /// The `excludes` of the `json_schema` format being compiled (see [`excludes`]).
    excludes: Vec<String>,
}

/// The end strings of the nearest enclosing `tag` (what unlimited formats inside it may not
/// contain), or `None` outside any tag.
type Ends<'e> = Option<&'e [Vec<u8>]>;

fn invalid(pointer: &str, message: impl Into<String>) -> FormatError {
    FormatError::InvalidTag { pointer: pointer.to_string(), message: message.into() }
}

fn unsupported(construct: &str, at: &str, message: impl Into<String>) -> FormatError {
    FormatError::Unsupported { construct: construct.to_string(), at: at.to_string(), message: message.into() }
}

/// `base/key` as a JSON pointer (with `~` and `/` escaped).
fn child(base: &str, key: &str) -> String {
    format!("{base}/{}", key.replace('~', "~0").replace('/', "~1"))
}

fn obj<'v>(v: &'v Value, at: &str) -> crate::Result<&'v Map<String, Value>> {
    v.as_object().ok_or_else(|| invalid(at, format!("expected an object, found {}", kind(v))))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn req<'v>(o: &'v Map<String, Value>, key: &str, at: &str) -> crate::Result<&'v Value> {
    o.get(key).ok_or_else(|| invalid(at, format!("missing required field '{key}'")))
}

fn string<'v>(v: &'v Value, at: &str) -> crate::Result<&'v str> {
    v.as_str().ok_or_else(|| invalid(at, format!("expected a string, found {}", kind(v))))
}

fn req_str<'v>(o: &'v Map<String, Value>, key: &str, at: &str) -> crate::Result<&'v str> {
    string(req(o, key, at)?, &child(at, key))
}

fn opt_bool(o: &Map<String, Value>, key: &str, at: &str, default: bool) -> crate::Result<bool> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(invalid(&child(at, key), format!("expected a boolean, found {}", kind(v)))),
    }
}

fn array<'v>(v: &'v Value, at: &str) -> crate::Result<&'v Vec<Value>> {
    v.as_array().ok_or_else(|| invalid(at, format!("expected an array, found {}", kind(v))))
}

/// An optional list of strings (`excludes`); absent or null is empty.
fn opt_strings(o: &Map<String, Value>, key: &str, at: &str) -> crate::Result<Vec<Vec<u8>>> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(v) => {
            let at = child(at, key);
            array(v, &at)?.iter().enumerate().map(|(i, s)| Ok(string(s, &format!("{at}/{i}"))?.as_bytes().to_vec())).collect()
        }
    }
}

/// An optional non-negative integer of at most 2^31 - 1 (xgrammar's bound); null is absent.
fn opt_count(o: &Map<String, Value>, key: &str, at: &str) -> crate::Result<Option<u32>> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n <= i32::MAX as u64 => Ok(Some(n as u32)),
            _ => Err(invalid(&child(at, key), "expected an integer between 0 and 2147483647")),
        },
    }
}

/// Token-level formats: they name tokenizer tokens, which a text grammar cannot express.
/// A tag's begin or end: text, or one token (a `token` format).
#[derive(Debug, Clone)]
enum Delim {
    Text(Vec<u8>),
    Token(TokenRef),
}

impl Delim {
    fn expr(&self) -> Expr {
        match self {
            Delim::Text(b) => Expr::Literal(b.clone()),
            Delim::Token(t) => one_token(t.clone()),
        }
    }
}

/// One token by id or by name.
fn one_token(t: TokenRef) -> Expr {
    Expr::Tokens(Arc::new(TokenClass::OneOf(vec![t])))
}

/// Any number of tokens (at most `max`), none of them in `but`.
fn tokens_but(but: Vec<TokenRef>, max: Option<u32>) -> Expr {
    Expr::Repeat { inner: Box::new(Expr::Tokens(Arc::new(TokenClass::AllBut(but)))), min: 0, max }
}

/// A token reference: an id, or a token's string.
fn token_ref(v: &Value, at: &str) -> crate::Result<TokenRef> {
    match v {
        Value::Number(n) => n.as_u64().filter(|&i| i <= u32::MAX as u64).map(|i| TokenRef::Id(i as u32)).ok_or_else(|| invalid(at, "a token id must be a non-negative integer")),
        Value::String(s) if !s.is_empty() => Ok(TokenRef::Name(s.clone())),
        Value::String(_) => Err(invalid(at, "a token string must not be empty")),
        v => Err(invalid(at, format!("expected a token id or a token string, found {}", kind(v)))),
    }
}

/// An optional list of token references (default empty).
fn opt_token_refs(o: &Map<String, Value>, key: &str, at: &str) -> crate::Result<Vec<TokenRef>> {
    match o.get(key) {
        None => Ok(Vec::new()),
        Some(v) => {
            let kat = child(at, key);
            array(v, &kat)?.iter().enumerate().map(|(i, t)| token_ref(t, &format!("{kat}/{i}"))).collect()
        }
    }
}

/// The JSON schema styles xgrammar 0.2.8 defines.
const STYLES: &[&str] = &["json", "qwen_xml", "minimax_xml", "minimax_m3_xml", "deepseek_xml", "glm_xml", "cohere_xml", "kimi_k3_xml", "deepseek_v4_1_xml"];

impl Compiler<'_> {
    /// A fresh rule-name prefix for embedded grammars (`st{n}_`; own rules are `st_{n}`, so
    /// the two never collide).
    fn fresh_prefix(&mut self) -> String {
        self.next_id += 1;
        format!("st{}_", self.next_id)
    }

    /// Adds a rule of our own and returns a reference to it.
    fn rule(&mut self, expr: Expr) -> Expr {
        self.next_id += 1;
        let name = format!("st_{}", self.next_id);
        self.rules.push(RuleDef { name: name.clone(), expr, offset: 0 });
        Expr::Ref { name, offset: 0 }
    }

    /// The top level: either form.
    fn top(&mut self, tag: &Value) -> crate::Result<Expr> {
        let o = obj(tag, "")?;
        if o.contains_key("structures") {
            return self.legacy(o);
        }
        match o.get("type") {
            Some(Value::String(t)) if t == "structural_tag" => {
                let f = req(o, "format", "")?;
                self.format(f, "/format", None)
            }
            Some(Value::String(_)) => self.format(tag, "", None),
            Some(v) => Err(invalid("/type", format!("expected a string, found {}", kind(v)))),
            None => Err(invalid("", "missing required field 'type' (or 'structures' for the legacy form)")),
        }
    }

    /// The legacy form: free text where each trigger starts one of the structures whose
    /// `begin` starts with it, each holding JSON of its `schema` (an object or its JSON text).
    fn legacy(&mut self, o: &Map<String, Value>) -> crate::Result<Expr> {
        let structures = array(req(o, "structures", "")?, "/structures")?;
        let triggers = array(req(o, "triggers", "")?, "/triggers")?;
        let mut tags = Vec::new();
        for (i, s) in structures.iter().enumerate() {
            let at = format!("/structures/{i}");
            let so = obj(s, &at)?;
            let begin = req_str(so, "begin", &at)?;
            let end = req_str(so, "end", &at)?;
            let schema = req(so, "schema", &at)?;
            let schema = match schema {
                Value::String(text) => serde_json::from_str(text).map_err(|e| invalid(&child(&at, "schema"), format!("the schema text is not JSON: {e}")))?,
                v => v.clone(),
            };
            let tag = serde_json::json!({"type": "tag", "begin": begin, "content": {"type": "json_schema", "json_schema": schema}, "end": end});
            tags.push((tag, at));
        }
        let mut trig = Vec::new();
        for (i, t) in triggers.iter().enumerate() {
            trig.push(string(t, &format!("/triggers/{i}"))?.as_bytes().to_vec());
        }
        let tag_refs: Vec<(&Value, String)> = tags.iter().map(|(t, a)| (t, a.clone())).collect();
        self.triggered(&trig, "/triggers", &tag_refs, &[], false, false, None, "")
    }

    /// One format object at JSON pointer `at`.
    fn format(&mut self, v: &Value, at: &str, ends: Ends) -> crate::Result<Expr> {
        if self.depth >= self.limits.max_nesting {
            return Err(FormatError::Grammar(corral_core::Error::Limit {
                name: "max_nesting",
                limit: self.limits.max_nesting,
                what: format!("format objects nested deeper than {} at {at}", self.limits.max_nesting),
                hint: corral_core::LIMIT_HINT,
            }));
        }
        self.depth += 1;
        let r = self.format_inner(v, at, ends);
        self.depth -= 1;
        r
    }

    fn format_inner(&mut self, v: &Value, at: &str, ends: Ends) -> crate::Result<Expr> {
        let o = obj(v, at)?;
        let ty = req_str(o, "type", at)?;
        match ty {
            "const_string" => Ok(Expr::Literal(req_str(o, "value", at)?.as_bytes().to_vec())),
            "json_schema" => self.json_schema(o, at),
            "qwen_xml_parameter" => {
                let schema = req(o, "json_schema", at)?;
                self.xml_schema("qwen_xml", schema, false, None, at)
            }
            "grammar" => {
                let text = req_str(o, "grammar", at)?;
                let ast = corral_core::ebnf::parse(text, self.limits)?;
                if !ast.rules.iter().any(|r| r.name == "root") {
                    return Err(invalid(&child(at, "grammar"), "the grammar has no 'root' rule"));
                }
                let prefix = self.fresh_prefix();
                self.rules.extend(embed::prefixed(ast, &prefix));
                Ok(Expr::Ref { name: format!("{prefix}root"), offset: 0 })
            }
            "regex" => {
                let pattern = req_str(o, "pattern", at)?;
                Ok(Expr::Terminal(corral_core::parse_regex(pattern, self.limits)?))
            }
            "any_text" => self.any_text(o, at, ends),
            "sequence" | "or" => {
                let elems = array(req(o, "elements", at)?, &child(at, "elements"))?;
                if elems.is_empty() {
                    return Err(invalid(&child(at, "elements"), format!("a '{ty}' format needs at least one element")));
                }
                let mut out = Vec::with_capacity(elems.len());
                for (i, e) in elems.iter().enumerate() {
                    out.push(self.format(e, &format!("{at}/elements/{i}"), ends)?);
                }
                Ok(if ty == "sequence" { Expr::Seq(out) } else { Expr::Alt(out) })
            }
            "optional" | "plus" | "star" => {
                let inner = self.format(req(o, "content", at)?, &child(at, "content"), ends)?;
                let (min, max) = match ty {
                    "optional" => (0, Some(1)),
                    "plus" => (1, None),
                    _ => (0, None),
                };
                Ok(Expr::Repeat { inner: Box::new(inner), min, max })
            }
            "repeat" => {
                let int = |key: &str| -> crate::Result<i64> {
                    req(o, key, at)?.as_i64().ok_or_else(|| invalid(&child(at, key), "expected an integer"))
                };
                let (min, max) = (int("min")?, int("max")?);
                if min < 0 || min > u32::MAX as i64 {
                    return Err(invalid(&child(at, "min"), "repeat min must be a non-negative integer"));
                }
                let max = match max {
                    -1 => None,
                    m if m < 0 || m > u32::MAX as i64 => return Err(invalid(&child(at, "max"), "repeat max must be a non-negative integer or -1 (unbounded)")),
                    m if m < min => return Err(invalid(&child(at, "max"), "repeat min must be <= max")),
                    m => Some(m as u32),
                };
                let inner = self.format(req(o, "content", at)?, &child(at, "content"), ends)?;
                Ok(Expr::Repeat { inner: Box::new(inner), min: min as u32, max })
            }
            "tag" => self.tag(v, at),
            "triggered_tags" => {
                let triggers = array(req(o, "triggers", at)?, &child(at, "triggers"))?;
                let mut trig = Vec::new();
                for (i, t) in triggers.iter().enumerate() {
                    trig.push(string(t, &format!("{at}/triggers/{i}"))?.as_bytes().to_vec());
                }
                let tags = array(req(o, "tags", at)?, &child(at, "tags"))?;
                let tag_refs: Vec<(&Value, String)> = tags.iter().enumerate().map(|(i, t)| (t, format!("{at}/tags/{i}"))).collect();
                let excludes = opt_strings(o, "excludes", at)?;
                let at_least_one = opt_bool(o, "at_least_one", at, false)?;
                let stop_after_first = opt_bool(o, "stop_after_first", at, false)?;
                self.triggered(&trig, &child(at, "triggers"), &tag_refs, &excludes, at_least_one, stop_after_first, ends, at)
            }
            "tags_with_separator" => {
                let tags = array(req(o, "tags", at)?, &child(at, "tags"))?;
                let sep = req_str(o, "separator", at)?.as_bytes().to_vec();
                let at_least_one = opt_bool(o, "at_least_one", at, false)?;
                let stop_after_first = opt_bool(o, "stop_after_first", at, false)?;
                if tags.is_empty() {
                    return Err(invalid(&child(at, "tags"), "'tags_with_separator' needs at least one tag"));
                }
                let mut alts = Vec::new();
                for (i, t) in tags.iter().enumerate() {
                    let tat = format!("{at}/tags/{i}");
                    self.expect_tag(t, &tat)?;
                    alts.push(self.tag(t, &tat)?);
                }
                let one = self.rule(Expr::Alt(alts));
                let some = if stop_after_first {
                    one
                } else {
                    Expr::Seq(vec![one.clone(), Expr::Repeat { inner: Box::new(Expr::Seq(vec![Expr::Literal(sep), one])), min: 0, max: None }])
                };
                Ok(if at_least_one { some } else { Expr::Repeat { inner: Box::new(some), min: 0, max: Some(1) } })
            }
            "dispatch" => self.dispatch(o, at, ends),
            "token" => Ok(one_token(token_ref(req(o, "token", at)?, &child(at, "token"))?)),
            "exclude_token" => Ok(Expr::Tokens(Arc::new(TokenClass::AllBut(opt_token_refs(o, "exclude_tokens", at)?)))),
            "any_tokens" => Ok(tokens_but(opt_token_refs(o, "exclude_tokens", at)?, opt_count(o, "max_tokens", at)?)),
            "token_triggered_tags" => self.token_triggered(o, at),
            "token_dispatch" => self.token_dispatch(o, at, ends),
            other => Err(invalid(&child(at, "type"), format!("unknown format type '{other}'"))),
        }
    }

    /// Checks that `v` is a `tag` object (where only tags are allowed).
    fn expect_tag(&self, v: &Value, at: &str) -> crate::Result<()> {
        let o = obj(v, at)?;
        match o.get("type") {
            None => Ok(()),
            Some(Value::String(t)) if t == "tag" => Ok(()),
            Some(_) => Err(invalid(&child(at, "type"), "expected a 'tag' format here")),
        }
    }

    /// A tag's `begin` or `end`: a string, or a `token` format.
    fn delim(&self, v: &Value, at: &str) -> crate::Result<Delim> {
        match v {
            Value::String(s) => Ok(Delim::Text(s.as_bytes().to_vec())),
            Value::Object(o) => match o.get("type").and_then(Value::as_str) {
                Some("token") => Ok(Delim::Token(token_ref(req(o, "token", at)?, &child(at, "token"))?)),
                _ => Err(invalid(at, "expected a string or a 'token' format")),
            },
            v => Err(invalid(at, format!("expected a string or a 'token' format, found {}", kind(v)))),
        }
    }

    /// `begin content end` (end: one string or token, or a list of alternatives).
    fn tag(&mut self, v: &Value, at: &str) -> crate::Result<Expr> {
        let (begin, content, ends) = self.tag_parts(v, at)?;
        Ok(Expr::Seq(vec![begin.expr(), content, end_alt(&ends)]))
    }

    /// A tag's begin, compiled content and end alternatives. The content may not contain
    /// the tag's text ends (so that the first one ends it); a token end needs no such rule.
    fn tag_parts(&mut self, v: &Value, at: &str) -> crate::Result<(Delim, Expr, Vec<Delim>)> {
        let o = obj(v, at)?;
        self.expect_tag(v, at)?;
        let begin = self.delim(req(o, "begin", at)?, &child(at, "begin"))?;
        let end_at = child(at, "end");
        let ends: Vec<Delim> = match req(o, "end", at)? {
            Value::Array(list) => {
                if list.is_empty() {
                    return Err(invalid(&end_at, "a tag's end list must not be empty"));
                }
                list.iter().enumerate().map(|(i, e)| Ok(Delim::Text(string(e, &format!("{end_at}/{i}"))?.as_bytes().to_vec()))).collect::<crate::Result<_>>()?
            }
            e => vec![self.delim(e, &end_at)?],
        };
        let text_ends: Vec<Vec<u8>> = ends.iter().filter_map(|e| match e {
            Delim::Text(b) if !b.is_empty() => Some(b.clone()),
            _ => None,
        }).collect();
        let by_token = ends.iter().any(|e| matches!(e, Delim::Token(_)));
        let content_ends = if by_token && text_ends.is_empty() { None } else { Some(&text_ends[..]) };
        let content = self.format(req(o, "content", at)?, &child(at, "content"), content_ends)?;
        Ok((begin, content, ends))
    }

    /// `token_triggered_tags`: any tokens but the triggers (and `exclude_tokens`), in which a
    /// trigger token starts the tag that begins with it.
    fn token_triggered(&mut self, o: &Map<String, Value>, at: &str) -> crate::Result<Expr> {
        let triggers = opt_token_refs(o, "trigger_tokens", at)?;
        if triggers.is_empty() {
            return Err(invalid(&child(at, "trigger_tokens"), "trigger_tokens must not be empty"));
        }
        let tags = array(req(o, "tags", at)?, &child(at, "tags"))?;
        if tags.is_empty() {
            return Err(invalid(&child(at, "tags"), "token-triggered tags need at least one tag"));
        }
        let mut but = triggers.clone();
        but.extend(opt_token_refs(o, "exclude_tokens", at)?);
        let at_least_one = opt_bool(o, "at_least_one", at, false)?;
        let stop_after_first = opt_bool(o, "stop_after_first", at, false)?;
        let mut whole = Vec::new();
        for (i, t) in tags.iter().enumerate() {
            let tat = format!("{at}/tags/{i}");
            let (begin, content, ends) = self.tag_parts(t, &tat)?;
            match &begin {
                // (An id and a name may be one token: only the vocabulary can tell.)
                Delim::Token(b) if triggers.contains(b) || triggers.iter().any(|t| std::mem::discriminant(t) != std::mem::discriminant(b)) => {}
                Delim::Token(_) => return Err(invalid(&child(&tat, "begin"), "the tag's begin token is none of the trigger tokens")),
                Delim::Text(_) => return Err(invalid(&child(&tat, "begin"), "tags of token_triggered_tags begin with a token format, not a string")),
            }
            whole.push(Expr::Seq(vec![begin.expr(), content, end_alt(&ends)]));
        }
        let free = self.rule(tokens_but(but, None));
        let whole = self.rule(Expr::Alt(whole));
        let call = self.rule(Expr::Seq(vec![free.clone(), whole.clone()]));
        Ok(self.rule(triggered_shape(free, call, whole, at_least_one, stop_after_first)))
    }

    /// `token_dispatch`: any tokens but the rules' tokens (and `exclude_tokens`), in which a
    /// rule's token must be followed by the rule's format; with `loop`, free tokens resume.
    fn token_dispatch(&mut self, o: &Map<String, Value>, at: &str, ends: Ends) -> crate::Result<Expr> {
        let rules_at = child(at, "rules");
        let rules = array(req(o, "rules", at)?, &rules_at)?;
        if rules.is_empty() {
            return Err(invalid(&rules_at, "token_dispatch needs at least one rule"));
        }
        let looping = opt_bool(o, "loop", at, true)?;
        let mut but = Vec::new();
        let mut calls = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            let rat = format!("{rules_at}/{i}");
            let pair = array(r, &rat)?;
            if pair.len() != 2 {
                return Err(invalid(&rat, "a token_dispatch rule is a [token, format] pair"));
            }
            let t = token_ref(&pair[0], &format!("{rat}/0"))?;
            if but.contains(&t) {
                return Err(invalid(&format!("{rat}/0"), "duplicate dispatch token"));
            }
            but.push(t.clone());
            let f = self.format(&pair[1], &format!("{rat}/1"), ends)?;
            calls.push(Expr::Seq(vec![one_token(t), f]));
        }
        but.extend(opt_token_refs(o, "exclude_tokens", at)?);
        let free = self.rule(tokens_but(but, None));
        let call = self.rule(Expr::Seq(vec![free.clone(), Expr::Alt(calls)]));
        let expr = if looping { Expr::Seq(vec![Expr::Repeat { inner: Box::new(call), min: 0, max: None }, free]) } else { Expr::Alt(vec![free, call]) };
        Ok(self.rule(expr))
    }

    /// `any_text`: UTF-8 text without the excluded strings (and the enclosing tag's ends),
    /// of at most `max_chars` code points.
    fn any_text(&mut self, o: &Map<String, Value>, at: &str, ends: Ends) -> crate::Result<Expr> {
        let mut excludes = opt_strings(o, "excludes", at)?;
        let max_chars = opt_count(o, "max_chars", at)?;
        if opt_count(o, "max_tokens", at)?.is_some() {
            return Err(unsupported(
                "max_tokens",
                &child(at, "max_tokens"),
                "a token budget depends on how the text is tokenized, which a grammar over text cannot express exactly; use max_chars for a bound on the text",
            ));
        }
        if excludes.iter().any(|e| e.is_empty()) {
            // Every string contains the empty string, so only the empty text is left (as in
            // xgrammar).
            return Ok(Expr::Literal(Vec::new()));
        }
        if let Some(ends) = ends {
            if ends.is_empty() && max_chars.is_none() {
                return Err(invalid(at, "unlimited content (any_text) inside a tag needs a non-empty end string"));
            }
            excludes.extend(ends.iter().cloned());
        }
        self.free_text(&excludes, &[], Goal::Free, max_chars, at)
    }

    /// The free-text automaton for `goal` over `forbidden` strings and `triggers`.
    fn free_text(&mut self, forbidden: &[Vec<u8>], triggers: &[Vec<u8>], goal: Goal, max_chars: Option<u32>, at: &str) -> crate::Result<Expr> {
        let pats = patterns(forbidden, triggers);
        if pats.is_empty() && goal == Goal::Free {
            return Ok(Expr::Terminal(Rx::Repeat { inner: Arc::new(Rx::any_char()), min: 0, max: max_chars }));
        }
        let a = text::automaton(&pats, goal, max_chars, MAX_TEXT_STATES).ok_or_else(|| {
            unsupported("max_chars", at, format!("free text with a character bound and excluded strings would need more than {MAX_TEXT_STATES} automaton states"))
        })?;
        Ok(Expr::Token(Arc::new(Expr::Terminal(Rx::Automaton(Arc::new(a))))))
    }

    /// `triggered_tags` (and the legacy form): free text in which the first occurrence of a
    /// trigger starts a tag whose begin starts with that trigger.
    #[allow(clippy::too_many_arguments)]
    fn triggered(
        &mut self,
        triggers: &[Vec<u8>],
        triggers_at: &str,
        tags: &[(&Value, String)],
        excludes: &[Vec<u8>],
        at_least_one: bool,
        stop_after_first: bool,
        ends: Ends,
        at: &str,
    ) -> crate::Result<Expr> {
        if triggers.is_empty() {
            return Err(invalid(triggers_at, "triggers must not be empty"));
        }
        if let Some(i) = triggers.iter().position(|t| t.is_empty()) {
            return Err(invalid(&format!("{triggers_at}/{i}"), "triggers must be non-empty strings"));
        }
        if tags.is_empty() {
            return Err(invalid(&child(at, "tags"), "triggered tags need at least one tag"));
        }
        if let Some(i) = excludes.iter().position(|t| t.is_empty()) {
            return Err(invalid(&format!("{}/{i}", child(at, "excludes")), "excludes must be non-empty strings"));
        }
        let mut forbidden: Vec<Vec<u8>> = excludes.to_vec();
        if let Some(ends) = ends {
            if ends.is_empty() {
                return Err(invalid(at, "unlimited content (triggered_tags) inside a tag needs a non-empty end string"));
            }
            forbidden.extend(ends.iter().cloned());
        }
        // Each tag belongs to the one trigger its begin starts with.
        // Per trigger: (the rest of the begin after the trigger, content and end).
        let mut by_trigger: Vec<Vec<(Vec<u8>, Expr)>> = vec![Vec::new(); triggers.len()];
        let mut whole: Vec<Expr> = Vec::new();
        for (v, tat) in tags {
            let (begin, content, tag_ends) = self.tag_parts(v, tat)?;
            let Delim::Text(begin) = begin else {
                return Err(invalid(&child(tat, "begin"), "tags of triggered_tags begin with a string; use token_triggered_tags for a token"));
            };
            let matching: Vec<usize> = (0..triggers.len()).filter(|&i| begin.starts_with(&triggers[i])).collect();
            let t = match matching.as_slice() {
                [t] => *t,
                [] => return Err(invalid(&child(tat, "begin"), "the tag's begin starts with none of the triggers")),
                _ => return Err(invalid(&child(tat, "begin"), "the tag's begin starts with more than one trigger")),
            };
            let content = self.rule(content);
            let end = end_alt(&tag_ends);
            by_trigger[t].push((begin[triggers[t].len()..].to_vec(), Expr::Seq(vec![content.clone(), end.clone()])));
            whole.push(Expr::Seq(vec![Expr::Literal(begin), content, end]));
        }
        let free = self.free_text(&forbidden, triggers, Goal::Free, None, at)?;
        let pats = patterns(&forbidden, triggers);
        let mut calls = Vec::new();
        for (t, rests) in by_trigger.into_iter().enumerate() {
            if rests.is_empty() {
                continue;
            }
            if text::may_pend(&pats, t) {
                // The trigger may wait for a longer pattern: each tag's begin is read by the
                // automaton, which checks that it does not complete that pattern.
                for (rest, tail) in rests {
                    let a = text::lead_then(&pats, t, &rest, MAX_TEXT_STATES).ok_or_else(|| unsupported("triggers", at, "the triggers' automaton is too large"))?;
                    calls.push(Expr::Seq(vec![Expr::Token(Arc::new(Expr::Terminal(Rx::Automaton(Arc::new(a))))), tail]));
                }
            } else {
                let lead = self.free_text(&forbidden, triggers, Goal::UpToTrigger(t), None, at)?;
                let alts = rests.into_iter().map(|(rest, tail)| Expr::Seq(vec![Expr::Literal(rest), tail])).collect();
                calls.push(Expr::Seq(vec![lead, Expr::Alt(alts)]));
            }
        }
        let call = self.rule(Expr::Alt(calls));
        let whole = self.rule(Expr::Alt(whole));
        Ok(self.rule(triggered_shape(free, call, whole, at_least_one, stop_after_first)))
    }

    /// `dispatch`: free text in which the first occurrence of a rule's pattern must be
    /// followed by the rule's format; with `loop`, free text resumes after it.
    fn dispatch(&mut self, o: &Map<String, Value>, at: &str, ends: Ends) -> crate::Result<Expr> {
        let rules_at = child(at, "rules");
        let rules = array(req(o, "rules", at)?, &rules_at)?;
        if rules.is_empty() {
            return Err(invalid(&rules_at, "dispatch needs at least one rule"));
        }
        let looping = opt_bool(o, "loop", at, true)?;
        let excludes = opt_strings(o, "excludes", at)?;
        if let Some(i) = excludes.iter().position(|t| t.is_empty()) {
            return Err(invalid(&format!("{}/{i}", child(at, "excludes")), "excludes must be non-empty strings"));
        }
        let mut patterns = Vec::new();
        let mut formats = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            let rat = format!("{rules_at}/{i}");
            let pair = array(r, &rat)?;
            if pair.len() != 2 {
                return Err(invalid(&rat, "a dispatch rule is a [pattern, format] pair"));
            }
            let p = string(&pair[0], &format!("{rat}/0"))?.as_bytes().to_vec();
            if p.is_empty() {
                return Err(invalid(&format!("{rat}/0"), "a dispatch pattern must be a non-empty string"));
            }
            if patterns.contains(&p) {
                return Err(invalid(&format!("{rat}/0"), "duplicate dispatch pattern"));
            }
            patterns.push(p);
            formats.push(self.format(&pair[1], &format!("{rat}/1"), ends)?);
        }
        let free = self.free_text(&excludes, &patterns, Goal::Free, None, at)?;
        let mut calls = Vec::new();
        for (i, f) in formats.into_iter().enumerate() {
            let lead = self.free_text(&excludes, &patterns, Goal::UpToTrigger(i), None, at)?;
            let f = self.rule(f);
            calls.push(Expr::Seq(vec![lead, f]));
        }
        let call = self.rule(Expr::Alt(calls));
        let expr = if looping { Expr::Seq(vec![Expr::Repeat { inner: Box::new(call), min: 0, max: None }, free]) } else { Expr::Alt(vec![free, call]) };
        Ok(self.rule(expr))
    }

    /// `json_schema`, in any style.
    fn json_schema(&mut self, o: &Map<String, Value>, at: &str) -> crate::Result<Expr> {
        let schema = req(o, "json_schema", at)?;
        let style = match o.get("style") {
            None | Some(Value::Null) => "json",
            Some(v) => string(v, &child(at, "style"))?,
        };
        if !STYLES.contains(&style) {
            return Err(invalid(&child(at, "style"), format!("unknown style '{style}' (xgrammar 0.2.8 defines {})", STYLES.join(", "))));
        }
        let any_order = opt_bool(o, "any_order", at, false)?;
        let max_ws = opt_count(o, "max_whitespace_cnt", at)?;
        let ex: Vec<String> = opt_strings(o, "excludes", at)?.into_iter().map(|e| String::from_utf8_lossy(&e).into_owned()).collect();
        excludes::check(&ex, style, at)?;
        let outer = std::mem::replace(&mut self.excludes, ex);
        let out = if style != "json" { self.xml_schema(style, schema, any_order, max_ws, at) } else { self.json_rules(schema, any_order, max_ws, &child(at, "json_schema")) };
        self.excludes = outer;
        out
    }

    /// The rules of a JSON schema as xgrammar lays it out in a structural tag: no whitespace
    /// around the value, at most `max_ws` whitespace characters elsewhere (unbounded when
    /// absent), objects with `properties` closed unless `additionalProperties` says otherwise.
    fn json_rules(&mut self, schema: &Value, any_order: bool, max_ws: Option<u32>, schema_at: &str) -> crate::Result<Expr> {
        if !matches!(schema, Value::Bool(_) | Value::Object(_)) {
            return Err(invalid(schema_at, format!("a JSON schema is an object or a boolean, found {}", kind(schema))));
        }
        let mut schema = close_objects(schema);
        if !self.excludes.is_empty() {
            schema = excludes::apply(&schema, &self.excludes, schema_at)?;
        }
        let opts = corral_schema::Options {
            whitespace: corral_schema::Whitespace::Flexible { max: max_ws.unwrap_or(UNBOUNDED_WS) },
            limits: self.limits.clone(),
            property_order: if any_order { corral_schema::PropertyOrder::AnyOrder } else { corral_schema::PropertyOrder::SchemaOrder },
            ..Default::default()
        };
        let prefix = self.fresh_prefix();
        let (mut rules, root) = embed::schema_rules(&schema, &opts, &prefix, schema_at)?;
        embed::strip_root_whitespace(&mut rules, &root);
        if max_ws.is_none() {
            for r in &mut rules {
                embed::unbound_whitespace(&mut r.expr, UNBOUNDED_WS);
            }
        }
        self.rules.extend(rules);
        Ok(Expr::Ref { name: root, offset: 0 })
    }
}

/// Keywords that do not constrain a value (annotations), skipped when a schema is read for an
/// XML style.
const IGNORED_KEYWORDS: &[&str] = &["title", "description", "default", "examples", "$schema", "$id", "$comment", "$defs", "definitions", "deprecated", "readOnly", "writeOnly"];

/// The patterns of a free-text automaton: forbidden strings, then triggers (numbered).
fn patterns(forbidden: &[Vec<u8>], triggers: &[Vec<u8>]) -> Vec<(Vec<u8>, Role)> {
    let mut pats: Vec<(Vec<u8>, Role)> = forbidden.iter().map(|f| (f.clone(), Role::Forbidden)).collect();
    pats.extend(triggers.iter().enumerate().map(|(i, t)| (t.clone(), Role::Trigger(i))));
    pats
}

/// The end alternatives of a tag as one expression.
/// How `triggered_tags` and `token_triggered_tags` combine free text (`free`), free text then
/// one tag (`call`) and one tag alone (`whole`) under their flags.
fn triggered_shape(free: Expr, call: Expr, whole: Expr, at_least_one: bool, stop_after_first: bool) -> Expr {
    let calls = |call: Expr| Expr::Repeat { inner: Box::new(call), min: 0, max: None };
    match (at_least_one, stop_after_first) {
        // Free text and tags, any number of each, ending in free text.
        (false, false) => Expr::Seq(vec![calls(call), free]),
        // A tag first (no text before it), then as in the default.
        (true, false) => Expr::Seq(vec![whole, calls(call), free]),
        // Free text, or free text then one tag, then nothing.
        (false, true) => Expr::Alt(vec![free, call]),
        // Exactly one tag.
        (true, true) => whole,
    }
}

fn end_alt(ends: &[Delim]) -> Expr {
    match ends {
        [one] => one.expr(),
        many => Expr::Alt(many.iter().map(Delim::expr).collect()),
    }
}

/// `schema` with `"additionalProperties": false` added to every subschema that declares
/// `properties` and says nothing of other keys (`additionalProperties`,
/// `unevaluatedProperties`, `patternProperties`), and `"items": false` to every one with
/// `prefixItems` and no `items`: xgrammar compiles structural-tag schemas in strict mode,
/// where such objects and arrays admit nothing beyond what the schema names.
fn close_objects(schema: &Value) -> Value {
    fn walk(v: &Value, depth: usize) -> Value {
        let Value::Object(o) = v else { return v.clone() };
        if depth > 256 {
            return v.clone();
        }
        let mut out = Map::new();
        for (k, x) in o {
            let y = match k.as_str() {
                // Maps of subschemas.
                "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => match x {
                    Value::Object(m) => Value::Object(m.iter().map(|(n, s)| (n.clone(), walk(s, depth + 1))).collect()),
                    _ => x.clone(),
                },
                // Lists of subschemas.
                "anyOf" | "oneOf" | "allOf" | "prefixItems" => match x {
                    Value::Array(a) => Value::Array(a.iter().map(|s| walk(s, depth + 1)).collect()),
                    _ => x.clone(),
                },
                // Single subschemas (`items` may be a list in old drafts).
                "items" => match x {
                    Value::Array(a) => Value::Array(a.iter().map(|s| walk(s, depth + 1)).collect()),
                    s => walk(s, depth + 1),
                },
                "additionalProperties" | "additionalItems" | "not" | "if" | "then" | "else" | "contains" | "propertyNames" | "unevaluatedProperties" | "unevaluatedItems" => walk(x, depth + 1),
                _ => x.clone(),
            };
            out.insert(k.clone(), y);
        }
        if o.contains_key("properties") && !o.contains_key("additionalProperties") && !o.contains_key("unevaluatedProperties") && !o.contains_key("patternProperties") {
            out.insert("additionalProperties".into(), Value::Bool(false));
        }
        if o.contains_key("prefixItems") && !o.contains_key("items") && !o.contains_key("unevaluatedItems") {
            out.insert("items".into(), Value::Bool(false));
        }
        Value::Object(out)
    }
    walk(schema, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Whether the grammar of `tag` accepts `text` in full (a matcher over a byte vocabulary).
    fn accepts(tag: &Value, text: &str) -> bool {
        let g = compile(tag, &Limits::default()).expect("compiles");
        let toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).chain(std::iter::once(b"<eos>".to_vec())).collect();
        let vocab = std::sync::Arc::new(corral_core::Vocabulary::new(toks, vec![256], vec![], None).unwrap());
        let cg = std::sync::Arc::new(corral_core::CompiledGrammar::new(&g, vocab));
        let mut m = corral_core::Matcher::new(cg);
        m.accept_bytes(text.as_bytes()) && m.is_accepting()
    }

    /// Whether the token ids `ids` are accepted in turn and end the output, over a vocabulary
    /// of the 256 bytes, EOS (256) and the special tokens `<|call|>` (257) and `<|end|>` (258).
    fn accepts_ids(tag: &Value, ids: &[u32]) -> bool {
        let g = compile(tag, &Limits::default()).expect("compiles");
        let toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).chain([vec![], vec![], vec![]]).collect();
        let vocab = corral_core::Vocabulary::new(toks, vec![256], vec![257, 258], None).unwrap().with_token_names(vec![("<|call|>".into(), 257), ("<|end|>".into(), 258)]);
        corral_core::CompiledGrammar::check_tokens(&g, &vocab).expect("the vocabulary has the tokens");
        let mut m = corral_core::Matcher::new(std::sync::Arc::new(corral_core::CompiledGrammar::new(&g, std::sync::Arc::new(vocab))));
        ids.iter().all(|&i| m.accept_token(i).unwrap()) && m.is_accepting()
    }

    fn ids(text: &str) -> Vec<u32> {
        text.bytes().map(u32::from).collect()
    }

    #[test]
    fn token_formats() {
        let (call, end) = (257u32, 258u32);
        let cat = |parts: &[&[u32]]| parts.concat();
        // A tag delimited by special tokens around a JSON value.
        let tag = json!({"type": "tag", "begin": {"type": "token", "token": "<|call|>"}, "content": {"type": "json_schema", "json_schema": {"type": "integer"}}, "end": {"type": "token", "token": 258}});
        assert!(accepts_ids(&tag, &cat(&[&[call], &ids("42"), &[end]])));
        assert!(!accepts_ids(&tag, &cat(&[&ids("<|call|>"), &ids("42"), &[end]])), "the token's text is not the token");
        assert!(!accepts_ids(&tag, &cat(&[&[call], &ids("4x"), &[end]])));
        // Token-triggered tags in free tokens.
        let trig = json!({"type": "token_triggered_tags", "trigger_tokens": ["<|call|>"], "tags": [
            {"type": "tag", "begin": {"type": "token", "token": "<|call|>"}, "content": {"type": "const_string", "value": "x"}, "end": {"type": "token", "token": "<|end|>"}}]});
        assert!(accepts_ids(&trig, &cat(&[&ids("hi "), &[call], &ids("x"), &[end], &ids("!")])));
        assert!(accepts_ids(&trig, &ids("only text")));
        assert!(!accepts_ids(&trig, &cat(&[&ids("hi "), &[call], &ids("y")])));
        assert!(accepts_ids(&trig, &cat(&[&ids("a"), &[end]])), "free tokens: any but the triggers");
        let mut strict = trig.clone();
        strict["exclude_tokens"] = json!(["<|end|>"]);
        assert!(!accepts_ids(&strict, &cat(&[&ids("a"), &[end]])), "nor the excluded ones");
        assert!(accepts_ids(&strict, &cat(&[&ids("a"), &[call], &ids("x"), &[end]])), "which may still end a tag");
        let stop = json!({"type": "token_triggered_tags", "trigger_tokens": [257], "at_least_one": true, "stop_after_first": true, "tags": trig["tags"]});
        assert!(accepts_ids(&stop, &[call, b'x' as u32, end]));
        assert!(!accepts_ids(&stop, &cat(&[&ids("a"), &[call, b'x' as u32, end]])));
        assert!(!accepts_ids(&stop, &[call, b'x' as u32, end, b'a' as u32]));
        // any_tokens with a budget and exclusions; exclude_token.
        let any = json!({"type": "sequence", "elements": [{"type": "any_tokens", "exclude_tokens": ["a"], "max_tokens": 2}, {"type": "token", "token": 258}]});
        assert!(accepts_ids(&any, &[b'b' as u32, call, end]), "special tokens count among any tokens");
        assert!(!accepts_ids(&any, &[b'b' as u32, b'c' as u32, b'd' as u32, end]), "three tokens where two are allowed");
        assert!(!accepts_ids(&any, &[b'a' as u32, end]));
        let one = json!({"type": "exclude_token", "exclude_tokens": [257]});
        assert!(accepts_ids(&one, &[end]) && accepts_ids(&one, &[b'q' as u32]));
        assert!(!accepts_ids(&one, &[call]) && !accepts_ids(&one, &[b'q' as u32, b'q' as u32]));
        // token_dispatch, once.
        let disp = json!({"type": "token_dispatch", "loop": false, "rules": [[257, {"type": "const_string", "value": "go"}]]});
        assert!(accepts_ids(&disp, &cat(&[&ids("ab"), &[call], &ids("go")])));
        assert!(!accepts_ids(&disp, &cat(&[&ids("ab"), &[call], &ids("go"), &[call], &ids("go")])));
        assert!(accepts_ids(&disp, &ids("abc")));
    }

    #[test]
    fn closes_objects_with_properties_only() {
        let s = close_objects(&json!({"type": "object", "properties": {"a": {"type": "object", "properties": {}}}, "$defs": {"x": {"properties": {}, "additionalProperties": true}}}));
        assert_eq!(s["additionalProperties"], json!(false));
        assert_eq!(s["properties"]["a"]["additionalProperties"], json!(false));
        assert_eq!(s["$defs"]["x"]["additionalProperties"], json!(true));
        assert!(close_objects(&json!({"type": "object"})).get("additionalProperties").is_none());
    }

    #[test]
    fn errors_carry_pointers() {
        let e = compile(&json!({"type": "structural_tag", "format": {"type": "sequence", "elements": [{"type": "const_string"}]}}), &Limits::default()).unwrap_err();
        match e {
            FormatError::InvalidTag { pointer, .. } => assert_eq!(pointer, "/format/elements/0"),
            e => panic!("{e:?}"),
        }
        let e = compile(&json!({"type": "structural_tag", "format": {"type": "tag", "begin": "a", "content": {"type": "any_text", "max_tokens": 5}, "end": "b"}}), &Limits::default()).unwrap_err();
        match e {
            FormatError::Unsupported { construct, at, .. } => {
                assert_eq!(construct, "max_tokens");
                assert_eq!(at, "/format/content/max_tokens");
            }
            e => panic!("{e:?}"),
        }
        let e = compile(&json!({"type": "structural_tag", "format": {"type": "any_tokens", "exclude_tokens": [3, -1]}}), &Limits::default()).unwrap_err();
        match e {
            FormatError::InvalidTag { pointer, .. } => assert_eq!(pointer, "/format/exclude_tokens/1"),
            e => panic!("{e:?}"),
        }
        for bad in [json!(1), json!({}), json!({"type": 3}), json!({"type": "structural_tag"}), json!({"type": "nope"})] {
            assert!(matches!(compile(&bad, &Limits::default()), Err(FormatError::InvalidTag { .. })), "{bad}");
        }
    }

    #[test]
    fn deep_nesting_is_a_limit_not_a_crash() {
        // On a large stack, as the Python binding runs compiles (debug frames are big).
        std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(|| {
                let mut f = json!({"type": "const_string", "value": "x"});
                for _ in 0..1000 {
                    f = json!({"type": "optional", "content": f});
                }
                let e = compile(&json!({"type": "structural_tag", "format": f}), &Limits::default()).unwrap_err();
                assert!(matches!(e, FormatError::Grammar(corral_core::Error::Limit { name: "max_nesting", .. })), "{e:?}");
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn triggered_tags_language() {
        let tag = json!({"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f="],
            "tags": [{"type": "tag", "begin": "<f=a>", "content": {"type": "json_schema", "json_schema": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}, "end": "</f>"}]}});
        assert!(accepts(&tag, ""));
        assert!(accepts(&tag, "hello <f"));
        assert!(accepts(&tag, "hi <f=a>{\"x\": 1}</f> bye"));
        assert!(!accepts(&tag, "hi <f=b>{\"x\": 1}</f>"));
        assert!(!accepts(&tag, "hi <f=a>{\"x\": 1, \"y\": 2}</f>"));
        assert!(!accepts(&tag, "hi <f=a> {\"x\": 1}</f>"));
        assert!(!accepts(&tag, "hi <f="));
    }
}
