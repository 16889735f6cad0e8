//! Lark grammars, in the dialect llguidance reads (and xgrammar's `from_lark`), compiled to the
//! same grammar IR as GBNF ([`corral_core::ebnf::GrammarAst`]).
//!
//! The language is the one Lark's Earley parser with `lexer='dynamic_complete'` defines: every
//! split of the text into terminals is tried, so a terminal's language is its full regular
//! language (a `/regex/` matches the strings it matches in full). `%ignore`d terminals may
//! appear before any terminal of a rule and at the end of the text.
//!
//! Supported:
//! * rules (`name: ...`, `?name`, `!name`, aliases `-> name`, priorities `.N`) and terminals
//!   (`NAME: ...`, priorities `.N`); `start` is the root;
//! * `|`, grouping, `[ ]`, `? * +`, `~ n`, `~ n..m`;
//! * string literals (Python escapes) with the `i` flag, `"a".."z"` ranges, `/regex/` with the
//!   flags `i`, `s`, `m`, `x`, `u`;
//! * `%import common.NAME` (`-> ALIAS`), `%import common (A, B)`, `%ignore`;
//! * llguidance's `%json { schema }` (an embedded JSON Schema), `%llguidance { }` (ignored).
//!
//! Refused with the construct named ([`crate::FormatError::Unsupported`]): rule templates,
//! `%declare`, `%override`, `%extend`, imports from files other than `common`, llguidance's
//! `%regex { }`, rule attributes (`[max_tokens=...]`, `[lazy]`, ...), and special-token
//! references (`<|name|>`, `<[id]>`): corral's core cannot put special tokens in a grammar yet.

use crate::FormatError;
use corral_core::ebnf::{Expr, GrammarAst, RuleDef};
use corral_core::error::{Error, Location};
use corral_core::rx::Rx;
use corral_core::{Grammar, Limits};
use std::collections::{HashMap, HashSet};

/// Root rule of the lowered grammar: `start`, then ignored terminals.
const ROOT: &str = "__lark_root";
/// The ignored terminals, one alternative each.
const IGNORE: &str = "__lark_ignore";

/// Compiles Lark grammar text (root rule `start`).
///
/// ```
/// use corral_core::Limits;
/// let g = corral_formats::lark::compile("start: NAME \"=\" NUMBER\n%import common.CNAME -> NAME\n%import common.NUMBER\n%import common.WS\n%ignore WS\n", &Limits::default()).unwrap();
/// assert!(g.num_terminals() > 0);
/// ```
pub fn compile(text: &str, limits: &Limits) -> crate::Result<Grammar> {
    let _budget = corral_core::budget::Scope::new(limits.max_compile_ms);
    let parsed = Parser::new(text, limits).grammar()?;
    let ast = lower(parsed, text)?;
    Ok(Grammar::from_ast(&ast, ROOT, &format!("lark:{text}"), limits)?)
}

/// An expression of a Lark definition, before `%ignore` is woven in.
#[derive(Debug, Clone)]
enum L {
    Seq(Vec<L>),
    Alt(Vec<L>),
    Rep(Box<L>, u32, Option<u32>),
    /// A terminal written in place: a literal or a regex.
    Lex(Expr),
    /// A reference to a rule (lowercase) or a terminal (uppercase), with its offset.
    Ref(String, usize),
    /// An embedded sub-grammar (`%json`): the name of its root rule.
    Embedded(String),
}

struct Def {
    name: String,
    terminal: bool,
    body: L,
    offset: usize,
}

struct Parsed {
    defs: Vec<Def>,
    ignores: Vec<L>,
    /// Rules of embedded grammars (`%json`), already lowered.
    embedded: Vec<RuleDef>,
}

fn is_terminal_name(name: &str) -> bool {
    name.trim_start_matches('_').starts_with(|c: char| c.is_ascii_uppercase())
}

// ------------------------------------------------------------------------------------ parser

