"""corral.hf.LogitsProcessor with a real transformers generate(): a tiny GPT-2-shaped model with
random weights (no download) and the real GPT-2 tokenizer."""

from __future__ import annotations

import json

import pytest
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import corral
import corral.hf
from slow_fill import SLOW_TEXT
import tokenizers_util as tu

transformers = pytest.importorskip("transformers")
jsonschema = pytest.importorskip("jsonschema")
from transformers import GPT2Config, GPT2LMHeadModel, LogitsProcessorList, PreTrainedTokenizerFast  # noqa: E402

EOS = 50256

# Grammars shaped like small JSON Schemas, with the schema each one implements (outputs are
# validated against it: the grammar and the schema must agree).
PERSON = (
    r'''root ::= "{\"name\": \"" [A-Za-z ]{1,12} "\", \"age\": " ("0" | [1-9] [0-9]{0,2}) ", \"tags\": [" tags? "]}"
    tags ::= tag (", " tag){0,2}
    tag ::= "\"" ("red" | "green" | "blue") "\""''',
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 12, "pattern": "^[A-Za-z ]+$"},
            "age": {"type": "integer", "minimum": 0, "maximum": 999},
            "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3},
        },
        "required": ["name", "age", "tags"],
        "additionalProperties": False,
    },
)
TOOL = (
    r'''root ::= "{\"tool\": " ("\"search\"" | "\"weather\"") ", \"args\": {\"q\": \"" [a-z ]{1,10} "\", \"n\": " [1-9] "}}"''',
    {
        "type": "object",
        "properties": {
            "tool": {"enum": ["search", "weather"]},
            "args": {
                "type": "object",
                "properties": {"q": {"type": "string", "maxLength": 10}, "n": {"type": "integer", "minimum": 1, "maximum": 9}},
                "required": ["q", "n"],
                "additionalProperties": False,
            },
        },
        "required": ["tool", "args"],
        "additionalProperties": False,
    },
)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matmuls: threads only add overhead (and flakiness under load)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def tokenizer():
    tok = PreTrainedTokenizerFast(tokenizer_file=str(tu.data_path("gpt2", "tokenizer.json")))
    tok.pad_token = "<|endoftext|>"
    tok.padding_side = "left"
    return tok


@pytest.fixture(scope="module")
def vocab(tokenizer):
    return corral.hf.vocabulary(tokenizer)


def tiny_model(vocab_size: int = 50257, seed: int = 0):
    torch.manual_seed(seed)
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=vocab_size)).eval()


@pytest.fixture(scope="module")
def model():
    return tiny_model()


def generate(model, tokenizer, proc, prompts, **kwargs):
    enc = tokenizer(prompts, return_tensors="pt", padding=True)
    out = model.generate(
        **enc,
        logits_processor=LogitsProcessorList([proc]),
        pad_token_id=EOS,
        eos_token_id=EOS,
        **kwargs,
    )
    return [row[enc["input_ids"].shape[1] :] for row in out.tolist()]


def check_rows(rows, compiled, vocab, max_new, schema=None) -> int:
    """Every row: EOS-terminated valid JSON (validating against ``schema``) followed only by
    padding, or a valid prefix exactly ``max_new`` tokens long. Returns the finished count."""
    finished = 0
    for row in rows:
        if EOS in row:
            k = row.index(EOS)
            body = row[:k]
            assert all(t == EOS for t in row[k:]), "only padding after EOS"
            assert corral.Matcher(compiled).validate_tokens(body + [EOS]) == k + 1
            value = json.loads(b"".join(vocab.token_bytes(t) for t in body).decode())
            if schema is not None:
                jsonschema.validate(value, schema)
            finished += 1
        else:
            assert len(row) == max_new, "stopped early without EOS"
            assert corral.Matcher(compiled).validate_tokens(row) == len(row), "not a valid prefix"
    return finished


PROMPTS = ["Here is a JSON document:", "{", "The answer, as JSON:\n"]


@pytest.mark.parametrize("grammar, schema", [PERSON, TOOL], ids=["person", "tool"])
@pytest.mark.parametrize("sampling", [False, True], ids=["greedy", "sampled"])
def test_schema_shaped_grammars(model, tokenizer, vocab, grammar, schema, sampling):
    compiled = corral.compile(corral.Grammar.from_ebnf(grammar), vocab)
    proc = corral.hf.LogitsProcessor(compiled)
    torch.manual_seed(1)
    kwargs = {"do_sample": True, "temperature": 1.0} if sampling else {"do_sample": False}
    rows = generate(model, tokenizer, proc, PROMPTS, max_new_tokens=80, **kwargs)
    assert check_rows(rows, compiled, vocab, 80, schema) == len(PROMPTS)  # bounded grammar: all finish


def test_builtin_json_grammar(model, tokenizer, vocab):
    """Any JSON: a random model may run to the limit (a valid prefix) or finish (valid JSON)."""
    compiled = corral.compile(corral.builtin_grammar(), vocab)
    proc = corral.hf.LogitsProcessor(compiled)
    torch.manual_seed(2)
    rows = generate(model, tokenizer, proc, PROMPTS * 2, max_new_tokens=24, do_sample=True, top_k=0)
    check_rows(rows, compiled, vocab, 24)


