//! Regular expressions over bytes and Unicode code points: the language of one terminal.

/// A regular expression AST. Code point classes are compiled to UTF-8 byte sequences,
/// so every automaton built from an `Rx` runs on bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Rx {
    /// Matches only the empty string.
    Empty,
    /// Matches no string at all.
    Nothing,
    /// Matches exactly these bytes.
    Literal(Vec<u8>),
    /// One Unicode scalar value from these inclusive, sorted, non-overlapping ranges.
    Chars(Vec<(u32, u32)>),
    /// One byte from these inclusive, sorted, non-overlapping ranges.
    Bytes(Vec<(u8, u8)>),
    /// Concatenation.
    Concat(Vec<Rx>),
    /// Alternation.
    Alt(Vec<Rx>),
    /// `inner{min,max}`; `max = None` means unbounded.
    Repeat {
        /// Repeated expression.
        inner: Box<Rx>,
        /// Least number of repetitions.
        min: u32,
        /// Most repetitions, if bounded.
        max: Option<u32>,
    },
    /// A deterministic byte automaton built directly (see [`crate::byte_automaton`]).
    Automaton(std::sync::Arc<crate::byte_automaton::ByteAutomaton>),
}

/// Largest Unicode scalar value.
pub const MAX_CHAR: u32 = 0x10FFFF;

impl Rx {
    /// Any Unicode scalar value (what `.` means in GBNF).
    pub fn any_char() -> Rx {
        Rx::Chars(vec![(0, 0xD7FF), (0xE000, MAX_CHAR)])
    }

    /// A class of code points; `negated` takes the complement over all scalar values.
    /// Surrogates are always removed, since they cannot be encoded in UTF-8.
    pub fn char_class(ranges: &[(u32, u32)], negated: bool) -> Rx {
        let mut r = normalize_ranges(ranges);
        if negated {
            r = complement(&r);
        }
        let r = remove_surrogates(&r);
        if r.is_empty() {
            Rx::Nothing
        } else {
            Rx::Chars(r)
        }
    }

    /// Concatenation, flattening nested concatenations and dropping `Empty`.
    pub fn concat(items: Vec<Rx>) -> Rx {
        let mut out = Vec::new();
        for it in items {
            match it {
                Rx::Empty => {}
                Rx::Concat(xs) => out.extend(xs),
                Rx::Nothing => return Rx::Nothing,
                x => out.push(x),
            }
        }
        match out.len() {
            0 => Rx::Empty,
            1 => out.pop().unwrap(),
            _ => Rx::Concat(out),
        }
    }

    /// Alternation, flattening nested alternations and dropping `Nothing`.
    pub fn alt(items: Vec<Rx>) -> Rx {
        let mut out: Vec<Rx> = Vec::new();
        for it in items {
            match it {
                Rx::Nothing => {}
                Rx::Alt(xs) => out.extend(xs),
                x => out.push(x),
            }
        }
        match out.len() {
            0 => Rx::Nothing,
            1 => out.pop().unwrap(),
            _ => Rx::Alt(out),
        }
    }

    /// Approximate heap bytes held by this expression (for the process-wide caches' budgets).
    pub fn heap_bytes(&self) -> usize {
        let node = std::mem::size_of::<Rx>();
        match self {
            Rx::Empty | Rx::Nothing => 0,
            Rx::Literal(b) => b.len(),
            Rx::Chars(r) => r.len() * 8,
            Rx::Bytes(r) => r.len() * 2,
            Rx::Concat(v) | Rx::Alt(v) => v.iter().map(|x| node + x.heap_bytes()).sum(),
            Rx::Repeat { inner, .. } => node + inner.heap_bytes(),
            Rx::Automaton(a) => a.memory_bytes(),
        }
    }

    /// True when the empty string is in the language.
    pub fn nullable(&self) -> bool {
        match self {
            Rx::Empty => true,
            Rx::Nothing | Rx::Chars(_) | Rx::Bytes(_) => false,
            Rx::Literal(b) => b.is_empty(),
            Rx::Concat(xs) => xs.iter().all(|x| x.nullable()),
            Rx::Alt(xs) => xs.iter().any(|x| x.nullable()),
            Rx::Repeat { inner, min, .. } => *min == 0 || inner.nullable(),
            Rx::Automaton(a) => a.nullable(),
        }
    }
}

/// Sorts and merges overlapping or adjacent ranges.
pub fn normalize_ranges(ranges: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut r: Vec<(u32, u32)> = ranges.iter().map(|&(a, b)| if a <= b { (a, b) } else { (b, a) }).collect();
    r.sort_unstable();
    let mut out: Vec<(u32, u32)> = Vec::with_capacity(r.len());
    for (a, b) in r {
        if let Some(last) = out.last_mut() {
            if a <= last.1.saturating_add(1) {
                last.1 = last.1.max(b);
                continue;
            }
        }
        out.push((a, b));
    }
    out
}

fn complement(r: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut next = 0u32;
    for &(a, b) in r {
        if a > next {
            out.push((next, a - 1));
        }
        next = b.saturating_add(1);
    }
    if next <= MAX_CHAR {
        out.push((next, MAX_CHAR));
    }
    out
}

fn remove_surrogates(r: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for &(a, b) in r {
        let b = b.min(MAX_CHAR);
        if a > b {
            continue;
        }
        if b < 0xD800 || a > 0xDFFF {
            out.push((a, b));
        } else {
            if a < 0xD800 {
                out.push((a, 0xD7FF));
            }
            if b > 0xDFFF {
                out.push((0xE000, b));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negated_class_excludes_surrogates_and_members() {
        let rx = Rx::char_class(&[('a' as u32, 'z' as u32)], true);
        let Rx::Chars(r) = rx else { panic!() };
        assert_eq!(r[0], (0, 'a' as u32 - 1));
        assert!(r.iter().all(|&(a, b)| b < 0xD800 || a > 0xDFFF));
        assert_eq!(r.last().unwrap().1, MAX_CHAR);
    }

    #[test]
    fn nullable() {
        assert!(Rx::Repeat { inner: Box::new(Rx::Literal(b"a".to_vec())), min: 0, max: None }.nullable());
        assert!(!Rx::concat(vec![Rx::Empty, Rx::Literal(b"a".to_vec())]).nullable());
    }
}
