#!/usr/bin/env python3
"""Writes the json_schema fuzz target's seed corpus (fuzz/seeds/json_schema) from the schema
data sets in ../shared/data/schemas: every distinct schema of JSON-Schema-Test-Suite
(draft7, draft2020-12) under 2 KB, and a deterministic sample of small JSONSchemaBench
schemas from every category. Files are minified JSON named by their SHA-1 (libFuzzer style).

usage: python3 fuzz/make_json_schema_seeds.py [SCHEMAS_DIR] [OUT_DIR]
"""
import hashlib, json, os, random, sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "..", "shared", "data", "schemas")
out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "fuzz", "seeds", "json_schema")
MAX_BYTES, SUITE_MAX, BENCH_PER_CATEGORY = 2048, 300, 16

def text(schema):
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False).encode()

seeds = {}
suite = []
tests = os.path.join(src, "json-schema-test-suite", "tests")
for draft in sorted(os.listdir(tests)):
    for dirpath, _, files in sorted(os.walk(os.path.join(tests, draft))):
        for f in sorted(files):
            if f.endswith(".json"):
                for group in json.load(open(os.path.join(dirpath, f), encoding="utf-8")):
                    suite.append(text(group["schema"]))
suite = sorted({t for t in suite if len(t) <= MAX_BYTES})
random.Random(0).shuffle(suite)
for t in suite[:SUITE_MAX]:
    seeds[hashlib.sha1(t).hexdigest()] = t
bench = os.path.join(src, "jsonschemabench")
for cat in sorted(os.listdir(bench)):
    d = os.path.join(bench, cat)
    if not os.path.isdir(d):
        continue
    small = []
    for f in sorted(os.listdir(d)):
        try:
            t = text(json.load(open(os.path.join(d, f), encoding="utf-8"))["schema"])
        except (ValueError, KeyError, TypeError):
            continue
        if len(t) <= MAX_BYTES:
            small.append(t)
    random.Random(cat).shuffle(small)
    for t in small[:BENCH_PER_CATEGORY]:
        seeds[hashlib.sha1(t).hexdigest()] = t
os.makedirs(out, exist_ok=True)
for name, t in seeds.items():
    with open(os.path.join(out, name), "wb") as fh:
        fh.write(t)
print(f"{len(seeds)} seeds, {sum(map(len, seeds.values()))} bytes -> {out}")
