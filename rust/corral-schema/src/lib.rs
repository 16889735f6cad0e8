//! corral-schema: JSON Schema → exact corral grammar.
//!
//! [`compile_schema`] turns a JSON Schema (draft 4 to 2020-12) into a
//! [`corral_core::Grammar`] whose language is exactly the JSON texts (with the configured
//! [`Whitespace`]) whose value validates against the schema. Where a keyword cannot be enforced
//! exactly by a grammar, strict mode (the default) fails with [`SchemaError::Unsupported`]
//! naming the keyword and its JSON pointer; non-strict mode compiles the closest *looser*
//! grammar (it never rejects a valid instance) and reports one [`SchemaWarning`] per ignored
//! keyword.
//!
//! # Design decisions
//!
//! * **Property order.** By default ([`PropertyOrder::AnyOrder`]) declared properties may come
//!   in any order, each at most once, required ones before the object closes, with
//!   `minProperties`/`maxProperties` counted: the object body is a key set
//!   ([`corral_core::ebnf::PermSpec`]), which the parser runs by tracking the set of declared
//!   keys already written, so there is no bound on the number of properties and no per-subset
//!   rules. With [`PropertyOrder::SchemaOrder`], declared properties appear in the
//!   schema's order (undeclared ones may be interleaved anywhere); this is tighter than the
//!   schema by design (the caller asks for a canonical order).
//!   Declared keys can never repeat. Undeclared keys (`additionalProperties`,
//!   `patternProperties`) cannot be kept distinct from each other by any context-free grammar,
//!   so a generated map may repeat an undeclared key.
//! * **Whitespace.** [`Whitespace::Flexible`] allows `[ \t\n\r]{0,max}` around every token
//!   (default `max = 20`: two-space indentation to depth 9; bounded so a model cannot loop
//!   on whitespace forever), including before and after the value. [`Whitespace::Compact`]
//!   allows none. [`Whitespace::Fixed`] is exactly `json.dumps` with the given `indent`,
//!   `separators`; with an indent, nesting is limited to 32 levels.
//! * **Strings** are matched in their JSON-encoded form: every character of the decoded value
//!   may appear raw (when RFC 8259 allows it raw: not `"`, `\` or U+0000–U+001F) or as any of
//!   its escapes (`\"`, `\\`, `\/`, `\b\f\n\r\t`, `\uXXXX` in either hex case, surrogate pairs
//!   for astral characters). Lone surrogate escapes are never accepted. `pattern`, `minLength`,
//!   `maxLength`, `format`, `enum`, `const` apply to the decoded string; lengths count code
//!   points. Patterns are ECMA-262 with Unicode (code point) semantics, matched anywhere unless
//!   anchored; look-arounds, backreferences and `\b` are `Unsupported`.
//! * **Numbers**: see [`numbers`] for the forms accepted under value constraints. `integer`
//!   accepts numbers with a zero fraction (`1.0`), per JSON Schema 2020-12.
//! * **oneOf** is compiled as `anyOf` when its branches are provably disjoint (different types,
//!   disjoint `const`/`enum` values, a required property with disjoint values or forbidden by the
//!   other branch); a branch that may overlap others is conjoined with their negations. A
//!   `oneOf`/`anyOf` whose branches are all `const`/`enum` is one enum (the values of exactly
//!   one branch for `oneOf`).
//! * **not / if-then-else** are compiled by negating the schema keyword by keyword where each
//!   keyword's negation is expressible (types, enum/const, bounds, lengths, patterns, formats,
//!   required, properties, counts, items/contains, anyOf, oneOf — no branch or two that may
//!   overlap). The negations of `additionalProperties`, `patternProperties` and
//!   `propertyNames` ask for a member whose key is in a set and whose value satisfies a
//!   schema; an object meets such constraints through a declared member made required (with
//!   the schema added) or one more member among its other keys, one object automaton per way.
//! * **Long literals** (over 2,048 characters) are sequences of terminals of 1,024 characters;
//!   the keys of objects with many properties are split where their names part.
//! * **format**: date, time, date-time (with RFC 3339 leap-second rules), duration, email
//!   (RFC 5321 Mailbox), ipv4, ipv6, uuid, uri, uri-reference, json-pointer,
//!   relative-json-pointer are exact. hostname (punycode, total length), idn-*, iri*,
//!   uri-template and regex are not enforceable: `Unsupported` in strict mode, looser with a
//!   warning otherwise. Unknown formats are annotations (a warning records them).
//! * A `$schema` that is not a known JSON Schema meta-schema may change the vocabularies in
//!   use: `Unsupported` in strict mode (keyword `$schema`), assumed standard otherwise.
//! * **Combined string constraints** (several patterns/formats, `not` of a pattern, a pattern
//!   with length bounds) are intersected as automata over code points. Length bounds on a
//!   simple pattern (one variable-length character-class repetition per alternative) stay
//!   symbolic; otherwise the product with a length counter must stay under ~12k states, else the
//!   length keyword is `Unsupported` (strict) or dropped with a warning. Large plain length
//!   bounds (e.g. `maxLength: 65535`) are exact through a base-64 chunk grammar.
//! * **unevaluatedProperties / unevaluatedItems** are exact when the schema's own in-place
//!   sub-tree (allOf, $ref, properties, patternProperties, prefixItems, items) determines the
//!   evaluated set; with anyOf/oneOf/not/if/dependentSchemas/contains below them they are
//!   `Unsupported`.
//! * **Not supported** (strict error): `$dynamicRef`/`$recursiveRef` with dynamic anchors, remote
//!   `$ref`s, `uniqueItems` unless items come from a small finite set (≤ 10 values) or
//!   `maxItems ≤ 1`, several `contains` on one array, a schema that accepts no value at all
//!   (the core cannot express an empty language: `Invalid`).
//! * Unknown keywords are annotations (ignored, listed in [`Compiled::keywords_used`]).

