//! Lark grammars (llguidance's dialect). Not implemented yet.

use corral_core::{Grammar, Limits};

/// Compiles Lark grammar text (root rule `start`).
pub fn compile(text: &str, limits: &Limits) -> crate::Result<Grammar> {
    let _ = (text, limits);
    Err(crate::FormatError::Unsupported { construct: "Lark".into(), at: "1:1".into(), message: "Lark grammars are not implemented yet".into() })
}
