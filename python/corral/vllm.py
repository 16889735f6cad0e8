"""vLLM integration: corral as vLLM V1's structured-output backend, and a logits processor.

Supported: **vLLM 0.33.0** (tested against the installed package by ``make test-engines``;
see ``docs/vllm.md``). On any other version :func:`patch_vllm` raises one
:class:`corral.UsageError` naming the supported versions, before anything is patched.

* :class:`CorralBackend` / :class:`CorralGrammar` -- a ``StructuredOutputBackend`` /
  ``StructuredOutputGrammar`` pair with the semantics of vLLM 0.33's xgrammar backend:
  ``compile_grammar(kind, spec, stop_token_ids=...)`` for every request kind vLLM sends
  (JSON, JSON_OBJECT, REGEX, CHOICE, GRAMMAR as GBNF or Lark, STRUCTURAL_TAG); the request's
  stop ids (EOS and user stop tokens) stay masked until the grammar can end, and end it;
  ``accept_tokens`` ignores tokens once terminated; ``validate_tokens`` returns the accepted
  prefix without advancing; ``rollback`` also undoes termination.
* :func:`patch_vllm` -- vLLM has no backend registry, so corral takes the place of the
  ``xgrammar`` backend: the engine's ``XgrammarBackend``, the front end's request validation
  (corral's acceptance decides, and a refused request fails with corral's message), and the
  manager's batch fill (``_fill_bitmasks``: one parallel corral call).
  :func:`vllm_plugin` is the ``vllm.general_plugins`` entry point: it patches every vLLM
  process when ``CORRAL_VLLM=1``.
* :class:`LogitsProcessor` -- ``(token_ids, logits) -> logits`` for engines with
  per-request processors.

This module imports without vLLM (local stand-ins with the same names).

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
    >>> g.accept_tokens("r1", [50256]), g.is_terminated()
    (True, True)
"""

from __future__ import annotations

import enum
import json
import logging
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Optional, Sequence

import numpy as np

from . import _native
from .bitmask import allocate_token_bitmask
from .compiler import compile as _compile
from .errors import CorralError, UsageError
from .fill_guard import fill_or_end
from .logits import apply_token_bitmask_inplace
from .vocab import Vocabulary

__all__ = [
    "CorralBackend",
    "CorralGrammar",
    "LogitsProcessor",
    "StructuredOutputOptions",
    "SUPPORTED_VLLM_VERSIONS",
    "build_grammar",
    "patch_vllm",
    "vllm_plugin",
    "VLLM_AVAILABLE",
]

#: The vLLM releases this adapter is tested against (``make test-engines``).
SUPPORTED_VLLM_VERSIONS = ("0.33.0",)

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


def _fill_full(bitmask: Any, idx: int, masked_ids: Sequence[int] = ()) -> None:
    """Sets row ``idx`` to all ones (torch tensor or numpy array), then clears ``masked_ids``."""
    row = bitmask[idx]
    if hasattr(row, "fill_"):
        row.fill_(-1)
        if masked_ids and row.device.type != "cpu":
            words = np.full(row.shape[-1], 0xFFFFFFFF, dtype=np.uint32)
            for t in masked_ids:
                words[t >> 5] &= ~np.uint32(1 << (t & 31))
            import torch

            row.copy_(torch.from_numpy(words.view(np.int32)))
            return
    else:
        row.fill(np.int32(-1))
    if masked_ids:
        words = _row_words(bitmask, idx)
        for t in masked_ids:
            words[t >> 5] &= ~np.uint32(1 << (t & 31))


def _row_words(bitmask: Any, idx: int) -> np.ndarray:
    """Row ``idx`` of an int32 CPU bitmask (torch or numpy) as writable uint32 words."""
    row = bitmask[idx]
    words: np.ndarray = (row.numpy() if hasattr(row, "numpy") else row).view(np.uint32)
    return words


def _likely_lark(text: str) -> bool:
    """vLLM's rule (``grammar_is_likely_lark``): a grammar with no ``::=`` outside comments is Lark."""
    for line in text.split("\n"):
        if "::=" in re.sub(r"(#|//).*$", "", line):
            return False
    return True


def _choice_grammar(choices: Sequence[Any]) -> "_native.Grammar":
    return _native.Grammar.from_regex("|".join(re.escape(str(c)) for c in choices))