pub mod big_stack;
pub mod cdfa;
mod compile;
mod decimal;
pub mod encode;
mod shared_cache;
pub mod numbers;
mod number_automaton;
pub mod strings;
pub mod warm_start;

use corral_core::{Grammar, Limits};
use std::collections::BTreeSet;

/// Whitespace allowed between JSON tokens.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Whitespace {
    /// Up to `max` characters of `[ \t\n\r]` between any two tokens and around the value.
    Flexible {
        /// Most whitespace characters per gap.
        max: u32,
    },
    /// No whitespace at all.
    Compact,
    /// Exactly the layout of Python's `json.dumps(indent=..., separators=(item_sep, key_sep))`.
    Fixed {
        /// Spaces per nesting level; `None` keeps everything on one line.
        indent: Option<u32>,
        /// Between items (e.g. `", "`, or `","` with an indent).
        item_sep: String,
        /// Between a key and its value (e.g. `": "`).
        key_sep: String,
    },
}

impl Default for Whitespace {
    fn default() -> Self {
        Whitespace::Flexible { max: 20 }
    }
}

/// Order of declared properties in objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PropertyOrder {
    /// Any order (exact: each declared property at most once).
    #[default]
    AnyOrder,
    /// The order of `properties` in the schema.
    SchemaOrder,
}

/// JSON Schema draft, for keywords whose meaning changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Draft {
    /// Draft 4.
    Draft4,
    /// Draft 6.
    Draft6,
    /// Draft 7.
    Draft7,
    /// 2019-09.
    Draft2019,
    /// 2020-12.
    #[default]
    Draft2020,
}

/// Compilation options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Whitespace layout.
    pub whitespace: Whitespace,
    /// Fail on keywords that cannot be enforced exactly (default), instead of loosening.
    pub strict: bool,
    /// Grammar size limits.
    pub limits: Limits,
    /// Order of declared properties.
    pub property_order: PropertyOrder,
    /// Draft used when the schema has no `$schema`.
    pub default_draft: Draft,
    /// Enforce `format` (default true). JSON Schema 2020-12 makes `format` an annotation
    /// unless the format-assertion vocabulary is on; `false` follows that default.
    pub assert_format: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            whitespace: Whitespace::default(),
            strict: true,
            limits: Limits::default(),
            property_order: PropertyOrder::AnyOrder,
            default_draft: Draft::Draft2020,
            assert_format: true,
        }
    }
}

