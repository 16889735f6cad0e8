"""vLLM integration: a V1 structured-output backend, and a V0-style logits processor.

Written against ``vllm-project/vllm`` ``vllm/v1/structured_output/backend_types.py`` (commit
``d26c81b6``), ``backend_xgrammar.py`` (commit ``0b940c49``) and ``__init__.py``
(``StructuredOutputManager``, commit ``8ae7ba4d``); see ``docs/vllm.md``.

* :class:`CorralBackend` / :class:`CorralGrammar` -- a ``StructuredOutputBackend`` /
  ``StructuredOutputGrammar`` pair with xgrammar's semantics: ``accept_tokens`` returns False
  (and does nothing) once the grammar is terminated, and stops at the token that terminates
  it; ``validate_tokens`` returns the accepted
  prefix without advancing; ``rollback`` also undoes termination; ``fill_bitmask`` on a
  terminated grammar writes an all-ones row (vLLM's manager never fills those itself).
* :func:`patch_vllm` -- vLLM V1 picks its backend from a fixed list of names
  (``xgrammar``, ``guidance``, ``outlines``, ``lm-format-enforcer``) and has no registry, so
  corral is enabled by a monkeypatch: requests vLLM routes to its xgrammar backend are served
  by corral instead; :func:`vllm_plugin` does it from a ``vllm.general_plugins`` entry point
  (every vLLM process, including the engine core).
* :class:`LogitsProcessor` -- ``(token_ids, logits) -> logits`` for ``SamplingParams(
  logits_processors=[...])`` (vLLM V0 and other engines with per-request processors).

Every mask is filled through :func:`corral.fill_next_token_bitmask_batch`;
:meth:`CorralBackend.fill_bitmasks` fills a whole batch of rows in one parallel call.

This module imports without vLLM (local stand-ins with the same names); :func:`patch_vllm`
raises :class:`corral.UsageError` naming vLLM when it is missing.

Example (no vLLM needed)::

    >>> import corral
    >>> from corral.vllm import CorralBackend, StructuredOutputOptions
    >>> backend = CorralBackend(None, corral.builtin_vocabulary(), 50257)
    >>> g = backend.compile_grammar(StructuredOutputOptions.REGEX, r"[0-9]{3}")
    >>> bitmask = backend.allocate_token_bitmask(4)
    >>> g.fill_bitmask(bitmask, 0)
    >>> ids = corral.builtin_vocabulary().encode(b"123")
    >>> g.validate_tokens(ids + [ids[0]]) == ids, g.accept_tokens("r1", ids)
    (True, True)
    >>> g.accept_tokens("r1", [50256]), g.is_terminated(), g.accept_tokens("r1", [50256])
    (True, True, False)
"""

from __future__ import annotations

import enum
import json
import logging
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from . import _native
from .bitmask import allocate_token_bitmask
from .compiler import compile as _compile
from .errors import UsageError
from .fill_guard import fill_or_end
from .grammars import builtin_grammar_text
from .logits import apply_token_bitmask_inplace
from .vocab import Vocabulary

__all__ = [
    "CorralBackend",
    "CorralGrammar",
    "LogitsProcessor",
    "StructuredOutputOptions",
    "patch_vllm",
    "vllm_plugin",
    "VLLM_AVAILABLE",
]

logger = logging.getLogger(__name__)

try:
    from vllm.v1.structured_output import backend_types as _vbt  # type: ignore

    StructuredOutputOptions = _vbt.StructuredOutputOptions
    _BaseBackend = _vbt.StructuredOutputBackend
    _BaseGrammar = _vbt.StructuredOutputGrammar
    VLLM_AVAILABLE = True
except Exception:  # noqa: BLE001 - vLLM missing or broken: stand-ins with the same names
    _vbt = None
    VLLM_AVAILABLE = False

    class StructuredOutputOptions(enum.Enum):  # type: ignore[no-redef]
        """Stand-in for ``vllm.v1.structured_output.backend_types.StructuredOutputOptions``."""

        JSON = enum.auto()
        JSON_OBJECT = enum.auto()
        REGEX = enum.auto()
        GRAMMAR = enum.auto()
        CHOICE = enum.auto()
        STRUCTURAL_TAG = enum.auto()

    @dataclass
    class _BaseBackend:  # type: ignore[no-redef]
        vllm_config: Any
        tokenizer: Any
        vocab_size: int

    class _BaseGrammar:  # type: ignore[no-redef]
        pass


def _require_vllm(what: str) -> None:
    if _vbt is None:
        raise UsageError(
            f"{what} needs vLLM (the `vllm` package, V1 engine), which is not importable here: pip install vllm "
            "(corral's vLLM classes work without it for tests and replays)"
        )


