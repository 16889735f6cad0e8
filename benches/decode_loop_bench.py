"""A batched decode loop through HF transformers ``generate``: time per decode step without a
grammar, with corral's ``corral.hf.LogitsProcessor`` and with xgrammar's
``xgrammar.contrib.hf.LogitsProcessor``, at several batch sizes, in one process.

The model is Llama-shaped with random weights (no download): ``--model 1b`` is the
Llama-3.2-1B shape (for a GPU), ``--model tiny`` a 2-layer model whose forward pass is cheap,
so that the processors' own cost stands out (for a CPU run). The vocabulary is the real
Llama 3 tokenizer (128,256 ids) from ../shared/data. Random weights drive the grammar into
states a trained model rarely visits: a stress, not a typical load.

Each setting runs ``generate`` with greedy decoding for exactly ``--new-tokens`` steps (EOS
does not stop it), ``--repeats`` times, the engines interleaved; the step time is the median
wall time divided by the step count. ``--parts`` also times corral's processor (its whole call,
CUDA-synchronised on a GPU) per step.

    python3 benches/decode_loop_bench.py                          # CPU, tiny model
    python3 benches/decode_loop_bench.py --device cuda --model 1b --dtype bfloat16 \\
        --batches 1,16,64,128
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import vocabs  # noqa: E402

#: A tool-call argument object whose string lets random weights run for the whole budget.
SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1},
        "units": {"enum": ["metric", "imperial"]},
    },
    "required": ["city", "days"],
}

SHAPES = {
    # hidden, layers, heads, kv heads, intermediate
    "tiny": (64, 2, 4, 2, 128),
    "1b": (2048, 16, 32, 8, 8192),
}


def build_model(shape: str, vocab_size: int, device: str, dtype: torch.dtype) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    hidden, layers, heads, kv, inter = SHAPES[shape]
    cfg = LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=kv, intermediate_size=inter, max_position_embeddings=4096, tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to(device=device, dtype=dtype).eval()
    model.generation_config.eos_token_id = None  # run every step
    model.generation_config.pad_token_id = 0
    return model


def processors(tok: vocabs.Tok, which: list[str]) -> dict[str, Any]:
    """name -> a function making a fresh processor list for one generate() call."""
    from transformers import LogitsProcessorList

    out: dict[str, Any] = {"none": lambda: LogitsProcessorList()}
    if "corral" in which:
        import corral
        import corral.hf

        vocab = corral.Vocabulary.from_bytes(tok.token_bytes, eos_token_ids=tok.eos_ids)
        cg = corral.compile(corral.Grammar.from_json_schema(SCHEMA), vocab)
        out["corral"] = lambda: LogitsProcessorList([corral.hf.LogitsProcessor(cg)])
    if "xgrammar" in which:
        import xgrammar as xgr
        import xgrammar.contrib.hf

        info = xgr.TokenizerInfo(tok.token_bytes, xgr.VocabType.RAW, vocab_size=tok.vocab_size, stop_token_ids=tok.eos_ids)
        xg = xgr.GrammarCompiler(info).compile_json_schema(json.dumps(SCHEMA))
        out["xgrammar"] = lambda: LogitsProcessorList([xgrammar.contrib.hf.LogitsProcessor(xg)])
    return out


class Timed:
    """Wraps a processor and accumulates its call time (synchronised on CUDA)."""

    def __init__(self, inner: Any, cuda: bool) -> None:
        self.inner, self.cuda, self.seconds, self.calls = inner, cuda, 0.0, 0

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.cuda:
            torch.cuda.synchronize()
        t = time.perf_counter()
        out = self.inner(input_ids, scores)
        if self.cuda:
            torch.cuda.synchronize()
        self.seconds += time.perf_counter() - t
        self.calls += 1
        return out


def run(model: Any, prompt: torch.Tensor, make: Any, steps: int, timed: bool = False) -> tuple[float, float]:
    """(wall seconds of one generate, processor seconds per step or nan)."""
    procs = make()
    cuda = prompt.is_cuda
    if timed and len(procs):
        procs[0] = Timed(procs[0], cuda)
    if cuda:
        torch.cuda.synchronize()
    t = time.perf_counter()
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=steps, min_new_tokens=0, do_sample=False, logits_processor=procs, attention_mask=torch.ones_like(prompt))
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - t
    assert out.shape[1] == prompt.shape[1] + steps, out.shape
    per = procs[0].seconds / max(procs[0].calls, 1) if timed and len(procs) else float("nan")
    return wall, per


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", choices=sorted(SHAPES), default="tiny")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--batches", default="1,16,64")
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--engines", default="corral,xgrammar")
    ap.add_argument("--parts", action="store_true", help="also time corral's processor call per step")
    ap.add_argument("--out", help="write the numbers as JSON here")
    args = ap.parse_args()

    tok = vocabs.load("llama3")
    dtype = getattr(torch, args.dtype)
    model = build_model(args.model, tok.vocab_size, args.device, dtype)
    makers = processors(tok, [e for e in args.engines.split(",") if e])
    names = list(makers)
    prompt_ids = tok.encode("Call the weather tool for the city the user named. Arguments as JSON: " * 4)[: args.prompt_tokens]
    rows = []
    print(f"device {args.device}, model {args.model} ({args.dtype}), {args.new_tokens} new tokens, median of {args.repeats}")
    print()
    print("| batch | engine | ms / step | overhead vs none | processor ms / step |")
    print("|---:|---|---:|---:|---:|")
    for b in [int(x) for x in args.batches.split(",")]:
        prompt = torch.tensor([prompt_ids] * b, device=args.device)
        for name in names:  # warm-up (compiles, allocations, first masks)
            run(model, prompt, makers[name], 4)
        walls: dict[str, list[float]] = {n: [] for n in names}
        for _ in range(args.repeats):
            for name in names:
                walls[name].append(run(model, prompt, makers[name], args.new_tokens)[0])
        parts = {}
        if args.parts:
            for name in names[1:]:
                parts[name] = run(model, prompt, makers[name], args.new_tokens, timed=True)[1]
        base = statistics.median(walls["none"]) / args.new_tokens
        for name in names:
            step = statistics.median(walls[name]) / args.new_tokens
            over = (step / base - 1) * 100
            p = parts.get(name, float("nan")) * 1e3
            rows.append({"batch": b, "engine": name, "ms_per_step": step * 1e3, "overhead_pct": over, "processor_ms": p, "walls": walls[name]})
            ps = f"{p:.3f}" if p == p else "—"
            print(f"| {b} | {name} | {step * 1e3:.2f} | {over:+.1f}% | {ps} |", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