/// A keyword that was not enforced exactly (non-strict mode), or a notice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaWarning {
    /// JSON pointer of the schema object holding the keyword.
    pub pointer: String,
    /// The keyword.
    pub keyword: String,
    /// What was done instead.
    pub message: String,
}

/// The result of [`compile_schema`].
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The grammar.
    pub grammar: Grammar,
    /// Keywords that were loosened (non-strict) or notices (unknown formats).
    pub warnings: Vec<SchemaWarning>,
    /// Every keyword seen in a schema position.
    pub keywords_used: BTreeSet<String>,
}

/// Why a schema cannot be compiled.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SchemaError {
    /// A keyword that cannot be enforced exactly (strict mode).
    #[error("unsupported keyword '{keyword}' at '{pointer}': {message}")]
    Unsupported {
        /// JSON pointer of the schema object holding the keyword (with the keyword appended).
        pointer: String,
        /// The keyword.
        keyword: String,
        /// Why.
        message: String,
    },
    /// The schema itself is malformed.
    #[error("invalid schema at '{pointer}': {message}")]
    Invalid {
        /// Where.
        pointer: String,
        /// What is wrong.
        message: String,
    },
    /// The grammar could not be built (usually a size limit).
    #[error(transparent)]
    Grammar(#[from] corral_core::Error),
}

/// Compiles a JSON Schema to a grammar.
pub fn compile_schema(schema: &serde_json::Value, opts: &Options) -> Result<Compiled, SchemaError> {
    formats_in_background();
    compile::compile(schema, opts)
}

/// The rules of `schema`'s grammar, for embedding it in a larger grammar (structural tags,
/// Lark's `%json`): the root rule is named `root`; every rule name is the compiler's own, so
/// the caller renames them apart from its own rules. Warnings as in [`compile_schema`].
pub fn compile_schema_rules(schema: &serde_json::Value, opts: &Options) -> Result<(corral_core::ebnf::GrammarAst, Vec<SchemaWarning>), SchemaError> {
    formats_in_background();
    compile::compile_rules(schema, opts)
}

/// Formats whose automata take milliseconds to build the first time in a process (measured
/// with `fill_profile`, a one-property schema: `date-time` and `time` about 24 ms each, leap
/// seconds included; `uri-reference` 8; `uri` 4; `email` 3; `ipv6` 2.6; the rest under 1):
/// the first schema using one paid for it in its compile.
pub const PREWARMED_FORMATS: &[&str] = &["date-time", "uri", "email", "date", "uri-reference", "uuid", "ipv4", "ipv6", "hostname", "duration", "time"];

/// Once per process, queues the compile of a string of each of [`PREWARMED_FORMATS`] on the
/// background thread ([`corral_core::warmup`]), which leaves their automata in the
/// process-wide caches; nothing is done without that thread. Called by the first schema
/// compile, and by hosts ahead of it (the Python extension when it loads a vocabulary, seconds
/// before the first request). One job per format, so that a compile's own warm-up jobs are
/// not held up behind all of them.
pub fn formats_in_background() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for f in PREWARMED_FORMATS {
            corral_core::warmup::in_background(move || {
                let schema = serde_json::json!({"type": "string", "format": f});
                // (Not strict: `hostname` is enforced loosely, and a strict compile stops
                // before building its automaton.)
                let opts = Options { strict: false, ..Options::default() };
                // (Its automata are built here too: compiles leave them to the first fills.)
                big_stack::on_big_stack(|| {
                    if let Ok(c) = compile::compile(&schema, &opts) {
                        for t in &c.grammar.cfg().terminals {
                            t.dfa();
                        }
                    }
                });
            });
        }
    });
}
