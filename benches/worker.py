"""One engine in its own process (started by compare.py with benches/.venv/bin/python).

    worker.py ENGINE JOB.pickle --mem-gib 8 [--options JSON]

Reads item indices from stdin, one per line ("quit" or EOF ends); writes one JSON event per
line to its original stdout (library output is redirected to stderr):

    {"ev": "ready", "setup_ms", "tokenizer_ms", "import_ms", "version", "rss_kb", "base_rss_kb", "ready_rss_kb"}
    {"ev": "begin", "i"}
    {"ev": "compiled", "i", "compile_ms"}          only when the item's grammar is compiled
    {"ev": "result", "i", "status", ...}            status: ok | unsupported | compile_error | oom

Each item is {"gid", "spec", "walks": [[token ids]...]}. The grammar of the last gid stays
compiled, so consecutive items with the same gid compile once. A walk: for each token, clear
the mask (untimed), fill it (timed), check the token's bit (unset: "false_reject", stop),
accept it (timed; refused: "accept_failed", stop); after the last token, one more fill (timed)
and the EOS bit (unset: "eos_rejected").
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import resource
import sys
import time
import traceback

ns = time.perf_counter_ns


def _limit_memory(gib: float) -> None:
    if gib and gib > 0:
        cap = int(gib * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _current_rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("engine")
    ap.add_argument("job")
    ap.add_argument("--mem-gib", type=float, default=8.0)
    ap.add_argument("--options", default="{}")
    args = ap.parse_args()

    _limit_memory(args.mem_gib)
    # The protocol gets the real stdout; anything a library prints goes to stderr.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def emit(obj: dict) -> None:
        proto.write(json.dumps(obj, separators=(",", ":")) + "\n")
        proto.flush()

    with open(args.job, "rb") as f:
        job = pickle.load(f)
    options = json.loads(args.options)

    import numpy as np

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import engines
    import vocabs
    from engines.base import Unsupported

    torch_mask = args.engine in engines.TORCH_MASK and not (args.engine == "corral" and options.get("corral_numpy_mask"))
    if torch_mask:
        import torch
    t = ns()
    tok = vocabs.load(job["tokenizer"])
    tokenizer_ms = (ns() - t) / 1e6
    base_kb = _current_rss_kb()  # Python + numpy (+ torch) + the tokenizer: not the engine's
    t = ns()
    mod = engines.module(args.engine)
    import_ms = (ns() - t) / 1e6
    t = ns()
    engine = mod.Engine(tok, options)  # the engine's one-time work on the tokenizer
    setup_ms = (ns() - t) / 1e6

    words = (tok.vocab_size + 31) // 32
    # One int32 row, (1, ceil(V/32)): the engine's own allocator where it has one (what its
    # serving-engine integration fills), else a torch tensor for engines whose API takes one
    # (imported with the engine, outside any timing) or a numpy array for those that take a
    # pointer. `arr` is a numpy view of the same memory, for clearing and checking bits.
    mask = None if (args.engine == "corral" and options.get("corral_numpy_mask")) else engine.allocate_mask(tok.vocab_size)
    if mask is not None:
        arr = mask if isinstance(mask, np.ndarray) else mask.numpy()
        assert arr.shape == (1, words) and arr.dtype == np.int32, (arr.shape, arr.dtype)
    else:
        arr = np.zeros((1, words), dtype=np.int32)
        mask = torch.from_numpy(arr) if torch_mask else arr
    engine.set_mask(mask)
    bits = arr[0].view(np.uint32)
    clear = arr.fill
    eos = tok.eos
    items = job["items"]
    emit({"ev": "ready", "setup_ms": setup_ms, "tokenizer_ms": tokenizer_ms, "import_ms": import_ms, "version": engine.version,
          "rss_kb": _rss_kb(), "base_rss_kb": base_kb, "ready_rss_kb": _current_rss_kb(), "pid": os.getpid()})

    cached_gid = None
    compiled = None
    for line in sys.stdin:
        line = line.strip()
        if not line or line == "quit":
            break
        i = int(line)
        item = items[i]
        emit({"ev": "begin", "i": i})
        res: dict = {"ev": "result", "i": i, "status": "ok"}
        first = None
        gc.collect()
        gc.disable()
        try:
            if item["gid"] != cached_gid:
                compiled = None
                cached_gid = None
                gc.collect()
                t = ns()
                try:
                    c = engine.compile(item["spec"])
                    first = engine.matcher(c)
                    compile_ns = ns() - t
                except Unsupported as e:
                    res.update(status="unsupported", error=str(e)[:300])
                    continue
                except MemoryError as e:
                    res.update(status="oom", error=f"MemoryError: {e}"[:300], ms=(ns() - t) / 1e6)
                    continue
                except Exception as e:  # noqa: BLE001 - the engine refused the grammar
                    res.update(status="compile_error", error=f"{type(e).__name__}: {e}"[:300], ms=(ns() - t) / 1e6)
                    continue
                compiled, cached_gid = c, item["gid"]
                res["compile_ms"] = compile_ns / 1e6
                emit({"ev": "compiled", "i": i, "compile_ms": compile_ns / 1e6})
                if not item["walks"]:  # no inputs: still time the first mask
                    clear(0)
                    a = ns()
                    engine.fill(first)
                    res["ttfm_ms"] = (compile_ns + ns() - a) / 1e6
                    first = None
            walks = []
            for ids in item["walks"]:
                fills: list[int] = []
                accepts: list[int] = []
                w: dict = {"n": len(ids), "outcome": "ok"}
                try:
                    if first is not None:
                        m, first = first, None
                        fresh = True
                    else:
                        m = engine.matcher(compiled)
                        fresh = False
                    for step, tid in enumerate(ids):
                        clear(0)
                        a = ns()
                        engine.fill(m)
                        fills.append(ns() - a)
                        if fresh:
                            res["ttfm_ms"] = (compile_ns + fills[0]) / 1e6
                            fresh = False
                        if not (int(bits[tid >> 5]) >> (tid & 31)) & 1:
                            w.update(outcome="false_reject", step=step, token=tid)
                            err = engine.error(m)
                            if err:
                                w["error"] = err[:300]
                            break
                        a = ns()
                        ok = engine.accept(m, tid)
                        accepts.append(ns() - a)
                        if not ok:
                            w.update(outcome="accept_failed", step=step, token=tid)
                            err = engine.error(m)
                            if err:
                                w["error"] = err[:300]
                            break
                    else:
                        clear(0)
                        a = ns()
                        engine.fill(m)
                        fills.append(ns() - a)
                        if fresh:
                            res["ttfm_ms"] = (compile_ns + fills[0]) / 1e6
                        if not (int(bits[eos >> 5]) >> (eos & 31)) & 1:
                            w.update(outcome="eos_rejected", step=len(ids))
                            err = engine.error(m)
                            if err:
                                w["error"] = err[:300]
                except MemoryError as e:
                    w.update(outcome="oom", error=f"MemoryError: {e}"[:300])
                except Exception as e:  # noqa: BLE001
                    w.update(outcome="error", error=f"{type(e).__name__}: {e}"[:300],
                             where=traceback.format_exc(limit=-2)[-300:])
                w["fill_ns"] = fills
                w["accept_ns"] = accepts
                walks.append(w)
            res["walks"] = walks
        finally:
            gc.enable()
            res["rss_kb"] = _rss_kb()
            emit(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
