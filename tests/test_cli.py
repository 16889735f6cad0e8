"""The ``corral`` command line (corral.cli): check, mask and stats, in-process and as a process.

Real-tokenizer tests skip when the shared tokenizer data or the tokenizer library is missing
(see tests/tokenizers_util.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import corral  # noqa: E402
from corral import cli  # noqa: E402
from corral.cli import EXAMPLE_DOCUMENTS, main  # noqa: E402
from corral.grammars import builtin_grammar, builtin_grammar_text  # noqa: E402
from tokenizers_util import data_path, tokenizer_data_dir  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
JSON_EBNF = REPO / "grammars" / "json.ebnf"
HAS_JSON_SCHEMA = hasattr(corral.Grammar, "from_json_schema")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def field(out: str, name: str) -> str:
    """The value of a ``name: value`` line of the output."""
    m = re.search(rf"^{re.escape(name)}:\s*(.*)$", out, re.M)
    assert m, f"no {name!r} line in:\n{out}"
    return m.group(1)


def listed_tokens(out: str) -> dict[int, str]:
    """id -> repr text of the ``id<TAB>repr`` lines of ``corral mask``."""
    rows = {}
    for line in out.splitlines():
        m = re.fullmatch(r"(\d+)\t('.*'|\".*\")(  <EOS>)?", line)
        if m:
            rows[int(m.group(1))] = m.group(2)
    return rows


def gbnf_files() -> list[Path]:
    root = tokenizer_data_dir()
    d = root.parent / "grammars" / "gbnf" if root is not None else Path(__file__).resolve().parents[2] / "shared" / "data" / "grammars" / "gbnf"
    return sorted(d.glob("*.gbnf")) if d.is_dir() else []


# --------------------------------------------------------------------------------------------
# help


@pytest.mark.parametrize("argv", [[], ["check"], ["mask"], ["stats"]], ids=["top", "check", "mask", "stats"])
def test_help(capsys, argv):
    rc, out, _ = run(capsys, *argv, "--help")
    assert rc == 0
    assert out.startswith(f"usage: corral{' ' + argv[0] if argv else ''}")
    assert "examples:\n  corral " + (argv[0] if argv else "check") in out
    if not argv:
        for sub in ("check", "mask", "stats"):
            assert re.search(rf"^\s+{sub}\s+\S", out, re.M), out  # listed with its one-line description


def test_no_subcommand_and_bad_option(capsys):
    rc, _, err = run(capsys)
    assert rc == 2 and "usage: corral" in err
    rc, _, err = run(capsys, "check", str(JSON_EBNF), "--format", "yaml")
    assert rc == 2 and "invalid choice: 'yaml'" in err
    rc, _, err = run(capsys, "mask", "--limit", "-5")
    assert rc == 2 and "--limit" in err


def test_version(capsys):
    rc, out, _ = run(capsys, "--version")
    assert rc == 0 and out.strip() == f"corral {corral.__version__}"


# --------------------------------------------------------------------------------------------
# check


def test_check_json_ebnf(capsys):
    rc, out, err = run(capsys, "check", str(JSON_EBNF))
    g = corral.load_grammar(JSON_EBNF)
    assert rc == 0, err
    assert out == (
        f"ok: {JSON_EBNF}: {g.num_rules} rules, {g.num_terminals} terminals, {g.num_productions} productions, "
        f"{g.num_dfa_states} DFA states (ebnf)\n"
    )
    assert (g.num_rules, g.num_terminals, g.num_productions) == (12, 12, 24)
    assert err == ""


@pytest.mark.parametrize("path", gbnf_files() or [None], ids=lambda p: p.name if p else "absent")
def test_check_llama_cpp_grammars(capsys, path):
    if path is None:
        pytest.skip("the shared GBNF grammars (shared/data/grammars/gbnf) are absent")
    rc, out, err = run(capsys, "check", str(path))
    assert rc == 0, err
    g = corral.load_grammar(path)
    m = re.fullmatch(rf"ok: {re.escape(str(path))}: (\d+) rules, (\d+) terminals, (\d+) productions, (\d+) DFA states \(ebnf\)\n", out)
    assert m, out
    assert tuple(map(int, m.groups())) == (g.num_rules, g.num_terminals, g.num_productions, g.num_dfa_states)
    assert g.num_rules >= 2


def test_check_syntax_error_has_location(capsys, tmp_path):
    bad = tmp_path / "bad.gbnf"
    bad.write_text('root ::= "a" item\nitem ::= ("b" | "c"\n')
    rc, out, err = run(capsys, "check", str(bad))
    assert rc == 1 and out == ""
    assert err.startswith(f"{bad}: grammar syntax error: ")
    assert "unbalanced '('" in err
    assert "line 2, column 10" in err
    lines = err.rstrip("\n").split("\n")
    assert lines[-2] == '  item ::= ("b" | "c"'
    assert lines[-1] == "  " + " " * 9 + "^"


def test_check_undefined_rule(capsys, tmp_path):
    bad = tmp_path / "undefined.ebnf"
    bad.write_text('root ::= "x" value\n')
    rc, _, err = run(capsys, "check", str(bad))
    assert rc == 1
    assert err.startswith(f"{bad}: invalid grammar: ") and "'value'" in err and "line 1, column 14" in err


def test_check_root_option(capsys, tmp_path):
    rc, out, _ = run(capsys, "check", "--root", "number", str(JSON_EBNF))
    assert rc == 0 and out.startswith(f"ok: {JSON_EBNF}: ")
    rc, _, err = run(capsys, "check", "--root", "nope", str(JSON_EBNF))
    assert rc == 1 and "'nope'" in err
    pat = tmp_path / "p.regex"
    pat.write_text("a+\n")
    rc, _, err = run(capsys, "check", "--root", "x", str(pat))
    assert rc == 2 and "--root only applies to EBNF" in err


def test_check_regex(capsys, tmp_path):
    pat = tmp_path / "email.re"
    pat.write_text("[a-z]+@[a-z]+\\.com\n")
    rc, out, err = run(capsys, "check", str(pat))
    assert rc == 0, err
    assert re.fullmatch(rf"ok: {re.escape(str(pat))}: 1 rules, 1 terminals, \d+ productions, \d+ DFA states \(regex\)\n", out)
    # --format overrides the extension
    txt = tmp_path / "pattern.txt"
    txt.write_text("(ab|cd)*e")
    rc, out, _ = run(capsys, "check", "--format", "regex", str(txt))
    assert rc == 0 and out.endswith("(regex)\n")
    rc, _, err = run(capsys, "check", str(txt))
    assert rc == 2 and "cannot tell the grammar format" in err and "--format" in err
    broken = tmp_path / "broken.regex"
    broken.write_text("a(b")
    rc, _, err = run(capsys, "check", str(broken))
    assert rc == 1 and err.startswith(f"{broken}: grammar syntax error") and "unclosed group" in err and "line 1, column 2" in err


def test_check_missing_file(capsys, tmp_path):
    missing = tmp_path / "nope.ebnf"
    rc, out, err = run(capsys, "check", str(missing))
    assert rc == 1 and out == ""
    assert err.strip() == f"{missing}: cannot read the grammar file: No such file or directory"
    rc, _, err = run(capsys, "check", str(tmp_path))
    assert rc == 1 and "is a directory" in err


def test_check_json_schema(capsys, tmp_path):
    schema = tmp_path / "person.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]}))
    rc, out, err = run(capsys, "check", str(schema))
    if HAS_JSON_SCHEMA:
        assert rc == 0, err
        first, keywords = out.splitlines()[:2]
        assert first.startswith(f"ok: {schema}: ") and first.endswith("(json-schema)")
        assert keywords == "keywords used: properties, required, type"
        strict_fail = tmp_path / "unique.json"
        strict_fail.write_text(json.dumps({"type": "array", "uniqueItems": True}))
        rc3, _, err3 = run(capsys, "check", str(strict_fail))
        assert rc3 == 1 and "'/uniqueItems'" in err3
        rc4, out4, _ = run(capsys, "check", "--non-strict", str(strict_fail))
        assert rc4 == 0 and "not enforced exactly: /uniqueItems (uniqueItems)" in out4
    else:
        assert rc == 2 and out == ""
        assert "JSON Schema support is not available in this version" in err
    # explicit --format on another extension behaves the same
    other = tmp_path / "schema.txt"
    other.write_text(schema.read_text())
    rc2, _, err2 = run(capsys, "check", "--format", "json-schema", str(other))
    assert rc2 == rc
    if not HAS_JSON_SCHEMA:
        assert "JSON Schema support is not available" in err2


def test_builtin_grammar_is_the_repo_grammar():
    packaged = Path(cli.__file__).parent / "grammars" / "json.ebnf"
    assert packaged.read_bytes() == JSON_EBNF.read_bytes()
    assert builtin_grammar_text() == JSON_EBNF.read_text(encoding="utf-8")
    g = builtin_grammar("json")
    assert g is builtin_grammar()
    assert g.source_key == corral.load_grammar(JSON_EBNF).source_key
    with pytest.raises(corral.UsageError, match="available: json"):
        builtin_grammar("yaml")


# --------------------------------------------------------------------------------------------
# mask


def test_mask_after_object_key(capsys):
    rc, out, err = run(capsys, "mask", "--grammar", str(JSON_EBNF), "--prefix", '{"a": ', "--limit", "-1")
    assert rc == 0, err
    assert field(out, "vocabulary") == "built-in GPT-2 (50257 tokens, EOS [50256])"
    assert field(out, "prefix") == "'{\"a\": ' (6 bytes)"
    assert field(out, "eos allowed") == "no"
    assert field(out, "complete").startswith("no")
    assert field(out, "forced bytes") == "''"
    assert re.fullmatch(r"[\d.]+ µs \(first fill\), [\d.]+ µs \(repeated\)", field(out, "fill time"))
    rows = listed_tokens(out)
    n = int(re.fullmatch(r"(\d+) of 50257 tokens", field(out, "allowed")).group(1))
    assert len(rows) == n
    # a value may start: strings (and '"' tokens whatever follows), numbers, literals, objects, arrays, whitespace
    for tid, text in {1: "'\"'", 366: "' \"'", 15931: "'\"\"'", 1298: "'\":'", 20662: "'\"}'", 15: "'0'",
                      24: "'9'", 352: "' 1'", 12: "'-'", 90: "'{'", 1391: "' {'", 58: "'['", 7942: "'true'",
                      2081: "' true'", 8423: "'null'", 9242: "' null'", 9562: "'false'"}.items():
        assert rows.get(tid) == text, (tid, text)
    # ...but not a closing brace, a separator, EOS, a leading zero followed by a digit, or non-literals
    for tid in (92, 5512, 11, 25, 60, 50256, 486, 12647, 35310):  # } }, , : ] EOS 01 nan truth
        assert tid not in rows, tid
    v = corral.vocab.builtin_vocabulary()
    for tid in rows:
        assert v.token_bytes(tid)[0] in b'"-0123456789{[tfn \t\n\r', tid


def test_mask_default_grammar_and_limit(capsys):
    rc, out, _ = run(capsys, "mask", "--prefix", "[1, ", "-n", "3")
    assert rc == 0
    assert field(out, "grammar") == "the built-in JSON grammar (ebnf)"
    assert re.search(r"^first 3 of \d+ allowed tokens \(id, bytes\):$", out, re.M)
    assert list(listed_tokens(out)) == [1, 12, 15]  # '"', '-', '0': the smallest allowed ids
    rc, out, _ = run(capsys, "mask", "--prefix", "[1, ", "--limit", "0")
    assert rc == 0 and listed_tokens(out) == {} and "allowed tokens (id, bytes)" not in out


def test_mask_complete_and_forced(capsys):
    rc, out, _ = run(capsys, "mask", "--prefix", '{"a": 1}', "-n", "-1")
    assert rc == 0
    assert field(out, "eos allowed") == "yes [50256]"
    assert field(out, "complete") == "yes (the prefix is a complete sentence)"
    rows = listed_tokens(out)
    assert set(rows) == {197, 198, 201, 220, 628, 50256}  # \t \n \r ' ' '\n\n' and EOS
    assert re.search(r"^50256\t''  <EOS>$", out, re.M)
    rc, out, _ = run(capsys, "mask", "--prefix", '{"a": t', "-n", "-1")
    assert rc == 0
    assert field(out, "forced bytes") == "'rue'"
    assert set(listed_tokens(out)) == {81, 622, 24508}  # 'r', 'ru', 'rue'


def test_mask_invalid_prefix(capsys):
    rc, out, err = run(capsys, "mask", "--prefix", '{"a" x')
    assert rc == 1 and out == ""
    assert "fails at byte offset 5" in err and "b'x'" in err
    assert err.rstrip("\n").split("\n")[-2:] == ['  {"a" x', "       ^"]
    # offsets count bytes (é is two), and the caret is under the character
    rc, _, err = run(capsys, "mask", "--prefix", '["é", }')
    assert rc == 1
    assert "fails at byte offset 7" in err and "b'}'" in err
    assert err.rstrip("\n").split("\n")[-2:] == ['  ["é", }', "        ^"]
    rc, _, err = run(capsys, "mask", "--prefix", "}")
    assert rc == 1 and "fails at byte offset 0" in err


def test_mask_eos_and_vocab_size_options(capsys):
    rc, out, _ = run(capsys, "mask", "--eos", "198", "--vocab-size", "50304", "--prefix", "[1]", "-n", "-1")
    assert rc == 0
    assert field(out, "vocabulary") == "built-in GPT-2 (50257 tokens, size 50304, EOS [198])"
    assert field(out, "allowed").endswith("of 50304 tokens")
    assert field(out, "eos allowed") == "yes [198]"
    rows = listed_tokens(out)
    assert rows[198] == "''" and 50256 not in rows  # the old EOS stays special: never allowed


def test_mask_bad_tokenizer(capsys, tmp_path):
    rc, _, err = run(capsys, "mask", "--tokenizer", str(tmp_path / "missing.json"))
    assert rc == 1 and "no such tokenizer file" in err
    junk = tmp_path / "tokenizer.model"
    junk.write_bytes(b"\x00\x01 not a model")
    rc, _, err = run(capsys, "mask", "--tokenizer", str(tmp_path))
    # (Without sentencepiece installed, as in the wheel runs, the error names the package.)
    want = "not a SentencePiece model" if importlib.util.find_spec("sentencepiece") else "needs the sentencepiece package"
    assert rc == 1 and err.startswith("corral mask: error: ") and want in err


def test_mask_hf_gpt2_matches_builtin(capsys):
    path = data_path("gpt2", "tokenizer.json")
    pytest.importorskip("tokenizers")
    rc, out, err = run(capsys, "mask", "--tokenizer", str(path), "--prefix", '{"a": ', "-n", "-1")
    assert rc == 0, err
    assert field(out, "vocabulary") == f"Hugging Face {path} (50257 tokens, EOS [50256])"
    hf_rows = listed_tokens(out)
    rc, out, _ = run(capsys, "mask", "--prefix", '{"a": ', "-n", "-1")
    assert hf_rows == listed_tokens(out)
    assert hf_rows[366] == "' \"'" and 92 not in hf_rows


def test_mask_mistral_sentencepiece(capsys):
    path = data_path("mistral", "tokenizer.model")
    spm = pytest.importorskip("sentencepiece")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    rc, out, err = run(capsys, "mask", "--tokenizer", str(path), "--prefix", '{"a": ', "-n", "-1")
    assert rc == 0, err
    assert field(out, "vocabulary") == f"SentencePiece {path} (32000 tokens, EOS [2])"
    rows = listed_tokens(out)
    assert rows[sp.piece_to_id('▁"')] == "' \"'"
    assert rows[sp.piece_to_id("<0x22>")] == "'\"'"  # byte-fallback '"'
    assert rows[sp.piece_to_id("▁{")] == "' {'"
    assert sp.piece_to_id("}") not in rows and sp.piece_to_id("▁}") not in rows and 2 not in rows
    # a directory holding tokenizer.model is resolved to it
    rc, out, _ = run(capsys, "mask", "--tokenizer", str(path.parent), "--prefix", '{"a": ', "-n", "-1")
    assert rc == 0 and listed_tokens(out) == rows


def test_mask_llama3_tiktoken(capsys):
    path = data_path("llama3", "tokenizer.model")
    tiktoken = pytest.importorskip("tiktoken")
    del tiktoken
    rc, out, err = run(capsys, "mask", "--tokenizer", str(path), "--prefix", '{"a": 1}', "-n", "-1")
    assert rc == 0, err
    # special tokens come from special_tokens.json beside the rank file
    assert field(out, "vocabulary") == f"tiktoken {path} (128256 tokens, EOS [128001, 128008, 128009])"
    assert field(out, "eos allowed") == "yes [128001, 128008, 128009]"
    rows = listed_tokens(out)
    assert {128001, 128008, 128009} <= set(rows)
    assert 128000 not in rows  # <|begin_of_text|> is special, never allowed
    rc, out, _ = run(capsys, "mask", "--tokenizer", str(path), "--prefix", '{"a": ', "-n", "-1")
    rows = listed_tokens(out)
    from tokenizers_util import llama3

    enc = llama3()
    for text in ('"', ' "', "0", "123", " {", "true", " null"):
        assert rows.get(enc.encode_single_token(text)) == repr(text), text
    for text in ("}", ",", ":"):
        assert enc.encode_single_token(text) not in rows


# --------------------------------------------------------------------------------------------
# stats


def test_example_documents_are_json():
    assert 3 <= len(EXAMPLE_DOCUMENTS) <= 5
    for name, text in EXAMPLE_DOCUMENTS.items():
        json.loads(text)  # raises if invalid
    cfg = EXAMPLE_DOCUMENTS["config"]
    assert "\\u" in cfg and '\\"' in cfg and "e23" in cfg and any(ord(c) > 0xFFFF for c in json.loads(cfg)["greeting"])


def _stats_numbers(out: str) -> dict[str, float]:
    m_steps = re.search(r"^steps:\s+(\d+) mask fills \((\d+) tokens \+ (\d+) EOS\)$", out, re.M)
    m_allowed = re.search(r"^allowed tokens per step: min (\d+), median ([\d.]+), max (\d+) \(of (\d+)\)$", out, re.M)
    m_fill = re.search(r"^fill time per step: median ([\d.]+) µs, p99 ([\d.]+) µs, max ([\d.]+) µs, mean ([\d.]+) µs "
                       r"\(first fill ([\d.]+) µs\)$", out, re.M)
    m_compile = re.search(r"^compile time: ([\d.]+) ms", out, re.M)
    m_vocab = re.search(r"^vocabulary build time: ([\d.]+) ms$", out, re.M)
    m_mem = re.search(r"^memory:\s+compiled grammar [\d.]+ (?:B|KiB|MiB) after compile, [\d.]+ (?:B|KiB|MiB) after the walk; "
                      r"vocabulary [\d.]+ (?:KiB|MiB)$", out, re.M)
    for what, m in [("steps", m_steps), ("allowed", m_allowed), ("fill", m_fill), ("compile", m_compile),
                    ("vocab", m_vocab), ("memory", m_mem)]:
        assert m, f"no {what} line in:\n{out}"
    return {
        "steps": int(m_steps.group(1)), "tokens": int(m_steps.group(2)), "eos": int(m_steps.group(3)),
        "min": int(m_allowed.group(1)), "median": float(m_allowed.group(2)), "max": int(m_allowed.group(3)),
        "size": int(m_allowed.group(4)), "fill_median": float(m_fill.group(1)), "fill_p99": float(m_fill.group(2)),
        "fill_max": float(m_fill.group(3)), "vocab_ms": float(m_vocab.group(1)),
    }


def test_stats_default(capsys):
    rc, out, err = run(capsys, "stats")
    assert rc == 0, err
    assert "greedy longest match" in out
    assert field(out, "vocabulary") == "built-in GPT-2 (50257 tokens, EOS [50256])"
    docs = re.findall(r"^  (\S+)\s+(\d+) bytes\s+(\d+) tokens \+ EOS", out, re.M)
    assert [d[0] for d in docs] == list(EXAMPLE_DOCUMENTS)
    for name, nbytes, ntok in docs:
        assert int(nbytes) == len(EXAMPLE_DOCUMENTS[name].encode("utf-8"))
        assert 0 < int(ntok) <= int(nbytes)
    s = _stats_numbers(out)
    assert s["tokens"] == sum(int(d[2]) for d in docs) and s["eos"] == len(docs)
    assert s["steps"] == s["tokens"] + s["eos"]
    assert s["size"] == 50257
    assert 1 <= s["min"] <= s["median"] <= s["max"] < 50257
    assert s["fill_median"] <= s["fill_p99"] <= s["fill_max"]
    assert s["vocab_ms"] > 0  # built afresh, not the cached built-in


def test_stats_greedy_walk_reproduces_documents():
    """The walk's tokens spell each document exactly, and each one was allowed by the mask."""
    v = corral.vocab.builtin_vocabulary()
    compiled = corral.compile(builtin_grammar(), v)
    table, longest = cli._token_table(v)
    doc = EXAMPLE_DOCUMENTS["chat-tool-call"].encode()
    m = corral.Matcher(compiled)
    mask = cli._new_mask(v.size)
    pos, ids = 0, []
    while pos < len(doc):
        m.fill_next_token_bitmask(mask)
        allowed = set(corral.allowed_token_ids(mask[0], v.size))
        pick = next(i for k in range(min(longest, len(doc) - pos), 0, -1)
                    for i in table.get(doc[pos:pos + k], []) if i in allowed)
        assert m.accept_token(pick)
        ids.append(pick)
        pos += len(v.token_bytes(pick))
    assert b"".join(v.token_bytes(i) for i in ids) == doc
    assert m.is_accepting()


