"""SGLang integration: corral as an SGLang grammar backend (``--grammar-backend corral``).

Written against SGLang's grammar-backend contract as of commit
``99e1c51617bf5de1f06ba286cb0d3a160b26eac2`` of ``sgl-project/sglang``
(``python/sglang/srt/constrained/base_grammar_backend.py``, the first versions with
``register_grammar_backend``) and its ``xgrammar_backend.py`` (commit ``65cf1ed0``), whose
semantics this backend mirrors (see ``docs/sglang.md``).

* :func:`register` -- ``register_grammar_backend("corral", init_func)`` in SGLang's registry;
  start the server with ``--grammar-backend corral`` in the same process (or a launcher that
  imports this module first).
* :class:`CorralGrammarBackend` -- the backend: ``dispatch_json`` / ``dispatch_regex`` /
  ``dispatch_ebnf`` compile (and cache, per backend and in :func:`corral.compile`'s cache)
  corral grammars against the tokenizer's vocabulary.
* :class:`CorralGrammar` -- one request's grammar object: ``accept_token``, ``rollback``,
  ``is_terminated``, the vocab-mask methods, ``copy`` and jump-forward backed by corral's
  forced bytes (:meth:`corral.Matcher.forced_bytes`) and canonical forced tokens.

This module imports without SGLang: the classes then subclass local stand-ins with the same
method names, and :func:`register` raises :class:`corral.UsageError` naming SGLang. Masks are
always filled through :func:`corral.fill_next_token_bitmask_batch` (GIL released);
:meth:`CorralGrammar.fill_vocab_masks` fills many requests' rows in one parallel call.

Example (no SGLang needed; the GPT-2 vocabulary stands in for the server's tokenizer)::

    >>> import torch, corral
    >>> from corral.sglang import CorralGrammarBackend
    >>> backend = CorralGrammarBackend(corral.builtin_vocabulary())
    >>> g = backend.dispatch_regex(r"(yes|no)")
    >>> mask = g.allocate_vocab_mask(vocab_size=50257, batch_size=1, device="cpu")
    >>> g.fill_vocab_mask(mask, 0)
    >>> logits = torch.zeros(1, 50257)
    >>> g.apply_vocab_mask(logits, g.move_vocab_mask(mask, "cpu"))
    >>> int(torch.isfinite(logits).sum()) > 0
    True
"""

from __future__ import annotations

import logging
import threading
from typing import Any, List, Optional, Sequence, Tuple

from . import _native
from .bitmask import allocate_token_bitmask
from .compiler import compile as _compile
from .errors import CorralError, UsageError
from .fill_guard import fill_or_end
from .forced import forced_tokens as _forced_tokens
from .grammars import builtin_grammar
from .logits import apply_token_bitmask_inplace
from .vocab import Vocabulary

__all__ = ["CorralGrammar", "CorralGrammarBackend", "register", "init_backend", "SGLANG_AVAILABLE"]

logger = logging.getLogger(__name__)

try:  # subclass SGLang's own base classes when it is installed
    from sglang.srt.constrained import base_grammar_backend as _sgl_base  # type: ignore

    _BaseObject = _sgl_base.BaseGrammarObject
    _BaseBackend = _sgl_base.BaseGrammarBackend
    SGLANG_AVAILABLE = True
except Exception:  # noqa: BLE001 - SGLang missing or broken: local stand-ins, same method names
    _sgl_base = None
    SGLANG_AVAILABLE = False

    class _BaseObject:  # type: ignore[no-redef]
        """Stand-in for ``sglang.srt.constrained.base_grammar_backend.BaseGrammarObject``."""

        def __init__(self) -> None:
            self._finished = False
            self.grammar_stats = None
            self.current_token = None

        @property
        def finished(self) -> bool:
            return self._finished

        @finished.setter
        def finished(self, finished: bool) -> None:
            self._finished = finished

    class _BaseBackend:  # type: ignore[no-redef]
        """Stand-in for ``BaseGrammarBackend`` (same cache protocol)."""

        def __init__(self) -> None:
            self.cache: dict = {}
            self._executor: Any = None

        @property
        def executor(self) -> Any:
            if self._executor is None:
                from concurrent.futures import ThreadPoolExecutor

                self._executor = ThreadPoolExecutor()
            return self._executor

        def _init_value_dispatch(self, key: Tuple[str, str]) -> Any:
            key_type, key_string = key
            fn = getattr(self, f"dispatch_{key_type}", None)
            if fn is None:
                raise ValueError(f"Invalid key_type: {key_type}={key_string}")
            return fn(key_string)

        def get_cached_or_future_value(self, key: Tuple[str, str]) -> Any:
            value = self.cache.get(key)
            if value:
                return value.copy(), True
            return self.executor.submit(self._init_value_dispatch, key), False

        def set_cache(self, key: Tuple[str, str], value: Any) -> None:
            self.cache[key] = value

        def reset(self) -> None:
            self.cache.clear()


