"""Memory of a long-running process that compiles schemas it has never seen (issue 44).

    python3 benches/memory_bench.py                      # all 9,097 shared schemas + GBNF, 3 engines
    python3 benches/memory_bench.py --limit 500 --engines corral,llguidance
    python3 benches/memory_bench.py --objects --limit 100 # per-object memory_bytes (corral only)

Each engine runs in a process of its own (the system python by default: it sees corral,
llguidance and xgrammar), with the Llama 3 vocabulary. After loading the vocabulary it walks,
in one process: every JSONSchemaBench schema of ``../shared/data`` (sorted; ``--limit N``
samples N with ``--seed``), each compiled and walked on up to ``--instances`` (3) of its valid
instances token by token with a fresh matcher and a mask fill per step, then the llama.cpp GBNF
grammars, each walked on up to 20 instances. ``--passes 2`` walks everything again in the same
process (corral's caches are then warm: its RSS should stay flat).

Reported per engine: RSS (``/proc/self/statm``) right after the vocabulary is loaded, every
``--every`` schemas, at the end of each pass; the growth from just after the vocabulary; compile
and fill percentiles of the same run (fills into a log histogram with 1% buckets, so the
figures are within 1%). corral compiles through :func:`corral.compile` (its compiled-grammar
cache, as the vLLM and SGLang adapters do); xgrammar's adapter keeps its compiler cache off.
``corral-unbounded`` is corral with ``CORRAL_MEMORY_BUDGET=unlimited``: what the budget costs in
fill time. ``--json FILE`` writes every number; ``--smaps`` adds the resident memory by kind of mapping
(:func:`smaps_mb`) at every ``--every``.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import resource
import subprocess
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

ENGINES = ("corral", "corral-unbounded", "llguidance", "xgrammar")
BUCKET = math.log(1.01)


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def thread_cpu_s() -> dict[str, float]:
    """CPU seconds (user + system) per thread name of this process (``/proc/self/task``)."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[name] = round(out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick, 2)
    return out


def smaps_mb() -> dict[str, float]:
    """Resident MB by kind of mapping (``/proc/self/smaps``): ``brk`` (glibc's main heap:
    Python's objects), ``compile_stacks`` (corral's 64 MiB schema-compile stacks: a read-write
    anonymous mapping of exactly 64 MiB right above a one-page guard), ``anon`` (every other
    anonymous mapping: mimalloc's arenas, glibc's thread arenas, large blocks), ``files``."""
    out = {"brk": 0.0, "compile_stacks": 0.0, "anon": 0.0, "files": 0.0}
    prev_end, prev_guard, kind = -1, False, "anon"
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and ":" in head[3]:
                lo, hi = (int(x, 16) for x in head[0].split("-"))
                path = head[5] if len(head) > 5 else ""
                if path == "[heap]":
                    kind = "brk"
                elif path and not path.startswith("["):
                    kind = "files"
                elif hi - lo == 64 << 20 and prev_guard and prev_end == lo and head[1].startswith("rw"):
                    kind = "compile_stacks"
                else:
                    kind = "anon"
                prev_guard, prev_end = head[1].startswith("---") and hi - lo <= 65536, hi
            elif head[0] == "Rss:":
                out[kind] += int(head[1]) / 1024
    return {k: round(v, 1) for k, v in out.items()}


class Hist:
    """Durations in ns, in log buckets 1% wide: constant memory whatever the count."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.n = 0

    def add(self, ns: int) -> None:
        b = int(math.log(max(ns, 1)) / BUCKET)
        self.counts[b] = self.counts.get(b, 0) + 1
        self.n += 1

    def pct(self, q: float) -> float:
        """The q-th percentile in microseconds (the bucket's middle)."""
        if not self.n:
            return float("nan")
        want = q / 100 * (self.n - 1)
        seen = 0
        for b in sorted(self.counts):
            seen += self.counts[b]
            if seen > want:
                return math.exp((b + 0.5) * BUCKET) / 1e3
        return float("nan")


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))] if s else float("nan")


# ----------------------------------------------------------------------------------- child


