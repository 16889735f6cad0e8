//! Lowers a [`GrammarAst`] to a [`Cfg`]: rules that cannot reach recursion become regular
//! expressions, neighbouring regular pieces of a sequence merge into one terminal, and the
//! rest becomes productions. Unproductive productions are removed so that every parser
//! state the matcher reaches can still be completed (this is what makes masks exact).

use crate::parser::cfg::{Cfg, Production, Sym, Terminal};
use crate::parser::perm::Perm;
use crate::frontend::ebnf::{Expr, GrammarAst};
use crate::runtime::error::{Error, Location, Result};
use crate::runtime::limits::{Limits, LIMIT_HINT};
use crate::frontend::rx::Rx;
use rustc_hash::FxHashMap;

/// Lowers `ast` with start rule `root`.
pub(crate) fn lower(ast: &GrammarAst, root: &str, limits: &Limits) -> Result<Cfg> {
    let mut index: FxHashMap<&str, usize> = FxHashMap::default();
    for (i, r) in ast.rules.iter().enumerate() {
        if let Some(&prev) = index.get(r.name.as_str()) {
            return Err(Error::GrammarInvalid {
                message: format!("rule '{}' is defined twice (first on line {})", r.name, Location::at(&ast.source, ast.rules[prev].offset).line),
                location: Some(Location::at(&ast.source, r.offset)),
            });
        }
        index.insert(&r.name, i);
    }
    let Some(&root_idx) = index.get(root) else {
        return Err(Error::GrammarInvalid { message: format!("the grammar has no rule named '{root}' (the start rule)"), location: None });
    };
    // Resolve references and collect the rule graph.
    let n = ast.rules.len();
    let mut refs = rule_refs(ast, &index)?;
    let (mut regular, mut order) = regular_rules(ast, &refs);
    // Tail recursion through a regular prefix becomes a repetition (see `unroll_tail`), and
    // a repetition's regular alternatives repeat on their own (`split_repeats`), until no
    // rule changes (a rule unrolled may become regular and let its users unroll).
    // (A copy of the AST only once a rule changes; each round turns rules regular or rewrites
    // repetitions once, and the bound only guards.)
    let mut rewritten: Option<GrammarAst> = None;
    for _round in 0..64 {
        let cur = rewritten.as_ref().unwrap_or(ast);
        let is_regular = |x: &Expr| expr_is_regular(x, &regular, &index);
        let mut changed: Vec<(usize, Expr)> = Vec::new();
        for (i, r) in cur.rules.iter().enumerate() {
            if !regular[i] {
                let tail = unroll_tail(&r.expr, &r.name, &is_regular);
                if let Some(e) = split_repeats(tail.as_ref().unwrap_or(&r.expr), &is_regular).or(tail) {
                    changed.push((i, e));
                }
            }
        }
        if changed.is_empty() {
            break;
        }
        let next = rewritten.get_or_insert_with(|| ast.clone());
        for (i, e) in changed {
            next.rules[i].expr = e;
        }
        refs = rule_refs(next, &index)?;
        (regular, order) = regular_rules(next, &refs);
    }
    let ast = rewritten.as_ref().unwrap_or(ast);
    let mut lw = Lowerer {
        rules: &ast.rules,
        index: &index,
        regular,
        rule_rx: vec![None; n],
        limits,
        nt_names: Vec::new(),
        productions: Vec::new(),
        rule_nt: vec![None; n],
        terminals: Vec::new(),
        term_index: FxHashMap::default(),
        opt_nt: FxHashMap::default(),
        label: String::new(),
        perms: Vec::new(),
        token_syms: FxHashMap::default(),
        token_classes: FxHashMap::default(),
        syms: Vec::new(),
    };
    // In dependency order. A regular rule whose expression is too large to be one regex (or
    // that uses such a rule) is lowered structurally instead, like a recursive one.
    for &i in &order {
        if refs[i].iter().any(|&j| !lw.regular[j as usize]) {
            lw.regular[i] = false;
            continue;
        }
        match lw.to_rx(&ast.rules[i].expr) {
            Ok(rx) => lw.rule_rx[i] = Some(rx),
            Err(Error::Limit { name: "max_nfa_states", .. }) => lw.regular[i] = false,
            Err(e) => return Err(e),
        }
    }
    let regular = lw.regular.clone();
    // Nonterminals for every non-regular rule, and for the root.
    for i in 0..n {
        if !regular[i] || i == root_idx {
            let nt = lw.new_nt(ast.rules[i].name.clone());
            lw.rule_nt[i] = Some(nt);
        }
    }
    for i in 0..n {
        if let Some(nt) = lw.rule_nt[i] {
            lw.label = ast.rules[i].name.clone();
            let alts = if regular[i] {
                let mut rhs = Vec::new();
                lw.flush_rx(vec![(&ast.rules[i].expr, lw.rule_rx[i].clone().unwrap())], &mut rhs)?;
                vec![rhs]
            } else {
                lw.lower_alts(&ast.rules[i].expr)?
            };
            for rhs in alts {
                lw.add_prod(nt, rhs)?;
            }
        }
    }
    let start = lw.new_nt("<start>".into());
    let root_nt = lw.rule_nt[root_idx].unwrap();
    lw.add_prod(start, vec![Sym::n(root_nt)])?;
    let Lowerer { nt_names, productions, terminals, mut perms, .. } = lw;
    if !crate::automata::term_dfa::defer_enabled() {
        // Lowering left the automata it could build later unbuilt (it needs only whether
        // they are nullable or empty): all of them now, on two threads when that pays.
        crate::automata::term_dfa::build_all(&terminals.iter().map(|t| t.automaton.clone()).collect::<Vec<_>>());
    }
    let productions = prune_unproductive(&nt_names, productions, &terminals, &mut perms, start, root)?;
    Cfg::with_perms(nt_names, productions, terminals, perms, start, n, limits)
}

