#!/usr/bin/env python3
"""Writes the JSON Schema workload of a ``compare.py`` run as the input of ``fill_profile``.

    python3 benches/make_walks.py > walks.jsonl                      # --limit 100 --seed 0
    python3 benches/make_walks.py --limit 50 --seed 1 > walks.jsonl
    cargo run --release -p corral-schema --example fill_profile -- walks.jsonl

One line per schema, ``{"label", "schema", "walks": [[token ids]]}``: the same schema sample
(``--limit`` schemas drawn with ``--seed``, as ``compare.py`` draws them) and the same valid
instances, serialised compactly and tokenized with the Llama 3 tokenizer, so the fills that
``fill_profile`` times without Python are the ones ``compare.py`` times through it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import vocabs  # noqa: E402
import workloads as wl  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=100, help="schemas (0 = all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-instances", type=int, default=0, help="valid instances per schema (0 = all)")
    args = ap.parse_args(argv)
    files = wl.schema_files(None)
    if args.limit and args.limit < len(files):
        files = sorted(random.Random(args.seed).sample(files, args.limit))
    tok = wl.Tokenized(vocabs.load("llama3"))
    work = wl.schema_workload(tok, files, args.max_instances, 10.0)
    for item in work.items:
        print(json.dumps({"label": item.label, "schema": item.spec["schema"], "walks": item.walks}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
