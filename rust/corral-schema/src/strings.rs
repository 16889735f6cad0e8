//! String languages: ECMA-262 patterns to code-point [`Rx`], JSON string encoding of a
//! code-point language (every character raw or escaped in every valid way), and formats.

use crate::shared_cache::SharedCache;
use corral_core::Rx;
use regex_syntax::hir::{Class, Hir, HirKind, Look};
use std::sync::Arc;

/// Any Unicode scalar value.
pub fn any_char() -> Rx {
    Rx::any_char()
}

/// `inner*`.
pub fn star(inner: Rx) -> Rx {
    Rx::Repeat { inner: std::sync::Arc::new(inner), min: 0, max: None }
}

/// `inner{min,max}`.
pub fn rep(inner: Rx, min: u32, max: Option<u32>) -> Rx {
    if max == Some(0) {
        return Rx::Empty;
    }
    if min == 1 && max == Some(1) {
        return inner;
    }
    Rx::Repeat { inner: std::sync::Arc::new(inner), min, max }
}

/// A literal (UTF-8 text).
pub fn lit(s: &str) -> Rx {
    if s.is_empty() {
        Rx::Empty
    } else {
        Rx::Literal(s.as_bytes().to_vec())
    }
}

/// One character from `a..=b`.
pub fn range(a: char, b: char) -> Rx {
    Rx::Chars(vec![(a as u32, b as u32)])
}

/// Why a pattern cannot be used.
#[derive(Debug, Clone)]
pub struct PatternError(pub String);

/// Translates an ECMA-262 pattern to the code-point language of the strings it matches
/// *somewhere* (JSON Schema `pattern` semantics: unanchored search). Characters are
/// Unicode code points (as with the `u` flag).
pub fn ecma_search(pattern: &str) -> Result<Rx, PatternError> {
    let translated = translate_ecma(pattern)?;
    let hir = regex_syntax::ParserBuilder::new()
        .nest_limit(200)
        .build()
        .parse(&translated)
        .map_err(|e| PatternError(format!("cannot parse pattern /{pattern}/: {e}")))?;
    search_lang(&hir, pattern)
}

/// Like [`ecma_search`] but the pattern must match the whole string.
pub fn ecma_full(pattern: &str) -> Result<Rx, PatternError> {
    let translated = translate_ecma(pattern)?;
    let hir = regex_syntax::ParserBuilder::new()
        .build()
        .parse(&translated)
        .map_err(|e| PatternError(format!("cannot parse regex /{pattern}/: {e}")))?;
    convert(&hir, pattern)
}

const ECMA_WS: &str = r"\t\n\x0B\x0C\r \xA0\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}";

fn class_escape(c: char, in_class: bool) -> Option<String> {
    let (body, neg) = match c {
        'd' => ("0-9", false),
        'D' => ("0-9", true),
        'w' => ("A-Za-z0-9_", false),
        'W' => ("A-Za-z0-9_", true),
        's' => (ECMA_WS, false),
        'S' => (ECMA_WS, true),
        _ => return None,
    };
    Some(if in_class {
        if neg {
            format!("[^{body}]")
        } else {
            body.to_string()
        }
    } else if neg {
        format!("[^{body}]")
    } else {
        format!("[{body}]")
    })
}

fn hexval(s: &[char]) -> Option<u32> {
    let t: String = s.iter().collect();
    if s.iter().all(|c| c.is_ascii_hexdigit()) {
        u32::from_str_radix(&t, 16).ok()
    } else {
        None
    }
}

