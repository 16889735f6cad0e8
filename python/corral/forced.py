"""Forced token runs: tokens an engine may append without a decode step.

Where a grammar leaves no choice (``{"name": "`` at the start of a JSON object with one
required key, ``", "age": `` between two fixed keys...), :meth:`corral.Matcher.forced_bytes`
is the longest byte string every valid continuation starts with. :func:`forced_tokens` turns
it into token ids *as the tokenizer would tokenize the final text*, so that the sequence the
model sees is one it could have produced itself. Naive byte forcing (greedy longest-match
tokens for the forced bytes) produces non-canonical tokenizations: e.g. GPT-2 writes
``"age": 42`` as ``":``, `` 42`` — the space belongs to the number — and forcing ``": `` as
``":``, `` `` would put the model off-distribution.

How (see :func:`forced_tokens` for the details): the forced bytes, after the last accepted
token, are encoded with the vocabulary's encoder (:meth:`corral.Vocabulary.encode`); the
encoding must start with that last token (otherwise the tokenizer would merge across the
boundary and nothing is forced). A token boundary is kept only where no token of the
vocabulary spans the two bytes around it (a *hard* boundary: every tokenization of any text
splits there, so what lies before cannot depend on what comes after). At the end of the forced
bytes, the boundary is hard when no byte the grammar allows next can merge with the last
forced byte; otherwise the tokens after the last hard boundary are left to the model.

Example::

    >>> import corral
    >>> vocab = corral.builtin_vocabulary()
    >>> g = corral.Grammar.from_ebnf(r'root ::= "{\\"name\\": \\"" [a-z]+ "\\", \\"age\\": " [0-9]+ "}"')
    >>> m = corral.Matcher(corral.compile(g, vocab))
    >>> [vocab.token_bytes(i) for i in forced_tokens(m, vocab)]
    [b'{"', b'name', b'":', b' "']
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np

from .errors import TokenizerError, UsageError
from .vocab import Vocabulary

__all__ = ["forced_tokens"]

#: How many accepted tokens :func:`forced_tokens` looks back for a context that starts with a
#: space (tokenizers with a dummy-prefix space).
_MAX_CONTEXT = 8


class _VocabInfo:
    """Per-vocabulary tables: which byte pairs occur inside a token, each token's first byte."""

    def __init__(self, vocab: Vocabulary) -> None:
        nv = vocab._native
        n = nv.num_tokens
        self.size = vocab.size
        self.words = (self.size + 31) // 32
        self.eos = frozenset(vocab.eos_token_ids)
        toks = [nv.token_bytes(i) for i in range(n)]
        lens = np.fromiter((len(t) for t in toks), dtype=np.int64, count=n)
        blob = np.frombuffer(b"".join(toks), dtype=np.uint8)
        # pair[a, b]: some token contains byte a immediately followed by byte b. Column 256
        # stands for "no byte" (EOS, special and padding ids): never a pair.
        pair = np.zeros(256 * 256, dtype=bool)
        if blob.size > 1:
            codes = blob[:-1].astype(np.int32) * 256 + blob[1:]
            inside = np.ones(blob.size - 1, dtype=bool)
            ends = np.cumsum(lens) - 1  # index of each token's last byte in the blob
            ends = ends[(lens > 0) & (ends < blob.size - 1)]
            inside[ends] = False  # a token's last byte and the next token's first byte
            pair[codes[inside]] = True
        self.pair = np.zeros((256, 257), dtype=bool)
        self.pair[:, :256] = pair.reshape(256, 256)
        first = np.full(self.words * 32, 256, dtype=np.int16)
        starts = np.cumsum(lens) - lens
        has = lens > 0
        first[np.flatnonzero(has)] = blob[starts[has]]
        self.first = first
        self._after: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()

    def merges_after(self, byte: int) -> np.ndarray:
        """Bitmask words (uint32) of the tokens whose first byte can follow ``byte`` inside a token."""
        hit = self._after.get(byte)
        if hit is None:
            bits = self.pair[byte][self.first]
            hit = np.packbits(bits, bitorder="little").view(np.uint32)
            with self._lock:
                self._after[byte] = hit
        return hit


_INFOS: "weakref.WeakKeyDictionary[Vocabulary, _VocabInfo]" = weakref.WeakKeyDictionary()
_INFOS_LOCK = threading.Lock()


def _info(vocab: Vocabulary) -> _VocabInfo:
    with _INFOS_LOCK:
        hit = _INFOS.get(vocab)
    if hit is not None:
        return hit
    info = _VocabInfo(vocab)
    with _INFOS_LOCK:
        return _INFOS.setdefault(vocab, info)


def _utf8_prefix(data: bytes) -> int:
    """Length of ``data`` without a trailing incomplete UTF-8 sequence."""
    n = len(data)
    for back in range(1, min(4, n) + 1):
        b = data[n - back]
        if b < 0x80:
            return n  # ASCII: complete
        if b >= 0xC0:  # a lead byte: complete iff its sequence fits
            need = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            return n if back >= need else n - back
    return n


def _fill(matcher: Any, words: int) -> np.ndarray:
    buf = np.empty(words, dtype=np.int32)
    matcher.fill_next_token_bitmask(buf)
    return buf.view(np.uint32)


def _lone_eos(mask: np.ndarray, info: _VocabInfo) -> int | None:
    """The EOS id when ``mask`` allows exactly one token and it is an EOS."""
    nz = np.flatnonzero(mask)
    if nz.size != 1:
        return None
    w = int(mask[nz[0]])
    if w & (w - 1):
        return None
    tok = int(nz[0]) * 32 + w.bit_length() - 1
    return tok if tok in info.eos else None


