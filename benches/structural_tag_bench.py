"""Structural tags: mask fill times over free text and a tool call, corral vs xgrammar.

A hermes-style tag (vLLM's builder: ``triggered_tags`` on ``<tool_call>``, two tools with JSON
schemas) on Llama 3. The walk is a ~200-token free-text preamble, then a tool call, then a
short tail. Each engine's matcher fills the mask before every token of the walk (warm:
the same walk is run ``--warmup`` times first, so caches hold what a long-running server's
would), and the first walk after the compile is reported apart; the report gives
p50/p99/max per phase (free text vs inside the call).

    python3 benches/structural_tag_bench.py              # Llama 3 from ../shared/data/tokenizers
    python3 benches/structural_tag_bench.py --runs 5

Needs the shared tokenizer data (see tests/tokenizers_util.py) and xgrammar (optional: its
column is left out when it is not installed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

import corral  # noqa: E402

PREAMBLE = (
    "Sure, I can help with that. Before calling any tools, let me restate the request so that we agree on "
    "what is needed: you want the weather forecast for the next few days in a couple of European cities, "
    "with a short summary of whether it will rain, the expected highs and lows, and a recommendation about "
    "what to pack for a trip that starts on Monday. I will first look up the forecast for Paris, since that "
    "is the first stop, and then for Berlin. If either lookup fails, I will tell you and suggest an "
    "alternative source. Temperatures will be given in degrees Celsius unless you prefer Fahrenheit; wind "
    "speeds in kilometres per hour. Note that forecasts more than five days out are rather uncertain, so "
    "treat the later days as a rough guide only. Also, <tags> like <this> or a lone < sign in the text are "
    "fine: only the exact trigger starts a tool call. Here is the first call:\n"
)

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14}, "unit": {"enum": ["C", "F"]}},
    "required": ["city", "days"],
}
SEARCH = {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["query"]}


def hermes_tag() -> dict:
    tags = []
    for name, params in {"get_weather": WEATHER, "search": SEARCH}.items():
        for begin, end in [('<tool_call>\n{"name": "', "}\n</tool_call>"), ('<tool_call>{"name": "', "}</tool_call>")]:
            tags.append({"type": "tag", "begin": begin + name + '", "arguments": ', "content": {"type": "json_schema", "json_schema": params}, "end": end})
    return {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": tags}}


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="timed walks per engine")
    ap.add_argument("--warmup", type=int, default=1, help="untimed walks first")
    args = ap.parse_args()

    from tokenizers_util import llama3

    enc = llama3()
    vocab = corral.Vocabulary.from_tiktoken(enc)
    n = vocab.size
    call = '<tool_call>\n{"name": "get_weather", "arguments": ' + json.dumps({"city": "Paris", "days": 3, "unit": "C"}) + "}\n</tool_call>"
    text = PREAMBLE + call + "\nThat was the first one."
    ids = enc.encode(text, disallowed_special=())
    pre = len(enc.encode(PREAMBLE, disallowed_special=()))
    tag = hermes_tag()
    print(f"Llama 3 ({n} ids); walk of {len(ids)} tokens, preamble {pre} tokens; tag: hermes, 2 tools")

    t0 = time.perf_counter()
    cg = corral.CompiledGrammar(corral.Grammar.from_structural_tag(tag), vocab)
    corral_compile = time.perf_counter() - t0
    mask = np.zeros((n + 31) // 32, dtype=np.int32)

    def walk_corral():
        m = corral.Matcher(cg)
        times = []
        for t in ids:
            s = time.perf_counter_ns()
            m.fill_next_token_bitmask(mask)
            times.append((time.perf_counter_ns() - s) / 1000)
            assert m.accept_token(t)
        return times

    engines = {"corral": (walk_corral, corral_compile)}
    try:
        import xgrammar as xgr

        toks = [vocab.token_bytes(i) for i in range(n)]
        info = xgr.TokenizerInfo(toks, xgr.VocabType.RAW, vocab_size=n, stop_token_ids=vocab.eos_token_ids)
        t0 = time.perf_counter()
        xc = xgr.GrammarCompiler(info, cache_enabled=False).compile_structural_tag(json.dumps(tag))
        xgr_compile = time.perf_counter() - t0
        bm = xgr.allocate_token_bitmask(1, n)

        def walk_xgr():
            m = xgr.GrammarMatcher(xc)
            times = []
            for t in ids:
                s = time.perf_counter_ns()
                m.fill_next_token_bitmask(bm, 0)
                times.append((time.perf_counter_ns() - s) / 1000)
                assert m.accept_token(t)
            return times

        engines["xgrammar"] = (walk_xgr, xgr_compile)
    except ImportError:
        pass

    print()
    print("| engine | compile ms | phase | fills | p50 µs | p99 µs | max µs |")
    print("|---|---|---|---|---|---|---|")
    for name, (walk, comp) in engines.items():
        # The first walk right after the compile: cache entries are computed as states are
        # first met (corral: one per free-text automaton state, process-wide after that).
        first = walk()
        for _ in range(args.warmup - 1):
            walk()
        runs = [walk() for _ in range(args.runs)]
        rows = [
            ("first walk, free text", first[:pre]),
            ("first walk, call + tail", first[pre:]),
            ("warm, free text", [r[i] for r in runs for i in range(pre)]),
            ("warm, call + tail", [r[i] for r in runs for i in range(pre, len(ids))]),
        ]
        for phase, xs in rows:
            print(f"| {name} | {comp * 1000:.1f} | {phase} | {len(xs)} | {statistics.median(xs):.2f} | {pct(xs, 0.99):.2f} | {max(xs):.2f} |")


if __name__ == "__main__":
    main()