def _invalid() -> Any:
    """SGLang's marker for a grammar that failed to compile (None without SGLang)."""
    return getattr(_sgl_base, "INVALID_GRAMMAR_OBJ", None) if _sgl_base is not None else None


def _require_sglang(what: str) -> Any:
    if _sgl_base is None:
        raise UsageError(
            f"{what} needs SGLang (the `sglang` package), which is not importable here: "
            "pip install sglang (corral's SGLang classes work without it for tests and replays)"
        )
    return _sgl_base


class CorralGrammar(_BaseObject):  # type: ignore[misc,valid-type]
    """One request's grammar state (a :class:`corral.Matcher`), as SGLang's scheduler drives it.

    Mirrors SGLang's xgrammar grammar object: ``accept_token`` is a no-op once the grammar is
    terminated (EOS accepted) and raises ``ValueError`` for a token the grammar rejects (a
    mask was not applied); ``rollback(k)`` undoes ``k`` tokens (termination included);
    ``copy()`` copies the state (SGLang copies freshly compiled grammars into its cache).
    """

    def __init__(self, matcher: _native.Matcher, vocab: Vocabulary, key: Tuple[str, str] = ("", "")) -> None:
        super().__init__()
        self.matcher = matcher
        self.vocab = vocab
        self.key = key
        self.accepted_tokens: List[int] = []
        #: A fill ran past the grammar's ``max_fill_ms``: its row allowed only EOS, and the
        #: grammar reports itself terminated from then on (see :mod:`corral.fill_guard`).
        self.ended = False

    def _end(self) -> None:
        self.ended = True

    # ------------------------------------------------------------------ state

    def accept_token(self, token: int) -> None:
        if self.ended or self.matcher.is_terminated():
            return
        self.current_token = token
        if not self.matcher.accept_token(int(token)):
            text = b"".join(self.vocab.token_bytes(t) for t in self.accepted_tokens[-20:])
            raise ValueError(
                f"corral: token {token} is not allowed by the {self.key[0] or 'grammar'} constraint after "
                f"{text[-60:]!r} (was the vocab mask applied before sampling?)"
            )
        self.accepted_tokens.append(int(token))

    def rollback(self, k: int) -> None:
        if k <= 0:
            return
        if k > len(self.accepted_tokens):
            raise UsageError(f"cannot roll back {k} tokens: only {len(self.accepted_tokens)} were accepted")
        self.matcher.rollback(k)
        del self.accepted_tokens[-k:]

    def is_terminated(self) -> bool:
        return self.ended or self.matcher.is_terminated()

    def copy(self) -> "CorralGrammar":
        g = CorralGrammar(self.matcher.copy(), self.vocab, self.key)
        g.accepted_tokens = list(self.accepted_tokens)
        g.ended = self.ended
        return g

    # ------------------------------------------------------------------ masks

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> Any:
        """An all-allowed int32 CPU bitmask ``(batch_size, ceil(vocab_size/32))`` (pinned when
        CUDA is available, so :meth:`move_vocab_mask` is asynchronous)."""
        return allocate_token_bitmask(batch_size, vocab_size, pin_memory=str(device).startswith("cuda"))

    def fill_vocab_mask(self, vocab_mask: Any, idx: int) -> None:
        """Fills row ``idx``; a fill past the grammar's ``max_fill_ms`` ends the request (an
        EOS-only row, the grammar terminated; :mod:`corral.fill_guard`) instead of raising in
        the scheduler."""
        fill_or_end([self.matcher], vocab_mask, [int(idx)], lambda _: self._end())

    @staticmethod
    def fill_vocab_masks(grammars: Sequence[Optional["CorralGrammar"]], vocab_mask: Any, indices: Optional[Sequence[int]] = None) -> None:
        """Fills many rows in one parallel call (row ``indices[i]``, default ``i``, for
        ``grammars[i]``); ``None``, finished and terminated grammars are skipped (their rows
        are left as allocated: all allowed). What SGLang's per-request ``fill_vocab_mask``
        loop does, on corral's thread pool; fills past ``max_fill_ms`` end their requests as
        in :meth:`fill_vocab_mask`."""
        rows = list(range(len(grammars))) if indices is None else [int(i) for i in indices]
        gs, ms, idx = [], [], []
        for g, r in zip(grammars, rows):
            if g is not None and not g.finished and not g.is_terminated():
                gs.append(g)
                ms.append(g.matcher)
                idx.append(r)
        if ms:
            fill_or_end(ms, vocab_mask, idx, lambda i: gs[i]._end())

    @staticmethod
    def move_vocab_mask(vocab_mask: Any, device: Any) -> Any:
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: Any, vocab_mask: Any) -> None:
        """Sets the logits of disallowed tokens to -inf in place (Triton on CUDA, Rust on CPU);
        columns past the vocabulary (padded models) are masked too."""
        apply_token_bitmask_inplace(logits, vocab_mask, check_empty=False)

    # ------------------------------------------------------------------ jump forward

    def try_jump_forward(self, tokenizer: Any) -> Optional[Tuple[List[int], str]]:
        """``(forced token ids, forced text)`` when the grammar forces the next bytes, else
        None. The ids are the tokenizer's canonical tokenization (:func:`corral.forced_tokens`);
        the text is the forced bytes cut to whole UTF-8 characters (SGLang retokenizes it)."""
        if self.matcher.is_terminated():
            return None
        data = self.matcher.forced_bytes()
        text = _utf8_prefix(data)
        if not text:
            return None
        try:
            ids = _forced_tokens(self.matcher, self.vocab)
        except CorralError:
            ids = []
        ids = [t for t in ids if t not in self.vocab.eos_token_ids]
        return ids, text

    def jump_forward_str_state(self, helper: Tuple[List[int], str]) -> Tuple[str, int]:
        _, text = helper
        return text, -1

    def jump_and_retokenize(self, old_output_ids: List[int], new_output_ids: List[int], next_state: int) -> None:
        """SGLang retokenized the output after appending the jump string: roll back to the
        common prefix of the old and new ids, then accept the new ids."""
        k = 0
        for old, new in zip(old_output_ids, new_output_ids):
            if old != new:
                break
            k += 1
        # Only the ids this grammar accepted can be rolled back (the prompt-side ids of
        # old_output_ids, if any, were never accepted).
        n_back = len(old_output_ids) - k
        if n_back > 0:
            self.rollback(min(n_back, len(self.accepted_tokens)))
        for t in new_output_ids[k:]:
            self.accept_token(t)

    def __repr__(self) -> str:
        return f"CorralGrammar(key={self.key!r}, accepted={len(self.accepted_tokens)}, terminated={self.is_terminated()})"


