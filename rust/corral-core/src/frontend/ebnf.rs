//! Parser for the GBNF dialect of llama.cpp (also read by xgrammar), producing a [`GrammarAst`].
//!
//! Supported: `name ::= alternatives` rules (rule names may contain letters, digits, `-`, `_`, `.`),
//! `|`, grouping, `* + ?`, `{m}`, `{m,}`, `{m,n}`, `{,n}`, string literals and character classes
//! with escapes (`\n \r \t \" \\ \xHH \uHHHH \UHHHHHHHH` and escaped punctuation), negated classes,
//! `.` (any character), `#` comments, and `/regex/` terminals (an extension; see [`crate::frontend::regex`]).
//! Newlines end a rule unless they follow `::=` or `|` or sit inside parentheses.

use crate::runtime::error::{Error, Location, Result};
use crate::runtime::limits::Limits;
use crate::frontend::rx::Rx;

/// An expression of the grammar source.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// Sequence (empty = the empty string).
    Seq(Vec<Expr>),
    /// Alternatives.
    Alt(Vec<Expr>),
    /// Bounded or unbounded repetition.
    Repeat {
        /// Repeated expression.
        inner: Box<Expr>,
        /// Least count.
        min: u32,
        /// Most count, if bounded.
        max: Option<u32>,
    },
    /// A string literal, as UTF-8 bytes.
    Literal(Vec<u8>),
    /// A regular terminal (character class, `.`, or `/regex/`).
    Terminal(Rx),
    /// A reference to a rule, with the byte offset of the name in the source.
    Ref {
        /// Rule name.
        name: String,
        /// Byte offset in the source, for error messages.
        offset: usize,
    },
    /// A regular expression kept as one terminal of its own: never merged with neighbouring
    /// pieces, so its automaton and its token-mask cache entries are shared by every grammar
    /// that uses it (JSON string values, numbers, separators). Built programmatically; shared,
    /// so that a piece used all over a grammar (a JSON layout's separators) is one expression
    /// that lowering turns into symbols once.
    Token(std::sync::Arc<Expr>),
    /// One token matched by id, not by text (see [`crate::frontend::token_class`]). Built
    /// programmatically (Lark's `<|name|>`, structural tags' token formats); GBNF has no syntax
    /// for it.
    Tokens(std::sync::Arc<crate::frontend::token_class::TokenClass>),
    /// A key set: members in any order, each declared member at most once (see [`PermSpec`]).
    /// Built programmatically (JSON objects); GBNF has no syntax for it.
    Perm(Box<PermSpec>),
}

/// A sequence `m₁ sep m₂ sep … sep mₖ` of members in any order where each declared member
/// occurs at most once, every required member occurs, `extra` may occur any number of times
/// and `min ≤ k ≤ max`. This is the language of a JSON object body with any key order: no
/// finite set of plain context-free rules expresses it without exponential size, so the
/// parser tracks the set of members used (see [`crate::parser::cfg::Perm`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PermSpec {
    /// Declared members and whether each is required. Members must not match the empty string.
    pub members: Vec<(Expr, bool)>,
    /// A member that may repeat (e.g. additional properties), if any.
    pub extra: Option<Expr>,
    /// Separator between consecutive members.
    pub sep: Expr,
    /// Least number of members.
    pub min: u32,
    /// Most number of members, if bounded.
    pub max: Option<u32>,
}

/// One rule definition.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleDef {
    /// Rule name.
    pub name: String,
    /// Its expression.
    pub expr: Expr,
    /// Byte offset of the definition in the source.
    pub offset: usize,
}

/// A parsed grammar: its rules in source order and the source text (for error locations).
#[derive(Debug, Clone)]
pub struct GrammarAst {
    /// Rules in source order.
    pub rules: Vec<RuleDef>,
    /// The source text.
    pub source: String,
}

/// Parses GBNF text.
pub fn parse(src: &str, limits: &Limits) -> Result<GrammarAst> {
    let mut p = P { src, b: src.as_bytes(), pos: 0, depth: 0, limits };
    let mut rules = Vec::new();
    p.space(true);
    while p.pos < p.b.len() {
        rules.push(p.rule()?);
        p.space(true);
    }
    if rules.is_empty() {
        return Err(Error::GrammarInvalid { message: "the grammar is empty: it defines no rules".into(), location: None });
    }
    Ok(GrammarAst { rules, source: src.to_string() })
}