@pytest.mark.skipif(not hasattr(corral.Grammar, "from_json_schema"), reason="corral.Grammar.from_json_schema is not available yet")
@pytest.mark.parametrize("name", ["contact", "tool_call", "event"])
def test_json_schemas(model, tokenizer, vocab, name):
    from corral.demo import _grammar_for, example_schema_text

    text = example_schema_text(name)
    compiled = corral.compile(_grammar_for(text, name).grammar, vocab)
    proc = corral.hf.LogitsProcessor(compiled)
    torch.manual_seed(3)
    rows = generate(model, tokenizer, proc, PROMPTS[:2], max_new_tokens=400, do_sample=True)
    check_rows(rows, compiled, vocab, 400, json.loads(text))


def test_processor_is_reused_across_generate_calls(model, tokenizer, vocab):
    compiled = corral.compile(corral.Grammar.from_ebnf(PERSON[0]), vocab)
    proc = corral.hf.LogitsProcessor(compiled)
    torch.manual_seed(4)
    first = generate(model, tokenizer, proc, PROMPTS, max_new_tokens=80, do_sample=True)
    second = generate(model, tokenizer, proc, ["a much longer prompt than before, so that the length grows"], max_new_tokens=80, do_sample=True)
    third = generate(model, tokenizer, proc, PROMPTS[:2], max_new_tokens=80, do_sample=False)
    for rows in (first, second, third):
        assert check_rows(rows, compiled, vocab, 80, PERSON[1]) == len(rows)


def test_padded_model_never_produces_padding_ids(tokenizer):
    model = tiny_model(vocab_size=50304, seed=5)  # a padded embedding (multiple of 64)
    vocab = corral.hf.vocabulary(tokenizer, model)
    assert vocab.size == 50304
    compiled = corral.compile(corral.Grammar.from_ebnf(TOOL[0]), vocab)
    proc = corral.hf.LogitsProcessor(compiled)
    torch.manual_seed(5)
    rows = generate(model, tokenizer, proc, PROMPTS, max_new_tokens=60, do_sample=True)
    assert check_rows(rows, compiled, vocab, 60, TOOL[1]) == len(PROMPTS)
    assert max(max(r) for r in rows) < 50257


def test_beam_search_reorders_rows(model, tokenizer, vocab):
    compiled = corral.compile(corral.Grammar.from_ebnf(TOOL[0]), vocab)
    proc = corral.hf.LogitsProcessor(compiled)
    rows = generate(model, tokenizer, proc, PROMPTS[:2], max_new_tokens=60, do_sample=False, num_beams=3)
    assert check_rows(rows, compiled, vocab, 60, TOOL[1]) == 2


# ------------------------------------------------------------------ the processor by hand


def allowed(scores_row: torch.Tensor) -> list[int]:
    return torch.isfinite(scores_row).nonzero().flatten().tolist()


def test_processor_state_by_hand():
    vocab = corral.Vocabulary.from_bytes([b"a", b"b", b"c", b""], eos_token_ids=[3], vocab_size=8)
    proc = corral.hf.LogitsProcessor(corral.compile(corral.Grammar.from_ebnf('root ::= "a" [bc]'), vocab))
    prompt = torch.tensor([[1, 2], [2, 2]])
    scores = proc(prompt, torch.zeros(2, 8))
    assert allowed(scores[0]) == allowed(scores[1]) == [0]  # nothing accepted from the prompt
    ids = torch.cat([prompt, torch.tensor([[0], [0]])], dim=1)
    scores = proc(ids, torch.zeros(2, 8))
    assert allowed(scores[0]) == [1, 2]
    ids = torch.cat([ids, torch.tensor([[1], [2]])], dim=1)
    assert allowed(proc(ids, torch.zeros(2, 8))[0]) == [3]  # complete: EOS only
    ids = torch.cat([ids, torch.tensor([[3], [3]])], dim=1)
    assert allowed(proc(ids, torch.zeros(2, 8))[1]) == [3]  # finished: EOS (so generate can stop)
    ids = torch.cat([ids, torch.tensor([[3], [3]])], dim=1)  # padding after EOS is ignored
    assert allowed(proc(ids, torch.zeros(2, 8))[0]) == [3]
    assert all(m.is_terminated() for m in proc.matchers)
    # A new generate() call (shorter input_ids): fresh matchers.
    assert allowed(proc(prompt, torch.zeros(2, 8))[0]) == [0]
    # A token the mask did not allow is an error (it cannot silently desynchronize).
    with pytest.raises(corral.UsageError, match="not allowed"):
        proc(torch.cat([prompt, torch.tensor([[2], [0]])], dim=1), torch.zeros(2, 8))


