"""Sampling the next token from logits, under a grammar mask, with per-row parameters.

:func:`sample` applies, in exactly this order:

1. **grammar mask** -- disallowed tokens get -inf (:func:`corral.apply_token_bitmask_inplace`).
   First, so that no later stage can leave a row with nothing legal: truncating first and
   masking after could keep only illegal tokens.
2. **penalties** on the tokens of ``output_ids`` (:func:`apply_penalties`):

   * ``repetition_penalty`` (Hugging Face ``RepetitionPenaltyLogitsProcessor`` / vLLM /
     CTRL convention): each token that occurs at least once has its logit divided by the
     penalty when positive, multiplied by it when negative (``> 1`` discourages repeats);
   * ``frequency_penalty`` and ``presence_penalty`` (OpenAI / vLLM convention): ``logit -=
     frequency_penalty * count + presence_penalty * (count > 0)``.

   Masked tokens stay -inf (a penalty never resurrects a token the grammar forbids).
   ``output_ids`` are usually the generated tokens; pass prompt + output to mimic Hugging Face,
   whose repetition penalty also counts the prompt.
3. **temperature**: logits divided by ``temperature``; ``temperature == 0`` is greedy
   (argmax of the penalized logits: no randomness, truncation irrelevant).
4. **truncation** (:func:`apply_truncation`): ``top_k`` (keep the k most likely tokens) and
   ``top_p`` (keep the smallest set of most likely tokens whose probability reaches top_p)
   are computed on the same distribution and both apply, so the stricter one wins at each
   step (this differs slightly from Hugging Face, which computes top-p after renormalizing
   the top-k set); then ``min_p`` (keep tokens with probability >= min_p times the largest).
5. **draw**: ``torch.multinomial`` on the renormalized probabilities, with the row's seeded
   generator (``SamplingParams.seed``), else ``generator``, else torch's global RNG.

Example::

    >>> import torch, corral
    >>> logits = torch.tensor([[0.0, 5.0, 1.0, 3.0]])
    >>> mask = corral.allocate_token_bitmask(1, 4)
    >>> mask[0, 0] = 0b1101              # token 1 (the most likely) is not allowed
    >>> corral.sample(logits, corral.SamplingParams(temperature=0.0), bitmask=mask).tolist()
    [3]
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence, Union

import numpy as np
import torch

from .errors import EmptyMaskError, UsageError
from .logits import apply_token_bitmask_inplace

__all__ = ["SamplingParams", "sample", "probabilities", "apply_penalties", "apply_temperature", "apply_truncation"]


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


@dataclass
class SamplingParams:
    """How to pick the next token of one sequence (see the module documentation for the order).

    Attributes:
        temperature: ``>= 0``; 0 is greedy (argmax).
        top_k: keep the k most likely tokens; 0 disables.
        top_p: nucleus mass in ``(0, 1]``; 1 disables.
        min_p: in ``[0, 1]``; keep tokens with probability >= min_p x the largest; 0 disables.
        repetition_penalty: ``> 0``; 1 disables (HF/vLLM convention: divide positive logits,
            multiply negative ones, once per distinct token in ``output_ids``).
        presence_penalty: subtracted once from each token present in ``output_ids``.
        frequency_penalty: subtracted per occurrence in ``output_ids``.
        seed: when set, the row draws from a generator owned by this object, seeded on first
            use and advanced by every draw: the same params object replays the same draws for
            the same logits. :meth:`reseed` starts over.

    Setting both ``top_k`` and ``top_p`` emits one :class:`UserWarning`: both apply, so the
    stricter one wins.

    >>> SamplingParams(temperature=0.7, top_p=0.9).top_p
    0.9
    >>> SamplingParams(top_p=1.5)
    Traceback (most recent call last):
    ...
    corral.errors.UsageError: top_p must be in (0, 1], got 1.5
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: Union[int, None] = None
    _generators: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        def finite(name: str) -> float:
            v = getattr(self, name)
            if not _is_num(v) or not math.isfinite(v):
                raise UsageError(f"{name} must be a finite number, got {v!r}")
            return float(v)

        if finite("temperature") < 0:
            raise UsageError(f"temperature must be >= 0 (0 is greedy), got {self.temperature!r}")
        if not _is_int(self.top_k) or self.top_k < 0:
            raise UsageError(f"top_k must be an int >= 0 (0 disables it), got {self.top_k!r}")
        if not 0 < finite("top_p") <= 1:
            raise UsageError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not 0 <= finite("min_p") <= 1:
            raise UsageError(f"min_p must be in [0, 1], got {self.min_p!r}")
        if finite("repetition_penalty") <= 0:
            raise UsageError(f"repetition_penalty must be > 0 (1 disables it), got {self.repetition_penalty!r}")
        finite("presence_penalty")
        finite("frequency_penalty")
        if self.seed is not None and (not _is_int(self.seed) or not 0 <= self.seed < 2**64):
            raise UsageError(f"seed must be None or an int in [0, 2**64), got {self.seed!r}")
        if self.top_k > 0 and self.top_p < 1:
            warnings.warn(
                f"SamplingParams: top_k={self.top_k} and top_p={self.top_p} are both set; both truncations "
                "apply to the same distribution, so at each step the stricter one (the one keeping fewer "
                "tokens) wins",
                UserWarning,
                stacklevel=3,
            )

    @property
    def greedy(self) -> bool:
        """Whether this is greedy decoding (temperature 0)."""
        return self.temperature == 0

    @property
    def has_penalties(self) -> bool:
        """Whether any penalty is active."""
        return self.repetition_penalty != 1 or self.presence_penalty != 0 or self.frequency_penalty != 0

    def generator(self, device: Any = "cpu") -> Union["torch.Generator", None]:
        """This row's seeded generator on ``device`` (None without a seed)."""
        if self.seed is None:
            return None
        dev = torch.device(device)
        key = str(dev)
        g = self._generators.get(key)
        if g is None:
            g = torch.Generator(device=dev)
            g.manual_seed(self.seed)
            self._generators[key] = g
        return g

    def reseed(self) -> None:
        """Restarts the seeded generator (the next draws replay the first ones)."""
        self._generators.clear()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_generators"] = {}  # generators are process-local (and not picklable)
        return state


