//! Regular expression syntax (Rust/PCRE-like, via `regex-syntax`) to [`Rx`].
//!
//! The whole pattern must match (as in `Grammar.from_regex`); a leading `^` and trailing `$`
//! are accepted and ignored. Other look-around assertions (`\b`, `^`/`$` in the middle)
//! cannot be enforced on a token stream and are rejected with a clear error.

use crate::runtime::error::{Error, Result};
use crate::runtime::limits::Limits;
use crate::frontend::rx::Rx;
use regex_syntax::hir::{Class, Hir, HirKind, Look};

/// Parses `pattern` into an [`Rx`] matching exactly the strings the pattern matches in full.
pub fn parse_regex(pattern: &str, limits: &Limits) -> Result<Rx> {
    let hir = regex_syntax::ParserBuilder::new()
        .nest_limit(limits.max_nesting as u32)
        .build()
        .parse(pattern)
        .map_err(|e| {
            let (kind, offset) = match &e {
                regex_syntax::Error::Parse(p) => (p.kind().to_string(), Some(p.span().start.offset)),
                regex_syntax::Error::Translate(t) => (t.kind().to_string(), Some(t.span().start.offset)),
                other => (other.to_string(), None),
            };
            Error::Regex { message: format!("cannot parse regex /{pattern}/: {kind}"), offset }
        })?;
    let items: Vec<&Hir> = match hir.kind() {
        HirKind::Concat(xs) => xs.iter().collect(),
        _ => vec![&hir],
    };
    // Strip edge anchors.
    let mut lo = 0;
    let mut hi = items.len();
    while lo < hi && matches!(items[lo].kind(), HirKind::Look(Look::Start | Look::StartLF)) {
        lo += 1;
    }
    while hi > lo && matches!(items[hi - 1].kind(), HirKind::Look(Look::End | Look::EndLF)) {
        hi -= 1;
    }
    let parts = items[lo..hi].iter().map(|h| convert(h, pattern)).collect::<Result<Vec<_>>>()?;
    Ok(Rx::concat(parts))
}

fn convert(h: &Hir, pattern: &str) -> Result<Rx> {
    Ok(match h.kind() {
        HirKind::Empty => Rx::Empty,
        HirKind::Literal(lit) => Rx::Literal(lit.0.to_vec()),
        HirKind::Class(Class::Unicode(c)) => {
            let r: Vec<(u32, u32)> = c.ranges().iter().map(|r| (r.start() as u32, r.end() as u32)).collect();
            Rx::char_class(&r, false)
        }
        HirKind::Class(Class::Bytes(c)) => {
            let r: Vec<(u8, u8)> = c.ranges().iter().map(|r| (r.start(), r.end())).collect();
            if r.is_empty() {
                Rx::Nothing
            } else {
                Rx::Bytes(r)
            }
        }
        HirKind::Look(look) => {
            return Err(Error::Regex {
                offset: None,
                message: format!(
                    "regex /{pattern}/ uses the assertion {look:?}, which cannot be enforced while generating; only a leading '^' and trailing '$' are allowed"
                ),
            })
        }
        HirKind::Repetition(rep) => Rx::Repeat { inner: std::sync::Arc::new(convert(&rep.sub, pattern)?), min: rep.min, max: rep.max },
        HirKind::Capture(cap) => convert(&cap.sub, pattern)?,
        HirKind::Concat(xs) => Rx::concat(xs.iter().map(|x| convert(x, pattern)).collect::<Result<_>>()?),
        HirKind::Alternation(xs) => Rx::alt(xs.iter().map(|x| convert(x, pattern)).collect::<Result<_>>()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automata::dfa::Dfa;

    fn dfa(p: &str) -> Dfa {
        Dfa::from_rx(&parse_regex(p, &Limits::default()).unwrap(), &Limits::default()).unwrap()
    }

    #[test]
    fn basic() {
        let d = dfa(r"^\d{3}-[a-z]+$");
        assert!(d.matches(b"123-abc"));
        assert!(!d.matches(b"12-abc"));
        let d = dfa(r"(foo|bar)*baz");
        assert!(d.matches(b"foobarbaz"));
        assert!(!d.matches(b"fooba"));
    }

    #[test]
    fn rejects_lookaround() {
        let e = parse_regex(r"a\bb", &Limits::default()).unwrap_err();
        assert!(e.to_string().contains("cannot be enforced"), "{e}");
        let e = parse_regex(r"a(", &Limits::default()).unwrap_err();
        assert!(e.to_string().contains("cannot parse regex"), "{e}");
        assert!(matches!(e, Error::Regex { offset: Some(1), .. }), "{e:?}");
    }
}
