"""Tokenizer vocabularies: token id -> exact bytes, built once per tokenizer.

A :class:`Vocabulary` tells the grammar engine which bytes every token id stands for. It is
built from a tokenizer with one of the adapters below and cached per tokenizer object:

* :meth:`Vocabulary.from_huggingface` -- ``tokenizers.Tokenizer`` or a transformers fast
  tokenizer (byte-level BPE like GPT-2/Llama 3/Qwen2/DeepSeek, SentencePiece-style
  Metaspace + byte-fallback like Llama 2/Mistral, plain vocabularies);
* :meth:`Vocabulary.from_tiktoken` -- ``tiktoken.Encoding`` (OpenAI, Llama 3, Qwen, Tekken);
* :meth:`Vocabulary.from_sentencepiece` -- a ``.model`` file or ``SentencePieceProcessor``;
* :meth:`Vocabulary.from_bytes` -- any tokenizer, given each token's bytes;
* :func:`builtin_vocabulary` -- the GPT-2 vocabulary shipped with corral (no downloads).

Vocabularies built by these adapters (and by :meth:`Vocabulary.from_bytes` given ``encode=``)
can also *encode* text with the tokenizer they came from (:meth:`Vocabulary.encode`,
:attr:`Vocabulary.can_encode`): :func:`corral.forced.forced_tokens` uses it to append forced
runs as the tokenizer itself would tokenize them.

Example::

    >>> import corral
    >>> v = corral.Vocabulary.from_bytes([b"a", b"b", b""], eos_token_ids=[2])
    >>> v.size, v.eos_token_ids
    (3, [2])
"""

from __future__ import annotations

import functools
import json
import operator
import os
import re
import threading
import weakref
from typing import Any, Callable, Iterable, Mapping, Sequence, Union

from . import _native
from .errors import TokenizerError, UsageError

__all__ = ["Vocabulary", "builtin_vocabulary", "KNOWN_EOS_TOKENS"]

#: Token strings recognised as end-of-sequence when ``eos_token_ids`` is not given. Every one
#: of them that the tokenizer defines (as a special/added/control token first, see the
#: adapters) becomes an EOS id.
KNOWN_EOS_TOKENS: tuple[str, ...] = (
    "</s>",  # Llama 2, Mistral, Tekken, T5...
    "<|endoftext|>",  # GPT-2, OpenAI tiktoken encodings, Qwen
    "<|end_of_text|>",  # Llama 3 base
    "<|eot_id|>",  # Llama 3 instruct (end of turn)
    "<|eom_id|>",  # Llama 3.1 (end of message, tool calls)
    "<|im_end|>",  # ChatML (Qwen, ...)
    "<\uff5cend\u2581of\u2581sentence\uff5c>",  # DeepSeek V2/V3/R1: <｜end▁of▁sentence｜>
    "<|end|>",  # Phi-3
    "<eos>",  # Gemma
    "<end_of_turn>",  # Gemma instruct
)

IdsArg = Union[int, Iterable[int], None]


# --------------------------------------------------------------------------------------------
# The vocabulary


