//! A compiled, vocabulary-independent grammar: the lowered CFG and its terminal automata.

use crate::parser::cfg::{Cfg, Production, Sym, Terminal};
use crate::runtime::error::{Error, Result};
use crate::runtime::limits::Limits;
use std::sync::Arc;

/// A grammar ready to be paired with any vocabulary. Cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct Grammar {
    cfg: Arc<Cfg>,
    source: Arc<str>,
    /// [`Limits::max_fill_ms`] of the limits it was built with.
    max_fill_ms: u64,
}

impl Grammar {
    /// Parses and lowers GBNF text, starting at rule `root`.
    pub fn from_ebnf(text: &str, root: &str, limits: &Limits) -> Result<Grammar> {
        let _budget = crate::runtime::budget::Scope::new(limits.max_compile_ms);
        let ast = crate::frontend::ebnf::parse(text, limits)?;
        let cfg = crate::parser::lower::lower(&ast, root, limits)?;
        Ok(Grammar { cfg: Arc::new(cfg), source: format!("ebnf:{root}:{text}").into(), max_fill_ms: limits.max_fill_ms })
    }

    /// Lowers a grammar built programmatically (e.g. by a JSON Schema compiler).
    /// `source_key` must identify the grammar uniquely (it keys compile caches).
    pub fn from_ast(ast: &crate::frontend::ebnf::GrammarAst, root: &str, source_key: &str, limits: &Limits) -> Result<Grammar> {
        let _budget = crate::runtime::budget::Scope::new(limits.max_compile_ms);
        let cfg = crate::parser::lower::lower(ast, root, limits)?;
        Ok(Grammar { cfg: Arc::new(cfg), source: source_key.into(), max_fill_ms: limits.max_fill_ms })
    }

    /// A grammar whose language is the strings `pattern` matches in full.
    pub fn from_regex(pattern: &str, limits: &Limits) -> Result<Grammar> {
        let _budget = crate::runtime::budget::Scope::new(limits.max_compile_ms);
        let rx = crate::frontend::regex::parse_regex(pattern, limits).map_err(|e| match e {
            Error::Regex { message, offset: Some(o) } => Error::GrammarSyntax { message, location: crate::runtime::error::Location::at(pattern, o) },
            e => e,
        })?;
        let (dfa, gid) = crate::automata::intern::terminal_dfa(&rx, limits)?;
        if dfa.is_empty_language() && !dfa.nullable() {
            return Err(Error::Regex { message: format!("regex /{pattern}/ matches no string"), offset: None });
        }
        let mut prods = Vec::new();
        if dfa.nullable() {
            prods.push(Production { lhs: 0, rhs: vec![] });
        }
        let mut terminals = Vec::new();
        if !dfa.is_empty_language() {
            prods.push(Production { lhs: 0, rhs: vec![Sym::t(0)] });
        }
        terminals.push(Terminal { automaton: Arc::new(crate::automata::term_dfa::TermDfa::built(dfa, gid)), label: "regex".into(), gid, tokens: None });
        prods.push(Production { lhs: 1, rhs: vec![Sym::n(0)] });
        let cfg = Cfg::new(vec!["root".into(), "<start>".into()], prods, terminals, 1, 1, limits)?;
        Ok(Grammar { cfg: Arc::new(cfg), source: format!("regex:{pattern}").into(), max_fill_ms: limits.max_fill_ms })
    }

    /// The time budget of one mask fill, in milliseconds (0 = unlimited): see
    /// [`Limits::max_fill_ms`].
    pub fn max_fill_ms(&self) -> u64 {
        self.max_fill_ms
    }

    /// The lowered grammar.
    pub fn cfg(&self) -> &Arc<Cfg> {
        &self.cfg
    }

    /// A string identifying the grammar's source (kind, root and text); equal sources give equal grammars.
    pub fn source_key(&self) -> &str {
        &self.source
    }

    /// Number of rules in the source.
    pub fn num_rules(&self) -> usize {
        self.cfg.source_rules
    }

    /// Number of terminals after lowering.
    pub fn num_terminals(&self) -> usize {
        self.cfg.terminals.len()
    }

    /// Number of productions after lowering.
    pub fn num_productions(&self) -> usize {
        self.cfg.productions.len()
    }

    /// Total DFA states over all terminals.
    pub fn num_dfa_states(&self) -> usize {
        self.cfg.terminals.iter().map(|t| t.dfa().num_states()).sum()
    }
}
