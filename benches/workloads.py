"""Inputs of the benchmark, built once in the parent and shared by every engine.

* ``schema``: JSON Schemas sampled from JSONSchemaBench; each schema's valid test instances
  are walked (schemas without valid instances are compiled only);
* ``json``: "any JSON" grammars (corral's grammars/json.ebnf, each peer's built-in JSON)
  walking valid JSONSchemaBench instances whose top level is an object or an array
  (xgrammar's built-in JSON grammar only allows those at top level);
* ``gbnf``: llama.cpp's GBNF grammars; json.gbnf walks top-level objects and json_arr.gbnf
  walks top-level arrays (in its ``[\\n a,\\n b]`` layout), both filtered to the exact
  language of those grammars (see ``gbnf_json_ok``); the others have no inputs and are only
  compiled.

Instances are serialized with ``json_text`` -- compact separators, no whitespace, raw UTF-8
(``ensure_ascii=False``) -- the one form every engine's default JSON mode accepts: xgrammar
(``any_whitespace=True``), llguidance (flexible whitespace) and outlines-core (``[ ]?``
between tokens) all allow the empty whitespace, and outlines-core's string regex has no
``\\uXXXX`` escapes, which ``ensure_ascii=True`` would produce for every non-ASCII char.
Token ids come from the real tokenizer (``encode_ordinary`` / ``encode(add_special_tokens=
False)``) and are checked to decode back to the exact bytes.
"""

from __future__ import annotations

import glob
import json
import os
import random
import re
from dataclasses import dataclass, field
from typing import Any

from vocabs import DATA

SCHEMA_DIR = os.path.join(DATA, "schemas", "jsonschemabench")
GBNF_DIR = os.path.join(DATA, "grammars", "gbnf")


@dataclass
class Item:
    gid: str  # grammar id; consecutive items with the same gid share one compile
    spec: dict
    walks: list[list[int]]
    label: str
    compile_timeout: float
    bytes_walked: int = 0


@dataclass
class Workload:
    name: str
    title: str
    items: list[Item]
    notes: list[str] = field(default_factory=list)

    @property
    def grammars(self) -> int:
        return len({it.gid for it in self.items})

    @property
    def instances(self) -> int:
        return sum(len(it.walks) for it in self.items)

    @property
    def tokens(self) -> int:
        return sum(len(w) for it in self.items for w in it.walks)


def json_text(value: Any) -> str | None:
    """Compact JSON with raw UTF-8; None when not serializable as strict JSON + UTF-8."""
    try:
        s = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        s.encode("utf-8")
    except (ValueError, TypeError, UnicodeEncodeError):
        return None
    return s


def schema_files(subsets: list[str] | None) -> list[str]:
    files = sorted(glob.glob(os.path.join(SCHEMA_DIR, "*", "*.json")))
    if subsets:
        want = {s.lower() for s in subsets}
        files = [f for f in files if os.path.basename(os.path.dirname(f)).lower() in want]
    return files


def schema_subsets() -> list[str]:
    return sorted(d for d in os.listdir(SCHEMA_DIR) if os.path.isdir(os.path.join(SCHEMA_DIR, d)))


