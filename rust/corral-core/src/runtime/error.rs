//! Error type of the core: every failure a user can cause is a variant here, never a panic.

use std::fmt;

/// Where in a source text an error is: 1-based line and column plus the line itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
    /// The full text of the offending line (without its newline).
    pub line_text: String,
}

impl Location {
    /// Computes the location of byte offset `offset` in `src`.
    pub fn at(src: &str, offset: usize) -> Location {
        let offset = offset.min(src.len());
        let before = &src[..floor_char_boundary(src, offset)];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
        let column = before[line_start..].chars().count() + 1;
        let line_end = src[line_start..].find('\n').map(|i| line_start + i).unwrap_or(src.len());
        Location { line, column, line_text: src[line_start..line_end].trim_end_matches('\r').to_string() }
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let caret_pad: String = self
            .line_text
            .chars()
            .take(self.column.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        write!(f, "line {}, column {}:\n  {}\n  {}^", self.line, self.column, self.line_text, caret_pad)
    }
}

/// Every error the core reports.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The grammar text does not parse.
    #[error("grammar syntax error: {message} at {location}")]
    GrammarSyntax {
        /// What is wrong.
        message: String,
        /// Where.
        location: Location,
    },
    /// The grammar parses but is not usable (undefined rule, no root, matches nothing...).
    #[error("invalid grammar: {message}{}", .location.as_ref().map(|l| format!(" at {l}")).unwrap_or_default())]
    GrammarInvalid {
        /// What is wrong.
        message: String,
        /// Where, when known.
        location: Option<Location>,
    },
    /// A regular expression does not parse or uses an unsupported feature.
    #[error("regex error: {message}")]
    Regex {
        /// What is wrong, including the pattern.
        message: String,
        /// Byte offset in the pattern, when known.
        offset: Option<usize>,
    },
    /// A configured limit was exceeded.
    #[error("limit exceeded: {what} (limit {name} = {limit}); {hint}")]
    Limit {
        /// Name of the limit (a field of `Limits`).
        name: &'static str,
        /// Its value.
        limit: usize,
        /// What exceeded it.
        what: String,
        /// How to raise it.
        hint: &'static str,
    },
    /// Compilation ran past its time budget.
    #[error("compilation exceeded its time budget of {limit_ms} ms (limit max_compile_ms); pass a larger value in `limits=` if the grammar is legitimate")]
    CompileTimeout {
        /// The budget.
        limit_ms: u64,
    },
    /// A mask fill ran past its time budget (the mask row is left all zeros).
    #[error("the mask fill exceeded its time budget of {limit_ms} ms (limit max_fill_ms): the grammar is too ambiguous at this position for this vocabulary; make it less ambiguous, or pass a larger max_fill_ms in `limits=` when building the grammar")]
    FillTimeout {
        /// The budget.
        limit_ms: u64,
    },
    /// The vocabulary is inconsistent (bad EOS id, size smaller than the token list...).
    #[error("vocabulary error: {0}")]
    Vocabulary(String),
    /// The caller used the API wrongly (unknown token id, rollback too far, wrong buffer size...).
    #[error("{0}")]
    Usage(String),
}

/// Result alias for the core.
pub type Result<T, E = Error> = std::result::Result<T, E>;
