//! Lark grammars, in the dialect llguidance reads (and xgrammar's `from_lark`), compiled to a
//! [`corral_core::Grammar`] whose language is the one Lark's Earley parser accepts with
//! `lexer='dynamic_complete'`: the context-free language over characters, where `%ignore`d
//! terminals may appear before, between and after the tokens of rules.
//!
//! Supported: `rule:` / `TERMINAL:` definitions (with `?`/`!` prefixes, `.N` priorities,
//! `{params}` templates), `|`, `( )`, `[ ]`, `? * +`, `~ n`, `~ n..m`, `-> alias`, string
//! literals (with the `i` flag), `"a".."z"`, `/regex/flags` (`i s x m u`), `%import common.X`
//! (also `(A, B)` lists and `-> alias`), `%ignore`, and llguidance's `%json { schema }`,
//! `%regex { substring_chunks | substring_words | substring_chars }`, special tokens
//! (`<|name|>`, `<[id]>`, `<[a-b,c]>`, `<[^…]>`), `%llguidance {}` and rule attributes
//! (`capture`, `temperature`). Refused with [`FormatError::Unsupported`] naming the
//! construct: `%declare`, `%override`, `%extend`, imports other than `common`, other
//! `%regex` forms, attributes that
//! change the language or count tokens (`max_tokens`, `stop`, `lazy`, `suffix`...), grammar
//! references `@name`, the `&` and `~` lexeme operators of llguidance.

use crate::FormatError;
use corral_core::ebnf::{Expr, GrammarAst, RuleDef};
use corral_core::{Error, Location};
use corral_core::Rx;
use corral_core::{Grammar, Limits};
use std::collections::HashMap;

/// Name of the rule holding the alternatives of every `%ignore`d terminal.
const IGNORE_RULE: &str = "%ignore";
/// Name of the synthetic root: `%ignore* start`.
const ROOT_RULE: &str = "%start";

/// Compiles Lark grammar text (root rule `start`).
///
/// ```
/// let g = corral_formats::lark::compile("start: \"a\"+ NUMBER\n%import common.NUMBER\n", &Default::default()).unwrap();
/// assert!(g.num_rules() > 0);
/// ```
pub fn compile(text: &str, limits: &Limits) -> crate::Result<Grammar> {
    let parsed = parse(text, limits)?;
    let ast = Lowering::run(text, parsed, limits)?;
    Ok(Grammar::from_ast(&ast, ROOT_RULE, &format!("lark:{text}"), limits)?)
}

// ---------------------------------------------------------------------------------------------
// Syntax tree

#[derive(Debug, Clone)]
enum Node {
    Seq(Vec<Node>),
    Alt(Vec<Node>),
    Repeat { inner: Box<Node>, min: u32, max: Option<u32> },
    /// A string literal or a literal range or a regex: one anonymous token.
    Token(Rx),
    /// A rule, terminal or template-parameter name.
    Name { name: String, offset: usize },
    /// `name{args}`.
    Template { name: String, args: Vec<Node>, offset: usize },
    /// `%json { schema }`.
    Json { schema: serde_json::Value, offset: usize },
    /// A special token: `<name>`, `<[id]>`, `<[a-b,c]>`, `<[^…]>`.
    Tokens { class: corral_core::TokenClass, offset: usize },
}

#[derive(Debug)]
struct Def {
    name: String,
    params: Vec<String>,
    body: Node,
    offset: usize,
    terminal: bool,
}

#[derive(Debug, Default)]
struct Parsed {
    defs: Vec<Def>,
    ignores: Vec<(Node, usize)>,
    /// (name in common, local name, offset)
    imports: Vec<(String, String, usize)>,
}

fn is_terminal_name(name: &str) -> bool {
    name.trim_start_matches('_').starts_with(|c: char| c.is_ascii_uppercase())
}

// ---------------------------------------------------------------------------------------------
// Parser

struct P<'a> {
    src: &'a str,
    b: &'a [u8],
    pos: usize,
    /// Nesting of ( [ {: newlines are plain white space inside.
    nest: usize,
    depth: usize,
    limits: &'a Limits,
}

fn syntax(src: &str, at: usize, message: impl Into<String>) -> FormatError {
    FormatError::Grammar(Error::GrammarSyntax { message: message.into(), location: Location::at(src, at) })
}

fn line_col(src: &str, at: usize) -> String {
    let l = Location::at(src, at);
    format!("{}:{}", l.line, l.column)
}

fn parse(src: &str, limits: &Limits) -> crate::Result<Parsed> {
    let mut p = P { src, b: src.as_bytes(), pos: 0, nest: 0, depth: 0, limits };
    let mut out = Parsed::default();
    loop {
        p.skip_blank_lines();
        if p.pos >= p.b.len() {
            break;
        }
        p.item(&mut out)?;
        // The item must end at a newline or the end.
        p.space();
        if p.pos < p.b.len() && p.b[p.pos] != b'\n' && p.b[p.pos] != b'\r' {
            return Err(p.err_here("unexpected text after the end of the definition"));
        }
    }
    Ok(out)
}

impl<'a> P<'a> {
    fn err(&self, at: usize, message: impl Into<String>) -> FormatError {
        syntax(self.src, at, message)
    }

    fn err_here(&self, message: &str) -> FormatError {
        let what = match self.src[self.pos.min(self.src.len())..].chars().next() {
            None => "the end of the grammar".to_string(),
            Some('\n') | Some('\r') => "the end of the line".to_string(),
            Some(c) => format!("'{c}'"),
        };
        self.err(self.pos, format!("{message} (found {what})"))
    }