/// Rewrites ECMA-262 syntax into `regex-syntax` syntax, rejecting what cannot be enforced.
fn translate_ecma(p: &str) -> Result<String, PatternError> {
    let c: Vec<char> = p.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let mut in_class = false;
    let unsupported = |what: &str| Err(PatternError(format!("pattern /{p}/ uses {what}, which a grammar cannot enforce")));
    while i < c.len() {
        let ch = c[i];
        if ch == '\\' {
            let Some(&e) = c.get(i + 1) else { return Err(PatternError(format!("pattern /{p}/ ends with a lone backslash"))) };
            i += 2;
            if let Some(s) = class_escape(e, in_class) {
                out.push_str(&s);
                // (ECMA-262 Annex B: in a class, a `-` after a class escape is literal — `[\w-.]`
                // is word characters, `-` and `.` — as is one before it, below; `regex-syntax`
                // would read a range.)
                if in_class && c.get(i) == Some(&'-') && c.get(i + 1).is_some_and(|&n| n != ']') {
                    out.push_str(r"\-");
                    i += 1;
                }
                continue;
            }
            match e {
                'b' if in_class => out.push_str(r"\x08"),
                'b' | 'B' => return unsupported("a word-boundary assertion (\\b)"),
                '1'..='9' => return unsupported("a backreference"),
                'k' => return unsupported("a named backreference"),
                '0' => out.push_str(r"\x00"),
                'c' => {
                    let Some(&l) = c.get(i).filter(|l| l.is_ascii_alphabetic()) else { return unsupported("an invalid \\c escape") };
                    i += 1;
                    out.push_str(&format!(r"\x{{{:X}}}", (l as u32) % 32));
                }
                'u' => {
                    if c.get(i) == Some(&'{') {
                        let end = c[i..].iter().position(|&x| x == '}').map(|k| i + k).ok_or_else(|| PatternError(format!("bad \\u{{}} in /{p}/")))?;
                        let v = hexval(&c[i + 1..end]).ok_or_else(|| PatternError(format!("bad \\u{{}} in /{p}/")))?;
                        i = end + 1;
                        out.push_str(&format!(r"\x{{{v:X}}}"));
                    } else {
                        let v = c.get(i..i + 4).and_then(hexval).ok_or_else(|| PatternError(format!("bad \\u escape in /{p}/")))?;
                        i += 4;
                        // surrogate pair
                        if (0xD800..0xDC00).contains(&v) && c.get(i) == Some(&'\\') && c.get(i + 1) == Some(&'u') {
                            if let Some(lo) = c.get(i + 2..i + 6).and_then(hexval).filter(|lo| (0xDC00..0xE000).contains(lo)) {
                                i += 6;
                                let cp = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
                                out.push_str(&format!(r"\x{{{cp:X}}}"));
                                continue;
                            }
                        }
                        if (0xD800..0xE000).contains(&v) {
                            return unsupported("a lone surrogate escape");
                        }
                        out.push_str(&format!(r"\x{{{v:X}}}"));
                    }
                }
                'x' => {
                    let v = c.get(i..i + 2).and_then(hexval).ok_or_else(|| PatternError(format!("bad \\x escape in /{p}/")))?;
                    i += 2;
                    out.push_str(&format!(r"\x{{{v:X}}}"));
                }
                'p' | 'P' => {
                    out.push('\\');
                    out.push(e);
                    if c.get(i) == Some(&'{') {
                        while i < c.len() {
                            out.push(c[i]);
                            i += 1;
                            if c[i - 1] == '}' {
                                break;
                            }
                        }
                    } else if let Some(&l) = c.get(i) {
                        out.push(l);
                        i += 1;
                    }
                }
                'n' | 'r' | 't' | 'f' | 'v' => {
                    out.push_str(match e {
                        'n' => r"\n",
                        'r' => r"\r",
                        't' => r"\t",
                        'f' => r"\x0C",
                        _ => r"\x0B",
                    });
                }
                _ if e.is_ascii_alphanumeric() => return Err(PatternError(format!("pattern /{p}/ uses the unknown escape \\{e}"))),
                _ => {
                    // identity escape of punctuation
                    out.push_str(&escape_char(e));
                }
            }
            continue;
        }
        i += 1;
        if in_class {
            match ch {
                ']' => {
                    in_class = false;
                    out.push(']');
                }
                '[' | '&' | '~' => out.push_str(&escape_char(ch)),
                '-' if c.get(i) == Some(&'-') => out.push_str(r"\-"),
                '-' if c.get(i) == Some(&'\\') && c.get(i + 1).is_some_and(|&e| "dDwWsS".contains(e)) => out.push_str(r"\-"),
                _ => out.push_str(&escape_char_in_class(ch)),
            }
            continue;
        }
        match ch {
            '[' => {
                if c.get(i) == Some(&'^') && c.get(i + 1) == Some(&']') {
                    i += 2;
                    out.push_str(r"[\x{0}-\x{10FFFF}]");
                } else if c.get(i) == Some(&']') {
                    i += 1;
                    out.push_str(r"[a&&b]");
                } else {
                    in_class = true;
                    out.push('[');
                    if c.get(i) == Some(&'^') {
                        out.push('^');
                        i += 1;
                    }
                    // a leading ']' is not literal in ECMA ([]...] is the empty class + "]..."), handled above
                }
            }
            '.' => out.push_str(r"[^\n\r\x{2028}\x{2029}]"),
            '(' => {
                if c.get(i) == Some(&'?') {
                    match (c.get(i + 1), c.get(i + 2)) {
                        (Some('='), _) | (Some('!'), _) => return unsupported("a lookahead assertion"),
                        (Some('<'), Some('=')) | (Some('<'), Some('!')) => return unsupported("a lookbehind assertion"),
                        (Some('<'), _) => {
                            out.push_str("(?P<");
                            i += 2;
                            continue;
                        }
                        (Some(':'), _) => {}
                        _ => return Err(PatternError(format!("pattern /{p}/ uses an unknown group syntax"))),
                    }
                }
                out.push('(');
            }
            '{' => {
                // A quantifier only if it has the form {n}, {n,} or {n,m}; else a literal brace.
                let rest: String = c[i..].iter().take(40).collect();
                let is_q = rest.find('}').is_some_and(|end| {
                    let inner = &rest[..end];
                    let mut parts = inner.splitn(2, ',');
                    let a = parts.next().unwrap_or("");
                    let b = parts.next();
                    !a.is_empty() && a.chars().all(|x| x.is_ascii_digit()) && b.is_none_or(|b| b.chars().all(|x| x.is_ascii_digit()))
                });
                if is_q {
                    out.push('{');
                } else {
                    out.push_str(r"\{");
                }
            }
            '}' => {
                // closing a quantifier we opened?
                let opened = out.rfind('{').is_some_and(|k| !out[..k].ends_with('\\') && !out[k..].contains('}'));
                if opened {
                    out.push('}');
                } else {
                    out.push_str(r"\}");
                }
            }
            _ => out.push(ch),
        }
    }
    if in_class {
        return Err(PatternError(format!("pattern /{p}/ has an unterminated character class")));
    }
    Ok(out)
}