def child(args: argparse.Namespace) -> int:
    """Runs one engine's walk and prints one JSON line."""
    warnings.simplefilter("ignore")
    import numpy as np

    import engines
    import vocabs
    import workloads as wl
    from engines.base import Unsupported

    name = args.child
    if name == "corral-unbounded":
        os.environ["CORRAL_MEMORY_BUDGET"] = "unlimited"
    mod_name = "corral" if name.startswith("corral") else name
    if mod_name in engines.TORCH_MASK:
        import torch  # noqa: F401  (imported before the baseline, as the worker does)
    tok = vocabs.load("llama3")
    base = rss_mb()
    mod = engines.module(mod_name)
    engine = mod.Engine(tok, {})
    if mod_name == "corral":
        import corral

        # The serving path: corral.compile's compiled-grammar cache, as the engine adapters.
        engine._compiled = lambda g: corral.compile(g, engine.vocab)
    words = (tok.vocab_size + 31) // 32
    mask = engine.allocate_mask(tok.vocab_size)
    if mask is None:
        mask = np.zeros((1, words), dtype=np.int32)
        if mod_name in engines.TORCH_MASK:
            import torch

            mask = torch.from_numpy(mask)
    engine.set_mask(mask)
    gc.collect()
    time.sleep(1.0)  # corral's background warm-up after the vocabulary
    after_vocab = rss_mb()
    smaps = [(0, 0, smaps_mb())] if args.smaps else []

    files = wl.schema_files(None)
    if args.limit:
        files = sorted(random.Random(args.seed).sample(files, args.limit))
    pool = wl.instance_pool(files[:2000])
    gbnf = wl.gbnf_workload(wl.Tokenized(tok), pool, 20, args.seed, 10.0).items
    ns = time.perf_counter_ns
    fills, compiles = Hist(), []
    series: list[tuple[int, int, float, float]] = []  # (pass, schemas done, seconds, RSS MB)
    passes = []
    t0 = time.time()
    stats = {"compiled": 0, "compile_errors": 0, "walks": 0, "rejected": 0, "fill_errors": 0, "tokens": 0}

    def walk(compiled, walks: list[list[int]]) -> None:
        for ids in walks:
            m = compiled[1] if compiled[1] is not None else engine.matcher(compiled[0])
            compiled[1] = None
            ok = True
            for t in ids:
                a = ns()
                try:
                    engine.fill(m)
                except Exception:  # noqa: BLE001 - a fill past the engine's time budget
                    stats["fill_errors"] += 1
                    ok = False
                    break
                fills.add(ns() - a)
                if not engine.accept(m, t):
                    ok = False
                    break
            stats["walks"] += 1
            stats["tokens"] += len(ids)
            stats["rejected"] += not ok

    def one(spec: dict, walks: list[list[int]]) -> None:
        a = ns()
        try:
            c = engine.compile(spec)
            first = engine.matcher(c)
        except Unsupported:
            return
        except Exception:  # noqa: BLE001 - the engine refused the schema
            stats["compile_errors"] += 1
            return
        compiles.append((ns() - a) / 1e6)
        stats["compiled"] += 1
        walk([c, first], walks)

    pass_stats = []
    for p in range(args.passes):
        if p == 1:  # the table's percentiles are the first pass's (the second's are in the JSON)
            pass_stats.append({"compile_ms": {q: pct(compiles, q) for q in (50, 90, 99)}, "fill_us": {q: fills.pct(q) for q in (50, 90, 99, 99.9)}})
            fills, compiles = Hist(), []
        for k, path in enumerate(files):
            d = wl._load(path)
            texts = [s for s in (wl.json_text(t["data"]) for t in d.get("tests", []) if t.get("valid")) if s is not None]
            walks = [tok.encode(s) for s in texts[: args.instances]]
            one({"kind": "schema", "schema": d["schema"], "text": json.dumps(d["schema"])}, walks)
            if (k + 1) % args.every == 0:
                series.append((p, k + 1, round(time.time() - t0, 1), round(rss_mb(), 1)))
                if args.smaps:
                    smaps.append((p, k + 1, smaps_mb()))
                    print(f"[{name}] smaps MB {smaps[-1][2]}", file=sys.stderr, flush=True)
                print(f"[{name}] pass {p + 1}: {k + 1}/{len(files)} schemas, RSS {series[-1][3]:,.0f} MB, {series[-1][2]:.0f} s", file=sys.stderr, flush=True)
        for item in gbnf:
            one(item.spec, item.walks)
        gc.collect()
        passes.append({"rss_mb": round(rss_mb(), 1), "seconds": round(time.time() - t0, 1)})
        if mod_name == "corral":
            import corral

            if hasattr(corral, "memory_stats"):  # per pass: the counters at its end
                passes[-1]["memory_stats"] = corral.memory_stats()
        series.append((p, len(files), round(time.time() - t0, 1), passes[-1]["rss_mb"]))
    out = {
        "engine": name, "version": engine.version, "base_rss_mb": round(base, 1), "after_vocab_rss_mb": round(after_vocab, 1),
        "passes": passes, "series": series, "schemas": len(files), **stats,
        "compile_ms": {q: pct(compiles, q) for q in (50, 90, 99)},
        "fill_us": {q: fills.pct(q) for q in (50, 90, 99, 99.9)}, "fills": fills.n,
    }
    out["thread_cpu_s"] = thread_cpu_s()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out["rusage"] = {"user_s": round(ru.ru_utime, 2), "sys_s": round(ru.ru_stime, 2), "minor_faults": ru.ru_minflt, "major_faults": ru.ru_majflt}
    if args.smaps:
        out["smaps_mb"] = smaps + [(args.passes - 1, len(files), smaps_mb())]
    if pass_stats:
        out["second_pass"] = {"compile_ms": out["compile_ms"], "fill_us": out["fill_us"]}
        out.update(pass_stats[0])
    if mod_name == "corral":
        import corral

        if hasattr(corral, "memory_stats"):
            out["memory_stats"] = corral.memory_stats()
    print(json.dumps(out))
    return 0


