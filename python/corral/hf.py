"""Hugging Face transformers integration.

* :class:`LogitsProcessor` -- plugs a grammar into ``model.generate``: batch-aware (one matcher
  per row), stateful across calls, resets itself when a new ``generate()`` call starts.
* :func:`make_model_fn` -- wraps a causal LM as the ``model_fn`` of :func:`corral.generate`,
  with a KV cache (forced tokens are fed in one forward pass).
* :func:`vocabulary` -- the :class:`corral.Vocabulary` of a tokenizer, sized for a model.

Example (a tiny random GPT-2-shaped model, no download)::

    >>> import torch, transformers, corral, corral.hf
    >>> from transformers import GPT2Config, GPT2LMHeadModel, LogitsProcessorList
    >>> _ = torch.manual_seed(0)
    >>> model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=50257)).eval()
    >>> vocab = corral.builtin_vocabulary()
    >>> g = corral.Grammar.from_ebnf('root ::= "[" [0-9] ("," [0-9]){0,3} "]"')
    >>> proc = corral.hf.LogitsProcessor(corral.compile(g, vocab))
    >>> out = model.generate(torch.tensor([[50256], [50256]]), max_new_tokens=12, do_sample=True,
    ...                      logits_processor=LogitsProcessorList([proc]), pad_token_id=50256)
    >>> texts = [b"".join(vocab.token_bytes(t) for t in row[1:]) for row in out.tolist()]
    >>> import json
    >>> all(isinstance(json.loads(t), list) for t in texts)
    True
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence, Union

import torch

from . import _native
from .bitmask import allocate_token_bitmask
from .compiler import compile as _compile
from .errors import UsageError
from .fill_guard import eos_only_row, fill_or_end
from .logits import apply_token_bitmask_inplace
from .vocab import Vocabulary

__all__ = ["LogitsProcessor", "make_model_fn", "vocabulary"]

try:  # subclass transformers' base class when it is installed (isinstance checks, docs)
    from transformers import LogitsProcessor as _Base
except Exception:  # noqa: BLE001 - transformers missing or broken: plain object
    _Base = object  # type: ignore[assignment,misc]


class LogitsProcessor(_Base):  # type: ignore[misc,valid-type,unused-ignore]  # (Any without transformers)
    """Constrains ``model.generate`` to a grammar: ``logits_processor=LogitsProcessorList([proc])``.

    On each call it accepts, in each row's matcher, the tokens appended to ``input_ids`` since
    the previous call; fills one bitmask for the whole batch on corral's thread pool
    (:func:`corral.fill_next_token_bitmask_batch`) and masks ``scores`` in place
    (:func:`corral.apply_token_bitmask_inplace`; ``scores`` may be wider than the vocabulary,
    as for padded models). A row whose matcher accepted EOS allows only EOS from then on, so
    ``generate`` can finish it; the padding ``generate`` appends to finished rows is ignored.

    A new ``generate()`` call is detected (and the matchers reset) when the batch size
    changes, ``input_ids`` gets no longer than at the previous call, or the prompt changes.
    When rows are reordered (beam search), a row continues a copy of the matcher of the row
    whose previous ids it extends (or is rebuilt from scratch).

    A row whose mask fill runs past the grammar's ``max_fill_ms`` (a grammar too ambiguous at
    that point for the vocabulary) allows only EOS from then on, so ``generate`` finishes it
    with its output cut short there; the event is logged as an error on the ``corral`` logger
    and the other rows go on (as in the vLLM and SGLang adapters: :mod:`corral.fill_guard`).
    Only a vocabulary without EOS tokens gets the :class:`corral.FillTimeoutError` raised.

    Args:
        compiled_grammar: a :class:`corral.CompiledGrammar` (or a :class:`corral.Grammar`
            with ``vocab``).
        vocab: the vocabulary; default ``compiled_grammar.vocab``.
        check_empty: passed to :func:`corral.apply_token_bitmask_inplace`.

    Raises (when called):
        UsageError: a generated token is not allowed by the grammar (the mask was not
            applied before sampling: e.g. another processor changed the scores after this one).

    >>> import torch, corral
    >>> vocab = corral.Vocabulary.from_bytes([b"a", b"b", b""], eos_token_ids=[2])
    >>> proc = LogitsProcessor(corral.compile(corral.Grammar.from_regex("ab"), vocab))
    >>> proc(torch.tensor([[2]]), torch.zeros(1, 3)).tolist()        # prompt: [2]
    [[0.0, -inf, -inf]]
    >>> proc(torch.tensor([[2, 0]]), torch.zeros(1, 3)).tolist()     # "a" was generated
    [[-inf, 0.0, -inf]]
    """

    def __init__(
        self,
        compiled_grammar: Union[_native.CompiledGrammar, _native.Grammar],
        *,
        vocab: Union[Vocabulary, None] = None,
        check_empty: Union[bool, None] = None,
    ) -> None:
        if isinstance(compiled_grammar, _native.Grammar):
            if vocab is None:
                raise UsageError("LogitsProcessor(grammar) needs vocab=...; or pass corral.compile(grammar, vocab)")
            compiled_grammar = _compile(compiled_grammar, vocab)
        if not isinstance(compiled_grammar, _native.CompiledGrammar):
            raise UsageError(f"expected a corral.CompiledGrammar, got {type(compiled_grammar).__name__}")
        self.compiled = compiled_grammar
        self.vocab: Vocabulary = vocab if vocab is not None else compiled_grammar.vocab
        self.check_empty = check_empty
        self._size = self.vocab.size
        self._matchers: list[Any] | None = None
        # Rows ended after a fill past max_fill_ms (EOS only from then on).
        self._ended: list[bool] = []
        self._prompt: torch.Tensor | None = None  # the prompt (CPU)
        self._prev: torch.Tensor | None = None  # input_ids at the previous call (its device)
        self._seen = 0
        self._bitmask: torch.Tensor | None = None
        self._pinned = False

    # ------------------------------------------------------------------ state

    @property
    def matchers(self) -> list[Any]:
        """The per-row matchers of the current ``generate()`` call (empty before the first)."""
        return list(self._matchers or [])

    def reset(self) -> None:
        """Forgets the current batch: the next call starts fresh matchers."""
        self._matchers = None
        self._ended = []
        self._prompt = None
        self._prev = None
        self._seen = 0

    def _start(self, cur: torch.Tensor) -> None:
        rows, length = cur.shape
        self._matchers = [_native.Matcher(self.compiled) for _ in range(rows)]
        self._ended = [False] * rows
        self._prompt = cur.to("cpu", copy=True)

    def _refused(self, row: int, tok: int, before: Sequence[int]) -> UsageError:
        text = b"".join(self.vocab.token_bytes(t) for t in before[-60:])[-60:]
        return UsageError(
            f"row {row}: token {tok} ({self.vocab.token_bytes(tok)!r}) is not allowed after {text!r}: "
            "the grammar mask must be applied before sampling (is another logits processor changing "
            "the scores after this one?)"
        )

    def _accept(self, rows: Sequence[int], new: Sequence[Sequence[int]], before: Callable[[int], list[int]]) -> None:
        """Accepts ``new[k]`` in the matcher of row ``rows[k]`` (``before(k)``: the row's ids
        between the prompt and ``new[k]``, for an error message). Ended rows are skipped, as is
        what ``generate`` appends after EOS (padding)."""
        assert self._matchers is not None
        matchers = [self._matchers[r] for r in rows]
        width = max((len(n) for n in new), default=0)
        for j in range(width):
            toks = [n[j] if j < len(n) and not self._ended[r] else None for r, n in zip(rows, new)]
            bad = _native.accept_token_batch(matchers, toks)
            if bad >= 0:
                tok = toks[bad]
                assert tok is not None
                raise self._refused(rows[bad], tok, before(bad) + list(new[bad][:j]))

    def _advance(self, ids: torch.Tensor) -> bool:
        """Accepts the ids appended since the last call (``ids``: this call's input_ids, on
        its device); False when this is a new ``generate()`` call (the caller restarts)."""
        assert self._matchers is not None and self._prev is not None and self._prompt is not None
        seen, length = self._seen, ids.shape[1]
        plen = self._prompt.shape[1]
        # The common step: every row extends its previous ids (compared where they are, so
        # that only the appended ids travel to the host), one new token per row, one call for
        # the batch.
        if torch.equal(ids[:, :seen], self._prev):
            new = ids[:, seen:length].to("cpu")
            if length - seen == 1 and not any(self._ended):
                toks = new[:, 0].tolist()
                bad = _native.accept_token_batch(self._matchers, toks)
                if bad >= 0:
                    raise self._refused(bad, toks[bad], ids[bad, plen:seen].tolist())
                return True
            self._accept(range(new.shape[0]), new.tolist(), lambda k: ids[k, plen:seen].tolist())
            return True
        cur = ids.to("cpu", copy=True)
        if not torch.equal(cur[:, :plen], self._prompt):
            return False
        same = (cur[:, :seen] == self._prev.to("cpu")).all(dim=1).tolist()
        # Rows were reordered (beam search): each moved row continues a copy of the matcher
        # whose previous ids it extends, or is rebuilt from scratch.
        old_rows = self._prev[:, plen:].to("cpu").tolist()
        where: dict[tuple[int, ...], int] = {}
        for j, r in enumerate(old_rows):
            where.setdefault(tuple(r), j)
        gen = cur[:, plen:length].tolist()
        old_m, old_e = self._matchers, self._ended
        matchers: list[Any] = []
        ended: list[bool] = []
        pending: list[list[int]] = []
        for i in range(cur.shape[0]):
            if same[i]:
                matchers.append(old_m[i])
                ended.append(old_e[i])
                pending.append(gen[i][seen - plen :])
                continue
            src = where.get(tuple(gen[i][: seen - plen]))
            if src is not None:
                matchers.append(old_m[src].copy())
                ended.append(old_e[src])
                pending.append(gen[i][seen - plen :])
            else:
                matchers.append(_native.Matcher(self.compiled))
                ended.append(False)
                pending.append(gen[i])
        self._matchers, self._ended = matchers, ended
        self._accept(range(len(matchers)), pending, lambda k: gen[k][: len(gen[k]) - len(pending[k])])
        return True

    def _end(self, row: int) -> None:
        """Ends row ``row`` after its fill ran past the time budget (EOS only from now on)."""
        self._ended[row] = True

    # ------------------------------------------------------------------ call

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """Masks ``scores`` (batch, V) in place for the next token of each row; returns it."""
        if input_ids.dim() != 2 or scores.dim() != 2 or input_ids.shape[0] != scores.shape[0]:
            raise UsageError(
                f"expected input_ids (batch, len) and scores (batch, V) with the same batch, got "
                f"{tuple(input_ids.shape)} and {tuple(scores.shape)}"
            )
        rows, length = input_ids.shape
        ids = input_ids.detach()
        fresh = (
            self._matchers is None
            or len(self._matchers) != rows
            or length <= self._seen
            or self._prev is None
            or self._prev.device != ids.device
            or self._prompt is None
            or length < self._prompt.shape[1]
        )
        if fresh or not self._advance(ids):
            self._start(ids)
        # A copy (on the device): the caller may reuse the tensor's storage.
        self._prev = ids.clone()
        self._seen = length
        if rows == 0:
            return scores
        # corral's own allocation: a repeat fill or application checks one data pointer (a
        # plain torch tensor: pointer, shape, dtype and contiguity, ~0.3 µs more each). Pinned
        # when the scores are on a GPU, so the copy there is asynchronous — and only when
        # `input_ids` is there too: refilling the buffer at the next call is safe because that
        # call starts by reading `input_ids` on the host (a compare and a copy of the new ids),
        # which waits for the device's queued work, this copy included.
        pinned = scores.is_cuda and input_ids.is_cuda
        if self._bitmask is None or self._bitmask.shape[0] != rows or self._pinned != pinned:
            self._bitmask = allocate_token_bitmask(rows, self._size, pin_memory=pinned)
            self._pinned = pinned
        assert self._matchers is not None  # set with the rows
        if not any(self._ended):
            live: Sequence[int] = range(rows)
            fill_or_end(self._matchers, self._bitmask, live, self._end)
        else:
            live = [i for i, e in enumerate(self._ended) if not e]
            for i in range(rows):
                if self._ended[i]:
                    eos_only_row(self._bitmask, i, self.compiled.vocab.eos_token_ids)
            if live:
                fill_or_end([self._matchers[i] for i in live], self._bitmask, live, lambda k: self._end(live[k]))
        apply_token_bitmask_inplace(scores, self._bitmask, vocab_size=self._size, check_empty=self.check_empty)
        return scores


def vocabulary(tokenizer: Any, model: Any = None, **kwargs: Any) -> Vocabulary:
    """The vocabulary of a Hugging Face tokenizer, sized for ``model``'s logits
    (``model.config.vocab_size``, when larger than the tokenizer). ``kwargs`` go to
    :meth:`corral.Vocabulary.from_huggingface`.

    >>> from tokenizers import Tokenizer, models
    >>> tok = Tokenizer(models.BPE({"a": 0, "</s>": 1}, []))
    >>> vocabulary(tok).size
    2
    """
    if model is not None and "vocab_size" not in kwargs:
        size = getattr(getattr(model, "config", None), "vocab_size", None)
        if isinstance(size, int) and size > 0:
            kwargs["vocab_size"] = size
    return Vocabulary.from_huggingface(tokenizer, **kwargs)


def make_model_fn(model: Any, *, device: Union[str, "torch.device", None] = None) -> Callable[[list[int]], torch.Tensor]:
    """Wraps a transformers causal LM as ``model_fn(ids) -> logits (V,)`` for
    :func:`corral.generate`, keeping a KV cache: a call whose ids extend the previous call's
    ids feeds only the new tokens (several at once after a forced run); any other call starts
    over. Runs under ``torch.no_grad()``; ``ids`` must not be empty (start with a BOS id).

    >>> import torch
    >>> from transformers import GPT2Config, GPT2LMHeadModel
    >>> _ = torch.manual_seed(0)
    >>> model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=100)).eval()
    >>> fn = make_model_fn(model)
    >>> a = fn([1, 2, 3]); b = fn([1, 2, 3, 4, 5])
    >>> torch.allclose(b, model(torch.tensor([[1, 2, 3, 4, 5]])).logits[0, -1], atol=1e-5)
    True
    """
    params = inspect.signature(model.forward).parameters
    cache_kw = "cache" if "cache" in params else "past_key_values"
    dev = torch.device(device) if device is not None else next(model.parameters()).device
    state: dict[str, Any] = {"ids": [], "cache": None}

    def model_fn(ids: Sequence[int]) -> torch.Tensor:
        ids = [int(i) for i in ids]
        if not ids:
            raise UsageError("make_model_fn: the model needs at least one input token (start the prompt with a BOS id)")
        prev = state["ids"]
        kwargs: dict[str, Any] = {"use_cache": True}
        if state["cache"] is not None and len(ids) > len(prev) and ids[: len(prev)] == prev:
            feed = ids[len(prev) :]
            kwargs[cache_kw] = state["cache"]
        else:
            feed = ids
        with torch.no_grad():
            out = model(input_ids=torch.tensor([feed], dtype=torch.long, device=dev), **kwargs)
        cache = out.get("cache") if hasattr(out, "get") else None
        state["cache"] = cache if cache is not None else getattr(out, "past_key_values", None)
        state["ids"] = ids
        logits: torch.Tensor = out.logits[0, -1]
        return logits

    return model_fn
