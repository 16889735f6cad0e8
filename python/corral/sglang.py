"""SGLang integration: corral as an SGLang grammar backend (``--grammar-backend corral``).

Supported: **SGLang 0.5.23** (tested against the installed package by ``make test-engines``;
see ``docs/sglang.md``). On any other version :func:`register` raises one
:class:`corral.UsageError` naming the supported versions, before anything is registered.

* :func:`register` -- ``register_grammar_backend("corral", init_backend)`` in SGLang's registry
  and ``"corral"`` among the ``--grammar-backend`` choices. ``python -m corral.sglang <sglang
  serve arguments>`` registers and launches the server (every scheduler process included);
  :func:`sglang_plugin` is the same registration as an ``sglang.srt.plugins`` entry point.
* :func:`init_backend` -- the ``init_func`` SGLang calls: a :class:`CorralGrammarBackend`, wrapped
  in SGLang's own reasoning wrapper when the server runs a ``--reasoning-parser`` (SGLang 0.5.23
  returns registered backends before it wraps its built-in ones, and never passes them the
  think-end ids): rows are left unconstrained until the reasoning ends, exactly as for xgrammar.
* :class:`CorralGrammarBackend` -- ``dispatch_json`` / ``dispatch_regex`` / ``dispatch_ebnf`` /
  ``dispatch_structural_tag`` compile (and cache) corral grammars against the tokenizer's
  vocabulary; a request corral refuses becomes SGLang's ``InvalidGrammarObject`` carrying
  corral's message (a JSON pointer, a line:col), so only that request is aborted.
* :class:`CorralGrammar` -- one request's grammar object: ``accept_token``, ``rollback``,
  ``is_terminated``, the vocab-mask methods (``fill_vocab_mask_batched`` fills the batch's rows in
  one parallel corral call), ``copy`` and jump-forward backed by corral's forced bytes.

This module imports without SGLang: the classes then subclass local stand-ins with the same
method names, and :func:`register` raises :class:`corral.UsageError` naming SGLang.

Example (no SGLang needed; the GPT-2 vocabulary stands in for the server's tokenizer)::

    >>> import torch, corral
    >>> from corral.sglang import CorralGrammar, CorralGrammarBackend
    >>> backend = CorralGrammarBackend(corral.builtin_vocabulary())
    >>> g = backend.dispatch_regex(r"(yes|no)")
    >>> mask = g.allocate_vocab_mask(vocab_size=50257, batch_size=2, device="cpu")
    >>> CorralGrammar.fill_vocab_mask_batched([(0, g)], mask)   # SGLang passes GrammarRow(row, grammar)
    >>> logits = torch.zeros(2, 50257)
    >>> g.apply_vocab_mask(logits, g.move_vocab_mask(mask, "cpu"))
    >>> int(torch.isfinite(logits[0]).sum()) < 50257, bool(torch.isfinite(logits[1]).all())
    (True, True)
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from typing import Any, Iterable, List, Optional, Sequence, Tuple

from . import _native
from .bitmask import allocate_token_bitmask
from .compiler import compile as _compile
from .errors import CorralError, UsageError
from .fill_guard import fill_or_end
from .forced import forced_tokens as _forced_tokens
from .grammars import builtin_grammar
from .logits import apply_token_bitmask_inplace
from .vocab import Vocabulary

__all__ = [
    "CorralGrammar",
    "CorralGrammarBackend",
    "SUPPORTED_SGLANG_VERSIONS",
    "SGLANG_AVAILABLE",
    "build_grammar",
    "init_backend",
    "register",
    "sglang_plugin",
]

#: The SGLang releases this adapter is tested against (``make test-engines``).
SUPPORTED_SGLANG_VERSIONS = ("0.5.23",)

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

        def maybe_init_reasoning(self, reasoning: bool) -> None:
            pass

        @property
        def finished(self) -> bool:
            return self._finished

        @finished.setter
        def finished(self, finished: bool) -> None:
            self._finished = finished

    class _BaseBackend:  # type: ignore[no-redef]
        """Stand-in for ``BaseGrammarBackend`` (SGLang 0.5.23's cache protocol)."""

        def __init__(self) -> None:
            from concurrent.futures import ThreadPoolExecutor

            self.executor = ThreadPoolExecutor()
            self.cache: dict[Any, Any] = {}

        def _init_value_dispatch(self, key: Tuple[str, str], require_reasoning: bool = False) -> Any:
            key_type, key_string = key
            if key_type == "full_assistant_ebnf":
                key_type = "ebnf"
            fn = getattr(self, f"dispatch_{key_type}", None)
            if fn is None:
                raise ValueError(f"Invalid key_type: {key_type}={key_string}")
            return fn(key_string)

        def get_cached_or_future_value(self, key: Tuple[str, str], require_reasoning: bool = False) -> Any:
            value = self.cache.get(key)
            if value:
                copied = value.copy()
                copied.maybe_init_reasoning(require_reasoning)
                return copied, True
            return self.executor.submit(self._init_value_dispatch, key, require_reasoning), False

        def set_cache(self, key: Tuple[str, str], value: Any) -> None:
            self.cache[key] = value

        def reset(self) -> None:
            self.cache.clear()


def _invalid(message: str) -> Any:
    """SGLang's ``InvalidGrammarObject(message)`` (the request is aborted with ``message``);
    None without SGLang."""
    cls = getattr(_sgl_base, "InvalidGrammarObject", None) if _sgl_base is not None else None
    return cls(message) if cls is not None else None


def _grammar_stats(dispatch_type: str) -> Any:
    cls = getattr(_sgl_base, "GrammarStats", None) if _sgl_base is not None else None
    return cls(dispatch_type=dispatch_type) if cls is not None else None


def _require_sglang(what: str) -> Any:
    if _sgl_base is None:
        raise UsageError(
            f"{what} needs SGLang {' or '.join(SUPPORTED_SGLANG_VERSIONS)} (the `sglang` package), which is not "
            "importable here: pip install sglang==" + SUPPORTED_SGLANG_VERSIONS[-1]
            + " (corral's SGLang classes work without it for tests and replays)"
        )
    return _sgl_base


#: A row that stays as allocated (all tokens allowed) in a batched fill.
_SKIP = object()


def _fill_target(grammar: Any) -> Any:
    """What fills ``grammar``'s row in a batched fill: a :class:`CorralGrammar` (its matcher
    joins the one parallel call), :data:`_SKIP` (the row stays as allocated), or None (the
    grammar fills its own row)."""
    if isinstance(grammar, CorralGrammar):
        return _SKIP if grammar.is_terminated() else grammar
    target = getattr(grammar, "_corral_fill_target", None)
    return target() if target is not None else None


def _fill_batched(entries: Iterable[Any], vocab_mask: Any) -> None:
    """``fill_vocab_mask_batched``: one parallel corral call for every corral row (see
    :meth:`CorralGrammar.fill_vocab_mask_batched`)."""
    gs: List[CorralGrammar] = []
    ms: List[Any] = []
    rows: List[int] = []
    for entry in entries:
        row, grammar = int(entry[0]), entry[1]  # GrammarRow(row, grammar)
        target = _fill_target(grammar)
        if target is _SKIP:
            continue
        if target is None:
            grammar.fill_vocab_mask(vocab_mask, row)
            continue
        gs.append(target)
        ms.append(target.matcher)
        rows.append(row)
    if ms:
        fill_or_end(ms, vocab_mask, rows, lambda i: gs[i]._end())


def _reset_vocab_mask(vocab_mask: Any) -> None:
    vocab_mask.fill_(-1)


class CorralGrammar(_BaseObject):  # type: ignore[misc,valid-type]
    """One request's grammar state (a :class:`corral.Matcher`), as SGLang's scheduler drives it.

    Mirrors SGLang 0.5.23's xgrammar grammar object: ``accept_token`` is a no-op once the
    grammar is terminated (EOS accepted) and raises ``ValueError`` for a token the grammar
    rejects (the scheduler then aborts that request only); ``rollback(k)`` undoes ``k`` tokens
    (termination included); ``copy()`` copies the state (SGLang copies freshly compiled
    grammars into its cache, and copies cached ones for new requests).

    Example::

        >>> import corral
        >>> from corral.sglang import CorralGrammarBackend
        >>> vocab = corral.builtin_vocabulary()
        >>> g = CorralGrammarBackend(vocab).dispatch_regex("ab|abc")
        >>> for t in vocab.encode(b"ab") + [50256]:
        ...     g.accept_token(t)
        >>> g.is_terminated()
        True
        >>> g.rollback(1); g.is_terminated()
        False
    """

    def __init__(self, matcher: _native.Matcher, vocab: Vocabulary, key: Tuple[str, str] = ("", "")) -> None:
        super().__init__()
        self.matcher = matcher
        self.vocab = vocab
        self.key = key
        self.accepted_tokens: List[int] = []
        self.grammar_stats = _grammar_stats(key[0] or "corral")
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
        if self.grammar_stats is not None:
            g.grammar_stats = dataclasses.replace(self.grammar_stats, is_cache_hit=True, tree_traversal_time=[])
        return g

    # ------------------------------------------------------------------ masks

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> Any:
        """An all-allowed int32 CPU bitmask ``(batch_size, ceil(vocab_size/32))`` (pinned when
        the device is CUDA, so :meth:`move_vocab_mask` is asynchronous)."""
        return allocate_token_bitmask(batch_size, vocab_size, pin_memory=str(device).startswith("cuda"))

    def fill_vocab_mask(self, vocab_mask: Any, idx: int) -> None:
        """Fills row ``idx``; a fill past the grammar's ``max_fill_ms`` ends the request (an
        EOS-only row, the grammar terminated; :mod:`corral.fill_guard`) instead of raising in
        the scheduler."""
        fill_or_end([self.matcher], vocab_mask, [int(idx)], lambda _: self._end())

    #: ``fill_vocab_mask_batched(entries, vocab_mask)`` (static): SGLang 0.5.23's batch fill
    #: (``SamplingBatchInfo.update_regex_vocab_mask`` calls it on one grammar of the batch
    #: with ``GrammarRow(row, grammar)`` entries). Every corral row -- plain, or inside the
    #: reasoning wrapper once the reasoning has ended -- is filled in ONE parallel
    #: :func:`corral.fill_next_token_bitmask_batch` call (GIL released); a reasoning row
    #: still thinking stays as allocated (all allowed), terminated rows too, and any other
    #: grammar fills its own row. Unlisted rows are left untouched. Fills past
    #: ``max_fill_ms`` end their requests as in :meth:`fill_vocab_mask`.
    fill_vocab_mask_batched = staticmethod(_fill_batched)

    #: ``reset_vocab_mask(vocab_mask)`` (static): back to all allowed.
    reset_vocab_mask = staticmethod(_reset_vocab_mask)

    @staticmethod
    def fill_vocab_masks(grammars: Sequence[Optional["CorralGrammar"]], vocab_mask: Any, indices: Optional[Sequence[int]] = None) -> None:
        """Fills row ``indices[i]`` (default ``i``) for ``grammars[i]`` in one parallel call,
        skipping ``None``, finished and terminated grammars (their rows stay as allocated):
        :meth:`fill_vocab_mask_batched` with a list of grammars."""
        rows = list(range(len(grammars))) if indices is None else [int(i) for i in indices]
        _fill_batched([(r, g) for r, g in zip(rows, grammars) if g is not None and not g.finished], vocab_mask)

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
        the text is the forced bytes cut to whole UTF-8 characters (SGLang retokenizes it).
        SGLang 0.5.23's scheduler no longer calls jump-forward; the methods keep the contract."""
        if self.is_terminated():
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


def _sanitize_structural_tag(spec: str) -> str:
    """SGLang's xgrammar backend replaces a missing (``null``) schema with ``{}``: in the
    legacy form's ``structures[*].schema``, and in ``json_schema`` formats of the new form."""
    try:
        tag = json.loads(spec)
    except (ValueError, TypeError):
        return spec  # corral reports the syntax error
    if not isinstance(tag, dict):
        return spec
    changed = False
    if tag.get("structures") is not None:
        for s in tag.get("structures") or []:
            if isinstance(s, dict) and s.get("schema") is None:
                s["schema"] = {}
                changed = True
    stack = [tag.get("format")]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("type") in ("json_schema", "qwen_xml_parameter") and node.get("json_schema") is None:
                node["json_schema"] = {}
                changed = True
            stack.extend(v for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend(node)
    return json.dumps(tag) if changed else spec


def build_grammar(key_type: str, key_string: str, *, any_whitespace: bool = True, max_whitespace: Optional[int] = None) -> "_native.Grammar":
    """The corral grammar for one SGLang grammar key ``(key_type, key_string)``.

    ``json``: a JSON Schema (``"$$ANY$$"``: any JSON value, corral's built-in JSON grammar);
    ``regex``; ``ebnf`` / ``full_assistant_ebnf``: GBNF with root rule ``root`` (what SGLang's
    xgrammar backend accepts; SGLang sends no Lark); ``structural_tag``: the legacy
    ``{"structures", "triggers"}`` form or the ``{"format": ...}`` form.

    Raises a :class:`corral.CorralError` naming the problem (a JSON pointer or line:col).

    Example::

        >>> from corral.sglang import build_grammar
        >>> build_grammar("ebnf", 'root ::= "a" | "b"').num_rules > 0
        True
    """
    if key_type == "json":
        if key_string == "$$ANY$$":
            return builtin_grammar("json")
        ws = "flexible" if any_whitespace else "compact"
        if max_whitespace is None:
            return _native.Grammar.from_json_schema(key_string, whitespace=ws)
        return _native.Grammar.from_json_schema(key_string, whitespace=ws, max_whitespace=int(max_whitespace))
    if key_type == "regex":
        return _native.Grammar.from_regex(key_string)
    if key_type in ("ebnf", "full_assistant_ebnf"):
        return _native.Grammar.from_ebnf(key_string, "root")
    if key_type == "structural_tag":
        return _native.Grammar.from_structural_tag(_sanitize_structural_tag(key_string))
    raise UsageError(f"corral's SGLang backend does not know the grammar key type {key_type!r}")


class CorralGrammarBackend(_BaseBackend):  # type: ignore[misc,valid-type]
    """SGLang grammar backend compiling json / regex / ebnf / structural_tag requests with corral.

    Args:
        tokenizer: the server's Hugging Face tokenizer (or a :class:`corral.Vocabulary`).
        vocab_size: the model's logits width (padded vocabularies); default the tokenizer's.
        eos_token_ids: the model's EOS ids (SGLang passes a set); default the tokenizer's.
        any_whitespace: JSON Schema requests allow flexible whitespace (``False``: compact
            JSON, SGLang's ``--constrained-json-disable-any-whitespace``).
        max_whitespace: the longest whitespace run flexible JSON allows (SGLang's
            ``--constrained-json-max-whitespace-cnt``); None: corral's default (20; corral
            always bounds it).
        memory_budget: the byte budget of corral's caches in this process (bytes, or a string
            such as ``"512MiB"``; :func:`corral.set_memory_budget`); None leaves it as it is
            (``CORRAL_MEMORY_BUDGET`` or 128 MiB).
        max_cached_grammars: the most grammar objects SGLang's own per-backend cache keeps
            (its ``set_cache`` dict, never evicted by SGLang itself: every one holds a compiled
            grammar in use); least recently cached first out. Compiled grammars stay in
            corral's own budgeted cache, so a schema met again compiles in microseconds.

    A grammar that fails to compile is logged and returned as SGLang's
    ``InvalidGrammarObject(corral's message)``: SGLang aborts that request with
    ``"Failed to compile <type> grammar: <message>"`` and the batch goes on. Without SGLang
    the :class:`corral.CorralError` is raised instead.

    Example::

        >>> import corral
        >>> from corral.sglang import CorralGrammarBackend
        >>> backend = CorralGrammarBackend(corral.builtin_vocabulary(), any_whitespace=False)
        >>> g = backend.dispatch_json('{"type": "object", "properties": {"a": {"type": "integer"}}}')
        >>> ids = corral.builtin_vocabulary().encode(b'{"a":1}')
        >>> g.matcher.validate_tokens(ids) == len(ids)
        True
    """

    def __init__(
        self,
        tokenizer: Any,
        vocab_size: Optional[int] = None,
        eos_token_ids: Any = None,
        *,
        any_whitespace: bool = True,
        max_whitespace: Optional[int] = None,
        memory_budget: Any = None,
        max_cached_grammars: int = 256,
    ) -> None:
        super().__init__()
        self.any_whitespace = any_whitespace
        self.max_whitespace = max_whitespace
        self.max_cached_grammars = max(0, int(max_cached_grammars))
        if memory_budget is not None:
            from .memory import set_memory_budget

            set_memory_budget(memory_budget)
        if isinstance(tokenizer, Vocabulary):
            self.vocab = tokenizer
        else:
            eos = sorted(int(i) for i in eos_token_ids) if eos_token_ids else None
            self.vocab = Vocabulary.from_huggingface(tokenizer, eos_token_ids=eos, vocab_size=vocab_size)
        self.vocab_size = vocab_size or self.vocab.size
        self._lock = threading.Lock()

    def _grammar(self, key_type: str, key_string: str) -> Any:
        key = (key_type, key_string)
        try:
            grammar = build_grammar(key_type, key_string, any_whitespace=self.any_whitespace, max_whitespace=self.max_whitespace)
            # (corral.compile's cache is bounded by the memory budget; no dict of our own.)
            compiled = _compile(grammar, self.vocab)
        except CorralError as e:
            logger.error("corral: invalid %s grammar %r: %s", key_type, key_string[:200], e)
            inv = _invalid(f"corral: {e}")
            if inv is None:
                raise
            return inv
        return CorralGrammar(_native.Matcher(compiled), self.vocab, key)

    def set_cache(self, key: Tuple[str, str], value: Any) -> None:
        """SGLang's cache of grammar objects, bounded: at most ``max_cached_grammars``, the
        least recently cached going first (SGLang's own dict is never evicted)."""
        cache = self.cache
        with self._lock:
            cache.pop(key, None)
            cache[key] = value
            while len(cache) > self.max_cached_grammars:
                cache.pop(next(iter(cache)))

    def dispatch_json(self, key_string: str) -> Any:
        return self._grammar("json", key_string)

    def dispatch_regex(self, key_string: str) -> Any:
        return self._grammar("regex", key_string)

    def dispatch_ebnf(self, key_string: str) -> Any:
        return self._grammar("ebnf", key_string)

    def dispatch_structural_tag(self, key_string: str) -> Any:
        return self._grammar("structural_tag", key_string)

    # SGLang's defaults kept: reserve_framing_tokens (no-op), compile_framed_grammar (None:
    # SGLang falls back to its reasoning wrapper), is_support_token_filter (False: SGLang
    # refuses --enable-strict-thinking with excluded tokens or a think budget).

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> Any:
        """Used by SGLang's reasoning wrapper for rows without a grammar."""
        return allocate_token_bitmask(batch_size, vocab_size, pin_memory=str(device).startswith("cuda"))

    move_vocab_mask = staticmethod(CorralGrammar.move_vocab_mask)
    apply_vocab_mask = staticmethod(CorralGrammar.apply_vocab_mask)

    def reset(self) -> None:
        with self._lock:
            super().reset()


# ------------------------------------------------------------------------------ reasoning

_REASONER: dict[str, Any] = {}


def _reasoner_classes() -> Tuple[Any, Any]:
    """SGLang's reasoning wrapper, subclassed so that a reasoning request's rows join corral's
    batched fill: ``(CorralReasonerGrammarBackend, CorralReasonerGrammar)``."""
    if _REASONER:
        return _REASONER["backend"], _REASONER["grammar"]
    from sglang.srt.constrained.reasoner_grammar_backend import (  # type: ignore
        ReasonerGrammarBackend,
        ReasonerGrammarObject,
    )

    class CorralReasonerGrammar(ReasonerGrammarObject):  # type: ignore[misc,valid-type,unused-ignore]  # (Any without SGLang)
        """SGLang's ``ReasonerGrammarObject`` (no mask until the think-end sequence, then the
        inner corral grammar) with corral's batched fill."""

        fill_vocab_mask_batched = staticmethod(_fill_batched)
        reset_vocab_mask = staticmethod(_reset_vocab_mask)

        def _corral_fill_target(self) -> Any:
            inner = self.grammar
            if not isinstance(inner, CorralGrammar):
                return None
            if self.reasoning_in_grammar:
                if self._is_thinking() and self.enable_token_filter and self._reasoning_opened():
                    return None  # the wrapper narrows the row itself
                return _SKIP if inner.is_terminated() else inner
            if self._is_thinking():
                return None if self.enable_token_filter else _SKIP
            if self._is_generation():
                return _SKIP if inner.is_terminated() else inner
            return _SKIP

        def copy(self) -> Any:
            new = super().copy()
            new.__class__ = CorralReasonerGrammar
            return new

    class CorralReasonerGrammarBackend(ReasonerGrammarBackend):  # type: ignore[misc,valid-type,unused-ignore]  # (Any without SGLang)
        """SGLang's ``ReasonerGrammarBackend`` around a :class:`CorralGrammarBackend`."""

        def _make_grammar_object(self, grammar: Any, reasoning: bool) -> Any:
            obj = super()._make_grammar_object(grammar, reasoning)
            obj.__class__ = CorralReasonerGrammar
            return obj

    _REASONER["backend"] = CorralReasonerGrammarBackend
    _REASONER["grammar"] = CorralReasonerGrammar
    return CorralReasonerGrammarBackend, CorralReasonerGrammar


def _serving_option(server_args: Any, name: str, default: Any) -> Any:
    """A serving option as SGLang's ``create_grammar_backend`` reads it (the runtime context's
    resolved value), else ``server_args``' field."""
    try:
        from sglang.srt.runtime_context import get_serving  # type: ignore

        return getattr(get_serving(), name)
    except Exception:  # noqa: BLE001 - no published context (tests, other entry points)
        return getattr(server_args, name, default)


def init_backend(server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None) -> Any:
    """The ``init_func`` SGLang's registry calls: ``(server_args, tokenizer, vocab_size,
    eos_token_ids) -> backend``.

    Options passed through: ``constrained_json_disable_any_whitespace`` (compact JSON) and
    ``constrained_json_max_whitespace_cnt`` (corral's ``max_whitespace``). With a
    ``reasoning_parser`` whose think-end token the tokenizer encodes (the scheduler's own
    condition for ``think_end_ids``), the backend is wrapped in SGLang's reasoning wrapper as
    SGLang wraps its built-in backends: ``require_reasoning`` requests are unconstrained until
    the think-end sequence, per-request think-end ids and ``reasoning_in_grammar`` work as
    for xgrammar.

    Raises:
        UsageError: SGLang is installed but not a supported version (at server start, for a
            registration that bypassed :func:`register`).
    """
    if _sgl_base is not None:
        _check_version()
    any_ws = not bool(_serving_option(server_args, "constrained_json_disable_any_whitespace", False))
    max_ws = _serving_option(server_args, "constrained_json_max_whitespace_cnt", None)
    backend = CorralGrammarBackend(tokenizer, vocab_size=vocab_size, eos_token_ids=eos_token_ids, any_whitespace=any_ws, max_whitespace=max_ws)
    parser_name = _serving_option(server_args, "reasoning_parser", None)
    if parser_name and tokenizer is not None and not isinstance(tokenizer, Vocabulary):
        from sglang.srt.parser.reasoning_parser import ReasoningParser  # type: ignore

        parser = ReasoningParser(model_type=parser_name, stream_reasoning=False, tokenizer=tokenizer)
        if parser.detector.get_think_end_token_ids(tokenizer):
            wrapper, _ = _reasoner_classes()
            strict = bool(_serving_option(server_args, "enable_strict_thinking", False))
            return wrapper(backend, parser, tokenizer, enable_strict_thinking=strict)
        logger.warning("corral: the reasoning parser's think-end token is not in the vocabulary: reasoning is not gated")
    return backend


# ------------------------------------------------------------------------------ enabling


def _check_version() -> Any:
    base = _require_sglang("corral.sglang.register()")
    try:
        import sglang  # type: ignore

        version = getattr(sglang, "__version__", "unknown")
    except Exception:  # noqa: BLE001
        version = "unknown"
    if version not in SUPPORTED_SGLANG_VERSIONS:
        raise UsageError(
            f"corral supports SGLang {', '.join(SUPPORTED_SGLANG_VERSIONS)}; this is SGLang {version}. "
            "Install a supported version (pip install sglang==" + SUPPORTED_SGLANG_VERSIONS[-1] + ")."
        )
    return base


def register(name: str = "corral") -> None:
    """Registers corral with SGLang's ``register_grammar_backend(name, init_backend)`` and adds
    ``name`` to ``--grammar-backend``'s choices; then ``--grammar-backend corral``
    (``ServerArgs(grammar_backend="corral")``) selects it. The registry is per process: every
    scheduler process must run this too (``python -m corral.sglang`` does; see
    ``docs/sglang.md``). Idempotent.

    Raises:
        UsageError: SGLang is missing, or not a supported version
            (:data:`SUPPORTED_SGLANG_VERSIONS`); nothing is registered then.

    Example::

        >>> import corral, corral.sglang
        >>> try:
        ...     corral.sglang.register()
        ... except corral.UsageError as e:  # SGLang missing or another version
        ...     assert "0.5.23" in str(e)
    """
    base = _check_version()
    base.register_grammar_backend(name, init_backend)
    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES  # type: ignore

    if name not in GRAMMAR_BACKEND_CHOICES:
        GRAMMAR_BACKEND_CHOICES.append(name)


def sglang_plugin() -> None:
    """An ``sglang.srt.plugins`` entry point (SGLang loads these in every process it starts):
    :func:`register`. Registering changes nothing until ``--grammar-backend corral`` is chosen;
    on an unsupported version SGLang logs the :class:`corral.UsageError`."""
    register()


def main(argv: Optional[Sequence[str]] = None) -> None:
    """``python -m corral.sglang <sglang serve arguments>``: registers corral, then runs SGLang's
    server (``sglang.launch_server``) with ``--grammar-backend corral`` unless another backend
    is given."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    register()
    if not any(a == "--grammar-backend" or a.startswith("--grammar-backend=") for a in args):
        args += ["--grammar-backend", "corral"]
    from sglang.launch_server import run_server  # type: ignore
    from sglang.srt.plugins import load_plugins  # type: ignore
    from sglang.srt.server_args import prepare_server_args  # type: ignore

    load_plugins()
    run_server(prepare_server_args(args))


if __name__ == "__mp_main__":  # a scheduler process spawned by `python -m corral.sglang`
    import corral.sglang as _self

    _self.register()

if __name__ == "__main__":
    import corral.sglang as _self

    _self.main()
