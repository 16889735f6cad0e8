#!/usr/bin/env python3
"""Grammars beyond JSON: corral vs llguidance vs xgrammar on code, SQL, PGN, config, Lark and a tool call.

    python3 benches/grammar_bench.py                          # Llama 3 and Qwen2.5 (~5 min on 2 CPUs)
    python3 benches/grammar_bench.py --tokenizers llama3 --random 2
    python3 benches/grammar_bench.py --grammars c,python --tag c-only

The grammars live in ``benches/grammars/`` (GBNF and Lark files written for this benchmark)
and ``../shared/data/grammars/`` (llama.cpp's arithmetic.gbnf, vLLM's SQL sample from
llguidance, lark-parser's JSON example, llguidance's blog schema); the hand-written valid texts
are in ``benches/grammars/samples/<grammar>/``. Each grammar also gets ``--random`` texts
sampled through corral's own matcher (seeded: ``--seed``, a uniform choice among the allowed
tokens, mostly among those of the grammar's hand-written texts, ending where the grammar can
end once a drawn length is reached). Every text is
tokenized by the real tokenizer, so every engine walks the same token ids; a token an
engine's mask leaves out is a false rejection (the walk stops there and is counted).

The engines run in worker processes (``benches/worker.py``, the adapters in
``benches/engines/``, as in ``compare.py``), side by side, items interleaved with the order
rotated per item. Per grammar and over all: compile time (grammar source to a matcher),
fill p50 / p99 / p99.9 / max, false rejections, and corral / llguidance ratios. Results go to
stdout and ``benches/results/<date>-grammars[-<tag>].md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import glob
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import compare  # noqa: E402
import vocabs  # noqa: E402
import workloads as wl  # noqa: E402

GDIR = os.path.join(HERE, "grammars")
SAMPLES = os.path.join(GDIR, "samples")
SHARED = os.path.join(vocabs.DATA, "grammars")
ENGINES = ("corral", "llguidance", "xgrammar")


@dataclass
class G:
    name: str  # short id, also the samples folder
    title: str
    kind: str  # gbnf | lark | structural_tag | schema
    path: str | None = None  # grammar file (gbnf, lark, schema)


GRAMMARS = [
    G("c", "C subset (GBNF, own)", "gbnf", os.path.join(GDIR, "c_subset.gbnf")),
    G("python", "Python subset (GBNF, own)", "gbnf", os.path.join(GDIR, "python_subset.gbnf")),
    G("sql", "SQL queries (GBNF, own)", "gbnf", os.path.join(GDIR, "sql_select.gbnf")),
    G("vllm_sql", "vLLM's SQL sample (GBNF)", "gbnf", os.path.join(SHARED, "llguidance", "vllm-sql.gbnf")),
    G("arithmetic", "llama.cpp arithmetic (GBNF)", "gbnf", os.path.join(SHARED, "gbnf", "arithmetic.gbnf")),
    G("pgn", "chess PGN (GBNF, own)", "gbnf", os.path.join(GDIR, "pgn.gbnf")),
    G("toml", "TOML-like config (GBNF, own)", "gbnf", os.path.join(GDIR, "toml_config.gbnf")),
    G("scheme", "Scheme subset (Lark, own)", "lark", os.path.join(GDIR, "scheme.lark")),
    G("calc", "calculator (Lark, own)", "lark", os.path.join(GDIR, "calc.lark")),
    G("json_lark", "lark-parser's JSON example (Lark)", "lark",
      os.path.join(SHARED, "lark", "examples", "standalone", "json.lark")),
    G("tool_call", "tool call: free text + <tool_call> JSON (structural tag)", "structural_tag"),
    G("blog_schema", "llguidance's blog post (JSON Schema)", "schema", os.path.join(SHARED, "llguidance", "blog.schema.json")),
]

# ---------------------------------------------------------------------------------------------
# The structural tag: hermes-style tool calls (two tools) after free text, in xgrammar's format
# (what corral and xgrammar read) and as llguidance StructTags (the same triggers and tags).

WEATHER = {"type": "object",
           "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14},
                          "unit": {"enum": ["C", "F"]}},
           "required": ["city", "days"], "additionalProperties": False}
SEARCH = {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
          "required": ["query"], "additionalProperties": False}
TOOLS = {"get_weather": WEATHER, "search": SEARCH}


def tool_call_spec() -> dict:
    tags, llg = [], []
    for name, params in TOOLS.items():
        begin = '<tool_call>\n{"name": "' + name + '", "arguments": '
        end = "}\n</tool_call>"
        tags.append({"type": "tag", "begin": begin, "content": {"type": "json_schema", "json_schema": params}, "end": end})
        llg.append({"trigger": "<tool_call>", "begin": begin, "schema": params, "end": end})
    tag = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": tags}}
    return {"kind": "structural_tag", "tag": tag, "llg_tags": llg}


def tool_call_texts() -> list[str]:
    def call(name: str, args: dict) -> str:
        return '<tool_call>\n{"name": "' + name + '", "arguments": ' + json.dumps(args) + "}\n</tool_call>"

    pre = ("Sure, I can help with that. You want the weather for the next few days in Paris and Berlin, "
           "with a note on whether it will rain and what to pack. I will look up Paris first, then Berlin; "
           "temperatures in degrees Celsius. A lone < sign or <b>markup</b> in the text is fine.\n")
    return [
        pre + call("get_weather", {"city": "Paris", "days": 3, "unit": "C"}) + "\n"
        + call("get_weather", {"city": "Berlin", "days": 3}) + "\nBoth calls are on their way.",
        "Let me search for that.\n" + call("search", {"query": "grammar-constrained decoding \"exact\" masks", "limit": 5}),
        "No tool is needed here: 2 + 2 = 4, and the capital of France is Paris. <tool> is not a trigger.",
    ]


# ---------------------------------------------------------------------------------------------
# Texts


def grammar_spec(g: G) -> dict:
    if g.kind == "structural_tag":
        return tool_call_spec()
    with open(g.path, encoding="utf-8") as f:
        text = f.read()
    if g.kind == "schema":
        schema = json.loads(text)
        return {"kind": "schema", "schema": schema, "text": json.dumps(schema)}
    return {"kind": g.kind, "name": os.path.basename(g.path), "text": text}


def hand_texts(g: G) -> list[str]:
    if g.kind == "structural_tag":
        return tool_call_texts()
    if g.kind == "schema":
        with open(os.path.join(SHARED, "llguidance", "blog.sample.json"), encoding="utf-8") as f:
            sample = json.load(f)
        out = [json.dumps(sample), json.dumps(sample, indent=2)]
        for path in sorted(glob.glob(os.path.join(SAMPLES, g.name, "*.json"))):
            with open(path, encoding="utf-8") as f:
                out.append(f.read())
        return out
    out = []
    for path in sorted(glob.glob(os.path.join(SAMPLES, g.name, "*"))):
        with open(path, encoding="utf-8", newline="") as f:
            out.append(f.read())
    return out


def corral_for_walks(g: G, spec: dict, vocab):
    """corral's compiled grammar for sampling random texts. For the JSON Schema: key order as
    declared and ", " / ": " separators, so that xgrammar's default (schema order) and
    llguidance's accept the samples too."""
    import corral

    if g.kind == "gbnf":
        gr = corral.Grammar.from_ebnf(spec["text"])
    elif g.kind == "lark":
        gr = corral.Grammar.from_lark(spec["text"])
    elif g.kind == "structural_tag":
        gr = corral.Grammar.from_structural_tag(spec["tag"])
    else:
        gr = corral.Grammar.from_json_schema(spec["text"], property_order="schema", whitespace="compact",
                                             separators=(", ", ": "))
    return corral.CompiledGrammar(gr, vocab)