    fn unsupported(&self, at: usize, construct: impl Into<String>, message: impl Into<String>) -> FormatError {
        FormatError::Unsupported { construct: construct.into(), at: line_col(self.src, at), message: message.into() }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn starts(&self, s: &str) -> bool {
        self.b[self.pos..].starts_with(s.as_bytes())
    }

    fn skip_comment(&mut self) -> bool {
        if self.starts("//") || self.peek() == Some(b'#') {
            while self.pos < self.b.len() && self.b[self.pos] != b'\n' {
                self.pos += 1;
            }
            true
        } else {
            false
        }
    }

    /// Skips spaces and comments; newlines too inside brackets, or when the next line
    /// continues the definition with `|`.
    fn space(&mut self) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\x0c') => self.pos += 1,
                Some(b'\n' | b'\r') if self.nest > 0 => self.pos += 1,
                Some(b'\n' | b'\r') => {
                    // A following line starting with '|' continues the definition.
                    let save = self.pos;
                    self.skip_blank_lines();
                    if self.peek() == Some(b'|') {
                        continue;
                    }
                    self.pos = save;
                    return;
                }
                Some(b'/') | Some(b'#') if self.skip_comment() => {}
                _ => return,
            }
        }
    }

    fn skip_blank_lines(&mut self) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r' | b'\x0c') => self.pos += 1,
                Some(b'/') | Some(b'#') if self.skip_comment() => {}
                _ => return,
            }
        }
    }

    fn ident(&mut self) -> Option<(String, usize)> {
        let start = self.pos;
        while self.pos < self.b.len() && (self.b[self.pos].is_ascii_alphanumeric() || self.b[self.pos] == b'_') {
            self.pos += 1;
        }
        (self.pos > start).then(|| (self.src[start..self.pos].to_string(), start))
    }

    fn number(&mut self) -> crate::Result<u32> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.err_here("expected a number"));
        }
        self.src[start..self.pos].parse().map_err(|_| self.err(start, "number too large"))
    }

    fn expect(&mut self, s: &str, what: &str) -> crate::Result<()> {
        self.space();
        if self.starts(s) {
            self.pos += s.len();
            Ok(())
        } else {
            Err(self.err_here(&format!("expected {what}")))
        }
    }

    /// A JSON value starting at the current position (after spaces).
    /// llguidance's `%regex { "substring_chunks" | "substring_words" | "substring_chars": … }`:
    /// any run of consecutive chunks of a text (see [`substring_automaton`]).
    fn substring(&self, spec: &serde_json::Value, start: usize, spec_at: usize) -> crate::Result<Rx> {
        use serde_json::Value;
        let Value::Object(o) = spec else {
            return Err(self.err(spec_at, "%regex takes a JSON object"));
        };
        let mut keys = o.keys();
        let (Some(key), None) = (keys.next(), keys.next()) else {
            return Err(self.err(spec_at, "%regex takes exactly one of substring_chunks, substring_words, substring_chars"));
        };
        let text = |v: &Value| v.as_str().map(String::from).ok_or_else(|| self.err(spec_at, format!("'{key}' must be a string")));
        let chunks: Vec<String> = match (key.as_str(), &o[key]) {
            ("substring_chunks", Value::Array(a)) => a.iter().map(text).collect::<crate::Result<_>>()?,
            ("substring_chunks", _) => return Err(self.err(spec_at, "'substring_chunks' must be a list of strings")),
            ("substring_words", v) => chunk_words(&text(v)?),
            ("substring_chars", v) => text(v)?.chars().map(String::from).collect(),
            (other, _) => return Err(self.unsupported(start, format!("%regex {{\"{other}\": ...}}"), "only llguidance's substring forms (substring_chunks, substring_words, substring_chars) are supported")),
        };
        let a = substring_automaton(&chunks, SUBSTRING_STATES).ok_or_else(|| self.err(start, format!("this %regex would need more than {SUBSTRING_STATES} automaton states")))?;
        Ok(Rx::Automaton(std::sync::Arc::new(a)))
    }

    fn json(&mut self) -> crate::Result<serde_json::Value> {
        self.space();
        let start = self.pos;
        let mut it = serde_json::Deserializer::from_str(&self.src[start..]).into_iter::<serde_json::Value>();
        match it.next() {
            Some(Ok(v)) => {
                self.pos = start + it.byte_offset();
                Ok(v)
            }
            Some(Err(e)) => {
                // serde_json reports line/column relative to the value's start.
                let mut at = start;
                let mut line = 1;
                for (i, c) in self.src[start..].char_indices() {
                    if line == e.line() {
                        at = start + i + e.column().saturating_sub(1);
                        break;
                    }
                    if c == '\n' {
                        line += 1;
                    }
                }
                Err(self.err(at.min(self.src.len()), format!("invalid JSON: {e}")))
            }
            None => Err(self.err_here("expected a JSON value")),
        }
    }

    fn item(&mut self, out: &mut Parsed) -> crate::Result<()> {
        let start = self.pos;
        if self.peek() == Some(b'%') {
            self.pos += 1;
            let (kw, _) = self.ident().ok_or_else(|| self.err(start, "expected a directive name after '%'"))?;
            self.space();
            return match kw.as_str() {
                "ignore" => {
                    let body = self.expansions()?;
                    out.ignores.push((body, start));
                    Ok(())
                }
                "import" => self.import(out, start),
                "llguidance" => {
                    self.json()?;
                    Ok(())
                }
                "declare" | "override" | "extend" => Err(self.unsupported(
                    start,
                    format!("%{kw}"),
                    format!("%{kw} is not supported: write the grammar's definitions out in full (corral has no declared-only terminals or grammar composition)"),
                )),
                _ => Err(self.err(start, format!("unknown directive '%{kw}'"))),
            };
        }
        // A definition: [?!]name[{params}][[attrs]][.prio] : expansions
        if matches!(self.peek(), Some(b'?' | b'!')) {
            self.pos += 1;
        }
        let Some((name, name_at)) = self.ident() else {
            return Err(self.err_here("expected a rule or terminal definition"));
        };
        let terminal = is_terminal_name(&name);
        if !terminal && !name.trim_start_matches('_').starts_with(|c: char| c.is_ascii_lowercase()) {
            return Err(self.err(name_at, format!("'{name}' is not a valid name: rules are lowercase, terminals UPPERCASE")));
        }
        let mut params = Vec::new();
        self.space();
        if self.peek() == Some(b'{') {
            if terminal {
                return Err(self.err(self.pos, "terminals cannot have template parameters"));
            }
            self.pos += 1;
            self.nest += 1;
            loop {
                self.space();
                let (p, _) = self.ident().ok_or_else(|| self.err_here("expected a template parameter name"))?;
                params.push(p);
                self.space();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.err_here("expected ',' or '}' in the template parameters")),
                }
            }
            self.nest -= 1;
            self.space();
        }
        if self.peek() == Some(b'[') {
            self.attributes()?;
            self.space();
        }
        if self.peek() == Some(b'.') {
            // Priority: no effect on the language.
            self.pos += 1;
            if self.peek() == Some(b'-') {
                self.pos += 1;
            }
            self.number()?;
            self.space();
        }
        self.expect(":", "':' after the name of the definition")?;
        let body = self.expansions()?;
        out.defs.push(Def { name, params, body, offset: name_at, terminal });
        Ok(())
    }

    /// llguidance's `[key, key=value, ...]` after a rule name.
    fn attributes(&mut self) -> crate::Result<()> {
        self.pos += 1;
        self.nest += 1;
        loop {
            self.space();
            let at = self.pos;
            let (key, _) = self.ident().ok_or_else(|| self.err_here("expected an attribute name"))?;
            self.space();
            if self.peek() == Some(b'=') {
                self.pos += 1;
                self.space();
                if self.peek() == Some(b'"') {
                    self.string_body()?;
                } else if self.peek() == Some(b'/') {
                    self.regex_text()?;
                } else {
                    while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-' || c == b'_') {
                        self.pos += 1;
                    }
                }
            }
            match key.as_str() {
                "capture" | "temperature" => {}
                "max_tokens" => {
                    return Err(self.unsupported(at, "max_tokens", "token-count limits are not supported: corral constrains text, not the number of tokens"))
                }
                _ => {
                    return Err(self.unsupported(
                        at,
                        key.clone(),
                        format!("the rule attribute '{key}' changes how the rule matches in llguidance and is not supported (only 'capture' and 'temperature' are accepted, and ignored)"),
                    ))
                }
            }
            self.space();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(self.err_here("expected ',' or ']' in the rule attributes")),
            }
        }
        self.nest -= 1;
        Ok(())
    }

    fn import(&mut self, out: &mut Parsed, start: usize) -> crate::Result<()> {
        let path_at = self.pos;
        let mut path = Vec::new();
        if self.peek() == Some(b'.') {
            return Err(self.unsupported(start, "relative %import", "only '%import common.NAME' is supported; corral does not read other grammar files"));
        }
        loop {
            let (part, _) = self.ident().ok_or_else(|| self.err_here("expected a module name after %import"))?;
            path.push(part);
            if self.peek() == Some(b'.') {
                self.pos += 1;
            } else {
                break;
            }
        }
        self.space();
        let names: Vec<(String, String)> = if self.peek() == Some(b'(') {
            if path.len() != 1 {
                return Err(self.err(path_at, "expected '%import module (NAME, ...)'"));
            }
            self.pos += 1;
            self.nest += 1;
            let mut v = Vec::new();
            loop {
                self.space();
                let (n, _) = self.ident().ok_or_else(|| self.err_here("expected a name to import"))?;
                v.push((n.clone(), n));
                self.space();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b')') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.err_here("expected ',' or ')' in the import list")),
                }
            }
            self.nest -= 1;
            v
        } else {
            if path.len() < 2 {
                return Err(self.err(path_at, "expected '%import module.NAME'"));
            }
            let name = path.pop().unwrap_or_default();
            let mut local = name.clone();
            if self.starts("->") {
                self.pos += 2;
                self.space();
                local = self.ident().ok_or_else(|| self.err_here("expected a name after '->'"))?.0;
            }
            vec![(name, local)]
        };
        let module = path.join(".");
        if module != "common" {
            return Err(self.unsupported(start, format!("%import {module}"), "only the 'common' module of Lark is built in; copy the definitions you need into the grammar"));
        }
        for (name, local) in names {
            if common_def(&name).is_none() {
                return Err(self.unsupported(start, format!("common.{name}"), format!("'{name}' is not one of the common terminals corral provides ({})", COMMON.iter().map(|c| c.0).collect::<Vec<_>>().join(", "))));
            }
            if is_terminal_name(&name) != is_terminal_name(&local) {
                return Err(self.err(start, format!("cannot import terminal '{name}' as '{local}', which is not a terminal name")));
            }
            out.imports.push((name, local, start));
        }
        Ok(())
    }

    fn enter(&mut self) -> crate::Result<()> {
        self.depth += 1;
        if self.depth > self.limits.max_nesting {
            return Err(FormatError::Grammar(Error::Limit {
                name: "max_nesting",
                limit: self.limits.max_nesting,
                what: "the grammar nests too deeply".into(),
                hint: corral_core::LIMIT_HINT,
            }));
        }
        Ok(())
    }

    fn expansions(&mut self) -> crate::Result<Node> {
        self.enter()?;
        let mut alts = vec![self.alias()?];
        loop {
            self.space();
            if self.peek() == Some(b'|') {
                self.pos += 1;
                alts.push(self.alias()?);
            } else {
                break;
            }
        }
        self.depth -= 1;
        Ok(if alts.len() == 1 { alts.pop().unwrap_or(Node::Seq(vec![])) } else { Node::Alt(alts) })
    }

    fn alias(&mut self) -> crate::Result<Node> {
        let mut items = Vec::new();
        loop {
            self.space();
            match self.peek() {
                None | Some(b'|' | b')' | b']' | b'}' | b',' | b'\n' | b'\r') => break,
                Some(b'-') if self.starts("->") => {
                    self.pos += 2;
                    self.space();
                    self.ident().ok_or_else(|| self.err_here("expected an alias name after '->'"))?;
                    break;
                }
                _ => items.push(self.expr()?),
            }
        }
        Ok(if items.len() == 1 { items.pop().unwrap_or(Node::Seq(vec![])) } else { Node::Seq(items) })
    }

    fn expr(&mut self) -> crate::Result<Node> {
        let atom = self.atom()?;
        // Operators bind to the atom; no space allowed before them in Lark? Lark allows it.
        let save = self.pos;
        self.space_inline();
        match self.peek() {
            Some(b'*') => {
                self.pos += 1;
                Ok(Node::Repeat { inner: Box::new(atom), min: 0, max: None })
            }
            Some(b'+') => {
                self.pos += 1;
                Ok(Node::Repeat { inner: Box::new(atom), min: 1, max: None })
            }
            Some(b'?') => {
                self.pos += 1;
                Ok(Node::Repeat { inner: Box::new(atom), min: 0, max: Some(1) })
            }
            Some(b'~') => {
                let at = self.pos;
                self.pos += 1;
                self.space_inline();
                let lo = self.number()?;
                self.space_inline();
                let hi = if self.starts("..") {
                    self.pos += 2;
                    self.space_inline();
                    self.number()?
                } else {
                    lo
                };
                if hi < lo {
                    return Err(self.err(at, format!("bad repetition range ~ {lo}..{hi}: the maximum is below the minimum")));
                }
                Ok(Node::Repeat { inner: Box::new(atom), min: lo, max: Some(hi) })
            }
            _ => {
                self.pos = save;
                Ok(atom)
            }
        }
    }

    fn space_inline(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) || (self.nest > 0 && matches!(self.peek(), Some(b'\n' | b'\r'))) {
            self.pos += 1;
        }
    }

    /// The inside of `<[…]>`: `^`? then ids and inclusive ranges separated by commas.
    fn token_ids(&self, text: &str, at: usize) -> crate::Result<corral_core::TokenClass> {
        use corral_core::{TokenClass, TokenRef};
        let (negated, list) = match text.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let num = |s: &str| s.trim().parse::<u32>().map_err(|_| self.err(at, format!("'{s}' is not a token id in <[{text}]>")));
        let mut refs = Vec::new();
        for part in list.split(',') {
            refs.push(match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(self.err(at, format!("empty token range {a}-{b} in <[{text}]>")));
                    }
                    TokenRef::Range(a, b)
                }
                None => TokenRef::Id(num(part)?),
            });
        }
        Ok(if negated { TokenClass::AllBut(refs) } else { TokenClass::OneOf(refs) })
    }

    fn atom(&mut self) -> crate::Result<Node> {
        let start = self.pos;
        match self.peek() {
            Some(open @ (b'(' | b'[')) => {
                self.pos += 1;
                self.nest += 1;
                let inner = self.expansions()?;
                self.space();
                let close = if open == b'(' { b')' } else { b']' };
                if self.peek() != Some(close) {
                    if self.pos >= self.b.len() {
                        return Err(self.err(start, format!("this '{}' is never closed", open as char)));
                    }
                    return Err(self.err_here(&format!("expected '{}' to close the '{}' at {}", close as char, open as char, line_col(self.src, start))));
                }
                self.pos += 1;
                self.nest -= 1;
                Ok(if open == b'[' { Node::Repeat { inner: Box::new(inner), min: 0, max: Some(1) } } else { inner })
            }
            Some(b'"') => {
                let (s, ci) = self.string_body()?;
                self.space_inline();
                if self.starts("..") {
                    self.pos += 2;
                    self.space_inline();
                    let hi_at = self.pos;
                    if self.peek() != Some(b'"') {
                        return Err(self.err_here("expected a string after '..'"));
                    }
                    let (hi, _) = self.string_body()?;
                    let (mut a, mut b) = (s.chars(), hi.chars());
                    let (Some(lo), None, Some(h), None) = (a.next(), a.next(), b.next(), b.next()) else {
                        return Err(self.err(start, "a range \"a\"..\"z\" needs one character on each side"));
                    };
                    if h < lo {
                        return Err(self.err(hi_at, "the range's end is below its start"));
                    }
                    return Ok(Node::Token(Rx::char_class(&[(lo as u32, h as u32)], false)));
                }
                Ok(Node::Token(literal_rx(&s, ci)))
            }
            Some(b'/') => {
                let (pattern, flags, pat_at) = self.regex_text()?;
                Ok(Node::Token(self.regex_rx(&pattern, &flags, start, pat_at)?))
            }
            Some(b'%') => {
                self.pos += 1;
                let (kw, _) = self.ident().ok_or_else(|| self.err(start, "expected a directive name after '%'"))?;
                match kw.as_str() {
                    "json" => {
                        let schema = self.json()?;
                        Ok(Node::Json { schema, offset: start })
                    }
                    "regex" => {
                        let spec_at = self.pos;
                        let spec = self.json()?;
                        self.substring(&spec, start, spec_at).map(Node::Token)
                    }
                    "lark" => Err(self.unsupported(start, "%lark", "nested %lark grammars are not supported")),
                    _ => Err(self.err(start, format!("'%{kw}' cannot be used inside a rule"))),
                }
            }
            Some(b'<') => {
                // llguidance's special-token lexeme: `<` then no whitespace or angle bracket up to `>`.
                let len = self.src[start + 1..].find(|c: char| c == '<' || c == '>' || c.is_whitespace()).unwrap_or(self.src.len() - start - 1);
                let end = start + 1 + len;
                if len == 0 || self.src.as_bytes().get(end) != Some(&b'>') {
                    return Err(self.err(start, "expected a special token: <name>, <[id]> or <[a-b,c]>"));
                }
                self.pos = end + 1;
                let text = &self.src[start..=end];
                let class = match text.strip_prefix("<[").and_then(|t| t.strip_suffix("]>")) {
                    Some(ids) => self.token_ids(ids, start)?,
                    None => corral_core::TokenClass::OneOf(vec![corral_core::TokenRef::Name(text.to_string())]),
                };
                Ok(Node::Tokens { class, offset: start })
            }
            Some(b'@') => Err(self.unsupported(start, "grammar reference @", "references to other grammars (@name) are not supported")),
            Some(b'&') => Err(self.unsupported(start, "& (lexeme intersection)", "llguidance's '&' operator is not supported")),
            Some(b'~') => Err(self.unsupported(start, "~ (lexeme negation)", "llguidance's '~' negation operator is not supported")),
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let (name, at) = self.ident().unwrap_or_default();
                if self.peek() == Some(b'{') {
                    self.pos += 1;
                    self.nest += 1;
                    let mut args = Vec::new();
                    loop {
                        self.space();
                        args.push(self.expansions()?);
                        self.space();
                        match self.peek() {
                            Some(b',') => self.pos += 1,
                            Some(b'}') => {
                                self.pos += 1;
                                break;
                            }
                            _ => return Err(self.err_here("expected ',' or '}' in the template arguments")),
                        }
                    }
                    self.nest -= 1;
                    return Ok(Node::Template { name, args, offset: at });
                }
                Ok(Node::Name { name, offset: at })
            }
            _ => Err(self.err_here("expected a rule, a terminal, a string or a /regex/")),
        }
    }

    /// A `"..."` literal (the current byte is the quote) and its `i` flag.
    fn string_body(&mut self) -> crate::Result<(String, bool)> {
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.src[self.pos..].chars().next() else {
                return Err(self.err(start, "unterminated string"));
            };
            match c {
                '"' => {
                    self.pos += 1;
                    break;
                }
                '\n' => return Err(self.err(start, "unterminated string (a string cannot span lines)")),
                '\\' => {
                    let esc_at = self.pos;
                    self.pos += 1;
                    let Some(e) = self.src[self.pos..].chars().next() else {
                        return Err(self.err(start, "unterminated string"));
                    };
                    self.pos += e.len_utf8();
                    let hex = |p: &mut Self, n: usize| -> crate::Result<char> {
                        let h = p.src.get(p.pos..p.pos + n).filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
                        let v = h.and_then(|h| u32::from_str_radix(h, 16).ok()).and_then(char::from_u32);
                        let Some(v) = v else { return Err(p.err(esc_at, format!("bad escape: expected {n} hex digits"))) };
                        p.pos += n;
                        Ok(v)
                    };
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        'f' => out.push('\x0c'),
                        'v' => out.push('\x0b'),
                        'a' => out.push('\x07'),
                        'b' => out.push('\x08'),
                        '0' => out.push('\0'),
                        '\\' => out.push('\\'),
                        '"' => out.push('"'),
                        '\'' => out.push('\''),
                        'x' => out.push(hex(self, 2)?),
                        'u' => out.push(hex(self, 4)?),
                        'U' => out.push(hex(self, 8)?),
                        other => {
                            // Python keeps unknown escapes as they are.
                            out.push('\\');
                            out.push(other);
                        }
                    }
                }
                c => {
                    out.push(c);
                    self.pos += c.len_utf8();
                }
            }
        }
        let ci = self.peek() == Some(b'i') && !self.b.get(self.pos + 1).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
        if ci {
            self.pos += 1;
        }
        if out.is_empty() && !ci {
            return Ok((out, false));
        }
        Ok((out, ci))
    }

    /// A `/.../flags` regex (the current byte is the slash): pattern, flags, pattern offset.
    fn regex_text(&mut self) -> crate::Result<(String, String, usize)> {
        let start = self.pos;
        self.pos += 1;
        let pat_at = self.pos;
        let mut pattern = String::new();
        loop {
            let Some(c) = self.src[self.pos..].chars().next() else {
                return Err(self.err(start, "unterminated /regex/"));
            };
            match c {
                '/' => {
                    self.pos += 1;
                    break;
                }
                '\n' => return Err(self.err(start, "unterminated /regex/ (a regex cannot span lines)")),
                '\\' if self.b.get(self.pos + 1) == Some(&b'/') => {
                    pattern.push('/');
                    self.pos += 2;
                }
                '\\' => {
                    pattern.push('\\');
                    self.pos += 1;
                    if let Some(e) = self.src[self.pos..].chars().next() {
                        pattern.push(e);
                        self.pos += e.len_utf8();
                    }
                }
                c => {
                    pattern.push(c);
                    self.pos += c.len_utf8();
                }
            }
        }
        let fstart = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
            self.pos += 1;
        }
        Ok((pattern, self.src[fstart..self.pos].to_string(), pat_at))
    }

    fn regex_rx(&self, pattern: &str, flags: &str, start: usize, pat_at: usize) -> crate::Result<Rx> {
        let mut prefix = String::new();
        for f in flags.chars() {
            match f {
                'i' | 's' | 'x' | 'm' => {
                    prefix.push_str("(?");
                    prefix.push(f);
                    prefix.push(')');
                }
                'u' => {}
                other => {
                    return Err(self.unsupported(start, format!("regex flag '{other}'"), "only the flags i, s, x, m and u are supported"));
                }
            }
        }
        let full = format!("{prefix}{pattern}");
        corral_core::parse_regex(&full, self.limits).map_err(|e| match e {
            Error::Regex { message, offset } if message.contains("look-around") || message.contains("backreference") || message.contains("cannot be enforced") => {
                let construct = if message.contains("backreference") { "regex back-reference" } else { "regex look-around" };
                let at = offset.map(|o| pat_at + o.saturating_sub(prefix.len()).min(pattern.len())).filter(|a| self.src.is_char_boundary(*a)).unwrap_or(start);
                self.unsupported(
                    at,
                    construct,
                    format!("{message}; corral matches a terminal by its own text only (no look-around or back-references): rewrite /{pattern}/ without it"),
                )
            }
            Error::Regex { message, offset } => {
                // Point at the pattern's character when the offset is known (flags come first).
                let at = offset.map(|o| pat_at + o.saturating_sub(prefix.len()).min(pattern.len())).unwrap_or(start);
                let at = if self.src.is_char_boundary(at) { at } else { start };
                self.err(at, message)
            }
            e => FormatError::Grammar(e),
        })
    }
}