fn escape_char(c: char) -> String {
    if c.is_ascii_punctuation() {
        format!("\\x{{{:X}}}", c as u32)
    } else {
        c.to_string()
    }
}

fn escape_char_in_class(c: char) -> String {
    match c {
        '^' | '-' => c.to_string(),
        _ if c.is_ascii_punctuation() => format!("\\x{{{:X}}}", c as u32),
        _ => c.to_string(),
    }
}

/// The language of strings containing a match of `h`.
fn search_lang(h: &Hir, pattern: &str) -> Result<Rx, PatternError> {
    // Group the variants by anchoring so that one `.*` prefix and suffix wraps all unanchored
    // bodies: `.*(a|b|c).*`, not `.*a.*|.*b.*|.*c.*`, whose subset construction tracks each
    // branch's progress separately and grows exponentially with the number of branches.
    let mut groups: [Vec<Rx>; 4] = Default::default();
    for (s, body, e) in variants(h, pattern)? {
        groups[(s as usize) << 1 | e as usize].push(body);
    }
    let mut alts = Vec::new();
    for (g, bodies) in groups.into_iter().enumerate() {
        if bodies.is_empty() {
            continue;
        }
        let (s, e) = (g & 2 != 0, g & 1 != 0);
        let mut parts = Vec::new();
        if !s {
            parts.push(star(any_char()));
        }
        parts.push(Rx::alt(bodies));
        if !e {
            parts.push(star(any_char()));
        }
        alts.push(Rx::concat(parts));
    }
    Ok(Rx::alt(alts))
}

/// A compiled ECMA-262 pattern for testing concrete strings (JSON Schema `pattern` semantics:
/// a match anywhere unless anchored). Unlike an automaton of the pattern's language, its size
/// never depends on how the pattern's branches interact.
pub fn ecma_matcher(pattern: &str) -> Result<regex::Regex, PatternError> {
    let translated = translate_ecma(pattern)?;
    regex::RegexBuilder::new(&translated)
        .size_limit(1 << 24)
        .build()
        .map_err(|e| PatternError(format!("cannot compile pattern /{pattern}/: {e}")))
}

type Variant = (bool, Rx, bool);