# ----------------------------------------------------------------------------------- parent


def objects(args: argparse.Namespace) -> int:
    """Per-object ``memory_bytes`` over a sample (the bytes each object holds, not RSS)."""
    import numpy as np

    import corral
    import vocabs
    import workloads as wl

    warnings.simplefilter("ignore")
    tok = vocabs.load("llama3")
    vocab = corral.Vocabulary.from_bytes(tok.token_bytes, eos_token_ids=tok.eos_ids, special_token_ids=tok.special_ids, vocab_size=tok.vocab_size)
    files = wl.schema_files(None)
    sample = sorted(random.Random(args.seed).sample(files, args.limit or 100))
    work = wl.schema_workload(wl.Tokenized(tok), sample, 0, 10)
    mask = np.zeros((1, (vocab.size + 31) // 32), dtype=np.int32)
    compiled_after, compiled_walked, matchers = [], [], []
    for item in work.items:
        try:
            g = corral.CompiledGrammar(corral.Grammar.from_json_schema(json.dumps(item.spec["schema"])), vocab)
        except corral.CorralError:
            continue
        compiled_after.append(g.memory_bytes)
        for w in item.walks:
            m = corral.Matcher(g)
            for t in w:
                m.fill_next_token_bitmask(mask, 0)
                if not m.accept_token(t):
                    break
            matchers.append(m.memory_bytes)
        compiled_walked.append(g.memory_bytes)
    kb = lambda b: f"{b / 1024:,.1f}"  # noqa: E731
    print("| object | KiB p50 | KiB p99 | KiB max |\n|---|---:|---:|---:|")
    for label, xs in (("compiled grammar, after compiling", compiled_after), ("compiled grammar, after its walks", compiled_walked), ("matcher, at the end of a walk", matchers)):
        print(f"| {label} | {kb(pct(xs, 50))} | {kb(pct(xs, 99))} | {kb(max(xs))} |")
    print(f"\nvocabulary: {vocab.memory_bytes / 2**20:,.1f} MiB; token-set cache: {vocab.cache_bytes / 2**20:,.1f} MiB")
    return 0


def table(results: list[dict]) -> str:
    rows = ["| engine | RSS after vocabulary MB | RSS at end MB | growth MB | 2nd pass end MB | compile ms p50 / p99 | fill µs p50 / p99 | compiled | walks (rejected) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        first = r["passes"][0]["rss_mb"]
        second = f"{r['passes'][1]['rss_mb']:,.0f}" if len(r["passes"]) > 1 else "—"
        rows.append(f"| {r['engine']} {r['version']} | {r['after_vocab_rss_mb']:,.0f} | {first:,.0f} | {first - r['after_vocab_rss_mb']:,.0f} | {second} | "
                    f"{r['compile_ms']['50']:.2f} / {r['compile_ms']['99']:.1f} | {r['fill_us']['50']:.2f} / {r['fill_us']['99']:.1f} | "
                    f"{r['compiled']:,} | {r['walks']:,} ({r['rejected']}) |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default="corral,corral-unbounded,llguidance,xgrammar")
    ap.add_argument("--limit", type=int, default=0, help="sample this many schemas (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--instances", type=int, default=3)
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--corral-passes", type=int, default=2, help="passes for the engine 'corral' (flatness)")
    ap.add_argument("--every", type=int, default=250)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--json", help="write every number here")
    ap.add_argument("--objects", action="store_true", help="per-object memory_bytes instead (corral)")
    ap.add_argument("--smaps", action="store_true", help="also break the RSS down by mapping kind at every --every")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.objects:
        return objects(args)
    if args.child:
        return child(args)
    results = []
    for name in args.engines.split(","):
        if name not in ENGINES:
            raise SystemExit(f"unknown engine {name}; known: {', '.join(ENGINES)}")
        passes = args.corral_passes if name == "corral" else args.passes
        cmd = [args.python, os.path.abspath(__file__), "--child", name, "--limit", str(args.limit), "--seed", str(args.seed),
               "--instances", str(args.instances), "--passes", str(passes), "--every", str(args.every)] + (["--smaps"] if args.smaps else [])
        p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        if p.returncode != 0:
            print(f"{name}: exit status {p.returncode}", file=sys.stderr)
            continue
        results.append(json.loads(p.stdout.strip().splitlines()[-1]))
        print(f"{name}: done", file=sys.stderr, flush=True)
    print(table(results))
    for r in results:
        if "memory_stats" in r:
            print(f"\n{r['engine']} memory_stats() at the end:\n```\n{json.dumps(r['memory_stats'], indent=1)}\n```")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