def build_grammar(kind: str, spec: Any, *, any_whitespace: bool = True) -> "_native.Grammar":
    """The corral grammar for one vLLM request: ``kind`` is a ``StructuredOutputOptions``
    name (``"JSON"``, ``"JSON_OBJECT"``, ``"REGEX"``, ``"GRAMMAR"``, ``"CHOICE"``,
    ``"STRUCTURAL_TAG"``), ``spec`` its text (a JSON Schema, a regex, GBNF or Lark -- told
    apart as vLLM does -- a JSON list of choices, a structural tag).

    Raises a :class:`corral.CorralError` naming the problem (a JSON pointer or line:col).

    Example::

        >>> from corral.vllm import build_grammar
        >>> build_grammar("GRAMMAR", 'start: "a" | "b"').num_rules > 0
        True
    """
    if kind == "JSON":
        return _native.Grammar.from_json_schema(spec, whitespace="flexible" if any_whitespace else "compact")
    if kind == "JSON_OBJECT":
        return _native.Grammar.from_json_schema('{"type": "object"}', whitespace="flexible" if any_whitespace else "compact")
    if kind == "REGEX":
        return _native.Grammar.from_regex(spec)
    if kind == "GRAMMAR":
        return _native.Grammar.from_lark(spec) if _likely_lark(spec) else _native.Grammar.from_ebnf(spec, "root")
    if kind == "CHOICE":
        return _choice_grammar(json.loads(spec) if isinstance(spec, str) else list(spec))
    if kind == "STRUCTURAL_TAG":
        return _native.Grammar.from_structural_tag(spec)
    raise UsageError(f"corral's vLLM backend does not know the request kind {kind}")


class _GrammarCache:
    """A small LRU of built grammars by (kind, spec, whitespace): the front end's validation
    and the engine's compile build the same grammar when they run in one process."""

    def __init__(self, size: int = 256) -> None:
        self._d: "OrderedDict[Any, Any]" = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, kind: str, spec: str, any_whitespace: bool) -> Any:
        key = (kind, spec, any_whitespace)
        with self._lock:
            g = self._d.get(key)
            if g is not None:
                self._d.move_to_end(key)
                return g
        g = build_grammar(kind, spec, any_whitespace=any_whitespace)
        with self._lock:
            self._d[key] = g
            while len(self._d) > self._size:
                self._d.popitem(last=False)
        return g


_GRAMMARS = _GrammarCache()


