"""Scaling of ``corral.fill_next_token_bitmask_batch`` (Rust thread pool, GIL released).

    python3 benches/batch_fill_bench.py [--schemas 16] [--batches 1,4,16,32,64] [--iters 50]

Each sequence of a batch walks a valid instance of a real JSONSchemaBench schema (Llama 3
vocabulary), one token per decode step, so a batch holds a mix of lexer states (inside
strings, after keys, between values). Per step the whole batch is filled and timed: median and
p99 per batch, per-sequence cost, and the speedup of the pool over one thread, on a first pass
(cache entries built on the way) and a second pass over the same steps (warm caches). Each thread count runs in its own process (``RAYON_NUM_THREADS`` is
read once per process).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def measure(args) -> dict:
    import numpy as np

    import corral
    import vocabs
    import workloads as wl

    tok = vocabs.load("llama3")
    vocab = corral.Vocabulary.from_bytes(tok.token_bytes, eos_token_ids=tok.eos_ids, special_token_ids=tok.special_ids, vocab_size=tok.vocab_size)
    files = sorted(wl.schema_files(None))
    work = wl.schema_workload(wl.Tokenized(tok), files[:: max(1, len(files) // (args.schemas * 4))], 0, 10)
    import warnings

    warnings.simplefilter("ignore")
    seqs = []  # (compiled grammar, walk)
    for item in work.items:
        if not item.walks:
            continue
        try:
            g = corral.CompiledGrammar(corral.Grammar.from_json_schema(json.dumps(item.spec["schema"])), vocab)
        except corral.CorralError:
            continue
        seqs.extend((g, w) for w in item.walks if len(w) > 8)
    out = {}
    for b in args.batches:
        mask = np.zeros((b, (vocab.size + 31) // 32), dtype=np.int32)
        res = {}
        for phase in ("first", "again"):
            # Sequence i follows walk i (cycled), from its start; each step every sequence
            # accepts its next token (restarting at the end of its walk), then the batch fills.
            ms = [corral.Matcher(seqs[i % len(seqs)][0]) for i in range(b)]
            pos = [0] * b
            times = []
            for _ in range(args.iters):
                t = time.perf_counter_ns()
                corral.fill_next_token_bitmask_batch(ms, mask)
                times.append((time.perf_counter_ns() - t) / 1e3)
                for i, m in enumerate(ms):
                    walk = seqs[i % len(seqs)][1]
                    if pos[i] >= len(walk):
                        ms[i] = m = corral.Matcher(seqs[i % len(seqs)][0])
                        pos[i] = 0
                    m.accept_token(walk[pos[i]])
                    pos[i] += 1
            times.sort()
            res[phase] = {"p50": statistics.median(times), "p99": times[min(len(times) - 1, int(len(times) * 0.99))]}
        out[b] = res
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schemas", type=int, default=16)
    ap.add_argument("--batches", default="1,4,16,32,64")
    ap.add_argument("--iters", type=int, default=200, help="decode steps per configuration")
    ap.add_argument("--threads", default="1,2", help="pool sizes to compare")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.batches = [int(x) for x in args.batches.split(",")]
    if args.child:
        print(json.dumps(measure(args)))
        return 0
    results = {}
    for n in args.threads.split(","):
        env = dict(os.environ, RAYON_NUM_THREADS=n)
        cmd = [sys.executable, __file__, "--child", "--schemas", str(args.schemas), "--batches", ",".join(map(str, args.batches)), "--iters", str(args.iters)]
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        results[int(n)] = {int(k): v for k, v in json.loads(res.stdout.strip().splitlines()[-1]).items()}
    ths = sorted(results)
    print(f"machine: {os.cpu_count()} CPUs; Llama 3 vocabulary; each sequence walks a valid JSONSchemaBench instance, one token per step")
    for phase, what in (("first", "first pass (cache entries built on the way)"), ("again", "second pass over the same steps (warm caches)")):
        print(f"\n{what}: batch fill µs per step, p50 / p99 (p50 per sequence)\n")
        print("| batch | " + " | ".join(f"{n} thread{'s' if n > 1 else ''}" for n in ths) + f" | speedup p50 ({ths[-1]} vs {ths[0]}) |")
        print("|---:|" + "---:|" * (len(ths) + 1))
        for b in args.batches:
            cells = [f"{results[n][b][phase]['p50']:.1f} / {results[n][b][phase]['p99']:.1f} ({results[n][b][phase]['p50'] / b:.1f})" for n in ths]
            sp = results[ths[0]][b][phase]["p50"] / results[ths[-1]][b][phase]["p50"]
            print(f"| {b} | " + " | ".join(cells) + f" | {sp:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