struct P<'a> {
    src: &'a str,
    b: &'a [u8],
    pos: usize,
    depth: usize,
    limits: &'a Limits,
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.'
}

impl P<'_> {
    fn err<T>(&self, at: usize, message: impl Into<String>) -> Result<T> {
        Err(Error::GrammarSyntax { message: message.into(), location: Location::at(self.src, at) })
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn space(&mut self, newline_ok: bool) {
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' => self.pos += 1,
                b'\r' | b'\n' if newline_ok => self.pos += 1,
                b'\\' if newline_ok || matches!(self.b.get(self.pos + 1), Some(b'\n') | Some(b'\r')) => {
                    // line continuation
                    if matches!(self.b.get(self.pos + 1), Some(b'\n') | Some(b'\r')) {
                        self.pos += 2;
                    } else {
                        return;
                    }
                }
                b'#' => {
                    while let Some(c) = self.peek() {
                        if c == b'\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                _ => return,
            }
        }
    }

    fn name(&mut self) -> Result<String> {
        let start = self.pos;
        while self.peek().is_some_and(is_word) {
            self.pos += 1;
        }
        if start == self.pos {
            return self.err(start, format!("expected a rule name, found {}", self.describe(start)));
        }
        Ok(self.src[start..self.pos].to_string())
    }

    fn describe(&self, at: usize) -> String {
        match self.src.get(at..).and_then(|s| s.chars().next()) {
            None => "end of input".into(),
            Some('\n') => "end of line".into(),
            Some(c) => format!("'{c}'"),
        }
    }

    fn rule(&mut self) -> Result<RuleDef> {
        let offset = self.pos;
        let name = self.name()?;
        self.space(false);
        if !self.b[self.pos..].starts_with(b"::=") {
            return self.err(self.pos, format!("expected '::=' after rule name '{name}', found {}", self.describe(self.pos)));
        }
        self.pos += 3;
        self.space(true);
        let expr = self.alternatives(false)?;
        self.space(false);
        match self.peek() {
            None | Some(b'\n') | Some(b'\r') => {}
            Some(b')') => return self.err(self.pos, "unbalanced ')': no matching '('"),
            _ => return self.err(self.pos, format!("unexpected {} (expected end of rule)", self.describe(self.pos))),
        }
        Ok(RuleDef { name, expr, offset })
    }

    fn alternatives(&mut self, nested: bool) -> Result<Expr> {
        let mut alts = vec![self.sequence(nested)?];
        loop {
            // An alternative may continue on the next line when that line starts with '|'.
            let save = self.pos;
            self.space(true);
            if self.peek() != Some(b'|') {
                self.pos = save;
                break;
            }
            self.pos += 1;
            self.space(true);
            alts.push(self.sequence(nested)?);
        }
        Ok(if alts.len() == 1 { alts.pop().unwrap() } else { Expr::Alt(alts) })
    }

    fn sequence(&mut self, nested: bool) -> Result<Expr> {
        let mut items = Vec::new();
        loop {
            self.space(nested);
            let start = self.pos;
            let item = match self.peek() {
                None | Some(b'|') | Some(b')') | Some(b'\n') | Some(b'\r') => break,
                Some(b'"') => Expr::Literal(self.literal()?),
                Some(b'[') => Expr::Terminal(self.class()?),
                Some(b'.') if !self.b.get(self.pos + 1).copied().is_some_and(is_word) => {
                    self.pos += 1;
                    Expr::Terminal(Rx::any_char())
                }
                Some(b'/') => Expr::Terminal(self.regex()?),
                Some(b'(') => {
                    self.depth += 1;
                    if self.depth > self.limits.max_nesting {
                        return self.err(start, format!("groups nested deeper than max_nesting = {}", self.limits.max_nesting));
                    }
                    self.pos += 1;
                    self.space(true);
                    let e = self.alternatives(true)?;
                    self.space(true);
                    if self.peek() != Some(b')') {
                        return self.err(start, format!("unbalanced '(': no matching ')' (found {} instead)", self.describe(self.pos)));
                    }
                    self.pos += 1;
                    self.depth -= 1;
                    e
                }
                Some(c) if is_word(c) => {
                    let name = self.name()?;
                    // A following `::=` means a new rule began without a newline.
                    let save = self.pos;
                    self.space(false);
                    if self.b[self.pos..].starts_with(b"::=") {
                        return self.err(start, format!("rule '{name}' starts before the previous rule ended (a rule must begin on a new line)"));
                    }
                    self.pos = save;
                    Expr::Ref { name, offset: start }
                }
                Some(b'*') | Some(b'+') | Some(b'?') | Some(b'{') => {
                    return self.err(start, format!("'{}' has nothing to repeat", self.peek().unwrap() as char))
                }
                Some(b']') => return self.err(start, "unbalanced ']': no matching '['"),
                _ => return self.err(start, format!("unexpected {}", self.describe(start))),
            };
            let item = self.postfix(item)?;
            items.push(item);
        }
        Ok(if items.len() == 1 { items.pop().unwrap() } else { Expr::Seq(items) })
    }

    fn postfix(&mut self, mut item: Expr) -> Result<Expr> {
        let mut count = 0usize;
        loop {
            self.space(false);
            let at = self.pos;
            let (min, max) = match self.peek() {
                Some(b'*') => (0, None),
                Some(b'+') => (1, None),
                Some(b'?') => (0, Some(1)),
                Some(b'{') => {
                    self.pos += 1;
                    self.space(false);
                    let min = self.number_opt()?.unwrap_or(0);
                    self.space(false);
                    let max = if self.peek() == Some(b',') {
                        self.pos += 1;
                        self.space(false);
                        self.number_opt()?
                    } else {
                        Some(min)
                    };
                    self.space(false);
                    if self.peek() != Some(b'}') {
                        return self.err(self.pos, format!("expected '}}' to close the repetition, found {}", self.describe(self.pos)));
                    }
                    if let Some(mx) = max {
                        if mx < min {
                            return self.err(at, format!("repetition {{{min},{mx}}} has its maximum below its minimum"));
                        }
                    }
                    (min, max)
                }
                _ => return Ok(item),
            };
            self.pos += 1;
            count += 1;
            if self.depth + count > self.limits.max_nesting {
                return self.err(at, format!("too many repetition operators on one item (max_nesting = {})", self.limits.max_nesting));
            }
            item = Expr::Repeat { inner: Box::new(item), min, max };
        }
    }

    fn number_opt(&mut self) -> Result<Option<u32>> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        if start == self.pos {
            return Ok(None);
        }
        match self.src[start..self.pos].parse::<u32>() {
            Ok(n) => Ok(Some(n)),
            Err(_) => self.err(start, "repetition count too large"),
        }
    }

    /// Reads one (possibly escaped) character inside a literal or class.
    fn char_(&mut self, in_class: bool) -> Result<u32> {
        let start = self.pos;
        let rest = &self.src[self.pos..];
        let Some(c) = rest.chars().next() else { return self.unterminated(in_class) };
        if c == '\n' && !in_class {
            return self.err(start, "newline inside a string literal (use \\n)");
        }
        self.pos += c.len_utf8();
        if c != '\\' {
            return Ok(c as u32);
        }
        let Some(e) = self.peek() else { return self.unterminated(in_class) };
        self.pos += 1;
        let hex = |p: &mut Self, n: usize| -> Result<u32> {
            let s = p.src.get(p.pos..p.pos + n).filter(|s| s.bytes().all(|b| b.is_ascii_hexdigit()));
            match s {
                Some(s) => {
                    p.pos += n;
                    let v = u32::from_str_radix(s, 16).unwrap();
                    if char::from_u32(v).is_none() {
                        return p.err(start, format!("escape {} is not a valid Unicode scalar value", &p.src[start..p.pos]));
                    }
                    Ok(v)
                }
                None => p.err(start, format!("invalid escape: '\\{}' needs {n} hex digits", e as char)),
            }
        };
        Ok(match e {
            b'n' => '\n' as u32,
            b'r' => '\r' as u32,
            b't' => '\t' as u32,
            b'f' => 0x0C,
            b'v' => 0x0B,
            b'b' => 0x08,
            b'0' => 0,
            b'x' => hex(self, 2)?,
            b'u' => hex(self, 4)?,
            b'U' => hex(self, 8)?,
            b'"' | b'\\' | b'[' | b']' | b'-' | b'^' | b'/' | b'.' | b'|' | b'(' | b')' | b'*' | b'+' | b'?' | b'{' | b'}' | b'\'' | b'#' | b' ' => e as u32,
            _ => {
                let shown = self.src[start..].chars().take(2).collect::<String>();
                return self.err(start, format!("invalid escape sequence '{shown}'"));
            }
        })
    }

    fn unterminated<T>(&self, in_class: bool) -> Result<T> {
        if in_class {
            self.err(self.pos, "unterminated character class: missing ']'")
        } else {
            self.err(self.pos, "unterminated string literal: missing '\"'")
        }
    }

    fn literal(&mut self) -> Result<Vec<u8>> {
        let open = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            match self.peek() {
                None => return self.err(open, "unterminated string literal: missing closing '\"'"),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out.into_bytes());
                }
                _ => {
                    let c = self.char_(false)?;
                    out.push(char::from_u32(c).unwrap());
                }
            }
        }
    }

    fn class(&mut self) -> Result<Rx> {
        let open = self.pos;
        self.pos += 1;
        let negated = self.peek() == Some(b'^');
        if negated {
            self.pos += 1;
        }
        let mut ranges = Vec::new();
        loop {
            match self.peek() {
                None => return self.err(open, "unterminated character class: missing ']'"),
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                _ => {
                    let at = self.pos;
                    let lo = self.char_(true)?;
                    let hi = if self.peek() == Some(b'-') && self.b.get(self.pos + 1) != Some(&b']') {
                        self.pos += 1;
                        if self.peek().is_none() {
                            return self.err(open, "unterminated character class: missing ']'");
                        }
                        let hi = self.char_(true)?;
                        if hi < lo {
                            return self.err(at, format!("character range {} is reversed", &self.src[at..self.pos]));
                        }
                        hi
                    } else {
                        lo
                    };
                    ranges.push((lo, hi));
                }
            }
        }
        Ok(Rx::char_class(&ranges, negated))
    }

    fn regex(&mut self) -> Result<Rx> {
        let open = self.pos;
        self.pos += 1;
        let start = self.pos;
        loop {
            match self.peek() {
                None | Some(b'\n') => return self.err(open, "unterminated regex: missing closing '/'"),
                Some(b'\\') => self.pos += 2,
                Some(b'/') => break,
                _ => self.pos += 1,
            }
        }
        let pat = &self.src[start..self.pos];
        self.pos += 1;
        match crate::frontend::regex::parse_regex(pat, self.limits) {
            Ok(rx) => Ok(rx),
            Err(Error::Regex { message, offset }) => self.err(start + offset.unwrap_or(0), message),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<GrammarAst> {
        parse(s, &Limits::default())
    }

    #[test]
    fn parses_json_gbnf_shape() {
        let g = p("root ::= object\nobject ::=\n  \"{\" ws (\n  a\n  )? \"}\"\nws ::= | \" \" | \"\\n\" [ \\t]{0,20}\na ::= \"x\"").unwrap();
        assert_eq!(g.rules.len(), 4);
        assert_eq!(g.rules[2].name, "ws");
    }

    #[test]
    fn errors_have_locations() {
        let e = p("root ::= \"abc").unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
        let e = p("root ::= (\"a\"\n").unwrap_err();
        assert!(e.to_string().contains("unbalanced '('"), "{e}");
        let e = p("root ::= \"a\" )").unwrap_err();
        assert!(e.to_string().contains("unbalanced ')'"), "{e}");
        let e = p("root ::= \"\\q\"").unwrap_err();
        assert!(e.to_string().contains("invalid escape"), "{e}");
        let e = p("root ::= [a-").unwrap_err();
        assert!(e.to_string().contains("unterminated character class"), "{e}");
        let e = p(&format!("root ::= \"a\"{}", "?".repeat(100_000))).unwrap_err();
        assert!(e.to_string().contains("too many repetition operators"), "{e}");
        let e = p(&format!("root ::= {}\"a\"{}", "(".repeat(100_000), ")".repeat(100_000))).unwrap_err();
        assert!(e.to_string().contains("nested deeper"), "{e}");
        let e = p("").unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
        let e = p("root ::= \"a\" b ::= c").unwrap_err();
        assert!(e.to_string().contains("starts before the previous rule ended"), "{e}");
        let e = p("root ::= \"a\"\nb ::= \"c\" ]").unwrap_err();
        assert!(e.to_string().contains("line 2, column 11"), "{e}");
    }
}