def native_grammar(m, g: G, spec: dict):
    """Grammar `g` built by the extension module `m` (a build loaded with
    ``ab_builds.load``), in corral's default mode: for comparing two builds."""
    if g.kind == "gbnf":
        return m.Grammar.from_ebnf(spec["text"])
    if g.kind == "lark":
        return m.Grammar.from_lark(spec["text"])
    if g.kind == "structural_tag":
        return m.Grammar.from_structural_tag(spec["tag"])
    return m.Grammar.from_json_schema(spec["text"])


def ab_setup(a: str, b: str, tokenizer: str):
    """What the A/B scripts share: builds `a` and `b` loaded side by side (``ab_builds.load``)
    as ``{"A": ..., "B": ...}``, the tokenizer, its tokenizing function, its token bytes, and a
    vocabulary of the installed corral (for sampling random texts)."""
    import corral
    from ab_builds import load

    mods = {"A": load(a, "ab_a._native"), "B": load(b, "ab_b._native")}
    tok = vocabs.load(tokenizer)
    cvocab = corral.Vocabulary.from_bytes(tok.token_bytes, eos_token_ids=tok.eos_ids, special_token_ids=tok.special_ids,
                                          vocab_size=tok.vocab_size)
    return mods, tok, wl.Tokenized(tok), [bytes(t) for t in tok.token_bytes], cvocab


