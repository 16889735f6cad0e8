#!/usr/bin/env python3
"""What a cache-hit mask fill costs through Python, per kind of bitmask buffer.

    python3 benches/fill_overhead.py                  # Llama 3 vocabulary, writes nothing
    python3 benches/fill_overhead.py --out x.json     # also the numbers as JSON

A cached fill is a 16 KB copy (128,256 ids) plus the crossing into the extension and the
checks on the caller's buffer. This times ``Matcher.fill_next_token_bitmask`` on one matcher
state whose mask is cached (inside a string body, and at the start of an object), into:

* a numpy int32 row;
* a ``corral.allocate_token_bitmask`` tensor (what corral's vLLM and SGLang adapters fill: a
  tensor over a numpy array corral holds, so a repeat fill reads one data pointer);
* a ``torch.from_numpy`` tensor (its storage cannot be resized: two data pointers);
* a ``torch.zeros`` tensor (resizable storage: data pointer, shape, dtype and contiguity);

next to a call that does nothing (``Matcher.is_accepting``). Each kind is timed in rounds of 20,000 calls, the rounds
interleaved across kinds, five times; the table gives the minimum and the median of the
per-call means (the minimum is the cost without this shared machine's interference).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import timeit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import vocabs  # noqa: E402

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", default="llama3", choices=list(vocabs.NAMES))
    ap.add_argument("--calls", type=int, default=20_000, help="calls per timed round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", help="write the numbers as JSON here")
    args = ap.parse_args(argv)

    import numpy as np

    import corral

    tok = vocabs.load(args.tokenizer)
    vocab = corral.Vocabulary.from_bytes(tok.token_bytes, eos_token_ids=tok.eos_ids, special_token_ids=tok.special_ids, vocab_size=tok.vocab_size)
    compiled = corral.CompiledGrammar(corral.Grammar.from_json_schema(json.dumps(SCHEMA)), vocab)
    words = corral.bitmask_words(tok.vocab_size)

    states = {}
    body = corral.Matcher(compiled)
    for t in tok.encode('{"name": "Bo'):
        if not body.accept_token(t):
            raise SystemExit("the tokenizer's ids for the prefix were refused")
    states["string body"] = body
    states["object start"] = corral.Matcher(compiled)

    buffers: dict[str, object] = {"numpy row": np.zeros((1, words), dtype=np.int32)}
    try:
        import torch

        buffers["corral.allocate_token_bitmask tensor"] = corral.allocate_token_bitmask(1, tok.vocab_size)
        buffers["torch.from_numpy tensor"] = torch.from_numpy(np.zeros((1, words), dtype=np.int32))
        buffers["torch.zeros tensor"] = torch.zeros((1, words), dtype=torch.int32)
    except ImportError:
        print("torch is not installed: numpy only", file=sys.stderr)

    results: dict[str, dict[str, dict[str, float]]] = {}
    for sname, m in states.items():
        fill = m.fill_next_token_bitmask
        kinds = {name: (lambda b=buf: fill(b, 0)) for name, buf in buffers.items()}
        kinds["no-op call (is_accepting)"] = m.is_accepting
        for f in kinds.values():
            f()
            f()
        per: dict[str, list[float]] = {k: [] for k in kinds}
        for _ in range(args.rounds):
            for k, f in kinds.items():
                per[k].append(timeit.timeit(f, number=args.calls) / args.calls * 1e9)
        results[sname] = {k: {"min_ns": min(v), "median_ns": statistics.median(v)} for k, v in per.items()}

    print(f"cache-hit fill cost, {tok.name} ({tok.vocab_size:,} ids, {words:,} words), ns per call (min / median of {args.rounds} rounds of {args.calls:,})")
    print()
    names = list(next(iter(results.values())))
    print("| call | " + " | ".join(results) + " |")
    print("|---|" + "---:|" * len(results))
    for k in names:
        print(f"| {k} | " + " | ".join(f"{results[s][k]['min_ns']:.0f} / {results[s][k]['median_ns']:.0f}" for s in results) + " |")
    if args.out:
        meta = {"tokenizer": tok.name, "vocab_size": tok.vocab_size, "calls": args.calls, "rounds": args.rounds,
                "date": time.strftime("%Y-%m-%d"), "corral": corral.__version__}
        with open(args.out, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
