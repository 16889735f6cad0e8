#!/usr/bin/env python3
"""Per-version build against abi3 (limited API) build: cached mask fills, interleaved.

Decides whether `make wheels` ships one wheel per CPython version or one abi3 wheel
(docs/install.md). Both extension files are loaded side by side in one process (each under
its own module name, with its own vocabulary and caches) and timed in alternating rounds, so
that this VM's minute-to-minute speed changes hit both alike.

    make wheels                                   # the abi3 wheel (cp310-abi3) in dist/
    # the per-version build: drop "abi3-py310" from pyo3's features in rust/corral-py/Cargo.toml, then
    maturin build --release --zig --compatibility manylinux_2_28 -i python3.11 -o /tmp/pv-wheel
    unzip -o /tmp/pv-wheel/corral-*-cp311-cp311-*.whl 'corral/_native*.so' -d /tmp/pv
    unzip -o dist/corral-*-abi3-*.whl 'corral/_native*.so' -d /tmp/abi3x
    python3.11 benches/abi3_fill.py /tmp/pv/corral/_native.cpython-311-x86_64-linux-gnu.so \
        /tmp/abi3x/corral/_native.abi3.so

(2026-12-05 the builds compared were made the other way round: per-version by default, abi3
with ``--features pyo3/abi3-py310,pyo3/extension-module``; same code, same flags otherwise.)

What is timed: `Matcher.fill_next_token_bitmask` of a JSON-schema matcher (GPT-2's vocabulary,
the built-in one) at a warmed state (inside a string value, and at the start of the object),
each call timed alone with perf_counter_ns (so the numbers include ~30-60 ns of timer
overhead, the same for both), into a numpy int32 row and, when torch is installed, into a
`corral.allocate_token_bitmask` tensor.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from types import ModuleType
from typing import Any

import numpy as np

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]}
POSITIONS = {"string body": '{"name": "Bo', "object start": ""}


def load(path: str, name: str) -> ModuleType:
    """Loads an extension module file under `name` (its last part must stay ``_native``)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("per_version", help="the per-version build's _native.cpython-3XY-*.so")
    ap.add_argument("abi3", help="the abi3 build's _native.abi3.so")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--calls", type=int, default=1000, help="fills timed per round and build")
    args = ap.parse_args(argv)

    import corral

    gpt2 = corral.builtin_vocabulary()
    toks = [gpt2.token_bytes(i) for i in range(gpt2.num_tokens)]
    mods = {"per-version": load(args.per_version, "pv._native"), "abi3": load(args.abi3, "abi3._native")}
    buffers: dict[str, Any] = {"numpy": np.zeros((1, corral.bitmask_words(gpt2.size)), dtype=np.int32)}
    try:
        import torch  # noqa: F401

        buffers["tensor"] = corral.allocate_token_bitmask(1, gpt2.size)
    except ImportError:
        pass
    matchers = {}
    for build, m in mods.items():
        vocab = m.Vocabulary(toks, list(gpt2.eos_token_ids))
        cg = m.CompiledGrammar(m.Grammar.from_json_schema(json.dumps(SCHEMA)), vocab)
        for pos, prefix in POSITIONS.items():
            mt = m.Matcher(cg)
            assert mt.accept_string(prefix)
            for buf in buffers.values():
                for _ in range(1000):  # warm: the state's mask is cached after the first
                    mt.fill_next_token_bitmask(buf, 0)
            matchers[(pos, build)] = mt
    ns = time.perf_counter_ns
    times: dict[tuple[str, str, str], list[int]] = {}
    keys = list(matchers)
    for r in range(args.rounds):
        for bname, buf in buffers.items():
            order = keys if r % 2 == 0 else keys[::-1]
            for key in order:
                fill = matchers[key].fill_next_token_bitmask
                out = times.setdefault((bname, key[0], key[1]), [])
                for _ in range(args.calls):
                    a = ns()
                    fill(buf, 0)
                    out.append(ns() - a)
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}; {args.rounds} rounds x {args.calls} fills per build, interleaved")
    print(f"{'buffer':>7} {'position':>13} {'build':>12} {'p50 ns':>7} {'p90 ns':>7} {'p99 ns':>7}")
    res: dict[tuple[str, str], dict[str, float]] = {}
    for (bname, pos, build), t in sorted(times.items()):
        a = np.array(t)
        p = {q: float(np.percentile(a, q)) for q in (50, 90, 99)}
        res[(bname, pos)] = res.get((bname, pos), {}) | {build: p[50]}
        print(f"{bname:>7} {pos:>13} {build:>12} {p[50]:7.0f} {p[90]:7.0f} {p[99]:7.0f}")
    for (bname, pos), d in sorted(res.items()):
        print(f"abi3 - per-version at p50, {bname}, {pos}: {d['abi3'] - d['per-version']:+.0f} ns")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
