"""Forced token runs: the Vocabulary encoder hook and forced_tokens' canonicality on real
tokenizers (GPT-2 via tokenizers, the built-in GPT-2, Llama 3 via tiktoken, Mistral via
SentencePiece)."""

from __future__ import annotations

import gc
import random
import weakref
from dataclasses import dataclass
from typing import Callable

import pytest

import corral
import tokenizers_util as tu
from corral.forced import forced_tokens

# ------------------------------------------------------------------ tokenizers


@dataclass
class Tok:
    name: str
    vocab: corral.Vocabulary
    encode: Callable[[bytes], list]  # the tokenizer's own encoder (no special tokens)
    leading_space: bool = False  # a dummy-prefix tokenizer: grammars start with a space


def _gpt2() -> Tok:
    t = tu.gpt2()
    return Tok("gpt2", corral.Vocabulary.from_huggingface(t), lambda b: t.encode(b.decode(), add_special_tokens=False).ids)


def _builtin() -> Tok:
    t = tu.gpt2()
    return Tok("builtin", corral.builtin_vocabulary(), lambda b: t.encode(b.decode(), add_special_tokens=False).ids)


def _llama3() -> Tok:
    e = tu.llama3()
    return Tok("llama3", corral.Vocabulary.from_tiktoken(e), lambda b: e.encode_ordinary(b.decode()))


def _mistral() -> Tok:
    sp = tu.mistral()
    # SentencePiece adds the leading space itself: the text " x..." is encoded as "x...".
    return Tok("mistral", corral.Vocabulary.from_sentencepiece(sp), lambda b: sp.encode(b.decode()[1:]), leading_space=True)


LOADERS = {"gpt2": _gpt2, "builtin": _builtin, "llama3": _llama3, "mistral": _mistral}
_CACHE: dict[str, Tok] = {}


@pytest.fixture(params=list(LOADERS))
def tok(request) -> Tok:
    name = request.param
    if name not in _CACHE:
        _CACHE[name] = LOADERS[name]()
    return _CACHE[name]


# ------------------------------------------------------------------ grammars and texts


def _letters(r: random.Random, lo: int, hi: int, alphabet: str = "abcdefghijklmnopqrstuvwxyz") -> str:
    return "".join(r.choice(alphabet) for _ in range(r.randint(lo, hi)))


GRAMMARS: dict[str, tuple[str, Callable[[random.Random], str]]] = {
    "name_age": (
        r'root ::= "{\"name\": \"" [a-z]+ "\", \"age\": " [0-9]+ "}"',
        lambda r: f'{{"name": "{_letters(r, 1, 8)}", "age": {r.randint(0, 9999)}}}',
    ),
    "nested": (
        r'''root ::= "{\"user\": {\"id\": " [0-9]+ ", \"tags\": [" tag (", " tag)* "]}, \"active\": " ("true" | "false") "}"
        tag ::= "\"" [a-z]+ "\""''',
        lambda r: '{"user": {"id": %d, "tags": [%s]}, "active": %s}'
        % (r.randint(0, 999), ", ".join(f'"{_letters(r, 1, 5)}"' for _ in range(r.randint(1, 3))), r.choice(["true", "false"])),
    ),
    "pretty": (
        r'root ::= "{\n  \"name\": \"" [A-Za-z ]+ "\",\n  \"email\": \"" [a-z]+ "@example.com\"\n}"',
        lambda r: '{\n  "name": "%s",\n  "email": "%s@example.com"\n}'
        % (_letters(r, 1, 12, "ABCabcxyz   "), _letters(r, 1, 6)),
    ),
    "tool": (
        r'root ::= "{\"function\": \"get_weather\", \"arguments\": {\"city\": \"" [A-Z] [a-z]+ "\", \"unit\": \"" ("celsius" | "fahrenheit") "\"}}"',
        lambda r: '{"function": "get_weather", "arguments": {"city": "%s", "unit": "%s"}}'
        % (r.choice("PLBM") + _letters(r, 1, 8), r.choice(["celsius", "fahrenheit"])),
    ),
    # A forced run ending inside a word: the word's tokens depend on how it ends (GPT-2 writes
    # " informat" as " inform" "at", but " information" as one token).
    "word": (
        r'root ::= "{\"topic\": \"data informat" [a-z]* "\"}"',
        lambda r: '{"topic": "data informat%s"}' % r.choice(["ion", "ics", "ional", "", "ive", "ions"]),
    ),
}