def _load(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _label(path: str) -> str:
    return os.path.relpath(path, SCHEMA_DIR)


class Tokenized:
    """Tokenizes once per text (the same text may appear in several workloads)."""

    def __init__(self, tok) -> None:
        self.tok = tok
        self.cache: dict[str, list[int]] = {}

    def __call__(self, text: str) -> list[int]:
        ids = self.cache.get(text)
        if ids is None:
            ids = self.tok.encode(text)
            if self.tok.decode(ids) != text.encode("utf-8"):
                raise RuntimeError(f"{self.tok.name}: tokenization does not round-trip: {text[:80]!r}")
            self.cache[text] = ids
        return ids


def schema_workload(tok: Tokenized, files: list[str], max_instances: int, timeout: float) -> Workload:
    items = []
    skipped = 0
    for path in files:
        d = _load(path)
        schema = d["schema"]
        texts = []
        for t in d.get("tests", []):
            if not t.get("valid"):
                continue
            s = json_text(t["data"])
            if s is None:
                skipped += 1
                continue
            texts.append(s)
        if max_instances:
            texts = texts[:max_instances]
        walks = [tok(s) for s in texts]
        items.append(Item(_label(path), {"kind": "schema", "schema": schema, "text": json.dumps(schema)},
                          walks, _label(path), timeout, sum(len(s.encode()) for s in texts)))
    w = Workload("schema", "JSON Schema (JSONSchemaBench)", items)
    if skipped:
        w.notes.append(f"{skipped} valid instances not serializable as strict JSON (NaN/lone surrogates) skipped")
    return w


def instance_pool(files: list[str]) -> list[tuple[str, Any]]:
    """Every valid instance of the given schema files, with its file's label."""
    pool = []
    for path in files:
        for t in _load(path).get("tests", []):
            if t.get("valid"):
                pool.append((_label(path), t["data"]))
    return pool


def json_workload(tok: Tokenized, pool, n: int, seed: int, timeout: float, chunk: int = 20) -> Workload:
    cand = [(lab, v) for lab, v in pool if isinstance(v, (dict, list))]
    rng = random.Random(seed)
    if n and n < len(cand):
        cand = rng.sample(cand, n)
    texts = [s for s in (json_text(v) for _, v in cand) if s is not None]
    walks = [tok(s) for s in texts]
    spec = {"kind": "json"}
    items = []
    for k in range(0, len(walks), chunk):
        part = texts[k:k + chunk]
        items.append(Item("json", spec, walks[k:k + chunk], f"json[{k}:{k + len(part)}]", timeout,
                          sum(len(s.encode()) for s in part)))
    w = Workload("json", "Any JSON: corral grammars/json.ebnf vs built-in JSON grammars", items)
    w.notes.append(f"{len(walks)} valid JSONSchemaBench instances (top level object or array), sampled with seed {seed}")
    return w


# ---------------------------------------------------------------------------------------------
# The exact language of llama.cpp's json.gbnf / json_arr.gbnf, for instances serialized by
# json_text: same structure as JSON, but numbers have at most 16 integer digits and a
# restricted exponent, and strings may not hold a raw \x7F.

_NUM = {
    "json.gbnf": re.compile(r"-?(?:[0-9]|[1-9][0-9]{0,15})(?:\.[0-9]+)?(?:[eE][-+]?[0-9][1-9]{0,15})?"),
    "json_arr.gbnf": re.compile(r"-?(?:[0-9]|[1-9][0-9]{0,15})(?:\.[0-9]+)?(?:[eE][-+]?[1-9][0-9]{0,15})?"),
}


def gbnf_json_ok(value: Any, grammar: str) -> bool:
    num = _NUM[grammar]
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, (int, float)):
        return num.fullmatch(json.dumps(value)) is not None
    if isinstance(value, str):
        return "\x7f" not in value
    if isinstance(value, list):
        return all(gbnf_json_ok(v, grammar) for v in value)
    if isinstance(value, dict):
        return all(gbnf_json_ok(k, grammar) and gbnf_json_ok(v, grammar) for k, v in value.items())
    return False


def gbnf_workload(tok: Tokenized, pool, n: int, seed: int, timeout: float) -> Workload:
    items = []
    notes = []
    rng = random.Random(seed)
    for path in sorted(glob.glob(os.path.join(GBNF_DIR, "*.gbnf"))):
        name = os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        texts: list[str] = []
        if name == "json.gbnf":
            cand = [v for _, v in pool if isinstance(v, dict) and gbnf_json_ok(v, name)]
            cand = rng.sample(cand, min(n, len(cand))) if n else cand
            texts = [s for s in map(json_text, cand) if s is not None]
        elif name == "json_arr.gbnf":
            cand = [v for _, v in pool if isinstance(v, list) and gbnf_json_ok(v, name)]
            cand = rng.sample(cand, min(n, len(cand))) if n else cand
            for v in cand:
                parts = [json_text(x) for x in v]
                if all(p is not None for p in parts):
                    texts.append("[\n" + ",\n".join(parts) + "]")  # type: ignore[arg-type]
        else:
            notes.append(f"{name}: no inputs, compiled only")
        walks = [tok(s) for s in texts]
        if texts:
            notes.append(f"{name}: {len(texts)} instances")
        items.append(Item(f"gbnf:{name}", {"kind": "gbnf", "name": name, "text": text}, walks, name, timeout,
                          sum(len(s.encode()) for s in texts)))
    return Workload("gbnf", "llama.cpp GBNF grammars (grammars/gbnf)", items, notes)
