//! Thompson NFA over bytes, built from an [`Rx`]. Only an intermediate step to the DFA.

use crate::runtime::error::{Error, Result};
use crate::runtime::limits::{Limits, LIMIT_HINT};
use crate::frontend::rx::Rx;
use regex_syntax::utf8::Utf8Sequences;

/// A byte-level NFA with one start and one accepting state, stored as compressed rows
/// (one allocation per kind of edge, not two per state).
#[derive(Debug, Clone)]
pub(crate) struct Nfa {
    /// Number of states.
    pub num_states: usize,
    /// Byte edges of state `s`: `edges[edge_start[s]..edge_start[s + 1]]`, as `(lo, hi, to)`.
    pub edge_start: Vec<u32>,
    /// All byte edges, grouped by source state.
    pub edges: Vec<(u8, u8, u32)>,
    /// Epsilon successors of state `s`: `eps[eps_start[s]..eps_start[s + 1]]`.
    pub eps_start: Vec<u32>,
    /// All epsilon successors, grouped by source state.
    pub eps: Vec<u32>,
    /// Start state.
    pub start: u32,
    /// The single accepting state.
    pub accept: u32,
}

impl Nfa {
    /// Byte edges leaving `s`.
    #[inline]
    pub(crate) fn edges_of(&self, s: u32) -> &[(u8, u8, u32)] {
        &self.edges[self.edge_start[s as usize] as usize..self.edge_start[s as usize + 1] as usize]
    }

    /// Epsilon successors of `s`.
    #[inline]
    pub(crate) fn eps_of(&self, s: u32) -> &[u32] {
        &self.eps[self.eps_start[s as usize] as usize..self.eps_start[s as usize + 1] as usize]
    }
}

struct Builder<'a> {
    n: usize,
    /// `(from, (lo, hi, to))` in creation order.
    edges: Vec<(u32, (u8, u8, u32))>,
    /// `(from, to)` in creation order.
    eps: Vec<(u32, u32)>,
    limits: &'a Limits,
}

/// Groups `(source, item)` pairs by source into compressed rows, keeping creation order.
fn rows<T: Copy + Default>(n: usize, items: &[(u32, T)]) -> (Vec<u32>, Vec<T>) {
    let mut start = vec![0u32; n + 1];
    for &(s, _) in items {
        start[s as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut out: Vec<T> = vec![T::default(); items.len()];
    for &(s, x) in items {
        out[fill[s as usize] as usize] = x;
        fill[s as usize] += 1;
    }
    (start, out)
}

impl Builder<'_> {
    fn add(&mut self) -> Result<u32> {
        if self.n >= self.limits.max_nfa_states {
            return Err(Error::Limit {
                name: "max_nfa_states",
                limit: self.limits.max_nfa_states,
                what: "a terminal's automaton grew too large (large repetition counts or long alternations)".into(),
                hint: LIMIT_HINT,
            });
        }
        if self.n % 4096 == 0 {
            crate::runtime::budget::check()?;
        }
        self.n += 1;
        Ok((self.n - 1) as u32)
    }

    fn edge(&mut self, from: u32, lo: u8, hi: u8, to: u32) {
        self.edges.push((from, (lo, hi, to)));
    }

    fn eps(&mut self, from: u32, to: u32) {
        self.eps.push((from, to));
    }

    /// Adds `rx` starting at `from`; returns the state where it ends.
    fn build(&mut self, rx: &Rx, from: u32) -> Result<u32> {
        Ok(match rx {
            Rx::Empty => from,
            Rx::Nothing => self.add()?,
            Rx::Literal(bytes) => {
                let mut cur = from;
                for &b in bytes {
                    let n = self.add()?;
                    self.edge(cur, b, b, n);
                    cur = n;
                }
                cur
            }
            Rx::Bytes(ranges) => {
                let end = self.add()?;
                for &(lo, hi) in ranges {
                    self.edge(from, lo, hi, end);
                }
                end
            }
            Rx::Chars(ranges) => {
                let end = self.add()?;
                for &(lo, hi) in ranges {
                    let (Some(lo), Some(hi)) = (char::from_u32(lo), char::from_u32(hi)) else {
                        return Err(Error::Regex { message: format!("invalid code point range {lo:#x}-{hi:#x}"), offset: None });
                    };
                    for seq in Utf8Sequences::new(lo, hi) {
                        let parts = seq.as_slice();
                        let mut cur = from;
                        for (i, r) in parts.iter().enumerate() {
                            let to = if i + 1 == parts.len() { end } else { self.add()? };
                            self.edge(cur, r.start, r.end, to);
                            cur = to;
                        }
                    }
                }
                end
            }
            Rx::Automaton(a) => {
                // One NFA state per automaton state; accepting states lead to `end` by epsilon.
                let base = self.n as u32;
                for _ in 0..a.len() {
                    self.add()?;
                }
                let end = self.add()?;
                if a.is_empty() {
                    return Ok(end);
                }
                self.eps(from, base + a.start());
                for s in 0..a.len() {
                    for &(lo, hi, t) in a.edges(s) {
                        self.edge(base + s as u32, lo, hi, base + t);
                    }
                    if a.accepts(s) {
                        self.eps(base + s as u32, end);
                    }
                }
                end
            }
            Rx::Concat(xs) => {
                let mut cur = from;
                for x in xs {
                    cur = self.build(x, cur)?;
                }
                cur
            }
            Rx::Alt(xs) => {
                let end = self.add()?;
                for x in xs {
                    let s = self.add()?;
                    self.eps(from, s);
                    let e = self.build(x, s)?;
                    self.eps(e, end);
                }
                end
            }
            Rx::Repeat { inner, min, max } => {
                if *min > self.limits.max_repeat || max.is_some_and(|m| m > self.limits.max_repeat) {
                    return Err(Error::Limit {
                        name: "max_repeat",
                        limit: self.limits.max_repeat as usize,
                        what: format!("repetition bound {{{},{}}}", min, max.map(|m| m.to_string()).unwrap_or_default()),
                        hint: LIMIT_HINT,
                    });
                }
                let mut cur = from;
                for _ in 0..*min {
                    let s = self.add()?;
                    self.eps(cur, s);
                    cur = self.build(inner, s)?;
                }
                match max {
                    None => {
                        let loop_start = self.add()?;
                        self.eps(cur, loop_start);
                        let e = self.build(inner, loop_start)?;
                        self.eps(e, loop_start);
                        let end = self.add()?;
                        self.eps(loop_start, end);
                        end
                    }
                    Some(mx) => {
                        let end = self.add()?;
                        self.eps(cur, end);
                        for _ in *min..*mx {
                            let s = self.add()?;
                            self.eps(cur, s);
                            cur = self.build(inner, s)?;
                            self.eps(cur, end);
                        }
                        end
                    }
                }
            }
        })
    }
}

impl Nfa {
    /// Builds the NFA of `rx`, failing with a limit error if it grows too large.
    pub(crate) fn build(rx: &Rx, limits: &Limits) -> Result<Nfa> {
        let mut b = Builder { n: 0, edges: Vec::new(), eps: Vec::new(), limits };
        let start = b.add()?;
        let accept = b.build(rx, start)?;
        let (edge_start, edges) = rows(b.n, &b.edges);
        let (eps_start, eps) = rows(b.n, &b.eps);
        Ok(Nfa { num_states: b.n, edge_start, edges, eps_start, eps, start, accept })
    }
}