def _fill_full(bitmask: Any, idx: int) -> None:
    """Sets row ``idx`` to all ones (every token allowed): torch tensor or numpy array."""
    row = bitmask[idx]
    if hasattr(row, "fill_"):
        row.fill_(-1)
    else:
        row.fill(np.int32(-1))


@dataclass(eq=False)
class CorralGrammar(_BaseGrammar):  # type: ignore[misc,valid-type]
    """One request's grammar (a :class:`corral.Matcher`) as vLLM V1's scheduler drives it.

    The speculative-decoding lifecycle (``StructuredOutputManager.grammar_bitmask``): for a
    request with drafts ``d1..dk`` it fills row ``i``, accepts ``d(i+1)``, fills the next row,
    ..., fills the bonus row, then ``rollback(k)``; after a draft EOS the grammar is
    terminated and the remaining rows are all ones. Rolling back un-terminates it.
    """

    matcher: Any = field(repr=False)
    vocab_size: int = 0
    num_processed_tokens: int = field(default=0, repr=False)
    _is_terminated: bool = field(default=False, repr=False)
    #: A fill ran past the grammar's ``max_fill_ms``: its row allowed only EOS and the grammar
    #: stays terminated (rollbacks included) until :meth:`reset` (see :mod:`corral.fill_guard`).
    _ended: bool = field(default=False, repr=False)

    def _end(self) -> None:
        self._ended = self._is_terminated = True

    def accept_tokens(self, request_id: str, tokens: List[int]) -> bool:
        """Accepts ``tokens`` in order.

        * Already terminated: False, nothing changes (xgrammar backend at the pinned commit).
        * A token that terminates the grammar (EOS) ends the call: later tokens of the same
          chunk (speculative decoding commits several at once) are ignored and the result is
          True. (At the pinned commit the xgrammar backend pushed them into the matcher, got
          False and logged "Failed to advance FSM"; later upstream versions stop at
          termination as here.)
        * A rejected token: False (request logged); the tokens before it stay accepted.
        """
        if self._is_terminated:
            return False
        ok = True
        for token in tokens:
            if not self.matcher.accept_token(int(token)):
                logger.error("corral: failed to advance the grammar of request %s at token %s", request_id, token)
                ok = False
                break
            self.num_processed_tokens += 1
            if self.matcher.is_terminated():
                break
        self._is_terminated = self.matcher.is_terminated()
        return ok

    def validate_tokens(self, tokens: List[int]) -> List[int]:
        """The longest prefix of ``tokens`` the grammar accepts; the state is unchanged."""
        if self._is_terminated or not tokens:
            return []
        n = self.matcher.validate_tokens([int(t) for t in tokens])
        return list(tokens[:n])

    def rollback(self, num_tokens: int) -> None:
        if num_tokens <= 0:
            return
        self.matcher.rollback(num_tokens)
        self.num_processed_tokens -= num_tokens
        self._is_terminated = self._ended or self.matcher.is_terminated()

    def fill_bitmask(self, bitmask: Any, idx: int) -> None:
        if self._is_terminated:
            _fill_full(bitmask, idx)
            return
        fill_or_end([self.matcher], bitmask, [int(idx)], lambda _: self._end())

    def is_terminated(self) -> bool:
        return self._is_terminated

    def reset(self) -> None:
        self.num_processed_tokens = 0
        self._is_terminated = self._ended = False
        self.matcher.reset()