/// Each rule's references, as rule indices (an error for a rule used but never defined).
fn rule_refs(ast: &GrammarAst, index: &FxHashMap<&str, usize>) -> Result<crate::parser::cfg::Lists> {
    // (The rule graph in flat lists: two lists per rule were a twentieth of a schema
    // compile's allocations.)
    let mut refs = crate::parser::cfg::Lists::default();
    let mut mine: Vec<u32> = Vec::new();
    for r in ast.rules.iter() {
        let mut err = None;
        mine.clear();
        visit_refs(&r.expr, &mut |name, offset| match index.get(name) {
            Some(&j) => mine.push(j as u32),
            None if err.is_none() => {
                err = Some(Error::GrammarInvalid {
                    message: format!("rule '{name}' is used but never defined"),
                    location: Some(Location::at(&ast.source, offset)),
                })
            }
            None => {}
        });
        if let Some(e) = err {
            return Err(e);
        }
        refs.push(&mine);
    }
    Ok(refs)
}

/// Which rules are regular, and those in dependency order. A rule is regular iff it cannot
/// reach a cycle: peel rules whose references are all peeled. A rule holding a key set is
/// never regular (a key set is not a regular language), nor is one holding a token (it must
/// not be merged into its users' terminals).
fn regular_rules(ast: &GrammarAst, refs: &crate::parser::cfg::Lists) -> (Vec<bool>, Vec<usize>) {
    let n = ast.rules.len();
    let mut regular = vec![false; n];
    let mut order = Vec::new();
    let mut remaining: Vec<usize> = (0..n).map(|i| refs[i].len()).collect();
    // Who refers to each rule.
    let rev = crate::parser::cfg::Lists::grouped(n, (0..n).flat_map(|i| refs[i].iter().map(move |&j| (j, i as u32))));
    for (i, r) in ast.rules.iter().enumerate() {
        if contains_perm_or_token(&r.expr) {
            remaining[i] += 1;
        }
    }
    let mut stack: Vec<usize> = (0..n).filter(|&i| remaining[i] == 0).collect();
    while let Some(i) = stack.pop() {
        regular[i] = true;
        order.push(i);
        for &p in &rev[i] {
            let p = p as usize;
            remaining[p] -= 1;
            if remaining[p] == 0 {
                stack.push(p);
            }
        }
    }
    (regular, order)
}