FIXED = {
    "name_age": ['{"name": "bob", "age": 42}', '{"name": "alice", "age": 7}'],
    "nested": ['{"user": {"id": 12, "tags": ["ab", "c"]}, "active": true}'],
    "pretty": ['{\n  "name": "Ada Lovelace",\n  "email": "ada@example.com"\n}'],
    "tool": ['{"function": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}'],
    "word": ['{"topic": "data information"}', '{"topic": "data informat"}'],
}


def compiled_for(t: Tok, grammar: str) -> corral.CompiledGrammar:
    src = GRAMMARS[grammar][0]
    if t.leading_space:
        src = src.replace('root ::= "', 'root ::= " ', 1)
    return corral.CompiledGrammar(corral.Grammar.from_ebnf(src), t.vocab)


def texts_for(t: Tok, grammar: str, n_random: int = 8) -> list[str]:
    r = random.Random(f"{t.name}/{grammar}")
    texts = FIXED[grammar] + [GRAMMARS[grammar][1](r) for _ in range(n_random)]
    return [(" " + x) if t.leading_space else x for x in texts]


# ------------------------------------------------------------------ the simulated engine


def run(t: Tok, compiled, text: bytes, *, naive: bool = False) -> tuple[list[int], int]:
    """Decodes ``text`` under the grammar: at each decode step an oracle "model" emits the next
    token of the tokenizer's own encoding of the whole text (a model that always writes the
    canonical tokenization); forced runs come from forced_tokens (or, ``naive``, from greedy
    longest-match tokens covering all the forced bytes). Returns (tokens, forced count)."""
    vocab = t.vocab
    target = t.encode(text)
    m = corral.Matcher(compiled)
    out: list[int] = []
    pos = forced = 0
    eos = vocab.eos_token_ids[0]
    while not m.is_terminated():
        run_ = _naive(vocab, m.forced_bytes()) if naive else forced_tokens(m, vocab)
        if run_:
            for tok in run_:
                assert m.accept_token(tok), f"forced token {tok} {vocab.token_bytes(tok)!r} rejected"
            out += run_
            forced += len(run_)
            pos += sum(len(vocab.token_bytes(x)) for x in run_)
            continue
        if pos == len(text):
            assert m.accept_token(eos)
            out.append(eos)
            break
        if naive:  # re-tokenize the rest (the forced run may have ended mid-token)
            tok = t.encode(text[pos:])[0]
        else:
            assert len(out) < len(target) and vocab.token_bytes(target[len(out)]) == text[pos : pos + len(vocab.token_bytes(target[len(out)]))], (
                f"forced tokens left the canonical token boundaries at byte {pos}: "
                f"{[vocab.token_bytes(x) for x in out]}"
            )
            tok = target[len(out)]
        assert m.accept_token(tok)
        out.append(tok)
        pos += len(vocab.token_bytes(tok))
    return out, forced


_TABLES: dict[int, dict[bytes, int]] = {}


def _naive(vocab: corral.Vocabulary, data: bytes) -> list[int]:
    """Greedy longest-match tokens for all of ``data`` (naive byte forcing)."""
    table = _TABLES.get(id(vocab))
    if table is None:
        table = {}
        for i in range(vocab.num_tokens):
            b = vocab.token_bytes(i)
            if b:
                table.setdefault(b, i)
        _TABLES[id(vocab)] = table
    out, i = [], 0
    while i < len(data):
        for k in range(min(len(data) - i, 128), 0, -1):
            if data[i : i + k] in table:
                out.append(table[data[i : i + k]])
                i += k
                break
        else:  # pragma: no cover - every byte is a token in these vocabularies
            raise AssertionError(data[i:])
    return out


# ------------------------------------------------------------------ canonicality


NAIVE_DIFFERS: dict[str, bool] = {}