/// Alternatives of `h` as (anchored at start, body, anchored at end).
fn variants(h: &Hir, pattern: &str) -> Result<Vec<Variant>, PatternError> {
    let anchor_err = || PatternError(format!("pattern /{pattern}/ uses an anchor or assertion inside the pattern, which a grammar cannot enforce here"));
    Ok(match h.kind() {
        HirKind::Look(Look::Start) => vec![(true, Rx::Empty, false)],
        HirKind::Look(Look::End) => vec![(false, Rx::Empty, true)],
        HirKind::Look(_) => return Err(anchor_err()),
        HirKind::Capture(c) => variants(&c.sub, pattern)?,
        HirKind::Alternation(xs) => {
            let mut out = Vec::new();
            for x in xs {
                out.extend(variants(x, pattern)?);
            }
            out
        }
        HirKind::Concat(xs) => {
            let mut acc: Vec<Variant> = vec![(false, Rx::Empty, false)];
            for x in xs {
                let vs = variants(x, pattern)?;
                let mut next = Vec::new();
                for (s1, b1, e1) in &acc {
                    for (s2, b2, e2) in &vs {
                        // an end anchor followed by more input, or input before a start anchor
                        if *e1 && *b2 != Rx::Empty {
                            if b2.nullable() {
                                return Err(anchor_err());
                            }
                            continue;
                        }
                        if *s2 && *b1 != Rx::Empty {
                            if b1.nullable() {
                                return Err(anchor_err());
                            }
                            continue;
                        }
                        next.push((*s1 || *s2, Rx::concat(vec![b1.clone(), b2.clone()]), *e1 || *e2));
                    }
                }
                if next.len() > 256 {
                    return Err(PatternError(format!("pattern /{pattern}/ has too many anchored alternatives")));
                }
                acc = next;
            }
            acc
        }
        _ => vec![(false, convert(h, pattern)?, false)],
    })
}

fn convert(h: &Hir, pattern: &str) -> Result<Rx, PatternError> {
    Ok(match h.kind() {
        HirKind::Empty => Rx::Empty,
        HirKind::Literal(l) => Rx::Literal(l.0.to_vec()),
        HirKind::Class(Class::Unicode(c)) => {
            let r: Vec<(u32, u32)> = c.ranges().iter().map(|r| (r.start() as u32, r.end() as u32)).collect();
            Rx::char_class(&r, false)
        }
        HirKind::Class(Class::Bytes(_)) => return Err(PatternError(format!("pattern /{pattern}/ uses a byte class"))),
        HirKind::Look(_) => {
            return Err(PatternError(format!(
                "pattern /{pattern}/ uses an anchor or assertion inside the pattern, which a grammar cannot enforce here"
            )))
        }
        HirKind::Repetition(r) => {
            if r.min > 10_000 || r.max.is_some_and(|m| m > 10_000) {
                return Err(PatternError(format!("pattern /{pattern}/ has a repetition count above 10000")));
            }
            Rx::Repeat { inner: std::sync::Arc::new(convert(&r.sub, pattern)?), min: r.min, max: r.max }
        }
        HirKind::Capture(c) => convert(&c.sub, pattern)?,
        HirKind::Concat(xs) => Rx::concat(xs.iter().map(|x| convert(x, pattern)).collect::<Result<_, _>>()?),
        HirKind::Alternation(xs) => Rx::alt(xs.iter().map(|x| convert(x, pattern)).collect::<Result<_, _>>()?),
    })
}

// ---------------------------------------------------------------------------------------------
// JSON string encoding
// ---------------------------------------------------------------------------------------------

/// Encodes code-point languages as the JSON string bodies that spell them.
#[derive(Default)]
pub struct Encoder {
    /// [`Encoder::literal`]'s results so far: names and enum values recur within a schema
    /// (o84878's 196 keys and enum values are 127 distinct strings), one automaton each.
    literals: rustc_hash::FxHashMap<std::sync::Arc<str>, Rx>,
}

impl Encoder {
    /// The JSON-encoded forms (inside the quotes) of one character of `ranges`: raw UTF-8
    /// (except what JSON must escape), short escapes, `\uXXXX` in either case and surrogate
    /// pairs, as one deterministic byte automaton ([`crate::encode::json_class`]).
    pub fn class(&mut self, ranges: &[(u32, u32)]) -> Rx {
        if let [(a, b)] = ranges {
            if a <= b {
                // (one valid range: nothing to normalize; one character is the common case)
                return Rx::Automaton(crate::encode::json_class(ranges));
            }
        }
        let r = corral_core::normalize_ranges(ranges);
        if r.is_empty() {
            return Rx::Nothing;
        }
        Rx::Automaton(crate::encode::json_class(&r))
    }

