"""JSON Schema at scale: long enums as one automaton, exact against the per-value form.

An ``enum`` of 64 or more strings compiles to one minimal automaton of all of them (shared
prefixes and suffixes); below that, each value is its own alternative. The tests compare
the two forms' masks token by token on GPT-2's vocabulary (the long enum against the same
values split into short enums under ``anyOf``), and check the sizes the issue names compile
and fill quickly enough to be usable (generous bounds: behaviour, not speed claims; the
numbers are in benches/).
"""

from __future__ import annotations

import json
import random
import time

import numpy as np
import pytest

import corral

VOCAB = corral.builtin_vocabulary()


def _mask(m: corral.Matcher) -> np.ndarray:
    out = np.zeros((VOCAB.size + 31) // 32, dtype=np.int32)
    m.fill_next_token_bitmask(out)
    return out


def _values(rng: random.Random, n: int) -> list:
    alphabet = ["a", "b", "é", '"', "\\", "\n", "😀", "-", "1"]
    vals = {"", "a", "ab", "abc", "b"}
    while len(vals) < n:
        vals.add("".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 6))))
    return sorted(vals)


@pytest.mark.parametrize("seed", range(3))
def test_long_enum_equals_short_enums(seed):
    rng = random.Random(seed)
    vals = _values(rng, 150)
    extra = [1, None, {"k": [True]}]
    long = corral.CompiledGrammar(corral.Grammar.from_json_schema({"enum": vals + extra}), VOCAB)
    parts = [vals[i : i + 40] for i in range(0, len(vals), 40)]
    short = corral.CompiledGrammar(corral.Grammar.from_json_schema({"anyOf": [{"enum": p} for p in parts] + [{"enum": extra}]}), VOCAB)
    texts = [json.dumps(v, ensure_ascii=rng.random() < 0.5) for v in rng.sample(vals + extra, 12)]
    for text in texts:
        a, b = corral.Matcher(long), corral.Matcher(short)
        for tok in VOCAB.encode(text.encode()):
            assert np.array_equal(_mask(a), _mask(b)), text
            assert a.accept_token(tok) and b.accept_token(tok)
        assert a.is_accepting() and b.is_accepting()
    # Random walks through the long form's masks.
    for _ in range(10):
        a, b = corral.Matcher(long), corral.Matcher(short)
        for _ in range(12):
            ma = _mask(a)
            assert np.array_equal(ma, _mask(b))
            ids = np.nonzero(np.unpackbits(ma.view(np.uint8), bitorder="little")[: VOCAB.size])[0]
            if len(ids) == 0:
                break
            t = int(rng.choice(ids))
            assert a.accept_token(t) and b.accept_token(t)
            if a.is_terminated():
                break


def test_hundred_thousand_value_enum():
    t0 = time.perf_counter()
    g = corral.Grammar.from_json_schema({"enum": [f"value-{i}" for i in range(100_000)]})
    cg = corral.CompiledGrammar(g, VOCAB)
    assert time.perf_counter() - t0 < 20, "compiles (generous bound: the benchmark has the number)"
    for s, ok in [('"value-0"', True), ('"value-99999"', True), ('"\\u0076alue-7"', True), ('"value-100000"', False), ('"value-01"', False)]:
        m = corral.Matcher(cg)
        assert (m.accept_bytes(s.encode()) and m.is_accepting()) == ok, s


def test_one_of_of_ten_thousand_consts():
    """A ``oneOf`` of 10,000 consts is one enum (the values of exactly one branch)."""
    cg = corral.CompiledGrammar(corral.Grammar.from_json_schema({"oneOf": [{"const": f"c{i}"} for i in range(10_000)] + [{"const": "c5"}]}), VOCAB)
    for s, ok in [('"c0"', True), ('"c9999"', True), ('"c5"', False), ('"c10000"', False)]:
        m = corral.Matcher(cg)
        assert (m.accept_bytes(s.encode()) and m.is_accepting()) == ok, s


@pytest.mark.parametrize("size", [100_000, 1_000_000])
def test_long_const_string(size):
    """A long ``const`` string is a sequence of pieces: exact, and masks stay per token."""
    value = "".join("ab\"é\n"[i % 5] for i in range(size))
    cg = corral.CompiledGrammar(corral.Grammar.from_json_schema({"const": value}), VOCAB)
    m = corral.Matcher(cg)
    assert all(m.accept_token(t) for t in VOCAB.encode(json.dumps(value).encode()))
    assert m.is_accepting()
    m = corral.Matcher(cg)
    assert m.accept_bytes(json.dumps(value[:-1]).encode()[:-1])
    assert not m.accept_bytes(b'"'), "one character short"


