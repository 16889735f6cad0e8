//! corral-formats: the grammar formats serving engines send besides GBNF, regex and JSON
//! Schema, compiled to the same [`corral_core::Grammar`] (so masks are as exact as
//! everywhere else).
//!
//! * [`lark`]: Lark grammars in the dialect llguidance reads (and xgrammar's `from_lark`).
//! * [`structural_tag`]: xgrammar's structural tags (tool calling), new and legacy forms.
//!
//! Both embed JSON Schemas through [`corral_schema::compile_schema_rules`] and other grammars'
//! rules through [`embed`]. This crate sits above `corral-core` and `corral-schema`; the core
//! knows nothing of JSON Schema.

pub mod embed;
pub mod lark;
pub mod structural_tag;

/// Why a Lark grammar or a structural tag cannot be compiled.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FormatError {
    /// A syntax or grammar error, a limit, a regex error (with line:col where there is one).
    #[error(transparent)]
    Grammar(#[from] corral_core::Error),
    /// An embedded JSON Schema failed; `at` says where the schema sits in the enclosing
    /// grammar (a structural tag's JSON pointer, or a Lark `%json` block's line:col).
    #[error("{at}: {source}")]
    Schema {
        /// Where the schema sits.
        at: String,
        /// The schema's own error (its pointer is relative to the schema).
        source: corral_schema::SchemaError,
    },
    /// A structural tag that does not follow the format (missing field, wrong type...).
    #[error("invalid structural tag at '{pointer}': {message}")]
    InvalidTag {
        /// JSON pointer into the structural tag.
        pointer: String,
        /// What is wrong.
        message: String,
    },
    /// A construct the format defines that corral does not support (or not exactly).
    #[error("unsupported {construct} at {at}: {message}")]
    Unsupported {
        /// The construct (`%declare`, `max_tokens`, ...).
        construct: String,
        /// Where: line:col in a grammar text, or a JSON pointer in a structural tag.
        at: String,
        /// Why, and what to do instead.
        message: String,
    },
}

/// Result alias.
pub type Result<T> = std::result::Result<T, FormatError>;