/// The language of a string literal, case-insensitive when `ci` (see [`case_class`]).
fn literal_rx(s: &str, ci: bool) -> Rx {
    if !ci {
        return Rx::Literal(s.as_bytes().to_vec());
    }
    Rx::concat(s.chars().map(|c| Rx::char_class(&case_class(c), false)).collect())
}

/// Groups of lowercase characters that Python's `re.IGNORECASE` also treats as equal
/// (Unicode's case equivalences beyond simple lowercase: `i ı`, `s ſ`, `µ μ`, Greek symbol
/// variants, Cyrillic small variants, `ṡ ẛ`, `ﬅ ﬆ`).
const EXTRA_CASES: &[&[u32]] = &[
    &[0x69, 0x131], &[0x73, 0x17f], &[0xb5, 0x3bc], &[0x345, 0x3b9, 0x1fbe], &[0x390, 0x1fd3], &[0x3b0, 0x1fe3],
    &[0x3b2, 0x3d0], &[0x3b5, 0x3f5], &[0x3b8, 0x3d1], &[0x3ba, 0x3f0], &[0x3c0, 0x3d6], &[0x3c1, 0x3f1],
    &[0x3c2, 0x3c3], &[0x3c6, 0x3d5], &[0x432, 0x1c80], &[0x434, 0x1c81], &[0x43e, 0x1c82], &[0x441, 0x1c83],
    &[0x442, 0x1c84, 0x1c85], &[0x44a, 0x1c86], &[0x463, 0x1c87], &[0x1c88, 0xa64b], &[0x1e61, 0x1e9b], &[0xfb05, 0xfb06],
];