def test_thousand_properties_keys_are_exact():
    props = {f"p{i}": {"type": "integer"} for i in range(1_000)}
    cg = corral.CompiledGrammar(corral.Grammar.from_json_schema({"type": "object", "properties": props, "additionalProperties": False}), VOCAB)
    for s, ok in [('{"p1": 1, "p10": 2, "p999": 3}', True), ('{"p1000": 1}', False), ('{"p": 1}', False), ('{"p1": 1, "p1": 2}', False)]:
        m = corral.Matcher(cg)
        assert (m.accept_bytes(s.encode()) and m.is_accepting()) == ok, s
    # Masks along a document agree with token-by-token acceptance.
    m = corral.Matcher(cg)
    for tok in VOCAB.encode(b'{"p12": 1, "p120": 2}'):
        mask = _mask(m)
        assert (int(mask[tok // 32]) >> (tok % 32)) & 1
        assert m.accept_token(tok)


# Schemas whose compile takes far longer than the budgets below (seconds unbudgeted on this
# VM), one per place the time goes: oneOf disjointness over object branches, many bounded
# numbers (decimal automata), a million-value enum (the dict's conversion to JSON, the
# values' copy, their sort and automaton, the cache key's text). Built when a test asks.
SLOW_SCHEMAS = {
    "oneOf objects": lambda: {"oneOf": [{"type": "object", "properties": {"k": {"const": f"c{i}"}, "v": {"type": "integer"}}, "required": ["k"]} for i in range(4_000)]},
    "bounded numbers": lambda: {"anyOf": [{"type": "number", "minimum": i * 0.37, "maximum": i * 0.37 + 0.11, "multipleOf": 0.01} for i in range(20_000)]},
    "million-value enum": lambda: {"enum": [f"value-{i}" for i in range(1_000_000)]},
}


@pytest.mark.parametrize(
    "name, budget_ms",
    # (The enum compiles whole in about 300 ms on a quiet VM: only the smaller budget.)
    [(n, b) for n in sorted(SLOW_SCHEMAS) for b in (100, 400) if not (n == "million-value enum" and b > 100)],
)
def test_compile_budget_stops_soon_after_the_deadline(name, budget_ms):
    """``max_compile_ms`` covers the schema-to-grammar phase, from the call on (the dict's
    conversion to JSON included): the call ends with CompileTimeoutError within 1.5x the
    budget + 100 ms (the benchmark reports the real overshoot)."""
    schema = SLOW_SCHEMAS[name]()
    t = time.perf_counter()
    with pytest.raises(corral.CompileTimeoutError) as e:
        corral.Grammar.from_json_schema(schema, limits={"max_compile_ms": budget_ms})
    took = time.perf_counter() - t
    assert e.value.limit_name == "max_compile_ms"
    assert took <= 1.5 * budget_ms / 1e3 + 0.1, f"{name}: {took * 1e3:.0f} ms under a {budget_ms} ms budget"


def test_fill_budget_stops_soon_after_the_deadline():
    """``max_fill_ms`` on a schema's grammar: the limit reaches the grammar, and a fill ends
    within 1.5x the budget + 100 ms, with FillTimeoutError (an all-zero row) when it stopped
    at the deadline, else with the full mask (inside a key of an object with 50,000
    properties a fill takes 1-10 ms, mostly in a cached entry's build, which the deadline does
    not interrupt: whether a 1 ms budget cuts it depends on the machine). The timeout itself
    is exercised on an ambiguous grammar in tests/test_limits.py."""
    props = {f"p{i}": {"type": "integer"} for i in range(50_000)}
    schema = {"type": "object", "properties": props}
    g = corral.Grammar.from_json_schema(schema, limits={"max_fill_ms": 1, "max_productions": 1_000_000})
    assert g.max_fill_ms == 1
    m = corral.Matcher(corral.CompiledGrammar(g, VOCAB))
    assert m.accept_bytes(b'{"p1')
    mask = np.full((VOCAB.size + 31) // 32, -1, dtype=np.int32)
    t = time.perf_counter()
    try:
        m.fill_next_token_bitmask(mask)
        stopped = False
    except corral.FillTimeoutError:
        stopped = True
    took = time.perf_counter() - t
    assert took <= 1.5 * 1 / 1e3 + 0.1, took
    if stopped:
        assert not mask.any()
    else:
        loose = corral.Matcher(corral.CompiledGrammar(corral.Grammar.from_json_schema(schema, limits={"max_productions": 1_000_000}), VOCAB))
        assert loose.accept_bytes(b'{"p1')
        assert np.array_equal(mask, _mask(loose))