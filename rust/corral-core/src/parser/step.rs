//! The joint lexer/parser byte step: the one operation every matcher path is built on.
//!
//! A matcher position is a set of [`Lexeme`]s in progress — "terminal `term`, started at parser
//! row `row`, its DFA now in `state`" — plus, when a terminal could end exactly here, the parser
//! row created at this position. A byte advances every lexeme; each lexeme that reaches an
//! accepting DFA state both continues and completes (all ways of splitting the input into
//! terminals are kept, which is what makes the language exactly the grammar's).

use crate::parser::cfg::Cfg;
use crate::automata::dfa::DEAD;
use crate::parser::earley::Parser;

/// A terminal in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Lexeme {
    /// Parser row where the terminal started.
    pub row: u32,
    /// Terminal index.
    pub term: u32,
    /// DFA state of the terminal.
    pub state: u32,
}

/// Sentinel for "no parser row ends at this position".
pub(crate) const NO_ROW: u32 = u32::MAX;

/// Reusable buffers for [`step`].
#[derive(Debug, Default, Clone)]
pub(crate) struct StepScratch {
    completed: Vec<(u32, u32)>,
}

/// Lexemes starting at a fresh parser row. (Terminals matched by token id start none: a
/// token of their class completes them whole, see [`crate::frontend::token_class`].)
#[inline]
pub(crate) fn start_lexemes(cfg: &Cfg, parser: &Parser, row: u32, out: &mut Vec<Lexeme>) {
    for &t in parser.expected(row) {
        let term = &cfg.terminals[t as usize];
        if term.tokens.is_none() {
            out.push(Lexeme { row, term: t, state: term.dfa().start() });
        }
    }
}

/// Advances the lexemes `lex[from]` by byte `b`, appending the resulting lexemes to `lex`
/// and pushing a parser row when some terminal completes. Returns the new position's
/// boundary row ([`NO_ROW`] if none) and whether the position is viable.
#[inline]
pub(crate) fn step(cfg: &Cfg, parser: &mut Parser, lex: &mut Vec<Lexeme>, from: std::ops::Range<usize>, b: u8, scratch: &mut StepScratch) -> (u32, bool) {
    step_completing(cfg, parser, lex, from, b, &[], scratch)
}

/// The lexer half of [`step`]: appends to `lex` each lexeme of `lex[from]` that byte `b`
/// continues, and to `completed` the `(row, terminal)` of each that `b` leaves accepting.
#[inline]
pub(crate) fn advance(cfg: &Cfg, lex: &mut Vec<Lexeme>, from: std::ops::Range<usize>, b: u8, completed: &mut Vec<(u32, u32)>) {
    for i in from {
        let lx = lex[i];
        let dfa = cfg.terminals[lx.term as usize].dfa();
        let s = dfa.next(lx.state, b);
        if s == DEAD {
            continue;
        }
        lex.push(Lexeme { state: s, ..lx });
        if dfa.is_accepting(s) {
            completed.push((lx.row, lx.term));
        }
    }
}

/// [`step`], with `also` (pairs of origin row and terminal) completing at the new position
/// too: the terminals matched by token id that the token whose last byte is `b` completes.
#[inline]
pub(crate) fn step_completing(cfg: &Cfg, parser: &mut Parser, lex: &mut Vec<Lexeme>, from: std::ops::Range<usize>, b: u8, also: &[(u32, u32)], scratch: &mut StepScratch) -> (u32, bool) {
    let out_start = lex.len();
    scratch.completed.clear();
    scratch.completed.extend_from_slice(also);
    advance(cfg, lex, from, b, &mut scratch.completed);
    if scratch.completed.is_empty() {
        return (NO_ROW, lex.len() > out_start);
    }
    let row = parser.push_row(cfg, &scratch.completed);
    start_lexemes(cfg, parser, row, lex);
    (row, true)
}