/// A character's simple lowercase form (its one-character lowercase; `İ` is `i`).
fn simple_lower(c: char) -> u32 {
    if c == '\u{130}' {
        return 'i' as u32;
    }
    let mut l = c.to_lowercase();
    match (l.next(), l.next()) {
        (Some(x), None) => x as u32,
        _ => c as u32,
    }
}

/// The characters a `"…"i` literal's character `c` matches, as Lark's Python regex does:
/// those with the same simple lowercase form as `c`, merged by [`EXTRA_CASES`] (`"k"i`
/// matches `k`, `K` and the Kelvin sign; `"ß"i` matches `ß` and `ẞ`, not `SS`).
fn case_class(c: char) -> Vec<(u32, u32)> {
    static INVERSE: std::sync::OnceLock<HashMap<u32, Vec<u32>>> = std::sync::OnceLock::new();
    let inverse = INVERSE.get_or_init(|| {
        let mut m: HashMap<u32, Vec<u32>> = HashMap::new();
        for d in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let l = simple_lower(d);
            if l != d as u32 {
                m.entry(l).or_default().push(d as u32);
            }
        }
        m
    });
    let key = simple_lower(c);
    let keys: &[u32] = EXTRA_CASES.iter().copied().find(|g| g.contains(&key)).unwrap_or(std::slice::from_ref(&key));
    let mut set: Vec<(u32, u32)> = vec![(c as u32, c as u32)];
    for &k in keys {
        set.push((k, k));
        set.extend(inverse.get(&k).into_iter().flatten().map(|&d| (d, d)));
    }
    set
}

