"""The tokenizers the benchmark runs on, loaded the same way in the parent and in every worker.

Each tokenizer is loaded from the real files under ``../shared/data/tokenizers`` (see
``SOURCES.md`` there) -- no downloads. Every engine builds its own token table from the same
tokenizer object (``Tok.obj``) or from the same list of token bytes (``Tok.token_bytes``):

* ``llama3``  -- Llama 3, tiktoken, 128,256 ids (headline);
* ``qwen2.5`` -- Qwen2.5, tiktoken, 151,665 ids (the tokenizer's size; models pad the logits
  to 151,936 / 152,064, which only widens the mask);
* ``gpt2``    -- GPT-2, Hugging Face ``tokenizers`` ``tokenizer.json``, 50,257 ids.

Special tokens stand for no bytes (``b""``) everywhere; the EOS ids are the model's end tokens.
This module must not import corral or any engine: it runs in every worker.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable

DATA = os.environ.get("CORRAL_BENCH_DATA", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.pardir, "shared", "data"))
TOKDIR = os.path.join(DATA, "tokenizers")

LLAMA3_PAT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN_PAT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

#: name -> (EOS ids; the first one is the one whose bit is checked at the end of a walk)
EOS = {
    "llama3": [128009, 128001, 128008],  # <|eot_id|>, <|end_of_text|>, <|eom_id|>
    "qwen2.5": [151645, 151643],  # <|im_end|>, <|endoftext|>
    "gpt2": [50256],  # <|endoftext|>
}
NAMES = tuple(EOS)


@dataclass
class Tok:
    name: str
    kind: str  # "tiktoken" | "hf"
    obj: Any  # tiktoken.Encoding | tokenizers.Tokenizer
    vocab_size: int  # logits width = mask width
    token_bytes: list[bytes]  # id -> bytes; b"" for special tokens and holes
    special_ids: list[int]
    eos_ids: list[int]
    encode: Callable[[str], list[int]] = field(repr=False)

    @property
    def eos(self) -> int:
        return self.eos_ids[0]

    def decode(self, ids: list[int]) -> bytes:
        tb = self.token_bytes
        return b"".join(tb[i] for i in ids)


def _tiktoken(name: str, model_file: str, pat: str) -> Tok:
    import tiktoken
    import tiktoken.load

    d = os.path.join(TOKDIR, name)
    ranks = tiktoken.load.load_tiktoken_bpe(os.path.join(d, model_file))
    with open(os.path.join(d, "special_tokens.json"), encoding="utf-8") as f:
        specials = json.load(f)["special_tokens"]
    enc = tiktoken.Encoding(name=name, pat_str=pat, mergeable_ranks=ranks, special_tokens=specials)
    n = max(max(ranks.values()), max(specials.values())) + 1
    tb = [b""] * n
    for b, r in ranks.items():
        tb[r] = b
    return Tok(name, "tiktoken", enc, n, tb, sorted(specials.values()), list(EOS[name]), enc.encode_ordinary)


def _bytes_to_unicode() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def _hf_gpt2() -> Tok:
    import tokenizers

    path = os.path.join(TOKDIR, "gpt2", "tokenizer.json")
    tok = tokenizers.Tokenizer.from_file(path)
    spec = json.loads(tok.to_str())
    vocab: dict[str, int] = spec["model"]["vocab"]
    dec = {c: b for b, c in _bytes_to_unicode().items()}
    n = max(vocab.values()) + 1
    specials = []
    for a in spec.get("added_tokens", []):
        n = max(n, a["id"] + 1)
    tb = [b""] * n
    for s, i in vocab.items():
        tb[i] = bytes(dec[c] for c in s)
    for a in spec.get("added_tokens", []):
        if a.get("special"):
            specials.append(a["id"])
            tb[a["id"]] = b""
        else:
            tb[a["id"]] = a["content"].encode("utf-8")

    def encode(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=False).ids

    return Tok("gpt2", "hf", tok, n, tb, sorted(specials), list(EOS["gpt2"]), encode)


def load(name: str) -> Tok:
    if name == "llama3":
        return _tiktoken("llama3", "tokenizer.model", LLAMA3_PAT)
    if name == "qwen2.5":
        return _tiktoken("qwen2.5", "qwen.tiktoken", QWEN_PAT)
    if name == "gpt2":
        return _hf_gpt2()
    raise SystemExit(f"unknown tokenizer {name!r}; known: {', '.join(NAMES)}")