struct Parser<'a> {
    src: &'a str,
    b: &'a [u8],
    pos: usize,
    depth: usize,
    limits: &'a Limits,
    embedded: Vec<RuleDef>,
    n_embedded: usize,
}

type R<T> = crate::Result<T>;

impl<'a> Parser<'a> {
    fn new(src: &'a str, limits: &'a Limits) -> Self {
        Parser { src, b: src.as_bytes(), pos: 0, depth: 0, limits, embedded: Vec::new(), n_embedded: 0 }
    }

    fn err<T>(&self, at: usize, message: impl Into<String>) -> R<T> {
        Err(FormatError::Grammar(Error::GrammarSyntax { message: message.into(), location: Location::at(self.src, at) }))
    }

    fn unsupported<T>(&self, at: usize, construct: impl Into<String>, message: impl Into<String>) -> R<T> {
        let l = Location::at(self.src, at);
        Err(FormatError::Unsupported { construct: construct.into(), at: format!("{}:{}", l.line, l.column), message: message.into() })
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn peek_at(&self, k: usize) -> Option<u8> {
        self.b.get(self.pos + k).copied()
    }

    fn starts(&self, s: &str) -> bool {
        self.b[self.pos..].starts_with(s.as_bytes())
    }

    /// Skips spaces, tabs and comments; with `newlines`, line breaks too.
    fn space(&mut self, newlines: bool) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\r') => self.pos += 1,
                Some(b'\n') if newlines => self.pos += 1,
                Some(b'/') if self.peek_at(1) == Some(b'/') => self.skip_line(),
                Some(b'#') => self.skip_line(),
                _ => return,
            }
        }
    }

    fn skip_line(&mut self) {
        while let Some(c) = self.peek() {
            if c == b'\n' {
                return;
            }
            self.pos += 1;
        }
    }

    /// Inside a definition: spaces, and a line break when the next line goes on with `|`.
    fn space_in_def(&mut self, nesting: usize) {
        loop {
            self.space(nesting > 0);
            if self.peek() != Some(b'\n') {
                return;
            }
            let save = self.pos;
            self.space(true);
            if self.peek() == Some(b'|') {
                continue;
            }
            self.pos = save;
            return;
        }
    }

    fn name(&mut self) -> Option<String> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || c == b'_' {
                self.pos += 1;
            } else {
                break;
            }
        }
        (self.pos > start).then(|| self.src[start..self.pos].to_string())
    }

    fn grammar(mut self) -> R<Parsed> {
        let mut defs = Vec::new();
        let mut ignores = Vec::new();
        let mut imported: HashSet<String> = HashSet::new();
        loop {
            self.space(true);
            let Some(c) = self.peek() else { break };
            let at = self.pos;
            if c == b'%' {
                self.statement(&mut defs, &mut ignores, &mut imported)?;
            } else if c.is_ascii_alphabetic() || c == b'_' || c == b'?' || c == b'!' {
                defs.push(self.definition()?);
            } else {
                return self.err(at, format!("expected a rule, a terminal or a %statement, found '{}'", self.char_at(at)));
            }
            self.end_of_line()?;
        }
        Ok(Parsed { defs, ignores, embedded: self.embedded })
    }

    fn char_at(&self, at: usize) -> String {
        self.src[at..].chars().next().map(|c| c.to_string()).unwrap_or_default()
    }

    fn end_of_line(&mut self) -> R<()> {
        self.space(false);
        match self.peek() {
            None | Some(b'\n') => Ok(()),
            Some(_) => self.err(self.pos, format!("unexpected '{}': a definition ends at the end of its line (go on with '|' on the next line, or inside parentheses)", self.char_at(self.pos))),
        }
    }

    fn definition(&mut self) -> R<Def> {
        let offset = self.pos;
        while matches!(self.peek(), Some(b'?' | b'!')) {
            self.pos += 1;
        }
        let Some(name) = self.name() else { return self.err(self.pos, "expected a rule or terminal name") };
        let terminal = is_terminal_name(&name);
        if !terminal && !name.trim_start_matches('_').starts_with(|c: char| c.is_ascii_lowercase()) {
            return self.err(offset, format!("'{name}': rule names are lowercase, terminal names uppercase"));
        }
        if self.peek() == Some(b'{') {
            return self.unsupported(self.pos, "rule template", format!("'{name}{{...}}': rule templates are not supported; write the rule out for each use"));
        }
        if self.peek() == Some(b'[') {
            return self.unsupported(self.pos, "rule attribute", format!("'{name}[...]': llguidance's rule attributes (max_tokens, lazy, stop, temperature, ...) are not supported"));
        }
        if self.peek() == Some(b'.') {
            // A priority: it decides between parses, never what parses (dynamic_complete Earley).
            self.pos += 1;
            if self.peek() == Some(b'-') {
                self.pos += 1;
            }
            if !self.peek().is_some_and(|c| c.is_ascii_digit()) {
                return self.err(self.pos, "expected a number after '.' (a priority)");
            }
            while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                self.pos += 1;
            }
        }
        self.space(false);
        if self.peek() != Some(b':') {
            return self.err(self.pos, format!("expected ':' after '{name}'"));
        }
        self.pos += 1;
        let body = self.expansions(0, !terminal)?;
        Ok(Def { name, terminal, body, offset })
    }

    fn statement(&mut self, defs: &mut Vec<Def>, ignores: &mut Vec<L>, imported: &mut HashSet<String>) -> R<()> {
        let at = self.pos;
        self.pos += 1;
        let word = self.name().unwrap_or_default();
        self.space(false);
        match word.as_str() {
            "ignore" => {
                let e = self.expansions(0, false)?;
                ignores.push(e);
                Ok(())
            }
            "import" => self.import(at, defs, imported),
            "llguidance" => {
                self.json_value(at)?;
                Ok(())
            }
            "declare" | "override" | "extend" => self.unsupported(at, format!("%{word}"), format!("%{word} is not supported")),
            "" => self.err(at, "expected a statement name after '%'"),
            other => self.unsupported(at, format!("%{other}"), format!("unknown statement %{other}")),
        }
    }

    fn import(&mut self, at: usize, defs: &mut Vec<Def>, imported: &mut HashSet<String>) -> R<()> {
        let path_at = self.pos;
        if self.peek() == Some(b'.') {
            return self.unsupported(at, "%import", "relative imports (another grammar file's rules) are not supported: only Lark's 'common' library is built in");
        }
        let mut path = Vec::new();
        while let Some(n) = self.name() {
            path.push(n);
            if self.peek() == Some(b'.') {
                self.pos += 1;
            } else {
                break;
            }
        }
        if path.is_empty() {
            return self.err(path_at, "expected a module path after %import");
        }
        self.space(false);
        // `%import common.NAME [-> ALIAS]` or `%import common (A, B, ...)`.
        let (module, names): (Vec<String>, Vec<(String, String)>) = if self.peek() == Some(b'(') {
            self.pos += 1;
            let mut names = Vec::new();
            loop {
                self.space(true);
                let Some(n) = self.name() else { return self.err(self.pos, "expected a name in the import list") };
                names.push((n.clone(), n));
                self.space(true);
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b')') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return self.err(self.pos, "expected ',' or ')' in the import list"),
                }
            }
            (path, names)
        } else {
            if path.len() < 2 {
                return self.err(path_at, "expected %import module.NAME");
            }
            let name = path.pop().unwrap();
            let mut alias = name.clone();
            if self.starts("->") {
                self.pos += 2;
                self.space(false);
                alias = match self.name() {
                    Some(a) => a,
                    None => return self.err(self.pos, "expected a name after '->'"),
                };
            }
            (path, vec![(name, alias)])
        };
        if module != ["common"] {
            return self.unsupported(at, "%import", format!("importing from '{}': only Lark's 'common' library is built in", module.join(".")));
        }
        for (name, alias) in names {
            import_common(&name, &alias, at, defs, imported, self.src, self.limits)?;
        }
        Ok(())
    }

    /// A JSON value (for `%json { ... }` and `%llguidance { ... }`), parsed with serde_json.
    fn json_value(&mut self, at: usize) -> R<serde_json::Value> {
        self.space(true);
        let rest = &self.src[self.pos..];
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<serde_json::Value>();
        match stream.next() {
            Some(Ok(v)) => {
                self.pos += stream.byte_offset();
                Ok(v)
            }
            Some(Err(e)) => {
                let l = Location::at(rest, 0);
                let _ = l;
                self.err(self.pos + byte_offset_of(rest, e.line(), e.column()), format!("invalid JSON after %{}: {e}", &self.src[at + 1..].split(|c: char| !c.is_alphanumeric()).next().unwrap_or("")))
            }
            None => self.err(self.pos, "expected a JSON value"),
        }
    }

    fn expansions(&mut self, nesting: usize, in_rule: bool) -> R<L> {
        self.depth += 1;
        if self.depth > self.limits.max_nesting {
            return Err(FormatError::Grammar(Error::Limit { name: "max_nesting", limit: self.limits.max_nesting, what: "the grammar nests too deeply".into(), hint: "pass a larger max_nesting in `limits=`" }));
        }
        let mut alts = vec![self.alias(nesting, in_rule)?];
        loop {
            self.space_in_def(nesting);
            if self.peek() == Some(b'|') {
                self.pos += 1;
                alts.push(self.alias(nesting, in_rule)?);
            } else {
                break;
            }
        }
        self.depth -= 1;
        Ok(if alts.len() == 1 { alts.pop().unwrap() } else { L::Alt(alts) })
    }

    fn alias(&mut self, nesting: usize, in_rule: bool) -> R<L> {
        let mut items = Vec::new();
        loop {
            self.space_in_def(nesting);
            match self.peek() {
                None | Some(b'\n' | b'|' | b')' | b']') => break,
                Some(b'-') if self.peek_at(1) == Some(b'>') => {
                    // An alias names the tree node; it does not change the language.
                    self.pos += 2;
                    self.space(false);
                    if self.name().is_none() {
                        return self.err(self.pos, "expected a name after '->'");
                    }
                    break;
                }
                Some(_) => items.push(self.expr(nesting, in_rule)?),
            }
        }
        Ok(if items.len() == 1 { items.pop().unwrap() } else { L::Seq(items) })
    }

    fn expr(&mut self, nesting: usize, in_rule: bool) -> R<L> {
        let atom = self.atom(nesting, in_rule)?;
        self.space(nesting > 0);
        Ok(match self.peek() {
            Some(b'*') => {
                self.pos += 1;
                L::Rep(Box::new(atom), 0, None)
            }
            Some(b'+') => {
                self.pos += 1;
                L::Rep(Box::new(atom), 1, None)
            }
            Some(b'?') => {
                self.pos += 1;
                L::Rep(Box::new(atom), 0, Some(1))
            }
            Some(b'~') => {
                self.pos += 1;
                self.space(false);
                let lo = self.number()?;
                self.space(false);
                let hi = if self.starts("..") {
                    self.pos += 2;
                    self.space(false);
                    self.number()?
                } else {
                    lo
                };
                if hi < lo {
                    return self.err(self.pos, format!("empty repetition range ~ {lo}..{hi}"));
                }
                if hi > self.limits.max_repeat {
                    return Err(FormatError::Grammar(Error::Limit { name: "max_repeat", limit: self.limits.max_repeat as usize, what: format!("repetition ~ {lo}..{hi}"), hint: "pass a larger max_repeat in `limits=`" }));
                }
                L::Rep(Box::new(atom), lo, Some(hi))
            }
            _ => atom,
        })
    }

    fn number(&mut self) -> R<u32> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        if start == self.pos {
            return self.err(start, "expected a number");
        }
        self.src[start..self.pos].parse().or_else(|_| self.err(start, "number too large"))
    }

    fn atom(&mut self, nesting: usize, in_rule: bool) -> R<L> {
        let at = self.pos;
        match self.peek() {
            Some(b'(') => {
                self.pos += 1;
                let e = self.expansions(nesting + 1, in_rule)?;
                self.space(true);
                if self.peek() != Some(b')') {
                    return self.err(self.pos, "expected ')'");
                }
                self.pos += 1;
                Ok(e)
            }
            Some(b'[') => {
                self.pos += 1;
                let e = self.expansions(nesting + 1, in_rule)?;
                self.space(true);
                if self.peek() != Some(b']') {
                    return self.err(self.pos, "expected ']'");
                }
                self.pos += 1;
                Ok(L::Rep(Box::new(e), 0, Some(1)))
            }
            Some(b'"') => {
                let (s, insensitive) = self.string()?;
                self.space(false);
                if self.starts("..") {
                    self.pos += 2;
                    self.space(false);
                    if self.peek() != Some(b'"') {
                        return self.err(self.pos, "expected a string after '..'");
                    }
                    let hi_at = self.pos;
                    let (hi, _) = self.string()?;
                    let (mut a, mut b) = (s.chars(), hi.chars());
                    let (Some(lo_c), None, Some(hi_c), None) = (a.next(), a.next(), b.next(), b.next()) else {
                        return self.err(hi_at, "a range \"a\"..\"z\" takes one character on each side");
                    };
                    if lo_c > hi_c {
                        return self.err(at, format!("empty range \"{lo_c}\"..\"{hi_c}\""));
                    }
                    return Ok(L::Lex(Expr::Terminal(Rx::char_class(&[(lo_c as u32, hi_c as u32)], false))));
                }
                if insensitive {
                    let rx = self.regex_rx(&format!("(?i:{})", escape_regex(&s)), at)?;
                    return Ok(L::Lex(Expr::Terminal(rx)));
                }
                Ok(L::Lex(Expr::Literal(s.into_bytes())))
            }
            Some(b'/') => {
                let rx = self.regex()?;
                Ok(L::Lex(Expr::Terminal(rx)))
            }
            Some(b'%') => {
                self.pos += 1;
                let word = self.name().unwrap_or_default();
                match word.as_str() {
                    "json" => {
                        let schema = self.json_value(at)?;
                        let l = Location::at(self.src, at);
                        let prefix = format!("__lark_json{}_", self.n_embedded);
                        self.n_embedded += 1;
                        let opts = corral_schema::Options { limits: self.limits.clone(), ..Default::default() };
                        let (rules, root) = crate::embed::schema_rules(&schema, &opts, &prefix, &format!("%json at {}:{}", l.line, l.column))?;
                        self.embedded.extend(rules);
                        Ok(L::Embedded(root))
                    }
                    "regex" => self.unsupported(at, "%regex", "llguidance's %regex { ... } is not supported; write a /regex/ terminal"),
                    other => self.unsupported(at, format!("%{other}"), format!("%{other} is not supported inside a rule")),
                }
            }
            Some(b'<') if matches!(self.peek_at(1), Some(b'|' | b'[')) => {
                let end = self.src[at..].find('>').map(|i| at + i + 1).unwrap_or(self.b.len());
                let what = &self.src[at..end];
                self.unsupported(at, format!("special token {what}"), "special tokens in grammars are not supported yet")
            }
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let name = self.name().unwrap();
                if self.peek() == Some(b'{') {
                    return self.unsupported(at, "rule template", format!("'{name}{{...}}': rule templates are not supported"));
                }
                let _ = in_rule;
                Ok(L::Ref(name, at))
            }
            Some(_) => self.err(at, format!("unexpected '{}'", self.char_at(at))),
            None => self.err(at, "unexpected end of the grammar"),
        }
    }

    /// A `"..."` literal with Python escapes, and whether the `i` flag follows.
    fn string(&mut self) -> R<(String, bool)> {
        let open = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.src[self.pos..].chars().next() else { return self.err(open, "unterminated string: missing closing '\"'") };
            match c {
                '"' => {
                    self.pos += 1;
                    break;
                }
                '\n' => return self.err(open, "unterminated string: missing closing '\"'"),
                '\\' => {
                    let esc_at = self.pos;
                    self.pos += 1;
                    let Some(e) = self.src[self.pos..].chars().next() else { return self.err(esc_at, "unterminated escape") };
                    self.pos += e.len_utf8();
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        'f' => out.push('\x0c'),
                        'v' => out.push('\x0b'),
                        'a' => out.push('\x07'),
                        'b' => out.push('\x08'),
                        '0' => out.push('\0'),
                        '\\' | '"' | '\'' => out.push(e),
                        'x' | 'u' | 'U' => {
                            let n = match e {
                                'x' => 2,
                                'u' => 4,
                                _ => 8,
                            };
                            let hex = self.src.get(self.pos..self.pos + n).unwrap_or("");
                            let v = u32::from_str_radix(hex, 16).ok().filter(|_| hex.len() == n);
                            match v.and_then(char::from_u32) {
                                Some(ch) => out.push(ch),
                                None => return self.err(esc_at, format!("invalid escape \\{e}{hex}")),
                            }
                            self.pos += n;
                        }
                        // Python keeps an unknown escape as written.
                        other => {
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
        let insensitive = self.peek() == Some(b'i') && !self.peek_at(1).is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_');
        if insensitive {
            self.pos += 1;
        }
        Ok((out, insensitive))
    }

    /// A `/regex/flags` terminal (Python `re` syntax; the common subset regex-syntax shares).
    fn regex(&mut self) -> R<Rx> {
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
        let body = &self.src[start..self.pos];
        self.pos += 1;
        let mut flags = String::new();
        while let Some(c) = self.peek() {
            match c {
                b'i' | b's' | b'm' | b'x' | b'u' => {
                    flags.push(c as char);
                    self.pos += 1;
                }
                b'l' => return self.unsupported(self.pos, "regex flag l", "the locale flag 'l' is not supported"),
                c if c.is_ascii_alphanumeric() => return self.err(self.pos, format!("unknown regex flag '{}'", c as char)),
                _ => break,
            }
        }
        // Python's `\/` is a slash; regex-syntax takes it too. `u` is the default (Unicode).
        let flags: String = flags.chars().filter(|&c| c != 'u').collect();
        let pattern = if flags.is_empty() { body.to_string() } else { format!("(?{flags}:{body})") };
        let shift = if flags.is_empty() { 0 } else { flags.len() + 3 };
        match corral_core::regex::parse_regex(&pattern, self.limits) {
            Ok(rx) => Ok(rx),
            Err(Error::Regex { message, offset }) => self.err(start + offset.unwrap_or(shift).saturating_sub(shift).min(body.len()), message),
            Err(e) => Err(e.into()),
        }
    }

    fn regex_rx(&self, pattern: &str, at: usize) -> R<Rx> {
        match corral_core::regex::parse_regex(pattern, self.limits) {
            Ok(rx) => Ok(rx),
            Err(Error::Regex { message, .. }) => self.err(at, message),
            Err(e) => Err(e.into()),
        }
    }
}

fn byte_offset_of(text: &str, line: usize, column: usize) -> usize {
    let mut off = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            return off + column.saturating_sub(1).min(l.len());
        }
        off += l.len();
    }
    text.len()
}