/// Most states of a `%regex` substring automaton.
const SUBSTRING_STATES: usize = 1 << 20;

/// `%regex`'s `substring_words` chunks: maximal runs of whitespace, of word characters
/// (alphanumeric or `_`), or of other characters.
fn chunk_words(text: &str) -> Vec<String> {
    let class = |c: char| if c.is_whitespace() { 0 } else if c.is_alphanumeric() || c == '_' { 1 } else { 2 };
    let mut out: Vec<String> = Vec::new();
    let mut prev = None;
    for c in text.chars() {
        match out.last_mut() {
            Some(last) if prev == Some(class(c)) => last.push(c),
            _ => out.push(c.to_string()),
        }
        prev = Some(class(c));
    }
    out
}

/// The strings `chunks[n..m].concat()` for `n <= m` (the empty string included), as a byte
/// automaton: the subset construction over positions (chunk, byte offset) of an automaton
/// that may start at any chunk boundary and stop at any. `None` past `max_states`.
fn substring_automaton(chunks: &[String], max_states: usize) -> Option<corral_core::ByteAutomaton> {
    // A position is (chunk index, offset inside it); (n, 0) is the end. Offsets are never the
    // chunk's length (that is the next chunk's boundary); empty chunks are skipped over.
    let n = chunks.len();
    let norm = |mut i: usize, off: usize| -> (u32, u32) {
        if off == 0 || (i < n && off == chunks[i].len()) {
            i += usize::from(off != 0);
            while i < n && chunks[i].is_empty() {
                i += 1;
            }
            return (i as u32, 0);
        }
        (i as u32, off as u32)
    };
    let mut start: Vec<(u32, u32)> = (0..=n).map(|i| norm(i, 0)).collect();
    start.sort_unstable();
    start.dedup();
    let mut ids: HashMap<Vec<(u32, u32)>, u32> = HashMap::new();
    let mut sets: Vec<Vec<(u32, u32)>> = vec![start.clone()];
    ids.insert(start, 0);
    let (mut trans, mut accept) = (Vec::new(), Vec::new());
    let mut k = 0;
    while k < sets.len() {
        let set = sets[k].clone();
        let mut by_byte: Vec<Vec<(u32, u32)>> = vec![Vec::new(); 256];
        for &(i, off) in &set {
            if let Some(&b) = chunks.get(i as usize).and_then(|c| c.as_bytes().get(off as usize)) {
                by_byte[b as usize].push(norm(i as usize, off as usize + 1));
            }
        }
        let mut row: Vec<(u8, u8, u32)> = Vec::new();
        for (b, mut next) in by_byte.into_iter().enumerate() {
            if next.is_empty() {
                continue;
            }
            next.sort_unstable();
            next.dedup();
            let id = match ids.get(&next) {
                Some(&id) => id,
                None => {
                    if sets.len() >= max_states {
                        return None;
                    }
                    let id = sets.len() as u32;
                    ids.insert(next.clone(), id);
                    sets.push(next);
                    id
                }
            };
            let b = b as u8;
            match row.last_mut() {
                Some(last) if last.2 == id && last.1 as u16 + 1 == b as u16 => last.1 = b,
                _ => row.push((b, b, id)),
            }
        }
        trans.push(row);
        accept.push(set.iter().any(|&(_, off)| off == 0));
        k += 1;
    }
    Some(corral_core::ByteAutomaton::new(trans, accept, 0))
}

