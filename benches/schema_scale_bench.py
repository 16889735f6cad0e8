"""JSON Schema at scale (issue 40): long enums, oneOf of consts, long consts, many properties,
and how soon a compile budget stops a slow compile.

For each case: schema-to-grammar time, CompiledGrammar time (includes the first mask) and the
fill p50/p99/max along a valid document, on the built-in GPT-2 vocabulary (no downloads).
A case that fails prints its error and how long it took. Then, for slow schemas under
`max_compile_ms` budgets of 100, 300 and 1,000 ms: the time from the call until
CompileTimeoutError and its overshoot over the budget. The budget starts with the call: the
dict's conversion to JSON (in Rust) counts against it; `json.dumps ms` is what `json.dumps`
takes on the same dict, for scale.

    python3 benches/schema_scale_bench.py [--quick]
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

import corral


def cases(quick: bool):
    n = 10_000 if quick else 100_000
    yield f"enum {n} strings", {"enum": [f"value-{i}" for i in range(n)]}, json.dumps(f"value-{n // 2}")
    yield "enum 30000 strings", {"enum": [f"value-{i}" for i in range(30_000)]}, json.dumps("value-12345")
    for k in (1_000, 3_000) if quick else (1_000, 3_000, 10_000):
        yield f"oneOf {k} consts", {"oneOf": [{"const": f"c{i}"} for i in range(k)]}, json.dumps(f"c{k - 1}")
    yield "const 100 KB", {"const": "x" * 100_000}, json.dumps("x" * 100_000)
    if not quick:
        yield "const 1 MB", {"const": "x" * 1_000_000}, json.dumps("x" * 1_000_000)
    props = {f"p{i}": {"type": "integer"} for i in range(1_000)}
    yield "1000 properties", {"type": "object", "properties": props}, json.dumps({f"p{i}": i for i in range(0, 1_000, 7)})


def slow_schemas():
    yield "oneOf 4000 objects", {"oneOf": [{"type": "object", "properties": {"k": {"const": f"c{i}"}, "v": {"type": "integer"}}, "required": ["k"]} for i in range(4_000)]}
    yield "anyOf 20000 bounded numbers", {"anyOf": [{"type": "number", "minimum": i * 0.37, "maximum": i * 0.37 + 0.11, "multipleOf": 0.01} for i in range(20_000)]}
    yield "enum 1000000 strings", {"enum": [f"value-{i}" for i in range(1_000_000)]}


def budgets(quick: bool) -> None:
    print(f"\n{'slow schema':<28} {'budget ms':>9} {'json.dumps ms':>13} {'stopped after ms':>16} {'overshoot':>9}")
    for name, schema in slow_schemas():
        t = time.perf_counter()
        json.dumps(schema)
        conv = 1e3 * (time.perf_counter() - t)
        for budget in (100,) if quick else (100, 300, 1000):
            t = time.perf_counter()
            try:
                corral.Grammar.from_json_schema(schema, limits={"max_compile_ms": budget})
                print(f"{name:<28} {budget:>9} {conv:>13.0f} {'(compiled in ' + format(1e3 * (time.perf_counter() - t), '.0f') + ' ms)':>16}")
                continue
            except corral.CompileTimeoutError:
                took = 1e3 * (time.perf_counter() - t)
            print(f"{name:<28} {budget:>9} {conv:>13.0f} {took:>16.0f} {100 * (took - budget) / budget:>8.0f}%")


def main() -> None:
    quick = "--quick" in sys.argv
    v = corral.builtin_vocabulary()
    mask = np.zeros((v.size + 31) // 32, dtype=np.int32)
    print(f"{'case':<22} {'grammar ms':>10} {'compiled ms':>11} {'fill p50 µs':>11} {'p99 µs':>9} {'max µs':>9}")
    for name, schema, doc in cases(quick):
        t0 = time.perf_counter()
        try:
            g = corral.Grammar.from_json_schema(schema)
            t1 = time.perf_counter()
            cg = corral.CompiledGrammar(g, v)
            t2 = time.perf_counter()
            m = corral.Matcher(cg)
            fills = []
            for tok in v.encode(doc.encode()):
                a = time.perf_counter()
                m.fill_next_token_bitmask(mask)
                fills.append(time.perf_counter() - a)
                if not m.accept_token(tok):
                    raise AssertionError(f"{name}: the document is refused")
            f = np.array(fills) * 1e6
            print(f"{name:<22} {1e3 * (t1 - t0):>10.0f} {1e3 * (t2 - t1):>11.1f} {np.percentile(f, 50):>11.1f} {np.percentile(f, 99):>9.1f} {f.max():>9.1f}")
        except corral.CorralError as e:
            print(f"{name:<22} {type(e).__name__} after {1e3 * (time.perf_counter() - t0):.0f} ms")
    budgets(quick)


if __name__ == "__main__":
    main()
