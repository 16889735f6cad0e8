//! The schema compiler: conjunctions of sub-schemas → grammar rules. This module holds the
//! shared types ([`Item`], [`Flat`]), reference resolution and the entry point; each layer of
//! the compiler is a submodule.

mod array_expr;
mod conj;
mod flatten;
mod leaves;
mod number_expr;
mod object_expr;
mod string_expr;
mod validate;

use crate::cdfa::{CDfa, TooBig};
use crate::numbers::{self, Bound, Dec};
use crate::strings::{self, any_char, ecma_search, format_lang, lit, rep, star, Encoder, FormatLang};
use crate::{Compiled, Draft, Options, PropertyOrder, SchemaError, SchemaWarning, Whitespace};
use corral_core::ebnf::{Expr, GrammarAst, PermSpec, RuleDef};
use corral_core::Rx;
use corral_core::Grammar;
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use crate::shared_cache::SharedCache;
use std::sync::Arc;

type Res<T> = Result<T, SchemaError>;

const T_NULL: u8 = 1;
const T_BOOL: u8 = 2;
const T_INT: u8 = 4;
const T_NUM: u8 = 8;
const T_STR: u8 = 16;
const T_ARR: u8 = 32;
const T_OBJ: u8 = 64;
const T_ALL: u8 = 127;
const T_NUMS: u8 = T_INT | T_NUM;

/// Largest number of states of a code-point automaton built while compiling.
const DFA_LIMIT: usize = 50_000;

pub(crate) use crate::encode::AUTOMATON_TERMINAL_STATES;

/// The code-point automaton of a pattern or format (`key`), built once per process: formats
/// and common patterns recur across schemas. Outcomes are deterministic (a pattern is too
/// large or unsupported for every schema alike), so errors are kept too.
fn shared_dfa(key: String, build: impl FnOnce() -> Result<CDfa, String>) -> Result<Arc<CDfa>, String> {
    static CACHE: SharedCache<String, Result<Arc<CDfa>, String>> = SharedCache::new(1024);
    CACHE.get_or_build(key, || build().map(Arc::new))
}

/// Every key but `declared` (see [`CDfa::all_except`]), shared across compiles: the same
/// property sets recur wherever a definition is used, and in schema after schema.
fn keys_except(declared: &[&str]) -> Arc<CDfa> {
    // keyed by the names themselves: any separator could occur inside a name
    static CACHE: SharedCache<Vec<String>, Arc<CDfa>> = SharedCache::new(1024);
    CACHE.get_or_build(declared.iter().map(|s| s.to_string()).collect(), || Arc::new(CDfa::all_except(declared)))
}

/// Largest regular expression produced from an automaton before falling back to rules.
const RX_CAP: usize = 30_000;
/// Largest string automaton turned back into a regular expression for a symbolic length bound.
const TO_RX_STATES: usize = 512;
/// Deepest nesting with an indented fixed layout.
const MAX_INDENT_DEPTH: u32 = 32;
/// Most conjunctions expanded from anyOf/oneOf/not/if groups (the branches taken, each with
/// the groups already chosen), at the default `max_productions`; scaled with it. Plain
/// sub-schemas (property values, items) do not count: an object of 20,000 properties is
/// 20,000 conjunctions but no combination (they counted until the `oneOf` expansion became
/// linear, and such objects hit this limit).
const MAX_LEAVES: usize = 20_000;
/// Most grammar rules built for one schema.
const MAX_RULES: usize = 100_000;


#[derive(Clone, Debug)]
enum SV<'a> {
    Doc(&'a Value),
    Own(Rc<Value>),
}

/// A sub-schema with where it is (`ptr`), the base URI its references resolve against, and
/// the key it is memoized by. The strings are shared: items are cloned into every
/// conjunction and alternative that holds them (three strings per clone were a tenth of a
/// schema compile's allocations).
#[derive(Clone, Debug)]
struct Item<'a> {
    v: SV<'a>,
    ptr: Rc<str>,
    base: Rc<str>,
    key: Rc<str>,
}

impl Item<'_> {
    fn val(&self) -> &Value {
        match &self.v {
            SV::Doc(v) => v,
            SV::Own(v) => v,
        }
    }
}

/// The member `key` of an object or the element `key` (a decimal index) of an array, as a
/// JSON pointer token (already unescaped) selects it.
fn step<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
    match v {
        Value::Object(m) => m.get(key),
        Value::Array(a) => {
            if key.len() > 1 && key.starts_with('0') || key.starts_with('+') {
                return None;
            }
            a.get(key.parse::<usize>().ok()?)
        }
        _ => None,
    }
}

fn esc_ptr(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    push_esc(&mut out, s);
    out
}