// ---------------------------------------------------------------------------------------------
// Lark's common.lark, as regexes with the language Lark's Earley gives each terminal.

const COMMON: &[(&str, &str)] = &[
    ("DIGIT", r"[0-9]"),
    ("HEXDIGIT", r"[a-fA-F0-9]"),
    ("INT", r"[0-9]+"),
    ("SIGNED_INT", r"[+-]?[0-9]+"),
    ("DECIMAL", r"[0-9]+\.[0-9]*|\.[0-9]+"),
    ("_EXP", r"[eE][+-]?[0-9]+"),
    ("FLOAT", r"[0-9]+[eE][+-]?[0-9]+|([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"),
    ("SIGNED_FLOAT", r"[+-]?([0-9]+[eE][+-]?[0-9]+|([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)"),
    ("NUMBER", r"[0-9]+[eE][+-]?[0-9]+|([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[0-9]+"),
    ("SIGNED_NUMBER", r"[+-]?([0-9]+[eE][+-]?[0-9]+|([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[0-9]+)"),
    // The first '"' not escaped by an odd number of backslashes ends the string; '.' stops at newlines.
    ("ESCAPED_STRING", r#""([^"\\\n]|\\[^\n])*""#),
    ("LCASE_LETTER", r"[a-z]"),
    ("UCASE_LETTER", r"[A-Z]"),
    ("LETTER", r"[a-zA-Z]"),
    ("WORD", r"[a-zA-Z]+"),
    ("CNAME", r"[_a-zA-Z][_a-zA-Z0-9]*"),
    ("WS_INLINE", r"[ \t]+"),
    ("WS", r"[ \t\x0c\r\n]+"),
    ("CR", r"\r"),
    ("LF", r"\n"),
    ("NEWLINE", r"(\r?\n)+"),
    ("SH_COMMENT", r"#[^\n]*"),
    ("CPP_COMMENT", r"//[^\n]*"),
    // Lazy in Lark: the comment ends at the first "*/".
    ("C_COMMENT", r"/\*([^*]|\*+[^*/])*\*+/"),
    ("SQL_COMMENT", r"--[^\n]*"),
];

fn common_def(name: &str) -> Option<&'static str> {
    COMMON.iter().find(|c| c.0 == name).map(|c| c.1)
}

// ---------------------------------------------------------------------------------------------
// Lowering to the core's grammar IR

struct Lowering<'a> {
    src: &'a str,
    limits: &'a Limits,
    defs: HashMap<String, usize>,
    parsed: Parsed,
    rules: Vec<RuleDef>,
    /// Template instances made so far: key → rule name.
    instances: HashMap<String, String>,
    pending: Vec<(usize, Vec<Expr>, String)>,
    ignore: Option<Expr>,
    json_count: usize,
}

/// Template-parameter bindings of the definition being lowered.
type Bindings = HashMap<String, Expr>;

