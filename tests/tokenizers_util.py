"""Loaders for the real tokenizers under the shared tokenizer data directory (see its SOURCES.md).

Every loader is cached (one object per process) and skips the calling test, with the reason,
when the data or the tokenizer library is missing. The directory is ``$CORRAL_TOKENIZER_DATA``,
else ``../shared/data/tokenizers`` relative to the repository.
"""

from __future__ import annotations

import base64
import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest

_REPO = Path(__file__).resolve().parent.parent

LLAMA3_PAT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN_PAT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"


def tokenizer_data_dir() -> Path | None:
    """The tokenizer data directory, or None when there is none."""
    candidates = []
    if os.environ.get("CORRAL_TOKENIZER_DATA"):
        candidates.append(Path(os.environ["CORRAL_TOKENIZER_DATA"]))
    candidates.append(_REPO.parent / "shared" / "data" / "tokenizers")
    for c in candidates:
        if (c / "SOURCES.md").is_file():
            return c
    return None


def data_path(*parts: str) -> Path:
    """Path of a file in the tokenizer data directory; skips the test when it is missing."""
    root = tokenizer_data_dir()
    if root is None:
        pytest.skip("tokenizer data directory not found (set CORRAL_TOKENIZER_DATA to the folder holding SOURCES.md)")
    p = root.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"tokenizer data file {p} is missing")
    return p


def _need(module: str) -> Any:
    return pytest.importorskip(module, reason=f"the {module} package is not installed")


# The loaders are cached, but a skip (an exception) is not: it is raised again on every call.


@functools.lru_cache(maxsize=None)
def _llama3(special_file: str) -> Any:
    tiktoken = _need("tiktoken")
    load = _need("tiktoken.load")
    ranks = load.load_tiktoken_bpe(str(data_path("llama3", "tokenizer.model")))
    specials = json.loads(data_path("llama3", special_file).read_text())["special_tokens"]
    return tiktoken.Encoding(name="llama3", pat_str=LLAMA3_PAT, mergeable_ranks=ranks, special_tokens=specials)


def llama3(special_file: str = "special_tokens.json") -> Any:
    """Llama 3 as a ``tiktoken.Encoding`` (128,256 ids)."""
    return _llama3(special_file)


@functools.lru_cache(maxsize=None)
def qwen() -> Any:
    """Qwen2.5 as a ``tiktoken.Encoding`` (151,665 ids)."""
    tiktoken = _need("tiktoken")
    load = _need("tiktoken.load")
    ranks = load.load_tiktoken_bpe(str(data_path("qwen2.5", "qwen.tiktoken")))
    specials = json.loads(data_path("qwen2.5", "special_tokens.json").read_text())["special_tokens"]
    return tiktoken.Encoding(name="qwen2.5", pat_str=QWEN_PAT, mergeable_ranks=ranks, special_tokens=specials)


@functools.lru_cache(maxsize=None)
def tekken() -> Any:
    """Mistral Tekken as a ``tiktoken.Encoding``: ids 0..999 special, BPE id = 1000 + rank (131,072 ids).

    Shifting every rank by 1000 keeps the merge order, so tiktoken's ids are the model's ids.
    """
    tiktoken = _need("tiktoken")
    d = json.loads(data_path("tekken", "tekken_240718.json").read_text())
    sp = json.loads(data_path("tekken", "special_tokens.json").read_text())
    n_special = sp["num_special_tokens"]
    n_bpe = sp["vocab_size"] - n_special
    ranks = {base64.b64decode(e["token_bytes"]): n_special + e["rank"] for e in d["vocab"][:n_bpe]}
    specials = {name: i for i, name, *_ in sp["special_tokens"]}
    return tiktoken.Encoding(name="tekken", pat_str=d["config"]["pattern"], mergeable_ranks=ranks, special_tokens=specials)


def tekken_special_ids() -> list[int]:
    sp = json.loads(data_path("tekken", "special_tokens.json").read_text())
    return [i for i, *_ in sp["special_tokens"]]


@functools.lru_cache(maxsize=None)
def gpt2() -> Any:
    """GPT-2 as a ``tokenizers.Tokenizer`` (50,257 ids)."""
    tokenizers = _need("tokenizers")
    return tokenizers.Tokenizer.from_file(str(data_path("gpt2", "tokenizer.json")))


@functools.lru_cache(maxsize=None)
def deepseek() -> Any:
    """DeepSeek-V3 as a ``tokenizers.Tokenizer`` (128,815 ids)."""
    tokenizers = _need("tokenizers")
    return tokenizers.Tokenizer.from_file(str(data_path("deepseek-v3", "tokenizer.json")))


@functools.lru_cache(maxsize=None)
def mistral(file: str = "tokenizer.model") -> Any:
    """A Mistral SentencePiece model as a ``SentencePieceProcessor`` (32,000 or 32,768 ids)."""
    spm = _need("sentencepiece")
    return spm.SentencePieceProcessor(model_file=str(data_path("mistral", file)))


@functools.lru_cache(maxsize=None)
def mistral_hf() -> Any:
    """The Mistral v1 SentencePiece model converted to a Hugging Face ``tokenizers.Tokenizer``.

    Built the way transformers' ``LlamaConverter`` does (BPE with byte fallback, Metaspace
    pre-tokenizer with prepend_scheme="first", decoder Replace ▁ / ByteFallback / Fuse / Strip),
    without protobuf: merges are every split of a piece into two pieces, ranked by the merged
    piece's id (SentencePiece BPE scores decrease with the id).
    """
    sp = mistral("tokenizer.model")
    tokenizers = _need("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers

    n = sp.get_piece_size()
    vocab = {sp.id_to_piece(i): i for i in range(n)}
    normal = [i for i in range(n) if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i))]
    merges = []
    for i in normal:
        piece = sp.id_to_piece(i)
        for k in range(1, len(piece)):
            a, b = piece[:k], piece[k:]
            if a in vocab and b in vocab:
                merges.append((i, vocab[a], vocab[b], a, b))
    merges.sort()
    tok = tokenizers.Tokenizer(
        models.BPE(vocab, [(a, b) for *_, a, b in merges], unk_token="<unk>", fuse_unk=True, byte_fallback=True)
    )
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    tok.add_special_tokens(
        [tokenizers.AddedToken(sp.id_to_piece(i), special=True, normalized=False) for i in range(n) if sp.is_control(i) or sp.is_unknown(i)]
    )
    return tok