def test_stats_other_grammar_with_documents(capsys, tmp_path):
    arith = tmp_path / "arith.gbnf"
    arith.write_text('root ::= expr "\\n"\nexpr ::= term ([-+*/] term)*\nterm ::= [0-9]+ | "(" expr ")"\n')
    doc = tmp_path / "sample.txt"
    doc.write_text("12+(3*45)-6\n")
    rc, out, err = run(capsys, "stats", "--grammar", str(arith), "--document", str(doc))
    assert rc == 0, err
    assert re.search(rf"^  {re.escape(str(doc))}\s+12 bytes\s+\d+ tokens \+ EOS", out, re.M)
    assert _stats_numbers(out)["eos"] == 1
    # the built-in JSON documents are not arithmetic: a clear error with the offset
    rc, _, err = run(capsys, "stats", "--grammar", str(arith))
    assert rc == 1 and "document api-response" in err and "byte offset 0" in err and "--document" in err
    incomplete = tmp_path / "incomplete.txt"
    incomplete.write_text("12+(3")
    rc, _, err = run(capsys, "stats", "--grammar", str(arith), "--document", str(incomplete))
    assert rc == 1 and "does not allow EOS" in err


def test_stats_mistral(capsys):
    path = data_path("mistral", "tokenizer.model")
    pytest.importorskip("sentencepiece")
    rc, out, err = run(capsys, "stats", "--tokenizer", str(path))
    assert rc == 0, err
    s = _stats_numbers(out)
    assert s["size"] == 32000 and s["eos"] == len(EXAMPLE_DOCUMENTS)