/// `A ::= α₁ A | … | αₖ A | β₁ | … | βₘ` with every `αᵢ` regular, as `A ::= (α₁ | … | αₖ)*
/// (β₁ | … | βₘ)`: the same language (the least solution of the equation), or `None` when
/// rule `name` (its expression `e`) has no such alternative or nothing else.
///
/// Right recursion through a regular prefix (C's `unary ::= ("-" | "*" | …) ws unary | …`,
/// a list `items ::= item "," items | item`) otherwise pushes a parser row after each
/// prefix: a token of 64 `*` is a chain of 64 rows, and a mask fill meets such chains below
/// every operator character (thousands of rows). As a repetition, the prefixes are one
/// terminal's automaton, which runs through the whole token, and the nodes where it ends
/// share one row.
fn unroll_tail(e: &Expr, name: &str, is_regular: &impl Fn(&Expr) -> bool) -> Option<Expr> {
    let alts: Vec<&Expr> = match e {
        Expr::Alt(xs) => xs.iter().collect(),
        e => vec![e],
    };
    let mut loops: Vec<Expr> = Vec::new();
    let mut rest: Vec<Expr> = Vec::new();
    for a in alts {
        if let Expr::Seq(items) = a {
            if let Some((Expr::Ref { name: last, .. }, init)) = items.split_last() {
                if last == name && !init.is_empty() && init.iter().all(is_regular) {
                    loops.push(if init.len() == 1 { init[0].clone() } else { Expr::Seq(init.to_vec()) });
                    continue;
                }
            }
        }
        rest.push(a.clone());
    }
    if loops.is_empty() || rest.is_empty() {
        return None;
    }
    Some(Expr::Seq(vec![star(alt_of(loops)), alt_of(rest)]))
}

/// `x*`.
fn star(x: Expr) -> Expr {
    Expr::Repeat { inner: Box::new(x), min: 0, max: None }
}

/// The alternatives `xs` (not empty) as one expression.
fn alt_of(mut xs: Vec<Expr>) -> Expr {
    if xs.len() == 1 {
        xs.pop().expect("one alternative")
    } else {
        Expr::Alt(xs)
    }
}

/// Whether `e` is a regular expression given which rules are regular (a key set or a token
/// is not).
fn expr_is_regular(e: &Expr, regular: &[bool], index: &FxHashMap<&str, usize>) -> bool {
    match e {
        Expr::Literal(_) | Expr::Terminal(_) => true,
        Expr::Ref { name, .. } => index.get(name.as_str()).is_some_and(|&j| regular[j]),
        Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().all(|x| expr_is_regular(x, regular, index)),
        Expr::Repeat { inner, .. } => expr_is_regular(inner, regular, index),
        Expr::Perm(_) | Expr::Token(_) | Expr::Tokens(_) => false,
    }
}

/// Each repetition `(r₁ | … | n₁ | …)*` in `e` whose alternatives are some regular (`rᵢ`),
/// some not (`nᵢ`), as `((r₁ | …)* (n₁ | …))* (r₁ | …)*`: the same language. A regular
/// prefix of a repeated sequence ending in alternatives distributes over them first
/// (`(ws ("[" expr "]" | "--"))*` has the alternatives `ws "[" expr "]"` and `ws "--"`).
/// `None` when nothing changes.
///
/// Runs of the regular alternatives are then one terminal's automaton: C's postfix
/// `x-- -- --` or `a.b.c`, which otherwise push a parser row at each one (a mask fill meets
/// chains of them below every run of `-` in the vocabulary).
fn split_repeats(e: &Expr, is_regular: &impl Fn(&Expr) -> bool) -> Option<Expr> {
    match e {
        Expr::Seq(xs) | Expr::Alt(xs) => {
            let mut changed = false;
            let ys: Vec<Expr> = xs
                .iter()
                .map(|x| match split_repeats(x, is_regular) {
                    Some(y) => {
                        changed = true;
                        y
                    }
                    None => x.clone(),
                })
                .collect();
            changed.then(|| if matches!(e, Expr::Seq(_)) { Expr::Seq(ys) } else { Expr::Alt(ys) })
        }
        Expr::Repeat { inner, min: 0, max: None } if !is_regular(inner) => {
            let inner2 = split_repeats(inner, is_regular);
            let alts: Vec<Expr> = match inner2.as_ref().unwrap_or(inner) {
                Expr::Alt(xs) => xs.clone(),
                Expr::Seq(items) => match items.split_last() {
                    Some((Expr::Alt(xs), prefix)) if prefix.iter().all(is_regular) => xs
                        .iter()
                        .map(|a| {
                            let mut s = prefix.to_vec();
                            s.push(a.clone());
                            Expr::Seq(s)
                        })
                        .collect(),
                    _ => Vec::new(),
                },
                _ => Vec::new(),
            };
            let (r, n): (Vec<Expr>, Vec<Expr>) = alts.into_iter().partition(|x| is_regular(x));
            if r.is_empty() || n.is_empty() {
                return inner2.map(star);
            }
            let runs = star(alt_of(r));
            Some(Expr::Seq(vec![star(Expr::Seq(vec![runs.clone(), alt_of(n)])), runs]))
        }
        Expr::Repeat { inner, min, max } => split_repeats(inner, is_regular).map(|i| Expr::Repeat { inner: Box::new(i), min: *min, max: *max }),
        Expr::Literal(_) | Expr::Terminal(_) | Expr::Ref { .. } | Expr::Token(_) | Expr::Tokens(_) | Expr::Perm(_) => None,
    }
}

