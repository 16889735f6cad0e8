#!/usr/bin/env python3
"""Two builds of corral's extension must give the same masks: every step of every
grammar_bench.py text (hand-written plus seeded random texts) on both builds, in one process.

    cp python/corral/_native*.so /tmp/a.so        # build A (e.g. before a change to the fill path)
    # ... change, rebuild ...
    python3 benches/ab_masks.py /tmp/a.so python/corral/_native.abi3.so [--tokenizer qwen2.5]

A differential check for changes that must not change any mask (speed work in masks/ or
vocab/); the reference-based exactness tests (tests/test_exactness.py) use small vocabularies,
this one the real ones on grammars whose fills take the plain walk. Exits 1 on a mismatch.
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--random", type=int, default=3, help="random texts per grammar")
    args = ap.parse_args(argv)

    import numpy as np

    import grammar_bench as gb

    mods, tok, tk, toks, cvocab = gb.ab_setup(args.a, args.b, args.tokenizer)
    voc = {k: m.Vocabulary(toks, list(tok.eos_ids), list(tok.special_ids), tok.vocab_size) for k, m in mods.items()}
    words = (tok.vocab_size + 31) // 32
    masks = {k: np.zeros(words, np.int32) for k in mods}
    total = bad = 0
    for g in gb.GRAMMARS:
        spec = gb.grammar_spec(g)
        cgs = {k: m.CompiledGrammar(gb.native_grammar(m, g, spec), voc[k]) for k, m in mods.items()}
        n = 0
        for text in gb.ab_texts(g, spec, tok, tk, cvocab, args.random):
            ids = tk(text)
            ms = {k: mods[k].Matcher(cgs[k]) for k in mods}
            for t in [*ids, None]:
                for k in mods:
                    masks[k].fill(0)
                    ms[k].fill_next_token_bitmask(masks[k])
                n += 1
                if not np.array_equal(masks["A"], masks["B"]):
                    bad += 1
                    diff = np.flatnonzero(np.unpackbits((masks["A"] ^ masks["B"]).view(np.uint8), bitorder="little"))
                    print(f"MISMATCH {g.name} {text[:40]!r} step {n}: tokens {diff[:10].tolist()}")
                    break
                if t is None:
                    break
                if not all(ms[k].accept_token(t) for k in mods):
                    print(f"accept failed {g.name} {text[:40]!r}")
                    bad += 1
                    break
        total += n
        print(f"{g.name}: {n} masks equal", flush=True)
    print(f"{total} masks compared, {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