@dataclass(eq=False)
class CorralGrammar(_BaseGrammar):  # type: ignore[misc,valid-type]
    """One request's grammar (a :class:`corral.Matcher`) as vLLM V1's scheduler drives it.

    ``stop_ids``: the request's stop tokens (vLLM's ``all_stop_token_ids``: EOS and user
    stop ids), when they differ from the vocabulary's EOS set. They are allowed exactly
    where the grammar may end, and accepting one terminates the grammar; the vocabulary's
    other EOS ids are never allowed. ``None`` uses the vocabulary's EOS ids as they are.

    The speculative-decoding lifecycle (``StructuredOutputManager.grammar_bitmask``): for a
    request with drafts ``d1..dk`` it fills row ``i``, accepts ``d(i+1)``, fills the next row,
    ..., fills the bonus row, then ``rollback(k)``; after a draft EOS the grammar is
    terminated and the manager fills the remaining rows itself. Rolling back un-terminates it.
    """

    matcher: Any = field(repr=False)
    vocab_size: int = 0
    stop_ids: Optional[frozenset[int]] = field(default=None, repr=False)
    num_processed_tokens: int = field(default=0, repr=False)
    _is_terminated: bool = field(default=False, repr=False)
    #: A stop id ended the grammar (``stop_ids`` only): it was not fed to the matcher.
    _stopped: bool = field(default=False, repr=False)
    #: A fill ran past the grammar's ``max_fill_ms``: its row allowed only EOS and the grammar
    #: stays terminated (rollbacks included) until :meth:`reset` (see :mod:`corral.fill_guard`).
    _ended: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        eos = frozenset(int(t) for t in self.matcher.compiled.vocab.eos_token_ids)
        if self.stop_ids is not None and frozenset(self.stop_ids) == eos:
            self.stop_ids = None
        #: The ids whose bits a fill must fix: the stop ids and the vocabulary's EOS ids.
        self._fix_ids = None if self.stop_ids is None else sorted(self.stop_ids | eos)

    def _end(self) -> None:
        self._ended = self._is_terminated = True

    def _update(self) -> None:
        self._is_terminated = self._ended or self._stopped or self.matcher.is_terminated()

    def _accept_one(self, token: int) -> bool:
        if self.stop_ids is not None and token in self._fix_ids:  # type: ignore[operator]
            if token in self.stop_ids and self.matcher.is_accepting():
                self._stopped = True
                return True
            return False
        return bool(self.matcher.accept_token(token))

    def accept_tokens(self, request_id: str, tokens: List[int]) -> bool:
        """Accepts ``tokens`` in order (vLLM 0.33's xgrammar semantics).

        * Already terminated: True, and the tokens are ignored.
        * A token that terminates the grammar ends the call: later tokens of the same
          chunk are ignored and the result is True.
        * A rejected token: False (logged); the tokens before it stay accepted.
        """
        if self._is_terminated:
            return True
        for token in tokens:
            if not self._accept_one(int(token)):
                logger.error("corral: failed to advance the grammar of request %s at token %s", request_id, token)
                self._update()
                return False
            self.num_processed_tokens += 1
            self._update()
            if self._is_terminated:
                break
        return True

    def validate_tokens(self, tokens: List[int]) -> List[int]:
        """The longest prefix of ``tokens`` the grammar accepts (stopping at a token that
        terminates it); the state is unchanged."""
        if self._is_terminated or not tokens:
            return []
        ids = [int(t) for t in tokens]
        if self.stop_ids is None:
            return list(tokens[: self.matcher.validate_tokens(ids)])
        cut = next((i for i, t in enumerate(ids) if t in self._fix_ids), len(ids))  # type: ignore[operator]
        n = self.matcher.validate_tokens(ids[:cut])
        if n < cut or cut == len(ids) or ids[cut] not in self.stop_ids:
            return list(tokens[:n])
        for t in ids[:cut]:
            self.matcher.accept_token(t)
        ends = self.matcher.is_accepting()
        if cut:
            self.matcher.rollback(cut)
        return list(tokens[: cut + 1 if ends else cut])

    def rollback(self, num_tokens: int) -> None:
        if num_tokens <= 0:
            return
        self.num_processed_tokens -= num_tokens
        if self._stopped:
            self._stopped = False
            num_tokens -= 1
        if num_tokens:
            self.matcher.rollback(num_tokens)
        self._update()

    def _fix_row(self, bitmask: Any, idx: int) -> None:
        """Stop ids allowed exactly where the grammar may end; other EOS ids never."""
        words = _row_words(bitmask, idx)
        ends = self.matcher.is_accepting()
        for t in self._fix_ids:  # type: ignore[union-attr]
            if ends and t in self.stop_ids:  # type: ignore[operator]
                words[t >> 5] |= np.uint32(1 << (t & 31))
            else:
                words[t >> 5] &= ~np.uint32(1 << (t & 31))

    def fill_bitmask(self, bitmask: Any, idx: int) -> None:
        if self._is_terminated:
            _fill_full(bitmask, idx)
            return
        fill_or_end([self.matcher], bitmask, [int(idx)], lambda _: self._end())
        if self.stop_ids is not None and not self._is_terminated:
            self._fix_row(bitmask, int(idx))

    def is_terminated(self) -> bool:
        return self._is_terminated

    def reset(self) -> None:
        self.num_processed_tokens = 0
        self._is_terminated = self._ended = self._stopped = False
        self.matcher.reset()


