"""One memory budget over every cache corral keeps (corral.set_memory_budget / memory_stats)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import corral

REPO = Path(__file__).resolve().parent.parent
SCHEMAS = REPO.parent / "shared" / "data" / "schemas" / "jsonschemabench"
LLAMA3 = REPO.parent / "shared" / "data" / "tokenizers" / "llama3"
KINDS = {"token_sets", "whole_masks", "compiled_grammars", "automata", "terminal_ids", "language_ids", "schema_automata"}


@pytest.fixture
def restore_budget():
    before = corral.memory_budget()
    yield
    corral.set_memory_budget(before)


def test_budget_is_set_in_bytes_or_units(restore_budget):
    corral.set_memory_budget(128 * 2**20)
    assert corral.memory_budget() == 128 * 2**20
    corral.set_memory_budget("1G")
    assert corral.memory_budget() == 2**30
    corral.set_memory_budget("64 KiB")
    assert corral.memory_budget() == 64 * 1024
    corral.set_memory_budget("unlimited")
    assert corral.memory_budget() is None
    assert corral.memory_stats()["budget"] is None
    corral.set_memory_budget(None)
    assert corral.memory_budget() is None


@pytest.mark.parametrize("bad", [0, -5, "lots", "12 parsecs", 1.5, True, ""])
def test_a_bad_budget_is_a_usage_error(bad, restore_budget):
    with pytest.raises(corral.UsageError, match="memory budget"):
        corral.set_memory_budget(bad)


def test_default_budget_is_128_mib():
    code = "import corral; print(corral.memory_budget())"
    env = {k: v for k, v in os.environ.items() if k != "CORRAL_MEMORY_BUDGET"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert int(out.stdout) == 128 * 2**20 == corral.DEFAULT_MEMORY_BUDGET


def test_environment_sets_the_budget_and_a_bad_one_is_reported():
    code = "import corral, json; print(json.dumps([corral.memory_budget(), corral.memory_stats()['env_error']]))"
    run = lambda v: json.loads(subprocess.run([sys.executable, "-c", code], env=dict(os.environ, CORRAL_MEMORY_BUDGET=v), capture_output=True, text=True, check=True).stdout)  # noqa: E731
    assert run("96MiB") == [96 * 2**20, None]
    assert run("unlimited") == [None, None]
    budget, error = run("a lot")
    assert budget == 128 * 2**20 and "CORRAL_MEMORY_BUDGET" in error and "a lot" in error


def test_stats_report_every_cache_with_hits_misses_and_evictions():
    v = corral.Vocabulary.from_bytes([b"a", b"b", b"ab", b""], eos_token_ids=[3])
    g = corral.compile(corral.Grammar.from_regex("(ab)+c?"), v)
    m = corral.Matcher(g)
    mask = np.zeros((1, 1), dtype=np.int32)
    for t in (2, 0, 1):
        m.fill_next_token_bitmask(mask)
        assert m.accept_token(t)
    s = corral.memory_stats()
    assert set(s["caches"]) == KINDS
    for c in s["caches"].values():
        assert set(c) == {"bytes", "pinned_bytes", "hits", "misses", "evictions", "refused"}
    assert s["caches"]["whole_masks"]["misses"] > 0 and s["caches"]["token_sets"]["misses"] > 0
    assert s["caches"]["compiled_grammars"]["pinned_bytes"] > 0, "the compiled grammar in use is pinned"
    assert s["total_bytes"] >= sum(c["bytes"] for c in s["caches"].values())
    assert s["pinned_bytes"] > 0 and s["pinned_over_budget"] is False


def test_compile_returns_the_live_object_and_recompiles_from_the_native_cache():
    v = corral.Vocabulary.from_bytes([b"x", b"y", b""], eos_token_ids=[2])
    g = corral.Grammar.from_regex("x+y")
    a = corral.compile(g, v)
    assert corral.compile(g, v) is a
    hits = corral.memory_stats()["caches"]["compiled_grammars"]["hits"]
    del a
    gc.collect()
    b = corral.compile(g, v)
    assert corral.memory_stats()["caches"]["compiled_grammars"]["hits"] == hits + 1, "the native cache kept it"
    assert corral.Matcher(b).accept_token(0)


def _walk_script(budget: str, limit: int) -> str:
    return textwrap.dedent(f"""
        import glob, json, sys
        import numpy as np, tiktoken
        from tiktoken.load import load_tiktoken_bpe
        import corral
        corral.set_memory_budget({budget!r})
        budget = corral.memory_budget()
        ranks = load_tiktoken_bpe({str(LLAMA3 / "tokenizer.model")!r})
        tokens = [b""] * (len(ranks) + 256)
        for b, r in ranks.items():
            tokens[r] = b
        eos = len(ranks) + 9  # <|eot_id|>
        vocab = corral.Vocabulary.from_bytes(tokens, eos_token_ids=[eos])
        pat = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{{L}}\\p{{N}}]?\\p{{L}}+|\\p{{N}}{{1,3}}| ?[^\\s\\p{{L}}\\p{{N}}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
        enc = tiktoken.Encoding("llama3", pat_str=pat, mergeable_ranks=ranks, special_tokens={{}})
        mask = np.zeros((1, (vocab.size + 31) // 32), dtype=np.int32)
        worst = 0
        files = sorted(glob.glob({str(SCHEMAS)!r} + "/*/*.json"))[:{limit}]
        for path in files:
            d = json.load(open(path))
            try:
                g = corral.compile(corral.Grammar.from_json_schema(d["schema"]), vocab)
            except corral.CorralError:
                continue
            for t in [t for t in d.get("tests", []) if t.get("valid")][:2]:
                try:
                    text = json.dumps(t["data"], separators=(",", ":"), ensure_ascii=False, allow_nan=False)
                except ValueError:
                    continue
                m = corral.Matcher(g)
                for tok in enc.encode(text):
                    try:
                        m.fill_next_token_bitmask(mask)
                    except corral.FillTimeoutError:
                        print("timeout", path, file=sys.stderr)
                        break
                    cached = sum(c["bytes"] for c in corral.memory_stats()["caches"].values())
                    worst = max(worst, cached)
                    if not m.accept_token(tok):
                        break
        s = corral.memory_stats()
        print(json.dumps({{"budget": budget, "worst": worst, "stats": s}}))
    """)


@pytest.mark.skipif(not (SCHEMAS.is_dir() and (LLAMA3 / "tokenizer.model").exists()), reason="needs ../shared/data")
@pytest.mark.parametrize("budget,limit", [("128MiB", 1500), ("8MiB", 150)])
def test_every_cache_stays_within_the_budget_over_many_schemas(budget, limit):
    """Walks real schemas with the Llama 3 vocabulary under the budget: after every fill, the
    caches together hold at most the budget (pinned data aside), and evictions happened."""
    pytest.importorskip("tiktoken")
    out = subprocess.run([sys.executable, "-c", _walk_script(budget, limit)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    s = r["stats"]
    assert r["worst"] <= r["budget"], f"caches held {r['worst']:,} bytes, budget {r['budget']:,}"
    assert sum(c["evictions"] for c in s["caches"].values()) > 0, "the budget was reached: something was evicted"
    assert s["eviction_passes"] > 0
    assert r["worst"] > r["budget"] // 2, "the caches used the budget"


def test_schema_automata_are_charged_and_evicted_under_the_budget(restore_budget):
    """The JSON Schema compiler's process-wide automata (patterns, key sets) are charged to the
    budget and evicted by it; after an eviction pass (forced here, so that the check does not
    depend on when the eviction thread runs) every cache is back within the budget."""
    v = corral.Vocabulary.from_bytes([bytes([b]) for b in range(256)] + [b""], eos_token_ids=[256])
    budget = 512 * 1024
    # Earlier tests' compiled grammars hold pinned data (charged, never evicted) until they
    # are freed, on corral's background thread, which a loaded machine may delay: wait for
    # it, so that the budget has room for the schema automata.
    gc.collect()
    deadline = time.monotonic() + 30
    while corral.memory_stats()["pinned_bytes"] > budget // 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    corral.set_memory_budget(budget)
    start = corral.memory_stats()
    before = start["caches"]["schema_automata"]
    charged = 0
    for i in range(40):
        names = [f"field_{i}_{j}_{'x' * (j % 9)}" for j in range(40)]
        schema = {"type": "object", "properties": {n: {"type": "string", "pattern": f"^[a-f]{{{j % 5 + 1}}}-{i}-{j}[0-9]*$"} for j, n in enumerate(names)},
                  "additionalProperties": {"type": "integer"}}
        g = corral.CompiledGrammar(corral.Grammar.from_json_schema(schema), v)
        charged = max(charged, corral.memory_stats()["caches"]["schema_automata"]["bytes"])
        del g
    gc.collect()
    corral.set_memory_budget(budget)  # an eviction pass now, on this thread, when over 15/16
    s = corral.memory_stats()
    after = s["caches"]["schema_automata"]
    assert after["misses"] - before["misses"] >= 40 * 40, "every new pattern was built (and looked up)"
    assert charged > 0, f"schema automata are charged (at the start {start['total_bytes']:,} bytes charged, {start['pinned_bytes']:,} pinned)"
    assert after["evictions"] + after["refused"] > before["evictions"] + before["refused"], "the budget evicted or refused schema automata"
    assert s["total_bytes"] <= budget, f"{s['total_bytes']:,} bytes charged, budget {budget:,}"
    assert sum(c["bytes"] for c in s["caches"].values()) <= budget


def test_sglang_cache_of_grammar_objects_is_bounded_and_sets_the_budget(restore_budget):
    from corral.sglang import CorralGrammarBackend

    backend = CorralGrammarBackend(corral.builtin_vocabulary(), memory_budget="200MiB", max_cached_grammars=2)
    assert corral.memory_budget() == 200 * 2**20
    for k in ("a", "b", "c"):
        backend.set_cache(("regex", k), backend.dispatch_regex(k))
    assert list(backend.cache) == [("regex", "b"), ("regex", "c")], "the oldest went"
    backend.set_cache(("regex", "b"), backend.dispatch_regex("b"))
    backend.set_cache(("regex", "d"), backend.dispatch_regex("d"))
    assert list(backend.cache) == [("regex", "b"), ("regex", "d")], "re-cached b is the newest"


def test_vllm_backend_takes_the_budget_from_additional_config(restore_budget):
    from corral.vllm import CorralBackend

    class Cfg:
        additional_config = {"corral_memory_budget": "300MiB"}

    CorralBackend(Cfg(), corral.builtin_vocabulary(), 50257)
    assert corral.memory_budget() == 300 * 2**20


def test_masks_are_the_same_under_a_tiny_budget(restore_budget):
    """Evicting under pressure changes what is rebuilt, never a mask."""
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "tags": {"type": "array", "items": {"type": "string"}}, "n": {"type": "integer"}}}
    docs = [b'{"name": "abc def", "tags": ["x", "yy", "zzz"], "n": 12}', b'{"tags": [], "n": -4, "name": "q"}']

    def walk() -> list[bytes]:
        v = corral.Vocabulary.from_bytes([bytes([b]) for b in range(256)] + [b'{"', b'": ', b'", "', b"name", b"tags", b""], eos_token_ids=[261])
        g = corral.CompiledGrammar(corral.Grammar.from_json_schema(schema), v)
        mask = np.zeros((1, (v.size + 31) // 32), dtype=np.int32)
        out = []
        for d in docs:
            m = corral.Matcher(g)
            for b in d:
                m.fill_next_token_bitmask(mask)
                out.append(mask.tobytes())
                assert m.accept_token(b)
        return out

    def pressure() -> int:
        return sum(c["evictions"] + c["refused"] for c in corral.memory_stats()["caches"].values())

    before = pressure()
    corral.set_memory_budget(64 * 1024)
    tiny = walk()
    assert pressure() > before, "the tiny budget evicted or refused entries"
    corral.set_memory_budget(None)
    assert walk() == tiny
