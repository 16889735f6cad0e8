//! The lowered grammar: a context-free grammar over terminals, each terminal a DFA.
//!
//! Terminal boundaries are an implementation choice, not part of the language: the matcher
//! considers every way to split the input into terminals, so merging neighbouring regular
//! pieces into one terminal (fewer parser steps) never changes what is accepted.

use crate::automata::dfa::Dfa;
use crate::parser::perm::{Perm, PermMember, PermState};

/// A grammar symbol packed in a `u32`: terminals carry [`Sym::TERMINAL_BIT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sym(pub u32);

impl Sym {
    /// Bit marking a terminal.
    pub const TERMINAL_BIT: u32 = 1 << 31;
    /// Bit marking a key set (see [`crate::parser::perm`]).
    pub const PERM_BIT: u32 = 1 << 30;
    /// Marker for "dot at the end of a production".
    pub const END: Sym = Sym(u32::MAX);

    /// Terminal `t`.
    pub fn t(t: u32) -> Sym {
        Sym(t | Self::TERMINAL_BIT)
    }
    /// Nonterminal `n`.
    pub fn n(n: u32) -> Sym {
        Sym(n)
    }
    /// Key set `k`.
    pub fn perm(k: u32) -> Sym {
        Sym(k | Self::PERM_BIT)
    }
    /// Key set index if this is a key set.
    #[inline(always)]
    pub fn as_perm(self) -> Option<u32> {
        (self.0 & (Self::TERMINAL_BIT | Self::PERM_BIT) == Self::PERM_BIT).then_some(self.0 & !Self::PERM_BIT)
    }
    /// Terminal index if this is a terminal.
    #[inline(always)]
    pub fn as_terminal(self) -> Option<u32> {
        (self.0 != u32::MAX && self.0 & Self::TERMINAL_BIT != 0).then_some(self.0 & !Self::TERMINAL_BIT)
    }
    /// Nonterminal index if this is a nonterminal.
    #[inline(always)]
    pub fn as_nonterminal(self) -> Option<u32> {
        (self.0 & (Self::TERMINAL_BIT | Self::PERM_BIT) == 0).then_some(self.0)
    }
}

/// One production `lhs ::= rhs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Production {
    /// Left-hand nonterminal.
    pub lhs: u32,
    /// Right-hand symbols.
    pub rhs: Vec<Sym>,
}

/// A terminal: its automaton and a label for diagnostics.
#[derive(Debug, Clone)]
pub struct Terminal {
    /// Automaton of the terminal's language (never containing the empty string), maybe not
    /// built yet ([`Terminal::dfa`] builds it).
    pub automaton: std::sync::Arc<crate::automata::term_dfa::TermDfa>,
    /// Where it came from (rule name), for messages.
    pub label: String,
    /// Process-wide id of the terminal's language (see [`crate::automata::intern`]).
    pub gid: u32,
    /// For a terminal matched by token id ([`crate::frontend::token_class`]), its class. Such a
    /// terminal's automaton is never run: no lexeme of it is started
    /// ([`crate::parser::step::start_lexemes`]); one token of the class completes it.
    pub tokens: Option<std::sync::Arc<crate::frontend::token_class::TokenClass>>,
}

impl Terminal {
    /// The terminal's automaton, built now if its construction was deferred
    /// ([`crate::automata::term_dfa`]).
    #[inline]
    pub fn dfa(&self) -> &std::sync::Arc<Dfa> {
        self.automaton.get()
    }
}

/// What a dotted position ("item core") looks at.
#[derive(Debug, Clone, Copy)]
pub struct Dot {
    /// Symbol after the dot, or [`Sym::END`].
    pub next: Sym,
    /// Left-hand side of the production.
    pub lhs: u32,
}

/// Lists of ids back to back (prediction closures and productions per nonterminal, a grammar's
/// rule graph): one buffer instead of a list each, which were a tenth of a schema compile's
/// allocations.
#[derive(Debug, Clone, Default)]
pub struct Lists {
    items: Vec<u32>,
    /// Where list `i` ends in `items` (it starts where list `i - 1` ends).
    ends: Vec<u32>,
}