fn contains_perm_or_token(e: &Expr) -> bool {
    match e {
        Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().any(contains_perm_or_token),
        Expr::Repeat { inner, .. } => contains_perm_or_token(inner),
        Expr::Perm(_) | Expr::Token(_) | Expr::Tokens(_) => true,
        Expr::Ref { .. } | Expr::Literal(_) | Expr::Terminal(_) => false,
    }
}

fn visit_refs(e: &Expr, f: &mut impl FnMut(&str, usize)) {
    match e {
        Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().for_each(|x| visit_refs(x, f)),
        Expr::Repeat { inner, .. } => visit_refs(inner, f),
        Expr::Token(inner) => visit_refs(inner, f),
        Expr::Ref { name, offset } => f(name, *offset),
        Expr::Perm(p) => {
            p.members.iter().for_each(|(m, _)| visit_refs(m, f));
            p.extra.iter().chain(std::iter::once(&p.sep)).for_each(|x| visit_refs(x, f));
        }
        Expr::Literal(_) | Expr::Terminal(_) | Expr::Tokens(_) => {}
    }
}

fn prune_unproductive(names: &[String], prods: Vec<Production>, terms: &[Terminal], perms: &mut [Perm], start: u32, root: &str) -> Result<Vec<Production>> {
    let mut productive = vec![false; names.len()];
    let mut perm_ok = vec![false; perms.len()];
    let set_enabled = |p: &mut Perm, productive: &[bool]| {
        p.enabled = vec![0; p.len().div_ceil(64)];
        for i in 0..p.len() {
            if productive[p.first[i] as usize] && productive[p.next[i] as usize] {
                p.enabled[i / 64] |= 1 << (i % 64);
            }
        }
        p.extra_enabled = p.extra.is_some_and(|(f, x)| productive[f as usize] && productive[x as usize]);
    };
    let sym_ok = |s: &Sym, productive: &[bool], perm_ok: &[bool]| match (s.as_terminal(), s.as_perm()) {
        (Some(t), _) => !terms[t as usize].automaton.is_empty_language(),
        (None, Some(k)) => perm_ok[k as usize],
        (None, None) => productive[s.0 as usize],
    };
    loop {
        let mut changed = false;
        for p in &prods {
            if !productive[p.lhs as usize] && p.rhs.iter().all(|s| sym_ok(s, &productive, &perm_ok)) {
                productive[p.lhs as usize] = true;
                changed = true;
            }
        }
        for (k, p) in perms.iter_mut().enumerate() {
            if !perm_ok[k] {
                set_enabled(p, &productive);
                if p.viable(&crate::parser::perm::PermState::default()) {
                    perm_ok[k] = true;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    for p in perms.iter_mut() {
        set_enabled(p, &productive);
    }
    if !productive[start as usize] {
        return Err(Error::GrammarInvalid {
            message: format!("rule '{root}' matches no finite string (every alternative recurses forever or uses an empty character class)"),
            location: None,
        });
    }
    Ok(prods.into_iter().filter(|p| p.rhs.iter().all(|s| sym_ok(s, &productive, &perm_ok))).collect())
}

struct Lowerer<'a> {
    rules: &'a [crate::frontend::ebnf::RuleDef],
    index: &'a FxHashMap<&'a str, usize>,
    regular: Vec<bool>,
    rule_rx: Vec<Option<Rx>>,
    limits: &'a Limits,
    nt_names: Vec<String>,
    productions: Vec<Production>,
    rule_nt: Vec<Option<u32>>,
    terminals: Vec<Terminal>,
    term_index: FxHashMap<Rx, u32>,
    opt_nt: FxHashMap<u32, u32>,
    label: String,
    perms: Vec<Perm>,
    /// The symbol of each atomic token lowered so far, by the address of its shared
    /// expression ([`Expr::Token`]): a layout's separators recur in every object and array.
    token_syms: FxHashMap<usize, Sym>,
    /// Terminals matched by token id, by class.
    token_classes: FxHashMap<crate::frontend::token_class::TokenClass, u32>,
    /// Scratch list for an atomic item's symbols.
    syms: Vec<Sym>,
}

impl Lowerer<'_> {
    fn is_regular(&self, e: &Expr) -> bool {
        expr_is_regular(e, &self.regular, self.index)
    }

    fn to_rx(&self, e: &Expr) -> Result<Rx> {
        let rx = match e {
            Expr::Literal(b) => Rx::Literal(b.clone()),
            Expr::Terminal(rx) => rx.clone(),
            Expr::Ref { name, .. } => self.rule_rx[self.index[name.as_str()]].clone().expect("regular rules are converted in dependency order"),
            Expr::Seq(xs) => Rx::concat(xs.iter().map(|x| self.to_rx(x)).collect::<Result<_>>()?),
            Expr::Alt(xs) => Rx::alt(xs.iter().map(|x| self.to_rx(x)).collect::<Result<_>>()?),
            Expr::Repeat { inner, min, max } => {
                self.check_repeat(*min, *max)?;
                Rx::Repeat { inner: std::sync::Arc::new(self.to_rx(inner)?), min: *min, max: *max }
            }
            Expr::Token(inner) => return self.to_rx(inner),
            Expr::Perm(_) => return Err(Error::GrammarInvalid { message: "a key set is not a regular language".into(), location: None }),
            Expr::Tokens(_) => return Err(Error::GrammarInvalid { message: "a token matched by id is not a regular language over text".into(), location: None }),
        };
        if rx.nfa_size() > self.limits.max_nfa_states {
            return Err(Error::Limit {
                name: "max_nfa_states",
                limit: self.limits.max_nfa_states,
                what: "a regular part of the grammar expands to too many states".into(),
                hint: LIMIT_HINT,
            });
        }
        Ok(rx)
    }

    fn check_repeat(&self, min: u32, max: Option<u32>) -> Result<()> {
        if min > self.limits.max_repeat || max.is_some_and(|m| m > self.limits.max_repeat) {
            return Err(Error::Limit {
                name: "max_repeat",
                limit: self.limits.max_repeat as usize,
                what: format!("repetition bound {{{min},{}}}", max.map(|m| m.to_string()).unwrap_or_default()),
                hint: LIMIT_HINT,
            });
        }
        Ok(())
    }

    fn new_nt(&mut self, name: String) -> u32 {
        self.nt_names.push(name);
        (self.nt_names.len() - 1) as u32
    }

    fn add_prod(&mut self, lhs: u32, rhs: Vec<Sym>) -> Result<()> {
        if self.productions.len() % 1024 == 0 {
            crate::runtime::budget::check()?;
        }
        if self.productions.len() >= self.limits.max_productions {
            return Err(Error::Limit {
                name: "max_productions",
                limit: self.limits.max_productions,
                what: "the grammar lowers to too many productions".into(),
                hint: LIMIT_HINT,
            });
        }
        self.productions.push(Production { lhs, rhs });
        Ok(())
    }

    fn lower_alts(&mut self, e: &Expr) -> Result<Vec<Vec<Sym>>> {
        match e {
            Expr::Alt(xs) => xs.iter().map(|x| self.lower_seq(x)).collect(),
            _ => Ok(vec![self.lower_seq(e)?]),
        }
    }

    /// Lowers a sequence to symbols, merging runs of regular items into one terminal.
    fn lower_seq(&mut self, e: &Expr) -> Result<Vec<Sym>> {
        let mut items = Vec::new();
        flatten_seq(e, &mut items);
        self.lower_items(items)
    }

    /// [`Lowerer::lower_seq`] of the flattened items of a sequence.
    fn lower_items(&mut self, items: Vec<&Expr>) -> Result<Vec<Sym>> {
        let mut out = Vec::new();
        let mut pending: Vec<(&Expr, Rx)> = Vec::new();
        for item in items {
            let rx = if self.is_regular(item) {
                match self.to_rx(item) {
                    Ok(rx) => Some(rx),
                    // Too large as one regex: lowered structurally below.
                    Err(Error::Limit { name: "max_nfa_states", .. }) => None,
                    Err(e) => return Err(e),
                }
            } else {
                None
            };
            if let Some(rx) = rx {
                pending.push((item, rx));
            } else {
                if !pending.is_empty() {
                    self.flush_rx(std::mem::take(&mut pending), &mut out)?;
                }
                out.push(self.lower_item(item)?);
            }
        }
        if !pending.is_empty() {
            self.flush_rx(pending, &mut out)?;
        }
        Ok(out)
    }

    /// Turns a run of regular pieces into symbols: one terminal when its DFA stays small;
    /// else one terminal per piece; a piece whose own DFA is too large is lowered
    /// structurally (its sub-rules become nonterminals), which bounds automaton size at the
    /// price of more parser work. Only an atomic piece (a literal or class) can still fail.
    ///
    /// The symbols are appended to `out` (this and the functions below write into the caller's
    /// list: a list per piece was a tenth of a schema compile's allocations).
    fn flush_rx(&mut self, mut pending: Vec<(&Expr, Rx)>, out: &mut Vec<Sym>) -> Result<()> {
        if pending.len() == 1 {
            let (e, rx) = pending.pop().expect("one piece");
            return self.piece_syms(e, rx, out);
        }
        // The pieces move into the concatenation; in the rare case that it is too large as
        // one terminal, they are converted again from their expressions.
        let (exprs, rxs): (Vec<&Expr>, Vec<Rx>) = pending.into_iter().unzip();
        match self.terminal_syms(&Rx::concat(rxs)) {
            Err(Error::Limit { .. }) => {
                for e in exprs {
                    let rx = self.to_rx(e)?;
                    self.piece_syms(e, rx, out)?;
                }
                Ok(())
            }
            r => {
                out.extend(r?);
                Ok(())
            }
        }
    }

    fn piece_syms(&mut self, e: &Expr, rx: Rx, out: &mut Vec<Sym>) -> Result<()> {
        match self.terminal_syms(&rx) {
            Err(Error::Limit { .. }) if is_compound(e) => {
                out.push(self.lower_item(e)?);
                Ok(())
            }
            Err(Error::Limit { .. }) => self.rx_structural(rx, out),
            r => {
                out.extend(r?);
                Ok(())
            }
        }
    }

    /// Symbols for `rx`: one terminal when its automaton fits the limits, else its structure
    /// (concatenation → a sequence, alternation → a nonterminal, repetition → a repeat
    /// nonterminal) lowered the same way, down to pieces whose automata fit. The language is
    /// unchanged; only an atomic piece that is itself too large still fails.
    fn rx_structural(&mut self, rx: Rx, out: &mut Vec<Sym>) -> Result<()> {
        let err = match self.terminal_syms(&rx) {
            Err(e @ Error::Limit { .. }) => e,
            r => {
                out.extend(r?);
                return Ok(());
            }
        };
        match rx {
            Rx::Concat(xs) => {
                for x in xs {
                    self.rx_structural(x, out)?;
                }
                Ok(())
            }
            Rx::Alt(xs) => {
                let nt = self.new_nt(format!("{}#alt", self.label));
                for x in xs {
                    let mut rhs = Vec::new();
                    self.rx_structural(x, &mut rhs)?;
                    self.add_prod(nt, rhs)?;
                }
                out.push(Sym::n(nt));
                Ok(())
            }
            Rx::Repeat { inner, min, max } => {
                let mut x = Vec::new();
                self.rx_structural(std::sync::Arc::unwrap_or_clone(inner), &mut x)?;
                out.push(Sym::n(self.repeat_nt(&x, min, max)?));
                Ok(())
            }
            _ => Err(err),
        }
    }

    /// A nonterminal deriving `x` repeated `min..=max` times.
    fn repeat_nt(&mut self, x: &[Sym], min: u32, max: Option<u32>) -> Result<u32> {
        self.check_repeat(min, max)?;
        let nt = self.new_nt(format!("{}#repeat", self.label));
        let head: Vec<Sym> = (0..min).flat_map(|_| x.iter().copied()).collect();
        match max {
            None => {
                // nt ::= X^min | nt X   (left recursion: cheap for Earley)
                self.add_prod(nt, head)?;
                let mut rec = vec![Sym::n(nt)];
                rec.extend(x.iter().copied());
                self.add_prod(nt, rec)?;
            }
            Some(mx) => {
                // tail_k ::= ε | X tail_{k-1}, built from k = 0 up.
                let mut tail: Option<u32> = None;
                for _ in min..mx {
                    let t = self.new_nt(format!("{}#tail", self.label));
                    self.add_prod(t, vec![])?;
                    let mut rhs = x.to_vec();
                    if let Some(prev) = tail {
                        rhs.push(Sym::n(prev));
                    }
                    self.add_prod(t, rhs)?;
                    tail = Some(t);
                }
                let mut rhs = head;
                if let Some(t) = tail {
                    rhs.push(Sym::n(t));
                }
                self.add_prod(nt, rhs)?;
            }
        }
        Ok(nt)
    }

    /// The nonterminal of rule `i`, creating it (and its productions) on first use for a
    /// regular rule that has to be lowered structurally.
    fn rule_sym(&mut self, i: usize) -> Result<u32> {
        if let Some(nt) = self.rule_nt[i] {
            return Ok(nt);
        }
        let nt = self.new_nt(self.rules[i].name.clone());
        self.rule_nt[i] = Some(nt);
        let saved = std::mem::replace(&mut self.label, self.rules[i].name.clone());
        let rules = self.rules;
        for rhs in self.lower_alts(&rules[i].expr)? {
            self.add_prod(nt, rhs)?;
        }
        self.label = saved;
        Ok(nt)
    }

    /// Symbols for one regular language: nothing for {ε}, `T` or `Opt(T)` otherwise.
    fn terminal_syms(&mut self, rx: &Rx) -> Result<Option<Sym>> {
        if *rx == Rx::Empty {
            return Ok(None);
        }
        let t = match self.term_index.get(rx) {
            Some(&t) => t,
            None => {
                // (Deferred when it can be: built after the compile, or at the end of
                // lowering with `CORRAL_DEFER_AUTOMATA=0`.)
                let (automaton, gid) = crate::automata::term_dfa::terminal(rx, self.limits, true)?;
                let t = self.terminals.len() as u32;
                self.terminals.push(Terminal { automaton: std::sync::Arc::new(automaton), label: self.label.clone(), gid, tokens: None });
                self.term_index.insert(rx.clone(), t);
                t
            }
        };
        let dfa = &self.terminals[t as usize].automaton;
        if !dfa.nullable() {
            return Ok(Some(Sym::t(t)));
        }
        if dfa.is_empty_language() {
            return Ok(None);
        }
        let opt = match self.opt_nt.get(&t) {
            Some(&o) => o,
            None => {
                let o = self.new_nt(format!("{}?", self.label));
                self.add_prod(o, vec![])?;
                self.add_prod(o, vec![Sym::t(t)])?;
                self.opt_nt.insert(t, o);
                o
            }
        };
        Ok(Some(Sym::n(opt)))
    }

    /// A non-regular item as one symbol.
    fn lower_item(&mut self, e: &Expr) -> Result<Sym> {
        match e {
            Expr::Ref { name, .. } => {
                let i = self.index[name.as_str()];
                Ok(Sym::n(self.rule_sym(i)?))
            }
            Expr::Alt(_) | Expr::Seq(_) => {
                let nt = self.new_nt(format!("{}#group", self.label));
                for rhs in self.lower_alts(e)? {
                    self.add_prod(nt, rhs)?;
                }
                Ok(Sym::n(nt))
            }
            Expr::Repeat { inner, min, max } => {
                let x = self.lower_seq(inner)?;
                Ok(Sym::n(self.repeat_nt(&x, *min, *max)?))
            }
            Expr::Perm(spec) => {
                let lhs = self.new_nt(format!("{}#keys", self.label));
                let mut members = Vec::new();
                for m in spec.members.iter().map(|(m, _)| m).chain(spec.extra.iter()) {
                    let first = self.new_nt(format!("{}#key", self.label));
                    for rhs in self.lower_alts(m)? {
                        self.add_prod(first, rhs)?;
                    }
                    let next = self.new_nt(format!("{}#key,", self.label));
                    // `sep m` (borrowed: a member holds its whole value's expression)
                    let mut items = Vec::new();
                    flatten_seq(&spec.sep, &mut items);
                    flatten_seq(m, &mut items);
                    let rhs = self.lower_items(items)?;
                    self.add_prod(next, rhs)?;
                    members.push((first, next));
                }
                let n = spec.members.len();
                let mut required = vec![0u64; n.div_ceil(64)];
                for (i, (_, r)) in spec.members.iter().enumerate() {
                    if *r {
                        required[i / 64] |= 1 << (i % 64);
                    }
                }
                // The index after the members are lowered: a key set inside a member pushes
                // its own first (taking it before made the outer key set's symbol name the
                // inner one).
                let k = self.perms.len() as u32;
                self.perms.push(Perm {
                    lhs,
                    first: members[..n].iter().map(|m| m.0).collect(),
                    next: members[..n].iter().map(|m| m.1).collect(),
                    extra: members.get(n).copied(),
                    required,
                    enabled: Vec::new(),
                    extra_enabled: false,
                    min: spec.min,
                    max: spec.max.unwrap_or(u32::MAX),
                });
                self.add_prod(lhs, vec![Sym::perm(k)])?;
                Ok(Sym::n(lhs))
            }
            Expr::Tokens(class) => {
                if let Some(&t) = self.token_classes.get(&**class) {
                    return Ok(Sym::t(t));
                }
                // Its automaton is never run (no lexeme of it starts): a language of its own,
                // which no text reaches, keeps its process-wide id apart from every other.
                let marker = [&b"\xff\xfetoken "[..], format!("{class:?}").as_bytes()].concat();
                let (automaton, gid) = crate::automata::term_dfa::terminal(&Rx::Literal(marker), self.limits, false)?;
                let t = self.terminals.len() as u32;
                self.terminals.push(Terminal { automaton: std::sync::Arc::new(automaton), label: class.label(), gid, tokens: Some(class.clone()) });
                self.token_classes.insert((**class).clone(), t);
                Ok(Sym::t(t))
            }
            Expr::Token(inner) if !self.is_regular(inner) => self.lower_item(inner),
            Expr::Literal(_) | Expr::Terminal(_) | Expr::Token(_) => {
                // A token, or an atomic piece whose own automaton is too large.
                let shared = match e {
                    Expr::Token(inner) => Some(std::sync::Arc::as_ptr(inner) as usize),
                    _ => None,
                };
                if let Some(s) = shared.and_then(|k| self.token_syms.get(&k)) {
                    return Ok(*s);
                }
                let rx = match e {
                    Expr::Terminal(rx) => rx.clone(),
                    Expr::Token(inner) if matches!(**inner, Expr::Terminal(_)) => match &**inner {
                        Expr::Terminal(rx) => rx.clone(),
                        _ => unreachable!(),
                    },
                    _ => self.to_rx(e)?,
                };
                let mut rhs = std::mem::take(&mut self.syms);
                rhs.clear();
                self.rx_structural(rx, &mut rhs)?;
                let sym = match rhs[..] {
                    [s] => {
                        self.syms = rhs;
                        s
                    }
                    _ => {
                        let nt = self.new_nt(format!("{}#group", self.label));
                        self.add_prod(nt, rhs)?;
                        Sym::n(nt)
                    }
                };
                if let Some(k) = shared {
                    self.token_syms.insert(k, sym);
                }
                Ok(sym)
            }
        }
    }
}

/// Whether `e` can be lowered structurally into smaller pieces.
fn is_compound(e: &Expr) -> bool {
    matches!(e, Expr::Ref { .. } | Expr::Seq(_) | Expr::Alt(_) | Expr::Repeat { .. })
}

fn flatten_seq<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::Seq(xs) => xs.iter().for_each(|x| flatten_seq(x, out)),
        _ => out.push(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automata::dfa::DEAD;

    fn lowered(text: &str) -> Cfg {
        let limits = Limits::default();
        lower(&crate::frontend::ebnf::parse(text, &limits).unwrap(), "root", &limits).unwrap()
    }

    /// Whether some terminal of `cfg` matches all of `s` as one lexeme.
    fn one_lexeme(cfg: &Cfg, s: &[u8]) -> bool {
        cfg.terminals.iter().any(|t| {
            let d = t.dfa();
            let mut st = d.start();
            for &b in s {
                st = d.next(st, b);
                if st == DEAD {
                    return false;
                }
            }
            d.is_accepting(st)
        })
    }

    /// Tail recursion through a regular prefix repeats the prefix inside one terminal; a
    /// repetition's regular alternatives (after a regular prefix distributed over them) run
    /// inside one terminal between its other alternatives.
    #[test]
    fn regular_runs_become_one_terminal() {
        let cfg = lowered("root ::= u\nu ::= (\"-\" | \"*\") \" \"? u | \"x\" | \"(\" u \")\"");
        assert!(one_lexeme(&cfg, b"-* -*"), "prefixes of u repeat in one terminal");
        let cfg = lowered("root ::= \"x\" (\" \"? (\"[\" root \"]\" | \"--\" | \".\" [a-z]+))*");
        assert!(one_lexeme(&cfg, b"-- --.ab--"), "the postfix run is one terminal");
        assert!(!one_lexeme(&cfg, b"--[x]"), "brackets hold a root: not regular");
        // Nothing to split: every alternative holds a recursion.
        let cfg = lowered("root ::= \"x\" (\"[\" root \"]\" | \"(\" root \")\")*");
        assert!(!one_lexeme(&cfg, b"[x]"));
    }
}