    /// Maps a code-point language to the language of its JSON-encoded forms (no quotes).
    pub fn encode(&mut self, rx: &Rx) -> Rx {
        match rx {
            Rx::Empty => Rx::Empty,
            Rx::Nothing => Rx::Nothing,
            Rx::Literal(b) => {
                let s = String::from_utf8_lossy(b);
                Rx::concat(s.chars().map(|c| self.class(&[(c as u32, c as u32)])).collect())
            }
            Rx::Chars(r) => self.class(r),
            Rx::Bytes(r) => {
                let r: Vec<(u32, u32)> = r.iter().map(|&(a, b)| (a as u32, b as u32)).collect();
                self.class(&r)
            }
            Rx::Concat(xs) => Rx::concat(xs.iter().map(|x| self.encode(x)).collect()),
            Rx::Alt(xs) => Rx::alt(xs.iter().map(|x| self.encode(x)).collect()),
            Rx::Repeat { inner, min, max } => Rx::Repeat { inner: std::sync::Arc::new(self.encode(inner)), min: *min, max: *max },
            // Already bytes of an encoded string (only `Encoder` builds these).
            Rx::Automaton(a) => Rx::Automaton(a.clone()),
        }
    }

    /// A quoted JSON string whose decoded value is in `rx`.
    pub fn quoted(&mut self, rx: &Rx) -> Rx {
        // (A literal's or a concatenation's pieces go straight into the quotes' list: one
        // list made and hashed instead of an inner one that flattening takes apart again.)
        let mut parts = vec![lit("\"")];
        match rx {
            Rx::Literal(b) => {
                let s = String::from_utf8_lossy(b);
                parts.reserve(s.len() + 1);
                parts.extend(s.chars().map(|c| self.class(&[(c as u32, c as u32)])));
            }
            Rx::Concat(xs) => {
                parts.reserve(xs.len() + 1);
                for x in xs {
                    parts.push(self.encode(x));
                }
            }
            _ => parts.push(self.encode(rx)),
        }
        parts.push(lit("\""));
        Rx::concat(parts)
    }

    /// A quoted JSON string with exactly this value (every encoding of it), as one automaton
    /// built on first use ([`crate::encode::json_literal`]).
    pub fn literal(&mut self, s: &str) -> Rx {
        if let Some(rx) = self.literals.get(s) {
            return rx.clone();
        }
        let s: std::sync::Arc<str> = s.into();
        let rx = Rx::Automaton(crate::encode::json_literal(&s));
        self.literals.insert(s, rx.clone());
        rx
    }
}


// ---------------------------------------------------------------------------------------------
// Formats
// ---------------------------------------------------------------------------------------------

/// How well a format can be enforced.
pub enum FormatLang {
    /// Exactly this code-point language.
    Exact(Rx),
    /// Exactly this regular language plus RFC 3339 leap-second times (added by the compiler
    /// as a separate grammar part); `bool` = full date-time (else time only).
    WithLeap(Rx, bool),
    /// Not enforceable; the looser language to use in non-strict mode and why.
    Loose(Rx, String),
    /// An unknown format (an annotation per the specification).
    Unknown,
}

fn re(p: &str) -> Rx {
    ecma_full(p).unwrap_or_else(|e| panic!("built-in format regex: {e:?}"))
}

/// RFC 3339 full-date with month lengths and leap years.
pub const DATE: &str = r"(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)";
const HOUR: &str = r"(?:[01][0-9]|2[0-3])";
const MIN: &str = r"[0-5][0-9]";

fn time_normal() -> String {
    format!(r"{HOUR}:{MIN}:{MIN}(?:\.[0-9]+)?(?:[Zz]|[+-]{HOUR}:{MIN})")
}