# dataclass(eq=False) keeps vLLM's StructuredOutputBackend dataclass fields
# (vllm_config, tokenizer, vocab_size) as the constructor, as for XgrammarBackend.
@dataclass(eq=False)
class CorralBackend(_BaseBackend):  # type: ignore[misc,valid-type]
    """vLLM V1 ``StructuredOutputBackend``: ``CorralBackend(vllm_config, tokenizer, vocab_size)``.

    ``tokenizer`` is vLLM's Hugging Face tokenizer (or a :class:`corral.Vocabulary`).
    Handles JSON (needs :meth:`corral.Grammar.from_json_schema`; ``whitespace="compact"``
    when vLLM's ``disable_any_whitespace`` is set, else ``"flexible"``), JSON_OBJECT, REGEX, GRAMMAR
    (GBNF/EBNF), CHOICE; STRUCTURAL_TAG raises ``ValueError``. Compiled grammars are cached
    per (type, spec) here and per (grammar, vocabulary) in :func:`corral.compile`.
    """

    def __post_init__(self) -> None:
        # vLLM's structured_outputs_config.disable_any_whitespace -> compact JSON
        so_cfg = getattr(self.vllm_config, "structured_outputs_config", None)
        self.any_whitespace = not bool(getattr(so_cfg, "disable_any_whitespace", False))
        if isinstance(self.tokenizer, Vocabulary):
            self.vocab = self.tokenizer
        else:
            self.vocab = Vocabulary.from_huggingface(self.tokenizer, vocab_size=self.vocab_size)
        self._compiled: dict = {}
        self._lock = threading.Lock()

    @property
    def _whitespace(self) -> str:
        return "flexible" if self.any_whitespace else "compact"

    def _build(self, request_type: Any, spec: str) -> Any:
        kind = getattr(request_type, "name", str(request_type))
        if kind == "JSON":
            from_schema = getattr(_native.Grammar, "from_json_schema", None)
            if from_schema is None:
                raise ValueError(
                    "corral's vLLM backend cannot serve JSON Schema requests: this corral build has no "
                    "corral.Grammar.from_json_schema (JSON Schema support)"
                )
            return from_schema(spec, whitespace=self._whitespace)
        if kind == "JSON_OBJECT":
            from_schema = getattr(_native.Grammar, "from_json_schema", None)
            if from_schema is not None:
                return from_schema('{"type": "object"}', whitespace=self._whitespace)
            # corral's JSON grammar with an object at top level (rule `object`).
            return _native.Grammar.from_ebnf(builtin_grammar_text("json"), "object")
        if kind == "REGEX":
            return _native.Grammar.from_regex(spec)
        if kind == "GRAMMAR":
            return _native.Grammar.from_ebnf(spec, "root")
        if kind == "CHOICE":
            choices = json.loads(spec) if isinstance(spec, str) else list(spec)
            return _native.Grammar.from_regex("|".join(re.escape(str(c)) for c in choices))
        raise ValueError(f"corral's vLLM backend does not support {kind} requests")

    def compile_grammar(self, request_type: Any, grammar_spec: str) -> CorralGrammar:
        key = (getattr(request_type, "name", str(request_type)), grammar_spec)
        with self._lock:
            compiled = self._compiled.get(key)
        if compiled is None:
            compiled = _compile(self._build(request_type, grammar_spec), self.vocab)
            with self._lock:
                self._compiled[key] = compiled
        return CorralGrammar(matcher=_native.Matcher(compiled), vocab_size=self.vocab_size)

    def allocate_token_bitmask(self, max_num_seqs: int) -> Any:
        """All-ones int32 ``(max_num_seqs, ceil(vocab_size / 32))`` CPU tensor (vLLM sends it
        to the workers as a numpy array)."""
        return allocate_token_bitmask(max_num_seqs, self.vocab_size)

    @staticmethod
    def fill_bitmasks(batch: Iterable[Tuple[Any, int, bool]], bitmask: Any) -> None:
        """Fills ``(grammar, row, apply_bitmask)`` triples -- the argument of vLLM's
        ``StructuredOutputManager._fill_bitmasks`` -- in one parallel call: rows of corral
        grammars that apply and are not terminated are filled, all other rows set to all ones
        (other grammars fill their own rows). A fill past its grammar's ``max_fill_ms`` ends
        that request (an EOS-only row, the grammar terminated; :mod:`corral.fill_guard`)
        instead of raising in the engine's step."""
        gs, ms, rows = [], [], []
        for grammar, index, apply in batch:
            if apply and not grammar.is_terminated():
                if isinstance(grammar, CorralGrammar):
                    gs.append(grammar)
                    ms.append(grammar.matcher)
                    rows.append(int(index))
                else:
                    grammar.fill_bitmask(bitmask, index)
            else:
                _fill_full(bitmask, index)
        if ms:
            fill_or_end(ms, bitmask, rows, lambda i: gs[i]._end())

    def destroy(self) -> None:
        with self._lock:
            self._compiled.clear()


# ------------------------------------------------------------------------------ enabling

_PATCHED = {"done": False}


