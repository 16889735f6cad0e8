"""Tokenizer adapters of corral.Vocabulary, checked against real tokenizers (see tokenizers_util)."""

from __future__ import annotations

import doctest
import gc
import json
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import pytest

import corral
from corral import TokenizerError, Vocabulary
from corral.vocab import KNOWN_EOS_TOKENS, builtin_vocabulary

import tokenizers_util as tu

TEXTS = [
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    '{"name": "Ada", "age": 36, "tags": ["x", "y"], "nested": {"ok": true, "v": null, "pi": -3.14e+2}}',
    '[{"id":1,"text":"line\\nbreak \\"quoted\\" \\u00e9"},{}]',
    "日本語のテキストと中文文本，한국어도 있습니다。",
    "emoji: 😀🎉👍🏽 👨\u200d👩\u200d👧 🇫🇷",
    "Accents: café, naïve, Ångström, São Paulo, Đà Nẵng, Zürich, ñandú",
    "combining: e\u0301 a\u0308, fullwidth: ＡＢＣ１２３, nbsp:\u00a0end",
    "tabs\tand\t\ttabs\nnewlines\n\n\nmultiple    spaces   and  \r\n CRLF",
    "  leading and trailing spaces  ",
    "\n\nstarts with newlines",
    "\tstarts with a tab",
    "def f(x):\n    return {'a': x ** 2}  # comment\n",
]


def _hf_encode(tok: Any, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False).ids


def _tiktoken_encode(enc: Any, text: str) -> list[int]:
    return enc.encode(text)


def _sp_encode(sp: Any, text: str) -> list[int]:
    return sp.encode(text)


def _sp_prefix(text: str) -> bytes:
    # SentencePiece's normalizer adds the dummy prefix "▁" before every input.
    return b" "


def _hf_metaspace_prefix(text: str) -> bytes:
    # tokenizers' Metaspace(prepend_scheme="first") prepends "▁" unless the text already
    # starts with it (i.e. with a space).
    return b"" if text.startswith(" ") else b" "


def _no_prefix(text: str) -> bytes:
    return b""


@dataclass(frozen=True)
class Case:
    load: Callable[[], Any]
    build: Callable[..., Vocabulary]
    encode: Callable[[Any, str], list[int]]
    prefix: Callable[[str], bytes]
    size: int
    eos: list[int]


CASES: dict[str, Case] = {
    "llama3": Case(tu.llama3, Vocabulary.from_tiktoken, _tiktoken_encode, _no_prefix, 128_256, [128001, 128008, 128009]),
    "qwen2.5": Case(tu.qwen, Vocabulary.from_tiktoken, _tiktoken_encode, _no_prefix, 151_665, [151643, 151645]),
    "tekken": Case(tu.tekken, Vocabulary.from_tiktoken, _tiktoken_encode, _no_prefix, 131_072, [2]),
    "gpt2": Case(tu.gpt2, Vocabulary.from_huggingface, _hf_encode, _no_prefix, 50_257, [50256]),
    "deepseek-v3": Case(tu.deepseek, Vocabulary.from_huggingface, _hf_encode, _no_prefix, 128_815, [1]),
    "mistral": Case(tu.mistral, Vocabulary.from_sentencepiece, _sp_encode, _sp_prefix, 32_000, [2]),
    "mistral-v3": Case(lambda: tu.mistral("tokenizer.v3.model"), Vocabulary.from_sentencepiece, _sp_encode, _sp_prefix, 32_768, [2]),
    "mistral-hf": Case(tu.mistral_hf, Vocabulary.from_huggingface, _hf_encode, _hf_metaspace_prefix, 32_000, [2]),
}


def _case(name: str) -> tuple[Case, Any, Vocabulary]:
    case = CASES[name]
    tok = case.load()
    return case, tok, case.build(tok)


def _expected_special_ids(name: str, tok: Any) -> set[int]:
    if name == "llama3":
        return set(json.loads(tu.data_path("llama3", "special_tokens.json").read_text())["special_tokens"].values())
    if name == "qwen2.5":
        return set(json.loads(tu.data_path("qwen2.5", "special_tokens.json").read_text())["special_tokens"].values())
    if name == "tekken":
        return set(range(1000))
    if name == "gpt2":
        return {50256}
    if name == "deepseek-v3":
        spec = json.loads(tu.data_path("deepseek-v3", "tokenizer.json").read_text())
        return {a["id"] for a in spec["added_tokens"] if a["special"]}
    if name in ("mistral", "mistral-hf"):
        return {0, 1, 2}
    if name == "mistral-v3":
        return {i for i in range(tok.get_piece_size()) if tok.is_control(i) or tok.is_unknown(i)}
    raise AssertionError(name)


