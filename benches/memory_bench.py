"""Memory held by corral per compiled grammar, per matcher and per vocabulary (issue 3).

    python3 benches/memory_bench.py [--limit 100] [--seed 0]

The same JSONSchemaBench sample as ``compare.py --limit N --seed S`` (Llama 3 vocabulary):
each schema is compiled, then every valid instance is walked token by token with a fresh
matcher, filling a mask at every step. Reported (the objects' own ``memory_bytes``, heap
bytes they hold; not RSS):

* per compiled grammar, right after compiling and after its walks (its whole-mask cache
  grows with the states the walks met; budget 64 MiB);
* per matcher at the end of a walk (parser rows and per-token history grow with the output);
* the vocabulary (token bytes, trie, plain-text slice) and its shared token-set cache (budget
  512 MiB) after all walks.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import numpy as np

    import corral
    import vocabs
    import workloads as wl

    warnings.simplefilter("ignore")
    tok = vocabs.load("llama3")
    vocab = corral.Vocabulary.from_bytes(tok.token_bytes, eos_token_ids=tok.eos_ids, special_token_ids=tok.special_ids, vocab_size=tok.vocab_size)
    files = wl.schema_files(None)
    sample = sorted(random.Random(args.seed).sample(files, args.limit))
    work = wl.schema_workload(wl.Tokenized(tok), sample, 0, 10)
    mask = np.zeros((1, (vocab.size + 31) // 32), dtype=np.int32)
    compiled_after, compiled_walked, matchers, tokens = [], [], [], []
    for item in work.items:
        try:
            g = corral.CompiledGrammar(corral.Grammar.from_json_schema(json.dumps(item.spec["schema"])), vocab)
        except corral.CorralError:
            continue
        compiled_after.append(g.memory_bytes)
        for walk in item.walks:
            m = corral.Matcher(g)
            for t in walk:
                m.fill_next_token_bitmask(mask, 0)
                if not m.accept_token(t):
                    break
            matchers.append(m.memory_bytes)
            tokens.append(len(walk))
        compiled_walked.append(g.memory_bytes)
    kb = lambda b: f"{b / 1024:,.1f}"  # noqa: E731
    rows = [
        ("compiled grammar, after compiling", compiled_after),
        ("compiled grammar, after its walks", compiled_walked),
        ("matcher, at the end of a walk", matchers),
    ]
    print(f"{len(compiled_after)} schemas compiled, {len(matchers)} instances walked ({sum(tokens):,} tokens, median {pct(tokens, 50):.0f} per instance)\n")
    print("| object | KiB p50 | KiB p99 | KiB max |")
    print("|---|---:|---:|---:|")
    for name, xs in rows:
        print(f"| {name} | {kb(pct(xs, 50))} | {kb(pct(xs, 99))} | {kb(max(xs))} |")
    print(f"\nvocabulary (token bytes, trie, plain-text slice): {vocab.memory_bytes / 2**20:,.1f} MiB; "
          f"its token-set cache after all walks: {vocab.cache_bytes / 2**20:,.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