/// Appends `s` escaped as a JSON pointer token.
fn push_esc(out: &mut String, s: &str) {
    if !s.contains(['~', '/']) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

fn type_mask(name: &str) -> Option<u8> {
    Some(match name {
        "null" => T_NULL,
        "boolean" => T_BOOL,
        "integer" => T_INT,
        "number" => T_NUMS,
        "string" => T_STR,
        "array" => T_ARR,
        "object" => T_OBJ,
        _ => return None,
    })
}

/// The type bit of a value. An integer is a number with no fraction (`1.0` counts), except in
/// draft 4, whose validators count only numbers written without fraction or exponent.
fn value_type(v: &Value, draft: Draft) -> u8 {
    match v {
        Value::Null => T_NULL,
        Value::Bool(_) => T_BOOL,
        Value::Number(n) => {
            let integer = if draft == Draft::Draft4 { n.is_i64() || n.is_u64() } else { Dec::from_json(n).is_some_and(|d| d.is_integer()) };
            if integer {
                T_INT
            } else {
                T_NUM
            }
        }
        Value::String(_) => T_STR,
        Value::Array(_) => T_ARR,
        Value::Object(_) => T_OBJ,
    }
}

/// JSON Schema equality (numbers by value).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => Dec::from_json(x) == Dec::from_json(y),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q)),
        (Value::Object(x), Value::Object(y)) => x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w))),
        _ => a == b,
    }
}

/// A key equal for exactly the values [`json_eq`] calls equal (numbers by value, object
/// members in any order): for sets of values without quadratic comparisons.
fn json_key(v: &Value) -> String {
    fn put(v: &Value, out: &mut String) {
        match v {
            Value::Number(n) => match Dec::from_json(n) {
                Some(d) => {
                    out.push('n');
                    out.push_str(&d.to_string());
                }
                None => {
                    out.push('N');
                    out.push_str(&n.to_string());
                }
            },
            Value::Array(a) => {
                out.push('[');
                for x in a {
                    put(x, out);
                    out.push(',');
                }
                out.push(']');
            }
            Value::Object(o) => {
                let mut keys: Vec<&String> = o.keys().collect();
                keys.sort();
                out.push('{');
                for k in keys {
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    put(&o[k], out);
                    out.push(',');
                }
                out.push('}');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    put(v, &mut out);
    out
}

#[derive(Clone, Debug)]
struct Group<'a> {
    id: String,
    branches: Vec<Item<'a>>,
    one_of: bool,
    ptr: Rc<str>,
}

#[derive(Clone, Debug, Default)]
struct ArrPart<'a> {
    prefix: Vec<Item<'a>>,
    rest: Option<Item<'a>>,
}

#[derive(Clone, Debug, Default)]
struct ObjPart<'a> {
    props: Vec<(String, Item<'a>)>,
    patterns: Vec<(String, Item<'a>)>,
    additional: Option<Item<'a>>,
    ptr: Rc<str>,
}

/// A set of keys: those not in `not_names`, matching none of `not_patterns`, matching
/// `pattern` when there is one, and (`invalid_names`) failing that schema as strings.
#[derive(Clone, Debug, Default)]
struct KeyLang<'a> {
    not_names: Vec<String>,
    not_patterns: Vec<String>,
    pattern: Option<String>,
    invalid_names: Option<Item<'a>>,
}

#[derive(Clone, Debug)]
enum StrCons {
    Pattern(String),
    Format(String),
}

#[derive(Debug)]
struct Flat<'a> {
    never: bool,
    types: u8,
    enums: Option<Vec<Value>>,
    enum_ptr: Rc<str>,
    excluded: Vec<Value>,
    lo: Bound,
    hi: Bound,
    mult: Vec<(Dec, Rc<str>)>,
    not_mult: Vec<Dec>,
    min_len: u64,
    max_len: Option<u64>,
    len_ptr: Rc<str>,
    str_pos: Vec<(StrCons, Rc<str>)>,
    str_neg: Vec<StrCons>,
    arr_parts: Vec<ArrPart<'a>>,
    min_items: u64,
    max_items: Option<u64>,
    contains: Vec<(Item<'a>, u64, Option<u64>, Rc<str>)>,
    unique: Option<Rc<str>>,
    obj_parts: Vec<ObjPart<'a>>,
    required: BTreeSet<String>,
    min_props: u64,
    max_props: Option<u64>,
    prop_names: Vec<Item<'a>>,
    groups: Vec<Group<'a>>,
    nots: Vec<(String, Item<'a>)>,
    /// Objects must have a member whose key is in the set and whose value satisfies the
    /// schema (`x-corral-exists`: what the negation of `additionalProperties` and
    /// `patternProperties` leaves), with the pointer of the `not` it came from.
    exists: Vec<(KeyLang<'a>, Item<'a>, Rc<str>)>,
}

impl Default for Flat<'_> {
    fn default() -> Self {
        Flat {
            never: false,
            types: T_ALL,
            enums: None,
            enum_ptr: "".into(),
            excluded: vec![],
            lo: Bound::None,
            hi: Bound::None,
            mult: vec![],
            not_mult: vec![],
            min_len: 0,
            max_len: None,
            len_ptr: "".into(),
            str_pos: vec![],
            str_neg: vec![],
            arr_parts: vec![],
            min_items: 0,
            max_items: None,
            contains: vec![],
            unique: None,
            obj_parts: vec![],
            required: BTreeSet::new(),
            min_props: 0,
            max_props: None,
            prop_names: vec![],
            groups: vec![],
            nots: vec![],
            exists: vec![],
        }
    }
}

fn tighten_lo(cur: &mut Bound, new: Bound) {
    let replace = match (&*cur, &new) {
        (_, Bound::None) => false,
        (Bound::None, _) => true,
        (Bound::Incl(a) | Bound::Excl(a), Bound::Incl(b)) => b > a,
        (Bound::Incl(a), Bound::Excl(b)) => b >= a,
        (Bound::Excl(a), Bound::Excl(b)) => b > a,
    };
    if replace {
        *cur = new;
    }
}

fn tighten_hi(cur: &mut Bound, new: Bound) {
    let replace = match (&*cur, &new) {
        (_, Bound::None) => false,
        (Bound::None, _) => true,
        (Bound::Incl(a) | Bound::Excl(a), Bound::Incl(b)) => b < a,
        (Bound::Incl(a), Bound::Excl(b)) => b <= a,
        (Bound::Excl(a), Bound::Excl(b)) => b < a,
    };
    if replace {
        *cur = new;
    }
}

fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0).map(|f| f.min(u64::MAX as f64) as u64)),
        _ => None,
    }
}