fn escape_regex(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_punctuation() || c == ' ' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

// ------------------------------------------------------------------------------------ common

/// Lark's `common` library, written out here (the same languages, as `dynamic_complete` lexes
/// them: the non-greedy string and comment terminals end at their first closing delimiter).
const COMMON: &str = r#"
DIGIT: "0".."9"
HEXDIGIT: "a".."f"|"A".."F"|DIGIT
INT: DIGIT+
SIGNED_INT: ["+"|"-"] INT
DECIMAL: INT "." INT? | "." INT
_EXP: ("e"|"E") SIGNED_INT
FLOAT: INT _EXP | DECIMAL _EXP?
SIGNED_FLOAT: ["+"|"-"] FLOAT
NUMBER: FLOAT | INT
SIGNED_NUMBER: ["+"|"-"] NUMBER
ESCAPED_STRING: /"([^"\\\n]|\\[^\n])*"/
LCASE_LETTER: "a".."z"
UCASE_LETTER: "A".."Z"
LETTER: UCASE_LETTER | LCASE_LETTER
WORD: LETTER+
CNAME: ("_"|LETTER) ("_"|LETTER|DIGIT)*
WS_INLINE: (" "|/\t/)+
WS: /[ \t\f\r\n]/+
CR: /\r/
LF: /\n/
NEWLINE: (CR? LF)+
SH_COMMENT: /#[^\n]*/
CPP_COMMENT: /\/\/[^\n]*/
C_COMMENT: /\/\*([^*]|\*+[^*\/])*\*+\//
SQL_COMMENT: /--[^\n]*/
"#;