# dataclass(eq=False) keeps vLLM's StructuredOutputBackend dataclass fields
# (vllm_config, tokenizer, vocab_size) as the constructor, as for XgrammarBackend.
@dataclass(eq=False)
class CorralBackend(_BaseBackend):  # type: ignore[misc,valid-type]
    """vLLM V1 ``StructuredOutputBackend``: ``CorralBackend(vllm_config, tokenizer, vocab_size)``.

    ``tokenizer`` is vLLM's Hugging Face tokenizer (or a :class:`corral.Vocabulary`). JSON
    requests use flexible whitespace, or none when vLLM's ``disable_any_whitespace`` is set.
    Grammars are cached per (kind, spec) in a small LRU and per (grammar, vocabulary) in
    :func:`corral.compile`, whose cache is bounded by corral's memory budget: set it with
    ``--additional-config '{"corral_memory_budget": "512MiB"}'`` (bytes or a string such as
    ``"2G"``; :func:`corral.set_memory_budget`) or ``CORRAL_MEMORY_BUDGET`` in the
    environment; default 128 MiB.
    """

    def __post_init__(self) -> None:
        extra = getattr(self.vllm_config, "additional_config", None)
        budget = extra.get("corral_memory_budget") if isinstance(extra, dict) else None
        if budget is not None:
            from .memory import set_memory_budget

            set_memory_budget(budget)
        so_cfg = getattr(self.vllm_config, "structured_outputs_config", None)
        self.any_whitespace = not bool(getattr(so_cfg, "disable_any_whitespace", False))
        if isinstance(self.tokenizer, Vocabulary):
            self.vocab = self.tokenizer
        else:
            self.vocab = Vocabulary.from_huggingface(self.tokenizer, vocab_size=self.vocab_size)

    def compile_grammar(self, request_type: Any, grammar_spec: str, stop_token_ids: Optional[Iterable[int]] = None) -> CorralGrammar:
        """Compiles one request's grammar; ``stop_token_ids`` are the request's stop ids
        (vLLM passes ``SamplingParams.all_stop_token_ids``). Raises a
        :class:`corral.CorralError`, which vLLM turns into that request's failure."""
        kind = getattr(request_type, "name", str(request_type))
        compiled = _compile(_GRAMMARS.get(kind, grammar_spec, self.any_whitespace), self.vocab)
        stops = frozenset(int(t) for t in stop_token_ids) if stop_token_ids else None
        return CorralGrammar(matcher=_native.Matcher(compiled), vocab_size=self.vocab_size, stop_ids=stops)

    def allocate_token_bitmask(self, max_num_seqs: int) -> Any:
        """All-ones int32 ``(max_num_seqs, ceil(vocab_size / 32))`` CPU tensor (vLLM sends it
        to the workers as a numpy array)."""
        return allocate_token_bitmask(max_num_seqs, self.vocab_size)

    @staticmethod
    def fill_bitmasks(batch: Iterable[Sequence[Any]], bitmask: Any) -> None:
        """Fills the ``(grammar, row, apply_bitmask, masked_ids)`` entries of vLLM's
        ``StructuredOutputManager._fill_bitmasks`` in one parallel call.

        Rows of corral grammars that apply and are not terminated are filled; other grammars
        fill their own rows; every other row allows all tokens except ``masked_ids`` (the
        reasoning-end tokens the grammar cannot start with, while the request reasons). A fill
        past its grammar's ``max_fill_ms`` ends that request (an EOS-only row, the grammar
        terminated; :mod:`corral.fill_guard`) instead of raising in the engine's step."""
        gs, ms, rows = [], [], []
        for entry in batch:
            grammar, index, apply = entry[0], int(entry[1]), entry[2]
            masked = entry[3] if len(entry) > 3 else ()
            if apply and not grammar.is_terminated():
                if isinstance(grammar, CorralGrammar):
                    gs.append(grammar)
                    ms.append(grammar.matcher)
                    rows.append(index)
                else:
                    grammar.fill_bitmask(bitmask, index)
            else:
                _fill_full(bitmask, index, masked)
        if ms:
            fill_or_end(ms, bitmask, rows, lambda i: gs[i]._end())
            for g, r in zip(gs, rows):
                if g.stop_ids is not None and not g._is_terminated:
                    g._fix_row(bitmask, r)

    def destroy(self) -> None:
        pass


# ------------------------------------------------------------------------------ enabling

_PATCHED = {"done": False}


def _check_version() -> Any:
    try:
        import vllm  # type: ignore
    except Exception as e:  # noqa: BLE001
        raise UsageError(
            f"corral.vllm.patch_vllm() needs vLLM {' or '.join(SUPPORTED_VLLM_VERSIONS)}, which is not importable here: {e}"
        ) from e
    version = getattr(vllm, "__version__", "unknown")
    if version not in SUPPORTED_VLLM_VERSIONS:
        raise UsageError(
            f"corral supports vLLM {', '.join(SUPPORTED_VLLM_VERSIONS)}; this is vLLM {version}. "
            "Install a supported version (pip install vllm==" + SUPPORTED_VLLM_VERSIONS[-1] + ")."
        )
    return vllm