class Vocabulary:
    """Maps token ids to the bytes they stand for, plus EOS and special ids.

    ``size`` is the model-side size (the logits width, padding included); ids from the
    tokenizer's length up to ``size`` are never allowed. Special tokens are never produced by
    a grammar, except EOS ids, which are allowed exactly when the grammar can end; the
    adapters give special tokens (EOS included) empty bytes.
    Instances are immutable and safe to share across threads.

    >>> from corral.vocab import builtin_vocabulary
    >>> v = builtin_vocabulary("gpt2")
    >>> v.size, v.eos_token_ids, v.token_bytes(15496), v.is_special(50256)
    (50257, [50256], b'Hello', True)
    """

    __slots__ = ("_native", "_encoder", "__weakref__")

    def __init__(self, native: _native.Vocabulary, encoder: "_Encoder | None" = None) -> None:
        self._native = native
        self._encoder = encoder

    # ---------------------------------------------------------------- constructors

    @classmethod
    def from_bytes(
        cls,
        tokens: Sequence[bytes | None],
        *,
        eos_token_ids: Iterable[int],
        special_token_ids: Iterable[int] = (),
        vocab_size: int | None = None,
        encode: Callable[[bytes], Sequence[int]] | None = None,
        token_names: Mapping[str, int] | None = None,
    ) -> "Vocabulary":
        """Builds a vocabulary from each token's bytes (``None`` or ``b""``: never produced).

        ``token_names`` names special tokens (``{"<|end|>": 2}``), so that grammars can name
        them (Lark's ``<|end|>``, structural tags' ``{"type": "token", "token": "<|end|>"}``).

        ``encode``, when given, is the tokenizer's encoder: ``encode(text: bytes)`` returns the
        ids the tokenizer gives ``text`` (no BOS/special tokens). It enables :meth:`encode`
        and forced-token runs (:func:`corral.forced.forced_tokens`).

        >>> Vocabulary.from_bytes([b"x", b"<eos>"], eos_token_ids=[1], vocab_size=64).size
        64
        >>> v = Vocabulary.from_bytes([b"a", b"b", b""], eos_token_ids=[2],
        ...                           encode=lambda data: [c - ord("a") for c in data])
        >>> v.can_encode, v.encode(b"abba")
        (True, [0, 1, 1, 0])
        """
        toks = [bytes(t) if t is not None else b"" for t in tokens]
        if encode is not None and not callable(encode):
            raise UsageError(f"encode must be a callable (bytes -> list of ids), got {type(encode).__name__}")
        names = sorted((str(k), int(v)) for k, v in (token_names or {}).items())
        native = _native.Vocabulary(toks, list(eos_token_ids), list(special_token_ids), vocab_size, names)
        return cls(native, _CallableEncoder(encode) if encode is not None else None)

    @classmethod
    def from_huggingface(
        cls,
        tokenizer: Any,
        *,
        eos_token_ids: IdsArg = None,
        special_token_ids: IdsArg = None,
        vocab_size: int | None = None,
    ) -> "Vocabulary":
        """Builds the vocabulary of a Hugging Face tokenizer (cached per tokenizer object).

        ``tokenizer`` is a ``tokenizers.Tokenizer`` or a transformers *fast* tokenizer (its
        ``backend_tokenizer`` is used). How token strings map to bytes is read from the
        tokenizer's JSON (``tokenizer.to_str()``), never guessed from the strings:

        * a ``ByteLevel`` decoder (or, without a decoder, pre-tokenizer), possibly inside a
          ``Sequence``: GPT-2's byte-to-unicode table is inverted (GPT-2, Llama 3, Qwen2,
          DeepSeek...). Like the ``tokenizers`` decoder, a token with a character outside
          the table stands for its UTF-8 text;
        * ``Metaspace`` / ``Replace`` ("▁" -> " ") decoders or pre-tokenizers: "▁" becomes a
          space; with ``byte_fallback`` (model flag or ``ByteFallback`` decoder) ``<0xNN>``
          tokens stand for the single byte ``NN`` (Llama 2, Mistral, Gemma...);
        * otherwise token strings are UTF-8 text.

        WordPiece, BPE with word suffixes/prefixes and CTC decoders are not supported (their
        tokens have no context-free bytes): use :meth:`from_bytes`.

        Added tokens marked ``special`` are special (empty bytes); other added tokens stand
        for the UTF-8 bytes of their content.

        Args:
            tokenizer: ``tokenizers.Tokenizer`` or transformers ``PreTrainedTokenizerFast``.
            eos_token_ids: end-of-sequence ids; when ``None``, the tokenizer's ``eos_token_id``
                (transformers) plus every :data:`KNOWN_EOS_TOKENS` entry among the added
                tokens (or, failing that, the model vocabulary).
            special_token_ids: extra ids to treat as special (empty bytes).
            vocab_size: the model's logits width when larger than the tokenizer (padding).

        Raises:
            TokenizerError: unsupported tokenizer, no EOS found, or ``vocab_size`` too small.

        >>> from tokenizers import Tokenizer, decoders, models, pre_tokenizers
        >>> tok = Tokenizer(models.BPE({"a": 0, "\u0120": 1, "\u0120a": 2}, [("\u0120", "a")]))
        >>> tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        >>> tok.decoder = decoders.ByteLevel()
        >>> tok.add_special_tokens(["</s>"])
        1
        >>> v = Vocabulary.from_huggingface(tok, vocab_size=8)
        >>> v.token_bytes(2), v.eos_token_ids, v.size, v.num_tokens
        (b' a', [3], 8, 4)
        >>> Vocabulary.from_huggingface(tok, vocab_size=8) is v
        True
        """
        key = ("huggingface", _ids_key(eos_token_ids), _ids_key(special_token_ids), _size_key(vocab_size))
        return _cached(tokenizer, key, lambda: _build_huggingface(cls, tokenizer, eos_token_ids, special_token_ids, vocab_size))

    @classmethod
    def from_tiktoken(
        cls,
        encoding: Any,
        *,
        eos_token_ids: IdsArg = None,
        special_token_ids: IdsArg = None,
        vocab_size: int | None = None,
    ) -> "Vocabulary":
        """Builds the vocabulary of a ``tiktoken.Encoding`` (cached per encoding object).

        Ordinary ids stand for their BPE bytes (``encoding._mergeable_ranks`` when present,
        else ``decode_single_token_bytes``); the encoding's special tokens are special (empty
        bytes); ids that are neither (holes, e.g. 100256 in ``cl100k_base``) get empty bytes.

        Args:
            encoding: a ``tiktoken.Encoding``.
            eos_token_ids: end-of-sequence ids; when ``None``, every :data:`KNOWN_EOS_TOKENS`
                entry among the encoding's special tokens.
            special_token_ids: extra ids to treat as special (empty bytes).
            vocab_size: the model's logits width when larger than the encoding (padding).

        Raises:
            TokenizerError: no EOS found, or ``vocab_size`` too small.

        >>> import tiktoken
        >>> enc = tiktoken.Encoding(name="bytes", pat_str=r"\\S+|\\s+",
        ...     mergeable_ranks={bytes([i]): i for i in range(256)},
        ...     special_tokens={"<|endoftext|>": 257})
        >>> v = Vocabulary.from_tiktoken(enc)
        >>> v.size, v.eos_token_ids, v.token_bytes(65), v.token_bytes(256), v.is_special(257)
        (258, [257], b'A', b'', True)
        """
        key = ("tiktoken", _ids_key(eos_token_ids), _ids_key(special_token_ids), _size_key(vocab_size))
        return _cached(encoding, key, lambda: _build_tiktoken(cls, encoding, eos_token_ids, special_token_ids, vocab_size))

    @classmethod
    def from_sentencepiece(
        cls,
        model_file_or_processor: Any,
        *,
        eos_token_ids: IdsArg = None,
        special_token_ids: IdsArg = None,
        vocab_size: int | None = None,
    ) -> "Vocabulary":
        """Builds the vocabulary of a SentencePiece model (cached per processor or file).

        Pieces stand for their text with "▁" replaced by a space; byte pieces ``<0xNN>`` stand
        for the byte ``NN``; control and unknown pieces (``<s>``, ``</s>``, ``<unk>``,
        ``[INST]``...) are special (empty bytes). Note that SentencePiece's encoder usually
        adds a dummy-prefix space: ``encode("x")`` gives the bytes of ``" x"``.

        Args:
            model_file_or_processor: path of a ``.model`` file (``str`` / ``os.PathLike``) or
                a ``sentencepiece.SentencePieceProcessor``.
            eos_token_ids: end-of-sequence ids; when ``None``, ``eos_id()`` plus every
                :data:`KNOWN_EOS_TOKENS` entry among the pieces.
            special_token_ids: extra ids to treat as special (empty bytes).
            vocab_size: the model's logits width when larger than the tokenizer (padding).

        Raises:
            TokenizerError: no EOS found, or ``vocab_size`` too small.

        >>> import io, sentencepiece as spm
        >>> model = io.BytesIO()
        >>> spm.SentencePieceTrainer.train(sentence_iterator=iter(["hello world"] * 10),
        ...     model_writer=model, vocab_size=280, model_type="bpe", byte_fallback=True,
        ...     minloglevel=2)
        >>> sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
        >>> v = Vocabulary.from_sentencepiece(sp)
        >>> v.eos_token_ids, v.token_bytes(3 + 0x41), b"".join(v.token_bytes(i) for i in sp.encode("hello"))
        ([2], b'A', b' hello')
        """
        if isinstance(model_file_or_processor, (str, os.PathLike)):
            path = os.path.realpath(os.fspath(model_file_or_processor))
            try:
                st = os.stat(path)
            except OSError as e:
                raise TokenizerError(f"cannot read SentencePiece model {path!r}: {e}") from e
            key = ("sentencepiece-file", path, st.st_mtime_ns, st.st_size, _ids_key(eos_token_ids),
                   _ids_key(special_token_ids), _size_key(vocab_size))
            with _CACHE_LOCK:
                hit = _PATH_CACHE.get(key)
            if hit is not None:
                return hit
            sp = _load_sentencepiece(path)
            vocab = _build_sentencepiece(cls, sp, eos_token_ids, special_token_ids, vocab_size)
            with _CACHE_LOCK:
                return _PATH_CACHE.setdefault(key, vocab)
        mkey = ("sentencepiece", _ids_key(eos_token_ids), _ids_key(special_token_ids), _size_key(vocab_size))
        return _cached(
            model_file_or_processor,
            mkey,
            lambda: _build_sentencepiece(cls, model_file_or_processor, eos_token_ids, special_token_ids, vocab_size),
        )

    # ---------------------------------------------------------------- accessors

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
        """End-of-sequence ids (detected from the tokenizer when not given), sorted."""
        return self._native.eos_token_ids

    @property
    def fingerprint(self) -> int:
        """Hash of everything that affects masks; used as a cache key."""
        return self._native.fingerprint

    @property
    def memory_bytes(self) -> int:
        """Heap bytes used by the token data and trie (the shared token-set cache excluded)."""
        return self._native.memory_bytes

    @property
    def cache_bytes(self) -> int:
        """Bytes held by the token-set cache shared by every grammar compiled against this vocabulary."""
        return self._native.cache_bytes

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes token ``token_id`` stands for (``b""`` for special and padding ids)."""
        return self._native.token_bytes(token_id)

    def is_special(self, token_id: int) -> bool:
        """Whether ``token_id`` is special: no text grammar produces it (EOS aside); a grammar
        that names it (Lark's ``<|name|>``, a structural tag's ``token`` format) allows it
        exactly where it names it."""
        return self._native.is_special(token_id)

    def token_id(self, name: str) -> int | None:
        """The id of the token a grammar names ``name``: an added or special token of that
        name, else the lowest-numbered token whose bytes are exactly ``name``; None if none.

        >>> v = Vocabulary.from_bytes([b"a", b"", b""], eos_token_ids=[2], special_token_ids=[1],
        ...                           token_names={"<|call|>": 1})
        >>> v.token_id("<|call|>"), v.token_id("a"), v.token_id("zz")
        (1, 0, None)
        """
        return self._native.token_id(name)

    @property
    def can_encode(self) -> bool:
        """Whether :meth:`encode` is available (the vocabulary knows its tokenizer's encoder).

        True for vocabularies from :meth:`from_huggingface`, :meth:`from_tiktoken`,
        :meth:`from_sentencepiece`, :meth:`from_bytes` with ``encode=`` and
        :func:`builtin_vocabulary` (whose encoder needs ``tiktoken`` or ``regex``).

        >>> Vocabulary.from_bytes([b"a", b""], eos_token_ids=[1]).can_encode
        False
        """
        enc = self._encoder
        return enc is not None and enc.available()

    def encode(self, text: bytes | str) -> list[int]:
        """The token ids the tokenizer gives ``text`` (no BOS or other special tokens).

        The ids always spell ``text`` exactly (their :meth:`token_bytes` concatenate to it),
        otherwise :class:`~corral.TokenizerError` is raised (e.g. a normalizer that rewrites
        the text). Tokenizers that add a dummy-prefix space (SentencePiece, Metaspace) can only
        encode text that starts with a space (the prefix is then taken from the text itself);
        other text raises :class:`~corral.TokenizerError`, since how a model would tokenize it
        in the middle of a document is ambiguous.

        Raises:
            UsageError: no encoder (:attr:`can_encode` is False).
            TokenizerError: the text cannot be encoded faithfully (see above; byte strings that
                are not UTF-8, for tokenizers that only encode text).

        >>> v = builtin_vocabulary()
        >>> v.encode(b'{"name": "Ada"}')
        [4895, 3672, 1298, 366, 2782, 64, 20662]
        """
        enc = self._encoder
        if enc is None or not enc.available():
            raise UsageError(
                "this vocabulary cannot encode text: it was built without its tokenizer's encoder "
                "(use Vocabulary.from_huggingface / from_tiktoken / from_sentencepiece, or "
                "Vocabulary.from_bytes(..., encode=callable))"
            )
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        if not data:
            return []
        ids = self._checked(enc, data)
        spelled = self._spell(ids)
        if spelled == data:
            return ids
        if spelled == b" " + data:  # a dummy-prefix space (SentencePiece, Metaspace)
            if data.startswith(b" "):
                ids = self._checked(enc, data[1:])
                if self._spell(ids) == data:
                    return ids
            else:
                raise TokenizerError(
                    f"the tokenizer adds a dummy-prefix space: {data[:40]!r} (which does not start "
                    "with a space) has no encoding that spells it exactly"
                )
        raise TokenizerError(
            f"the tokenizer's encoding of {data[:40]!r} spells {spelled[:40]!r}, not the text itself "
            "(a normalizer rewrites it, or the encoder and the vocabulary disagree)"
        )

    def _checked(self, enc: "_Encoder", data: bytes) -> list[int]:
        try:
            ids = [operator.index(i) for i in enc(data)]
        except (TokenizerError, UsageError):
            raise
        except Exception as e:  # noqa: BLE001 - any encoder failure is a tokenizer problem
            raise TokenizerError(f"the tokenizer failed to encode {data[:40]!r}: {type(e).__name__}: {e}") from e
        n = self._native.num_tokens
        for i in ids:
            if not 0 <= i < n or self._native.is_special(i):
                raise TokenizerError(f"the tokenizer encoded {data[:40]!r} with token id {i}, which is special or out of range")
        return ids

    def _spell(self, ids: Sequence[int]) -> bytes:
        tb = self._native.token_bytes
        return b"".join([tb(i) for i in ids])

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"Vocabulary(size={self.size}, num_tokens={self.num_tokens}, eos_token_ids={self.eos_token_ids})"


# --------------------------------------------------------------------------------------------
# Built-in vocabulary

_BUILTIN: dict[str, tuple[str, str]] = {
    # name -> (vocab.json inside corral/data, EOS token)
    "gpt2": ("gpt2/vocab.json", "<|endoftext|>"),
}


def builtin_vocabulary(name: str = "gpt2") -> Vocabulary:
    """A vocabulary shipped with corral, built without any tokenizer library or download.

    Only ``"gpt2"`` exists: OpenAI's GPT-2 byte-level BPE vocabulary (50,257 tokens, EOS
    ``<|endoftext|>`` = 50256; Modified MIT license in ``corral/data/gpt2/LICENSE``). Built
    once per process.

    >>> v = builtin_vocabulary()
    >>> v.num_tokens, v.eos_token_ids, v.token_bytes(995)
    (50257, [50256], b' world')
    """
    entry = _BUILTIN.get(name)
    if entry is None:
        raise TokenizerError(f"no built-in vocabulary named {name!r}; available: {', '.join(sorted(_BUILTIN))}")
    return _builtin(name)


@functools.lru_cache(maxsize=None)
def _builtin(name: str) -> Vocabulary:
    from importlib.resources import files

    rel, eos_name = _BUILTIN[name]
    res = files("corral") / "data"
    for part in rel.split("/"):
        res = res / part
    vocab: dict[str, int] = json.loads(res.read_text(encoding="utf-8"))
    n = max(vocab.values()) + 1
    strings: list[str | None] = [None] * n
    for s, i in vocab.items():
        strings[i] = s
    tokens = _byte_level_decode(strings)
    eos = vocab[eos_name]
    v = _finish(Vocabulary, tokens, {eos}, [eos], None, None, f"built-in vocabulary {name!r}", {eos_name: eos})
    # GPT-2's merge ranks are its token ids (merge i made token 256 + i), so rank-ordered
    # byte-pair merging with the ids as ranks is GPT-2's own BPE.
    v._encoder = _RankBpeEncoder(v._native, _GPT2_PATTERN)
    return v


# --------------------------------------------------------------------------------------------
# Cache: once per tokenizer object and keyword arguments

_CACHE_LOCK = threading.RLock()
_WEAK_CACHE: "weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], weakref.ref[Vocabulary]]]" = weakref.WeakKeyDictionary()
# Objects that cannot be weakly referenced (or hashed): keyed by id(), kept alive so that the
# id is never reused by another object.
_STRONG_CACHE: dict[int, tuple[Any, dict[tuple[Any, ...], Vocabulary]]] = {}
_PATH_CACHE: dict[tuple[Any, ...], Vocabulary] = {}


def _cached(obj: Any, key: tuple[Any, ...], build: Callable[[], Vocabulary]) -> Vocabulary:
    # Weakly referenceable tokenizers: the entry holds the vocabulary weakly too, because a
    # vocabulary holds its tokenizer (its encoder): a strong value would keep the weak key
    # alive forever. The vocabulary is reused as long as someone (a compiled grammar...)
    # holds it.
    with _CACHE_LOCK:
        hit: Vocabulary | None = None
        try:
            wcache = _WEAK_CACHE.get(obj)
            weak = True
            if wcache is not None and key in wcache:
                hit = wcache[key]()
        except TypeError:  # not weakref-able or not hashable
            weak = False
            entry = _STRONG_CACHE.get(id(obj))
            scache = entry[1] if entry is not None and entry[0] is obj else None
            if scache is not None:
                hit = scache.get(key)
        if hit is not None:
            return hit
    vocab = build()  # outside the lock: other tokenizers build concurrently
    with _CACHE_LOCK:
        if weak:
            wper = _WEAK_CACHE.get(obj)
            if wper is None:
                wper = _WEAK_CACHE[obj] = {}
            ref = wper.get(key)
            old = ref() if ref is not None else None
            if old is not None:
                return old  # a concurrent build of the same key: first one wins
            wper[key] = weakref.ref(vocab)
            return vocab
        entry = _STRONG_CACHE.get(id(obj))
        if entry is None or entry[0] is not obj:
            entry = _STRONG_CACHE[id(obj)] = (obj, {})
        return entry[1].setdefault(key, vocab)  # a concurrent build of the same key: first one wins


def _ids_key(ids: IdsArg) -> tuple[int, ...] | None:
    if ids is None:
        return None
    return tuple(sorted(set(_as_ids(ids, "token ids"))))


def _size_key(vocab_size: int | None) -> int | None:
    if vocab_size is None:
        return None
    try:
        if isinstance(vocab_size, bool):
            raise TypeError
        size = operator.index(vocab_size)
    except TypeError:
        raise TokenizerError(f"vocab_size must be an int or None, got {vocab_size!r}") from None
    if size <= 0:
        raise TokenizerError(f"vocab_size must be positive, got {size}")
    return size


def _as_ids(ids: int | Iterable[int], what: str) -> list[int]:
    """A list of non-negative ints from one int or an iterable of ints (numpy/torch ints too)."""

    def one(i: Any) -> int:
        if isinstance(i, bool):
            raise TokenizerError(f"{what} must be ints, got {i!r}")
        try:
            v = operator.index(i)
        except TypeError:
            raise TokenizerError(f"{what} must be ints, got {i!r}") from None
        if v < 0:
            raise TokenizerError(f"{what} must be non-negative, got {v}")
        return v

    if isinstance(ids, bool) or hasattr(ids, "__index__") and not hasattr(ids, "__len__"):
        return [one(ids)]  # a single id (int, numpy integer)
    try:
        items = list(ids)  # type: ignore[arg-type]
    except TypeError:
        raise TokenizerError(f"{what} must be an int or an iterable of ints, got {ids!r}") from None
    return [one(i) for i in items]


# --------------------------------------------------------------------------------------------
# Shared finishing step


def _finish(
    cls: type,
    tokens: list[bytes],
    specials: set[int],
    eos: Iterable[int],
    extra_special: IdsArg,
    vocab_size: int | None,
    what: str,
    names: Mapping[str, int] | None = None,
) -> Vocabulary:
    """Blanks special/EOS bytes, checks ``vocab_size`` and builds the native vocabulary.

    ``names`` are the added and special tokens' names, by which grammars name tokens
    (Lark's ``<|name|>``, structural tags' ``token`` formats)."""
    n = len(tokens)
    eos_ids = sorted(set(eos))
    special = set(specials)
    if extra_special is not None:
        special.update(_as_ids(extra_special, "special_token_ids"))
    size = _size_key(vocab_size)
    if size is not None and size < n:
        raise TokenizerError(
            f"vocab_size={size} is smaller than the {n} token ids of the {what}; vocab_size is the "
            f"model's logits width (e.g. model.config.vocab_size) and must cover every token id "
            f"(pass vocab_size=None to use the tokenizer's own size, {n})"
        )
    limit = size if size is not None else n
    for i in eos_ids:
        if i >= limit:
            raise TokenizerError(f"EOS token id {i} is out of range for the {what} (size {limit})")
    for i in special:
        if i >= n:
            raise TokenizerError(f"special token id {i} is out of range for the {what} ({n} tokens)")
    for i in special.union(eos_ids):
        if i < n:
            tokens[i] = b""
    named = sorted((k, v) for k, v in (names or {}).items() if 0 <= v < n)
    vocab: Vocabulary = cls(_native.Vocabulary(tokens, eos_ids, sorted(special), size, named))
    return vocab


def _detect_eos(names: Sequence[dict[str, int]], what: str, extra: Iterable[int] = ()) -> list[int]:
    """EOS ids: ``extra`` plus the known EOS names of the first name table that has any."""
    found: set[int] = set(extra)
    for table in names:
        hits = {table[name] for name in KNOWN_EOS_TOKENS if name in table}
        if hits:
            found |= hits
            break
    if not found:
        raise TokenizerError(
            f"cannot detect the end-of-sequence token of the {what}: it defines none of "
            f"{', '.join(KNOWN_EOS_TOKENS)}; pass eos_token_ids=[...] explicitly "
            f"(e.g. the model's generation_config.eos_token_id)"
        )
    return sorted(found)


# --------------------------------------------------------------------------------------------
# Byte-level BPE (GPT-2's byte-to-unicode table)


def _gpt2_bytes_to_unicode() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), ord("\xff") + 1))
    cs = list(bs)
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


_BYTE_TO_UNICODE = _gpt2_bytes_to_unicode()
# str.translate table: byte-level character -> the latin-1 character of its byte.
_UNICODE_TO_LATIN1 = {ord(c): chr(b) for b, c in _BYTE_TO_UNICODE.items()}
_NOT_BYTE_LEVEL = re.compile("[^" + re.escape("".join(sorted(_BYTE_TO_UNICODE.values()))) + "]")


def _byte_level_decode(strings: Sequence[str | None]) -> list[bytes]:
    """Inverts the byte-to-unicode table per token; like the ``tokenizers`` ByteLevel decoder,
    a token with a character outside the table stands for its UTF-8 text."""
    table = _UNICODE_TO_LATIN1
    outside = _NOT_BYTE_LEVEL.search
    out: list[bytes] = []
    append = out.append
    for s in strings:
        if not s:
            append(b"")
        elif outside(s) is None:
            append(s.translate(table).encode("latin-1"))
        else:
            append(s.encode("utf-8"))
    return out


_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")


# --------------------------------------------------------------------------------------------
# Hugging Face tokenizers


def _flatten(component: Any) -> list[dict[str, Any]]:
    """The components of a (possibly nested) ``Sequence`` normalizer/pre-tokenizer/decoder."""
    if not isinstance(component, dict):
        return []
    if component.get("type") == "Sequence":
        out: list[dict[str, Any]] = []
        for key in ("decoders", "pretokenizers", "normalizers", "processors"):
            for sub in component.get(key) or ():
                out.extend(_flatten(sub))
        return out
    return [component]


_UNSUPPORTED_DECODERS = {"WordPiece", "BPEDecoder", "CTC"}


def _hf_token_bytes(spec: dict[str, Any]) -> tuple[list[bytes], set[int], dict[str, int], dict[str, int]]:
    """(token bytes, special ids, added content -> id, model vocab string -> id) of a tokenizer JSON."""
    model = spec.get("model") or {}
    mtype = model.get("type")
    decs = _flatten(spec.get("decoder"))
    dtypes = {d.get("type") for d in decs}
    bad = dtypes & _UNSUPPORTED_DECODERS
    if bad or mtype == "WordPiece" or model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        raise TokenizerError(
            f"unsupported Hugging Face tokenizer (model {mtype}, decoders {sorted(d for d in dtypes if d)}): "
            "its tokens do not stand for fixed bytes; build the vocabulary with Vocabulary.from_bytes"
        )
    pres = _flatten(spec.get("pre_tokenizer"))
    norms = _flatten(spec.get("normalizer"))

    raw = model.get("vocab")
    if mtype == "Unigram" and isinstance(raw, list):
        vocab = {entry[0]: i for i, entry in enumerate(raw)}
    elif isinstance(raw, dict):
        vocab = raw
    else:
        raise TokenizerError(f"unsupported Hugging Face tokenizer model {mtype!r}: no vocabulary in its JSON")
    added = spec.get("added_tokens") or []
    n = max([i for i in vocab.values()] + [a["id"] for a in added] + [-1]) + 1
    if n == 0:
        raise TokenizerError("the Hugging Face tokenizer has no tokens")
    strings: list[str | None] = [None] * n
    for s, i in vocab.items():
        strings[i] = s

    byte_level = "ByteLevel" in dtypes or (not decs and any(p.get("type") == "ByteLevel" for p in pres))
    if byte_level:
        tokens = _byte_level_decode(strings)
    else:
        replacements: list[tuple[str, str]] = []
        for d in decs:
            if d.get("type") == "Replace":
                pat = d.get("pattern") or {}
                if "String" not in pat:
                    raise TokenizerError(f"unsupported Hugging Face decoder: Replace with pattern {pat!r}")
                replacements.append((pat["String"], d.get("content", "")))
            elif d.get("type") == "Metaspace":
                replacements.append((d.get("replacement", "\u2581"), " "))
        if not decs:
            for p in pres:
                if p.get("type") == "Metaspace":
                    replacements.append((p.get("replacement", "\u2581"), " "))
            for nz in norms:
                if nz.get("type") == "Replace" and (nz.get("pattern") or {}).get("String") == " ":
                    replacements.append((nz.get("content", ""), " "))
        replacements = [(a, b) for a, b in replacements if a and a != b]
        byte_fallback = bool(model.get("byte_fallback")) or "ByteFallback" in dtypes
        fallback = _BYTE_FALLBACK.fullmatch
        tokens = []
        for s in strings:
            if not s:
                tokens.append(b"")
                continue
            if byte_fallback and len(s) == 6:
                m = fallback(s)
                if m is not None:
                    tokens.append(bytes((int(m.group(1), 16),)))
                    continue
            for a, b in replacements:
                s = s.replace(a, b)
            tokens.append(s.encode("utf-8"))

    specials: set[int] = set()
    added_names: dict[str, int] = {}
    for a in added:
        i, content = a["id"], a["content"]
        added_names.setdefault(content, i)
        if a.get("special"):
            specials.add(i)
            tokens[i] = b""
        else:
            tokens[i] = content.encode("utf-8")
    return tokens, specials, added_names, vocab


def _build_huggingface(cls: type, tokenizer: Any, eos: IdsArg, extra_special: IdsArg, vocab_size: int | None) -> Vocabulary:
    backend = tokenizer
    declared_eos: list[int] = []
    if not hasattr(backend, "to_str"):
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None or not hasattr(backend, "to_str"):
            raise TokenizerError(
                f"{type(tokenizer).__name__} is not a Hugging Face fast tokenizer (no backend_tokenizer); "
                "load it with use_fast=True, or use Vocabulary.from_sentencepiece / from_tiktoken / from_bytes"
            )
        tid = getattr(tokenizer, "eos_token_id", None)
        if isinstance(tid, int) and not isinstance(tid, bool):
            declared_eos.append(tid)
    try:
        spec = json.loads(backend.to_str())
    except Exception as e:  # noqa: BLE001 - any failure means the JSON is unusable
        raise TokenizerError(f"cannot read the Hugging Face tokenizer's JSON: {e}") from e
    tokens, specials, added_names, model_vocab = _hf_token_bytes(spec)
    what = "Hugging Face tokenizer"
    if eos is None:
        eos_ids = _detect_eos([added_names, model_vocab], what, declared_eos)
    else:
        eos_ids = _as_ids(eos, "eos_token_ids")
    v = _finish(cls, tokens, specials, eos_ids, extra_special, vocab_size, what, added_names)
    if hasattr(backend, "encode"):
        v._encoder = _HuggingFaceEncoder(backend)
    return v


# --------------------------------------------------------------------------------------------
# tiktoken


def _build_tiktoken(cls: type, encoding: Any, eos: IdsArg, extra_special: IdsArg, vocab_size: int | None) -> Vocabulary:
    specials_by_name = getattr(encoding, "_special_tokens", None)
    if not isinstance(specials_by_name, dict):
        names = getattr(encoding, "special_tokens_set", None) or ()
        specials_by_name = {s: encoding.encode_single_token(s) for s in names}
    ranks = getattr(encoding, "_mergeable_ranks", None)
    n = int(getattr(encoding, "n_vocab", 0) or 0)
    if isinstance(ranks, dict) and ranks:
        n = max(n, max(ranks.values()) + 1)
    if specials_by_name:
        n = max(n, max(specials_by_name.values()) + 1)
    if n == 0:
        raise TokenizerError("the tiktoken encoding has no tokens")
    tokens: list[bytes] = [b""] * n
    special_ids = set(specials_by_name.values())
    if isinstance(ranks, dict) and ranks:
        for b, r in ranks.items():
            tokens[r] = b
    else:
        for i in range(n):
            if i in special_ids:
                continue
            try:
                tokens[i] = bytes(encoding.decode_single_token_bytes(i))
            except (KeyError, ValueError):
                pass  # a hole in the id space
    what = f"tiktoken encoding {getattr(encoding, 'name', '?')!r}"
    eos_ids = _detect_eos([specials_by_name], what) if eos is None else _as_ids(eos, "eos_token_ids")
    v = _finish(cls, tokens, special_ids, eos_ids, extra_special, vocab_size, what, specials_by_name)
    if callable(getattr(encoding, "encode_ordinary", None)):
        v._encoder = _TiktokenEncoder(encoding)
    return v


# --------------------------------------------------------------------------------------------
# SentencePiece


def _load_sentencepiece(path: str) -> Any:
    try:
        import sentencepiece
    except ImportError as e:
        raise TokenizerError("Vocabulary.from_sentencepiece(path) needs the sentencepiece package: pip install sentencepiece") from e
    try:
        return sentencepiece.SentencePieceProcessor(model_file=path)
    except Exception as e:  # noqa: BLE001
        raise TokenizerError(f"cannot load SentencePiece model {path!r}: {e}") from e


def _build_sentencepiece(cls: type, sp: Any, eos: IdsArg, extra_special: IdsArg, vocab_size: int | None) -> Vocabulary:
    n = int(sp.get_piece_size())
    if n == 0:
        raise TokenizerError("the SentencePiece model has no pieces")
    tokens: list[bytes] = []
    specials: set[int] = set()
    names: dict[str, int] = {}
    fallback = _BYTE_FALLBACK.fullmatch
    for i in range(n):
        piece = sp.id_to_piece(i)
        names.setdefault(piece, i)
        if sp.is_control(i) or sp.is_unknown(i):
            specials.add(i)
            tokens.append(b"")
        elif sp.is_byte(i):
            m = fallback(piece)
            if m is None:
                raise TokenizerError(f"SentencePiece byte piece {i} is {piece!r}, not <0xNN>")
            tokens.append(bytes((int(m.group(1), 16),)))
        else:
            tokens.append(piece.replace("\u2581", " ").encode("utf-8"))
    what = "SentencePiece model"
    if eos is None:
        eid = int(sp.eos_id())
        eos_ids = _detect_eos([names], what, [eid] if 0 <= eid < n else [])
    else:
        eos_ids = _as_ids(eos, "eos_token_ids")
    special_names = {p: i for p, i in names.items() if i in specials}
    v = _finish(cls, tokens, specials, eos_ids, extra_special, vocab_size, what, special_names)
    if callable(getattr(sp, "encode", None)):
        v._encoder = _SentencePieceEncoder(sp)
    return v


# --------------------------------------------------------------------------------------------
# Encoders (the hook behind Vocabulary.encode)

#: GPT-2's pre-tokenization pattern.
_GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


class _Encoder:
    """bytes -> token ids with the tokenizer a vocabulary came from (see Vocabulary.encode)."""

    def available(self) -> bool:
        return True

    def __call__(self, data: bytes) -> Sequence[int]:  # pragma: no cover - abstract
        raise NotImplementedError


def _utf8(data: bytes, who: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TokenizerError(f"{who} encodes text only, and {data[:40]!r} is not UTF-8 (byte {e.start})") from None


class _CallableEncoder(_Encoder):
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[bytes], Sequence[int]]) -> None:
        self.fn = fn

    def __call__(self, data: bytes) -> Sequence[int]:
        return self.fn(data)


class _HuggingFaceEncoder(_Encoder):
    """``tokenizers.Tokenizer.encode(text, add_special_tokens=False)``."""

    __slots__ = ("tok",)

    def __init__(self, tok: Any) -> None:
        self.tok = tok

    def __call__(self, data: bytes) -> Sequence[int]:
        ids: Sequence[int] = self.tok.encode(_utf8(data, "a Hugging Face tokenizer"), add_special_tokens=False).ids
        return ids


class _TiktokenEncoder(_Encoder):
    """``encoding.encode_ordinary`` (``_encode_bytes`` for bytes that are not UTF-8)."""

    __slots__ = ("enc",)

    def __init__(self, enc: Any) -> None:
        self.enc = enc

    def __call__(self, data: bytes) -> Sequence[int]:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raw = getattr(self.enc, "_encode_bytes", None)
            if raw is None:
                _utf8(data, "this tiktoken encoding")  # raises
                raise AssertionError("unreachable")
            out: Sequence[int] = raw(data)
            return out
        ids: Sequence[int] = self.enc.encode_ordinary(text)
        return ids


class _SentencePieceEncoder(_Encoder):
    """``SentencePieceProcessor.encode`` (no BOS/EOS); its dummy prefix is handled by
    :meth:`Vocabulary.encode`."""

    __slots__ = ("sp",)

    def __init__(self, sp: Any) -> None:
        self.sp = sp

    def __call__(self, data: bytes) -> Sequence[int]:
        ids: Sequence[int] = self.sp.encode(_utf8(data, "a SentencePiece model"))
        return ids


class _RankBpeEncoder(_Encoder):
    """Byte-level BPE whose merge ranks are the token ids (GPT-2, tiktoken-style files), with a
    regex pre-tokenizer. Uses ``tiktoken`` when installed, else pure Python with ``regex``;
    built lazily on first use."""

    def __init__(self, native: _native.Vocabulary, pattern: str) -> None:
        self._native = native
        self._pattern = pattern
        self._impl: Callable[[bytes], Sequence[int]] | None = None
        self._lock = threading.Lock()
        self._missing = False

    def available(self) -> bool:
        if self._impl is not None:
            return True
        if self._missing:
            return False
        import importlib.util

        ok = any(importlib.util.find_spec(m) is not None for m in ("tiktoken", "regex"))
        self._missing = not ok
        return ok

    def _ranks(self) -> dict[bytes, int]:
        nv = self._native
        ranks: dict[bytes, int] = {}
        for i in range(nv.num_tokens):
            b = nv.token_bytes(i)
            if b and not nv.is_special(i):
                ranks.setdefault(b, i)
        return ranks

    def _build(self) -> Callable[[bytes], Sequence[int]]:
        ranks = self._ranks()
        try:
            import tiktoken
        except ImportError:
            pass
        else:
            enc = tiktoken.Encoding(name="corral-rank-bpe", pat_str=self._pattern, mergeable_ranks=ranks, special_tokens={})
            return _TiktokenEncoder(enc)
        try:
            import regex
        except ImportError:
            raise TokenizerError("encoding with the built-in vocabulary needs the tiktoken or regex package") from None
        pat = regex.compile(self._pattern)

        @functools.lru_cache(maxsize=65536)
        def bpe(piece: bytes) -> tuple[int, ...]:
            hit = ranks.get(piece)
            if hit is not None:
                return (hit,)
            parts = [piece[i : i + 1] for i in range(len(piece))]
            while len(parts) > 1:
                best, at = None, -1
                for i in range(len(parts) - 1):
                    r = ranks.get(parts[i] + parts[i + 1])
                    if r is not None and (best is None or r < best):
                        best, at = r, i
                if best is None:
                    break
                parts[at : at + 2] = [parts[at] + parts[at + 1]]
            return tuple(ranks[p] for p in parts)

        def encode(data: bytes) -> list[int]:
            out: list[int] = []
            for m in pat.finditer(_utf8(data, "the built-in GPT-2 encoder")):
                out.extend(bpe(m.group().encode("utf-8")))
            return out

        return encode

    def __call__(self, data: bytes) -> Sequence[int]:
        impl = self._impl
        if impl is None:
            with self._lock:
                if self._impl is None:
                    self._impl = self._build()
                impl = self._impl
        return impl(data)