fn import_common(name: &str, alias: &str, at: usize, defs: &mut Vec<Def>, imported: &mut HashSet<String>, src: &str, limits: &Limits) -> R<()> {
    let lib = Parser::new(COMMON, limits).grammar().expect("the built-in common library parses");
    let by_name: HashMap<&str, &Def> = lib.defs.iter().map(|d| (d.name.as_str(), d)).collect();
    let Some(root) = by_name.get(name) else {
        let l = Location::at(src, at);
        return Err(FormatError::Grammar(Error::GrammarSyntax { message: format!("common has no terminal '{name}'"), location: l }));
    };
    // The terminal under its alias, and the terminals it uses under private names.
    let mut stack = vec![(*root, alias.to_string())];
    while let Some((def, as_name)) = stack.pop() {
        if !imported.insert(as_name.clone()) {
            continue;
        }
        let mut body = def.body.clone();
        rename_common(&mut body, at, &mut |n| {
            let private = format!("__common_{n}");
            if let Some(d) = by_name.get(n) {
                stack.push((*d, private.clone()));
            }
            private
        });
        defs.push(Def { name: as_name, terminal: true, body, offset: at });
    }
    Ok(())
}

fn rename_common(l: &mut L, at: usize, f: &mut impl FnMut(&str) -> String) {
    match l {
        L::Seq(v) | L::Alt(v) => v.iter_mut().for_each(|x| rename_common(x, at, f)),
        L::Rep(x, ..) => rename_common(x, at, f),
        L::Ref(n, off) => {
            *n = f(n);
            *off = at;
        }
        L::Lex(_) | L::Embedded(_) => {}
    }
}