@pytest.mark.parametrize("grammar", list(GRAMMARS))
def test_forced_runs_are_canonical(tok, grammar):
    """Forced tokens + the canonically generated rest == the tokenizer's encode() of the final
    text, token for token; and forced runs do save decode steps."""
    compiled = compiled_for(tok, grammar)
    eos = tok.vocab.eos_token_ids[0]
    for text in texts_for(tok, grammar):
        data = text.encode()
        out, forced = run(tok, compiled, data)
        assert out == tok.encode(data) + [eos], text
        assert forced >= 3, (text, forced)
        if not tok.leading_space:
            naive, _ = run(tok, compiled, data, naive=True)
            if naive != out:
                NAIVE_DIFFERS[tok.name] = True


def test_naive_byte_forcing_would_differ():
    """The comparison above is not vacuous: naive forcing gives other tokens, e.g. GPT-2's
    `": ` + `42` (canonical: `":`, ` 42`)."""
    for name in ("gpt2", "llama3"):
        if name not in _CACHE:
            _CACHE[name] = LOADERS[name]()
        t = _CACHE[name]
        for grammar in GRAMMARS:
            compiled = compiled_for(t, grammar)
            for text in texts_for(t, grammar, n_random=2):
                naive, _ = run(t, compiled, text.encode(), naive=True)
                if naive != t.encode(text.encode()) + [t.vocab.eos_token_ids[0]]:
                    NAIVE_DIFFERS[name] = True
    assert NAIVE_DIFFERS.get("gpt2") and NAIVE_DIFFERS.get("llama3")
    t = _CACHE["gpt2"]
    assert [t.vocab.token_bytes(i) for i in _naive(t.vocab, b'", "age": ')][-1] == b" "
    assert t.vocab.token_bytes(t.encode(b'", "age": 42}')[-2]) == b" 42"


# ------------------------------------------------------------------ semantics


@pytest.fixture(scope="module")
def gpt2() -> corral.Vocabulary:
    return corral.builtin_vocabulary()


def matcher(vocab, src: str) -> corral.Matcher:
    return corral.Matcher(corral.compile(corral.Grammar.from_ebnf(src), vocab))


def spell(vocab, ids) -> list[bytes]:
    return [vocab.token_bytes(i) for i in ids]


def test_trailing_token_that_could_merge_is_left_to_the_model(gpt2):
    m = matcher(gpt2, GRAMMARS["name_age"][0])
    assert all(m.accept_token(t) for t in gpt2.encode(b'{"name": "bob",'))
    assert m.forced_bytes() == b' "age": '
    before = (m.num_accepted, m.forced_bytes())
    assert spell(gpt2, forced_tokens(m, gpt2)) == [b' "', b"age", b'":']  # not b" ": " 42" is one token
    assert (m.num_accepted, m.forced_bytes()) == before  # the matcher is unchanged


def test_whole_run_and_eos_when_nothing_can_merge(gpt2):
    m = matcher(gpt2, r'root ::= [0-9]+ ", \"end\"]"')
    assert m.accept_token(gpt2.encode(b"42")[0])
    assert forced_tokens(m, gpt2) == []  # more digits may follow
    assert m.accept_token(gpt2.encode(b",")[0])
    ids = forced_tokens(m, gpt2)
    assert spell(gpt2, ids) == [b' "', b"end", b'"]', b""] and ids[-1] == gpt2.eos_token_ids[0]
    assert m.validate_tokens(ids) == len(ids)


def test_previous_token_that_would_merge_blocks_the_run(gpt2):
    m = matcher(gpt2, r'root ::= ("x" | "walk") "ing done"')
    assert m.accept_token(gpt2.encode(b"walk")[0])
    assert m.forced_bytes() == b"ing done"
    assert forced_tokens(m, gpt2) == []  # GPT-2 writes "walking": no boundary after "walk"
    m = matcher(gpt2, r'root ::= ("x" | "walk") " done now"')
    assert m.accept_token(gpt2.encode(b"walk")[0])
    assert spell(gpt2, forced_tokens(m, gpt2)) == [b" done", b" now", b""]


