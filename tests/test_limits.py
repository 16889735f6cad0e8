"""Pathological grammars finish quickly or fail with a LimitExceededError naming the limit."""

from __future__ import annotations

import time

import pytest

import corral
from slow_fill import AMBIGUOUS


def test_huge_repetition_bound_names_the_limit():
    with pytest.raises(corral.LimitExceededError) as e:
        corral.Grammar.from_ebnf("root ::= [a-z]{1,100000}")
    assert e.value.limit_name == "max_repeat" and "limits=" in str(e.value)
    # Raising the limit is possible (and then another limit, the automaton size, applies).
    g = corral.Grammar.from_ebnf("root ::= [a-z]{1,20000}", limits={"max_repeat": 20000, "max_dfa_states": 30000})
    assert g.num_terminals == 1


def test_unknown_limit_name():
    with pytest.raises(corral.UsageError, match="unknown limit 'max_cows'"):
        corral.Grammar.from_ebnf('root ::= "a"', limits={"max_cows": 1})


def test_dfa_state_limit_above_16_bit_ids_is_lowered_to_them():
    # Transition tables hold 16-bit state ids: a larger max_dfa_states works as 65,536. This
    # rule determinizes to about 2^17 states, so even then it is split into parser rules
    # (structural lowering) rather than truncated; the masks stay exact.
    g = corral.Grammar.from_ebnf('root ::= [ab]* "a" [ab]{16}', limits={"max_dfa_states": 10**7, "max_nfa_states": 10**7})
    assert g.num_terminals > 1
    toks = [b"a", b"b"]
    vocab = corral.Vocabulary.from_bytes(toks, eos_token_ids=[], vocab_size=2)
    # Complete exactly when the 17th character from the end is "a".
    for text, complete in [("ba" + "b" * 16, True), ("a" * 17, True), ("b" * 17, False), ("ab" + "b" * 16, False)]:
        m = corral.Matcher(corral.CompiledGrammar(g, vocab))
        assert all(m.accept_token(toks.index(c.encode())) for c in text)
        assert m.is_accepting() == complete, text


def test_a_terminal_over_the_16_bit_state_cap_says_raising_the_limit_cannot_help():
    # One literal of 70,000 bytes is a single atomic terminal of 70,001 states.
    with pytest.raises(corral.LimitExceededError) as e:
        corral.Grammar.from_ebnf('root ::= "' + "ab" * 35_000 + '"', limits={"max_dfa_states": 10**6, "max_nfa_states": 10**6})
    assert e.value.limit_name == "max_dfa_states"
    assert "65,536 is the most" in str(e.value) and "split the rule" in str(e.value)


def test_deep_nesting_and_postfix_chains_do_not_overflow_the_stack():
    with pytest.raises(corral.GrammarSyntaxError, match="nested deeper"):
        corral.Grammar.from_ebnf("root ::= " + "(" * 50_000 + '"a"' + ")" * 50_000)
    with pytest.raises(corral.GrammarSyntaxError, match="too many repetition operators"):
        corral.Grammar.from_ebnf('root ::= "a"' + "*" * 50_000)
    with pytest.raises(corral.GrammarSyntaxError):
        corral.Grammar.from_regex("(" * 50_000 + "a" + ")" * 50_000)


def test_catastrophic_regex_is_linear():
    t = time.perf_counter()
    g = corral.Grammar.from_regex("(a*)*b")
    v = corral.Vocabulary.from_bytes([b"a", b"aa", b"b", b""], eos_token_ids=[3])
    m = corral.Matcher(corral.compile(g, v))
    assert m.accept_bytes(b"a" * 10_000)
    assert not m.accept_bytes(b"c")
    assert m.accept_bytes(b"b") and m.is_accepting()
    assert time.perf_counter() - t < 2.0


def test_large_alternation_compiles():
    words = " | ".join(f'"w{i}"' for i in range(20_000))
    t = time.perf_counter()
    g = corral.Grammar.from_ebnf(f"root ::= {words}")
    assert time.perf_counter() - t < 10.0
    v = corral.Vocabulary.from_bytes([b"w1", b"9999", b"w", b"x", b""], eos_token_ids=[4])
    m = corral.Matcher(corral.compile(g, v))
    assert m.accept_bytes(b"w19999") and m.is_accepting()
    assert not m.accept_bytes(b"9")