// ------------------------------------------------------------------------------------ lowering

fn lower(p: Parsed, src: &str) -> R<GrammarAst> {
    let mut names: HashMap<&str, bool> = HashMap::new();
    for d in &p.defs {
        if names.insert(d.name.as_str(), d.terminal).is_some() {
            return Err(FormatError::Grammar(Error::GrammarSyntax { message: format!("'{}' is defined twice", d.name), location: Location::at(src, d.offset) }));
        }
    }
    if !names.contains_key("start") {
        return Err(FormatError::Grammar(Error::GrammarInvalid { message: "the grammar has no 'start' rule (Lark's root)".into(), location: None }));
    }
    // A terminal may use terminals only.
    for d in p.defs.iter().filter(|d| d.terminal) {
        let mut bad = None;
        visit_refs(&d.body, &mut |n, off| {
            if bad.is_none() && names.get(n) == Some(&false) {
                bad = Some((n.to_string(), off));
            }
        });
        if let Some((n, off)) = bad {
            return Err(FormatError::Grammar(Error::GrammarSyntax { message: format!("terminal '{}' uses rule '{n}': terminals may use terminals only", d.name), location: Location::at(src, off) }));
        }
    }
    let has_ignore = !p.ignores.is_empty();
    let ign = || Expr::Repeat { inner: Box::new(Expr::Ref { name: IGNORE.into(), offset: 0 }), min: 0, max: None };
    let mut rules = Vec::new();
    for d in &p.defs {
        let expr = to_expr(&d.body, !d.terminal && has_ignore, &names, &ign);
        rules.push(RuleDef { name: d.name.clone(), expr, offset: d.offset });
    }
    let mut root = vec![Expr::Ref { name: "start".into(), offset: 0 }];
    if has_ignore {
        let alts = p.ignores.iter().map(|l| to_expr(l, false, &names, &ign)).collect();
        rules.push(RuleDef { name: IGNORE.into(), expr: Expr::Alt(alts), offset: 0 });
        root.push(ign());
    }
    rules.push(RuleDef { name: ROOT.into(), expr: Expr::Seq(root), offset: 0 });
    rules.extend(p.embedded);
    Ok(GrammarAst { rules, source: src.to_string() })
}