# --------------------------------------------------------------------------------------------
# Every real tokenizer


@pytest.mark.parametrize("name", list(CASES))
def test_size_and_eos(name: str) -> None:
    case, _, vocab = _case(name)
    assert vocab.size == case.size
    assert vocab.num_tokens == case.size
    assert len(vocab) == case.size
    assert vocab.eos_token_ids == case.eos
    for i in case.eos:
        assert vocab.is_special(i) and vocab.token_bytes(i) == b""


@pytest.mark.parametrize("name", list(CASES))
def test_special_tokens_have_no_bytes(name: str) -> None:
    _, tok, vocab = _case(name)
    special = _expected_special_ids(name, tok)
    assert special, name
    for i in range(vocab.size):
        if i in special:
            assert vocab.is_special(i), (name, i)
            assert vocab.token_bytes(i) == b"", (name, i)
        else:
            # none of these tokenizers has holes: every ordinary id stands for some bytes
            assert not vocab.is_special(i), (name, i)
            assert vocab.token_bytes(i) != b"", (name, i)


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
@pytest.mark.parametrize("name", list(CASES))
def test_round_trip(name: str, text: str) -> None:
    case, tok, vocab = _case(name)
    ids = case.encode(tok, text)
    got = b"".join(vocab.token_bytes(i) for i in ids)
    assert got == case.prefix(text) + text.encode("utf-8")


def test_sentencepiece_byte_fallback_and_control_pieces() -> None:
    _, sp, vocab = _case("mistral")
    for b in range(256):
        assert sp.id_to_piece(3 + b) == f"<0x{b:02X}>"
        assert vocab.token_bytes(3 + b) == bytes([b])
    assert vocab.token_bytes(sp.piece_to_id("\u2581the")) == b" the"
    _, sp3, vocab3 = _case("mistral-v3")
    inst = sp3.piece_to_id("[INST]")
    assert sp3.is_control(inst) and vocab3.is_special(inst) and vocab3.token_bytes(inst) == b""


def test_sentencepiece_from_path_is_cached() -> None:
    pytest.importorskip("sentencepiece")
    path = tu.data_path("mistral", "tokenizer.model")
    a = Vocabulary.from_sentencepiece(path)
    assert Vocabulary.from_sentencepiece(str(path)) is a
    assert a.fingerprint == CASES["mistral"].build(tu.mistral()).fingerprint


def test_hf_sentencepiece_style_matches_sentencepiece() -> None:
    # Metaspace + byte fallback read from the tokenizer JSON gives the same bytes as the
    # SentencePiece model it was converted from.
    hf = Vocabulary.from_huggingface(tu.mistral_hf())
    sp = Vocabulary.from_sentencepiece(tu.mistral())
    assert hf.token_bytes(13) == b"\n"  # <0x0A>
    assert hf.fingerprint == sp.fingerprint


def test_deepseek_added_tokens() -> None:
    _, tok, vocab = _case("deepseek-v3")
    think = tok.token_to_id("<think>")
    assert think is not None
    assert vocab.token_bytes(think) == b"<think>" and not vocab.is_special(think)
    # a non-special added token whose content is outside the byte-level alphabet keeps its UTF-8
    hole = tok.token_to_id("<\uff5cfim\u2581hole\uff5c>")
    assert vocab.token_bytes(hole) == "<\uff5cfim\u2581hole\uff5c>".encode() and not vocab.is_special(hole)
    bos = tok.token_to_id("<\uff5cbegin\u2581of\u2581sentence\uff5c>")
    assert bos == 0 and vocab.is_special(0) and vocab.token_bytes(0) == b""


# --------------------------------------------------------------------------------------------
# vocab_size, explicit EOS, caching


def test_vocab_size_pads() -> None:
    enc = tu.qwen()
    vocab = Vocabulary.from_tiktoken(enc, vocab_size=152_064)
    assert vocab.size == 152_064 and len(vocab) == 152_064
    assert vocab.num_tokens == 151_665
    assert vocab.token_bytes(152_000) == b""
    assert vocab.is_special(152_000)  # padding is never allowed
    assert vocab.eos_token_ids == [151643, 151645]
    assert vocab.token_bytes(9707) == b"Hello"
    ds = Vocabulary.from_huggingface(tu.deepseek(), vocab_size=129_280)
    assert (ds.size, ds.num_tokens, ds.token_bytes(129_279)) == (129_280, 128_815, b"")