/// The leap-second times `hh:mm:60[.frac]offset` that are 23:59:60 UTC, as (local time, offset) pairs.
pub fn leap_second_cases() -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for local in 0..1440u32 {
        let (h, m) = (local / 60, local % 60);
        let mut offs = Vec::new();
        // local = UTC + offset, UTC = 23:59 → offset = local - 1439 (mod 1440)
        let plus = local + 1; // +offset minutes (local = 1439 + off - 1440)
        if plus <= 1439 {
            offs.push(format!("+{:02}:{:02}", plus / 60, plus % 60));
        }
        let minus = 1439 - local;
        offs.push(format!("-{:02}:{:02}", minus / 60, minus % 60));
        if local == 1439 {
            offs.push("+00:00".into());
            offs.push("Z".into());
            offs.push("z".into());
        }
        out.push((format!("{h:02}:{m:02}"), offs));
    }
    out
}

fn ipv4() -> String {
    let oct = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
    format!(r"{oct}\.{oct}\.{oct}\.{oct}")
}

fn ipv6() -> String {
    let h = r"[0-9A-Fa-f]{1,4}";
    let ls32 = format!(r"(?:{h}:{h}|{})", ipv4());
    let forms = [
        format!(r"(?:{h}:){{6}}{ls32}"),
        format!(r"::(?:{h}:){{5}}{ls32}"),
        format!(r"(?:{h})?::(?:{h}:){{4}}{ls32}"),
        format!(r"(?:(?:{h}:){{0,1}}{h})?::(?:{h}:){{3}}{ls32}"),
        format!(r"(?:(?:{h}:){{0,2}}{h})?::(?:{h}:){{2}}{ls32}"),
        format!(r"(?:(?:{h}:){{0,3}}{h})?::{h}:{ls32}"),
        format!(r"(?:(?:{h}:){{0,4}}{h})?::{ls32}"),
        format!(r"(?:(?:{h}:){{0,5}}{h})?::{h}"),
        format!(r"(?:(?:{h}:){{0,6}}{h})?::"),
    ];
    format!("(?:{})", forms.join("|"))
}

fn uri_parts() -> (String, String) {
    // RFC 3986
    let unreserved = r"A-Za-z0-9\-._~";
    let sub_delims = r"!$&'()*+,;=";
    let pct = r"%[0-9A-Fa-f]{2}";
    let pchar = format!(r"(?:[{unreserved}{sub_delims}:@]|{pct})");
    let scheme = r"[A-Za-z][A-Za-z0-9+\-.]*";
    let userinfo = format!(r"(?:[{unreserved}{sub_delims}:]|{pct})*");
    let ipvfuture = format!(r"[vV][0-9A-Fa-f]+\.[{unreserved}{sub_delims}:]+");
    let ip_literal = format!(r"\[(?:{}|{ipvfuture})\]", ipv6());
    let reg_name = format!(r"(?:[{unreserved}{sub_delims}]|{pct})*");
    let host = format!(r"(?:{ip_literal}|{}|{reg_name})", ipv4());
    let authority = format!(r"(?:{userinfo}@)?{host}(?::[0-9]*)?");
    let segment = format!(r"{pchar}*");
    let segment_nz = format!(r"{pchar}+");
    let segment_nz_nc = format!(r"(?:[{unreserved}{sub_delims}@]|{pct})+");
    let path_abempty = format!(r"(?:/{segment})*");
    let path_absolute = format!(r"/(?:{segment_nz}(?:/{segment})*)?");
    let path_rootless = format!(r"{segment_nz}(?:/{segment})*");
    let path_noscheme = format!(r"{segment_nz_nc}(?:/{segment})*");
    let query = format!(r"(?:{pchar}|[/?])*");
    let hier = format!(r"(?://{authority}{path_abempty}|{path_absolute}|{path_rootless}|)");
    let uri = format!(r"{scheme}:{hier}(?:\?{query})?(?:#{query})?");
    let rel_part = format!(r"(?://{authority}{path_abempty}|{path_absolute}|{path_noscheme}|)");
    let rel = format!(r"{rel_part}(?:\?{query})?(?:#{query})?");
    (uri, rel)
}

/// The language of a `format`, when known: built once per process and name (the `uri`
/// expression alone takes half a millisecond to parse), in a bounded cache.
pub fn format_lang(name: &str) -> Arc<FormatLang> {
    static LANGS: SharedCache<String, Arc<FormatLang>> = SharedCache::new(256);
    LANGS.get_or_build_by(name, || name.to_string(), || Arc::new(build_format_lang(name)))
}