def test_processor_takes_an_empty_batch_and_new_batch_sizes():
    """An empty batch passes through untouched; a new batch size gets a bitmask of its own."""
    vocab = corral.Vocabulary.from_bytes([b"a", b"b", b""], eos_token_ids=[2], vocab_size=4)
    proc = corral.hf.LogitsProcessor(corral.compile(corral.Grammar.from_ebnf('root ::= "a" "b"'), vocab))
    empty = torch.zeros(0, 4)
    assert proc(torch.zeros(0, 1, dtype=torch.long), empty) is empty
    assert allowed(proc(torch.tensor([[2]]), torch.zeros(1, 4))[0]) == [0]
    out = proc(torch.tensor([[2], [2], [2]]), torch.zeros(3, 4))
    assert [allowed(r) for r in out] == [[0], [0], [0]]
    out = proc(torch.tensor([[2, 0], [2, 0], [2, 0]]), torch.zeros(3, 4))
    assert [allowed(r) for r in out] == [[1], [1], [1]]


# An ambiguous branch whose fill after a long text takes ~0.1 s, and an unambiguous one after "0".
TWO_BRANCHES = 'root ::= "0" [a-z ]* | amb\namb ::= [a-z ]* (amb | "")'


def test_fill_past_budget_ends_only_that_row(caplog):
    """A row whose fill runs past ``max_fill_ms`` gets EOS only (now and later; its sampled
    EOS is not fed to its grammar) and the error is logged; the other rows go on as usual."""
    vocab = corral.builtin_vocabulary()
    V = vocab.size
    slow = vocab.encode(SLOW_TEXT)
    fast = vocab.encode("0") + slow[:-1]
    assert len(fast) == len(slow)
    # The first fills of these terminals over this vocabulary build its token sets (tens of ms
    # on a loaded machine), which a 10 ms budget would count: build them once without a budget
    # (they are shared by every grammar over the vocabulary), so only the ambiguity is timed.
    unbudgeted = corral.compile(corral.Grammar.from_ebnf(TWO_BRANCHES), vocab)
    for ids in ([], fast, fast + vocab.encode(" and")[:1]):
        warm = corral.Matcher(unbudgeted)
        assert all(warm.accept_token(t) for t in ids)
        warm.fill_next_token_bitmask(torch.zeros(1, corral.bitmask_words(V), dtype=torch.int32), 0)
    compiled = corral.compile(corral.Grammar.from_ebnf(TWO_BRANCHES, limits={"max_fill_ms": 10}), vocab)
    proc = corral.hf.LogitsProcessor(compiled)
    prompt = torch.tensor([[EOS], [EOS]])
    assert allowed(proc(prompt, torch.zeros(2, V))[0]) == allowed(proc(prompt, torch.zeros(2, V))[1])

    def direct(ids):
        m = corral.Matcher(compiled)
        assert all(m.accept_token(t) for t in ids)
        row = torch.zeros(1, corral.bitmask_words(V), dtype=torch.int32)
        m.fill_next_token_bitmask(row, 0)
        return corral.allowed_token_ids(row[0], V)

    ids = torch.cat([prompt, torch.tensor([slow, fast])], dim=1)
    with caplog.at_level("ERROR", logger="corral"):
        out = proc(ids, torch.zeros(2, V))
    assert allowed(out[0]) == [EOS]
    assert "max_fill_ms" in caplog.text and "ended with EOS" in caplog.text
    assert allowed(out[1]) == direct(fast) and len(allowed(out[1])) > 1000
    # The ended row's EOS is not fed to its grammar (no "not allowed" error); it stays EOS only.
    more = vocab.encode(" and")
    ids = torch.cat([ids, torch.tensor([[EOS], more[:1]])], dim=1)
    out = proc(ids, torch.zeros(2, V))
    assert allowed(out[0]) == [EOS] and allowed(out[1]) == direct(fast + more[:1])
    # A new generate() call starts every row afresh.
    assert allowed(proc(prompt, torch.zeros(2, V))[0]) == direct([])


def test_processor_rejects_mismatched_shapes():
    vocab = corral.Vocabulary.from_bytes([b"a", b""], eos_token_ids=[1])
    proc = corral.hf.LogitsProcessor(corral.Grammar.from_regex("a+"), vocab=vocab)
    with pytest.raises(corral.UsageError, match="same batch"):
        proc(torch.zeros(2, 3, dtype=torch.long), torch.zeros(3, 2))
    with pytest.raises(corral.UsageError, match="narrower"):
        proc(torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 1))
    with pytest.raises(corral.UsageError, match="needs vocab"):
        corral.hf.LogitsProcessor(corral.Grammar.from_regex("a+"))


def test_make_model_fn_with_generate(model, vocab):
    """corral.generate drives the transformers model through the KV-cached model_fn."""
    compiled = corral.compile(corral.Grammar.from_ebnf(PERSON[0]), vocab)
    fn = corral.hf.make_model_fn(model)
    res = corral.generate(fn, [EOS], compiled, vocab, corral.SamplingParams(seed=0), max_tokens=80)
    assert res.finished and res.forced > 0
    jsonschema.validate(json.loads(res.text), PERSON[1])
    with torch.no_grad():  # the cached logits equal a full forward pass over the same ids
        full = model(torch.tensor([[EOS] + res.token_ids[:-1]])).logits[0, -1]
    assert torch.allclose(fn([EOS] + res.token_ids[:-1]), full, atol=1e-4)