fn visit_refs(l: &L, f: &mut impl FnMut(&str, usize)) {
    match l {
        L::Seq(v) | L::Alt(v) => v.iter().for_each(|x| visit_refs(x, f)),
        L::Rep(x, ..) => visit_refs(x, f),
        L::Ref(n, off) => f(n, *off),
        L::Lex(_) | L::Embedded(_) => {}
    }
}

/// `l` as an IR expression; in a rule body with `%ignore`, each terminal (written in place or
/// named) and each embedded grammar may be preceded by ignored text.
fn to_expr(l: &L, weave: bool, names: &HashMap<&str, bool>, ign: &impl Fn() -> Expr) -> Expr {
    let lexeme = |e: Expr| if weave { Expr::Seq(vec![ign(), e]) } else { e };
    match l {
        L::Seq(v) => Expr::Seq(v.iter().map(|x| to_expr(x, weave, names, ign)).collect()),
        L::Alt(v) => Expr::Alt(v.iter().map(|x| to_expr(x, weave, names, ign)).collect()),
        L::Rep(x, min, max) => Expr::Repeat { inner: Box::new(to_expr(x, weave, names, ign)), min: *min, max: *max },
        L::Lex(e) => lexeme(e.clone()),
        L::Ref(n, off) => {
            let r = Expr::Ref { name: n.clone(), offset: *off };
            // An undefined name is left for lowering to report (with its line:col).
            if names.get(n.as_str()).copied().unwrap_or(is_terminal_name(n)) {
                lexeme(r)
            } else {
                r
            }
        }
        L::Embedded(root) => lexeme(Expr::Ref { name: root.clone(), offset: 0 }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(text: &str) -> crate::Result<Grammar> {
        compile(text, &Limits::default())
    }

    #[test]
    fn compiles_the_common_library_and_ignore() {
        c("start: NAME \"=\" NUMBER\n%import common.CNAME -> NAME\n%import common (NUMBER, WS)\n%ignore WS\n").unwrap();
        c("?start: sum\n?sum: product | sum \"+\" product\n?product: NUMBER\n    | product \"*\" NUMBER\n%import common.NUMBER\n").unwrap();
    }

    #[test]
    fn errors_name_line_and_column() {
        match c("start: \"a\"\nb: (\n") {
            Err(FormatError::Grammar(Error::GrammarSyntax { location, .. })) => assert_eq!(location.line, 3),
            other => panic!("{other:?}"),
        }
        match c("start: x\n") {
            Err(FormatError::Grammar(e)) => assert!(e.to_string().contains('x'), "{e}"),
            other => panic!("{other:?}"),
        }
        match c("start: <|eot_id|>\n") {
            Err(FormatError::Unsupported { construct, at, .. }) => {
                assert_eq!(construct, "special token <|eot_id|>");
                assert_eq!(at, "1:8");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(c("start: _sep{x}\n"), Err(FormatError::Unsupported { .. })));
        assert!(matches!(c("a: \"x\"\n"), Err(FormatError::Grammar(Error::GrammarInvalid { .. }))));
    }
}