def test_deeply_nested_json_input():
    g = corral.builtin_grammar("json")
    v = corral.Vocabulary.from_bytes([b"[", b"]", b"[[", b"]]", b"1", b""], eos_token_ids=[5])
    m = corral.Matcher(corral.compile(g, v))
    depth = 10_000
    assert m.accept_bytes(b"[" * depth)
    mask = corral.allocate_token_bitmask(1, v.size)
    m.fill_next_token_bitmask(mask)
    assert set(corral.allowed_token_ids(mask[0], v.size)) == {0, 1, 2, 3, 4}
    assert m.accept_bytes(b"1" + b"]" * depth) and m.is_accepting()


def test_long_rule_chains_hit_the_closure_limit_not_memory():
    rules = "\n".join(f"r{i} ::= r{i + 1} \"x\" | \"(\" r0 \")\"" for i in range(3000))
    with pytest.raises(corral.LimitExceededError) as e:
        corral.Grammar.from_ebnf("root ::= r0\n" + rules + '\nr3000 ::= "z"', limits={"max_closure_items": 100_000})
    assert e.value.limit_name == "max_closure_items"


def test_panics_become_internal_errors():
    with pytest.raises(corral.InternalError, match="deliberate panic"):
        corral._native._trigger_panic()


def test_compile_time_budget():
    # A large but legitimate grammar: with a tiny budget it stops with CompileTimeoutError.
    words = " | ".join(f'"w{i}x{i * 7919 % 10007}"' for i in range(30_000))
    with pytest.raises(corral.CompileTimeoutError) as e:
        corral.Grammar.from_ebnf(f"root ::= ({words})+", limits={"max_compile_ms": 1, "max_nfa_states": 10_000_000, "max_dfa_states": 10_000_000})
    assert e.value.limit_name == "max_compile_ms" and isinstance(e.value, corral.LimitExceededError)


def test_fill_time_budget_raises_and_leaves_the_matcher_as_it_was():
    """A fill past ``max_fill_ms`` stops with FillTimeoutError: the row is all zeros, nothing
    is cached, the matcher can go on, and in a batch the other rows are still filled."""
    import numpy as np

    vocab = corral.builtin_vocabulary()
    short = " the cat sat on the mat and then it went"  # this fill: a few ms unlimited
    long = (short + " away to sleep for a while") * 8  # ~0.1 s unlimited: far past 1 ms
    tight = corral.Matcher(corral.compile(corral.Grammar.from_ebnf(AMBIGUOUS, limits={"max_fill_ms": 1}), vocab))
    loose = corral.Matcher(corral.compile(corral.Grammar.from_ebnf(AMBIGUOUS, limits={"max_fill_ms": 0}), vocab))
    assert tight.compiled.grammar.max_fill_ms == 1 and loose.compiled.grammar.max_fill_ms == 0
    ids = vocab.encode(long)
    assert all(tight.accept_token(t) for t in ids)
    mask = np.full((1, corral.bitmask_words(vocab.size)), -1, dtype=np.int32)
    t = time.perf_counter()
    with pytest.raises(corral.FillTimeoutError) as e:
        tight.fill_next_token_bitmask(mask)
    took = time.perf_counter() - t
    assert e.value.limit_name == "max_fill_ms" and e.value.limit == 1 and isinstance(e.value, corral.LimitExceededError)
    assert "max_fill_ms" in str(e.value) and took < 0.5, took
    assert not mask.any(), "a stopped fill leaves no partial mask"
    word = vocab.encode(" more")[0]
    assert tight.num_accepted == len(ids) and tight.accept_token(word), "the matcher is unchanged and goes on"
    # In a batch, the row that stops is zeroed and the other rows are still filled.
    rows = np.full((2, mask.shape[1]), -1, dtype=np.int32)
    other = corral.Matcher(corral.compile(corral.Grammar.from_ebnf('root ::= "x"'), vocab))
    with pytest.raises(corral.FillTimeoutError):
        corral.fill_next_token_bitmask_batch([tight, other], rows)
    assert not rows[0].any()
    assert corral.allowed_token_ids(rows[1], vocab.size) == [vocab.encode("x")[0]]
    # Without a budget the same grammar fills (here the shorter position).
    assert all(loose.accept_token(t) for t in vocab.encode(short))
    full = np.zeros_like(mask)
    loose.fill_next_token_bitmask(full)
    assert (int(full[0, word // 32]) >> (word % 32)) & 1