ParamsArg = Union[SamplingParams, Sequence[SamplingParams]]
OutputIds = Union[Sequence[Sequence[int]], Sequence[int], "torch.Tensor", np.ndarray, None]


def _params_list(params: ParamsArg, rows: int) -> list[SamplingParams]:
    if isinstance(params, SamplingParams):
        return [params] * rows
    try:
        out = list(params)
    except TypeError:
        raise UsageError(f"params must be a SamplingParams or a list of one per row, got {type(params).__name__}") from None
    if len(out) != rows:
        raise UsageError(f"got {len(out)} SamplingParams for {rows} rows")
    for p in out:
        if not isinstance(p, SamplingParams):
            raise UsageError(f"params must be SamplingParams, got {type(p).__name__}")
    return out


def _on(values: Sequence[Any], dtype: "torch.dtype", device: Any) -> "torch.Tensor":
    """``values`` as a tensor on ``device``. On CUDA the host copy is pinned and sent
    asynchronously, so building per-row parameters and row indices never blocks the host
    on the GPU (a pageable copy synchronises the stream)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.tensor(values, dtype=dtype, pin_memory=True).to(dev, non_blocking=True)
    return torch.tensor(values, dtype=dtype, device=dev)


def _as_2d_logits(logits: Any) -> Any:
    if isinstance(logits, np.ndarray):
        logits = torch.from_numpy(logits)
    if not isinstance(logits, torch.Tensor):
        raise UsageError(f"logits must be a torch tensor (or numpy array), got {type(logits).__name__}")
    if not logits.is_floating_point():
        raise UsageError(f"logits must be floating point, got {logits.dtype}")
    if logits.dim() == 1:
        return logits.unsqueeze(0)
    if logits.dim() != 2:
        raise UsageError(f"logits must be (batch, V) or (V,), got shape {tuple(logits.shape)}")
    return logits


def _counts(output_ids: OutputIds, rows: int, width: int, device: Any) -> "torch.Tensor":
    """(rows, width) float32 occurrence counts of the ids in ``output_ids``."""
    if isinstance(output_ids, np.ndarray):
        output_ids = torch.from_numpy(output_ids)
    if isinstance(output_ids, torch.Tensor):
        t = output_ids.to(device=device, dtype=torch.long)
        if t.dim() == 1:
            t = t.unsqueeze(0)
        if t.dim() != 2 or t.shape[0] != rows:
            raise UsageError(f"output_ids must have one row per logits row ({rows}), got shape {tuple(output_ids.shape)}")
        valid = t >= 0  # negative entries are padding
        if bool(((t >= width) & valid).any()):  # one host sync on GPU tensors
            raise UsageError(f"output_ids has a token id >= the logits width {width}")
        counts = torch.zeros(rows, width + 1, dtype=torch.float32, device=device)
        counts.scatter_add_(1, torch.where(valid, t, width), valid.to(torch.float32))
        return counts[:, :width]
    seqs: list[Any] = list(output_ids)  # type: ignore[arg-type]
    if seqs and all(_is_int(i) for i in seqs):
        seqs = [seqs]  # one flat list: a single row
    if len(seqs) != rows:
        raise UsageError(f"output_ids must have one list per logits row ({rows}), got {len(seqs)}")
    rix: list[int] = []
    cix: list[int] = []
    for r, seq in enumerate(seqs):
        for i in seq:
            i = int(i)
            if i < 0:
                continue
            if i >= width:
                raise UsageError(f"output_ids row {r} has token id {i} >= the logits width {width}")
            rix.append(r)
            cix.append(i)
    counts = torch.zeros(rows, width, dtype=torch.float32, device=device)
    if rix:
        idx = (_on(rix, torch.long, device), _on(cix, torch.long, device))
        counts.index_put_(idx, torch.ones(len(rix), dtype=torch.float32, device=device), accumulate=True)
    return counts


def apply_penalties(logits: "torch.Tensor", output_ids: OutputIds, params: ParamsArg) -> "torch.Tensor":
    """Applies the repetition, presence and frequency penalties in place and returns ``logits``.

    ``logits`` is float ``(batch, V)``; -inf entries stay -inf.

    >>> import torch
    >>> x = torch.tensor([[2.0, -2.0, 1.0, float("-inf")]])
    >>> p = SamplingParams(repetition_penalty=2.0, presence_penalty=0.5, frequency_penalty=0.25)
    >>> apply_penalties(x, [[0, 0, 1, 3]], p).tolist()
    [[0.0, -4.75, 1.0, -inf]]
    """
    rows, width = logits.shape
    plist = _params_list(params, rows)
    if output_ids is None or not any(p.has_penalties for p in plist):
        return logits
    dev = logits.device
    counts = _counts(output_ids, rows, width, dev)
    present = counts > 0
    masked = torch.isneginf(logits)
    rep = _on([p.repetition_penalty for p in plist], logits.dtype, dev).unsqueeze(1)
    penalized = torch.where(logits < 0, logits * rep, logits / rep)
    logits.copy_(torch.where(present, penalized, logits))
    freq = _on([p.frequency_penalty for p in plist], logits.dtype, dev).unsqueeze(1)
    pres = _on([p.presence_penalty for p in plist], logits.dtype, dev).unsqueeze(1)
    logits.sub_(freq * counts + pres * present.to(logits.dtype))
    logits.masked_fill_(masked, float("-inf"))
    return logits


def apply_temperature(logits: "torch.Tensor", params: ParamsArg) -> "torch.Tensor":
    """Divides each row by its temperature in place (rows with temperature 0 are left as they
    are: they are greedy) and returns ``logits``.

    >>> import torch
    >>> apply_temperature(torch.tensor([[1.0, 2.0], [1.0, 2.0]]),
    ...                   [SamplingParams(temperature=0.5), SamplingParams(temperature=0.0)]).tolist()
    [[2.0, 4.0], [1.0, 2.0]]
    """
    plist = _params_list(params, logits.shape[0])
    temps = [p.temperature if p.temperature > 0 else 1.0 for p in plist]
    if any(t != 1.0 for t in temps):
        logits.div_(_on(temps, logits.dtype, logits.device).unsqueeze(1))
    return logits


def apply_truncation(logits: "torch.Tensor", params: ParamsArg) -> "torch.Tensor":
    """Sets the logits of tokens removed by top-k, top-p and min-p to -inf, in place.

    top-k and top-p are computed on the same distribution (``softmax(logits)``) and both
    apply; min-p keeps tokens whose probability is at least ``min_p`` times the largest. At
    least the most likely token always survives.

    >>> import torch
    >>> x = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    >>> apply_truncation(x, SamplingParams(top_p=0.8)).isfinite().tolist()
    [[True, True, False, False]]
    >>> apply_truncation(torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])),
    ...                  SamplingParams(min_p=0.25)).isfinite().tolist()
    [[True, True, True, False]]
    """
    rows, width = logits.shape
    plist = _params_list(params, rows)
    dev = logits.device
    need_sort = any(p.top_k > 0 or p.top_p < 1 for p in plist)
    need_min_p = any(p.min_p > 0 for p in plist)
    if not need_sort and not need_min_p:
        return logits
    probs = torch.softmax(logits, dim=-1)
    remove = torch.zeros(rows, width, dtype=torch.bool, device=dev)
    if need_sort:
        sorted_p, order = probs.sort(dim=-1, descending=True, stable=True)
        rank = torch.arange(width, device=dev).unsqueeze(0)
        k = _on([p.top_k if p.top_k > 0 else width for p in plist], torch.long, dev).unsqueeze(1)
        top_p = _on([p.top_p for p in plist], probs.dtype, dev).unsqueeze(1)
        before = sorted_p.cumsum(dim=-1) - sorted_p  # mass strictly before each token
        drop_sorted = (rank >= k) | ((before >= top_p) & (top_p < 1))
        drop_sorted[:, 0] = False
        remove.scatter_(1, order, drop_sorted)
    if need_min_p:
        min_p = _on([p.min_p for p in plist], probs.dtype, dev).unsqueeze(1)
        remove |= probs < min_p * probs.max(dim=-1, keepdim=True).values
    logits.masked_fill_(remove, float("-inf"))
    return logits


def _empty_rows(x: "torch.Tensor") -> "torch.Tensor":
    # Rows with no usable logit (all -inf, or a NaN maximum). One reduction: an elementwise
    # isfinite over (batch, V) costs ~30x more on a busy CPU.
    return ~(x.amax(dim=1) > float("-inf"))


def _prepare(
    logits: Any, params: ParamsArg, bitmask: Any, output_ids: OutputIds, check_empty: bool | None
) -> "tuple[torch.Tensor, list[SamplingParams], torch.Tensor]":
    x = _as_2d_logits(logits)
    rows = x.shape[0]
    plist = _params_list(params, rows)
    x = x.to(torch.float32, copy=True)
    if bitmask is not None:
        apply_token_bitmask_inplace(x, bitmask, check_empty=check_empty)
        empty = _empty_rows(x)
    else:
        empty = _empty_rows(x)
        if check_empty is None and x.device.type == "cpu" or check_empty:
            bad = torch.nonzero(empty).flatten().tolist()
            if bad:
                raise EmptyMaskError(f"rows {bad} have no finite logit: nothing can be sampled")
    # Penalties keep finite logits finite, so `empty` stays valid.
    apply_penalties(x, output_ids, plist)
    return x, plist, empty


def probabilities(
    logits: Any,
    params: ParamsArg,
    *,
    bitmask: Any = None,
    output_ids: OutputIds = None,
    check_empty: bool | None = None,
) -> "torch.Tensor":
    """The distribution :func:`sample` draws from: float32 ``(batch, V)``, rows summing to 1
    (one-hot at the argmax for greedy rows). ``logits`` is not modified.

    >>> import torch
    >>> probabilities(torch.tensor([0.0, 0.0, 0.0]), SamplingParams(top_k=2)).tolist()
    [[0.5, 0.5, 0.0]]
    """
    x, plist, _ = _prepare(logits, params, bitmask, output_ids, check_empty)
    greedy = [p.greedy for p in plist]
    out = torch.empty_like(x)
    samp = [i for i, g in enumerate(greedy) if not g]
    if samp:
        part = len(samp) < len(plist)
        si = _on(samp, torch.long, x.device) if part else None
        y = x.index_select(0, si) if si is not None else x
        sp = [plist[i] for i in samp]
        apply_temperature(y, sp)
        apply_truncation(y, sp)
        y = torch.nan_to_num(torch.softmax(y, dim=-1), nan=0.0)
        if si is not None:
            out.index_copy_(0, si, y)
        else:
            out = y
    greedy_rows = [i for i, g in enumerate(greedy) if g]
    if greedy_rows:
        part = len(greedy_rows) < len(plist)
        gi = _on(greedy_rows, torch.long, x.device) if part else None
        g = x.index_select(0, gi) if gi is not None else x
        onehot = torch.zeros_like(g)
        onehot.scatter_(1, g.argmax(dim=-1, keepdim=True), 1.0)
        onehot.masked_fill_(_empty_rows(g).unsqueeze(1), 0.0)
        if gi is not None:
            out.index_copy_(0, gi, onehot)
        else:
            out = onehot
    return out


def sample(
    logits: Any,
    params: ParamsArg,
    *,
    bitmask: Any = None,
    generator: Union["torch.Generator", None] = None,
    output_ids: OutputIds = None,
    check_empty: bool | None = None,
) -> "torch.Tensor":
    """Samples one token per row: int64 tensor ``(batch,)`` on the logits' device.

    Args:
        logits: ``(batch, V)`` or ``(V,)`` float logits (torch, any device; or numpy). Not
            modified (work happens on a float32 copy). ``V`` may exceed the vocabulary
            (padding columns are masked with the bitmask).
        params: one :class:`SamplingParams` for every row, or a list of one per row.
        bitmask: the grammar's int32 bitmask ``(batch, words)`` (see
            :func:`corral.apply_token_bitmask_inplace`), applied first.
        generator: RNG for rows whose params have no seed (default: torch's global RNG).
        output_ids: the ids the penalties count, per row: a list of lists, a ``(batch, L)``
            tensor/array (negative entries are padding), or one flat list for a single row.
        check_empty: rows with nothing allowed raise :class:`~corral.EmptyMaskError`. Default:
            checked on CPU; on other devices only when True (the check syncs the host), and
            such rows get token -1 instead.

    >>> import torch
    >>> logits = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    >>> sample(logits, [SamplingParams(temperature=0.0), SamplingParams(seed=7, top_k=1)]).tolist()
    [2, 0]
    """
    x, plist, empty = _prepare(logits, params, bitmask, output_ids, check_empty)
    rows = x.shape[0]
    dev = x.device
    out = torch.empty(rows, dtype=torch.long, device=dev)
    greedy_rows = [i for i, p in enumerate(plist) if p.greedy]
    if len(greedy_rows) == rows:
        out = x.argmax(dim=-1)
    elif greedy_rows:
        gi = _on(greedy_rows, torch.long, dev)
        out.index_copy_(0, gi, x.index_select(0, gi).argmax(dim=-1))
    samp = [i for i, p in enumerate(plist) if not p.greedy]
    if samp:
        part = len(samp) < rows
        si = _on(samp, torch.long, dev) if part else None
        y = x.index_select(0, si) if si is not None else x
        sp = [plist[i] for i in samp]
        apply_temperature(y, sp)
        apply_truncation(y, sp)
        y.masked_fill_((empty.index_select(0, si) if si is not None else empty).unsqueeze(1), 0.0)
        probs = torch.softmax(y, dim=-1)
        unseeded = [j for j, p in enumerate(sp) if p.seed is None]
        if unseeded:
            if len(unseeded) < len(sp):
                pick = probs.index_select(0, _on(unseeded, torch.long, dev))
            else:
                pick = probs
            drawn = torch.multinomial(pick, 1, generator=generator).squeeze(1)
            if len(unseeded) == rows:
                out = drawn
            else:
                out.index_copy_(0, _on([samp[j] for j in unseeded], torch.long, dev), drawn)
        for j, p in enumerate(sp):
            if p.seed is not None:
                out[samp[j]] = torch.multinomial(probs[j], 1, generator=p.generator(dev))[0]
    return torch.where(empty, torch.full_like(out, -1), out)
