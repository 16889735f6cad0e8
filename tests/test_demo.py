"""`corral demo`: the end-to-end constrained generation, its example schemas and its options."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

import corral
import corral.demo as demo
import tokenizers_util as tu
from corral.cli import main

REPO = Path(__file__).resolve().parent.parent
SCHEMA_SUPPORT = hasattr(corral.Grammar, "from_json_schema")


@pytest.fixture(autouse=True)
def restore_threads():
    torch = pytest.importorskip("torch")
    n = torch.get_num_threads()
    yield
    assert torch.get_num_threads() == n  # the demo restores torch's thread count


def outputs(text: str) -> list[str]:
    """The documents after each `output:` label (continuation lines are indented 13 columns)."""
    docs: list[str] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("output:"):
            current = [line[len("output:") :].lstrip()]
            docs.append("")
        elif current is not None and line.startswith(" " * 13):
            current.append(line[13:])
        else:
            current = None
        if current is not None:
            docs[-1] = "\n".join(current)
    return docs


def test_example_schemas_ship_in_the_package_and_match_the_repository():
    jsonschema = pytest.importorskip("jsonschema")
    names = demo.example_schemas()
    assert sorted(names) == ["contact", "event", "tool_call"]
    for name, fname in names.items():
        packaged = demo.example_schema_text(name)
        assert packaged == (REPO / "grammars" / "examples" / fname).read_text(encoding="utf-8"), fname
        schema = json.loads(packaged)
        jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(
        {"tool": "send_email", "arguments": {"to": "ada@example.com", "subject": "Hi"}}, json.loads(demo.example_schema_text("tool_call"))
    )
    with pytest.raises(corral.UsageError, match="available"):
        demo.example_schema_text("nope")


def test_default_demo_end_to_end(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    docs = outputs(out)
    assert len(docs) == 3
    for doc, name in zip(docs, ["contact", "tool_call", "event"]):
        value = json.loads(doc)
        if SCHEMA_SUPPORT:
            import jsonschema

            jsonschema.validate(value, json.loads(demo.example_schema_text(name)))
        else:
            assert isinstance(value, dict)
    assert ("from_json_schema is not available" in out) != SCHEMA_SUPPORT
    for key in ("report", "forced", "decode steps", "saved", "mask time:", "median", "p99", "compile time:"):
        assert key in out, key
    assert "3 (3 complete and valid)" in out


def test_fallback_is_announced_and_still_valid(capsys, monkeypatch):
    monkeypatch.setattr(demo, "_schema_support", lambda: False)
    assert main(["demo", "--example", "tool_call", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "falling back to the built-in JSON grammar" in out and "NOT enforced" in out
    (doc,) = outputs(out)
    assert isinstance(json.loads(doc), dict)


def test_forced_tokens_save_decode_steps(capsys):
    assert main(["demo", "--example", "contact", "--temperature", "0"]) == 0
    with_forced = capsys.readouterr().out
    assert main(["demo", "--example", "contact", "--temperature", "0", "--no-forced"]) == 0
    without = capsys.readouterr().out
    line = next(x for x in with_forced.splitlines() if x.strip().startswith("decode steps:"))
    saved = int(line.split("model calls;")[1].split()[0])
    assert saved > 0
    assert "0 forced (appended" in without


def test_user_schema_and_tokenizer(tmp_path, capsys):
    schema = {
        "type": "object",
        "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 99}, "ok": {"type": "boolean"}},
        "required": ["id", "ok"],
        "additionalProperties": False,
    }
    path = tmp_path / "s.schema.json"
    path.write_text(json.dumps(schema))
    tokenizer = tu.data_path("gpt2", "tokenizer.json")
    rc = main(["demo", "--schema", str(path), "--tokenizer", str(tokenizer), "--max-tokens", "300"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert f"Hugging Face {tokenizer}" in out
    (doc,) = outputs(out)
    value = json.loads(doc)
    if SCHEMA_SUPPORT:
        assert set(value) == {"id", "ok"}


def test_local_model_directory(tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=50257))
    model.save_pretrained(tmp_path)
    shutil.copy(tu.data_path("gpt2", "tokenizer.json"), tmp_path / "tokenizer.json")
    rc = main(["demo", "--model", str(tmp_path), "--example", "tool_call", "--max-tokens", "400"])
    out = capsys.readouterr().out
    assert f"model:       {tmp_path} (GPT2LMHeadModel)" in out
    assert f"Hugging Face {tmp_path / 'tokenizer.json'}" in out
    assert len(outputs(out)) == 1
    if rc == 0:
        # The demo itself parses the raw output (which may hold \r and blank lines, so it is
        # not re-parsed from the printed text here) and validates it against the schema.
        assert "check:       json.loads: ok; valid against the schema" in out
    else:  # a random model may use the whole budget: the output is then a valid prefix
        assert "stopped at --max-tokens" in out


def test_bad_arguments(tmp_path, capsys):
    assert main(["demo", "--schema", str(tmp_path / "missing.json")]) == 1
    assert "cannot read the schema" in capsys.readouterr().err
    assert main(["demo", "--model", str(tmp_path / "nowhere")]) == 1
    assert "not a directory" in capsys.readouterr().err
    assert main(["demo", "--example", "nope"]) == 2


def test_help_lists_demo(capsys):
    assert main(["--help"]) == 0
    assert "demo" in capsys.readouterr().out
    assert main(["demo", "--help"]) == 0
    assert "--schema" in capsys.readouterr().out


def test_tiny_model_without_transformers(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    vocab = corral.builtin_vocabulary()
    m = demo.tiny_model(vocab, seed=1)
    assert "pure-torch" in m.description
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        res = corral.generate(m.model_fn, [m.bos_id], corral.Grammar.from_ebnf(demo.BOUNDED_JSON_GRAMMAR), vocab,
                              corral.SamplingParams(seed=1), max_tokens=300)
    finally:
        torch.set_num_threads(n)
    assert res.finished and isinstance(json.loads(res.text), dict)