def test_vocab_size_too_small_raises() -> None:
    with pytest.raises(TokenizerError, match=r"vocab_size=151000 is smaller than the 151665 token ids"):
        Vocabulary.from_tiktoken(tu.qwen(), vocab_size=151_000)
    with pytest.raises(TokenizerError, match="vocab_size"):
        Vocabulary.from_sentencepiece(tu.mistral(), vocab_size=31_999)
    with pytest.raises(TokenizerError, match="vocab_size"):
        Vocabulary.from_huggingface(tu.gpt2(), vocab_size=50_000)
    with pytest.raises(TokenizerError, match="positive"):
        Vocabulary.from_huggingface(tu.gpt2(), vocab_size=0)


def test_explicit_eos_overrides_detection() -> None:
    enc = tu.llama3()
    vocab = Vocabulary.from_tiktoken(enc, eos_token_ids=[128009])
    assert vocab.eos_token_ids == [128009]
    assert Vocabulary.from_tiktoken(enc, eos_token_ids=128009) is vocab  # an int is accepted
    assert Vocabulary.from_tiktoken(enc).eos_token_ids == [128001, 128008, 128009]
    # an ordinary token given as EOS becomes special, without bytes
    sp = Vocabulary.from_sentencepiece(tu.mistral(), eos_token_ids=[13])
    assert sp.eos_token_ids == [13] and sp.is_special(13) and sp.token_bytes(13) == b""
    # EOS may lie in the padding
    padded = Vocabulary.from_huggingface(tu.gpt2(), eos_token_ids=[50256, 50300], vocab_size=50304)
    assert padded.eos_token_ids == [50256, 50300]


def test_extra_special_token_ids() -> None:
    vocab = Vocabulary.from_huggingface(tu.gpt2(), special_token_ids=[198])  # "\n"
    assert vocab.is_special(198) and vocab.token_bytes(198) == b""
    assert not Vocabulary.from_huggingface(tu.gpt2()).is_special(198)


def test_cache_returns_same_instance() -> None:
    for name, case in CASES.items():
        tok = case.load()
        assert case.build(tok) is case.build(tok), name
    enc = tu.qwen()
    a = Vocabulary.from_tiktoken(enc, vocab_size=151_936)
    assert Vocabulary.from_tiktoken(enc, vocab_size=151_936) is a
    assert Vocabulary.from_tiktoken(enc) is not a
    assert Vocabulary.from_tiktoken(enc, eos_token_ids=[151645, 151643]) is Vocabulary.from_tiktoken(enc, eos_token_ids=(151643, 151645))


def test_cache_is_per_object_and_weak() -> None:
    tiktoken = pytest.importorskip("tiktoken")

    def make() -> Any:
        return tiktoken.Encoding(
            name="bytes", pat_str=r"\S+|\s+", mergeable_ranks={bytes([i]): i for i in range(256)}, special_tokens={"</s>": 256}
        )

    e1, e2 = make(), make()
    v1, v2 = Vocabulary.from_tiktoken(e1), Vocabulary.from_tiktoken(e2)
    assert v1 is not v2 and v1.fingerprint == v2.fingerprint
    ref = weakref.ref(v1)
    del v1, e1
    gc.collect()
    assert ref() is None  # the cache does not keep the tokenizer (or its vocabulary) alive


class _SlotsEncoding:
    """tiktoken-like object that is neither weakref-able nor hashable, without _mergeable_ranks."""

    __slots__ = ("name", "n_vocab", "_special_tokens")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self) -> None:
        self.name = "slots"
        self.n_vocab = 301
        self._special_tokens = {"<|endoftext|>": 300}

    def decode_single_token_bytes(self, i: int) -> bytes:
        if i < 256:
            return bytes([i])
        raise KeyError(i)


def test_cache_fallback_for_objects_without_weakref_and_holes() -> None:
    enc = _SlotsEncoding()
    with pytest.raises(TypeError):
        weakref.ref(enc)
    vocab = Vocabulary.from_tiktoken(enc)
    assert Vocabulary.from_tiktoken(enc) is vocab
    assert (vocab.size, vocab.eos_token_ids) == (301, [300])
    assert vocab.token_bytes(65) == b"A"
    assert vocab.token_bytes(256) == b"" and vocab.token_bytes(299) == b""  # holes
    assert not vocab.is_special(280)


def test_missing_eos_raises() -> None:
    tiktoken = pytest.importorskip("tiktoken")
    enc = tiktoken.Encoding(name="noeos", pat_str=r"\S+|\s+", mergeable_ranks={bytes([i]): i for i in range(256)}, special_tokens={})
    with pytest.raises(TokenizerError, match="eos_token_ids"):
        Vocabulary.from_tiktoken(enc)
    assert Vocabulary.from_tiktoken(enc, eos_token_ids=[10]).eos_token_ids == [10]
    assert "</s>" in KNOWN_EOS_TOKENS


