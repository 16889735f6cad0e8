//! The order the warm-up takes terminals in ([`corral_core::Cfg::terminals_by_distance`]).

use corral_core::{Grammar, Limits};

/// Rules are listed deepest first, so the terminals' own numbering runs the other way; the
/// order from the start is root's terminals, then mid's, then deep's.
#[test]
fn terminals_nearest_the_start_come_first() {
    // Recursive rules keep their terminals apart (no merging into one automaton).
    let src = "deep ::= \"e\" root \"f\"\nmid ::= \"c\" deep | \"d\"\nroot ::= \"a\" mid \"b\" | \"(\" root \")\"\n";
    let g = Grammar::from_ebnf(src, "root", &Limits::default()).unwrap();
    let cfg = g.cfg();
    let order = cfg.terminals_by_distance();
    let labels: Vec<&str> = order.iter().map(|&t| cfg.terminals[t as usize].label.as_str()).collect();
    assert_eq!(labels, ["root", "root", "root", "root", "mid", "mid", "deep", "deep"], "order {order:?}");
    let natural: Vec<&str> = cfg.terminals.iter().map(|t| t.label.as_str()).collect();
    assert_ne!(natural, labels, "the test needs a numbering other than the order from the start");
}
