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
    Concat(RxList),
    /// Alternation.
    Alt(RxList),
    /// `inner{min,max}`; `max = None` means unbounded.
    Repeat {
        /// Repeated expression (shared: cloning a repetition, such as the whitespace between
        /// every two tokens of a JSON layout, is a reference count).
        inner: std::sync::Arc<Rx>,
        /// Least number of repetitions.
        min: u32,
        /// Most repetitions, if bounded.
        max: Option<u32>,
    },
    /// A deterministic byte automaton built directly (see [`crate::frontend::byte_automaton`]).
    Automaton(std::sync::Arc<crate::frontend::byte_automaton::ByteAutomaton>),
}

/// The parts of a concatenation or alternation: shared (cloning one is a reference count),
/// with its hash, NFA size, nullability and heap bytes computed once when it is made.
///
/// Lowering clones, hashes and compares the expressions of terminals several times each (the
/// grammar's terminal index, the process-wide id table, deferred automata): with parts held
/// by value those deep copies and walks were a quarter of a large schema's compile (session
/// 19, perf over `compile_prof`). Equal lists made apart compare by hash first, then by
/// value.
#[derive(Clone)]
pub struct RxList(std::sync::Arc<ListInner>);

struct ListInner {
    items: Box<[Rx]>,
    hash: u64,
    nfa_size: usize,
    heap_bytes: usize,
    /// Of the concatenation (`all`) and of the alternation (`any`) of the items.
    nullable_all: bool,
    nullable_any: bool,
}

impl RxList {
    fn new(items: Vec<Rx>) -> RxList {
        use std::hash::{BuildHasher, Hash, Hasher};
        let mut h = rustc_hash::FxBuildHasher.build_hasher();
        items.len().hash(&mut h);
        for x in &items {
            x.hash(&mut h);
        }
        let node = std::mem::size_of::<Rx>();
        let inner = ListInner {
            hash: h.finish(),
            nfa_size: items.iter().fold(1usize, |a, x| a.saturating_add(x.nfa_size())),
            heap_bytes: items.iter().map(|x| node + x.heap_bytes()).sum(),
            nullable_all: items.iter().all(|x| x.nullable()),
            nullable_any: items.iter().any(|x| x.nullable()),
            items: items.into_boxed_slice(),
        };
        RxList(std::sync::Arc::new(inner))
    }

    /// The items, moved out when this is the only reference (else cloned).
    pub fn into_vec(self) -> Vec<Rx> {
        match std::sync::Arc::try_unwrap(self.0) {
            Ok(inner) => inner.items.into_vec(),
            Err(shared) => shared.items.to_vec(),
        }
    }
}

impl From<Vec<Rx>> for RxList {
    fn from(items: Vec<Rx>) -> RxList {
        RxList::new(items)
    }
}

impl FromIterator<Rx> for RxList {
    fn from_iter<I: IntoIterator<Item = Rx>>(it: I) -> RxList {
        RxList::new(it.into_iter().collect())
    }
}

impl IntoIterator for RxList {
    type Item = Rx;
    type IntoIter = std::vec::IntoIter<Rx>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl<'a> IntoIterator for &'a RxList {
    type Item = &'a Rx;
    type IntoIter = std::slice::Iter<'a, Rx>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.items.iter()
    }
}

impl std::ops::Deref for RxList {
    type Target = [Rx];
    fn deref(&self) -> &[Rx] {
        &self.0.items
    }
}

impl PartialEq for RxList {
    fn eq(&self, other: &RxList) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0) || (self.0.hash == other.0.hash && self.0.items == other.0.items)
    }
}

impl Eq for RxList {}

impl std::hash::Hash for RxList {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.hash);
    }
}

impl std::fmt::Debug for RxList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.items.iter()).finish()
    }
}

/// Largest Unicode scalar value.
pub(crate) const MAX_CHAR: u32 = 0x10FFFF;

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
        if items.len() >= 2 && !items.iter().any(|x| matches!(x, Rx::Empty | Rx::Nothing | Rx::Concat(_))) {
            // (already flat: the parts as given, with no copy)
            return Rx::Concat(items.into());
        }
        let mut out = Vec::with_capacity(items.len());
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
            _ => Rx::Concat(out.into()),
        }
    }

    /// Alternation, flattening nested alternations and dropping `Nothing`.
    pub fn alt(items: Vec<Rx>) -> Rx {
        if items.len() >= 2 && !items.iter().any(|x| matches!(x, Rx::Nothing | Rx::Alt(_))) {
            // (already flat: the parts as given, with no copy)
            return Rx::Alt(items.into());
        }
        let mut out: Vec<Rx> = Vec::with_capacity(items.len());
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
            _ => Rx::Alt(out.into()),
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
            Rx::Concat(v) | Rx::Alt(v) => v.0.heap_bytes,
            Rx::Repeat { inner, .. } => node + inner.heap_bytes(),
            Rx::Automaton(a) => a.memory_bytes(),
        }
    }

    /// Size of the expression as an NFA (positions; repetitions expanded): what lowering
    /// bounds by `max_nfa_states`. Constant time for concatenations and alternations.
    pub fn nfa_size(&self) -> usize {
        match self {
            Rx::Empty | Rx::Nothing => 1,
            Rx::Literal(b) => b.len() + 1,
            Rx::Chars(r) => r.len() + 1,
            Rx::Bytes(r) => r.len() + 1,
            Rx::Concat(xs) | Rx::Alt(xs) => xs.0.nfa_size,
            Rx::Repeat { inner, min, max } => inner.nfa_size().saturating_mul((max.unwrap_or(*min).max(*min) as usize).max(1)).saturating_add(1),
            Rx::Automaton(a) => a.size(),
        }
    }

    /// True when the empty string is in the language.
    pub fn nullable(&self) -> bool {
        match self {
            Rx::Empty => true,
            Rx::Nothing | Rx::Chars(_) | Rx::Bytes(_) => false,
            Rx::Literal(b) => b.is_empty(),
            Rx::Concat(xs) => xs.0.nullable_all,
            Rx::Alt(xs) => xs.0.nullable_any,
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
        assert!(Rx::Repeat { inner: std::sync::Arc::new(Rx::Literal(b"a".to_vec())), min: 0, max: None }.nullable());
        assert!(!Rx::concat(vec![Rx::Empty, Rx::Literal(b"a".to_vec())]).nullable());
    }
}