@pytest.mark.parametrize("bad", [True, -1, "2", [1.5], None.__class__])
def test_bad_id_arguments_raise(bad: Any) -> None:
    with pytest.raises(TokenizerError):
        Vocabulary.from_huggingface(tu.gpt2(), eos_token_ids=bad)


def test_numpy_ids_accepted() -> None:
    np = pytest.importorskip("numpy")
    vocab = Vocabulary.from_huggingface(tu.gpt2(), eos_token_ids=np.array([50256]), vocab_size=np.int64(50304))
    assert vocab.eos_token_ids == [50256] and vocab.size == 50304


# --------------------------------------------------------------------------------------------
# Hugging Face specifics (small in-memory tokenizers)


def test_hf_byte_level_non_special_added_token_keeps_utf8() -> None:
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers

    tok = tokenizers.Tokenizer(models.BPE({"a": 0, "\u0120": 1, "\u0120a": 2, "\u00c3": 3, "\u00a9": 4}, [("\u0120", "a")]))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(), pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.Sequence([decoders.ByteLevel()])  # nested: still byte-level
    tok.add_tokens(["caf\u00e9!"])
    tok.add_special_tokens(["<|im_end|>"])
    vocab = Vocabulary.from_huggingface(tok)
    assert vocab.token_bytes(2) == b" a"
    assert vocab.token_bytes(3) == b"\xc3" and vocab.token_bytes(4) == b"\xa9"  # bytes, not UTF-8 of "Ã"
    assert vocab.token_bytes(5) == "caf\u00e9!".encode() and not vocab.is_special(5)
    assert vocab.eos_token_ids == [6] and vocab.token_bytes(6) == b""


def test_hf_unsupported_wordpiece_raises() -> None:
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models

    tok = tokenizers.Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2, "</s>": 3}, unk_token="[UNK]"))
    tok.decoder = decoders.WordPiece()
    with pytest.raises(TokenizerError, match="from_bytes"):
        Vocabulary.from_huggingface(tok)


def test_hf_rejects_non_tokenizer() -> None:
    with pytest.raises(TokenizerError, match="fast tokenizer"):
        Vocabulary.from_huggingface(object())


def test_transformers_fast_tokenizer() -> None:
    transformers = pytest.importorskip("transformers")
    import tokenizers

    backend = tokenizers.Tokenizer.from_file(str(tu.data_path("gpt2", "tokenizer.json")))  # a fresh one: transformers may modify it
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>")
    vocab = Vocabulary.from_huggingface(tok)
    assert Vocabulary.from_huggingface(tok) is vocab
    assert vocab.eos_token_ids == [50256]
    assert vocab.fingerprint == Vocabulary.from_huggingface(backend).fingerprint


# --------------------------------------------------------------------------------------------
# Built-in GPT-2 vocabulary


def test_builtin_gpt2() -> None:
    vocab = builtin_vocabulary()
    assert builtin_vocabulary("gpt2") is vocab
    assert (vocab.size, vocab.eos_token_ids) == (50_257, [50256])
    assert vocab.token_bytes(15496) == b"Hello" and vocab.token_bytes(11) == b"," and vocab.token_bytes(995) == b" world"
    assert vocab.token_bytes(198) == b"\n" and vocab.token_bytes(50256) == b""
    with pytest.raises(TokenizerError, match="available: gpt2"):
        builtin_vocabulary("nope")


def test_builtin_data_is_packaged() -> None:
    from importlib.resources import files

    data = files("corral") / "data" / "gpt2"
    assert (data / "vocab.json").is_file()
    assert "OpenAI" in (data / "LICENSE").read_text(encoding="utf-8")


def test_builtin_matches_tokenizers_gpt2() -> None:
    assert builtin_vocabulary().fingerprint == Vocabulary.from_huggingface(tu.gpt2()).fingerprint


# --------------------------------------------------------------------------------------------
# Speed and docs


def test_build_is_fast() -> None:
    enc = tu.qwen()
    t0 = time.perf_counter()
    Vocabulary.from_tiktoken(enc, vocab_size=151_937)  # a key no other test uses: a real build
    assert time.perf_counter() - t0 < 3.0


def test_docstring_examples() -> None:
    for mod in ("tokenizers", "tiktoken", "sentencepiece"):
        pytest.importorskip(mod)
    result = doctest.testmod(corral.vocab, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
