//! The schema compiler: conjunctions of sub-schemas → grammar rules.

use crate::cdfa::{CDfa, TooBig};
use crate::numbers::{self, Bound, Dec};
use crate::strings::{self, any_char, ecma_search, format_lang, lit, rep, star, Encoder, FormatLang};
use crate::{Compiled, Draft, Options, PropertyOrder, SchemaError, SchemaWarning, Whitespace};
use corral_core::ebnf::{Expr, GrammarAst, PermSpec, RuleDef};
use corral_core::rx::Rx;
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

/// Largest code-point automaton made one terminal (and four times that in bytes); larger
/// ones become one rule per state. `uri-reference` has 182 states; the exact leap seconds of
/// `date-time` (11,007) stay rules.
const AUTOMATON_TERMINAL_STATES: usize = 2000;

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
    static CACHE: SharedCache<String, Arc<CDfa>> = SharedCache::new(1024);
    CACHE.get_or_build(declared.join("\0"), || Arc::new(CDfa::all_except(declared)))
}

/// Largest regular expression produced from an automaton before falling back to rules.
const RX_CAP: usize = 30_000;
/// Largest string automaton turned back into a regular expression for a symbolic length bound.
const TO_RX_STATES: usize = 512;
/// Deepest nesting with an indented fixed layout.
const MAX_INDENT_DEPTH: u32 = 32;
/// Most leaf conjunctions expanded from anyOf/oneOf/not groups.
const MAX_LEAVES: usize = 5_000;
/// Most grammar rules built for one schema.
const MAX_RULES: usize = 100_000;


#[derive(Clone, Debug)]
enum SV<'a> {
    Doc(&'a Value),
    Own(Rc<Value>),
}

#[derive(Clone, Debug)]
struct Item<'a> {
    v: SV<'a>,
    ptr: String,
    base: String,
    key: String,
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