/// Builds the language of a `format` (see [`format_lang`]).
fn build_format_lang(name: &str) -> FormatLang {
    match name {
        "date" => FormatLang::Exact(re(DATE)),
        "time" => FormatLang::WithLeap(re(&time_normal()), false),
        "date-time" => FormatLang::WithLeap(re(&format!("{DATE}[Tt]{}", time_normal())), true),
        "duration" => {
            let d = r"[0-9]+";
            let s = format!(r"{d}[Ss]");
            let m = format!(r"{d}[Mm](?:{s})?");
            let h = format!(r"{d}[Hh](?:{m})?");
            let time = format!(r"[Tt](?:{h}|{m}|{s})");
            let day = format!(r"{d}[Dd]");
            let month = format!(r"{d}[Mm](?:{day})?");
            let year = format!(r"{d}[Yy](?:{month})?");
            let date = format!(r"(?:{day}|{month}|{year})(?:{time})?");
            FormatLang::Exact(re(&format!(r"[Pp](?:{date}|{time}|{d}[Ww])")))
        }
        "email" => {
            let atext = r"[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]";
            let dot_string = format!(r"{atext}+(?:\.{atext}+)*");
            let quoted = r#""(?:[\x20\x21\x23-\x5B\x5D-\x7E]|\\[\x20-\x7E])*""#;
            let sub = r"[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?";
            let domain = format!(r"{sub}(?:\.{sub})*");
            let lit = format!(r"\[(?:{}|IPv6:{}|[A-Za-z0-9\-]*[A-Za-z0-9]:[\x21-\x5A\x5E-\x7E]+)\]", ipv4(), ipv6());
            FormatLang::Exact(re(&format!(r"(?:{dot_string}|{quoted})@(?:{domain}|{lit})")))
        }
        "ipv4" => FormatLang::Exact(re(&ipv4())),
        "ipv6" => FormatLang::Exact(re(&ipv6())),
        "uuid" => {
            let h = r"[0-9A-Fa-f]";
            FormatLang::Exact(re(&format!(r"{h}{{8}}-{h}{{4}}-{h}{{4}}-{h}{{4}}-{h}{{12}}")))
        }
        "uri" => FormatLang::Exact(re(&uri_parts().0)),
        "uri-reference" => {
            let (u, r) = uri_parts();
            FormatLang::Exact(re(&format!("(?:{u})|(?:{r})")))
        }
        "json-pointer" => FormatLang::Exact(re(r"(?:/(?:[^~/]|~[01])*)*")),
        "relative-json-pointer" => FormatLang::Exact(re(r"(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~[01])*)*)")),
        "hostname" => {
            let label = r"[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?";
            FormatLang::Loose(
                re(&format!(r"{label}(?:\.{label})*")),
                "hostname: the 253-character total length and the validity of punycode (xn--) labels are not enforced".into(),
            )
        }
        "idn-hostname" | "idn-email" | "iri" | "iri-reference" | "uri-template" | "regex" => {
            FormatLang::Loose(star(any_char()), format!("format '{name}' is not enforced (any string is allowed)"))
        }
        _ => FormatLang::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdfa::CDfa;

    fn m(p: &str, s: &str) -> bool {
        CDfa::from_rx(&ecma_search(p).unwrap(), 10000).unwrap().accepts(s)
    }

    #[test]
    fn ecma() {
        assert!(m("^a+$", "aaa"));
        assert!(!m("^a+$", "aab"));
        assert!(m("a+", "xxaxx"));
        assert!(m("^\\d{2}", "12x"));
        assert!(!m("^\\d{2}", "1x2"));
        assert!(m("^[^]$", "\n"));
        assert!(!m("^.$", "\n"));
        assert!(m("a{", "xa{"));
        assert!(m("^\\p{L}+$", "héllo"));
        assert!(m("^(?<n>ab)$|^c$", "c"));
        assert!(ecma_search("(?=a)").is_err());
        assert!(ecma_search("(a)\\1").is_err());
        assert!(m("^[\\w-]+$", "a-b_c"));
        assert!(m("^\\S+@\\S+$", "a@b"));
        assert!(m("^Let's Go #1$", "Let's Go #1"));
        assert!(m("^[a b]+$", "a b"));
    }

    /// ECMA-262 Annex B: in a class, a `-` next to a class escape is a literal `-`, not a
    /// range (`[\w-.]`, the common e-mail pattern's first class); a `-` between two plain
    /// characters still makes a range.
    #[test]
    fn a_dash_next_to_a_class_escape_is_literal() {
        let email = r"^[\w-\.]+@([\w-]+\.)+[\w-]{2,4}$";
        assert!(m(email, "john.doe-x@mail.example.com"));
        assert!(!m(email, "john doe@mail.example.com"));
        for (p, yes, no) in [
            (r"^[\w-.]+$", "a-b.c_d", "a,b"),
            (r"^[a-\d]+$", "a-1", "b"),
            (r"^[\s-x]+$", " -x", "y"),
            (r"^[\d-\w]+$", "1-a", "."),
            (r"^[^\d-z]+$", "ab.", "-"),
            (r"^[\d-]+$", "1-2", "a"),
            (r"^[a-c\d]+$", "b2", "d"),
        ] {
            assert!(m(p, yes), "{p} should match {yes:?}");
            assert!(!m(p, no), "{p} should not match {no:?}");
        }
    }

    #[test]
    fn format_languages_are_built_once() {
        // The same expression each time, from the process-wide cache.
        let (a, b) = (format_lang("uri"), format_lang("uri"));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(matches!(*a, FormatLang::Exact(_)));
        assert!(matches!(*format_lang("no-such-format"), FormatLang::Unknown));
    }

    #[test]
    fn formats() {
        let d = |f: &str| match &*format_lang(f) {
            FormatLang::Exact(r) | FormatLang::WithLeap(r, _) | FormatLang::Loose(r, _) => CDfa::from_rx(&r, 100000).unwrap(),
            FormatLang::Unknown => panic!(),
        };
        let date = d("date");
        assert!(date.accepts("2020-02-29") && !date.accepts("2021-02-29") && !date.accepts("2000-13-01") && date.accepts("2000-02-29"));
        assert!(!date.accepts("1900-02-29"));
        let ip = d("ipv6");
        for ok in ["::1", "::", "1::", "1:2:3:4:5:6:7:8", "::ffff:1.2.3.4", "1::2:3"] {
            assert!(ip.accepts(ok), "{ok}");
        }
        for bad in [":::", "1:2:3:4:5:6:7:8:9", "1::2::3", "12345::"] {
            assert!(!ip.accepts(bad), "{bad}");
        }
        let u = d("uri");
        assert!(u.accepts("http://example.com/a?b#c") && !u.accepts("//example.com") && !u.accepts("a b:c"));
        let dt = d("date-time");
        assert!(dt.accepts("1963-06-19T08:30:06.283185Z") && !dt.accepts("1963-06-19T08:30:60Z"));
        let du = d("duration");
        assert!(du.accepts("P4DT12H30M5S") && !du.accepts("PT1D") && !du.accepts("P") && du.accepts("P2W") && !du.accepts("P1Y2W"));
    }

    #[test]
    fn encoding_roundtrip() {
        let mut e = Encoder::default();
        let rx = e.quoted(&star(any_char()));
        let d = corral_core::Dfa::from_rx(&rx, &corral_core::Limits::default()).unwrap();
        for ok in [r#""""#, r#""a\u00e9\n\"""#, r#""\ud83d\ude00""#, "\"\u{1F600}\"", r#""\/""#] {
            assert!(d.matches(ok.as_bytes()), "{ok}");
        }
        for bad in [r#""\ud83d""#, "\"\u{1}\"", r#""\x""#, r#""\uDC00""#] {
            assert!(!d.matches(bad.as_bytes()), "{bad}");
        }
        let rx = e.quoted(&lit("a/é😀"));
        let d = corral_core::Dfa::from_rx(&rx, &corral_core::Limits::default()).unwrap();
        for ok in ["\"a/é😀\"", r#""\u0061\/\u00E9\uD83D\uDE00""#, r#""a\u002fé😀""#] {
            assert!(d.matches(ok.as_bytes()), "{ok}");
        }
        assert!(!d.matches(br#""a/e\ud83d\ude00""#));
    }
}

impl crate::shared_cache::Weigh for FormatLang {
    fn heap_bytes(&self) -> usize {
        match self {
            FormatLang::Exact(r) | FormatLang::WithLeap(r, _) => r.heap_bytes(),
            FormatLang::Loose(r, why) => r.heap_bytes() + why.capacity(),
            FormatLang::Unknown => 0,
        }
    }
}