def _utf8_prefix(data: bytes) -> str:
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            return data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return ""


class CorralGrammarBackend(_BaseBackend):  # type: ignore[misc,valid-type]
    """SGLang grammar backend compiling json / regex / ebnf requests with corral.

    Args:
        tokenizer: the server's Hugging Face tokenizer (or a :class:`corral.Vocabulary`).
        vocab_size: the model's logits width (padded vocabularies); default the tokenizer's.
        eos_token_ids: the model's EOS ids (SGLang passes a set); default the tokenizer's.
        any_whitespace: JSON Schema requests allow flexible whitespace (``False``: compact
            JSON, SGLang's ``--constrained-json-disable-any-whitespace``).

    ``dispatch_json("$$ANY$$")`` (``response_format={"type": "json_object"}``) uses corral's
    built-in JSON grammar; other JSON requests need :meth:`corral.Grammar.from_json_schema`.
    A grammar that fails to compile is logged and returned as SGLang's
    ``INVALID_GRAMMAR_OBJ`` (the request is aborted), as the xgrammar backend does.
    """

    def __init__(self, tokenizer: Any, vocab_size: Optional[int] = None, eos_token_ids: Any = None, *, any_whitespace: bool = True) -> None:
        super().__init__()
        self.any_whitespace = any_whitespace
        if isinstance(tokenizer, Vocabulary):
            self.vocab = tokenizer
        else:
            eos = sorted(int(i) for i in eos_token_ids) if eos_token_ids else None
            self.vocab = Vocabulary.from_huggingface(tokenizer, eos_token_ids=eos, vocab_size=vocab_size)
        self.vocab_size = vocab_size or self.vocab.size
        self._compiled: dict = {}
        self._lock = threading.Lock()

    def _grammar(self, key_type: str, key_string: str, build: Any) -> Any:
        key = (key_type, key_string)
        with self._lock:
            compiled = self._compiled.get(key)
        if compiled is None:
            try:
                compiled = _compile(build(key_string), self.vocab)
            except CorralError as e:
                logger.error("corral: invalid %s grammar %r: %s", key_type, key_string[:200], e)
                inv = _invalid()
                if inv is None:
                    raise
                return inv
            with self._lock:
                self._compiled[key] = compiled
        return CorralGrammar(_native.Matcher(compiled), self.vocab, key)

    def dispatch_json(self, key_string: str) -> Any:
        if key_string == "$$ANY$$":
            return self._grammar("json", key_string, lambda _s: builtin_grammar("json"))
        from_schema = getattr(_native.Grammar, "from_json_schema", None)
        if from_schema is None:
            raise UsageError(
                "corral's SGLang backend cannot serve JSON Schema requests: this corral build has no "
                "corral.Grammar.from_json_schema (JSON Schema support); use regex/ebnf or json_object"
            )
        ws = "flexible" if self.any_whitespace else "compact"
        return self._grammar("json", key_string, lambda spec: from_schema(spec, whitespace=ws))

    def dispatch_regex(self, key_string: str) -> Any:
        return self._grammar("regex", key_string, _native.Grammar.from_regex)

    def dispatch_ebnf(self, key_string: str) -> Any:
        return self._grammar("ebnf", key_string, lambda s: _native.Grammar.from_ebnf(s, "root"))

    def dispatch_structural_tag(self, key_string: str) -> Any:
        raise UsageError("corral's SGLang backend does not support structural_tag requests")

    def reset(self) -> None:
        super().reset()
        with self._lock:
            self._compiled.clear()