#[derive(Clone, Debug)]
struct Group<'a> {
    id: String,
    branches: Vec<Item<'a>>,
    one_of: bool,
    ptr: String,
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
    ptr: String,
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
    enum_ptr: String,
    excluded: Vec<Value>,
    lo: Bound,
    hi: Bound,
    mult: Vec<(Dec, String)>,
    not_mult: Vec<Dec>,
    min_len: u64,
    max_len: Option<u64>,
    len_ptr: String,
    str_pos: Vec<(StrCons, String)>,
    str_neg: Vec<StrCons>,
    arr_parts: Vec<ArrPart<'a>>,
    min_items: u64,
    max_items: Option<u64>,
    contains: Vec<(Item<'a>, u64, Option<u64>, String)>,
    unique: Option<String>,
    obj_parts: Vec<ObjPart<'a>>,
    required: BTreeSet<String>,
    min_props: u64,
    max_props: Option<u64>,
    prop_names: Vec<Item<'a>>,
    groups: Vec<Group<'a>>,
    nots: Vec<(String, Item<'a>)>,
}

impl Default for Flat<'_> {
    fn default() -> Self {
        Flat {
            never: false,
            types: T_ALL,
            enums: None,
            enum_ptr: String::new(),
            excluded: vec![],
            lo: Bound::None,
            hi: Bound::None,
            mult: vec![],
            not_mult: vec![],
            min_len: 0,
            max_len: None,
            len_ptr: String::new(),
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

/// Layout pieces for the configured whitespace.
struct Layout {
    ws: Whitespace,
}

impl Layout {
    fn ws(&self) -> Expr {
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
    fn sep(&self, d: u32) -> Expr {
        token(match &self.ws {
            Whitespace::Flexible { .. } => Expr::Seq(vec![self.ws(), Expr::Literal(b",".to_vec()), self.ws()]),
            Whitespace::Compact => Expr::Literal(b",".to_vec()),
            Whitespace::Fixed { item_sep, .. } => Expr::Literal(format!("{item_sep}{}", self.indent(d + 1)).into_bytes()),
        })
    }
    fn colon(&self) -> Expr {
        token(match &self.ws {
            Whitespace::Flexible { .. } => Expr::Seq(vec![self.ws(), Expr::Literal(b":".to_vec()), self.ws()]),
            Whitespace::Compact => Expr::Literal(b":".to_vec()),
            Whitespace::Fixed { key_sep, .. } => Expr::Literal(key_sep.clone().into_bytes()),
        })
    }
}

/// `e` as a terminal of its own (see [`Expr::Token`]): shared automata and mask caches.
fn token(e: Expr) -> Expr {
    Expr::Token(Box::new(e))
}

/// Whether `e` is regular by construction (no rule references, key sets or tokens inside).
fn is_plain(e: &Expr) -> bool {
    match e {
        Expr::Literal(_) | Expr::Terminal(_) => true,
        Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().all(is_plain),
        Expr::Repeat { inner, .. } => is_plain(inner),
        Expr::Ref { .. } | Expr::Perm(_) | Expr::Token(_) => false,
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
    types_memo: FxHashMap<(String, u32), u8>,
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
    uneval_root: Option<String>,
}

pub(crate) fn compile(schema: &Value, opts: &Options) -> Res<Compiled> {
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
        lay: Layout { ws: opts.whitespace.clone() },
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
    };
    let root_base = match schema.get(if draft == Draft::Draft4 { "id" } else { "$id" }).and_then(|v| v.as_str()) {
        Some(id) => join_uri("urn:corral:root", id),
        None => "urn:corral:root".to_string(),
    };
    c.root_base = root_base.split('#').next().unwrap().to_string();
    c.index(schema, "", &c.root_base.clone());
    let root_item = Item { v: SV::Doc(schema), ptr: String::new(), base: c.root_base.clone(), key: "d".into() };
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
        serde_json::to_string(schema).unwrap_or_default(),
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
    let grammar = Grammar::from_ast(&ast, "root", &key, &opts.limits).map_err(|e| match e {
        corral_core::Error::GrammarInvalid { message, .. } if message.contains("matches no finite string") => {
            SchemaError::Invalid { pointer: String::new(), message: "the schema accepts no value".into() }
        }
        e => SchemaError::Grammar(e),
    })?;
    Ok(Compiled { grammar, warnings: c.warnings, keywords_used: c.kw })
}

const SUB_ONE: &[&str] = &["additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "additionalItems", "unevaluatedItems", "unevaluatedProperties", "items", "contentSchema"];
const SUB_MAP: &[&str] = &["properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"];
const SUB_ARR: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];

impl<'a> Compiler<'a> {
    // ------------------------------------------------------------------ references

    fn index(&mut self, v: &'a Value, ptr: &str, base: &str) {
        let Value::Object(m) = v else { return };
        let idkey = if self.draft == Draft::Draft4 { "id" } else { "$id" };
        let mut base = base.to_string();
        let legacy_ref = self.draft <= Draft::Draft7 && m.contains_key("$ref");
        if let Some(id) = m.get(idkey).and_then(|x| x.as_str()).filter(|_| !legacy_ref) {
            let full = join_uri(&base, id);
            let (u, frag) = match full.split_once('#') {
                Some((u, f)) => (u.to_string(), f.to_string()),
                None => (full.clone(), String::new()),
            };
            if !u.is_empty() && !(frag.is_empty() && id.starts_with('#')) {
                base = u.clone();
                self.ids.entry(u.clone()).or_insert_with(|| ptr.to_string());
            }
            if !frag.is_empty() && !frag.starts_with('/') {
                self.anchors.insert(format!("{}#{}", base, frag), ptr.to_string());
            }
        }
        if let Some(a) = m.get("$anchor").and_then(|x| x.as_str()) {
            self.anchors.insert(format!("{base}#{a}"), ptr.to_string());
        }
        if m.contains_key("$dynamicAnchor") || m.contains_key("$recursiveAnchor") {
            self.has_dynamic = true;
            if let Some(a) = m.get("$dynamicAnchor").and_then(|x| x.as_str()) {
                self.anchors.entry(format!("{base}#{a}")).or_insert_with(|| ptr.to_string());
            }
        }
        for (k, sub) in m {
            if SUB_ONE.contains(&k.as_str()) {
                self.index(sub, &format!("{ptr}/{}", esc_ptr(k)), &base);
            }
            if SUB_MAP.contains(&k.as_str()) {
                if let Value::Object(mm) = sub {
                    for (kk, s) in mm {
                        self.index(s, &format!("{ptr}/{}/{}", esc_ptr(k), esc_ptr(kk)), &base);
                    }
                }
            }
            if SUB_ARR.contains(&k.as_str()) {
                if let Value::Array(a) = sub {
                    for (i, s) in a.iter().enumerate() {
                        self.index(s, &format!("{ptr}/{}/{i}", esc_ptr(k)), &base);
                    }
                }
            }
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
        let idkey = if self.draft == Draft::Draft4 { "id" } else { "$id" };
        if let Some(id) = v.get(idkey).and_then(|x| x.as_str()) {
            if !id.starts_with('#') && !(self.draft <= Draft::Draft7 && v.get("$ref").is_some()) {
                *base = join_uri(base, id).split('#').next().unwrap().to_string();
            }
        }
    }

    fn doc_item(&mut self, ptr: &str) -> Option<Item<'a>> {
        if let Some(it) = self.doc_items.get(ptr) {
            return Some(it.clone());
        }
        let v = self.lookup_ptr(ptr)?;
        let it = Item { v: SV::Doc(v), ptr: ptr.to_string(), base: self.base_at(ptr), key: format!("d{ptr}") };
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
        let mut ptr = String::with_capacity(it.ptr.len() + path.iter().map(|p| p.len() + 1).sum::<usize>());
        ptr.push_str(&it.ptr);
        for p in path {
            ptr.push('/');
            push_esc(&mut ptr, p);
        }
        match &it.v {
            // Walked from the parent, not from the root: the same value and base as
            // `doc_item(&ptr)` (the parent's base is `base_at` of its pointer).
            SV::Doc(v) => {
                let mut cur: &'a Value = v;
                let mut base = it.base.clone();
                for p in path {
                    cur = step(cur, p)?;
                    self.apply_id(&mut base, cur);
                }
                let key = format!("d{ptr}");
                Some(Item { v: SV::Doc(cur), ptr, base, key })
            }
            SV::Own(v) => {
                let mut cur: &Value = v;
                for p in path {
                    cur = step(cur, p)?;
                }
                let sub = cur.clone();
                let key = format!("o{}|{}", it.base, serde_json::to_string(&sub).unwrap_or_default());
                Some(Item { v: SV::Own(Rc::new(sub)), ptr, base: it.base.clone(), key })
            }
        }
    }

    fn own(&self, v: Value, ptr: &str, base: &str) -> Item<'a> {
        let key = format!("o{}|{}", base, serde_json::to_string(&v).unwrap_or_default());
        Item { v: SV::Own(Rc::new(v)), ptr: ptr.to_string(), base: base.to_string(), key }
    }

    /// A value that refers to `it` from inside a synthetic schema.
    fn ref_value(&self, it: &Item<'a>) -> Value {
        match &it.v {
            SV::Doc(_) => json!({ "x-corral-ptr": it.ptr }),
            SV::Own(v) => (**v).clone(),
        }
    }

    // ------------------------------------------------------------------ diagnostics

    fn unsupported(&mut self, ptr: &str, kw: &str, msg: impl Into<String>) -> Res<()> {
        let msg = msg.into();
        let pointer = format!("{ptr}/{}", esc_ptr(kw));
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

    // ------------------------------------------------------------------ flattening

    fn flatten(&mut self, items: &[Item<'a>], resolved: &BTreeSet<String>) -> Res<Flat<'a>> {
        corral_core::budget::check()?;
        let mut f = Flat::default();
        let mut work: Vec<Item<'a>> = items.to_vec();
        let mut seen: FxHashSet<String> = FxHashSet::default();
        while let Some(it) = work.pop() {
            if !seen.insert(it.key.clone()) {
                continue;
            }
            match it.val() {
                Value::Bool(true) => {}
                Value::Bool(false) => f.never = true,
                Value::Object(m) => self.flatten_obj(&it, m, &mut f, &mut work, resolved)?,
                _ => return self.invalid(&it.ptr, "a schema must be an object or a boolean"),
            }
        }
        Ok(f)
    }

    fn flatten_obj(&mut self, it: &Item<'a>, m: &Map<String, Value>, f: &mut Flat<'a>, work: &mut Vec<Item<'a>>, resolved: &BTreeSet<String>) -> Res<()> {
        let p = it.ptr.clone();
        for k in m.keys() {
            if !k.starts_with("x-corral-") {
                self.kw.insert(k.clone());
            }
        }
        if self.draft <= Draft::Draft7 {
            if let Some(r) = m.get("$ref") {
                let Some(r) = r.as_str() else { return self.invalid(&p, "$ref must be a string") };
                let t = self.resolve_ref(it, r, "$ref")?;
                work.push(t);
                return Ok(());
            }
        }
        let mut arr = ArrPart::default();
        let mut has_arr = false;
        let mut obj = ObjPart { ptr: p.clone(), ..Default::default() };
        let mut has_obj = false;
        for (k, v) in m {
            match k.as_str() {
                "$ref" => {
                    let Some(r) = v.as_str() else { return self.invalid(&p, "$ref must be a string") };
                    let t = self.resolve_ref(it, r, "$ref")?;
                    work.push(t);
                }
                "$dynamicRef" | "$recursiveRef" => {
                    let r = v.as_str().unwrap_or("");
                    if self.has_dynamic {
                        return Err(SchemaError::Unsupported {
                            pointer: format!("{p}/{k}"),
                            keyword: k.clone(),
                            message: "dynamic references are not supported".into(),
                        });
                    }
                    let t = self.resolve_ref(it, r, k)?;
                    work.push(t);
                }
                "x-corral-ptr" => {
                    let ptr = v.as_str().unwrap_or("");
                    match self.doc_item(ptr) {
                        Some(t) => work.push(t),
                        None => return self.invalid(&p, "internal pointer does not resolve"),
                    }
                }
                "allOf" => {
                    let Value::Array(a) = v else { return self.invalid(&p, "allOf must be an array") };
                    for i in 0..a.len() {
                        work.push(self.child(it, &[k, &i.to_string()]).unwrap());
                    }
                }
                "anyOf" | "oneOf" => {
                    let Value::Array(a) = v else { return self.invalid(&p, format!("{k} must be an array")) };
                    let id = format!("{}/{k}", it.key);
                    if resolved.contains(&id) {
                        continue;
                    }
                    let branches = (0..a.len()).map(|i| self.child(it, &[k, &i.to_string()]).unwrap()).collect();
                    f.groups.push(Group { id, branches, one_of: k == "oneOf", ptr: p.clone() });
                }
                "not" => {
                    let id = format!("{}/not", it.key);
                    if !resolved.contains(&id) {
                        f.nots.push((id, self.child(it, &["not"]).unwrap()));
                    }
                }
                // `if`/`then`/`else` arrived in draft 7; earlier drafts' validators ignore them.
                "if" if self.draft < Draft::Draft7 => {}
                "if" => {
                    let id = format!("{}/if", it.key);
                    if self.skip_uneval > 0 && !(m.contains_key("then") || m.contains_key("else")) {
                        // `if` alone still produces annotations when it passes
                        f.groups.push(Group { id, branches: vec![], one_of: false, ptr: p.clone() });
                        continue;
                    }
                    if resolved.contains(&id) || !(m.contains_key("then") || m.contains_key("else")) {
                        continue;
                    }
                    let i = self.child(it, &["if"]).unwrap();
                    let iv = self.ref_value(&i);
                    let tv = self.child(it, &["then"]).map(|t| self.ref_value(&t)).unwrap_or(json!(true));
                    let ev = self.child(it, &["else"]).map(|t| self.ref_value(&t)).unwrap_or(json!(true));
                    let b1 = self.own(json!({"allOf": [iv.clone(), tv]}), &format!("{p}/then"), &it.base);
                    let b2 = self.own(json!({"allOf": [{"not": iv}, ev]}), &format!("{p}/else"), &it.base);
                    f.groups.push(Group { id, branches: vec![b1, b2], one_of: false, ptr: p.clone() });
                }
                "dependentSchemas" | "dependentRequired" | "dependencies" => {
                    let Value::Object(deps) = v else { return self.invalid(&p, format!("{k} must be an object")) };
                    for (name, d) in deps {
                        let id = format!("{}/{k}/{}", it.key, esc_ptr(name));
                        if resolved.contains(&id) {
                            continue;
                        }
                        let absent = self.own(json!({"properties": {name.clone(): false}}), &format!("{p}/{k}"), &it.base);
                        let present = match d {
                            Value::Array(names) => {
                                let mut req = vec![Value::String(name.clone())];
                                req.extend(names.iter().cloned());
                                self.own(json!({ "required": req }), &format!("{p}/{k}"), &it.base)
                            }
                            _ => {
                                let s = self.child(it, &[k, name]).unwrap();
                                let sv = self.ref_value(&s);
                                self.own(json!({"required": [name], "allOf": [sv]}), &format!("{p}/{k}"), &it.base)
                            }
                        };
                        f.groups.push(Group { id, branches: vec![absent, present], one_of: false, ptr: p.clone() });
                    }
                }
                "type" => {
                    let mut mask = 0u8;
                    let names: Vec<&Value> = match v {
                        Value::Array(a) => a.iter().collect(),
                        x => vec![x],
                    };
                    for n in names {
                        match n.as_str().and_then(type_mask) {
                            Some(t) => mask |= t,
                            None if n.as_str() == Some("any") => mask |= T_ALL,
                            None => return self.invalid(&format!("{p}/type"), format!("unknown type {n}")),
                        }
                    }
                    if m.get("nullable") == Some(&Value::Bool(true)) {
                        mask |= T_NULL;
                    }
                    f.types &= mask;
                }
                "x-corral-types" => f.types &= v.as_u64().unwrap_or(127) as u8,
                "enum" | "const" => {
                    let vals: Vec<Value> = if k == "const" {
                        vec![v.clone()]
                    } else {
                        match v {
                            Value::Array(a) => a.clone(),
                            _ => return self.invalid(&p, "enum must be an array"),
                        }
                    };
                    let vals: Vec<Value> = if m.get("nullable") == Some(&Value::Bool(true)) && k == "enum" {
                        let mut v2 = vals;
                        v2.push(Value::Null);
                        v2
                    } else {
                        vals
                    };
                    f.enums = Some(match f.enums.take() {
                        None => vals,
                        Some(cur) => cur.into_iter().filter(|x| vals.iter().any(|y| json_eq(x, y))).collect(),
                    });
                    f.enum_ptr = format!("{p}/{k}");
                }
                "x-corral-not-enum" => {
                    if let Value::Array(a) = v {
                        f.excluded.extend(a.iter().cloned());
                    }
                }
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                    let excl_flag = |name: &str| m.get(name) == Some(&Value::Bool(true));
                    match v {
                        Value::Number(n) => {
                            let Some(d) = Dec::from_json(n) else { return self.invalid(&p, format!("bad number in {k}")) };
                            match k.as_str() {
                                "minimum" => tighten_lo(&mut f.lo, if excl_flag("exclusiveMinimum") { Bound::Excl(d) } else { Bound::Incl(d) }),
                                "maximum" => tighten_hi(&mut f.hi, if excl_flag("exclusiveMaximum") { Bound::Excl(d) } else { Bound::Incl(d) }),
                                "exclusiveMinimum" => tighten_lo(&mut f.lo, Bound::Excl(d)),
                                _ => tighten_hi(&mut f.hi, Bound::Excl(d)),
                            }
                        }
                        Value::Bool(_) => {}
                        _ => return self.invalid(&p, format!("{k} must be a number")),
                    }
                }
                "multipleOf" => match v.as_number().and_then(Dec::from_json) {
                    Some(d) if !d.neg && !d.is_zero() => f.mult.push((d, p.clone())),
                    _ => return self.invalid(&p, "multipleOf must be a positive number"),
                },
                "x-corral-not-multipleOf" => {
                    if let Some(d) = v.as_number().and_then(Dec::from_json) {
                        f.not_mult.push(d);
                    }
                }
                "minLength" => {
                    f.min_len = f.min_len.max(as_u64(v).unwrap_or(0));
                    f.len_ptr = p.clone();
                }
                "maxLength" => {
                    let n = as_u64(v).unwrap_or(u64::MAX);
                    f.max_len = Some(f.max_len.map_or(n, |x| x.min(n)));
                    f.len_ptr = p.clone();
                }
                "pattern" => {
                    let Some(s) = v.as_str() else { return self.invalid(&p, "pattern must be a string") };
                    f.str_pos.push((StrCons::Pattern(s.to_string()), p.clone()));
                }
                "format" => {
                    if let Some(s) = v.as_str().filter(|_| self.opts.assert_format) {
                        f.str_pos.push((StrCons::Format(s.to_string()), p.clone()));
                    }
                }
                "x-corral-not-pattern" => f.str_neg.push(StrCons::Pattern(v.as_str().unwrap_or("").into())),
                "x-corral-not-format" => f.str_neg.push(StrCons::Format(v.as_str().unwrap_or("").into())),
                "items" => {
                    has_arr = true;
                    match v {
                        Value::Array(a) if self.draft <= Draft::Draft2019 || !m.contains_key("prefixItems") => {
                            arr.prefix = (0..a.len()).map(|i| self.child(it, &["items", &i.to_string()]).unwrap()).collect();
                            arr.rest = self.child(it, &["additionalItems"]);
                        }
                        _ => arr.rest = self.child(it, &["items"]),
                    }
                }
                "prefixItems" => {
                    has_arr = true;
                    let Value::Array(a) = v else { return self.invalid(&p, "prefixItems must be an array") };
                    arr.prefix = (0..a.len()).map(|i| self.child(it, &["prefixItems", &i.to_string()]).unwrap()).collect();
                }
                "additionalItems" => {}
                "contains" => {
                    let min = m.get("minContains").and_then(as_u64).unwrap_or(1);
                    let max = m.get("maxContains").and_then(as_u64);
                    let min = if self.draft >= Draft::Draft2019 { min } else { 1 };
                    let max = if self.draft >= Draft::Draft2019 { max } else { None };
                    f.contains.push((self.child(it, &["contains"]).unwrap(), min, max, p.clone()));
                }
                "minContains" | "maxContains" => {}
                "minItems" => f.min_items = f.min_items.max(as_u64(v).unwrap_or(0)),
                "maxItems" => {
                    let n = as_u64(v).unwrap_or(u64::MAX);
                    f.max_items = Some(f.max_items.map_or(n, |x| x.min(n)));
                }
                "uniqueItems" => {
                    if v == &Value::Bool(true) {
                        f.unique = Some(p.clone());
                    }
                }
                "properties" => {
                    has_obj = true;
                    let Value::Object(props) = v else { return self.invalid(&p, "properties must be an object") };
                    for name in props.keys() {
                        obj.props.push((name.clone(), self.child(it, &["properties", name]).unwrap()));
                    }
                }
                "patternProperties" => {
                    has_obj = true;
                    let Value::Object(props) = v else { return self.invalid(&p, "patternProperties must be an object") };
                    for name in props.keys() {
                        obj.patterns.push((name.clone(), self.child(it, &["patternProperties", name]).unwrap()));
                    }
                }
                "additionalProperties" => {
                    has_obj = true;
                    obj.additional = self.child(it, &["additionalProperties"]);
                }
                "required" => {
                    if let Value::Array(a) = v {
                        for n in a {
                            if let Some(s) = n.as_str() {
                                f.required.insert(s.to_string());
                            }
                        }
                    } else if v == &Value::Bool(true) {
                        // draft 3 style: ignore
                    }
                }
                "minProperties" => f.min_props = f.min_props.max(as_u64(v).unwrap_or(0)),
                "maxProperties" => {
                    let n = as_u64(v).unwrap_or(u64::MAX);
                    f.max_props = Some(f.max_props.map_or(n, |x| x.min(n)));
                }
                "propertyNames" => f.prop_names.push(self.child(it, &["propertyNames"]).unwrap()),
                "unevaluatedProperties" | "unevaluatedItems" => {
                    if self.skip_uneval > 0 {
                        if self.uneval_root.as_deref() != Some(it.key.as_str()) {
                            // a nested unevaluated* evaluates everything left at its level
                            if k == "unevaluatedProperties" {
                                f.obj_parts.push(ObjPart { ptr: p.clone(), additional: Some(self.own(json!(true), &p, &it.base)), ..Default::default() });
                            } else {
                                f.arr_parts.push(ArrPart { prefix: vec![], rest: Some(self.own(json!(true), &p, &it.base)) });
                            }
                        }
                        continue;
                    }
                    if v == &Value::Bool(true) {
                        continue;
                    }
                    // annotations come from this schema's own sub-tree: supported when it has
                    // no in-place applicator whose annotations depend on which branch passes
                    self.skip_uneval += 1;
                    let saved = self.uneval_root.replace(it.key.clone());
                    let g = self.flatten(std::slice::from_ref(it), &BTreeSet::new());
                    self.uneval_root = saved;
                    self.skip_uneval -= 1;
                    let g = g?;
                    if !g.groups.is_empty() || !g.nots.is_empty() || (k == "unevaluatedItems" && !g.contains.is_empty()) {
                        self.unsupported(&p, k, "annotations of anyOf/oneOf/not/if/dependentSchemas/contains branches are not tracked")?;
                        continue;
                    }
                    let t = self.own(json!(true), &p, &it.base);
                    let child = self.child(it, &[k]).unwrap();
                    if k == "unevaluatedProperties" {
                        if g.obj_parts.iter().any(|part| part.additional.is_some()) {
                            continue;
                        }
                        let mut part = ObjPart { ptr: p.clone(), ..Default::default() };
                        for op in &g.obj_parts {
                            for (n, _) in &op.props {
                                part.props.push((n.clone(), t.clone()));
                            }
                            for (pat, _) in &op.patterns {
                                part.patterns.push((pat.clone(), t.clone()));
                            }
                        }
                        part.additional = Some(child);
                        f.obj_parts.push(part);
                    } else {
                        if g.arr_parts.iter().any(|ap| ap.rest.is_some()) {
                            continue;
                        }
                        let kmax = g.arr_parts.iter().map(|ap| ap.prefix.len()).max().unwrap_or(0);
                        f.arr_parts.push(ArrPart { prefix: vec![t.clone(); kmax], rest: Some(child) });
                    }
                }
                _ => {}
            }
        }
        if has_arr {
            f.arr_parts.push(arr);
        }
        if has_obj {
            f.obj_parts.push(obj);
        }
        Ok(())
    }

    // ------------------------------------------------------------------ conjunctions

    fn conj(&mut self, items: Vec<Item<'a>>, resolved: &BTreeSet<String>, depth: u32) -> Res<Expr> {
        corral_core::budget::check()?;
        if matches!(self.opts.whitespace, Whitespace::Fixed { indent: Some(_), .. }) && depth > MAX_INDENT_DEPTH {
            return Ok(nothing());
        }
        let depth = if matches!(self.opts.whitespace, Whitespace::Fixed { indent: Some(_), .. }) { depth } else { 0 };
        let mut keys: Vec<&str> = items.iter().filter(|i| i.val() != &Value::Bool(true)).map(|i| i.key.as_str()).collect();
        keys.sort_unstable();
        keys.dedup();
        let key = format!("{}|{}@{depth}", keys.join("&"), resolved.iter().cloned().collect::<Vec<_>>().join("&"));
        if let Some(n) = self.memo.get(&key) {
            return Ok(rf(n));
        }
        let name = self.new_name("s");
        self.memo.insert(key, name.clone());
        self.leaves += 1;
        if self.rules.len() > MAX_RULES {
            return Err(SchemaError::Grammar(corral_core::Error::Limit {
                name: "max_productions",
                limit: MAX_RULES,
                what: "the schema expands to too many grammar rules".into(),
                hint: corral_core::limits::LIMIT_HINT,
            }));
        }
        if self.leaves > MAX_LEAVES {
            return Err(SchemaError::Grammar(corral_core::Error::Limit {
                name: "max_productions",
                limit: MAX_LEAVES,
                what: "the schema expands to too many sub-schema combinations (anyOf/oneOf/not)".into(),
                hint: corral_core::limits::LIMIT_HINT,
            }));
        }
        let f = self.flatten(&items, resolved)?;
        let body = if f.never {
            nothing()
        } else if let Some(g) = f.groups.first().cloned() {
            let branches = if g.one_of && g.branches.len() > 1 { self.one_of_branches(&g, &items)? } else { g.branches.clone() };
            let mut res = resolved.clone();
            res.insert(g.id.clone());
            let mut alts = Vec::new();
            for b in &branches {
                let mut its = items.clone();
                its.push(b.clone());
                alts.push(self.conj(its, &res, depth)?);
            }
            alt(alts)
        } else if let Some((id, n)) = f.nots.first().cloned() {
            let branches = self.negate(&n)?;
            let mut res = resolved.clone();
            res.insert(id);
            let mut alts = Vec::new();
            for b in branches {
                let mut its = items.clone();
                its.push(b);
                alts.push(self.conj(its, &res, depth)?);
            }
            alt(alts)
        } else {
            self.leaf(f, &items, depth)?
        };
        self.add_rule(name.clone(), body);
        Ok(rf(&name))
    }

    /// `oneOf` as a union: branch i conjoined with the negation of every branch that may overlap
    /// it. Overlap is judged within `context` (the schemas the value must satisfy anyway, e.g. a
    /// sibling `required` with a discriminating property): branches that no value of the
    /// context satisfies together are exclusive there.
    fn one_of_branches(&mut self, g: &Group<'a>, context: &[Item<'a>]) -> Res<Vec<Item<'a>>> {
        let n = g.branches.len();
        let mut flats = Vec::new();
        let mut conjs = Vec::new();
        for b in &g.branches {
            let mut its = vec![b.clone()];
            its.extend(context.iter().cloned());
            flats.push(self.flatten(&its, &BTreeSet::new())?);
            conjs.push(its);
        }
        let mut overlap = vec![vec![false; n]; n];
        let mut any = false;
        for i in 0..n {
            for j in i + 1..n {
                if !self.disjoint(&flats[i], &flats[j], &conjs[i], &conjs[j], 2)? {
                    overlap[i][j] = true;
                    overlap[j][i] = true;
                    any = true;
                }
            }
        }
        if !any {
            return Ok(g.branches.clone());
        }
        let mut out = Vec::new();
        for i in 0..n {
            let others: Vec<usize> = (0..n).filter(|&j| overlap[i][j]).collect();
            if others.is_empty() {
                out.push(g.branches[i].clone());
                continue;
            }
            let mut all = vec![self.ref_value(&g.branches[i])];
            for j in others {
                all.push(json!({"not": self.ref_value(&g.branches[j])}));
            }
            out.push(self.own(json!({ "allOf": all }), &format!("{}/oneOf/{i}", g.ptr), &g.branches[i].base));
        }
        Ok(out)
    }

    /// True when no value satisfies both (conservative: false when unsure).
    fn disjoint(&mut self, a: &Flat<'a>, b: &Flat<'a>, ia: &[Item<'a>], ib: &[Item<'a>], depth: u32) -> Res<bool> {
        if a.never || b.never {
            return Ok(true);
        }
        let common = self.eff_types(a, 3)? & self.eff_types(b, 3)?;
        if common == 0 {
            return Ok(true);
        }
        // enum/const
        for (x, other) in [(a, ib), (b, ia)] {
            if let Some(vals) = &x.enums {
                let mut all_out = true;
                for v in vals {
                    if value_type(v, self.draft) & common != 0 && self.valid_all(v, other)? {
                        all_out = false;
                        break;
                    }
                }
                if all_out {
                    return Ok(true);
                }
            }
        }
        if !a.groups.is_empty() || !b.groups.is_empty() {
            // only object-level discrimination below is safe with groups present
        }
        let mut remaining = common;
        // objects: a required property the other forbids or constrains disjointly
        if common & T_OBJ != 0 && depth > 0 && self.objects_disjoint(a, b, depth)? {
            remaining &= !T_OBJ;
        }
        // numbers: disjoint intervals
        if remaining & T_NUMS != 0 {
            let below = |hi: &Bound, lo: &Bound| match (hi, lo) {
                (Bound::Incl(h), Bound::Incl(l)) => h < l,
                (Bound::Incl(h) | Bound::Excl(h), Bound::Excl(l)) | (Bound::Excl(h), Bound::Incl(l)) => h <= l,
                _ => false,
            };
            if below(&a.hi, &b.lo) || below(&b.hi, &a.lo) {
                remaining &= !T_NUMS;
            }
        }
        // strings: regular intersection
        if remaining & T_STR != 0 && (!a.str_pos.is_empty() || !b.str_pos.is_empty()) && a.groups.is_empty() && b.groups.is_empty() {
            if let (Ok(Some(da)), Ok(Some(db))) = (self.str_dfa_of(a), self.str_dfa_of(b)) {
                if let Ok(p) = da.product(&db, true, DFA_LIMIT) {
                    if p.is_empty() {
                        remaining &= !T_STR;
                    }
                }
            }
        }
        Ok(remaining == 0)
    }

    /// The types `f` admits, narrowed by its anyOf/oneOf groups (a group admits the union of
    /// its branches' types), looking `depth` groups deep.
    fn eff_types(&mut self, f: &Flat<'a>, depth: u32) -> Res<u8> {
        let mut t = f.types;
        if f.never {
            return Ok(0);
        }
        if depth == 0 {
            return Ok(t);
        }
        for g in &f.groups {
            let mut u = 0;
            for b in &g.branches {
                let memo_key = (b.key.clone(), depth - 1);
                u |= match self.types_memo.get(&memo_key) {
                    Some(&t) => t,
                    None => {
                        let fb = self.flatten(std::slice::from_ref(b), &BTreeSet::new())?;
                        let t = self.eff_types(&fb, depth - 1)?;
                        self.types_memo.insert(memo_key, t);
                        t
                    }
                };
            }
            t &= u;
        }
        Ok(t)
    }

    fn objects_disjoint(&mut self, a: &Flat<'a>, b: &Flat<'a>, depth: u32) -> Res<bool> {
        for (x, y) in [(a, b), (b, a)] {
            for k in &x.required {
                // y forbids k?
                let vy = self.prop_schemas(y, k)?;
                match vy {
                    None => return Ok(true),
                    Some(ys) => {
                        {
                            let vx = self.prop_schemas(x, k)?.unwrap_or_default();
                            if vx.is_empty() || ys.is_empty() {
                                continue;
                            }
                            let fx = self.flatten(&vx, &BTreeSet::new())?;
                            let fy = self.flatten(&ys, &BTreeSet::new())?;
                            if self.disjoint(&fx, &fy, &vx, &ys, depth - 1)? {
                                return Ok(true);
                            }
                        }
                    }
                }
            }
        }
        Ok(false)
    }

    /// The schemas a property named `k` must satisfy in `f`, or None if it is forbidden.
    fn prop_schemas(&mut self, f: &Flat<'a>, k: &str) -> Res<Option<Vec<Item<'a>>>> {
        let mut out = Vec::new();
        for part in &f.obj_parts {
            let mut matched = false;
            if let Some((_, s)) = part.props.iter().find(|(n, _)| n == k) {
                matched = true;
                out.push(s.clone());
            }
            for (pat, s) in &part.patterns {
                match self.pattern_matches(pat, k) {
                    Ok(true) => {
                        matched = true;
                        out.push(s.clone());
                    }
                    Ok(false) => {}
                    Err(e) => {
                        // Non-strict: the key may match; its pattern's schema is not applied (looser).
                        self.unsupported(&part.ptr, "patternProperties", e)?;
                        matched = true;
                    }
                }
            }
            if !matched {
                if let Some(a) = &part.additional {
                    out.push(a.clone());
                }
            }
        }
        if out.iter().any(|s| s.val() == &Value::Bool(false)) {
            return Ok(None);
        }
        Ok(Some(out))
    }

    // ------------------------------------------------------------------ negation

    fn negate(&mut self, n: &Item<'a>) -> Res<Vec<Item<'a>>> {
        let f = self.flatten(std::slice::from_ref(n), &BTreeSet::new())?;
        let p = n.ptr.clone();
        let base = n.base.clone();
        let mut out: Vec<Value> = Vec::new();
        // non-strict: a keyword whose violations cannot be expressed contributes every value of
        // its type to the negation (looser)
        let loose_branches: std::cell::RefCell<Vec<Value>> = Default::default();
        let unsup = |s: &mut Self, kw: &str| -> Res<()> {
            s.unsupported(&p, "not", format!("the negation of '{kw}' cannot be expressed"))?;
            let t = match kw {
                "items" | "contains" | "uniqueItems" => T_ARR,
                "patternProperties" | "additionalProperties" | "propertyNames" => T_OBJ,
                "format" => T_STR,
                _ => T_ALL,
            };
            loose_branches.borrow_mut().push(json!({ "x-corral-types": t }));
            Ok(())
        };
        if f.never {
            return Ok(vec![self.own(json!(true), &p, &base)]);
        }
        for g in &f.groups {
            if g.one_of && g.branches.len() > 1 {
                unsup(self, "oneOf")?;
                return Ok(vec![self.own(json!(true), &p, &base)]);
            }
            let nots: Vec<Value> = g.branches.iter().map(|b| json!({"not": self.ref_value(b)})).collect();
            out.push(json!({ "allOf": nots }));
        }
        for (_, m) in &f.nots {
            out.push(self.ref_value(m));
        }
        if f.types != T_ALL {
            out.push(json!({"x-corral-types": T_ALL & !f.types}));
        }
        if let Some(vals) = &f.enums {
            out.push(json!({ "x-corral-not-enum": vals }));
        }
        if !f.excluded.is_empty() {
            out.push(json!({ "enum": f.excluded }));
        }
        let num = |b: &Dec| serde_json::from_str::<Value>(&b.to_string()).unwrap();
        match &f.lo {
            Bound::Incl(d) => out.push(json!({"x-corral-types": T_NUMS, "exclusiveMaximum": num(d)})),
            Bound::Excl(d) => out.push(json!({"x-corral-types": T_NUMS, "maximum": num(d)})),
            Bound::None => {}
        }
        match &f.hi {
            Bound::Incl(d) => out.push(json!({"x-corral-types": T_NUMS, "exclusiveMinimum": num(d)})),
            Bound::Excl(d) => out.push(json!({"x-corral-types": T_NUMS, "minimum": num(d)})),
            Bound::None => {}
        }
        for (d, _) in &f.mult {
            out.push(json!({"x-corral-types": T_NUMS, "x-corral-not-multipleOf": num(d)}));
        }
        for d in &f.not_mult {
            out.push(json!({"x-corral-types": T_NUMS, "multipleOf": num(d)}));
        }
        if f.min_len > 0 {
            out.push(json!({"x-corral-types": T_STR, "maxLength": f.min_len - 1}));
        }
        if let Some(m) = f.max_len {
            out.push(json!({"x-corral-types": T_STR, "minLength": m.saturating_add(1)}));
        }
        for (c, _) in &f.str_pos {
            match c {
                StrCons::Pattern(s) => out.push(json!({"x-corral-types": T_STR, "x-corral-not-pattern": s})),
                StrCons::Format(s) => match format_lang(s) {
                    FormatLang::Exact(_) | FormatLang::WithLeap(..) => out.push(json!({"x-corral-types": T_STR, "x-corral-not-format": s})),
                    FormatLang::Unknown => {}
                    FormatLang::Loose(..) => unsup(self, "format")?,
                },
            }
        }
        for c in &f.str_neg {
            match c {
                StrCons::Pattern(s) => out.push(json!({"x-corral-types": T_STR, "pattern": s})),
                StrCons::Format(s) => out.push(json!({"x-corral-types": T_STR, "format": s})),
            }
        }
        if f.min_items > 0 {
            out.push(json!({"x-corral-types": T_ARR, "maxItems": f.min_items - 1}));
        }
        if let Some(m) = f.max_items {
            out.push(json!({"x-corral-types": T_ARR, "minItems": m.saturating_add(1)}));
        }
        for part in &f.arr_parts {
            if !part.prefix.is_empty() {
                unsup(self, "items")?;
                continue;
            }
            if let Some(r) = &part.rest {
                out.push(json!({"x-corral-types": T_ARR, "contains": {"not": self.ref_value(r)}}));
            }
        }
        for (c, min, max, _) in &f.contains {
            if *min != 1 || max.is_some() {
                unsup(self, "contains")?;
                continue;
            }
            out.push(json!({"x-corral-types": T_ARR, "items": {"not": self.ref_value(c)}}));
        }
        if f.unique.is_some() {
            unsup(self, "uniqueItems")?;
        }
        for r in &f.required {
            out.push(json!({"x-corral-types": T_OBJ, "properties": {r.clone(): false}}));
        }
        for part in &f.obj_parts {
            if !part.patterns.is_empty() {
                unsup(self, "patternProperties")?;
            }
            if part.additional.as_ref().is_some_and(|a| a.val() != &Value::Bool(true)) {
                unsup(self, "additionalProperties")?;
            }
            for (k, s) in &part.props {
                out.push(json!({"x-corral-types": T_OBJ, "required": [k], "properties": {k.clone(): {"not": self.ref_value(s)}}}));
            }
        }
        if f.min_props > 0 {
            out.push(json!({"x-corral-types": T_OBJ, "maxProperties": f.min_props - 1}));
        }
        if let Some(m) = f.max_props {
            out.push(json!({"x-corral-types": T_OBJ, "minProperties": m.saturating_add(1)}));
        }
        if !f.prop_names.is_empty() {
            unsup(self, "propertyNames")?;
        }
        out.extend(loose_branches.into_inner());
        Ok(out.into_iter().map(|v| self.own(v, &p, &base)).collect())
    }

    // ------------------------------------------------------------------ leaves

    fn leaf(&mut self, f: Flat<'a>, items: &[Item<'a>], depth: u32) -> Res<Expr> {
        let is_excluded = |v: &Value| f.excluded.iter().any(|x| json_eq(x, v));
        if let Some(vals) = &f.enums {
            let mut alts = Vec::new();
            let mut seen: Vec<Value> = Vec::new();
            for v in vals {
                if seen.iter().any(|s| json_eq(s, v)) || is_excluded(v) || value_type(v, self.draft) & f.types == 0 {
                    continue;
                }
                seen.push(v.clone());
                let mut ok = true;
                for it in items {
                    if !self.valid(v, it)? {
                        ok = false;
                        break;
                    }
                }
                if ok {
                    alts.push(self.value_expr(v, depth)?);
                }
            }
            return Ok(alt(alts));
        }
        // container exclusions we cannot express
        for v in &f.excluded {
            if matches!(v, Value::Array(_) | Value::Object(_)) && value_type(v, self.draft) & f.types != 0 {
                let mut ok = true;
                for it in items {
                    if !self.valid(v, it)? {
                        ok = false;
                        break;
                    }
                }
                if ok {
                    self.unsupported(&f.enum_ptr, "not", "excluding a specific array or object value is not supported")?;
                }
            }
        }
        let mut alts = Vec::new();
        if f.types & T_NULL != 0 && !is_excluded(&Value::Null) {
            alts.push(Expr::Literal(b"null".to_vec()));
        }
        if f.types & T_BOOL != 0 {
            for (b, s) in [(true, "true"), (false, "false")] {
                if !is_excluded(&Value::Bool(b)) {
                    alts.push(Expr::Literal(s.as_bytes().to_vec()));
                }
            }
        }
        if f.types & T_NUMS != 0 {
            alts.push(self.number_expr(&f)?);
        }
        if f.types & T_STR != 0 {
            alts.push(self.string_expr(&f)?);
        }
        // Scalars that are plain regular languages form one shared terminal.
        let (plain, mut alts): (Vec<Expr>, Vec<Expr>) = alts.into_iter().partition(is_plain);
        let plain = alt(plain);
        if !matches!(plain, Expr::Terminal(Rx::Nothing)) {
            alts.insert(0, token(plain));
        }
        if f.types & T_ARR != 0 {
            alts.push(self.array_expr(&f, depth)?);
        }
        if f.types & T_OBJ != 0 {
            alts.push(self.object_expr(&f, depth)?);
        }
        Ok(alt(alts))
    }

    // ------------------------------------------------------------------ literal values

    fn value_expr(&mut self, v: &Value, depth: u32) -> Res<Expr> {
        Ok(match v {
            Value::Null => Expr::Literal(b"null".to_vec()),
            Value::Bool(b) => Expr::Literal(if *b { b"true".to_vec() } else { b"false".to_vec() }),
            Value::Number(n) => Expr::Terminal(numbers::value_rx(&Dec::from_json(n).unwrap())),
            Value::String(s) => Expr::Terminal(self.enc.literal(s)),
            Value::Array(a) => {
                if a.is_empty() {
                    return Ok(self.lay.empty("[", "]"));
                }
                let mut parts = vec![self.lay.open("[", depth)];
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        parts.push(self.lay.sep(depth));
                    }
                    parts.push(self.value_expr(x, depth + 1)?);
                }
                parts.push(self.lay.close("]", depth));
                seq(parts)
            }
            Value::Object(m) => {
                if m.is_empty() {
                    return Ok(self.lay.empty("{", "}"));
                }
                let mut members = Vec::new();
                for (k, x) in m {
                    let key = Expr::Terminal(self.enc.literal(k));
                    let val = self.value_expr(x, depth + 1)?;
                    members.push(seq(vec![key, self.lay.colon(), val]));
                }
                self.any_order_fixed(members, depth)?
            }
        })
    }

    /// All members exactly once, in any order (a key set), or in the schema's order.
    fn any_order_fixed(&mut self, members: Vec<Expr>, depth: u32) -> Res<Expr> {
        let n = members.len();
        if self.opts.property_order == PropertyOrder::SchemaOrder {
            let mut parts = vec![self.lay.open("{", depth)];
            for (i, m) in members.into_iter().enumerate() {
                if i > 0 {
                    parts.push(self.lay.sep(depth));
                }
                parts.push(m);
            }
            parts.push(self.lay.close("}", depth));
            return Ok(seq(parts));
        }
        let members = members.into_iter().map(|m| (String::new(), m, true)).collect();
        Ok(self.key_set(members, None, n as u64, Some(n as u64), depth))
    }

    // ------------------------------------------------------------------ numbers

    fn number_expr(&mut self, f: &Flat<'a>) -> Res<Expr> {
        let ints_only = f.types & T_NUM == 0;
        let nonints_only = f.types & T_INT == 0;
        let excluded: Vec<Dec> = f.excluded.iter().filter_map(|v| v.as_number().and_then(Dec::from_json)).collect();
        let constrained = f.lo != Bound::None || f.hi != Bound::None || !f.mult.is_empty() || !f.not_mult.is_empty() || !excluded.is_empty() || nonints_only;
        let integer = || if self.draft == Draft::Draft4 { numbers::plain_integer() } else { numbers::any_integer() };
        if !constrained {
            return Ok(Expr::Terminal(if ints_only { integer() } else { numbers::any_number() }));
        }
        let too_big = |s: &mut Self, kw: &str, ptr: &str| s.unsupported(ptr, kw, "the number automaton would be too large");
        let base_rx = if ints_only {
            integer()
        } else if nonints_only {
            // non-integers: a non-zero fraction digit, or normalized scientific notation with a negative exponent
            Rx::concat(vec![
                strings::rep(lit("-"), 0, Some(1)),
                Rx::alt(vec![
                    Rx::concat(vec![
                        Rx::alt(vec![lit("0"), Rx::concat(vec![Rx::Bytes(vec![(b'1', b'9')]), star(Rx::Bytes(vec![(b'0', b'9')]))])]),
                        lit("."),
                        star(Rx::Bytes(vec![(b'0', b'9')])),
                        Rx::Bytes(vec![(b'1', b'9')]),
                        star(Rx::Bytes(vec![(b'0', b'9')])),
                    ]),
                    Rx::concat(vec![
                        Rx::Bytes(vec![(b'1', b'9')]),
                        strings::rep(Rx::concat(vec![lit("."), rep(Rx::Bytes(vec![(b'0', b'9')]), 1, None)]), 0, Some(1)),
                        Rx::Bytes(vec![(b'e', b'e'), (b'E', b'E')]),
                        lit("-"),
                        star(lit("0")),
                        Rx::Bytes(vec![(b'1', b'9')]),
                        star(Rx::Bytes(vec![(b'0', b'9')])),
                    ]),
                ]),
            ])
        } else {
            numbers::restricted_number()
        };
        if let (Bound::Incl(a) | Bound::Excl(a), Bound::Incl(b) | Bound::Excl(b)) = (&f.lo, &f.hi) {
            if a > b || (a == b && (matches!(f.lo, Bound::Excl(_)) || matches!(f.hi, Bound::Excl(_)))) {
                return Ok(nothing());
            }
        }
        // The number forms within the bounds, shared across compiles (the same types and
        // bounds recur: `minimum: 0`, `1..100`); an error names the automaton that grew.
        let key = format!("n:{ints_only}:{nonints_only}:{}:{:?}:{:?}", self.draft == Draft::Draft4, f.lo, f.hi);
        let (lo, hi) = (f.lo.clone(), f.hi.clone());
        let bounded = shared_dfa(key, || {
            let d = CDfa::from_rx(&base_rx, DFA_LIMIT).map_err(|_| "number automaton".to_string())?;
            if lo == Bound::None && hi == Bound::None {
                return Ok(d);
            }
            let r = numbers::interval(&lo, &hi).ok_or_else(|| "number bound automaton".to_string())?;
            let id = CDfa::from_rx(&r, DFA_LIMIT).map_err(|_| "number bound automaton".to_string())?;
            d.product(&id, true, DFA_LIMIT).map_err(|_| "number bound automaton".to_string())
        });
        let mut d = match bounded {
            Ok(d) => (*d).clone(),
            Err(what) => return Err(self.limit_err(&what)),
        };
        for (m, ptr) in &f.mult {
            let with_exp = |md: CDfa| -> Result<CDfa, TooBig> {
                match numbers::multiple_of_exp_rx(m) {
                    Some(rx) => md.product(&CDfa::from_rx(&rx, DFA_LIMIT)?, false, DFA_LIMIT),
                    None => Ok(md),
                }
            };
            match numbers::multiple_of_dfa(m, 20_000).and_then(with_exp).and_then(|md| d.product(&md, true, DFA_LIMIT)) {
                Ok(x) => d = x,
                Err(TooBig) => too_big(self, "multipleOf", ptr)?,
            }
        }
        for m in &f.not_mult {
            match numbers::multiple_of_dfa(m, 20_000).and_then(|md| d.minus(&md, DFA_LIMIT)) {
                Ok(x) => d = x,
                Err(TooBig) => too_big(self, "not", "")?,
            }
        }
        for v in &excluded {
            let vd = CDfa::from_rx(&numbers::value_rx(v), DFA_LIMIT).map_err(|_| self.limit_err("number automaton"))?;
            d = d.minus(&vd, DFA_LIMIT).map_err(|_| self.limit_err("number automaton"))?;
        }
        Ok(self.dfa_expr(&d, false))
    }

    fn limit_err(&self, what: &str) -> SchemaError {
        SchemaError::Grammar(corral_core::Error::Limit {
            name: "max_dfa_states",
            limit: DFA_LIMIT,
            what: format!("the {what} grew too large"),
            hint: corral_core::limits::LIMIT_HINT,
        })
    }

    /// An expression for the language of `d`: one terminal (a byte automaton) when it stays
    /// within [`AUTOMATON_TERMINAL_STATES`], else one rule per state (per-character
    /// terminals). `encode`: JSON-string-encode characters.
    fn dfa_expr(&mut self, d: &CDfa, encode: bool) -> Expr {
        if d.len() <= AUTOMATON_TERMINAL_STATES {
            // Built as bytes directly: spelling the automaton as an expression and
            // determinizing that made automata up to ten times larger (see `encode`).
            let a = crate::encode::shared(d, encode);
            if a.len() <= AUTOMATON_TERMINAL_STATES * 4 {
                return Expr::Terminal(Rx::Automaton(a));
            }
        }
        let prefix = self.new_name("q");
        let name = |s: u32| format!("{prefix}_{s}");
        for s in 0..d.len() {
            let mut by: BTreeMap<u32, Vec<(u32, u32)>> = BTreeMap::new();
            for &(a, b, t) in &d.trans[s] {
                by.entry(t).or_default().push((a, b));
            }
            let mut alts = Vec::new();
            if d.accept[s] {
                alts.push(seq(vec![]));
            }
            for (t, r) in by {
                let rx = Rx::Chars(r);
                let rx = if encode { self.enc.encode(&rx) } else { rx };
                alts.push(seq(vec![Expr::Terminal(rx), rf(&name(t))]));
            }
            self.add_rule(name(s as u32), opaque(alt(alts)));
        }
        rf(&name(d.start))
    }

    // ------------------------------------------------------------------ strings

    /// Whether the concrete string `s` matches ECMA pattern `pat` (search semantics).
    fn pattern_matches(&mut self, pat: &str, s: &str) -> Result<bool, String> {
        let r = self.re_cache.entry(pat.to_string()).or_insert_with(|| strings::ecma_matcher(pat).map(Rc::new).map_err(|e| e.0));
        r.as_ref().map(|re| re.is_match(s)).map_err(|e| e.clone())
    }

    fn pattern_dfa(&mut self, pat: &str) -> Result<Arc<CDfa>, String> {
        shared_dfa(format!("p:{pat}"), || ecma_search(pat).map_err(|e| e.0).and_then(|rx| CDfa::from_rx(&rx, DFA_LIMIT).map_err(|_| format!("pattern /{pat}/ is too large"))))
    }

    fn format_dfa(&mut self, name: &str) -> Result<Arc<CDfa>, String> {
        shared_dfa(format!("f:{name}"), || match format_lang(name) {
            FormatLang::Exact(rx) | FormatLang::Loose(rx, _) => CDfa::from_rx(&rx, DFA_LIMIT).map_err(|_| "format too large".to_string()),
            FormatLang::WithLeap(rx, dt) => {
                let l = if dt {
                    let pre = CDfa::from_rx(&Rx::concat(vec![strings::ecma_full(strings::DATE).unwrap(), Rx::Chars(vec![('T' as u32, 'T' as u32), ('t' as u32, 't' as u32)])]), DFA_LIMIT).unwrap();
                    pre.concat(leap_time_dfa())
                } else {
                    leap_time_dfa().clone()
                };
                CDfa::from_rx(&rx, DFA_LIMIT).and_then(|r| r.product(&l, false, DFA_LIMIT)).map_err(|_| "format too large".to_string())
            }
            FormatLang::Unknown => Ok(CDfa::from_rx(&star(any_char()), 10).unwrap()),
        })
    }

    /// The code-point DFA of all string constraints of `f` (None = unconstrained).
    fn str_dfa_of(&mut self, f: &Flat<'a>) -> Result<Option<CDfa>, String> {
        let mut d: Option<CDfa> = None;
        let and = |d: Option<CDfa>, x: &CDfa| -> Result<Option<CDfa>, String> {
            Ok(Some(match d {
                None => x.clone(),
                Some(d) => d.product(x, true, DFA_LIMIT).map_err(|_| "too large".to_string())?,
            }))
        };
        for (c, _) in &f.str_pos {
            let x = match c {
                StrCons::Pattern(p) => self.pattern_dfa(p)?,
                StrCons::Format(n) => self.format_dfa(n)?,
            };
            d = and(d, &x)?;
        }
        for c in &f.str_neg {
            let x = match c {
                StrCons::Pattern(p) => self.pattern_dfa(p)?,
                StrCons::Format(n) => self.format_dfa(n)?,
            };
            let nx = x.complement(None);
            d = and(d, &nx)?;
        }
        Ok(d)
    }

    fn string_expr(&mut self, f: &Flat<'a>) -> Res<Expr> {
        let excluded: Vec<String> = f.excluded.iter().filter_map(|v| v.as_str().map(String::from)).collect();
        let (a, b) = (f.min_len, f.max_len);
        if let Some(b) = b {
            if a > b {
                return Ok(nothing());
            }
        }
        // Classify positive constraints.
        let mut rxs: Vec<(Rx, String, &str)> = Vec::new();
        let mut leap: Option<bool> = None;
        for (c, ptr) in &f.str_pos {
            match c {
                StrCons::Pattern(p) => match ecma_search(p) {
                    Ok(rx) => rxs.push((rx, ptr.clone(), "pattern")),
                    Err(e) => self.unsupported(ptr, "pattern", e.0)?,
                },
                StrCons::Format(name) => match format_lang(name) {
                    FormatLang::Exact(rx) => rxs.push((rx, ptr.clone(), "format")),
                    FormatLang::WithLeap(rx, dt) => {
                        leap = Some(dt);
                        rxs.push((rx, ptr.clone(), "format"));
                    }
                    FormatLang::Loose(rx, why) => {
                        self.unsupported(ptr, "format", why)?;
                        rxs.push((rx, ptr.clone(), "format"));
                    }
                    FormatLang::Unknown => {
                        let pointer = format!("{ptr}/format");
                        self.warn(&pointer, "format", format!("unknown format '{name}' is an annotation (not enforced)"));
                    }
                },
            }
        }
        let simple = f.str_neg.is_empty() && excluded.is_empty();
        // Length bounds that every string of a lone pattern or format meets are dropped, so
        // the fast paths below apply (a `date-time` with `minLength: 1`).
        let (a, b) = if f.str_pos.len() == 1 && rxs.len() == 1 && (a > 0 || b.is_some()) {
            let d = match &f.str_pos[0].0 {
                StrCons::Pattern(p) => self.pattern_dfa(p),
                StrCons::Format(n) => self.format_dfa(n),
            };
            match d.ok().and_then(|d| d.length_range()) {
                Some((lo, hi)) => (if a <= lo { 0 } else { a }, if b.is_some_and(|b| hi.is_some_and(|h| h <= b)) { None } else { b }),
                None => (a, b),
            }
        } else {
            (a, b)
        };
        // One pattern or format alone: its code-point automaton (built once per process) as
        // one byte-automaton terminal. Formats with leap seconds take the rules below.
        if f.str_pos.len() == 1 && rxs.len() == 1 && simple && a == 0 && b.is_none() && leap.is_none() {
            let d = match &f.str_pos[0].0 {
                StrCons::Pattern(p) => self.pattern_dfa(p),
                StrCons::Format(n) => self.format_dfa(n),
            };
            if let Ok(d) = d {
                if d.len() <= AUTOMATON_TERMINAL_STATES {
                    let body = self.dfa_expr(&d, true);
                    return Ok(seq(vec![Expr::Literal(b"\"".to_vec()), body, Expr::Literal(b"\"".to_vec())]));
                }
            }
        }
        // Format with leap seconds alone: regular part plus the leap rules.
        if let Some(dt) = leap {
            if rxs.len() == 1 && simple && a == 0 && b.is_none() {
                let q = self.enc.quoted(&rxs[0].0);
                let regular = self.term(q);
                let l = self.leap_expr(dt);
                return Ok(alt(vec![regular, l]));
            }
        }
        if rxs.is_empty() && simple && leap.is_none() {
            return Ok(self.length_expr(&[(0, 0xD7FF), (0xE000, 0x10FFFF)], a, b, None));
        }
        if rxs.len() == 1 && simple && leap.is_none() {
            if a == 0 && b.is_none() {
                let q = self.enc.quoted(&rxs[0].0);
                return Ok(self.term(q));
            }
            if let Some(e) = self.symbolic_len(&rxs[0].0, a, b) {
                return Ok(e);
            }
        }
        // General: automata.
        let ptr = rxs.first().map(|x| x.1.clone()).unwrap_or_else(|| f.len_ptr.clone());
        let res: Result<CDfa, String> = (|| {
            let mut d = match self.str_dfa_of(f)? {
                Some(d) => d,
                None => CDfa::from_rx(&star(any_char()), 10).unwrap(),
            };
            for s in &excluded {
                let x = CDfa::from_rx(&lit(s), DFA_LIMIT).map_err(|_| "too large".to_string())?;
                d = d.minus(&x, DFA_LIMIT).map_err(|_| "too large".to_string())?;
            }
            Ok(d)
        })();
        let d = match res {
            Ok(d) => d,
            Err(e) => {
                self.unsupported(&ptr, rxs.first().map(|x| x.2).unwrap_or("pattern"), format!("string constraints too large to combine: {e}"))?;
                return Ok(self.length_expr(&[(0, 0xD7FF), (0xE000, 0x10FFFF)], a, b, None));
            }
        };
        // Length bounds every string of the language meets anyway are dropped (a `date-time`
        // with `minLength: 1`); bounds none meets leave nothing.
        let (a, b) = match d.length_range() {
            None => return Ok(nothing()),
            Some((lo, _)) if b.is_some_and(|b| b < lo) => return Ok(nothing()),
            Some((_, Some(hi))) if hi < a => return Ok(nothing()),
            Some((lo, hi)) => (if a <= lo { 0 } else { a }, if b.is_some_and(|b| hi.is_some_and(|h| h <= b)) { None } else { b }),
        };
        if a == 0 && b.is_none() {
            let body = self.dfa_expr(&d, true);
            return Ok(seq(vec![Expr::Literal(b"\"".to_vec()), body, Expr::Literal(b"\"".to_vec())]));
        }
        // try a symbolic length intersection of its regex
        // (state elimination is cubic: past a few hundred states it costs seconds and ends
        // past the cap anyway)
        let rx_opt = if d.len() <= TO_RX_STATES { d.to_rx(RX_CAP) } else { None };
        if let Some(rx) = rx_opt {
            if let Some(e) = self.symbolic_len(&rx, a, b) {
                return Ok(e);
            }
        }
        let len_rx = rep(any_char(), a.min(100_000) as u32, b.map(|b| b.min(100_000) as u32));
        let est = (d.len() as u64).saturating_mul(b.unwrap_or(a).saturating_add(1));
        let prod = if b.is_some_and(|b| b > 5_000) || a > 5_000 || est > 12_000 {
            Err(TooBig)
        } else {
            CDfa::from_rx(&len_rx, 20_000).and_then(|l| d.product(&l, true, 12_000))
        };
        match prod {
            Ok(p) => {
                let body = self.dfa_expr(&p, true);
                Ok(seq(vec![Expr::Literal(b"\"".to_vec()), body, Expr::Literal(b"\"".to_vec())]))
            }
            Err(_) => {
                self.unsupported(&f.len_ptr, if b.is_some() { "maxLength" } else { "minLength" }, "length bounds too large to combine with the pattern/format")?;
                let body = self.dfa_expr(&d, true);
                Ok(seq(vec![Expr::Literal(b"\"".to_vec()), body, Expr::Literal(b"\"".to_vec())]))
            }
        }
    }

    /// Quoted strings of `class` characters with length in `[a, b]`, with optional fixed
    /// parts before/after (already code-point regexes).
    fn length_expr(&mut self, class: &[(u32, u32)], a: u64, b: Option<u64>, around: Option<(Rx, Rx)>) -> Expr {
        let (pre, post) = around.unwrap_or((Rx::Empty, Rx::Empty));
        let unit = Rx::Chars(class.to_vec());
        if b.is_none_or(|b| b <= CHUNK) && a <= CHUNK {
            let body = Rx::concat(vec![pre, rep(unit, a as u32, b.map(|b| b as u32)), post]);
            return Expr::Terminal(self.enc.quoted(&body));
        }
        let open = Expr::Terminal(Rx::concat(vec![lit("\""), self.enc.encode(&pre)]));
        let close_rx = Rx::concat(vec![self.enc.encode(&post), lit("\"")]);
        if b.unwrap_or(a) / CHUNK <= MAX_FLAT_CHUNKS {
            let mid = self.flat_chunks(class, a, b, &close_rx);
            return seq(vec![open, mid]);
        }
        let close = Expr::Terminal(close_rx);
        let mid = self.big_len(class, a, b);
        seq(vec![open, mid, close])
    }

    /// `class` characters (encoded) with a length in `[a, b]`, then `close`, for bounds over
    /// [`CHUNK`]: whole chunks of exactly `CHUNK` characters (one shared terminal, so its
    /// automaton and token-set cache entries serve every such string of the class), then a
    /// tail of fewer characters joined to `close` in one terminal. The split is unambiguous
    /// (a chunk ends only at its exact count), so a fill inside a long string has at most two
    /// lexemes in progress and, away from a chunk's end, the same cache key at every position.
    fn flat_chunks(&mut self, class: &[(u32, u32)], a: u64, b: Option<u64>, close: &Rx) -> Expr {
        let enc = self.enc.class(class);
        let chunk = token(Expr::Terminal(rep(enc.clone(), CHUNK as u32, Some(CHUNK as u32))));
        let chunks = |lo: u64, hi: Option<u64>| -> Expr {
            match (lo, hi) {
                (_, Some(0)) => Expr::Literal(Vec::new()),
                (1, Some(1)) => chunk.clone(),
                _ => Expr::Repeat { inner: Box::new(chunk.clone()), min: lo as u32, max: hi.map(|h| h as u32) },
            }
        };
        let tail = |lo: u64, hi: Option<u64>| Expr::Terminal(Rx::concat(vec![rep(enc.clone(), lo as u32, hi.map(|h| h as u32)), close.clone()]));
        let (qa, ra) = (a / CHUNK, a % CHUNK);
        let Some(b) = b else {
            return seq(vec![chunks(qa, Some(qa)), tail(ra, None)]);
        };
        let (qb, rb) = (b / CHUNK, b % CHUNK);
        if qa == qb {
            return seq(vec![chunks(qa, Some(qa)), tail(ra, Some(rb))]);
        }
        let mut alts = vec![seq(vec![chunks(qa, Some(qa)), tail(ra, Some(CHUNK - 1))])];
        if qa + 1 < qb {
            alts.push(seq(vec![chunks(qa + 1, Some(qb - 1)), tail(0, Some(CHUNK - 1))]));
        }
        alts.push(seq(vec![chunks(qb, Some(qb)), tail(0, Some(rb))]));
        alt(alts)
    }

    /// Strings of `class` characters (encoded) with a length in `[a, b]`, for large bounds:
    /// base-64 digits of the length, one chunk rule per power of 64.
    fn big_len(&mut self, class: &[(u32, u32)], a: u64, b: Option<u64>) -> Expr {
        let enc = self.enc.class(class);
        let ckey = format!("{class:?}");
        let chunk = |s: &mut Self, k: u32| -> Expr {
            // chunk_k: exactly 64^k characters, k >= 1
            let name = format!("chunk{}_{k}", s.named.len());
            let key = format!("{ckey}#{k}");
            if let Some(n) = s.named.get(&key) {
                return rf(n);
            }
            s.named.insert(key, name.clone());
            let body = if k == 1 { Expr::Terminal(rep(enc.clone(), 64, Some(64))) } else { Expr::Repeat { inner: Box::new(rf(&s.named[&format!("{ckey}#{}", k - 1)])), min: 64, max: Some(64) } };
            s.add_rule(name.clone(), opaque(body));
            rf(&name)
        };
        let unit_rep = |k: u32, lo: u64, hi: Option<u64>, s: &mut Self| -> Expr {
            if k == 0 {
                return Expr::Terminal(rep(enc.clone(), lo as u32, hi.map(|h| h as u32)));
            }
            for j in 1..=k {
                chunk(s, j);
            }
            let c = s.named[&format!("{ckey}#{k}")].clone();
            Expr::Repeat { inner: Box::new(rf(&c)), min: lo as u32, max: hi.map(|h| h as u32) }
        };
        let Some(b) = b else {
            // a..∞ = exactly a, then anything
            let fixed = self.big_len(class, a, Some(a));
            return seq(vec![fixed, Expr::Terminal(star(enc.clone()))]);
        };
        // digits in base 64 (most significant first), fixed width
        let width = {
            let mut w = 1;
            let mut x = b;
            while x >= 64 {
                x /= 64;
                w += 1;
            }
            w
        };
        let digits = |mut x: u64| -> Vec<u64> {
            let mut v = vec![0; width];
            for i in (0..width).rev() {
                v[i] = x % 64;
                x /= 64;
            }
            v
        };
        let (lo, hi) = (digits(a), digits(b));
        // same-length range decomposition into alternatives of per-position ranges
        fn decompose(lo: &[u64], hi: &[u64]) -> Vec<Vec<(u64, u64)>> {
            if lo.is_empty() {
                return vec![vec![]];
            }
            let n = lo.len();
            if lo[0] == hi[0] {
                return decompose(&lo[1..], &hi[1..]).into_iter().map(|mut r| {
                    r.insert(0, (lo[0], lo[0]));
                    r
                }).collect();
            }
            let mut out = Vec::new();
            let max = vec![63; n - 1];
            let zero = vec![0; n - 1];
            let lo_min = lo[1..].iter().all(|&x| x == 0);
            let hi_max = hi[1..].iter().all(|&x| x == 63);
            let mut first = lo[0];
            if !lo_min {
                for mut r in decompose(&lo[1..], &max) {
                    r.insert(0, (lo[0], lo[0]));
                    out.push(r);
                }
                first += 1;
            }
            let last = if hi_max { hi[0] as i64 } else { hi[0] as i64 - 1 };
            if first as i64 <= last {
                let mut r = vec![(first, last as u64)];
                r.extend(std::iter::repeat_n((0, 63), n - 1));
                out.push(r);
            }
            if !hi_max {
                for mut r in decompose(&zero, &hi[1..]) {
                    r.insert(0, (hi[0], hi[0]));
                    out.push(r);
                }
            }
            out
        }
        let mut alts = Vec::new();
        for ranges in decompose(&lo, &hi) {
            let mut parts = Vec::new();
            for (i, (x, y)) in ranges.iter().enumerate() {
                let k = (width - 1 - i) as u32;
                if *y == 0 {
                    continue;
                }
                parts.push(unit_rep(k, *x, Some(*y), self));
            }
            alts.push(seq(parts));
        }
        alt(alts)
    }

    /// Length bounds applied to a regex of simple shape (at most one variable-length
    /// single-class repetition per alternative).
    fn symbolic_len(&mut self, rx: &Rx, a: u64, b: Option<u64>) -> Option<Expr> {
        fn fixed_len(rx: &Rx) -> Option<u64> {
            match rx {
                Rx::Empty => Some(0),
                Rx::Nothing => None,
                Rx::Literal(bs) => Some(String::from_utf8_lossy(bs).chars().count() as u64),
                Rx::Chars(_) | Rx::Bytes(_) => Some(1),
                Rx::Automaton(_) => None,
                Rx::Concat(xs) => xs.iter().map(fixed_len).sum(),
                Rx::Alt(xs) => {
                    let l = fixed_len(&xs[0])?;
                    xs.iter().all(|x| fixed_len(x) == Some(l)).then_some(l)
                }
                Rx::Repeat { inner, min, max } => {
                    if Some(*min) == *max {
                        fixed_len(inner).map(|l| l * *min as u64)
                    } else {
                        None
                    }
                }
            }
        }
        let branches: Vec<&Rx> = match rx {
            Rx::Alt(xs) => xs.iter().collect(),
            x => vec![x],
        };
        let mut alts = Vec::new();
        for br in branches {
            let items: Vec<&Rx> = match br {
                Rx::Concat(xs) => xs.iter().collect(),
                x => vec![x],
            };
            let mut var: Option<usize> = None;
            let mut fixed = 0u64;
            for (i, it) in items.iter().enumerate() {
                match fixed_len(it) {
                    Some(l) => fixed += l,
                    None => {
                        if var.is_some() {
                            return None;
                        }
                        match it {
                            Rx::Repeat { inner, .. } if matches!(**inner, Rx::Chars(_)) => var = Some(i),
                            _ => return None,
                        }
                    }
                }
            }
            match var {
                None => {
                    if fixed >= a && b.is_none_or(|b| fixed <= b) {
                        alts.push(Expr::Terminal(self.enc.quoted(br)));
                    }
                }
                Some(i) => {
                    let Rx::Repeat { inner, min, max } = items[i] else { unreachable!() };
                    let Rx::Chars(class) = &**inner else { unreachable!() };
                    let lo = (*min as u64).max(a.saturating_sub(fixed));
                    let hi = match (max, b) {
                        (Some(m), Some(b)) => Some((*m as u64).min(b.saturating_sub(fixed))),
                        (Some(m), None) => Some(*m as u64),
                        (None, Some(b)) => Some(b.saturating_sub(fixed)),
                        (None, None) => None,
                    };
                    if b.is_some_and(|b| b < fixed) || hi.is_some_and(|h| h < lo) {
                        continue;
                    }
                    let pre = Rx::concat(items[..i].iter().map(|x| (*x).clone()).collect());
                    let post = Rx::concat(items[i + 1..].iter().map(|x| (*x).clone()).collect());
                    let class = class.clone();
                    alts.push(self.length_expr(&class, lo, hi, Some((pre, post))));
                }
            }
        }
        Some(alt(alts))
    }

    /// A terminal; large ones become a shared rule so their automaton is built once instead of
    /// once per place it is merged into.
    fn term(&mut self, rx: Rx) -> Expr {
        token(Expr::Terminal(rx))
    }

    fn leap_expr(&mut self, dt: bool) -> Expr {
        let key = format!("leap{dt}");
        if let Some(n) = self.named.get(&key) {
            return rf(n);
        }
        let name = format!("__leap_{}", if dt { "dt" } else { "t" });
        self.named.insert(key, name.clone());
        // The "date T" prefix is one terminal; the time part is one terminal per local hour
        // (with the closing quote), each a byte automaton built once per process, so every
        // later schema finds them in the terminal cache.
        let pre = if dt { Rx::concat(vec![strings::ecma_full(strings::DATE).unwrap(), Rx::Chars(vec![('T' as u32, 'T' as u32), ('t' as u32, 't' as u32)])]) } else { Rx::Empty };
        let pre = Rx::concat(vec![lit("\""), self.enc.encode(&pre)]);
        let hours = leap_time_by_hour().iter().map(|a| Expr::Terminal(leap_hour_terminal(a))).collect();
        let e = seq(vec![Expr::Terminal(pre), alt(hours)]);
        self.add_rule(name.clone(), opaque(e));
        rf(&name)
    }

    // ------------------------------------------------------------------ arrays

    fn pos_items(&self, f: &Flat<'a>, i: usize) -> Vec<Item<'a>> {
        let mut out = Vec::new();
        for p in &f.arr_parts {
            if i < p.prefix.len() {
                out.push(p.prefix[i].clone());
            } else if let Some(r) = &p.rest {
                out.push(r.clone());
            }
        }
        out
    }

    fn array_expr(&mut self, f: &Flat<'a>, depth: u32) -> Res<Expr> {
        let k = f.arr_parts.iter().map(|p| p.prefix.len()).max().unwrap_or(0);
        let mut max = f.max_items;
        for p in &f.arr_parts {
            if p.rest.as_ref().is_some_and(|r| r.val() == &Value::Bool(false)) {
                let l = p.prefix.len() as u64;
                max = Some(max.map_or(l, |m| m.min(l)));
            }
        }
        let min = f.min_items;
        if max.is_some_and(|m| m < min) {
            return Ok(nothing());
        }
        let mut contains: Vec<(Item<'a>, u64, Option<u64>, String)> = f.contains.iter().filter(|c| !(c.1 == 0 && c.2.is_none())).cloned().collect();
        if contains.len() > 1 {
            // several contains with only a minimum of 1 each and no prefix could be combined; not supported
            let ptr = contains[1].3.clone();
            self.unsupported(&ptr, "contains", "several 'contains' constraints on one array are not supported")?;
            contains.truncate(1);
        }
        let mut unique_domain: Option<Vec<Value>> = None;
        if let Some(ptr) = &f.unique {
            if max.is_some_and(|m| m <= 1) {
                // trivially unique
            } else {
                let ptr = ptr.clone();
                unique_domain = self.finite_domain(f, k)?;
                if unique_domain.is_none() || !contains.is_empty() {
                    self.unsupported(&ptr, "uniqueItems", "uniqueness of array items cannot be enforced by a grammar (except for small finite item domains)")?;
                    unique_domain = None;
                }
            }
        }
        if let Some(dom) = unique_domain {
            return self.unique_array(dom, min, max, depth);
        }
        let rest_items = self.pos_items(f, k);
        if k == 0 && contains.is_empty() {
            let item = self.conj(rest_items, &BTreeSet::new(), depth + 1)?;
            return Ok(self.simple_array(item, min, max, depth));
        }
        // state machine over (position, witnesses)
        let (c_item, c_min, c_max) = match contains.first() {
            Some((c, mn, mx, _)) => (Some(c.clone()), *mn, *mx),
            None => (None, 0, None),
        };
        let wcap = c_max.unwrap_or(c_min);
        let l = match max {
            Some(m) => m,
            None => (k as u64).max(min).max(1),
        };
        if l > 2000 {
            self.unsupported("", "maxItems", "array bounds too large with prefixItems/contains")?;
        }
        let l = l.min(2000);
        let unbounded = max.is_none();
        let not_c: Option<Vec<Item<'a>>> = match (&c_item, c_max) {
            (Some(c), Some(_)) => Some(self.negate(c)?),
            _ => None,
        };
        let prefix = self.new_name("a");
        let sname = |i: u64, w: u64| format!("{prefix}_{i}_{w}");
        let mut item_cache: FxHashMap<(usize, u8), Vec<Expr>> = FxHashMap::default();
        // item choices at position i: (expr, adds_witness)
        let mut choices = |s: &mut Self, i: u64| -> Res<Vec<(Expr, bool)>> {
            let pi = (i as usize).min(k);
            let mut out = Vec::new();
            let base = s.pos_items(f, pi);
            match &c_item {
                None => {
                    let e = match item_cache.get(&(pi, 0)) {
                        Some(e) => e[0].clone(),
                        None => {
                            let e = s.conj(base, &BTreeSet::new(), depth + 1)?;
                            item_cache.insert((pi, 0), vec![e.clone()]);
                            e
                        }
                    };
                    out.push((e, false));
                }
                Some(c) => {
                    let mut with = base.clone();
                    with.push(c.clone());
                    let e1 = s.conj(with, &BTreeSet::new(), depth + 1)?;
                    out.push((e1, true));
                    match &not_c {
                        None => out.push((s.conj(base, &BTreeSet::new(), depth + 1)?, false)),
                        Some(nc) => {
                            for b in nc {
                                let mut its = base.clone();
                                its.push(b.clone());
                                out.push((s.conj(its, &BTreeSet::new(), depth + 1)?, false));
                            }
                        }
                    }
                }
            }
            Ok(out)
        };
        let final_ok = |i: u64, w: u64| i >= min && w >= c_min && c_max.is_none_or(|m| w <= m);
        let mut first_alts = Vec::new();
        // states i >= 1
        let mut states: Vec<(u64, u64)> = Vec::new();
        for i in 1..=l {
            for w in 0..=wcap {
                states.push((i, w));
            }
        }
        let step = |i: u64, w: u64, adds: bool| -> Option<(u64, u64)> {
            let ni = if i + 1 > l {
                if unbounded {
                    l
                } else {
                    return None;
                }
            } else {
                i + 1
            };
            let nw = if adds {
                if c_max.is_some() {
                    if w + 1 > wcap {
                        return None;
                    }
                    w + 1
                } else {
                    (w + 1).min(wcap)
                }
            } else {
                w
            };
            Some((ni, nw))
        };
        for &(i, w) in &states {
            let mut alts = Vec::new();
            if final_ok(i, w) {
                alts.push(self.lay.close("]", depth));
            }
            if i < l || unbounded {
                for (e, adds) in choices(self, i)? {
                    if let Some((ni, nw)) = step(i, w, adds) {
                        alts.push(seq(vec![self.lay.sep(depth), e, rf(&sname(ni, nw))]));
                    }
                }
            }
            self.add_rule(sname(i, w), opaque(alt(alts)));
        }
        if l >= 1 {
            for (e, adds) in choices(self, 0)? {
                if let Some((ni, nw)) = step(0, 0, adds) {
                    first_alts.push(seq(vec![e, rf(&sname(ni, nw))]));
                }
            }
        }
        let mut out = Vec::new();
        if final_ok(0, 0) {
            out.push(self.lay.empty("[", "]"));
        }
        out.push(seq(vec![self.lay.open("[", depth), alt(first_alts)]));
        Ok(alt(out))
    }

    fn simple_array(&mut self, item: Expr, min: u64, max: Option<u64>, depth: u32) -> Expr {
        let mut alts = Vec::new();
        if min == 0 {
            alts.push(self.lay.empty("[", "]"));
        }
        if max != Some(0) {
            let more_min = min.saturating_sub(1).min(u32::MAX as u64) as u32;
            let more_max = max.map(|m| (m - 1).min(u32::MAX as u64) as u32);
            let mut tail = seq(vec![self.lay.sep(depth), item.clone()]);
            if more_max.is_none_or(|m| m > 16) || more_min > 16 {
                let name = self.new_name("it");
                self.add_rule(name.clone(), opaque(tail));
                tail = rf(&name);
            }
            let rest = Expr::Repeat { inner: Box::new(tail), min: more_min, max: more_max };
            alts.push(seq(vec![self.lay.open("[", depth), item, rest, self.lay.close("]", depth)]));
        }
        alt(alts)
    }

    /// The finite set of values an item may take (all positions alike), if small.
    fn finite_domain(&mut self, f: &Flat<'a>, k: usize) -> Res<Option<Vec<Value>>> {
        if k > 0 {
            return Ok(None);
        }
        let items = self.pos_items(f, 0);
        let g = self.flatten(&items, &BTreeSet::new())?;
        if !g.groups.is_empty() || !g.nots.is_empty() {
            return Ok(None);
        }
        let cands: Vec<Value> = match &g.enums {
            Some(v) => v.clone(),
            None if g.types & !(T_NULL | T_BOOL) == 0 => vec![Value::Null, Value::Bool(true), Value::Bool(false)],
            None => return Ok(None),
        };
        let mut out: Vec<Value> = Vec::new();
        for v in cands {
            if out.iter().any(|x| json_eq(x, &v)) {
                continue;
            }
            let mut ok = true;
            for it in &items {
                if !self.valid(&v, it)? {
                    ok = false;
                    break;
                }
            }
            if ok {
                out.push(v);
            }
        }
        Ok(if out.len() <= 10 { Some(out) } else { None })
    }

    fn unique_array(&mut self, dom: Vec<Value>, min: u64, max: Option<u64>, depth: u32) -> Res<Expr> {
        let n = dom.len();
        let max = max.unwrap_or(n as u64).min(n as u64);
        if min > max {
            return Ok(nothing());
        }
        let vals: Vec<Expr> = dom.iter().map(|v| self.value_expr(v, depth + 1)).collect::<Res<_>>()?;
        let prefix = self.new_name("u");
        let name = |s: u64| format!("{prefix}_{s:x}");
        for s in 1u64..(1 << n) {
            let c = s.count_ones() as u64;
            if c > max {
                continue;
            }
            let mut alts = Vec::new();
            if c >= min {
                alts.push(self.lay.close("]", depth));
            }
            if c < max {
                for i in 0..n {
                    if s & (1 << i) == 0 {
                        alts.push(seq(vec![self.lay.sep(depth), vals[i].clone(), rf(&name(s | (1 << i)))]));
                    }
                }
            }
            self.add_rule(name(s), opaque(alt(alts)));
        }
        let mut out = Vec::new();
        if min == 0 {
            out.push(self.lay.empty("[", "]"));
        }
        if max > 0 {
            let first: Vec<Expr> = (0..n).map(|i| seq(vec![vals[i].clone(), rf(&name(1 << i))])).collect();
            out.push(seq(vec![self.lay.open("[", depth), alt(first)]));
        }
        Ok(alt(out))
    }

    // ------------------------------------------------------------------ objects

    fn object_expr(&mut self, f: &Flat<'a>, depth: u32) -> Res<Expr> {
        // declared names
        let mut names: Vec<String> = Vec::new();
        for part in &f.obj_parts {
            for (n, _) in &part.props {
                if !names.contains(n) {
                    names.push(n.clone());
                }
            }
        }
        for r in &f.required {
            if !names.contains(r) {
                names.push(r.clone());
            }
        }
        // property names constraint
        let pn_dfa: Option<CDfa> = if f.prop_names.is_empty() {
            None
        } else {
            let g = self.flatten(&f.prop_names, &BTreeSet::new())?;
            if g.never || g.types & T_STR == 0 {
                Some(CDfa::empty())
            } else if !g.groups.is_empty() || !g.nots.is_empty() || g.enums.is_some() || !g.excluded.is_empty() || g.min_len > 0 || g.max_len.is_some() {
                // use the validator on declared names; extras need a regular language
                match self.name_dfa(&g) {
                    Some(d) => Some(d),
                    None => {
                        let ptr = f.prop_names[0].ptr.clone();
                        self.unsupported(&ptr, "propertyNames", "this propertyNames schema cannot be turned into a key language")?;
                        None
                    }
                }
            } else {
                match self.str_dfa_of(&g) {
                    Ok(d) => d,
                    Err(e) => {
                        let ptr = f.prop_names[0].ptr.clone();
                        self.unsupported(&ptr, "propertyNames", e)?;
                        None
                    }
                }
            }
        };
        let name_ok = |s: &mut Self, n: &str| -> Res<bool> {
            if let Some(d) = &pn_dfa {
                if !d.accepts(n) {
                    return Ok(false);
                }
            }
            for it in &f.prop_names {
                if !s.valid(&Value::String(n.to_string()), it)? {
                    return Ok(false);
                }
            }
            Ok(true)
        };
        // declared members
        let mut members: Vec<(String, Expr, bool)> = Vec::new(); // name, member expr, required
        for n in &names {
            let req = f.required.contains(n);
            let allowed = name_ok(self, n)?;
            let schemas = if allowed { self.prop_schemas(f, n)? } else { None };
            match schemas {
                None => {
                    if req {
                        return Ok(nothing());
                    }
                    continue;
                }
                Some(s) => {
                    let v = self.conj(s, &BTreeSet::new(), depth + 1)?;
                    let key = Expr::Terminal(self.enc.literal(n));
                    members.push((n.clone(), seq(vec![key, self.lay.colon(), v]), req));
                }
            }
        }
        // extra members: key classes by matched patterns
        let mut pats: Vec<(String, Item<'a>, usize)> = Vec::new();
        for (pi, part) in f.obj_parts.iter().enumerate() {
            for (p, it) in &part.patterns {
                pats.push((p.clone(), it.clone(), pi));
            }
        }
        let mut extras: Vec<Expr> = Vec::new();
        // Non-strict: past 8 patterns, keys the dropped ones match may have any value (set
        // below with `any_extra`), so the grammar stays looser than the schema.
        let mut dropped_patterns = false;
        if pats.len() > 8 {
            let ptr = f.obj_parts[pats[0].2].ptr.clone();
            self.unsupported(&ptr, "patternProperties", "too many patterns to partition the key space")?;
            pats.truncate(8);
            dropped_patterns = true;
        }
        let declared: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
        // Every key but the declared ones; pattern classes below are cut out of it. Built on
        // first use: objects that forbid other keys never need it.
        let mut others_memo: Option<CDfa> = None;
        let mut others = || others_memo.get_or_insert_with(|| (*keys_except(&declared)).clone()).clone();
        let mut pat_dfas = Vec::new();
        let mut any_extra = dropped_patterns;
        for (p, _, pi) in &pats {
            match self.pattern_dfa(p) {
                Ok(d) => pat_dfas.push(Some(d)),
                Err(e) => {
                    let ptr = f.obj_parts[*pi].ptr.clone();
                    self.unsupported(&ptr, "patternProperties", e)?;
                    // non-strict: keys it might match are allowed with any value
                    any_extra = true;
                    pat_dfas.push(None);
                }
            }
        }
        if any_extra {
            let key_body = self.dfa_expr(&others(), true);
            let key = seq(vec![Expr::Literal(b"\"".to_vec()), key_body, Expr::Literal(b"\"".to_vec())]);
            let v = self.conj(vec![], &BTreeSet::new(), depth + 1)?;
            extras.push(seq(vec![key, self.lay.colon(), v]));
        }
        for mask in 0u32..(1 << pats.len()) {
            // value schemas for keys matching exactly the patterns in mask
            let mut schemas: Vec<Item<'a>> = Vec::new();
            let mut forbidden = false;
            for (pi, part) in f.obj_parts.iter().enumerate() {
                let matched: Vec<&Item<'a>> = pats.iter().enumerate().filter(|(i, p)| p.2 == pi && mask & (1 << i) != 0).map(|(_, p)| &p.1).collect();
                if matched.is_empty() {
                    if let Some(a) = &part.additional {
                        if a.val() == &Value::Bool(false) {
                            forbidden = true;
                        }
                        schemas.push(a.clone());
                    }
                } else {
                    for m in matched {
                        if m.val() == &Value::Bool(false) {
                            forbidden = true;
                        }
                        schemas.push(m.clone());
                    }
                }
            }
            if forbidden {
                continue;
            }
            // key language
            let mut kd = others();
            let mut skip = false;
            for (i, d) in pat_dfas.iter().enumerate() {
                let Some(d) = d else {
                    if mask & (1 << i) != 0 {
                        skip = true;
                    }
                    continue;
                };
                kd = if mask & (1 << i) != 0 { kd.product(d, true, DFA_LIMIT) } else { kd.minus(d, DFA_LIMIT) }.map_err(|_| self.limit_err("property name automaton"))?;
            }
            if skip {
                continue;
            }
            if let Some(pd) = &pn_dfa {
                kd = kd.product(pd, true, DFA_LIMIT).map_err(|_| self.limit_err("property name automaton"))?;
            }
            if kd.is_empty() {
                continue;
            }
            let v = self.conj(schemas, &BTreeSet::new(), depth + 1)?;
            if matches!(v, Expr::Terminal(Rx::Nothing)) {
                continue;
            }
            let key_body = self.dfa_expr(&kd, true);
            let key = seq(vec![Expr::Literal(b"\"".to_vec()), key_body, Expr::Literal(b"\"".to_vec())]);
            extras.push(seq(vec![key, self.lay.colon(), v]));
        }
        let extra = if extras.is_empty() {
            None
        } else {
            let e = alt(extras);
            let name = self.new_name("x");
            self.add_rule(name.clone(), e);
            Some(rf(&name))
        };
        self.object_automaton(members, extra, f, depth)
    }

    fn name_dfa(&mut self, g: &Flat<'a>) -> Option<CDfa> {
        if !g.groups.is_empty() || !g.nots.is_empty() {
            return None;
        }
        let mut d = match self.str_dfa_of(g) {
            Ok(Some(d)) => d,
            Ok(None) => CDfa::from_rx(&star(any_char()), 10).unwrap(),
            Err(_) => return None,
        };
        if let Some(vals) = &g.enums {
            let strs: Vec<Rx> = vals.iter().filter_map(|v| v.as_str()).map(lit).collect();
            let e = CDfa::from_rx(&Rx::alt(strs), DFA_LIMIT).ok()?;
            d = d.product(&e, true, DFA_LIMIT).ok()?;
        }
        for v in &g.excluded {
            if let Some(s) = v.as_str() {
                let e = CDfa::from_rx(&lit(s), DFA_LIMIT).ok()?;
                d = d.minus(&e, DFA_LIMIT).ok()?;
            }
        }
        if g.min_len > 0 || g.max_len.is_some() {
            if g.max_len.is_some_and(|m| m > 2000) || g.min_len > 2000 {
                return None;
            }
            let l = CDfa::from_rx(&rep(any_char(), g.min_len as u32, g.max_len.map(|m| m as u32)), DFA_LIMIT).ok()?;
            d = d.product(&l, true, DFA_LIMIT).ok()?;
        }
        Some(d)
    }

    fn object_automaton(&mut self, members: Vec<(String, Expr, bool)>, extra: Option<Expr>, f: &Flat<'a>, depth: u32) -> Res<Expr> {
        let n = members.len();
        let min_p = f.min_props;
        let max_p = f.max_props;
        let obj_ptr = f.obj_parts.first().map(|p| p.ptr.clone()).unwrap_or_default();
        let nreq = members.iter().filter(|m| m.2).count();
        if (nreq as u64) > max_p.unwrap_or(u64::MAX) {
            return Ok(nothing());
        }
        if extra.is_none() && (n as u64) < min_p {
            return Ok(nothing());
        }
        let any_order = self.opts.property_order == PropertyOrder::AnyOrder;
        // simple map: no declared members
        if n == 0 {
            let Some(x) = extra else {
                return Ok(if min_p == 0 { self.lay.empty("{", "}") } else { nothing() });
            };
            return Ok(self.simple_object(x, min_p, max_p, depth));
        }
        if any_order {
            return Ok(self.key_set(members, extra, min_p, max_p, depth));
        }
        // counter for extras, when counts matter
        let count_cap: u64 = if extra.is_some() && (min_p > 0 || max_p.is_some()) { max_p.unwrap_or(min_p).min(64) } else { 0 };
        if extra.is_some() && max_p.is_some_and(|m| m > 64) {
            self.unsupported(&obj_ptr, "maxProperties", "maxProperties above 64 with additional properties")?;
        }
        // Schema order: a member may follow only later members, and a required member cannot
        // be skipped; so every required member before `pos` was written.
        let prefix = self.new_name("o");
        #[derive(Clone, Copy, PartialEq, Eq, Hash)]
        struct St {
            pos: usize,
            written: u64,
            extra: u64,
        }
        let counts_matter = min_p > 0 || max_p.is_some();
        let count = |s: &St| -> u64 { s.written + s.extra };
        let final_ok = |s: &St| -> bool {
            let c = count(s);
            (s.pos..n).all(|i| !members[i].2) && c >= min_p && max_p.is_none_or(|m| c <= m)
        };
        // transitions
        let trans = |s: &St| -> Vec<(Option<usize>, St)> {
            let mut out = Vec::new();
            if max_p.is_some_and(|m| count(s) >= m) {
                return out;
            }
            for j in s.pos..n {
                let written = if counts_matter { s.written + 1 } else { 0 };
                out.push((Some(j), St { pos: j + 1, written, extra: s.extra }));
                if members[j].2 {
                    break; // cannot skip a required member
                }
            }
            if extra.is_some() {
                let e = if count_cap == 0 { 0 } else { (s.extra + 1).min(count_cap) };
                out.push((None, St { extra: e, ..*s }));
            }
            out
        };
        // explore
        let start = St { pos: 0, written: 0, extra: 0 };
        let mut ids: FxHashMap<St, usize> = FxHashMap::default();
        let mut order = vec![start];
        ids.insert(start, 0);
        let mut i = 0;
        let state_limit = 4096 * (n + 1);
        while i < order.len() {
            let s = order[i];
            for (_, t) in trans(&s) {
                if !ids.contains_key(&t) {
                    ids.insert(t, order.len());
                    order.push(t);
                    if order.len() > state_limit * (count_cap as usize + 1) {
                        return Err(self.limit_err("object property automaton"));
                    }
                }
            }
            i += 1;
        }
        if self.rules.len() + order.len() > MAX_RULES {
            return Err(self.limit_err("object property automaton"));
        }
        let sname = |i: usize| format!("{prefix}_{i}");
        let member_expr = |j: Option<usize>| -> Expr {
            match j {
                Some(j) => members[j].1.clone(),
                None => extra.clone().unwrap(),
            }
        };
        let big = order.len() > 3;
        let referenced_start = order.iter().any(|s| trans(s).iter().any(|(_, t)| *t == start));
        for (si, s) in order.iter().enumerate() {
            if si == 0 && !referenced_start {
                continue;
            }
            let mut alts = Vec::new();
            if final_ok(s) {
                alts.push(self.lay.close("}", depth));
            }
            for (j, t) in trans(s) {
                alts.push(seq(vec![self.lay.sep(depth), member_expr(j), rf(&sname(ids[&t]))]));
            }
            let body = alt(alts);
            self.add_rule(sname(si), if big { opaque(body) } else { body });
        }
        // start state is "{" with nothing written
        let mut first = Vec::new();
        for (j, t) in trans(&start) {
            first.push(seq(vec![member_expr(j), rf(&sname(ids[&t]))]));
        }
        let mut out = Vec::new();
        if final_ok(&start) {
            out.push(self.lay.empty("{", "}"));
        }
        if !first.is_empty() {
            out.push(seq(vec![self.lay.open("{", depth), alt(first)]));
        }
        Ok(alt(out))
    }

    /// Declared members in any order, each at most once, required ones present, extras
    /// repeatable, `min_p..=max_p` members: a key set in the parser (no per-subset rules).
    fn key_set(&mut self, members: Vec<(String, Expr, bool)>, extra: Option<Expr>, min_p: u64, max_p: Option<u64>, depth: u32) -> Expr {
        let clamp = |x: u64| x.min(u32::MAX as u64 - 1) as u32;
        let may_be_empty = min_p == 0 && members.iter().all(|m| !m.2);
        let spec = PermSpec {
            members: members.into_iter().map(|(_, e, req)| (e, req)).collect(),
            extra,
            sep: self.lay.sep(depth),
            min: clamp(min_p.max(1)),
            max: max_p.map(clamp),
        };
        let mut alts = Vec::new();
        if may_be_empty {
            alts.push(self.lay.empty("{", "}"));
        }
        if max_p != Some(0) {
            alts.push(seq(vec![self.lay.open("{", depth), Expr::Perm(Box::new(spec)), self.lay.close("}", depth)]));
        }
        alt(alts)
    }

    fn simple_object(&mut self, member: Expr, min: u64, max: Option<u64>, depth: u32) -> Expr {
        let mut alts = Vec::new();
        if min == 0 {
            alts.push(self.lay.empty("{", "}"));
        }
        if max != Some(0) {
            let more_min = min.saturating_sub(1).min(u32::MAX as u64) as u32;
            let more_max = max.map(|m| (m - 1).min(u32::MAX as u64) as u32);
            let mut tail = seq(vec![self.lay.sep(depth), member.clone()]);
            if more_max.is_none_or(|m| m > 16) || more_min > 16 {
                let name = self.new_name("m");
                self.add_rule(name.clone(), opaque(tail));
                tail = rf(&name);
            }
            let rest = Expr::Repeat { inner: Box::new(tail), min: more_min, max: more_max };
            alts.push(seq(vec![self.lay.open("{", depth), member, rest, self.lay.close("}", depth)]));
        }
        alt(alts)
    }

    // ------------------------------------------------------------------ validation

    /// Whether `v` validates against every schema of `its`.
    fn valid_all(&mut self, v: &Value, its: &[Item<'a>]) -> Res<bool> {
        for it in its {
            if !self.valid(v, it)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Whether `v` validates against `it` (used for enum/const filtering and exclusions).
    fn valid(&mut self, v: &Value, it: &Item<'a>) -> Res<bool> {
        self.valid_depth(v, it, 0)
    }

    fn valid_depth(&mut self, v: &Value, it: &Item<'a>, depth: u32) -> Res<bool> {
        if depth > 200 {
            return self.invalid(&it.ptr, "reference loop while validating a value");
        }
        let m = match it.val() {
            Value::Bool(b) => return Ok(*b),
            Value::Object(m) => m,
            _ => return self.invalid(&it.ptr, "a schema must be an object or a boolean"),
        };
        let legacy_ref = self.draft <= Draft::Draft7 && m.contains_key("$ref");
        for (k, s) in m {
            if legacy_ref && k != "$ref" {
                continue;
            }
            let ok = match k.as_str() {
                "$ref" | "$dynamicRef" | "$recursiveRef" => {
                    let t = self.resolve_ref(it, s.as_str().unwrap_or(""), k)?;
                    self.valid_depth(v, &t, depth + 1)?
                }
                "x-corral-ptr" => {
                    let t = self.doc_item(s.as_str().unwrap_or("")).unwrap();
                    self.valid_depth(v, &t, depth + 1)?
                }
                "allOf" | "anyOf" | "oneOf" => {
                    let n = s.as_array().map(|a| a.len()).unwrap_or(0);
                    let mut cnt = 0;
                    for i in 0..n {
                        let c = self.child(it, &[k, &i.to_string()]).unwrap();
                        if self.valid_depth(v, &c, depth + 1)? {
                            cnt += 1;
                        }
                    }
                    match k.as_str() {
                        "allOf" => cnt == n,
                        "anyOf" => cnt > 0,
                        _ => cnt == 1,
                    }
                }
                "not" => {
                    let c = self.child(it, &["not"]).unwrap();
                    !self.valid_depth(v, &c, depth + 1)?
                }
                "if" if self.draft < Draft::Draft7 => true,
                "if" => {
                    let c = self.child(it, &["if"]).unwrap();
                    let branch = if self.valid_depth(v, &c, depth + 1)? { "then" } else { "else" };
                    match self.child(it, &[branch]) {
                        Some(b) => self.valid_depth(v, &b, depth + 1)?,
                        None => true,
                    }
                }
                "type" => {
                    let names: Vec<&Value> = match s {
                        Value::Array(a) => a.iter().collect(),
                        x => vec![x],
                    };
                    let mut mask = 0;
                    for n in names {
                        mask |= n.as_str().and_then(type_mask).unwrap_or(if n.as_str() == Some("any") { T_ALL } else { 0 });
                    }
                    if m.get("nullable") == Some(&Value::Bool(true)) {
                        mask |= T_NULL;
                    }
                    value_type(v, self.draft) & mask != 0
                }
                "x-corral-types" => value_type(v, self.draft) & (s.as_u64().unwrap_or(127) as u8) != 0,
                "enum" => {
                    s.as_array().is_some_and(|a| a.iter().any(|x| json_eq(x, v))) || (m.get("nullable") == Some(&Value::Bool(true)) && v.is_null())
                }
                "const" => json_eq(s, v),
                "x-corral-not-enum" => !s.as_array().is_some_and(|a| a.iter().any(|x| json_eq(x, v))),
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" | "x-corral-not-multipleOf" => {
                    let (Value::Number(x), Value::Number(b)) = (v, s) else { continue };
                    let (Some(x), Some(b)) = (Dec::from_json(x), Dec::from_json(b)) else { continue };
                    let excl = |name: &str| m.get(name) == Some(&Value::Bool(true));
                    match k.as_str() {
                        "minimum" => if excl("exclusiveMinimum") { x > b } else { x >= b },
                        "maximum" => if excl("exclusiveMaximum") { x < b } else { x <= b },
                        "exclusiveMinimum" => x > b,
                        "exclusiveMaximum" => x < b,
                        "multipleOf" => is_multiple(&x, &b),
                        _ => !is_multiple(&x, &b),
                    }
                }
                "minLength" | "maxLength" => {
                    let Value::String(x) = v else { continue };
                    let l = x.chars().count() as u64;
                    let n = as_u64(s).unwrap_or(0);
                    if k == "minLength" { l >= n } else { l <= n }
                }
                "pattern" | "x-corral-not-pattern" => {
                    let Value::String(x) = v else { continue };
                    let m = self.pattern_matches(s.as_str().unwrap_or(""), x);
                    let m = m.map_err(|e| SchemaError::Unsupported { pointer: format!("{}/pattern", it.ptr), keyword: "pattern".into(), message: e })?;
                    m == (k == "pattern")
                }
                "format" | "x-corral-not-format" => {
                    let Value::String(x) = v else { continue };
                    let name = s.as_str().unwrap_or("");
                    if matches!(format_lang(name), FormatLang::Unknown) {
                        continue;
                    }
                    let d = self.format_dfa(name).map_err(|e| SchemaError::Unsupported { pointer: format!("{}/format", it.ptr), keyword: "format".into(), message: e })?;
                    d.accepts(x) == (k == "format")
                }
                "items" | "prefixItems" | "additionalItems" => {
                    let Value::Array(a) = v else { continue };
                    if k == "additionalItems" {
                        continue; // handled with items
                    }
                    let (prefix_key, rest): (Option<&str>, Option<Item<'a>>) = match (k.as_str(), s) {
                        ("items", Value::Array(_)) => (Some("items"), self.child(it, &["additionalItems"])),
                        ("items", _) => (None, self.child(it, &["items"])),
                        _ => (Some("prefixItems"), None),
                    };
                    let plen = prefix_key.and_then(|pk| m.get(pk)).and_then(|x| x.as_array()).map(|x| x.len()).unwrap_or(0);
                    let skip = if k == "items" && !s.is_array() { m.get("prefixItems").and_then(|x| x.as_array()).map(|x| x.len()).unwrap_or(0) } else { 0 };
                    let mut ok = true;
                    for (i, x) in a.iter().enumerate() {
                        let sch = if let Some(pk) = prefix_key.filter(|_| i < plen) {
                            self.child(it, &[pk, &i.to_string()])
                        } else if i >= skip && (prefix_key.is_none() || k == "items") {
                            rest.clone()
                        } else {
                            None
                        };
                        if let Some(sch) = sch {
                            if !self.valid_depth(x, &sch, depth + 1)? {
                                ok = false;
                                break;
                            }
                        }
                    }
                    ok
                }
                "contains" => {
                    let Value::Array(a) = v else { continue };
                    let c = self.child(it, &["contains"]).unwrap();
                    let mut cnt = 0u64;
                    for x in a {
                        if self.valid_depth(x, &c, depth + 1)? {
                            cnt += 1;
                        }
                    }
                    let mn = m.get("minContains").and_then(as_u64).unwrap_or(1);
                    let mx = m.get("maxContains").and_then(as_u64);
                    cnt >= mn && mx.is_none_or(|mx| cnt <= mx)
                }
                "minItems" | "maxItems" => {
                    let Value::Array(a) = v else { continue };
                    let n = as_u64(s).unwrap_or(0);
                    if k == "minItems" { a.len() as u64 >= n } else { a.len() as u64 <= n }
                }
                "uniqueItems" => {
                    let Value::Array(a) = v else { continue };
                    if s != &Value::Bool(true) {
                        continue;
                    }
                    !(0..a.len()).any(|i| (i + 1..a.len()).any(|j| json_eq(&a[i], &a[j])))
                }
                "properties" | "patternProperties" | "additionalProperties" => {
                    let Value::Object(o) = v else { continue };
                    if k != "properties" && k != "additionalProperties" && m.contains_key("additionalProperties") {
                        continue; // checked with additionalProperties
                    }
                    let mut ok = true;
                    for (name, x) in o {
                        let mut schemas = Vec::new();
                        let mut evaluated = false;
                        if let Some(props) = m.get("properties").and_then(|p| p.as_object()) {
                            if props.contains_key(name) {
                                evaluated = true;
                                if k == "properties" {
                                    schemas.push(self.child(it, &["properties", name]).unwrap());
                                }
                            }
                        }
                        if let Some(pp) = m.get("patternProperties").and_then(|p| p.as_object()) {
                            for pat in pp.keys() {
                                let m = self.pattern_matches(pat, name);
                                if m.map_err(|e| SchemaError::Unsupported { pointer: format!("{}/patternProperties", it.ptr), keyword: "patternProperties".into(), message: e })? {
                                    evaluated = true;
                                    if k != "properties" {
                                        schemas.push(self.child(it, &["patternProperties", pat]).unwrap());
                                    }
                                }
                            }
                        }
                        if k == "additionalProperties" && !evaluated {
                            schemas.push(self.child(it, &["additionalProperties"]).unwrap());
                        }
                        for sch in schemas {
                            if !self.valid_depth(x, &sch, depth + 1)? {
                                ok = false;
                            }
                        }
                    }
                    ok
                }
                "required" => {
                    let Value::Object(o) = v else { continue };
                    s.as_array().is_none_or(|a| a.iter().all(|n| n.as_str().is_none_or(|n| o.contains_key(n))))
                }
                "minProperties" | "maxProperties" => {
                    let Value::Object(o) = v else { continue };
                    let n = as_u64(s).unwrap_or(0);
                    if k == "minProperties" { o.len() as u64 >= n } else { o.len() as u64 <= n }
                }
                "propertyNames" => {
                    let Value::Object(o) = v else { continue };
                    let c = self.child(it, &["propertyNames"]).unwrap();
                    let mut ok = true;
                    for name in o.keys() {
                        if !self.valid_depth(&Value::String(name.clone()), &c, depth + 1)? {
                            ok = false;
                            break;
                        }
                    }
                    ok
                }
                "dependentRequired" | "dependentSchemas" | "dependencies" => {
                    let Value::Object(o) = v else { continue };
                    let mut ok = true;
                    if let Some(deps) = s.as_object() {
                        for (name, d) in deps {
                            if !o.contains_key(name) {
                                continue;
                            }
                            match d {
                                Value::Array(req) => {
                                    if !req.iter().all(|r| r.as_str().is_none_or(|r| o.contains_key(r))) {
                                        ok = false;
                                    }
                                }
                                _ => {
                                    let c = self.child(it, &[k, name]).unwrap();
                                    if !self.valid_depth(v, &c, depth + 1)? {
                                        ok = false;
                                    }
                                }
                            }
                        }
                    }
                    ok
                }
                "unevaluatedProperties" | "unevaluatedItems" => {
                    if s != &Value::Bool(true) {
                        return Err(SchemaError::Unsupported {
                            pointer: format!("{}/{k}", it.ptr),
                            keyword: k.clone(),
                            message: "unevaluated* keywords are not supported".into(),
                        });
                    }
                    true
                }
                _ => true,
            };
            if !ok {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

fn is_multiple(x: &Dec, d: &Dec) -> bool {
    // x / d integer: scale both to integers
    let scale = x.frac.len().max(d.frac.len());
    let to_int = |v: &Dec| -> String {
        let mut s = format!("{}{}", v.int, v.frac);
        s.push_str(&"0".repeat(scale - v.frac.len()));
        let t = s.trim_start_matches('0');
        if t.is_empty() { "0".to_string() } else { t.to_string() }
    };
    let (xs, ds) = (to_int(x), to_int(d));
    if ds == "0" {
        return false;
    }
    // big modulo by long division with u128 chunks of the divisor when it fits
    if ds.len() <= 30 {
        let dv: u128 = ds.parse().unwrap();
        let mut r: u128 = 0;
        for c in xs.bytes() {
            r = (r * 10 + (c - b'0') as u128) % dv;
        }
        return r == 0;
    }
    false
}

/// Leap-second times `hh:mm:60[.frac]offset` that are 23:59:60 UTC.
/// Each leap-second time `hh:mm:60[.frac]offset` that is 23:59:60 UTC, with its local `hh:mm`.
fn leap_time_cases() -> Vec<(String, Rx)> {
    let frac = rep(Rx::concat(vec![lit("."), rep(Rx::Chars(vec![('0' as u32, '9' as u32)]), 1, None)]), 0, Some(1));
    strings::leap_second_cases()
        .into_iter()
        .map(|(local, offs)| {
            let o: Vec<Rx> = offs.iter().map(|s| lit(s)).collect();
            let rx = Rx::concat(vec![lit(&local), lit(":60"), frac.clone(), Rx::alt(o)]);
            (local, rx)
        })
        .collect()
}

fn leap_time_rx() -> Rx {
    Rx::alt(leap_time_cases().into_iter().map(|(_, rx)| rx).collect())
}

/// The JSON-encoded leap-second times, one byte automaton per local hour (built once per
/// process). The whole language is an 11,007-state automaton (the offset must undo the local
/// time exactly, so every `hh:mm` is remembered), 66,038 states once encoded: too large for
/// one terminal, while each hour's share (~460 code-point states) is not.
fn leap_time_by_hour() -> &'static [Arc<corral_core::byte_automaton::ByteAutomaton>] {
    static P: std::sync::OnceLock<Vec<Arc<corral_core::byte_automaton::ByteAutomaton>>> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        let mut by_hour: BTreeMap<String, Vec<Rx>> = BTreeMap::new();
        for (local, rx) in leap_time_cases() {
            by_hour.entry(local[..2].to_string()).or_default().push(rx);
        }
        // The hours on the thread pool, each with the terminal automaton grammars use (so the
        // first schema with a `date-time` waits for one batch, not 24 builds in a row).
        use rayon::prelude::*;
        let hours: Vec<Vec<Rx>> = by_hour.into_values().collect();
        hours
            .into_par_iter()
            .map(|alts| {
                let a = Arc::new(crate::encode::json_automaton(&CDfa::from_rx(&Rx::alt(alts), 200_000).expect("leap automaton")));
                let _ = corral_core::intern::terminal_dfa(&leap_hour_terminal(&a), &corral_core::Limits::default());
                a
            })
            .collect()
    })
}

/// The terminal of one hour's leap-second times: the hour's automaton and the closing quote.
fn leap_hour_terminal(a: &Arc<corral_core::byte_automaton::ByteAutomaton>) -> Rx {
    Rx::concat(vec![Rx::Automaton(a.clone()), lit("\"")])
}

/// The leap-second time automaton (built once per process).
fn leap_time_dfa() -> &'static CDfa {
    static D: std::sync::OnceLock<CDfa> = std::sync::OnceLock::new();
    D.get_or_init(|| CDfa::from_rx(&leap_time_rx(), 200_000).expect("leap automaton"))
}