def patch_vllm(*, replace: str = "xgrammar") -> None:
    """Makes vLLM V1 serve structured-output requests with corral (in this process).

    vLLM builds its backend in ``StructuredOutputManager.grammar_init`` from a fixed set of
    names and validates requests against it in the front end, so there is no way to add the
    name ``"corral"``. This replaces the ``XgrammarBackend`` that
    ``vllm.v1.structured_output`` uses with :class:`CorralBackend`; requests vLLM routes to
    ``xgrammar`` (``structured_outputs_config.backend="xgrammar"``, or ``"auto"`` when
    xgrammar supports the request) are then compiled by corral. vLLM still validates requests
    with xgrammar in the front end. It also makes the manager's batch fill
    (``_fill_bitmasks``) one parallel corral call.

    The scheduler runs in the engine-core process: call this there (a
    ``vllm.general_plugins`` entry point naming :func:`vllm_plugin`), or run with
    ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` and call it before creating the ``LLM``.

    Raises:
        UsageError: vLLM (V1 structured output) is not importable, or its layout differs.
    """
    _require_vllm("corral.vllm.patch_vllm()")
    if replace != "xgrammar":
        raise UsageError("patch_vllm(replace=...) supports only 'xgrammar'")
    import vllm.v1.structured_output as so  # type: ignore

    if not hasattr(so, "XgrammarBackend") or not hasattr(so, "StructuredOutputManager"):
        raise UsageError("this vLLM version's vllm.v1.structured_output has no XgrammarBackend/StructuredOutputManager")
    if _PATCHED["done"]:
        return
    so.XgrammarBackend = CorralBackend
    mgr = so.StructuredOutputManager
    original = mgr._fill_bitmasks

    def _fill_bitmasks(self: Any, batch: Any) -> None:
        batch = list(batch)
        if any(isinstance(g, CorralGrammar) for g, _, _ in batch):
            CorralBackend.fill_bitmasks(batch, self._grammar_bitmask)
        else:
            original(self, batch)

    mgr._fill_bitmasks = _fill_bitmasks
    _PATCHED["done"] = True


def vllm_plugin() -> None:
    """``vllm.general_plugins`` entry point: ``corral = "corral.vllm:vllm_plugin"``."""
    patch_vllm()


# ------------------------------------------------------------------------------ V0 path


class LogitsProcessor:
    """Per-request logits processor: ``SamplingParams(logits_processors=[LogitsProcessor(...)])``.

    Called as ``processor(output_token_ids, logits)`` (or ``(prompt_ids, output_ids,
    logits)``) for each decoding step of one sequence; accepts the ids appended since the
    previous call and masks ``logits`` (1-D, possibly wider than the vocabulary) in place.
    A shorter ``output_token_ids`` than last time (a new generation, preemption-recompute)
    rebuilds the state. After EOS the logits are left as they are. A fill past the grammar's
    ``max_fill_ms`` ends the sequence instead of raising inside the engine: only EOS is
    allowed from then on (logged; :mod:`corral.fill_guard`). One processor per sequence: use
    :meth:`clone` for ``n > 1`` / beams.

    Raises (when called):
        UsageError: a generated token is not allowed (the mask was not applied).
    """

    def __init__(self, compiled: Any, *, vocab: Optional[Vocabulary] = None) -> None:
        if isinstance(compiled, _native.Grammar):
            if vocab is None:
                raise UsageError("LogitsProcessor(grammar) needs vocab=...; or pass corral.compile(grammar, vocab)")
            compiled = _compile(compiled, vocab)
        if not isinstance(compiled, _native.CompiledGrammar):
            raise UsageError(f"expected a corral.CompiledGrammar, got {type(compiled).__name__}")
        self.compiled = compiled
        self.vocab = vocab if vocab is not None else compiled.vocab
        self.matcher = _native.Matcher(compiled)
        self._seen: List[int] = []
        self._bitmask = allocate_token_bitmask(1, self.vocab.size)
        #: A fill ran past the grammar's ``max_fill_ms``: the sequence is ended with EOS (the
        #: bitmask keeps only EOS from then on; see :mod:`corral.fill_guard`).
        self._ended = False

    def clone(self) -> "LogitsProcessor":
        return LogitsProcessor(self.compiled, vocab=self.vocab)

    def _sync(self, ids: Sequence[int]) -> None:
        ids = [int(t) for t in ids]
        n = len(self._seen)
        if len(ids) < n or ids[:n] != self._seen:
            self.matcher.reset()
            self._seen = []
            n = 0
        for t in ids[n:]:
            if self.matcher.is_terminated():
                break
            if not self.matcher.accept_token(t):
                raise UsageError(
                    f"token {t} ({self.vocab.token_bytes(t)!r}) is not allowed by the grammar: the mask must be "
                    "applied before sampling"
                )
            self._seen.append(t)

    def __call__(self, *args: Any) -> Any:
        if len(args) == 2:
            ids, logits = args
        elif len(args) == 3:
            _, ids, logits = args
        else:
            raise UsageError("LogitsProcessor takes (output_token_ids, logits) or (prompt_ids, output_ids, logits)")
        if not self._ended:
            self._sync(ids)
            if self.matcher.is_terminated():
                return logits
            fill_or_end([self.matcher], self._bitmask, [0], lambda _: setattr(self, "_ended", True))
        apply_token_bitmask_inplace(logits, self._bitmask[0] if logits.dim() == 1 else self._bitmask, check_empty=False)
        return logits