def _validate_request(sampling_params: Any) -> None:
    """Replaces vLLM's ``validate_xgrammar_grammar``: corral decides which requests it can
    serve, and a refused request fails with corral's message (a JSON pointer, a line:col)."""
    from vllm.exceptions import VLLMValidationError  # type: ignore
    from vllm.sampling_params import check_json_nesting  # type: ignore
    from vllm.v1.structured_output.utils import choice_as_grammar  # type: ignore

    so = sampling_params.structured_outputs
    if so is None:
        return

    def build(kind: str, spec: Any, what: str) -> None:
        # corral's own error goes up (a ValueError: the API server answers 400), not a
        # VLLMValidationError, which "auto" would catch to fall back to another backend --
        # one the engine, already on corral, then refuses with a less useful message.
        try:
            _GRAMMARS.get(kind, spec, True)
        except CorralError as e:
            e.args = (f"corral cannot serve this {what}: {e}",)
            raise

    if so.regex is not None:
        if "\x00" in so.regex:
            raise ValueError("structured_outputs.regex must not contain a NUL character ('\\x00')")
        build("REGEX", so.regex, "regex")
        return
    if so.choice:
        grammar = choice_as_grammar(so.choice)
        build("GRAMMAR", grammar, "choice")
        so.choice = None
        so.grammar = grammar
        return
    if so.json is not None:
        check_json_nesting(so.json)
        spec = so.json if isinstance(so.json, str) else json.dumps(so.json)
        build("JSON", spec, "JSON schema")
        return
    if so.json_object:
        return
    if so.grammar:
        build("GRAMMAR", so.grammar, "grammar")
        return
    if so.structural_tag:
        check_json_nesting(so.structural_tag, structural_tag=True)
        build("STRUCTURAL_TAG", so.structural_tag, "structural tag")
        return
    raise VLLMValidationError("corral's structured outputs backend does not support this structured outputs specification")


def patch_vllm() -> None:
    """Makes vLLM serve structured-output requests with corral (in this process).

    vLLM builds its backend from a fixed set of names and has no registry, so corral takes
    the ``xgrammar`` backend's place: with ``structured_outputs_config.backend`` ``"auto"``
    (the default) or ``"xgrammar"``, every structured request is validated and served by
    corral. Patched:

    * ``vllm.v1.structured_output.XgrammarBackend`` -> :class:`CorralBackend`;
    * ``backend_xgrammar.validate_xgrammar_grammar`` (the front end's check, which also
      decides ``auto``) -> corral's own: a request corral refuses fails with corral's message;
    * ``StructuredOutputManager._fill_bitmasks`` -> one parallel corral call per batch.

    The scheduler runs in the engine-core process and validation in the API server: patch
    both (``CORRAL_VLLM=1`` with corral's ``vllm.general_plugins`` entry point does), or run
    with ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` and call this before creating the ``LLM``.

    Raises:
        UsageError: vLLM is missing, or not a supported version (:data:`SUPPORTED_VLLM_VERSIONS`).
    """
    _check_version()
    if _PATCHED["done"]:
        return
    import vllm.v1.structured_output as so  # type: ignore
    import vllm.v1.structured_output.backend_xgrammar as bx  # type: ignore

    so.XgrammarBackend = CorralBackend
    bx.validate_xgrammar_grammar = _validate_request
    mgr = so.StructuredOutputManager
    original = mgr._fill_bitmasks

    def _fill_bitmasks(self: Any, batch: Any) -> None:
        batch = list(batch)
        if any(isinstance(entry[0], CorralGrammar) for entry in batch):
            CorralBackend.fill_bitmasks(batch, self._grammar_bitmask)
        else:
            original(self, batch)

    mgr._fill_bitmasks = _fill_bitmasks
    _PATCHED["done"] = True


def vllm_plugin() -> None:
    """The ``vllm.general_plugins`` entry point corral installs (``corral``). vLLM runs it in
    every process it starts; it enables corral (:func:`patch_vllm`) when the environment
    variable ``CORRAL_VLLM`` is ``1``, and does nothing otherwise, so installing corral beside
    vLLM changes nothing until asked."""
    if os.environ.get("CORRAL_VLLM", "0").strip().lower() in ("1", "true", "yes", "on"):
        patch_vllm()