impl Lists {
    /// Appends a list.
    pub fn push(&mut self, list: &[u32]) {
        self.items.extend_from_slice(list);
        self.ends.push(self.items.len() as u32);
    }

    /// `n` lists: list `k` holds the values of the pairs `(k, value)`, in the order given.
    pub fn grouped(n: usize, pairs: impl Iterator<Item = (u32, u32)> + Clone) -> Lists {
        let mut at = vec![0u32; n + 1];
        for (k, _) in pairs.clone() {
            at[k as usize + 1] += 1;
        }
        for i in 0..n {
            at[i + 1] += at[i];
        }
        let ends = at[1..].to_vec();
        let mut items = vec![0u32; at[n] as usize];
        for (k, v) in pairs {
            let slot = &mut at[k as usize];
            items[*slot as usize] = v;
            *slot += 1;
        }
        Lists { items, ends }
    }

    /// Number of lists.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there is no list.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

impl std::ops::Index<usize> for Lists {
    type Output = [u32];
    fn index(&self, i: usize) -> &[u32] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.items[start..self.ends[i] as usize]
    }
}

/// A context-free grammar over DFA terminals, ready for the Earley parser.
#[derive(Debug, Clone)]
pub struct Cfg {
    /// Names of nonterminals (rule names or generated helper names).
    pub nt_names: Vec<String>,
    /// All productions.
    pub productions: Vec<Production>,
    /// For each nonterminal, the first dot id of each of its productions.
    pub prod_starts_of: Lists,
    /// Dotted positions: production `p` has dots `dot_base[p] ..= dot_base[p] + rhs.len()`.
    pub dots: Vec<Dot>,
    /// Terminals.
    pub terminals: Vec<Terminal>,
    /// Nonterminals deriving the empty string.
    pub nullable: Vec<bool>,
    /// Augmented start nonterminal (`start ::= root`).
    pub start: u32,
    /// Prediction closure of each nonterminal: every dot (origin = the current row) that
    /// predicting it adds, through nested predictions and nullable skips. Static, so the
    /// parser copies it instead of recomputing it.
    pub pred_dots: Lists,
    /// Terminals expected by the dots of the prediction closure.
    pub pred_terms: Lists,
    /// Nonterminals predicted inside the closure (marked as predicted together).
    pub pred_nts: Lists,
    /// Number of rules in the source grammar.
    pub source_rules: usize,
    /// Key sets (any-order members; see [`crate::parser::perm`]).
    pub perms: Vec<Perm>,
    /// For each nonterminal, the key set member it derives, if any.
    pub perm_member: Vec<Option<PermMember>>,
}

impl Cfg {
    /// Builds the derived tables (dots, nullable) from productions. Productions must be productive.
    pub fn new(nt_names: Vec<String>, productions: Vec<Production>, terminals: Vec<Terminal>, start: u32, source_rules: usize, limits: &crate::runtime::limits::Limits) -> crate::runtime::error::Result<Cfg> {
        Self::with_perms(nt_names, productions, terminals, Vec::new(), start, source_rules, limits)
    }