def init_backend(server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None) -> CorralGrammarBackend:
    """The ``init_func`` SGLang's registry calls: ``(server_args, tokenizer, vocab_size,
    eos_token_ids) -> backend``."""
    any_ws = not bool(getattr(server_args, "constrained_json_disable_any_whitespace", False))
    return CorralGrammarBackend(tokenizer, vocab_size=vocab_size, eos_token_ids=eos_token_ids, any_whitespace=any_ws)


def register(name: str = "corral") -> None:
    """Registers corral with SGLang's ``register_grammar_backend(name, init_func)`` and adds
    ``name`` to ``GRAMMAR_BACKEND_CHOICES``; then ``--grammar-backend corral``
    (``ServerArgs(grammar_backend="corral")``) selects it. The registry is per process: the
    scheduler process must run this too (see ``docs/sglang.md``).

    Raises:
        UsageError: SGLang is not installed, or is a version without
            ``register_grammar_backend``.
    """
    base = _require_sglang("corral.sglang.register()")
    reg = getattr(base, "register_grammar_backend", None)
    if reg is None:
        raise UsageError(
            "this SGLang version has no register_grammar_backend (added to "
            "sglang.srt.constrained.base_grammar_backend in 2025): upgrade SGLang"
        )
    reg(name, init_backend)
    # `--grammar-backend` validates against GRAMMAR_BACKEND_CHOICES (extended by
    # add_grammar_backend_choices); it lives in server_args or arg_groups.choices by version.
    import importlib

    for modname in ("sglang.srt.server_args", "sglang.srt.arg_groups.choices"):
        try:
            mod = importlib.import_module(modname)
        except Exception:  # noqa: BLE001 - absent in this version
            continue
        choices = getattr(mod, "GRAMMAR_BACKEND_CHOICES", None)
        if isinstance(choices, list) and name not in choices:
            choices.append(name)