# ------------------------------------------------------------------------------ logits-processor route

#: The key of ``SamplingParams.extra_args`` that carries a request's grammar on the
#: logits-processor route: ``{"corral": {"json": schema}}`` (or ``regex``, ``grammar``,
#: ``choice``, ``json_object``, ``structural_tag``).
EXTRA_ARGS_KEY = "corral"
_ROUTE_KINDS = {"json": "JSON", "json_object": "JSON_OBJECT", "regex": "REGEX", "grammar": "GRAMMAR", "choice": "CHOICE", "structural_tag": "STRUCTURAL_TAG"}


def _route_spec(params: Any) -> Optional[tuple[Any, ...]]:
    """(kind, spec) of a request on the logits-processor route, or None when it has none."""
    extra = getattr(params, "extra_args", None) or {}
    spec = extra.get(EXTRA_ARGS_KEY)
    if spec is None:
        return None
    if isinstance(spec, str):  # the OpenAI server's vllm_xargs holds strings, not dicts
        try:
            spec = json.loads(spec)
        except ValueError as e:
            raise UsageError(f"extra_args['{EXTRA_ARGS_KEY}'] is not valid JSON: {e}") from e
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in _ROUTE_KINDS:
        raise UsageError(
            f"extra_args['{EXTRA_ARGS_KEY}'] must be a dict with one key of {sorted(_ROUTE_KINDS)}, got {spec!r}"
        )
    key, value = next(iter(spec.items()))
    kind = _ROUTE_KINDS[key]
    if kind == "JSON_OBJECT":
        value = ""
    elif kind in ("JSON", "CHOICE", "STRUCTURAL_TAG") and not isinstance(value, str):
        value = json.dumps(value)
    return kind, value


if VLLM_AVAILABLE:
    try:
        from vllm.v1.sample.logits_processor import AdapterLogitsProcessor as _Adapter  # type: ignore
    except Exception:  # noqa: BLE001 - another vLLM layout: the route is missing, the backend is not
        _Adapter = None
else:
    _Adapter = None

if _Adapter is not None:

    class CorralLogitsProcessor(_Adapter):  # type: ignore[misc,valid-type,unused-ignore]  # (Any without vLLM)
        """vLLM's supported per-request logits-processor interface, carrying a corral grammar
        in ``SamplingParams.extra_args``: no monkeypatching.

        Enable it with ``LLM(..., logits_processors=["corral.vllm:CorralLogitsProcessor"])``
        or ``vllm serve ... --logits-processors corral.vllm:CorralLogitsProcessor``; send
        ``SamplingParams(extra_args={"corral": {"json": schema}})``; through the OpenAI
        server, ``"vllm_xargs": {"corral": "{\\"json\\": {...}}"}`` (its values are strings,
        so the spec is JSON text there). vLLM applies it before penalties and temperature. It does not combine with speculative decoding (vLLM refuses
        custom logits processors there): use :func:`patch_vllm` for that.
        """

        def __init__(self, vllm_config: Any, device: Any, is_pin_memory: bool) -> None:
            super().__init__(vllm_config, device, is_pin_memory)
            from vllm.tokenizers import cached_tokenizer_from_config  # type: ignore

            model_config = vllm_config.model_config
            tokenizer = cached_tokenizer_from_config(model_config=model_config)
            self.vocab = Vocabulary.from_huggingface(tokenizer, vocab_size=model_config.get_vocab_size())
            so_cfg = getattr(vllm_config, "structured_outputs_config", None)
            self.any_whitespace = not bool(getattr(so_cfg, "disable_any_whitespace", False))

        @classmethod
        def validate_params(cls, sampling_params: Any) -> None:
            """Refuses a request whose grammar corral cannot compile (HTTP 400 with corral's message)."""
            spec = _route_spec(sampling_params)
            if spec is not None:
                _GRAMMARS.get(spec[0], spec[1], True)

        def is_argmax_invariant(self) -> bool:
            return False

        def new_req_logits_processor(self, params: Any) -> Any:
            spec = _route_spec(params)
            if spec is None:
                return None
            compiled = _compile(_GRAMMARS.get(spec[0], spec[1], self.any_whitespace), self.vocab)
            return LogitsProcessor(compiled, vocab=self.vocab)

    __all__.append("CorralLogitsProcessor")


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