def ab_texts(g: G, spec: dict, tok, tk, vocab, n_random: int) -> list[str]:
    """The hand-written texts of `g` plus `n_random` random ones seeded by its name (the
    texts the A/B scripts run on both builds)."""
    hand = hand_texts(g)
    prior = {t for s in hand for t in tk(s)}
    return hand + random_texts(corral_for_walks(g, spec, vocab), tok, n_random, random.Random(f"ab:{g.name}"), 120, prior)


def random_texts(cg, tok, n: int, rng: random.Random, max_tokens: int, prior: set[int] | None = None,
                 tries: int = 20) -> list[str]:
    """Up to `n` texts sampled by walking corral's matcher. Each step draws among the allowed
    non-special tokens: with probability 0.85 among those that occur in the grammar's
    hand-written texts (`prior`; when any is allowed), else uniformly, so that the texts look
    like code rather than vocabulary noise while still reaching odd corners. Once a drawn target
    length is reached the walk ends at the first step where EOS is allowed. Walks that do not end
    within 2 * max_tokens, or whose bytes are not UTF-8, are dropped."""
    import numpy as np

    import corral

    words = (tok.vocab_size + 31) // 32
    mask = np.zeros(words, dtype=np.int32)
    special = np.zeros(words * 32, dtype=bool)
    special[tok.special_ids] = True
    eos = tok.eos
    pri = np.zeros(words * 32, dtype=bool)
    if prior:
        pri[list(prior)] = True
    out: list[str] = []
    for _ in range(n * tries):
        if len(out) >= n:
            break
        m = corral.Matcher(cg)
        target = rng.randint(max(1, max_tokens // 8), max_tokens)
        ids: list[int] = []
        ended = False
        for _step in range(2 * max_tokens):
            mask.fill(0)
            m.fill_next_token_bitmask(mask)
            bits = np.unpackbits(mask.view(np.uint8), bitorder="little").astype(bool)
            eos_ok = bool(bits[eos])
            bits &= ~special
            allowed = np.flatnonzero(bits)
            if eos_ok and (len(ids) >= target or allowed.size == 0):
                ended = True
                break
            if allowed.size == 0:
                break
            pool = allowed
            if rng.random() < 0.85:
                fav = np.flatnonzero(bits & pri)
                if fav.size:
                    pool = fav
            t = int(pool[rng.randrange(pool.size)])
            if not m.accept_token(t):
                break
            ids.append(t)
        if not ended or not ids:
            continue
        try:
            out.append(tok.decode(ids).decode("utf-8"))
        except UnicodeDecodeError:
            continue
    return out


# ---------------------------------------------------------------------------------------------
# Report

Q = (("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9))


def fill_stats(xs: list[float]) -> dict:
    d = {q: compare.pct(xs, p) for q, p in Q}
    d["max"] = max(xs) if xs else None
    d["n"] = len(xs)
    return d


def common_fills(stats: dict, gid: str, engines: list[str]) -> tuple[int, dict]:
    """Fill times of each engine over the walks of `gid` that every engine completed (so that
    no engine's numbers leave out the positions where another stopped)."""
    lists = [stats[e].walks_by_gid.get(gid, []) for e in engines]
    n = min((len(x) for x in lists), default=0)
    keep = [k for k in range(n) if all(x[k][0] == "ok" for x in lists)]
    return len(keep), {e: [v for k in keep for v in stats[e].walks_by_gid[gid][k][1]] for e in engines}


def summarize(stats: dict, gids: list[str], engines: list[str], walks_per_gid: dict) -> dict:
    per: dict = {}
    common_all: dict = {e: [] for e in engines}
    common_n = 0
    for gid in gids:
        row = {}
        nk, common = common_fills(stats, gid, engines)
        common_n += nk
        for e in engines:
            common_all[e].extend(common[e])
            s = stats[e]
            rec = s.per_gid.get(gid, {})
            oc = rec.get("outcomes", {})
            row[e] = {"status": rec.get("status", "?"), "compile_ms": s.compile_ms.get(gid),
                      "fill_us": fill_stats(s.fill_by_gid.get(gid, [])),
                      "false_reject": oc.get("false_reject", 0), "eos_rejected": oc.get("eos_rejected", 0),
                      "accept_failed": oc.get("accept_failed", 0), "passed": oc.get("ok", 0),
                      "walks": walks_per_gid[gid], "error": rec.get("error"),
                      "common_walks": nk, "common_fill_us": fill_stats(common[e]),
                      "failures": rec.get("failures", [])[:5], "fill_max_at": rec.get("fill_max_at")}
        per[gid] = row
    overall = {}
    for e in engines:
        s = stats[e]
        fills = [x for g in gids for x in s.fill_by_gid.get(g, [])]
        comp = [s.compile_ms[g] for g in gids if g in s.compile_ms]
        overall[e] = {"fill_us": fill_stats(fills),
                      "compile_ms": {"p50": compare.pct(comp, 50), "max": max(comp) if comp else None,
                                     "sum": sum(comp), "n": len(comp)},
                      "false_reject": sum(per[g][e]["false_reject"] for g in gids),
                      "eos_rejected": sum(per[g][e]["eos_rejected"] for g in gids),
                      "accept_failed": sum(per[g][e]["accept_failed"] for g in gids),
                      "passed": sum(per[g][e]["passed"] for g in gids),
                      "compiled": sum(1 for g in gids if per[g][e]["compile_ms"] is not None),
                      "common_walks": common_n, "common_fill_us": fill_stats(common_all[e]),
                      "version": stats[e].engine}
    return {"per_grammar": per, "overall": overall}


def _f(x) -> str:
    return compare._f(x)


def _r(a, b) -> str:
    if a is None or b is None or b <= 0:
        return "–"
    return f"{a / b:.2f}"


def table(summary: dict, titles: dict, engines: list[str]) -> list[str]:
    per, ov = summary["per_grammar"], summary["overall"]
    lines = ["| grammar | engine | compile ms | fills | fill µs p50 | p99 | p99.9 | max | false rej. | walks ok |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for gid, row in per.items():
        for e in engines:
            r = row[e]
            f = r["fill_us"]
            if r["status"] != "ok" and r["compile_ms"] is None:
                lines.append(f"| {titles[gid]} | {e} | {r['status']} | | | | | | | |")
                continue
            bad = r["false_reject"] + r["eos_rejected"] + r["accept_failed"]
            lines.append(f"| {titles[gid]} | {e} | {_f(r['compile_ms'])} | {f['n']:,} | {_f(f['p50'])} | {_f(f['p99'])} | "
                         f"{_f(f['p99.9'])} | {_f(f['max'])} | {bad} | {r['passed']}/{r['walks']} |")
    for e in engines:
        o = ov[e]
        f = o["fill_us"]
        bad = o["false_reject"] + o["eos_rejected"] + o["accept_failed"]
        lines.append(f"| **all** | {e} | {_f(o['compile_ms']['p50'])} (p50) | {f['n']:,} | {_f(f['p50'])} | {_f(f['p99'])} | "
                     f"{_f(f['p99.9'])} | {_f(f['max'])} | {bad} | {o['passed']} |")
    return lines


def ratio_table(summary: dict, titles: dict) -> list[str]:
    """corral / llguidance per grammar, and the issue's targets (p50 and p99 <= 0.5x llguidance's,
    p99.9 < 1 ms, max < 2 ms, compile <= llguidance's)."""
    per, ov = summary["per_grammar"], summary["overall"]
    lines = ["| grammar | compile | fill p50 | fill p99 | fill p99.9 | fill max | common walks | common p50 | common p99 "
             "| corral p99.9 < 1 ms | corral max < 2 ms |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|:-:|:-:|"]

    def row(label: str, c: dict, l: dict, cm, lm) -> str:
        cf, lf = c["fill_us"], l["fill_us"]
        cc, lc = c["common_fill_us"], l["common_fill_us"]
        ok = lambda v, lim: "–" if v is None else ("yes" if v < lim else "**no**")  # noqa: E731
        return (f"| {label} | {_r(cm, lm)} | {_r(cf['p50'], lf['p50'])} | {_r(cf['p99'], lf['p99'])} | "
                f"{_r(cf['p99.9'], lf['p99.9'])} | {_r(cf['max'], lf['max'])} | {c['common_walks']} | "
                f"{_r(cc['p50'], lc['p50'])} | {_r(cc['p99'], lc['p99'])} | {ok(cf['p99.9'], 1000)} | {ok(cf['max'], 2000)} |")

    for gid, r in per.items():
        if "llguidance" not in r or "corral" not in r:
            continue
        lines.append(row(titles[gid], r["corral"], r["llguidance"], r["corral"]["compile_ms"], r["llguidance"]["compile_ms"]))
    if "llguidance" in ov and "corral" in ov:
        lines.append(row("**all**", ov["corral"], ov["llguidance"], ov["corral"]["compile_ms"]["p50"],
                         ov["llguidance"]["compile_ms"]["p50"]))
    return lines


def before_after(summary: dict, titles: dict) -> list[str]:
    per, ov = summary["per_grammar"], summary["overall"]
    lines = ["| grammar | compile | fill p50 | fill p99 | fill p99.9 | fill max |", "|---|---:|---:|---:|---:|---:|"]
    rows = [(titles[g], per[g]["corral"], per[g]["corral_base"], per[g]["corral"]["compile_ms"],
             per[g]["corral_base"]["compile_ms"]) for g in per]
    rows.append(("**all**", ov["corral"], ov["corral_base"], ov["corral"]["compile_ms"]["p50"], ov["corral_base"]["compile_ms"]["p50"]))
    for label, a, b, ca, cb in rows:
        fa, fb = a["fill_us"], b["fill_us"]
        lines.append(f"| {label} | {_r(ca, cb)} | {_r(fa['p50'], fb['p50'])} | {_r(fa['p99'], fb['p99'])} | "
                     f"{_r(fa['p99.9'], fb['p99.9'])} | {_r(fa['max'], fb['max'])} |")
    return lines


# ---------------------------------------------------------------------------------------------


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizers", default="llama3,qwen2.5", help=f"comma list of {','.join(vocabs.NAMES)}")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--grammars", default="", help="comma list of grammar ids (default: all): "
                    + ",".join(g.name for g in GRAMMARS))
    ap.add_argument("--random", type=int, default=4, help="random texts per grammar, sampled through corral")
    ap.add_argument("--random-tokens", type=int, default=160, help="largest drawn length of a random text (tokens)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunk", type=int, default=2, help="walks per item (items interleave the engines)")
    ap.add_argument("--grammar-timeout", type=float, default=120.0, help="seconds per grammar compile")
    ap.add_argument("--walk-timeout", type=float, default=120.0, help="seconds for the walks of one item")
    ap.add_argument("--setup-timeout", type=float, default=180.0)
    ap.add_argument("--mem-gib", type=float, default=8.0, help="RLIMIT_AS per worker (0: none)")
    ap.add_argument("--threads", type=int, default=0, help="cap engine threads; 0: defaults")
    ap.add_argument("--corral-base", default="", metavar="SO",
                    help="also run corral on this other build of its extension (a copy of python/corral/_native*.so "
                         "made before a change): engine corral_base, with a before/after table")
    ap.add_argument("--python", default=sys.executable, help="interpreter of the workers (must import every engine)")
    ap.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    ap.add_argument("--tag", default="")
    ap.add_argument("--raw-samples", action="store_true", help="every fill time per grammar in the JSON file")
    ap.add_argument("--verbose", "-v", action="store_true")
    args = ap.parse_args(argv)
    # What compare.Worker reads.
    args.xgrammar_nonstrict = args.xgrammar_any_order = args.corral_numpy_mask = False
    args.corral_schema_option = []
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    toknames = [t for t in args.tokenizers.split(",") if t]
    engines = [e for e in args.engines.split(",") if e]
    if args.corral_base:
        os.environ["CORRAL_BASE_SO"] = os.path.abspath(args.corral_base)
        if "corral_base" not in engines:
            engines.insert(1, "corral_base")
    want = [x for x in args.grammars.split(",") if x]
    grammars = [g for g in GRAMMARS if not want or g.name in want]
    if want and len(grammars) != len(want):
        raise SystemExit(f"unknown grammar in {want}; known: {[g.name for g in GRAMMARS]}")
    date = _dt.date.today().isoformat()
    meta = {"date": date, "machine": compare.machine(), "args": vars(args),
            "command": "python3 benches/grammar_bench.py " + " ".join(sys.argv[1:] if argv is None else argv)}
    import corral

    titles = {g.name: g.title for g in grammars}
    md = [f"# Grammars beyond JSON — {date}", ""]
    m = meta["machine"]
    md.append(f"Machine: {m['nproc']} CPUs, {m['cpu']}, Python {m['python']}; load average at start "
              f"{', '.join(f'{x:.2f}' for x in m['loadavg_at_start'] or [])}. corral working tree: {m['corral_commit']}.  ")
    md.append(f"Command: `{meta['command']}`")
    md.append("")
    out_json: dict = {"meta": meta, "tokenizers": {}}
    for tokname in toknames:
        t0 = time.monotonic()
        tok = vocabs.load(tokname)
        tk = wl.Tokenized(tok)
        vocab = corral.Vocabulary.from_bytes(tok.token_bytes, eos_token_ids=tok.eos_ids,
                                             special_token_ids=tok.special_ids, vocab_size=tok.vocab_size)
        items: list[wl.Item] = []
        walks_per_gid: dict[str, int] = {}
        texts_info: dict[str, dict] = {}
        for gi, g in enumerate(grammars):
            spec = grammar_spec(g)
            hand = hand_texts(g)
            rng = random.Random(f"{args.seed}:{g.name}")
            prior = {t for s in hand for t in tk(s)}
            rand = (random_texts(corral_for_walks(g, spec, vocab), tok, args.random, rng, args.random_tokens, prior)
                    if args.random else [])
            texts = hand + rand
            walks = [tk(s) for s in texts]
            walks_per_gid[g.name] = len(walks)
            texts_info[g.name] = {"hand": len(hand), "random": len(rand), "tokens": sum(map(len, walks)),
                                  "random_texts": rand}
            for k in range(0, max(1, len(walks)), args.chunk):
                part = walks[k:k + args.chunk]
                items.append(wl.Item(g.name, spec, part, f"{g.name}[{k}:{k + len(part)}]", args.grammar_timeout,
                                     sum(len(s.encode()) for s in texts[k:k + args.chunk])))
        w = wl.Workload("grammars", "Grammars beyond JSON", items)
        compare.log(f"[{tokname}] {len(grammars)} grammars, {w.instances} texts, {w.tokens:,} tokens "
                    f"(prepared in {time.monotonic() - t0:.1f} s)")
        stats: dict = {}
        with tempfile.TemporaryDirectory(prefix="corral-gbench-") as tmp:
            res = compare.run_workload(w, tok, engines, args, tmp, keep=stats)
        summary = summarize(stats, [g.name for g in grammars], engines, walks_per_gid)
        versions = {e: res["engines"][e]["version"] for e in engines}
        md.append(f"## {tokname} ({tok.vocab_size:,} ids)")
        md.append("")
        md.append("Engines: " + ", ".join(f"{e} {versions[e]}" for e in engines) + f". {w.instances} texts "
                  f"({sum(t['hand'] for t in texts_info.values())} hand-written, "
                  f"{sum(t['random'] for t in texts_info.values())} random), {w.tokens:,} tokens, "
                  f"{res['seconds']:.0f} s.")
        md.append("")
        md += table(summary, titles, engines)
        md.append("")
        if "llguidance" in engines and "corral" in engines:
            md.append("corral / llguidance (below 1: corral faster or smaller). Fill ratios over all walks, then over "
                      "the walks that all engines completed (\"common\"; an engine that stops at a false rejection "
                      "skips the rest of that walk). The last two columns are corral's absolute targets, over all walks.")
            md.append("")
            md += ratio_table(summary, titles)
            md.append("")
        if "corral_base" in engines and "corral" in engines:
            md.append("corral (this build) / corral_base (the `--corral-base` build), fills over all walks:")
            md.append("")
            md += before_after(summary, titles)
            md.append("")
        fails = []
        for gid, row in summary["per_grammar"].items():
            for e in engines:
                r = row[e]
                for fl in r["failures"][:2]:
                    fails.append(f"- {e} on {gid}: {fl['outcome']} {fl['at']}" + (f" ({fl['error'][:100]})" if fl.get("error") else ""))
                if r["status"] != "ok" and r.get("error"):
                    fails.append(f"- {e} on {gid}: {r['status']}: {r['error'][:200]}")
        if fails:
            md.append("Failures:")
            md.append("")
            md += fails
            md.append("")
        out_json["tokenizers"][tokname] = {
            "vocab_size": tok.vocab_size, "versions": versions, "texts": texts_info, "summary": summary,
            **({"raw_fill_us": {e: {g: stats[e].fill_by_gid.get(g, []) for g in titles} for e in engines}}
               if args.raw_samples else {}),
        }
    text = "\n".join(md)
    os.makedirs(args.out_dir, exist_ok=True)
    base = os.path.join(args.out_dir, f"{date}-grammars{('-' + args.tag) if args.tag else ''}")
    with open(base + ".md", "w", encoding="utf-8") as f:
        f.write(text + "\n")
    with open(base + ".json", "w", encoding="utf-8") as f:
        json.dump(out_json, f, indent=1, default=str)
    print(text, flush=True)
    compare.log(f"wrote {base}.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
