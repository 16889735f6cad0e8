"""JSON Schema at scale (issue 40): long enums, oneOf of consts, long consts, many properties.

For each case: schema-to-grammar time, CompiledGrammar time (includes the first mask) and the
fill p50/p99/max along a valid document, on the built-in GPT-2 vocabulary (no downloads).
A case that fails prints its error and how long it took (e.g. a CompileTimeoutError against
the default 10 s budget: the overshoot is that time over the budget).

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
    props = {f"p{i}": {"type": "integer"} for i in range(1_000)}
    yield "1000 properties", {"type": "object", "properties": props}, json.dumps({f"p{i}": i for i in range(0, 1_000, 7)})


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


if __name__ == "__main__":
    main()