impl<'a> Lowering<'a> {
    fn run(src: &'a str, parsed: Parsed, limits: &'a Limits) -> crate::Result<GrammarAst> {
        let mut defs = HashMap::new();
        for (i, d) in parsed.defs.iter().enumerate() {
            if defs.insert(d.name.clone(), i).is_some() {
                return Err(syntax(src, d.offset, format!("'{}' is defined more than once", d.name)));
            }
        }
        let mut lw = Lowering { src, limits, defs, parsed, rules: Vec::new(), instances: HashMap::new(), pending: Vec::new(), ignore: None, json_count: 0 };
        // Imports.
        let imports = std::mem::take(&mut lw.parsed.imports);
        for (name, local, at) in &imports {
            if lw.defs.contains_key(local) || lw.rules.iter().any(|r| &r.name == local) {
                return Err(syntax(src, *at, format!("'{local}' is defined more than once (imported here)")));
            }
            let pattern = common_def(name).unwrap_or("");
            let rx = corral_core::parse_regex(pattern, limits)?;
            lw.rules.push(RuleDef { name: local.clone(), expr: Expr::Terminal(rx), offset: *at });
        }
        // The ignored terminals.
        let ignores = std::mem::take(&mut lw.parsed.ignores);
        if !ignores.is_empty() {
            let mut alts = Vec::new();
            for (node, _at) in &ignores {
                alts.push(lw.lower(node, true, &Bindings::new())?);
            }
            lw.rules.push(RuleDef { name: IGNORE_RULE.into(), expr: Expr::Alt(alts), offset: ignores[0].1 });
            lw.ignore = Some(Expr::Repeat { inner: Box::new(Expr::Ref { name: IGNORE_RULE.into(), offset: ignores[0].1 }), min: 0, max: None });
        }
        // Definitions (templates only through their instances).
        for i in 0..lw.parsed.defs.len() {
            if !lw.parsed.defs[i].params.is_empty() {
                continue;
            }
            let d = &lw.parsed.defs[i];
            let (name, offset, terminal) = (d.name.clone(), d.offset, d.terminal);
            let body = d.body.clone();
            let expr = lw.lower(&body, terminal, &Bindings::new())?;
            lw.rules.push(RuleDef { name, expr, offset });
        }
        while let Some((def, args, inst)) = lw.pending.pop() {
            let d = &lw.parsed.defs[def];
            let bind: Bindings = d.params.iter().cloned().zip(args).collect();
            let (body, offset) = (d.body.clone(), d.offset);
            let expr = lw.lower(&body, false, &bind)?;
            lw.rules.push(RuleDef { name: inst, expr, offset });
        }
        let Some(&start) = lw.defs.get("start") else {
            return Err(FormatError::Grammar(Error::GrammarInvalid { message: "the grammar has no 'start' rule".into(), location: None }));
        };
        if lw.parsed.defs[start].terminal || !lw.parsed.defs[start].params.is_empty() {
            return Err(syntax(src, lw.parsed.defs[start].offset, "'start' must be a plain rule"));
        }
        let start_ref = Expr::Ref { name: "start".into(), offset: lw.parsed.defs[start].offset };
        let root = match &lw.ignore {
            Some(ign) => Expr::Seq(vec![ign.clone(), start_ref]),
            None => start_ref,
        };
        lw.rules.push(RuleDef { name: ROOT_RULE.into(), expr: root, offset: 0 });
        Ok(GrammarAst { rules: lw.rules, source: src.to_string() })
    }

    /// A token of a rule body: followed by any ignored terminals.
    fn token(&self, e: Expr, in_terminal: bool) -> Expr {
        match (&self.ignore, in_terminal) {
            (Some(ign), false) => Expr::Seq(vec![e, ign.clone()]),
            _ => e,
        }
    }

