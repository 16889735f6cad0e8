"""CPU cost of applying a token bitmask to float32 logits, per kernel (run by compare.py).

    apply_bench.py --vocab 128256 --batches 1,32 --iters 200 --out result.json

Kernels (each skipped with a reason when unavailable):

* ``corral``: ``corral.apply_token_bitmask_inplace`` (when it exists);
* ``torch masked_fill_``: ``logits.masked_fill_(bool_mask, -inf)`` with the boolean mask
  precomputed (the bare fill, no bit unpacking: a floor for eager torch);
* ``torch unpack+masked_fill_``: eager torch, unpacking the bits then ``masked_fill_``;
* ``xgrammar``: ``xgrammar.apply_token_bitmask_inplace`` (its CPU kernel on CPU tensors);
* ``llguidance``: ``llguidance.torch.apply_token_bitmask_inplace`` (``torch.compile``; the
  compilation happens during warm-up and is not timed);
* ``outlines``: ``outlines_core.kernels.torch.apply_token_bitmask_inplace`` (same approach);
* two floors, not kernels (nothing is masked, so nothing is checked): ``floor: read once``
  (``logits.sum()``) and ``floor: read and write once`` (``logits.mul_(1.0)``), what the memory
  traffic of any kernel costs when every cache line of the logits holds both kept and
  masked entries (a random mask at this density) and must be read and written;
* with ``--threads 1`` on a machine with two CPUs or more, llguidance's kernel and the
  read-and-write floor again with two torch threads: corral's kernel shares a batch's rows
  between the calling thread and a helper, and these rows compare it thread for thread.

Each call is timed alone (``perf_counter_ns``); the logits are restored from a copy before
every call (untimed). Results are checked against a reference (-inf exactly where the bit is 0).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback

ns = time.perf_counter_ns


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--density", type=float, default=0.5, help="fraction of allowed tokens")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: torch's default)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    import numpy as np
    import torch

    torch.manual_seed(0)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    kernels = {}

    try:
        import corral

        if hasattr(corral, "apply_token_bitmask_inplace"):
            kernels["corral"] = corral.apply_token_bitmask_inplace
        else:
            kernels["corral"] = "corral.apply_token_bitmask_inplace does not exist yet"
    except Exception as e:  # noqa: BLE001
        kernels["corral"] = f"import corral failed: {e}"

    kernels["torch masked_fill_ (bool mask given)"] = None  # special-cased below

    def unpack_fill(logits, bitmask):
        v = logits.shape[1]
        bits = (bitmask.unsqueeze(-1) >> torch.arange(32, dtype=torch.int32)) & 1
        allowed = bits.view(bitmask.shape[0], -1)[:, :v].bool()
        logits.masked_fill_(~allowed, float("-inf"))

    kernels["torch unpack+masked_fill_ (eager)"] = unpack_fill
    try:
        import xgrammar

        kernels["xgrammar"] = xgrammar.apply_token_bitmask_inplace
    except Exception as e:  # noqa: BLE001
        kernels["xgrammar"] = f"import failed: {e}"
    try:
        import llguidance.torch

        kernels["llguidance"] = llguidance.torch.apply_token_bitmask_inplace
    except Exception as e:  # noqa: BLE001
        kernels["llguidance"] = f"import failed: {e}"
    try:
        import outlines_core.kernels.torch as oct

        kernels["outlines"] = oct.apply_token_bitmask_inplace
    except Exception as e:  # noqa: BLE001
        kernels["outlines"] = f"import failed: {e}"

    kernels["floor: read once (logits.sum())"] = lambda lg, bm: lg.sum()
    kernels["floor: read and write once (logits.mul_(1.0))"] = lambda lg, bm: lg.mul_(1.0)
    # The same with two torch threads: corral's kernel shares a batch's rows between the
    # calling thread and a helper, so these are the rows to hold it against thread for thread.
    two = min(2, os.cpu_count() or 1)
    threaded = {}
    if two > 1 and args.threads == 1:
        if callable(kernels.get("llguidance")):
            threaded[f"llguidance, {two} torch threads"] = kernels["llguidance"]
        threaded[f"floor: read and write once, {two} torch threads"] = lambda lg, bm: lg.mul_(1.0)
    kernels.update(threaded)

    out = {"vocab": args.vocab, "iters": args.iters, "density": args.density,
           "torch": torch.__version__, "torch_threads": torch.get_num_threads(), "results": {}}
    v = args.vocab
    words = (v + 31) // 32
    # The two-thread rows run after every one-thread row of every batch: the pool's threads
    # they wake keep spinning for a while after, on the CPU corral's helper would take.
    phases = [[n for n in kernels if n not in threaded], list(threaded)]
    for b, names in [(int(x), ns_) for ns_ in phases for x in args.batches.split(",")]:
        if not names:
            continue
        base = torch.randn(b, v, dtype=torch.float32)
        allowed = torch.rand(b, words * 32) < args.density
        allowed[:, v:] = False
        packed = np.packbits(allowed.numpy(), axis=-1, bitorder="little")
        bitmask = torch.from_numpy(np.ascontiguousarray(packed).view(np.int32).copy())
        assert bitmask.shape == (b, words)
        allowed_v = allowed[:, :v]
        reference = base.masked_fill(~allowed_v, float("-inf"))
        disallowed = ~allowed_v
        logits = base.clone()
        res = out["results"].setdefault(str(b), {})
        for name in names:
            fn = kernels[name]
            if isinstance(fn, str):
                res[name] = {"skipped": fn}
                continue
            if fn is None:
                def fn(lg, bm, _d=disallowed):
                    lg.masked_fill_(_d, float("-inf"))
            if name in threaded:
                torch.set_num_threads(two)
            try:
                t0 = time.perf_counter()
                for _ in range(args.warmup):
                    logits.copy_(base)
                    fn(logits, bitmask)
                warm_s = time.perf_counter() - t0
                if not name.startswith("floor:") and not torch.equal(logits, reference):
                    res[name] = {"error": "result differs from the reference"}
                    continue
                times = []
                for _ in range(args.iters):
                    logits.copy_(base)
                    a = ns()
                    fn(logits, bitmask)
                    times.append((ns() - a) / 1e3)
                times.sort()
                res[name] = {
                    "median_us": statistics.median(times),
                    "p99_us": times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))],
                    "min_us": times[0],
                    "warmup_s": warm_s,
                }
            except Exception as e:  # noqa: BLE001
                res[name] = {"error": f"{type(e).__name__}: {e}"[:300], "trace": traceback.format_exc()[-500:]}
            finally:
                if name in threaded:
                    torch.set_num_threads(args.threads)
            print(f"[apply] batch {b} {name}: {res[name]}", file=sys.stderr, flush=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
