"""GPU cost of applying a token bitmask to logits, per kernel, on a CUDA device.

    python3 benches/cuda_bench.py [--vocab 128256] [--batches 1,8,32,128,512] [--iters 200] [--out r.json]

For each batch size and dtype (float32, bfloat16), each kernel masks ``(batch, vocab)`` logits
on the GPU with an int32 bitmask already on the GPU (random bits; ``--densities`` gives the
fractions allowed: real masks are mostly near 0 (structure) or near 1 (string contents), and
0.5 is the worst case for kernels that write only the masked entries):

* ``corral (triton, N words/program)``: :func:`corral.apply_token_bitmask_inplace` (its Triton
  kernel), at tile sizes of 32, 64 and 128 bitmask words per program (the default marked);
* ``corral (torch ops)``: the same call with the Triton kernel disabled (its fallback);
* ``xgrammar``: ``xgrammar.apply_token_bitmask_inplace`` (its CUDA kernel), when importable;
* ``llguidance``: ``llguidance.torch.apply_token_bitmask_inplace`` (``torch.compile``; compiled
  during warm-up), when importable;
* ``torch masked_fill_ (bool mask given)``: the bare fill with the boolean mask precomputed;
* floors, not kernels: ``floor: read and write once`` (``logits.mul_(1.0)``) and ``floor: one
  empty launch`` (a one-element add: the launch overhead alone).

Two times per call, each reported as median and p99 over ``--iters`` calls: **GPU time**
(CUDA events around the call; the logits are restored from a copy before each call, outside
the events) and **host time** (what the call costs the CPU thread that launches it, without
waiting for the GPU). Every kernel's result is checked against a reference first.

Also, with ``--pipeline``: one decode step's mask work as an engine does it, for a batch of
matchers of the built-in JSON grammar over the built-in GPT-2 vocabulary: fill the pinned CPU
bitmask (``fill_next_token_bitmask_batch``), copy it to the GPU (non-blocking), apply it; host
time per step and GPU-synchronised time per step.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def kernels() -> dict:
    import torch

    import corral
    import corral.logits as L

    ks: dict = {}

    def corral_triton(words):
        def run(lg, bm, vocab):
            L._TRITON_WORDS = words
            try:
                corral.apply_token_bitmask_inplace(lg, bm, vocab_size=vocab, check_empty=False)
            finally:
                L._TRITON_WORDS = default_words
        return run

    default_words = L._TRITON_WORDS

    def corral_torch(lg, bm, vocab):
        L._TRITON["disabled"] = True
        try:
            corral.apply_token_bitmask_inplace(lg, bm, vocab_size=vocab, check_empty=False)
        finally:
            L._TRITON.pop("disabled", None)

    for words in sorted({default_words, 32, 64, 128}):
        name = f"corral (triton, {words} words/program{', default' if words == default_words else ''})"
        ks[name] = corral_triton(words) if L._triton_kernel() is not None else "triton is not importable"
    ks["corral (torch ops)"] = corral_torch
    try:
        import xgrammar

        ks["xgrammar"] = lambda lg, bm, vocab: xgrammar.apply_token_bitmask_inplace(lg, bm, vocab_size=vocab)
    except Exception as e:  # noqa: BLE001
        ks["xgrammar"] = f"import failed: {e}"[:200]
    try:
        import llguidance.torch as llt

        ks["llguidance"] = lambda lg, bm, vocab: llt.apply_token_bitmask_inplace(lg, bm)
    except Exception as e:  # noqa: BLE001
        ks["llguidance"] = f"import failed: {e}"[:200]
    ks["torch masked_fill_ (bool mask given)"] = None  # special-cased: needs the bool mask
    ks["floor: read and write once"] = lambda lg, bm, vocab: lg.mul_(1.0)
    one = torch.zeros(1, device="cuda")
    ks["floor: one empty launch"] = lambda lg, bm, vocab: one.add_(0.0)
    if os.environ.get("CORRAL_BENCH_VARIANTS"):
        ks.update(variants())
    return ks


def variants() -> dict:
    """Alternative Triton designs, measured against the shipped kernel to choose it
    (``CORRAL_BENCH_VARIANTS=1``): the store of -inf only where a bit is clear, on a flat block
    (each logit loads its word) or on a (words, 32) tile; or every logit read, selected and
    written back (whole 32-byte sectors: no partial writes for the memory system to merge)."""
    import triton
    import triton.language as tl

    @triton.jit
    def flat_store(lp, bp, vocab, width, ls, bs, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        w = tl.load(bp + row * bs + offs // 32, mask=offs < vocab, other=0)
        blocked = (offs < width) & (((w >> (offs % 32)) & 1) == 0)
        ninf = tl.full([BLOCK], float("-inf"), tl.float32).to(lp.dtype.element_ty)
        tl.store(lp + row * ls + offs, ninf, mask=blocked)

    @triton.jit
    def flat_rw(lp, bp, vocab, width, ls, bs, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        inb = offs < width
        w = tl.load(bp + row * bs + offs // 32, mask=offs < vocab, other=0)
        ok = ((w >> (offs % 32)) & 1) != 0
        x = tl.load(lp + row * ls + offs, mask=inb)
        ninf = tl.full([BLOCK], float("-inf"), tl.float32).to(lp.dtype.element_ty)
        tl.store(lp + row * ls + offs, tl.where(ok, x, ninf), mask=inb)

    @triton.jit
    def tile_rw(lp, bp, vocab, width, ls, bs, WORDS: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        word = tl.program_id(1) * WORDS + tl.arange(0, WORDS)
        words = tl.load(bp + row * bs + word, mask=word < (vocab + 31) // 32, other=0)
        bit = tl.arange(0, 32)
        offs = word[:, None] * 32 + bit[None, :]
        ok = (((words[:, None] >> bit[None, :]) & 1) != 0) & (offs < vocab)
        inb = offs < width
        x = tl.load(lp + row * ls + offs, mask=inb)
        ninf = tl.full([WORDS, 32], float("-inf"), tl.float32).to(lp.dtype.element_ty)
        tl.store(lp + row * ls + offs, tl.where(ok, x, ninf), mask=inb)

    def launch(kernel, per_program, **meta):
        def run(lg, bm, vocab):
            width = lg.shape[1]
            grid = (lg.shape[0], (width + per_program - 1) // per_program)
            kernel[grid](lg, bm, vocab, width, lg.stride(0), bm.stride(0), **meta)
        return run

    return {
        "variant: flat, store where masked (4096/program)": launch(flat_store, 4096, BLOCK=4096),
        "variant: flat, read-select-write (4096/program)": launch(flat_rw, 4096, BLOCK=4096),
        "variant: tile, read-select-write (64 words/program)": launch(tile_rw, 2048, WORDS=64),
    }


def bench_apply(args) -> dict:
    import numpy as np
    import torch

    torch.manual_seed(0)
    v = args.vocab
    words = (v + 31) // 32
    out: dict = {}
    ks = kernels()
    configs = [(d, b, p) for p in [float(x) for x in args.densities.split(",")]
               for d in args.dtypes.split(",") for b in [int(x) for x in args.batches.split(",")]]
    for dtype_name, b, density in configs:
        dtype = getattr(torch, dtype_name)
        if True:
            base = torch.randn(b, v, device="cuda").to(dtype)
            allowed = torch.rand(b, words * 32) < density
            allowed[:, v:] = False
            packed = np.packbits(allowed.numpy(), axis=-1, bitorder="little")
            bitmask = torch.from_numpy(np.ascontiguousarray(packed).view(np.int32).copy()).cuda()
            allowed_v = allowed[:, :v].cuda()
            reference = base.masked_fill(~allowed_v, float("-inf"))
            disallowed = ~allowed_v
            logits = base.clone()
            res: dict = {}
            for name, fn in ks.items():
                if isinstance(fn, str):
                    res[name] = {"skipped": fn}
                    continue
                if fn is None:
                    def fn(lg, bm, vocab, _d=disallowed):
                        lg.masked_fill_(_d, float("-inf"))
                try:
                    t0 = time.perf_counter()
                    for _ in range(args.warmup):
                        logits.copy_(base)
                        fn(logits, bitmask, v)
                    torch.cuda.synchronize()
                    warm_s = time.perf_counter() - t0
                    if not name.startswith("floor:") and not torch.equal(logits, reference):
                        res[name] = {"error": "result differs from the reference"}
                        print(f"[cuda] {dtype_name} batch {b} density {density} {name}: {res[name]}", file=sys.stderr, flush=True)
                        continue
                    starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
                    ends = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
                    host = []
                    for i in range(args.iters):
                        logits.copy_(base)
                        starts[i].record()
                        a = time.perf_counter_ns()
                        fn(logits, bitmask, v)
                        host.append((time.perf_counter_ns() - a) / 1e3)
                        ends[i].record()
                    torch.cuda.synchronize()
                    gpu = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]
                    res[name] = {
                        "gpu_us_p50": statistics.median(gpu),
                        "gpu_us_p99": pct(gpu, 0.99),
                        "host_us_p50": statistics.median(host),
                        "host_us_p99": pct(host, 0.99),
                        "warmup_s": round(warm_s, 3),
                    }
                except Exception as e:  # noqa: BLE001
                    res[name] = {"error": f"{type(e).__name__}: {e}"[:300], "trace": traceback.format_exc()[-600:]}
                print(f"[cuda] {dtype_name} batch {b} density {density} {name}: {res[name]}", file=sys.stderr, flush=True)
            out[f"{dtype_name}/{b}/{density:g}"] = res
            del base, reference, logits, disallowed, allowed_v
            torch.cuda.empty_cache()
    return out


def bench_pipeline(args) -> dict:
    """Fill (CPU, thread pool) -> non-blocking copy -> apply, per decode step."""
    import torch

    import corral

    vocab = corral.builtin_vocabulary()
    compiled = corral.compile(corral.builtin_grammar(), vocab)
    doc = b'{"name": "corral", "tags": ["a", "b"], "n": [1, 2.5, -3e4], "ok": true, "nested": {"x": null}}'
    walk = vocab.encode(doc)
    out: dict = {}
    for b in [int(x) for x in args.pipeline_batches.split(",")]:
        ms = [corral.Matcher(compiled) for _ in range(b)]
        pos = [i % len(walk) for i in range(b)]  # rows at different places of the document
        for m, p in zip(ms, pos):
            for t in walk[:p]:
                m.accept_token(t)
        mask = corral.allocate_token_bitmask(b, vocab.size, pin_memory=True)
        logits = torch.randn(b, vocab.size + 47, device="cuda")
        host, synced = [], []
        for step in range(args.iters):
            torch.cuda.synchronize()
            a = time.perf_counter_ns()
            corral.fill_next_token_bitmask_batch(ms, mask)
            dev = mask.to("cuda", non_blocking=True)
            corral.apply_token_bitmask_inplace(logits, dev, vocab_size=vocab.size, check_empty=False)
            host.append((time.perf_counter_ns() - a) / 1e3)
            torch.cuda.synchronize()
            synced.append((time.perf_counter_ns() - a) / 1e3)
            for i, m in enumerate(ms):  # advance every row along the document (restart at its end)
                if pos[i] >= len(walk):
                    m.reset()
                    pos[i] = 0
                m.accept_token(walk[pos[i]])
                pos[i] += 1
        out[str(b)] = {"host_us_p50": statistics.median(host), "host_us_p99": pct(host, 0.99),
                       "synced_us_p50": statistics.median(synced), "synced_us_p99": pct(synced, 0.99)}
        print(f"[pipeline] batch {b}: {out[str(b)]}", file=sys.stderr, flush=True)
    return out


def table(res: dict) -> str:
    lines = []
    for key, kres in res["apply"].items():
        dtype, batch, density = key.split("/")
        lines.append(f"\n{dtype}, batch {batch}, {float(density):.1%} allowed (V={res['vocab']}): µs\n")
        lines.append("| kernel | GPU p50 | GPU p99 | host p50 | host p99 |")
        lines.append("|---|---:|---:|---:|---:|")
        for name, r in kres.items():
            if "gpu_us_p50" in r:
                lines.append(f"| {name} | {r['gpu_us_p50']:.1f} | {r['gpu_us_p99']:.1f} | {r['host_us_p50']:.1f} | {r['host_us_p99']:.1f} |")
            else:
                lines.append(f"| {name} | {r.get('skipped') or r.get('error')} | | | |")
    if res.get("pipeline"):
        lines.append("\nper decode step, built-in JSON grammar, GPT-2 vocabulary: fill + copy + apply, µs\n")
        lines.append("| batch | host p50 | host p99 | synced p50 | synced p99 |")
        lines.append("|---:|---:|---:|---:|---:|")
        for b, r in res["pipeline"].items():
            lines.append(f"| {b} | {r['host_us_p50']:.1f} | {r['host_us_p99']:.1f} | {r['synced_us_p50']:.1f} | {r['synced_us_p99']:.1f} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--batches", default="1,8,32,128,512")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--densities", default="0.5", help="fractions of allowed tokens (random bits), comma-separated")
    ap.add_argument("--pipeline", action="store_true")
    ap.add_argument("--skip-apply", action="store_true", help="only the --pipeline measurement")
    ap.add_argument("--pipeline-batches", default="1,16,64,256")
    ap.add_argument("--out")
    args = ap.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "vocab": args.vocab,
           "densities": args.densities, "iters": args.iters, "apply": {} if args.skip_apply else bench_apply(args)}
    if args.pipeline:
        res["pipeline"] = bench_pipeline(args)
    print(f"device: {res['device']}; torch {res['torch']}")
    print(table(res))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
