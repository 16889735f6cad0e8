"""corral.generate: the reference decode loop (forced runs, counters, stops, penalties)."""

from __future__ import annotations

import re

import pytest
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import corral
import corral.generate as generate_module

NAME_AGE = r'root ::= "{\"name\": \"" [a-z]{1,8} "\", \"age\": " [0-9]{1,3} "}"'


class RandomModel:
    """Deterministic random logits per context; counts its calls."""

    def __init__(self, size: int, seed: int = 0, width: int | None = None) -> None:
        self.size, self.seed, self.width = size, seed, width or size
        self.calls = 0
        self.seen: list[list[int]] = []

    def __call__(self, ids: list[int]) -> torch.Tensor:
        self.calls += 1
        self.seen.append(list(ids))
        g = torch.Generator().manual_seed(hash((self.seed, tuple(ids))) % (2**63))
        return torch.randn(self.width, generator=g)


class OracleModel:
    """Always prefers the next token of the tokenizer's own encoding of ``target``."""

    def __init__(self, vocab: corral.Vocabulary, prompt: list[int], target: bytes) -> None:
        self.vocab, self.prompt, self.calls = vocab, len(prompt), 0
        self.tokens = vocab.encode(target) + [vocab.eos_token_ids[0]]

    def __call__(self, ids: list[int]) -> torch.Tensor:
        self.calls += 1
        out = ids[self.prompt :]
        assert out == self.tokens[: len(out)], "the generated tokens left the canonical tokenization"
        logits = torch.zeros(self.vocab.size)
        logits[self.tokens[len(out)]] = 50.0
        return logits


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # (batch, 50k) ops: threads only add overhead (and flakiness under load)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def vocab() -> corral.Vocabulary:
    return corral.builtin_vocabulary()


def fresh_valid(compiled, ids) -> bool:
    return corral.Matcher(compiled).validate_tokens(ids) == len(ids)


def test_generates_valid_output_and_counts(vocab):
    compiled = corral.compile(corral.Grammar.from_ebnf(NAME_AGE), vocab)
    model = RandomModel(vocab.size)
    res = corral.generate(model, [50256], compiled, vocab, corral.SamplingParams(seed=0), max_tokens=64)
    assert res.finished and res.token_ids[-1] == vocab.eos_token_ids[0]
    assert re.fullmatch(r'\{"name": "[a-z]{1,8}", "age": [0-9]{1,3}\}', res.text), res.text
    assert res.steps == model.calls and len(res.mask_times_us) == res.steps
    assert res.forced >= 3 and res.steps_saved == res.forced
    assert res.forced + res.steps == len(res.token_ids)
    assert fresh_valid(compiled, res.token_ids)
    assert res.data == b"".join(vocab.token_bytes(t) for t in res.token_ids)
    med, p99 = res.mask_time_stats()
    assert 0 < med <= p99
    # The model sees the forced tokens at its next call: every call's ids extend the prompt + output.
    assert all(s == ([50256] + res.token_ids)[: len(s)] for s in model.seen)


def test_without_forced_runs_every_token_is_a_step(vocab):
    compiled = corral.compile(corral.Grammar.from_ebnf(NAME_AGE), vocab)
    model = RandomModel(vocab.size, seed=1)
    res = corral.generate(model, [50256], compiled, vocab, corral.SamplingParams(seed=1), max_tokens=64, use_forced=False)
    assert res.finished and res.forced == 0 and res.steps == len(res.token_ids) == model.calls
    assert re.fullmatch(r'\{"name": "[a-z]{1,8}", "age": [0-9]{1,3}\}', res.text)


def test_oracle_model_reproduces_the_canonical_tokenization(vocab):
    """Forced runs + the model's tokens = the tokenizer's encoding of the text; fewer calls."""
    target = b'{"name": "ada", "age": 36}'
    g = corral.Grammar.from_ebnf(NAME_AGE)
    model = OracleModel(vocab, [50256], target)
    res = corral.generate(model, [50256], g, vocab, corral.SamplingParams(temperature=0.0), max_tokens=64)
    assert res.token_ids == model.tokens and res.data == target and res.finished
    assert res.steps == model.calls == len(model.tokens) - res.forced
    assert res.forced >= 5


def test_max_tokens_stops_with_a_valid_prefix(vocab):
    compiled = corral.compile(corral.Grammar.from_ebnf(r'root ::= "[" [0-9]+ ("," [0-9]+)* "]"'), vocab)
    res = corral.generate(RandomModel(vocab.size, seed=2), [50256], compiled, vocab, corral.SamplingParams(seed=2), max_tokens=6)
    assert not res.finished and len(res.token_ids) == 6
    assert fresh_valid(compiled, res.token_ids)
    assert corral.generate(RandomModel(vocab.size), [1], compiled, vocab, max_tokens=0).token_ids == []


def test_padded_logits_and_bad_shapes(vocab):
    g = corral.Grammar.from_ebnf(NAME_AGE)
    res = corral.generate(RandomModel(vocab.size, width=vocab.size + 47), [1], g, vocab, corral.SamplingParams(seed=3), 64)
    assert res.finished and max(res.token_ids) < vocab.size
    with pytest.raises(corral.UsageError, match="fewer than the vocabulary"):
        corral.generate(RandomModel(vocab.size, width=100), [1], g, vocab, max_tokens=10)
    with pytest.raises(corral.UsageError, match="shape"):
        corral.generate(lambda ids: torch.zeros(2, vocab.size), [1], g, vocab, max_tokens=10)
    other = corral.Vocabulary.from_bytes([b"a", b""], eos_token_ids=[1])
    with pytest.raises(corral.UsageError, match="another vocabulary"):
        corral.generate(RandomModel(2), [1], corral.compile(g, vocab), other, max_tokens=10)


def test_penalties_use_the_generated_tokens():
    vocab = corral.Vocabulary.from_bytes([b"a", b"b", b""], eos_token_ids=[2])
    g = corral.Grammar.from_ebnf('root ::= [ab]{6}')

    def prefers_a(ids: list[int]) -> torch.Tensor:
        return torch.tensor([1.0, 0.0, 0.0])

    greedy = corral.SamplingParams(temperature=0.0)
    assert corral.generate(prefers_a, [2], g, vocab, greedy, 10).text == "aaaaaa"
    penalized = corral.SamplingParams(temperature=0.0, frequency_penalty=0.6)
    # logit - 0.6 * count: a 1.0 -> a; a 0.4 vs b 0 -> a; a -0.2 vs b 0 -> b; a -0.2 vs b -0.6 -> a;
    # a -0.8 vs b -0.6 -> b; a -0.8 vs b -1.2 -> a
    assert corral.generate(prefers_a, [2], g, vocab, penalized, 10).text == "aababa"


def test_single_choice_steps_skip_the_model():
    vocab = corral.Vocabulary.from_bytes([b"x", b"y", b""], eos_token_ids=[2])  # no encoder
    model = RandomModel(3)
    res = corral.generate(model, [2], corral.Grammar.from_ebnf('root ::= "x" [xy] "y"'), vocab, corral.SamplingParams(seed=0), 10)
    assert res.finished and res.text[0] == "x" and res.text[2] == "y"
    assert res.steps == model.calls == 1 and res.forced == 3  # x, y and EOS had no alternative


def test_generate_name_is_both_module_and_function(vocab):
    assert callable(corral.generate) and callable(generate_module)
    res = generate_module(RandomModel(vocab.size), [1], corral.Grammar.from_ebnf(NAME_AGE), vocab, corral.SamplingParams(seed=0), 64)
    assert isinstance(res, corral.GenerationResult) and res.finished
