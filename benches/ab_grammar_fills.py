#!/usr/bin/env python3
"""Two builds of corral's extension in one process: fill times on grammar_bench.py's texts,
from cold caches.

    cp python/corral/_native*.so /tmp/a.so        # build A (e.g. before a change)
    # ... change, `make build` ...
    python3 benches/ab_grammar_fills.py /tmp/a.so python/corral/_native.abi3.so \\
        --grammars scheme,c --passes 3

Each pass gives each build a fresh vocabulary, so every first meeting with a parser state
builds its cache entries (the slow fills of issue 41, and a server's first requests). Each
grammar is compiled once per two texts, as grammar_bench.py does; the builds alternate per
two texts, the order swapped each time, so both see the VM's slow phases alike. Texts: the
hand-written ones plus `--random` seeded random texts (those of ab_masks.py).

Prints, per grammar and build, the fills over 0.5 / 1 / 2 ms and p50 / p90 / p99 / p99.9 / max
(µs) over all passes, then each pass's summed fill time and B / A. Use it for changes to the
cold path; ``ab_builds.py`` covers cached JSON Schema fills.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def pct(xs: list[float], q: float) -> float:
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--grammars", default="c,python,sql,scheme", help="grammar_bench.py ids, comma-separated")
    ap.add_argument("--passes", type=int, default=2, help="cold passes (fresh vocabularies each)")
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--random", type=int, default=3, help="random texts per grammar")
    args = ap.parse_args(argv)

    import numpy as np

    import grammar_bench as gb

    mods, tok, tk, toks, cvocab = gb.ab_setup(args.a, args.b, args.tokenizer)
    mask = np.zeros((1, (tok.vocab_size + 31) // 32), dtype=np.int32)
    by_id = {g.name: g for g in gb.GRAMMARS}
    for name in args.grammars.split(","):
        g = by_id[name]
        spec = gb.grammar_spec(g)
        texts = [tk(t) for t in gb.ab_texts(g, spec, tok, tk, cvocab, args.random)]
        fills: dict[str, list[float]] = {"A": [], "B": []}
        sums: dict[str, list[float]] = {"A": [], "B": []}
        for _ in range(args.passes):
            voc = {k: m.Vocabulary(toks, list(tok.eos_ids), list(tok.special_ids), tok.vocab_size) for k, m in mods.items()}
            total = {"A": 0.0, "B": 0.0}
            for c in range(0, len(texts), 2):
                for k in ("A", "B") if (c // 2) % 2 == 0 else ("B", "A"):
                    cg = mods[k].CompiledGrammar(gb.native_grammar(mods[k], g, spec), voc[k])
                    for ids in texts[c:c + 2]:
                        m = mods[k].Matcher(cg)
                        for t in ids:
                            mask.fill(0)
                            t0 = time.perf_counter()
                            m.fill_next_token_bitmask(mask, 0)
                            dt = (time.perf_counter() - t0) * 1e6
                            fills[k].append(dt)
                            total[k] += dt
                            if not m.accept_token(t):
                                print(f"{name}: build {k} rejected a token of a bench text")
                                return 1
            for k in total:
                sums[k].append(total[k] / 1e3)
            del voc
        for k in ("A", "B"):
            xs = sorted(fills[k])
            over = " ".join(f">{lim / 1000:g}ms {sum(x > lim for x in xs)}" for lim in (500, 1000, 2000))
            print(f"{name} {k}: {len(xs)} fills, {over}; p50 {pct(xs, .5):.1f} p90 {pct(xs, .9):.0f} "
                  f"p99 {pct(xs, .99):.0f} p99.9 {pct(xs, .999):.0f} max {xs[-1]:.0f} us")
        print(f"{name} per pass, sum ms A / B (B/A): " +
              ", ".join(f"{a:.0f} / {b:.0f} ({b / a:.2f})" for a, b in zip(sums["A"], sums["B"])), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