# --------------------------------------------------------------------------------------------
# as a process


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def test_python_dash_m_help():
    r = subprocess.run([sys.executable, "-m", "corral", "--help"], capture_output=True, text=True, env=_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: corral ")
    assert "check" in r.stdout and "mask" in r.stdout and "stats" in r.stdout


def test_python_dash_m_check_failure_exit_code(tmp_path):
    bad = tmp_path / "bad.ebnf"
    bad.write_text('root ::= "abc')
    r = subprocess.run([sys.executable, "-m", "corral", "check", str(bad)], capture_output=True, text=True,
                       env=_env(), timeout=120)
    assert r.returncode == 1
    assert r.stderr.startswith(f"{bad}: grammar syntax error") and "line 1, column 10" in r.stderr


def test_console_script():
    exe = shutil.which("corral")
    if exe is None:
        pytest.skip("the corral console script is not on PATH")
    r = subprocess.run([exe, "check", str(JSON_EBNF)], capture_output=True, text=True, env=_env(), timeout=120)
    if r.returncode != 0 and "No module named" in r.stderr:
        pytest.skip(f"the corral script on PATH belongs to another environment: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(rf"ok: {re.escape(str(JSON_EBNF))}: 12 rules, 12 terminals, 24 productions, \d+ DFA states \(ebnf\)\n",
                        r.stdout)


# ----------------------------------------------------------------------------- Lark, structural tags, validate

LARK = 'start: "(" WORD ("," WORD)* ")"\nWORD: /[a-z]+/\n%ignore " "\n'
HERMES_TAG = {
    "type": "structural_tag",
    "format": {
        "type": "triggered_tags",
        "triggers": ["<tool_call>"],
        "tags": [{"type": "tag", "begin": "<tool_call>", "content": {"type": "json_schema", "json_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}, "end": "</tool_call>"}],
    },
}


def test_check_reads_lark_and_structural_tags(capsys, tmp_path):
    g = tmp_path / "g.lark"
    g.write_text(LARK)
    rc, out, _ = run(capsys, "check", str(g))
    assert rc == 0 and out.startswith(f"ok: {g}:") and "(lark)" in out
    t = tmp_path / "tag.json"
    t.write_text(json.dumps(HERMES_TAG))
    rc, out, _ = run(capsys, "check", str(t))
    assert rc == 0 and "(structural-tag)" in out
    bad = tmp_path / "bad.lark"
    bad.write_text('start: "a" (\n')
    rc, _, err = run(capsys, "check", str(bad))
    assert rc == 1 and "line 1, column 12" in err and "^" in err


def test_mask_reads_lark(capsys, tmp_path):
    g = tmp_path / "g.lark"
    g.write_text(LARK)
    rc, out, _ = run(capsys, "mask", "--grammar", str(g), "--prefix", "(ab,")
    assert rc == 0 and "EOS" in out


def test_validate_accepts_and_rejects_with_locations(capsys, tmp_path):
    g = tmp_path / "g.lark"
    g.write_text(LARK.replace('%ignore " "', "%ignore /[ \\n]/"))
    ok, bad, short = tmp_path / "ok.txt", tmp_path / "bad.txt", tmp_path / "short.txt"
    ok.write_text("(ab, cd)")
    bad.write_text("(ab,\n 9)")
    short.write_text("(ab,")
    rc, out, _ = run(capsys, "validate", str(g), str(ok))
    assert rc == 0 and out.strip() == f"{ok}: ok"
    rc, out, _ = run(capsys, "validate", str(g), str(ok), str(bad), str(short))
    assert rc == 1
    lines = out.splitlines()
    assert f"{ok}: ok" in lines
    assert f"{bad}:2:2: rejected: unexpected '9'" in lines
    assert "  expected one of: space a-z \\n" in lines
    assert any(l.startswith("  for example: 'a)'") for l in lines)
    assert f"{short}:1:5: rejected: the text ends before the grammar does" in lines


def test_validate_final_newline_and_text_option(capsys, tmp_path):
    g = tmp_path / "g.lark"
    g.write_text(LARK)
    f = tmp_path / "nl.txt"
    f.write_text("(ab)\n")
    rc, out, _ = run(capsys, "validate", str(g), str(f))
    assert rc == 1 and "--strip-final-newline" in out
    rc, out, _ = run(capsys, "validate", str(g), str(f), "--strip-final-newline")
    assert rc == 0
    rc, out, _ = run(capsys, "validate", str(g), "--text", "(x)", "--text", "(x")
    assert rc == 1 and "--text: ok" in out and "--text:1:3: rejected" in out


def test_validate_structural_tag_and_schema(capsys, tmp_path):
    t = tmp_path / "tag.json"
    t.write_text(json.dumps(HERMES_TAG))
    rc, out, _ = run(capsys, "validate", str(t), "--text", 'Sure. <tool_call>{"city": "Paris"}</tool_call>', "--text", '<tool_call>{"town": "Paris"}</tool_call>')
    assert rc == 1 and "--text: ok" in out and "rejected: unexpected 't'" in out
    s = tmp_path / "schema.json"
    s.write_text(json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}))
    rc, out, _ = run(capsys, "validate", str(s), "--text", '{"n": 1}', "--text", '{"n": "1"}')
    assert rc == 1 and "--text: ok" in out and "rejected: unexpected '\"'" in out


def test_validate_bad_grammar_or_missing_file_exits_2(capsys, tmp_path):
    bad = tmp_path / "bad.lark"
    bad.write_text("start: (\n")
    rc, _, err = run(capsys, "validate", str(bad), "--text", "x")
    assert rc == 2 and "line 1, column 8" in err
    g = tmp_path / "g.lark"
    g.write_text(LARK)
    rc, _, err = run(capsys, "validate", str(g), str(tmp_path / "missing.txt"))
    assert rc == 2 and "cannot read" in err
    rc, _, err = run(capsys, "validate", str(g))
    assert rc == 2
