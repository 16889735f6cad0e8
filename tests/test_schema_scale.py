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
