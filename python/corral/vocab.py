"""Tokenizer vocabularies: token id -> exact bytes, built once per tokenizer.

Example::

    >>> import corral
    >>> v = corral.Vocabulary.from_bytes([b"a", b"b", b""], eos_token_ids=[2])
    >>> v.size, v.eos_token_ids
    (3, [2])
"""

from __future__ import annotations

from typing import Iterable, Sequence

from . import _native


class Vocabulary:
    """Maps token ids to the bytes they stand for, plus EOS and special ids.

    ``size`` is the model-side size (the logits width, padding included); ids from the
    tokenizer's length up to ``size`` are never allowed. Special tokens are never produced by
    a grammar, except EOS ids, which are allowed exactly when the grammar can end.
    Instances are immutable and safe to share across threads.
    """

    __slots__ = ("_native",)

    def __init__(self, native: _native.Vocabulary) -> None:
        self._native = native

    @classmethod
    def from_bytes(
        cls,
        tokens: Sequence[bytes | None],
        *,
        eos_token_ids: Iterable[int],
        special_token_ids: Iterable[int] = (),
        vocab_size: int | None = None,
    ) -> "Vocabulary":
        """Builds a vocabulary from each token's bytes (``None`` or ``b""``: never produced).

        >>> Vocabulary.from_bytes([b"x", b"<eos>"], eos_token_ids=[1], vocab_size=64).size
        64
        """
        toks = [bytes(t) if t is not None else b"" for t in tokens]
        return cls(_native.Vocabulary(toks, list(eos_token_ids), list(special_token_ids), vocab_size))

    @property
    def size(self) -> int:
        """Model-side vocabulary size (logits width)."""
        return self._native.size

    @property
    def num_tokens(self) -> int:
        """Number of tokens the tokenizer defines (``<= size``)."""
        return self._native.num_tokens

    @property
    def eos_token_ids(self) -> list[int]:
        """End-of-sequence ids (detected from the tokenizer when not given)."""
        return self._native.eos_token_ids

    @property
    def fingerprint(self) -> int:
        """Hash of everything that affects masks; used as a cache key."""
        return self._native.fingerprint

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes token ``token_id`` stands for (``b""`` for special and padding ids)."""
        return self._native.token_bytes(token_id)

    def is_special(self, token_id: int) -> bool:
        """Whether ``token_id`` is special (never produced by a grammar, EOS aside)."""
        return self._native.is_special(token_id)

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"Vocabulary(size={self.size}, num_tokens={self.num_tokens}, eos_token_ids={self.eos_token_ids})"