/// Resolves `r` against `base` (RFC 3986, simplified).
fn join_uri(base: &str, r: &str) -> String {
    if r.is_empty() {
        return base.split('#').next().unwrap_or("").to_string();
    }
    let has_scheme = |s: &str| s.find(':').is_some_and(|i| i > 0 && s[..i].chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)));
    if has_scheme(r) {
        return r.to_string();
    }
    let base_nf = base.split('#').next().unwrap_or("");
    if r.starts_with('#') {
        return format!("{base_nf}{r}");
    }
    let scheme_end = base_nf.find(':').map(|i| i + 1).unwrap_or(0);
    if r.starts_with("//") {
        return format!("{}{}", &base_nf[..scheme_end], r);
    }
    let after = &base_nf[scheme_end..];
    let (auth, path) = if let Some(rest) = after.strip_prefix("//") {
        let i = rest.find('/').unwrap_or(rest.len());
        (format!("//{}", &rest[..i]), rest[i..].to_string())
    } else {
        (String::new(), after.to_string())
    };
    let path = path.split('?').next().unwrap_or("").to_string();
    let new_path = if r.starts_with('/') {
        r.to_string()
    } else {
        let dir = match path.rfind('/') {
            Some(i) => &path[..=i],
            None => "",
        };
        format!("{dir}{r}")
    };
    // remove dot segments
    let (p, tail) = match new_path.find(['?', '#']) {
        Some(i) => (&new_path[..i], &new_path[i..]),
        None => (new_path.as_str(), ""),
    };
    let mut out: Vec<&str> = Vec::new();
    let segs: Vec<&str> = p.split('/').collect();
    for (i, s) in segs.iter().enumerate() {
        match *s {
            "." => {
                if i == segs.len() - 1 {
                    out.push("");
                }
            }
            ".." => {
                if out.len() > 1 {
                    out.pop();
                }
                if i == segs.len() - 1 {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    format!("{}{}{}{}", &base_nf[..scheme_end], auth, out.join("/"), tail)
}

fn pct_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Layout pieces for the configured whitespace. The pieces that do not depend on the nesting
/// depth are built once per compile and cloned (built at every use, they were a tenth of a
/// schema compile's allocations).
struct Layout {
    ws: Whitespace,
    ws_expr: Expr,
    colon_expr: Expr,
    /// The separator, unless it depends on the depth (an indented layout).
    sep_expr: Option<Expr>,
}

impl Layout {
    fn new(ws: Whitespace) -> Layout {
        let mut l = Layout { ws, ws_expr: Expr::Seq(vec![]), colon_expr: Expr::Seq(vec![]), sep_expr: None };
        l.ws_expr = l.make_ws();
        l.colon_expr = l.make_colon();
        if !matches!(l.ws, Whitespace::Fixed { .. }) {
            l.sep_expr = Some(l.make_sep(0));
        }
        l
    }
    fn ws(&self) -> Expr {
        self.ws_expr.clone()
    }
    fn colon(&self) -> Expr {
        self.colon_expr.clone()
    }
    fn sep(&self, d: u32) -> Expr {
        match &self.sep_expr {
            Some(e) => e.clone(),
            None => self.make_sep(d),
        }
    }
    fn make_ws(&self) -> Expr {
        match &self.ws {
            Whitespace::Flexible { max } => Expr::Terminal(rep(Rx::Bytes(vec![(b'\t', b'\n'), (b'\r', b'\r'), (b' ', b' ')]), 0, Some(*max))),
            _ => Expr::Seq(vec![]),
        }
    }
    fn indent(&self, d: u32) -> String {
        match &self.ws {
            Whitespace::Fixed { indent: Some(n), .. } => format!("\n{}", " ".repeat((*n * d) as usize)),
            _ => String::new(),
        }
    }
    fn open(&self, c: &str, d: u32) -> Expr {
        token(match &self.ws {
            Whitespace::Flexible { .. } => Expr::Seq(vec![Expr::Literal(c.into()), self.ws()]),
            _ => Expr::Literal(format!("{c}{}", self.indent(d + 1)).into_bytes()),
        })
    }
    fn close(&self, c: &str, d: u32) -> Expr {
        token(match &self.ws {
            Whitespace::Flexible { .. } => Expr::Seq(vec![self.ws(), Expr::Literal(c.into())]),
            _ => Expr::Literal(format!("{}{c}", self.indent(d)).into_bytes()),
        })
    }
    fn empty(&self, o: &str, c: &str) -> Expr {
        token(match &self.ws {
            Whitespace::Flexible { .. } => Expr::Seq(vec![Expr::Literal(o.into()), self.ws(), Expr::Literal(c.into())]),
            _ => Expr::Literal(format!("{o}{c}").into_bytes()),
        })
    }
    fn make_sep(&self, d: u32) -> Expr {
        token(match &self.ws {
            Whitespace::Flexible { .. } => Expr::Seq(vec![self.ws(), Expr::Literal(b",".to_vec()), self.ws()]),
            Whitespace::Compact => Expr::Literal(b",".to_vec()),
            Whitespace::Fixed { item_sep, .. } => Expr::Literal(format!("{item_sep}{}", self.indent(d + 1)).into_bytes()),
        })
    }
    fn make_colon(&self) -> Expr {
        token(match &self.ws {
            Whitespace::Flexible { .. } => Expr::Seq(vec![self.ws(), Expr::Literal(b":".to_vec()), self.ws()]),
            Whitespace::Compact => Expr::Literal(b":".to_vec()),
            Whitespace::Fixed { key_sep, .. } => Expr::Literal(key_sep.clone().into_bytes()),
        })
    }
}

/// `e` as a terminal of its own (see [`Expr::Token`]): shared automata and mask caches.
fn token(e: Expr) -> Expr {
    Expr::Token(std::sync::Arc::new(e))
}

/// Whether `e` is regular by construction (no rule references, key sets or tokens inside).
fn is_plain(e: &Expr) -> bool {
    match e {
        Expr::Literal(_) | Expr::Terminal(_) => true,
        Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().all(is_plain),
        Expr::Repeat { inner, .. } => is_plain(inner),
        Expr::Ref { .. } | Expr::Perm(_) | Expr::Token(_) | Expr::Tokens(_) => false,
    }
}

fn nothing() -> Expr {
    Expr::Terminal(Rx::Nothing)
}

fn rf(name: &str) -> Expr {
    Expr::Ref { name: name.to_string(), offset: 0 }
}

fn seq(v: Vec<Expr>) -> Expr {
    Expr::Seq(v)
}

fn alt(v: Vec<Expr>) -> Expr {
    let v: Vec<Expr> = v.into_iter().filter(|e| !matches!(e, Expr::Terminal(Rx::Nothing))).collect();
    match v.len() {
        0 => nothing(),
        1 => v.into_iter().next().unwrap(),
        _ => Expr::Alt(v),
    }
}

const CYC: &str = "__cyc";

/// Length-bounded strings up to this many characters are one terminal; longer bounds are
/// built from chunks of exactly this many characters ([`Compiler::flat_chunks`]).
const CHUNK: u64 = 256;

/// Most whole chunks [`Compiler::flat_chunks`] lays out (bounds beyond use nested chunks).
const MAX_FLAT_CHUNKS: u64 = 1024;

/// Keeps a rule a nonterminal (the lowering inlines acyclic rules as regular expressions,
/// which duplicates shared sub-automata): an extra alternative through a rule that never
/// terminates makes it recursive without changing its language.
fn opaque(e: Expr) -> Expr {
    let mut alts = match e {
        Expr::Alt(xs) => xs,
        e => vec![e],
    };
    alts.push(rf(CYC));
    Expr::Alt(alts)
}

pub(crate) struct Compiler<'a> {
    root: &'a Value,
    opts: &'a Options,
    draft: Draft,
    lay: Layout,
    rules: Vec<RuleDef>,
    memo: FxHashMap<String, String>,
    /// Items of the document by JSON pointer (reference targets: resolving one walks the
    /// document from the root).
    doc_items: FxHashMap<String, Item<'a>>,
    /// [`Compiler::eff_types`] of single items, by item key and depth.
    types_memo: FxHashMap<(Rc<str>, u32), u8>,
    warnings: Vec<SchemaWarning>,
    warned: FxHashSet<(String, String)>,
    kw: BTreeSet<String>,
    enc: Encoder,
    ids: FxHashMap<String, String>,
    anchors: FxHashMap<String, String>,
    re_cache: FxHashMap<String, Result<Rc<regex::Regex>, String>>,
    used_cyc: bool,
    leaves: usize,
    n: usize,
    named: FxHashMap<String, String>,
    root_base: String,
    has_dynamic: bool,
    skip_uneval: u32,
    uneval_root: Option<Rc<str>>,
    /// [`Compiler::length_expr`]'s strings of any characters so far, by length bounds.
    any_strings: FxHashMap<(u64, Option<u64>), Rx>,
    /// The [`json_key`]s of a long `enum`, by the key of the item holding it: validating each
    /// of an enum's values against it must not compare every pair.
    enum_keys: FxHashMap<Rc<str>, Rc<FxHashSet<String>>>,
    /// The value and the resolved groups [`Compiler::valid_all_resolved`] skips.
    valid_skip: Option<(*const Value, BTreeSet<String>)>,
}

/// Every character a JSON string may hold (the Unicode scalar values).
const ANY_CHAR: &[(u32, u32)] = &[(0, 0xD7FF), (0xE000, 0x10FFFF)];

/// `schema` as JSON text (the grammar's cache key), reading the compile budget's clock
/// every 64 KB written (a million-string `enum` takes 20 ms to write).
fn schema_text(schema: &Value) -> Res<String> {
    struct Budgeted {
        out: Vec<u8>,
        next_check: usize,
    }
    impl std::io::Write for Budgeted {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.out.extend_from_slice(b);
            if self.out.len() >= self.next_check {
                self.next_check = self.out.len() + (1 << 16);
                corral_core::budget::check().map_err(std::io::Error::other)?;
            }
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut w = Budgeted { out: Vec::new(), next_check: 1 << 16 };
    if serde_json::to_writer(&mut w, schema).is_err() {
        corral_core::budget::check()?;
        return Ok(String::new());
    }
    Ok(String::from_utf8(w.out).unwrap_or_default())
}

pub(crate) fn compile(schema: &Value, opts: &Options) -> Res<Compiled> {
    // One budget for the whole compile: the schema phase and `Grammar::from_ast` below (their
    // own scopes nest inside this one and keep this deadline).
    let _budget = corral_core::budget::Scope::new(opts.limits.max_compile_ms);
    let (ast, key, memo, c) = compile_ast(schema, opts)?;
    let grammar = Grammar::from_ast(&ast, "root", &key, &opts.limits).map_err(|e| match e {
        corral_core::Error::GrammarInvalid { message, .. } if message.contains("matches no finite string") => {
            SchemaError::Invalid { pointer: String::new(), message: "the schema accepts no value".into() }
        }
        e => SchemaError::Grammar(e),
    })?;
    // The expressions, the reference memo and the literal encodings are freed off the
    // caller's path (the `oneOf` type memo, one entry per branch, holds shared strings and is
    // freed here).
    corral_core::warmup::drop_in_background((ast, memo, c.2));
    Ok(Compiled { grammar, warnings: c.0, keywords_used: c.1 })
}

/// The rules of a schema's grammar (root rule `root`) for embedding in a larger grammar,
/// with the schema's warnings.
pub(crate) fn compile_rules(schema: &Value, opts: &Options) -> Res<(GrammarAst, Vec<SchemaWarning>)> {
    let (ast, _key, _memo, c) = compile_ast(schema, opts)?;
    Ok((ast, c.0))
}

type Leftovers = (Vec<SchemaWarning>, BTreeSet<String>, Encoder);

#[allow(clippy::type_complexity)]
fn compile_ast(schema: &Value, opts: &Options) -> Res<(GrammarAst, String, FxHashMap<String, String>, Leftovers)> {
    // One budget for the whole compile: the schema phase here and `Grammar::from_ast` below
    // (its own scope nests inside this one and keeps this deadline).
    let _budget = corral_core::budget::Scope::new(opts.limits.max_compile_ms);
    let known_meta = |s: &str| s.contains("json-schema.org/") || s.contains("openapis.org/") || s.starts_with("http://json-schema.org") || s.is_empty();
    if let Some(ms) = schema.get("$schema").and_then(|s| s.as_str()) {
        if !known_meta(ms) {
            let msg = format!("unknown meta-schema '{ms}': its vocabularies cannot be known (treated as standard JSON Schema)");
            if opts.strict {
                return Err(SchemaError::Unsupported { pointer: "/$schema".into(), keyword: "$schema".into(), message: msg });
            }
        }
    }
    let draft = match schema.get("$schema").and_then(|s| s.as_str()) {
        Some(s) if s.contains("draft-03") || s.contains("draft-04") => Draft::Draft4,
        Some(s) if s.contains("draft-06") => Draft::Draft6,
        Some(s) if s.contains("draft-07") => Draft::Draft7,
        Some(s) if s.contains("2019-09") => Draft::Draft2019,
        Some(s) if s.contains("2020-12") => Draft::Draft2020,
        _ => opts.default_draft,
    };
    let mut c = Compiler {
        root: schema,
        opts,
        draft,
        lay: Layout::new(opts.whitespace.clone()),
        rules: Vec::new(),
        memo: FxHashMap::default(),
        doc_items: FxHashMap::default(),
        types_memo: FxHashMap::default(),
        warnings: Vec::new(),
        warned: FxHashSet::default(),
        kw: BTreeSet::new(),
        enc: Encoder::default(),
        ids: FxHashMap::default(),
        anchors: FxHashMap::default(),
        re_cache: FxHashMap::default(),
        used_cyc: false,
        leaves: 0,
        n: 0,
        named: FxHashMap::default(),
        root_base: String::new(),
        has_dynamic: false,
        skip_uneval: 0,
        uneval_root: None,
        any_strings: FxHashMap::default(),
        enum_keys: FxHashMap::default(),
        valid_skip: None,
    };
    let root_base = match schema.get(if draft == Draft::Draft4 { "id" } else { "$id" }).and_then(|v| v.as_str()) {
        Some(id) => join_uri("urn:corral:root", id),
        None => "urn:corral:root".to_string(),
    };
    c.root_base = root_base.split('#').next().unwrap().to_string();
    c.index(schema, &mut String::new(), &c.root_base.clone());
    let root_item = Item { v: SV::Doc(schema), ptr: "".into(), base: c.root_base.as_str().into(), key: "d".into() };
    let body = c.conj(vec![root_item], &BTreeSet::new(), 0)?;
    let ws = c.lay.ws();
    let root_expr = match &opts.whitespace {
        Whitespace::Flexible { .. } => seq(vec![ws.clone(), body, ws]),
        _ => body,
    };
    c.rules.push(RuleDef { name: "root".into(), expr: root_expr, offset: 0 });
    if c.used_cyc {
        c.rules.push(RuleDef { name: CYC.into(), expr: seq(vec![Expr::Literal(b"\x00".to_vec()), rf(CYC)]), offset: 0 });
    }
    let ast = GrammarAst { rules: std::mem::take(&mut c.rules), source: String::new() };
    let key = format!(
        "json-schema:{}:{:?}:{}:{:?}:{:?}:{}",
        schema_text(schema)?,
        opts.whitespace,
        opts.strict,
        opts.property_order,
        opts.default_draft,
        opts.assert_format
    );
    let mut warnings = c.warnings;
    if let Some(ms) = schema.get("$schema").and_then(|s| s.as_str()) {
        if !known_meta(ms) {
            warnings.push(SchemaWarning { pointer: "/$schema".into(), keyword: "$schema".into(), message: format!("unknown meta-schema '{ms}' treated as standard JSON Schema") });
        }
    }
    c.warnings = warnings;
    let memo = std::mem::take(&mut c.memo);
    Ok((ast, key, memo, (c.warnings, c.kw, std::mem::take(&mut c.enc))))
}

/// Where keyword `k` holds subschemas: (one subschema, a map of them, an array of them).
/// (One `match` instead of scanning three lists for every key of every schema object.)
fn subschema_places(k: &str) -> (bool, bool, bool) {
    match k {
        "items" => (true, false, true),
        "additionalProperties" | "not" | "if" | "then" | "else" | "contains" | "propertyNames" | "additionalItems" | "unevaluatedItems" | "unevaluatedProperties" | "contentSchema" => (true, false, false),
        "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" | "dependencies" => (false, true, false),
        "allOf" | "anyOf" | "oneOf" | "prefixItems" => (false, false, true),
        _ => (false, false, false),
    }
}

impl<'a> Compiler<'a> {
    // ------------------------------------------------------------------ references

    /// Records the `$id`s and anchors of schema `v` (at JSON pointer `ptr`, resolved against
    /// `base`) and of every subschema under it. `ptr` is one buffer extended and truncated
    /// on the way down, and `base` is copied only where an `$id` changes it: most schemas
    /// declare no ids, and building every subschema's pointer and base as new strings was a
    /// twenty-fifth of a large schema's compile.
    fn index(&mut self, v: &'a Value, ptr: &mut String, base: &str) {
        let Value::Object(m) = v else { return };
        let idkey = if self.draft == Draft::Draft4 { "id" } else { "$id" };
        // The keywords that name this schema, in one pass over its keys (looking each up
        // hashed the key names again for every schema object).
        let (mut id, mut has_ref, mut anchor, mut dyn_anchor, mut dynamic) = (None, false, None, None, false);
        for (k, x) in m {
            match k.as_str() {
                "$ref" => has_ref = true,
                "$anchor" => anchor = x.as_str(),
                "$dynamicAnchor" => {
                    dynamic = true;
                    dyn_anchor = x.as_str();
                }
                "$recursiveAnchor" => dynamic = true,
                k if k == idkey => id = x.as_str(),
                _ => {}
            }
        }
        let mut new_base: Option<String> = None;
        let legacy_ref = self.draft <= Draft::Draft7 && has_ref;
        if let Some(id) = id.filter(|_| !legacy_ref) {
            let full = join_uri(base, id);
            let (u, frag) = match full.split_once('#') {
                Some((u, f)) => (u.to_string(), f.to_string()),
                None => (full.clone(), String::new()),
            };
            if !u.is_empty() && !(frag.is_empty() && id.starts_with('#')) {
                self.ids.entry(u.clone()).or_insert_with(|| ptr.clone());
                new_base = Some(u);
            }
            if !frag.is_empty() && !frag.starts_with('/') {
                self.anchors.insert(format!("{}#{}", new_base.as_deref().unwrap_or(base), frag), ptr.clone());
            }
        }
        let base = new_base.as_deref().unwrap_or(base);
        if let Some(a) = anchor {
            self.anchors.insert(format!("{base}#{a}"), ptr.clone());
        }
        if dynamic {
            self.has_dynamic = true;
            if let Some(a) = dyn_anchor {
                self.anchors.entry(format!("{base}#{a}")).or_insert_with(|| ptr.clone());
            }
        }
        let at = ptr.len();
        for (k, sub) in m {
            let (one, map, arr) = subschema_places(k);
            if !(one || map || arr) {
                continue;
            }
            ptr.push('/');
            push_esc(ptr, k);
            let at_k = ptr.len();
            if one {
                self.index(sub, ptr, base);
            }
            if map {
                if let Value::Object(mm) = sub {
                    for (kk, s) in mm {
                        ptr.push('/');
                        push_esc(ptr, kk);
                        self.index(s, ptr, base);
                        ptr.truncate(at_k);
                    }
                }
            }
            if arr {
                if let Value::Array(a) = sub {
                    for (i, s) in a.iter().enumerate() {
                        use std::fmt::Write;
                        let _ = write!(ptr, "/{i}");
                        self.index(s, ptr, base);
                        ptr.truncate(at_k);
                    }
                }
            }
            ptr.truncate(at);
        }
    }

    fn lookup_ptr(&self, ptr: &str) -> Option<&'a Value> {
        if ptr.is_empty() {
            return Some(self.root);
        }
        self.root.pointer(ptr)
    }

    fn base_at(&self, ptr: &str) -> String {
        // walk from the root applying $id
        let mut base = self.root_base.clone();
        let mut cur = self.root;
        for tok in ptr.split('/').skip(1) {
            let t = tok.replace("~1", "/").replace("~0", "~");
            cur = match step(cur, &t) {
                Some(v) => v,
                None => return base,
            };
            self.apply_id(&mut base, cur);
        }
        base
    }

    /// Moves `base` into schema `v` when `v` declares an `$id` (`id` in draft 4) that
    /// changes it: what `base_at` does at each step of a pointer.
    fn apply_id(&self, base: &mut String, v: &Value) {
        if let Some(b) = self.id_base(base, v) {
            *base = b;
        }
    }

    /// The base URI inside `v` when its `$id` changes it from `base`.
    fn id_base(&self, base: &str, v: &Value) -> Option<String> {
        let idkey = if self.draft == Draft::Draft4 { "id" } else { "$id" };
        let id = v.get(idkey).and_then(|x| x.as_str())?;
        if !id.starts_with('#') && !(self.draft <= Draft::Draft7 && v.get("$ref").is_some()) {
            return Some(join_uri(base, id).split('#').next().unwrap().to_string());
        }
        None
    }

    fn doc_item(&mut self, ptr: &str) -> Option<Item<'a>> {
        if let Some(it) = self.doc_items.get(ptr) {
            return Some(it.clone());
        }
        let v = self.lookup_ptr(ptr)?;
        let it = Item { v: SV::Doc(v), ptr: ptr.into(), base: self.base_at(ptr).into(), key: format!("d{ptr}").into() };
        self.doc_items.insert(ptr.to_string(), it.clone());
        Some(it)
    }

    fn resolve_ref(&mut self, it: &Item<'a>, r: &str, kw: &str) -> Res<Item<'a>> {
        let full = join_uri(&it.base, r);
        let (u, frag) = match full.split_once('#') {
            Some((u, f)) => (u.to_string(), pct_decode(f)),
            None => (full.clone(), String::new()),
        };
        let base_ptr = if u == self.root_base || u.is_empty() {
            Some(String::new())
        } else {
            self.ids.get(&u).cloned()
        };
        let Some(base_ptr) = base_ptr else {
            return Err(SchemaError::Unsupported {
                pointer: format!("{}/{kw}", it.ptr),
                keyword: kw.into(),
                message: format!("reference '{r}' points outside this schema (remote references are not fetched)"),
            });
        };
        let target = if frag.is_empty() {
            base_ptr
        } else if frag.starts_with('/') {
            format!("{base_ptr}{frag}")
        } else {
            match self.anchors.get(&format!("{u}#{frag}")) {
                Some(p) => p.clone(),
                None => {
                    return Err(SchemaError::Invalid { pointer: format!("{}/{kw}", it.ptr), message: format!("reference '{r}': anchor '{frag}' not found") })
                }
            }
        };
        match self.doc_item(&target) {
            Some(i) => Ok(i),
            None => Err(SchemaError::Invalid { pointer: format!("{}/{kw}", it.ptr), message: format!("reference '{r}' does not resolve") }),
        }
    }

    fn child(&self, it: &Item<'a>, path: &[&str]) -> Option<Item<'a>> {
        // (The document key first: the pointer is the same string without its `d`.)
        let mut key = String::with_capacity(1 + it.ptr.len() + path.iter().map(|p| p.len() + 1).sum::<usize>());
        key.push('d');
        key.push_str(&it.ptr);
        for p in path {
            key.push('/');
            push_esc(&mut key, p);
        }
        let ptr: Rc<str> = key[1..].into();
        match &it.v {
            // Walked from the parent, not from the root: the same value and base as
            // `doc_item(&ptr)` (the parent's base is `base_at` of its pointer).
            SV::Doc(v) => {
                let mut cur: &'a Value = v;
                let mut base = it.base.clone();
                for p in path {
                    cur = step(cur, p)?;
                    if let Some(b) = self.id_base(&base, cur) {
                        base = b.into();
                    }
                }
                Some(Item { v: SV::Doc(cur), ptr, base, key: key.into() })
            }
            SV::Own(v) => {
                let mut cur: &Value = v;
                for p in path {
                    cur = step(cur, p)?;
                }
                let sub = cur.clone();
                let key = format!("o{}|{}", it.base, serde_json::to_string(&sub).unwrap_or_default());
                Some(Item { v: SV::Own(Rc::new(sub)), ptr, base: it.base.clone(), key: key.into() })
            }
        }
    }

    fn own(&self, v: Value, ptr: &str, base: &str) -> Item<'a> {
        let key = format!("o{}|{}", base, serde_json::to_string(&v).unwrap_or_default());
        Item { v: SV::Own(Rc::new(v)), ptr: ptr.into(), base: base.into(), key: key.into() }
    }

    /// A value that refers to `it` from inside a synthetic schema.
    fn ref_value(&self, it: &Item<'a>) -> Value {
        match &it.v {
            SV::Doc(_) => json!({ "x-corral-ptr": &*it.ptr }),
            SV::Own(v) => (**v).clone(),
        }
    }

    // ------------------------------------------------------------------ diagnostics

    fn unsupported(&mut self, ptr: &str, kw: &str, msg: impl Into<String>) -> Res<()> {
        self.unsupported_at(format!("{ptr}/{}", esc_ptr(kw)), kw, msg)
    }

    /// [`Compiler::unsupported`] with the whole pointer given (a keyword reported where
    /// another sits: a `not` that cannot negate the `oneOf` at `/not/oneOf`).
    fn unsupported_at(&mut self, pointer: String, kw: &str, msg: impl Into<String>) -> Res<()> {
        let msg = msg.into();
        if self.opts.strict {
            return Err(SchemaError::Unsupported { pointer, keyword: kw.into(), message: msg });
        }
        self.warn(&pointer, kw, msg);
        Ok(())
    }

    fn warn(&mut self, pointer: &str, kw: &str, msg: String) {
        if self.warned.insert((pointer.to_string(), kw.to_string())) {
            self.warnings.push(SchemaWarning { pointer: pointer.to_string(), keyword: kw.into(), message: msg });
        }
    }

    fn invalid<T>(&self, ptr: &str, msg: impl Into<String>) -> Res<T> {
        Err(SchemaError::Invalid { pointer: ptr.to_string(), message: msg.into() })
    }

    fn new_name(&mut self, hint: &str) -> String {
        self.n += 1;
        format!("{hint}{}", self.n)
    }

    fn add_rule(&mut self, name: String, expr: Expr) {
        if let Expr::Alt(xs) = &expr {
            if xs.iter().any(|x| matches!(x, Expr::Ref { name, .. } if name == CYC)) {
                self.used_cyc = true;
            }
        }
        self.rules.push(RuleDef { name, expr, offset: 0 });
    }
}

#[cfg(test)]
mod tests {
    /// With a background thread, the formats prewarmed at the first compile end up in the
    /// process-wide cache: looking them up afterwards builds nothing. (`date-time` takes
    /// the leap-second path, whose pieces are cached elsewhere.)
    #[test]
    fn prewarmed_formats_are_cached() {
        if !corral_core::warmup::enabled() {
            return; // `CORRAL_BACKGROUND_WARMUP=0` in this environment: nothing is prewarmed.
        }
        crate::formats_in_background();
        corral_core::warmup::wait_idle();
        for f in ["uri", "email", "uri-reference", "ipv6", "hostname"] {
            let got = super::shared_dfa(format!("f:{f}"), || Err("built again".into()));
            assert!(got.is_ok(), "{f}: {got:?}");
        }
    }
}