    /// [`Cfg::new`] for a grammar with key sets (productions `perms[k].lhs ::= Sym::perm(k)`).
    pub fn with_perms(
        nt_names: Vec<String>,
        productions: Vec<Production>,
        terminals: Vec<Terminal>,
        perms: Vec<Perm>,
        start: u32,
        source_rules: usize,
        limits: &crate::runtime::limits::Limits,
    ) -> crate::runtime::error::Result<Cfg> {
        let n = nt_names.len();
        let mut perm_member = vec![None; n];
        for (k, p) in perms.iter().enumerate() {
            let slots = p.first.iter().zip(&p.next).enumerate().map(|(i, (&f, &x))| (i, f, x)).chain(p.extra.map(|(f, x)| (p.len(), f, x)));
            for (i, f, x) in slots {
                perm_member[f as usize] = Some(PermMember { perm: k as u32, member: i as u32, next: false });
                perm_member[x as usize] = Some(PermMember { perm: k as u32, member: i as u32, next: true });
            }
        }
        let perm_nullable: Vec<bool> = perms.iter().map(|p| p.viable(&PermState::default()) && p.can_finish(&PermState::default())).collect();
        let mut dots = Vec::with_capacity(productions.iter().map(|p| p.rhs.len() + 1).sum());
        let mut starts = Vec::with_capacity(productions.len());
        for p in &productions {
            starts.push(dots.len() as u32);
            for s in &p.rhs {
                dots.push(Dot { next: *s, lhs: p.lhs });
            }
            dots.push(Dot { next: Sym::END, lhs: p.lhs });
        }
        // Grouped by left-hand side (in production order within a group) in one buffer.
        let prod_starts_of = Lists::grouped(n, productions.iter().zip(&starts).map(|(p, &d)| (p.lhs, d)));
        let mut nullable = vec![false; n];
        loop {
            let mut changed = false;
            for p in &productions {
                if !nullable[p.lhs as usize]
                    && p.rhs.iter().all(|s| s.as_nonterminal().is_some_and(|n| nullable[n as usize]) || s.as_perm().is_some_and(|k| perm_nullable[k as usize]))
                {
                    nullable[p.lhs as usize] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        for p in &perms {
            for &f in p.first.iter().chain(p.extra.iter().map(|e| &e.0)) {
                if nullable[f as usize] {
                    return Err(crate::runtime::error::Error::GrammarInvalid {
                        message: format!("key set member '{}' matches the empty string", nt_names[f as usize]),
                        location: None,
                    });
                }
            }
        }
        let mut cfg = Cfg {
            perms,
            perm_member,
            nt_names,
            productions,
            prod_starts_of,
            dots,
            terminals,
            nullable,
            start,
            source_rules,
            pred_dots: Lists::default(),
            pred_terms: Lists::default(),
            pred_nts: Lists::default(),
        };
        cfg.compute_prediction_closures(limits)?;
        Ok(cfg)
    }

    fn compute_prediction_closures(&mut self, limits: &crate::runtime::limits::Limits) -> crate::runtime::error::Result<()> {
        let mut total = 0usize;
        let n = self.nt_names.len();
        let mut dot_seen = vec![u32::MAX; self.dots.len()];
        let mut nt_seen = vec![u32::MAX; n];
        let mut t_seen = vec![u32::MAX; self.terminals.len()];
        let (mut dots, mut terms, mut nts, mut stack) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for x in 0..n {
            if x % 256 == 0 {
                crate::runtime::budget::check()?;
            }
            let stamp = x as u32;
            dots.clear();
            terms.clear();
            nts.clear();
            stack.push(x as u32);
            nt_seen[x] = stamp;
            while let Some(y) = stack.pop() {
                nts.push(y);
                for &start in &self.prod_starts_of[y as usize] {
                    let mut d = start;
                    loop {
                        if dot_seen[d as usize] == stamp {
                            break;
                        }
                        dot_seen[d as usize] = stamp;
                        dots.push(d);
                        let next = self.dots[d as usize].next;
                        if next == Sym::END {
                            break;
                        }
                        if let Some(t) = next.as_terminal() {
                            if t_seen[t as usize] != stamp {
                                t_seen[t as usize] = stamp;
                                terms.push(t);
                            }
                            break;
                        }
                        if let Some(k) = next.as_perm() {
                            // The item starts in the empty state: predict every member it allows.
                            let p = &self.perms[k as usize];
                            let s0 = PermState::default();
                            for m in (0..p.len()).map(Some).chain(p.extra.map(|_| None)) {
                                if p.step(&s0, m).is_some() {
                                    let z = p.member_nt(&s0, m) as usize;
                                    if nt_seen[z] != stamp {
                                        nt_seen[z] = stamp;
                                        stack.push(z as u32);
                                    }
                                }
                            }
                            break;
                        }
                        let z = next.0 as usize;
                        if nt_seen[z] != stamp {
                            nt_seen[z] = stamp;
                            stack.push(z as u32);
                        }
                        if !self.nullable[z] {
                            break;
                        }
                        d += 1;
                    }
                }
            }
            total += dots.len() + terms.len() + nts.len();
            if total > limits.max_closure_items {
                return Err(crate::runtime::error::Error::Limit {
                    name: "max_closure_items",
                    limit: limits.max_closure_items,
                    what: "the grammar's prediction closures are too large (long chains of rules that start with other rules)".into(),
                    hint: crate::runtime::limits::LIMIT_HINT,
                });
            }
            self.pred_dots.push(&dots);
            self.pred_terms.push(&terms);
            self.pred_nts.push(&nts);
        }
        Ok(())
    }

    /// Terminal indices in breadth-first order from the start symbol (a rule's symbols are
    /// one step further than the rule): the terminals a generation meets first come first.
    /// Terminals unreachable from the start are left out.
    pub fn terminals_by_distance(&self) -> Vec<u32> {
        let n = self.nt_names.len();
        let mut seen_nt = vec![false; n];
        let mut seen_t = vec![false; self.terminals.len()];
        let mut queue = std::collections::VecDeque::from([self.start]);
        seen_nt[self.start as usize] = true;
        let mut out = Vec::new();
        let mut visit = |nt: u32, queue: &mut std::collections::VecDeque<u32>| {
            if !seen_nt[nt as usize] {
                seen_nt[nt as usize] = true;
                queue.push_back(nt);
            }
        };
        while let Some(nt) = queue.pop_front() {
            for &first in &self.prod_starts_of[nt as usize] {
                let mut d = first as usize;
                while self.dots[d].next != Sym::END {
                    let sym = self.dots[d].next;
                    if let Some(t) = sym.as_terminal() {
                        if !seen_t[t as usize] {
                            seen_t[t as usize] = true;
                            out.push(t);
                        }
                    } else if let Some(x) = sym.as_nonterminal() {
                        visit(x, &mut queue);
                    } else if let Some(k) = sym.as_perm() {
                        let p = &self.perms[k as usize];
                        for &x in p.first.iter().chain(&p.next).chain(p.extra.iter().flat_map(|e| [&e.0, &e.1])) {
                            visit(x, &mut queue);
                        }
                    }
                    d += 1;
                }
            }
        }
        out
    }

    /// Heap bytes used by the grammar tables and the automata built so far (a deferred one,
    /// [`crate::automata::term_dfa`], counts once built).
    pub fn memory_bytes(&self) -> usize {
        self.terminals.iter().filter_map(|t| t.automaton.if_built()).map(|d| d.memory_bytes()).sum::<usize>()
            + self.dots.len() * 8
            + self.productions.iter().map(|p| p.rhs.len() * 4 + 32).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::Lists;

    /// Lists pushed one by one and lists grouped from pairs read back as the plain lists they
    /// hold (empty ones included, values in the order given).
    #[test]
    fn lists_read_back_what_they_hold() {
        let mut rnd = crate::testutil::xorshift(0x11575_0000_0001);
        for _ in 0..200 {
            let n = rnd(8) as usize;
            let pairs: Vec<(u32, u32)> = if n == 0 { Vec::new() } else { (0..rnd(30)).map(|_| (rnd(n as u64) as u32, rnd(100) as u32)).collect() };
            let mut want: Vec<Vec<u32>> = vec![Vec::new(); n];
            for &(k, v) in &pairs {
                want[k as usize].push(v);
            }
            let grouped = Lists::grouped(n, pairs.iter().copied());
            let mut pushed = Lists::default();
            for w in &want {
                pushed.push(w);
            }
            assert_eq!(grouped.len(), n);
            assert_eq!(pushed.len(), n);
            for (i, w) in want.iter().enumerate() {
                assert_eq!(&grouped[i], &w[..], "{pairs:?}");
                assert_eq!(&pushed[i], &w[..]);
            }
        }
    }
}