    fn lower(&mut self, n: &Node, in_terminal: bool, bind: &Bindings) -> crate::Result<Expr> {
        Ok(match n {
            Node::Seq(v) => Expr::Seq(v.iter().map(|x| self.lower(x, in_terminal, bind)).collect::<crate::Result<_>>()?),
            Node::Alt(v) => Expr::Alt(v.iter().map(|x| self.lower(x, in_terminal, bind)).collect::<crate::Result<_>>()?),
            Node::Repeat { inner, min, max } => Expr::Repeat { inner: Box::new(self.lower(inner, in_terminal, bind)?), min: *min, max: *max },
            Node::Token(rx) => {
                let e = match rx {
                    Rx::Literal(b) => Expr::Literal(b.clone()),
                    rx => Expr::Terminal(rx.clone()),
                };
                self.token(e, in_terminal)
            }
            Node::Name { name, offset } => {
                if let Some(e) = bind.get(name) {
                    return Ok(e.clone());
                }
                let terminal = is_terminal_name(name);
                if in_terminal && !terminal {
                    return Err(syntax(self.src, *offset, format!("terminals cannot contain rules: '{name}' is a rule")));
                }
                if let Some(&i) = self.defs.get(name) {
                    if !self.parsed.defs[i].params.is_empty() {
                        return Err(syntax(self.src, *offset, format!("'{name}' is a template: use it as {name}{{...}}")));
                    }
                } else if !self.rules.iter().any(|r| &r.name == name) {
                    return Err(syntax(self.src, *offset, format!("'{name}' is not defined")));
                }
                let r = Expr::Ref { name: name.clone(), offset: *offset };
                if terminal {
                    self.token(r, in_terminal)
                } else {
                    r
                }
            }
            Node::Template { name, args, offset } => {
                if in_terminal {
                    return Err(syntax(self.src, *offset, "terminals cannot use templates"));
                }
                let Some(&def) = self.defs.get(name) else {
                    return Err(syntax(self.src, *offset, format!("template '{name}' is not defined")));
                };
                let nparams = self.parsed.defs[def].params.len();
                if nparams != args.len() {
                    return Err(syntax(self.src, *offset, format!("template '{name}' takes {nparams} arguments, not {}", args.len())));
                }
                let args: Vec<Expr> = args.iter().map(|a| self.lower(a, false, bind)).collect::<crate::Result<_>>()?;
                let key = format!("{name}{args:?}");
                if let Some(inst) = self.instances.get(&key) {
                    return Ok(Expr::Ref { name: inst.clone(), offset: *offset });
                }
                if self.instances.len() >= 10_000 {
                    return Err(syntax(self.src, *offset, "too many template instances (does a template instantiate itself with growing arguments?)"));
                }
                let inst = format!("{name}{{#{}}}", self.instances.len());
                self.instances.insert(key, inst.clone());
                self.pending.push((def, args, inst.clone()));
                Expr::Ref { name: inst, offset: *offset }
            }
            Node::Tokens { class, offset } => {
                if in_terminal {
                    return Err(syntax(self.src, *offset, format!("special token {} cannot be used inside a terminal (terminals match text)", class.label())));
                }
                self.token(Expr::Tokens(std::sync::Arc::new(class.clone())), false)
            }
            Node::Json { schema, offset } => {
                if in_terminal {
                    return Err(syntax(self.src, *offset, "%json cannot be used inside a terminal"));
                }
                let prefix = format!("%json{}.", self.json_count);
                self.json_count += 1;
                let opts = corral_schema::Options { limits: self.limits.clone(), ..Default::default() };
                let (rules, root) = crate::embed::schema_rules(schema, &opts, &prefix, &line_col(self.src, *offset))?;
                self.rules.extend(rules.into_iter().map(|mut r| {
                    r.offset = *offset;
                    r
                }));
                self.token(Expr::Ref { name: root, offset: *offset }, false)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(src: &str) -> Grammar {
        compile(src, &Limits::default()).unwrap_or_else(|e| panic!("{src}: {e}"))
    }

    fn err(src: &str) -> String {
        compile(src, &Limits::default()).err().unwrap_or_else(|| panic!("{src} compiled")).to_string()
    }

    #[test]
    fn compiles_basic_constructs() {
        ok("start: a+ b? [c] (a | b)* c ~ 2 d ~ 1..3\na: \"a\"\nb: /b+/i\nc: \"c\"i\nd: \"0\"..\"9\"\n");
        ok("?start: x -> alias\n!x.2: X\nX.-1: \"x\"\n");
        ok("start: WS NUMBER\n%import common.WS\n%import common (NUMBER, INT)\n");
        ok("start: NAME\n%import common.CNAME -> NAME\n");
        ok("start: _sep{item, \",\"}\n_sep{x, s}: x (s x)*\nitem: /[a-z]+/\n");
        ok("start: \"a\"\n    | \"b\"\n%ignore \" \"\n");
        ok("%llguidance {}\nstart: %json {\"type\": \"integer\"}\n");
        ok("start: x\nx[capture]: \"a\"\n");
    }

    #[test]
    fn refuses_with_the_construct_named() {
        for (src, construct) in [
            ("start: x\nx[max_tokens=5]: \"a\"\n", "max_tokens"),
            ("start: x\nx[lazy]: \"a\"\n", "lazy"),
            ("%declare X\nstart: \"a\"\n", "%declare"),
            ("start: \"a\"\n%import python.NAME\n", "%import python"),
            ("start: %regex {\"type\": \"number\"}\n", "%regex {\"type\": ...}"),
            ("start: /a/l\n", "regex flag 'l'"),
            ("start: /a(?!b)/\n", "regex look-around"),
        ] {
            match compile(src, &Limits::default()) {
                Err(FormatError::Unsupported { construct: c, at, .. }) => {
                    assert_eq!(c, construct, "{src}");
                    assert!(at.contains(':'), "{at}");
                }
                other => panic!("{src}: {other:?}"),
            }
        }
    }

    #[test]
    fn special_tokens() {
        // Bytes 0..=255, EOS 256, and the special tokens <|call|> (257) and <|end|> (258).
        let toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).chain([vec![], vec![], vec![]]).collect();
        let vocab = corral_core::Vocabulary::new(toks, vec![256], vec![257, 258], None).unwrap().with_token_names(vec![("<|call|>".into(), 257), ("<|end|>".into(), 258)]);
        let vocab = std::sync::Arc::new(vocab);
        let accepts = |src: &str, ids: &[u32]| {
            let g = compile(src, &Limits::default()).unwrap();
            corral_core::CompiledGrammar::check_tokens(&g, &vocab).unwrap();
            let mut m = corral_core::Matcher::new(std::sync::Arc::new(corral_core::CompiledGrammar::new(&g, vocab.clone())));
            ids.iter().all(|&i| m.accept_token(i).unwrap()) && m.is_accepting()
        };
        let by_name = "start: TEXT | call\ncall: <|call|> \"f(\" NUM \")\" <|end|>\nTEXT: /[^{]+/\nNUM: /[0-9]+/\n";
        let f = |s: &str| s.bytes().map(u32::from).collect::<Vec<_>>();
        assert!(accepts(by_name, &[&[257][..], &f("f(12)"), &[258]].concat()));
        assert!(accepts(by_name, &f("plain text")));
        assert!(!accepts(by_name, &[&f("x"), &[257][..]].concat()));
        // By id, by range list, and negated; with %ignore around them.
        assert!(accepts("start: <[257]> \"a\" <[1-3,258]>\n", &[257, 97, 258]));
        assert!(accepts("start: <[257]> \"a\" <[1-3,258]>\n", &[257, 97, 2]));
        assert!(!accepts("start: <[257]> \"a\" <[1-3,258]>\n", &[257, 97, 4]));
        assert!(accepts("start: <[^257]>+\n", &[258, 97]));
        assert!(!accepts("start: <[^257]>+\n", &[257]));
        assert!(accepts("start: \"a\" <|end|> \"b\"\n%ignore \" \"\n", &[97, 32, 258, 32, 98]));
        // Not inside terminals; names the vocabulary lacks fail on pairing.
        assert!(matches!(compile("start: X\nX: \"a\" <|end|>\n", &Limits::default()), Err(FormatError::Grammar(_))));
        let g = compile("start: <|nope|>\n", &Limits::default()).unwrap();
        assert!(corral_core::CompiledGrammar::check_tokens(&g, &vocab).unwrap_err().to_string().contains("<|nope|>"));
        assert!(compile("start: <[x]>\n", &Limits::default()).is_err());
    }

    #[test]
    fn syntax_errors_have_locations() {
        let e = compile("start: a\na: (\"x\"\n", &Limits::default()).unwrap_err();
        match e {
            FormatError::Grammar(Error::GrammarSyntax { location, .. }) => assert_eq!(location.line, 2),
            other => panic!("{other:?}"),
        }
        assert!(err("start: undefined_rule\n").contains("not defined"));
        assert!(err("start: \"a\"\nstart: \"b\"\n").contains("more than once"));
        assert!(err("A: a\na: \"x\"\nstart: A\n").contains("cannot contain rules"));
        assert!(err("x: \"a\"\n").contains("start"));
        assert!(err("start: /a(/\n").contains("regex"));
    }

    #[test]
    fn never_panics_on_fragments() {
        let src = "start: a{x, \"y\"} [b] (c | /d/i)~2..3 \"e\"..\"f\" %json {\"type\":\"string\"} -> z\n%ignore WS\n%import common.WS\n";
        for i in 0..=src.len() {
            if src.is_char_boundary(i) {
                let _ = compile(&src[..i], &Limits::default());
            }
        }
    }
}