def test_raw_bytes_and_partial_characters_force_nothing(gpt2):
    m = matcher(gpt2, GRAMMARS["name_age"][0])
    assert m.accept_bytes(b'{"name": "bob",')
    assert m.forced_bytes() and forced_tokens(m, gpt2) == []  # tokenization of raw bytes unknown
    m = matcher(gpt2, 'root ::= ("\u00e9" | "\u00e8") "!"')
    assert m.forced_bytes() == b"\xc3"
    assert forced_tokens(m, gpt2) == []


def test_terminated_and_free_positions(gpt2):
    m = matcher(gpt2, 'root ::= [a-z]+')
    assert forced_tokens(m, gpt2) == []
    assert m.accept_token(gpt2.encode(b"abc")[0]) and m.accept_token(gpt2.eos_token_ids[0])
    assert forced_tokens(m, gpt2) == []


def test_without_an_encoder_nothing_is_forced():
    tokens = [bytes([i]) for i in range(256)] + [b""]
    plain = corral.Vocabulary.from_bytes(tokens, eos_token_ids=[256])
    assert not plain.can_encode
    with pytest.raises(corral.UsageError, match="cannot encode"):
        plain.encode(b"x")
    c = corral.CompiledGrammar(corral.Grammar.from_ebnf('root ::= "abc" [0-9]'), plain)
    m = corral.Matcher(c)
    assert m.forced_bytes() == b"abc" and forced_tokens(m) == [] and m.forced_tokens() == []
    encoding = corral.Vocabulary.from_bytes(tokens, eos_token_ids=[256], encode=lambda b: list(b))
    assert encoding.can_encode and encoding.encode(b"ab") == [97, 98]
    # The native Matcher.forced_tokens() delegates to forced_tokens with the compiled vocabulary.
    m = corral.Matcher(corral.CompiledGrammar(corral.Grammar.from_ebnf('root ::= "abc" [0-9]'), encoding))
    assert m.forced_tokens() == forced_tokens(m) == [97, 98, 99]  # single bytes never merge


def test_encode_hook_matches_each_tokenizer(tok):
    text = " Hello, wörld! {\"a\": [1, 2.5e3, true]}\n\tdone  " if tok.leading_space else "Hello, wörld! {\"a\": [1, 2.5e3, true]}\n\tdone  "
    assert tok.vocab.can_encode
    ids = tok.vocab.encode(text.encode())
    assert ids == tok.encode(text.encode())
    assert b"".join(tok.vocab.token_bytes(i) for i in ids) == text.encode()
    assert tok.vocab.encode(text) == ids  # str works too
    assert tok.vocab.encode(b"") == []


def test_dummy_prefix_tokenizers_only_encode_text_starting_with_a_space():
    sp = tu.mistral()
    vocab = corral.Vocabulary.from_sentencepiece(sp)
    assert vocab.encode(b" hello world") == sp.encode("hello world")
    with pytest.raises(corral.TokenizerError, match="dummy-prefix"):
        vocab.encode(b"hello")
    m = corral.Matcher(corral.compile(corral.Grammar.from_ebnf(r'root ::= "{\"a\": " [0-9]+ "}"'), vocab))
    assert m.forced_bytes() == b'{"a": ' and forced_tokens(m, vocab) == []  # ambiguous start


def test_normalizing_tokenizer_is_refused():
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, normalizers, pre_tokenizers

    t = tokenizers.Tokenizer(models.WordLevel({"abc": 0, "ABC": 1, "</s>": 2}, unk_token="</s>"))
    t.normalizer = normalizers.Lowercase()
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    vocab = corral.Vocabulary.from_huggingface(t)
    assert vocab.encode(b"abc") == [0]
    with pytest.raises(corral.TokenizerError, match="normalizer"):
        vocab.encode(b"ABC")


def test_vocabulary_cache_does_not_leak_through_the_encoder():
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models

    t = tokenizers.Tokenizer(models.BPE({"a": 0, "b": 1, "ab": 2, "</s>": 3}, [("a", "b")]))
    v = corral.Vocabulary.from_huggingface(t)
    assert v.encode(b"abab") == [2, 2]
    assert corral.Vocabulary.from_huggingface(t) is v  # cached while alive
    ref_t, ref_v = weakref.ref(t), weakref.ref(v)
    del t, v
    gc.collect()
    assert ref_v() is None and ref_t() is None