def forced_tokens(matcher: Any, vocab: Vocabulary | None = None) -> list[int]:
    """Tokens that can be appended to ``matcher`` without a decode step, tokenized canonically.

    The result is a prefix of the tokenizer's own encoding of the forced bytes
    (:meth:`corral.Matcher.forced_bytes`) after the last accepted token, cut at the last
    point where the tokenization cannot depend on what the model writes next; plus the EOS id
    when the grammar then allows nothing but that one EOS. Appending these tokens (with
    :meth:`~corral.Matcher.accept_token`) and letting the model continue gives, at the forced
    span, the same tokens as encoding the final text. ``matcher`` is not changed.

    The context is the last accepted token (for tokenizers with a dummy-prefix space, the last
    few tokens back to one that starts with a space): the encoding of context + forced bytes
    must start with exactly those tokens.

    Returns ``[]`` (the engine then simply decodes) when: the vocabulary has no encoder
    (:attr:`corral.Vocabulary.can_encode`); the matcher is terminated; the last entry was
    accepted as raw bytes (:meth:`~corral.Matcher.accept_bytes`: its tokenization is
    unknown); the tokenizer would merge the last accepted token with the forced bytes; or no
    hard token boundary exists in the forced run (see the module documentation). Forced
    runs that are ambiguous for the tokenizer are also skipped: SentencePiece-style dummy
    prefixes at the start of the output, bytes that are not complete UTF-8 characters.

    Assumes a tokenizer whose pre-tokenization decides each boundary from at most one
    character of look-ahead (true of the GPT-2, Llama 3, Qwen, DeepSeek, o200k and
    SentencePiece tokenizers).

    Args:
        matcher: a :class:`corral.Matcher`.
        vocab: the vocabulary to encode with; default ``matcher.compiled.vocab``. Pass it when
            the grammar was compiled through :func:`corral.compile`'s cache with another,
            equal vocabulary object that has no encoder.

    >>> import corral
    >>> vocab = corral.builtin_vocabulary()
    >>> g = corral.Grammar.from_ebnf(r'root ::= "{\\"name\\": \\"" [a-z]+ "\\", \\"age\\": " [0-9]+ "}"')
    >>> m = corral.Matcher(corral.compile(g, vocab))
    >>> all(m.accept_token(t) for t in vocab.encode(b'{"name": "bob",'))
    True
    >>> m.forced_bytes()
    b' "age": '
    >>> [vocab.token_bytes(i) for i in forced_tokens(m, vocab)]  # not b' ': GPT-2 writes b' 42'
    [b' "', b'age', b'":']
    >>> all(m.accept_token(t) for t in vocab.encode(b' "age": 42}'))
    True
    >>> forced_tokens(m, vocab) == vocab.eos_token_ids  # only EOS can follow
    True
    """
    if vocab is None:
        vocab = matcher.compiled.vocab
    if not isinstance(vocab, Vocabulary) or not vocab.can_encode or matcher.is_terminated():
        return []
    forced = matcher.forced_bytes()
    prev: int | None = None
    if matcher.num_accepted:
        last = matcher.last_tokens(1)[0]
        if last is None:
            return []
        prev = last
    info = _info(vocab)
    if not forced:
        if matcher.is_accepting():
            eos = _lone_eos(_fill(matcher, info.words), info)
            if eos is not None:
                return [eos]
        return []

    tb = vocab.token_bytes
    # The context: the last accepted token, or (tokenizers with a dummy-prefix space, which only
    # encode text starting with a space) the last few tokens back to one that starts with a space.
    ctx_ids: list[int] = [prev] if prev is not None else []
    ctx = tb(prev) if prev is not None else b""
    full = ctx + forced
    n = _utf8_prefix(full)
    if n <= len(ctx):
        return []
    try:
        ids = vocab.encode(full[:n])
    except UsageError:
        return []
    except TokenizerError:
        ids = None
        if prev is not None and not ctx.startswith(b" "):
            back = matcher.last_tokens(min(matcher.num_accepted, _MAX_CONTEXT))
            for k in range(2, len(back) + 1):
                if back[-k] is None:
                    break
                if tb(back[-k]).startswith(b" "):
                    ctx_ids = [t for t in back[-k:] if t is not None]
                    ctx = b"".join(tb(t) for t in ctx_ids)
                    full = ctx + forced
                    n = _utf8_prefix(full)
                    try:
                        ids = vocab.encode(full[:n])
                    except (TokenizerError, UsageError):
                        ids = None
                    break
    if ids is None:
        return []
    start = len(ctx_ids)
    if ids[:start] != ctx_ids:
        return []  # the tokenizer would merge the last token(s) with the forced bytes
    pair = info.pair
    pos = len(ctx)
    keep = 0
    reaches_end = False
    for j in range(start, len(ids)):
        pos += len(tb(ids[j]))
        if pos < len(full):
            if not pair[full[pos - 1], full[pos]]:
                keep = j + 1 - start  # a hard boundary: no token spans it
        else:
            reaches_end = True
    out = ids[start : start + keep]
    if reaches_end:
        # The last token ends with the forced bytes: keep it only if nothing the grammar
        # allows next can merge with the last forced byte.
        probe = matcher.copy()
        if probe.accept_bytes(forced):
            mask = _fill(probe, info.words)
            if not np.any(mask & info.merges_after(full[-1])):
                out = ids[start:]
                eos = _lone_eos(mask, info)
                if eos is not None:
                    out.append(eos)
    if out:
        ok = matcher.validate_tokens(out)
        out = out[:ok]
    return out
