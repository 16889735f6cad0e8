#!/usr/bin/env python3
"""Two builds of corral's extension in one process, interleaved: fill times through Python.

    cp python/corral/_native*.so /tmp/a.so        # build A (e.g. the committed code)
    # ... change, `make build` ...
    cp python/corral/_native*.so /tmp/b.so        # build B
    python3 benches/make_walks.py > walks.jsonl
    python3 benches/ab_builds.py /tmp/a.so /tmp/b.so --walks walks.jsonl     # ~1 min
    python3 benches/ab_builds.py /tmp/a.so /tmp/b.so --hits                  # cache-hit fills

This VM's speed moves by tens of percent between minutes, more than most changes to the fill
path, so runs of ``compare.py`` or ``fill_profile`` made one after the other cannot tell two
builds apart. Here both builds are loaded side by side (each ``.so`` under its own module
name, with its own vocabulary and caches) and the schemas' walks alternate between them, the
order swapped every schema: two copies of one build agreed within about 0.5 % at the median
over the default two passes (session 25; within 3 % over one). With ``--walks``, each schema is compiled by each build and every
valid instance walked, timing each ``fill_next_token_bitmask`` into a
``corral.allocate_token_bitmask`` tensor cleared before each fill, as ``compare.py`` does;
``--hits`` times cached fills at two positions instead.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import vocabs  # noqa: E402

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]}


def load(path: str, name: str):
    """Loads an extension module file under `name` (its last part must stay ``_native``)."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", help="build A: a copy of python/corral/_native*.so")
    ap.add_argument("b", help="build B")
    ap.add_argument("--walks", help="walks file from benches/make_walks.py")
    ap.add_argument("--hits", action="store_true", help="time cache-hit fills instead of walks")
    ap.add_argument("--reps", type=int, default=2, help="passes over the walks")
    args = ap.parse_args(argv)
    if not args.hits and not args.walks:
        ap.error("give --walks FILE or --hits")

    import numpy as np

    import corral

    # (Schemas with formats corral does not enforce warn once per compile: not this tool's news.)
    warnings.filterwarnings("ignore")
    mods = {"A": load(args.a, "ab_a._native"), "B": load(args.b, "ab_b._native")}
    tok = vocabs.load("llama3")
    toks = [bytes(t) if t is not None else b"" for t in tok.token_bytes]
    vocab = {k: m.Vocabulary(toks, list(tok.eos_ids), list(tok.special_ids), tok.vocab_size) for k, m in mods.items()}
    mask = corral.allocate_token_bitmask(1, tok.vocab_size)
    ns = time.perf_counter_ns
    if args.hits:
        matchers = {}
        for k, m in mods.items():
            cg = m.CompiledGrammar(m.Grammar.from_json_schema(json.dumps(SCHEMA)), vocab[k])
            for pos, prefix in (("string body", '{"name": "Bo'), ("object start", "")):
                mt = m.Matcher(cg)
                for t in tok.encode(prefix):
                    assert mt.accept_token(t)
                mt.fill_next_token_bitmask(mask, 0)
                matchers[(pos, k)] = mt
        rounds = {key: [] for key in matchers}
        for _ in range(15):
            for key, mt in matchers.items():
                fill = mt.fill_next_token_bitmask
                a = ns()
                for _ in range(20_000):
                    fill(mask, 0)
                rounds[key].append((ns() - a) / 20_000)
        for key in sorted(rounds):
            print(f"{key[0]:>12} {key[1]}: min {min(rounds[key]):.0f} ns, median {np.median(rounds[key]):.0f} ns")
        return 0
    docs = [json.loads(line) for line in open(args.walks)]
    times: dict[str, list[int]] = {"A": [], "B": []}
    for rep in range(args.reps):
        for i, doc in enumerate(docs):
            text = json.dumps(doc["schema"])
            compiled = {}
            for k in (("A", "B") if (i + rep) % 2 == 0 else ("B", "A")):
                try:
                    compiled[k] = mods[k].CompiledGrammar(mods[k].Grammar.from_json_schema(text), vocab[k])
                except Exception:  # noqa: BLE001 - a schema either build rejects is left out of both
                    break
            if len(compiled) < 2:
                continue
            for k, cg in compiled.items():
                m = mods[k]
                for walk in doc["walks"]:
                    mt = m.Matcher(cg)
                    for t in walk:
                        mask[0].zero_()
                        a = ns()
                        mt.fill_next_token_bitmask(mask, 0)
                        times[k].append(ns() - a)
                        mt.accept_token(t)
    for k in ("A", "B"):
        r = np.array(times[k]) / 1000
        cells = " ".join(f"p{q} {np.percentile(r, q):.3f}" for q in (25, 40, 50, 60, 75, 90, 99))
        print(f"{k}: {len(r)} fills, µs {cells}, mean {r.mean():.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
