//! xgrammar structural tags. Not implemented yet.

use corral_core::{Grammar, Limits};

/// Compiles a structural tag (the JSON object, new or legacy form).
pub fn compile(tag: &serde_json::Value, limits: &Limits) -> crate::Result<Grammar> {
    let _ = (tag, limits);
    Err(crate::FormatError::Unsupported { construct: "structural tag".into(), at: "/".into(), message: "structural tags are not implemented yet".into() })
}
