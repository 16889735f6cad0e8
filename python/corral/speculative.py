"""Grammar-aware speculative decoding: :func:`verify`, drafters, metrics, a decode loop.

A cheap *drafter* proposes ``k`` tokens; the target model scores all of them in one forward
pass (``k + 1`` rows of logits: one per prefix); :func:`verify` keeps the longest prefix of
drafts the target agrees with and appends one token sampled from the target (the correction
at the first rejection, or a *bonus* token when every draft passes). Under a grammar:

* drafts past the first grammar-illegal token are dropped before scoring
  (:meth:`corral.Matcher.validate_tokens`);
* every scored row of target logits is masked with the grammar's bitmask for its prefix (and
  so is the draft distribution), so the output is *exactly* constrained decoding from the
  target: token-for-token identical to :func:`corral.sample` at temperature 0, and equal in
  distribution when sampling (standard rejection rule, see :func:`verify`);
* grammar-forced runs (:func:`corral.forced.forced_tokens`) need no verification at all:
  :func:`generate` commits them directly.

Example::

    >>> import torch, corral, corral.speculative as spec
    >>> vocab = corral.Vocabulary.from_bytes([b"a", b"b", b"c", b""], eos_token_ids=[3])
    >>> m = corral.Matcher(corral.compile(corral.Grammar.from_regex("(ab|ac)+"), vocab))
    >>> logits = torch.tensor([[5.0, 0, 0, 0], [0, 0, 5.0, 0], [5.0, 0, 0, 0]])
    >>> r = spec.verify(logits, [0, 1], m, corral.SamplingParams(temperature=0.0))
    >>> r.tokens, r.accepted, r.emitted   # 'a' accepted; target prefers 'c' over draft 'b'
    ([0, 2], 1, 2)
    >>> m.num_accepted
    2

Logging: :class:`SpeculativeMetrics` are logged at debug level on the
``corral.speculative`` logger after each :func:`generate`.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional, Protocol, Sequence, Union, runtime_checkable

import numpy as np
import torch

from . import _native
from .errors import InternalError, TokenizerError, UsageError
from .forced import forced_tokens
from .generate import GenerationResult, _as_logits, _checked_args, _single_token
from .logits import apply_token_bitmask_inplace
from .sampling import SamplingParams, apply_penalties, apply_temperature, apply_truncation
from .vocab import Vocabulary

__all__ = [
    "verify",
    "VerifyResult",
    "Drafter",
    "NgramDrafter",
    "ModelDrafter",
    "SpeculativeMetrics",
    "SpeculativeResult",
    "expected_speedup",
    "AdaptivePolicy",
    "generate",
]

logger = logging.getLogger("corral.speculative")

ModelFn = Callable[[list[int]], Any]
VerifyFn = Callable[[list[int], int], Any]


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _vocab_size(matcher: Any) -> int:
    return int(matcher.compiled.vocab.size)


def _eos_set(matcher: Any) -> frozenset[int]:
    return frozenset(int(i) for i in matcher.compiled.vocab.eos_token_ids)


# --------------------------------------------------------------------------------------------
# verification


@dataclass
class VerifyResult:
    """What one :func:`verify` call decided.

    Attributes:
        tokens: the tokens appended to the matcher: the accepted drafts, then the correction
            (first rejection) or bonus token (all drafts accepted), unless an accepted draft
            was EOS (then nothing follows it).
        accepted: how many drafts were accepted.
        emitted: ``len(tokens)`` (``accepted`` + 1, or ``accepted`` after an EOS draft or
            with ``bonus=False``).
        proposed: drafts passed in.
        scored: drafts that were grammar-legal and so were scored (the rest were dropped).
        terminated: whether the matcher is terminated afterwards (EOS accepted).
        bonus: whether the last token is the bonus token (every scored draft passed).
    """

    tokens: list[int] = field(default_factory=list)
    accepted: int = 0
    emitted: int = 0
    proposed: int = 0
    scored: int = 0
    terminated: bool = False
    bonus: bool = False


def _as_rows(x: Any, what: str) -> "torch.Tensor":
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(x)
    if not isinstance(x, torch.Tensor):
        raise UsageError(f"{what} must be a torch tensor or numpy array, got {type(x).__name__}")
    if not x.is_floating_point():
        raise UsageError(f"{what} must be floating point, got {x.dtype}")
    if x.dim() == 1:
        x = x.unsqueeze(0)
    if x.dim() != 2:
        raise UsageError(f"{what} must be 2-D (positions, V), got shape {tuple(x.shape)}")
    out: torch.Tensor = x
    return out


def _fill_rows(matcher: Any, drafts: Sequence[int], rows: int, words: int) -> np.ndarray:
    """Bitmask rows 0..rows-1: row i after accepting ``drafts[:i]``; the matcher is rolled back.

    Sequential fill + accept on the one matcher (measured ~10-50 us for 9 rows of the JSON
    grammar over GPT-2, versus ~110-130 us for ``copy()`` per position +
    :func:`corral.fill_next_token_bitmask_batch`: copies cost more than warm fills)."""
    bm = np.empty((rows, words), dtype=np.int32)
    done = 0
    try:
        for i in range(rows):
            if i:
                if not matcher.accept_token(int(drafts[i - 1])):
                    raise InternalError(f"the matcher rejected draft {drafts[i - 1]} after validate_tokens accepted it")
                done += 1
            matcher.fill_next_token_bitmask(bm, i)
    finally:
        if done:
            matcher.rollback(done)
    return bm


def _target_rows(
    logits: "torch.Tensor", bm: np.ndarray, size: int, params: SamplingParams, seen: list[list[int]] | None
) -> "torch.Tensor":
    """Masked + penalized float32 logits (rows of ``bm``), the first stages of :func:`corral.sample`."""
    x = logits[: bm.shape[0]].to(torch.float32, copy=True).contiguous()
    apply_token_bitmask_inplace(x, torch.from_numpy(bm).to(x.device), vocab_size=size)
    if seen is not None:
        apply_penalties(x, seen, params)
    return x


def _target_probs(x: "torch.Tensor", params: SamplingParams) -> "torch.Tensor":
    """Temperature, truncation, softmax (the rest of :func:`corral.sample`'s pipeline)."""
    apply_temperature(x, params)
    apply_truncation(x, params)
    return torch.softmax(x, dim=-1)


def _draw(p: "torch.Tensor", g: Any) -> int:
    return int(torch.multinomial(p, 1, generator=g)[0])


class _SamplingRule:
    """The three steps of :func:`verify`'s sampling decision (private).

    :func:`verify` calls them through the module attribute ``_sampling_rule``. That attribute
    is a private test hook: ``tests/test_speculative.py`` swaps in subclasses that get one
    step deliberately wrong and checks that its distribution test rejects each of them. Nothing
    else should replace it.
    """

    def accept(self, u: float, p_d: float, q_d: float) -> bool:
        """Whether draft ``d`` is accepted: probability ``min(1, p(d) / q(d))`` for ``u`` ~
        U[0, 1) (``q_d = 1`` for deterministic drafts)."""
        return u * q_d < p_d

    def residual(self, p: "torch.Tensor", q: "Optional[torch.Tensor]", d: int) -> "torch.Tensor":
        """The unnormalised distribution sampled at the first rejection: ``max(0, p - q)``
        (``q`` is ``None`` for a deterministic draft ``d``: a point mass, so ``p`` without ``d``)."""
        if q is None:
            r = p.clone()
            r[d] = 0.0
            return r
        return (p - q).clamp_(min=0.0)

    def bonus(self, p: "torch.Tensor", m: int) -> "torch.Tensor":
        """The distribution of the bonus token after all ``m`` drafts passed: row ``m`` of ``p``."""
        return p[m]


_sampling_rule = _SamplingRule()


def verify(
    target_logits: Any,
    draft_tokens: Sequence[int],
    matcher: Any,
    params: Optional[SamplingParams] = None,
    *,
    draft_probs: Any = None,
    generator: Optional["torch.Generator"] = None,
    output_ids: Optional[Sequence[int]] = None,
    bonus: bool = True,
) -> VerifyResult:
    """Verifies ``draft_tokens`` against one pass of target logits and advances ``matcher``.

    Args:
        target_logits: ``(k + 1, V)`` float logits (torch or numpy, any device): row ``i`` is
            the target's next-token logits after the context plus ``draft_tokens[:i]``. ``V``
            may exceed the vocabulary (padding columns are masked). Not modified (work
            happens on a float32 copy). With ``bonus=False`` ``k`` rows suffice.
        draft_tokens: the ``k`` proposed token ids.
        matcher: the sequence's :class:`corral.Matcher`, positioned at the context. On return
            it holds exactly the context + :attr:`VerifyResult.tokens`.
        params: sampling parameters (default ``SamplingParams()``). The full
            :func:`corral.sample` pipeline is applied to each row in the same order: grammar
            mask, penalties (on ``output_ids`` + the drafts before that row), temperature,
            truncation.
        draft_probs: ``(k, V)`` (or wider) probabilities the drafter sampled each draft from.
            Masked with the grammar and renormalised here. ``None``: the drafts are
            deterministic proposals (point masses: n-gram, greedy drafters).
        generator: RNG for the accept/reject draws and resampling when ``params.seed`` is
            not set (then ``params``' own seeded generator is used).
        output_ids: the ids penalties count before the first position (usually the
            generated tokens so far); only used when ``params`` has penalties.
        bonus: emit the bonus token when every draft passes (``False``: the caller will not
            use the last position, e.g. it is grammar-forced).

    Rules:
        * greedy (temperature 0): a draft is kept while it equals the argmax of the masked
          target row; the first mismatch emits the target's argmax; identical to
          non-speculative constrained greedy decoding.
        * sampling: with target ``p`` and draft ``q`` (both masked, renormalised), draft
          ``d`` is accepted with probability ``min(1, p(d) / q(d))``; the first rejection
          samples from ``normalise(max(0, p - q))``; the bonus token samples from the last
          row's ``p``. The emitted tokens are distributed exactly as constrained sampling
          from the target.
        * an accepted EOS draft stops everything: no bonus token, no further mask fill.
          A terminated matcher returns an empty result without filling anything.

    Raises:
        UsageError: wrong shapes; a draft with zero draft probability after masking.

    >>> import torch, corral
    >>> vocab = corral.Vocabulary.from_bytes([b"x", b"y", b""], eos_token_ids=[2])
    >>> m = corral.Matcher(corral.compile(corral.Grammar.from_regex("x+"), vocab))
    >>> r = verify(torch.zeros(4, 3), [0, 1, 0], m, corral.SamplingParams(seed=0))
    >>> r.scored, r.accepted <= 1, m.num_accepted == r.emitted   # 'y' is illegal: dropped
    (1, True, True)
    """
    params = params if params is not None else SamplingParams()
    if not isinstance(params, SamplingParams):
        raise UsageError(f"params must be a corral.SamplingParams, got {type(params).__name__}")
    drafts = [int(t) for t in draft_tokens]
    res = VerifyResult(proposed=len(drafts))
    if matcher.is_terminated():
        res.terminated = True
        return res
    logits = _as_rows(target_logits, "target_logits")
    size = _vocab_size(matcher)
    if logits.shape[1] < size:
        raise UsageError(f"target_logits have {logits.shape[1]} columns, fewer than the vocabulary size {size}")
    need = len(drafts) + (1 if bonus else 0)
    if logits.shape[0] < max(need, 1):
        raise UsageError(f"target_logits have {logits.shape[0]} rows for {len(drafts)} drafts (need {need})")
    if not bonus and not drafts:
        raise UsageError("bonus=False with no drafts: nothing to verify")

    # Grammar first: drop everything past the first illegal draft, and anything after an EOS.
    drafts = drafts[: matcher.validate_tokens(drafts)]
    eos = _eos_set(matcher)
    for i, t in enumerate(drafts):
        if t in eos:
            drafts = drafts[: i + 1]
            break
    res.scored = m = len(drafts)
    ends_eos = m > 0 and drafts[-1] in eos
    # The row after the last scored draft is emitted from when bonus=True, or when the grammar
    # cut the drafts (that row is then a real position, not the caller's excluded last one).
    want_bonus = (bonus or m < len(draft_tokens)) and not ends_eos
    rows = m + (1 if want_bonus else 0)
    if rows == 0:  # bonus=False and every draft illegal: score row 0 as a plain decode step
        rows, want_bonus = 1, True
    words = (size + 31) // 32
    bm = _fill_rows(matcher, drafts, rows, words)

    q = None
    if draft_probs is not None and not params.greedy and m:
        q = _as_rows(draft_probs, "draft_probs")
        if q.shape[0] < m or q.shape[1] < size:
            raise UsageError(f"draft_probs must be (k, >= {size}), got shape {tuple(q.shape)}")
        q = q[:m, :size].to(torch.float32, copy=True).clamp_(min=0)
        allowed = torch.zeros(m, size, dtype=torch.float32)
        apply_token_bitmask_inplace(allowed, torch.from_numpy(np.ascontiguousarray(bm[:m])), check_empty=False)
        q = q.to(logits.device) * torch.isfinite(allowed).to(logits.device)
        q = q / q.sum(dim=1, keepdim=True).clamp_(min=1e-30)

    seen = None
    if params.has_penalties:
        base = [int(t) for t in output_ids] if output_ids is not None else []
        seen = [base + drafts[:i] for i in range(rows)]
    x = _target_rows(logits, bm, size, params, seen)
    if x.shape[1] > size:
        x = x[:, :size]

    out: list[int] = []
    if params.greedy:
        best = x.argmax(dim=-1).tolist()
        for i in range(m):
            if drafts[i] != best[i]:
                out = drafts[:i] + [best[i]]
                res.accepted = i
                break
        else:
            res.accepted = m
            out = drafts + ([best[m]] if want_bonus else [])
            res.bonus = want_bonus
    else:
        g = params.generator(x.device) if params.seed is not None else generator
        p = _target_probs(x, params)
        u = torch.rand(m, generator=g, device=x.device)
        rule = _sampling_rule
        for i in range(m):
            d = drafts[i]
            pd = float(p[i, d])
            if q is None:
                qd = 1.0
            else:
                qd = float(q[i, d])
                if qd <= 0.0:
                    raise UsageError(f"draft {i} (token {d}) has zero probability under draft_probs (after masking)")
            if not rule.accept(float(u[i]), pd, qd):
                resid = rule.residual(p[i], None if q is None else q[i], d)
                s = float(resid.sum())
                tok = _draw(resid / s, g) if s > 0 else _draw(p[i], g)
                out = drafts[:i] + [tok]
                res.accepted = i
                break
        else:
            res.accepted = m
            out = list(drafts)
            if want_bonus:
                out.append(_draw(rule.bonus(p, m), g))
                res.bonus = True

    for t in out:
        if not matcher.accept_token(t):
            raise InternalError(f"the matcher rejected token {t} although the mask allowed it")
    res.tokens = out
    res.emitted = len(out)
    res.terminated = matcher.is_terminated()
    return res


# --------------------------------------------------------------------------------------------
# drafters


@runtime_checkable
class Drafter(Protocol):
    """Proposes draft tokens. ``propose`` must leave ``matcher`` as it found it.

    ``propose(matcher, context_ids, k) -> (tokens, probs)``: up to ``k`` token ids that the
    grammar accepts after ``matcher``'s state, and either ``None`` (deterministic proposals)
    or a ``(len(tokens), V)`` tensor: the distribution each token was sampled from.
    """

    def propose(self, matcher: Any, context_ids: Sequence[int], k: int) -> tuple[list[int], Any]: ...


def _check_k(k: Any) -> int:
    if not _is_int(k) or k < 0:
        raise UsageError(f"k must be an int >= 0, got {k!r}")
    return int(k)


class NgramDrafter:
    """Prompt-lookup drafting: no model, no cost.

    Matches the last ``n`` tokens of the context (prompt + output so far; falling back to
    ``n - 1``, ..., 1) against earlier positions of the context and proposes what followed the
    most recent earlier occurrence (up to ``k`` tokens), truncated at the first token the
    grammar rejects.

    >>> import corral
    >>> vocab = corral.Vocabulary.from_bytes([b"a", b"b", b"c", b""], eos_token_ids=[3])
    >>> m = corral.Matcher(corral.compile(corral.Grammar.from_regex("[abc]*"), vocab))
    >>> NgramDrafter(2, 3).propose(m, [0, 1, 2, 0, 0, 1], 3)
    ([2, 0, 0], None)
    """

    def __init__(self, n: int = 3, k: int = 4) -> None:
        if not _is_int(n) or n < 1:
            raise UsageError(f"n must be an int >= 1, got {n!r}")
        self.n = int(n)
        self.k = _check_k(k)

    def lookup(self, context_ids: Sequence[int], k: int) -> list[int]:
        """The proposal before grammar truncation."""
        ctx = np.asarray(context_ids, dtype=np.int64)
        L = ctx.size
        if k <= 0 or L < 2:
            return []
        for size in range(min(self.n, L - 1), 0, -1):
            pat = ctx[L - size :]
            win = np.lib.stride_tricks.sliding_window_view(ctx[: L - 1], size)  # starts 0..L-1-size
            hits = np.flatnonzero((win == pat).all(axis=1))
            if hits.size:
                j = int(hits[-1]) + size  # the most recent earlier occurrence's continuation
                cont: list[int] = ctx[j : j + k].tolist()
                return cont
        return []

    def propose(self, matcher: Any, context_ids: Sequence[int], k: Optional[int] = None) -> tuple[list[int], None]:
        k = self.k if k is None else _check_k(k)
        toks = self.lookup(context_ids, k)
        if toks:
            toks = toks[: matcher.validate_tokens(toks)]
        return toks, None


class ModelDrafter:
    """A draft model sharing the target's tokenizer: ``model_fn(ids) -> (V,) logits``.

    Each proposal is drawn from the draft model's *grammar-masked* distribution (greedy by
    default), so drafts always respect the grammar; the distributions are returned for
    :func:`verify`'s rejection rule.

    Args:
        model_fn: the draft model.
        vocab: the draft model's vocabulary; must be the target's (same fingerprint), else
            :class:`corral.TokenizerError` (at construction when ``target_vocab`` is given,
            else at the first :meth:`propose`).
        params: the draft's sampling parameters (default greedy: deterministic proposals).
        target_vocab: the target's vocabulary, checked now.
        generator: RNG for sampled drafts.

    >>> import torch, corral
    >>> vocab = corral.Vocabulary.from_bytes([b"a", b"b", b""], eos_token_ids=[2])
    >>> m = corral.Matcher(corral.compile(corral.Grammar.from_regex("ab*"), vocab))
    >>> d = ModelDrafter(lambda ids: torch.tensor([0.0, -1.0, 9.0]), vocab)  # loves EOS
    >>> toks, q = d.propose(m, [], 3)
    >>> toks, q.shape   # EOS is illegal before 'a'; after 'a' it ends the draft
    ([0, 2], torch.Size([2, 3]))
    """

    def __init__(
        self,
        model_fn: ModelFn,
        vocab: Vocabulary,
        params: Optional[SamplingParams] = None,
        *,
        target_vocab: Any = None,
        generator: Optional["torch.Generator"] = None,
    ) -> None:
        if not callable(model_fn):
            raise UsageError("model_fn must be callable")
        self.model_fn = model_fn
        self.vocab = vocab
        self.params = params if params is not None else SamplingParams(temperature=0.0)
        self.generator = generator
        if target_vocab is not None:
            self.check_vocab(target_vocab)

    def check_vocab(self, target_vocab: Any) -> None:
        """Raises :class:`corral.TokenizerError` unless ``target_vocab`` is the draft's vocabulary."""
        a, b = self.vocab, target_vocab
        if a.size != b.size or a.fingerprint != b.fingerprint:
            raise TokenizerError(
                f"the draft model's vocabulary (size {a.size}, fingerprint {a.fingerprint:#x}) differs from the "
                f"target's (size {b.size}, fingerprint {b.fingerprint:#x}): speculative decoding needs a draft "
                "model with the same tokenizer"
            )

    def propose(self, matcher: Any, context_ids: Sequence[int], k: int) -> tuple[list[int], Any]:
        k = _check_k(k)
        self.check_vocab(matcher.compiled.vocab)
        size = self.vocab.size
        words = (size + 31) // 32
        eos = _eos_set(matcher)
        ctx = [int(t) for t in context_ids]
        toks: list[int] = []
        rows: list[torch.Tensor] = []
        bm = np.empty((1, words), dtype=np.int32)
        bm_t = torch.from_numpy(bm)
        g = self.params.generator() if self.params.seed is not None else self.generator
        try:
            for _ in range(k):
                if matcher.is_terminated():
                    break
                x = _as_logits(self.model_fn(ctx + toks))
                if x.shape[0] < size:
                    raise UsageError(f"the draft model returned {x.shape[0]} logits, fewer than the vocabulary size {size}")
                x = x[:size].to(torch.float32, copy=True).cpu().unsqueeze(0)
                matcher.fill_next_token_bitmask(bm)
                apply_token_bitmask_inplace(x, bm_t)
                if self.params.has_penalties:
                    apply_penalties(x, [ctx + toks], self.params)
                if self.params.greedy:
                    t = int(x.argmax())
                    q = torch.zeros(size)
                    q[t] = 1.0
                else:
                    q = _target_probs(x, self.params)[0]
                    t = _draw(q, g)
                if not matcher.accept_token(t):
                    raise InternalError(f"the matcher rejected draft {t} although the mask allowed it")
                toks.append(t)
                rows.append(q)
                if t in eos:
                    break
        finally:
            if toks:
                matcher.rollback(len(toks))
        return toks, (torch.stack(rows) if rows else torch.zeros(0, size))


# --------------------------------------------------------------------------------------------
# metrics and policy


@dataclass
class SpeculativeMetrics:
    """Counters of a speculative decode.

    Attributes:
        proposed: drafts scored by verify passes (after grammar truncation).
        accepted: drafts the target accepted.
        verify_passes: target forward passes (one per :func:`verify`).
        emitted: tokens emitted by verify passes (accepted drafts + corrections/bonuses).
        forced: tokens committed without a pass (forced runs, single-choice steps).
        dropped: drafts dropped by the grammar inside :func:`verify`.
    """

    proposed: int = 0
    accepted: int = 0
    verify_passes: int = 0
    emitted: int = 0
    forced: int = 0
    dropped: int = 0

    @property
    def acceptance_rate(self) -> float:
        """accepted / proposed (0 when nothing was proposed)."""
        return self.accepted / self.proposed if self.proposed else 0.0

    @property
    def tokens_per_pass(self) -> float:
        """Mean tokens emitted per verify pass (forced tokens not counted; 0 without passes)."""
        return self.emitted / self.verify_passes if self.verify_passes else 0.0

    @property
    def total_tokens_per_pass(self) -> float:
        """(emitted + forced) / verify passes: the decode-step saving including forced tokens."""
        return (self.emitted + self.forced) / self.verify_passes if self.verify_passes else 0.0

    def update(self, r: VerifyResult) -> None:
        """Adds one :class:`VerifyResult`."""
        self.verify_passes += 1
        self.proposed += r.scored
        self.accepted += r.accepted
        self.emitted += r.emitted
        self.dropped += r.proposed - r.scored

    def as_dict(self) -> dict[str, Any]:
        """The counters and derived rates, as a plain dict."""
        d = asdict(self)
        d.update(
            acceptance_rate=self.acceptance_rate,
            tokens_per_pass=self.tokens_per_pass,
            total_tokens_per_pass=self.total_tokens_per_pass,
        )
        return d


def expected_speedup(acceptance: float, k: int, size_ratio: float) -> float:
    """Expected speedup of speculative decoding over plain decoding (Leviathan et al. 2023).

    ``((1 - a**(k+1)) / (1 - a)) / (1 + k / r)``: expected tokens per verify pass (drafts
    accepted i.i.d. with probability ``a``) over the cost of a pass in target steps (``k``
    draft steps each ``1 / r`` of a target step, plus one target pass assumed to cost one
    plain step). ``a == 1`` gives ``(k + 1) / (1 + k / r)``; ``size_ratio = inf`` (a free
    drafter, e.g. n-gram) gives the tokens per pass.

    >>> expected_speedup(0.0, 4, 10.0) < 1 < expected_speedup(0.8, 4, 10.0)
    True
    >>> expected_speedup(1.0, 3, float("inf"))
    4.0
    """
    if isinstance(acceptance, bool) or not isinstance(acceptance, (int, float, np.integer, np.floating)):
        raise UsageError(f"acceptance must be a number in [0, 1], got {acceptance!r}")
    a = float(acceptance)
    if not 0.0 <= a <= 1.0:
        raise UsageError(f"acceptance must be in [0, 1], got {acceptance!r}")
    k = _check_k(k)
    if isinstance(size_ratio, bool) or not isinstance(size_ratio, (int, float, np.integer, np.floating)):
        raise UsageError(f"size_ratio must be a number > 0, got {size_ratio!r}")
    r = float(size_ratio)
    if math.isnan(r) or r <= 0:
        raise UsageError(f"size_ratio must be > 0 (target cost / draft cost; inf for a free drafter), got {size_ratio!r}")
    tokens = float(k + 1) if a == 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)
    return tokens / (1.0 + k / r)


@dataclass
class AdaptivePolicy:
    """Picks ``k`` per pass from the observed acceptance and the batch size.

    Acceptance is estimated per draft token with exponentially decayed counts: a pass that
    accepted ``n`` of ``m`` scored drafts adds ``n`` successes and (if ``n < m``) one failure
    (the drafts after the first rejection were never tested), with ``decay`` applied to the
    old counts first, and a prior of ``prior_weight`` pseudo-drafts at ``initial_acceptance``.

    Cost model (in units of one plain decode step at this batch size): a forward pass over
    ``t`` tokens costs ``max(1, t / compute_bound_tokens)`` -- flat while memory-bound, linear
    once compute-bound. A verify pass scores ``batch_size * (k + 1)`` tokens against a plain
    step's ``batch_size``, so its relative cost is
    ``(max(1, B (k+1) / C) + extra_token_cost * k) / max(1, B / C)`` (``extra_token_cost``:
    the small per-token cost of a memory-bound pass: attention, sampling, mask fills); each
    draft step adds ``1 / size_ratio``. The
    expected speedup is ``E[tokens per pass] / (verify_cost + k / size_ratio)`` (equal to
    :func:`expected_speedup` while memory-bound); the best ``k`` in ``0..k_max`` is chosen and
    speculation is off (``k = 0``) when the best speedup is below ``min_speedup``. While off,
    every ``probe_every``-th call returns ``probe_k`` to refresh the estimate.

    >>> pol = AdaptivePolicy(k_max=6, size_ratio=10.0)   # a draft model 10x cheaper
    >>> pol.k() > 0
    True
    >>> for _ in range(30): pol.observe(0, 4)       # nothing gets accepted
    >>> pol.k(), pol.k(batch_size=256)
    (0, 0)
    >>> pol = AdaptivePolicy(k_max=6, size_ratio=float("inf"))
    >>> for _ in range(30): pol.observe(4, 4)
    >>> pol.k(batch_size=1), pol.k(batch_size=4096)   # compute-bound: verifying costs
    (6, 0)
    """

    k_max: int = 8
    size_ratio: float = float("inf")
    min_speedup: float = 1.05
    compute_bound_tokens: int = 256
    extra_token_cost: float = 0.01
    decay: float = 0.9
    initial_acceptance: float = 0.6
    prior_weight: float = 2.0
    probe_every: int = 16
    probe_k: int = 2
    _succ: float = field(default=0.0, init=False, repr=False)
    _fail: float = field(default=0.0, init=False, repr=False)
    _off_calls: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        _check_k(self.k_max)
        expected_speedup(self.initial_acceptance, 0, self.size_ratio)  # validates both
        if not 0.0 <= self.decay <= 1.0:
            raise UsageError(f"decay must be in [0, 1], got {self.decay!r}")
        if not _is_int(self.compute_bound_tokens) or self.compute_bound_tokens < 1:
            raise UsageError(f"compute_bound_tokens must be an int >= 1, got {self.compute_bound_tokens!r}")
        if not self.min_speedup > 0 or not self.prior_weight >= 0 or not self.extra_token_cost >= 0:
            raise UsageError("min_speedup must be > 0, prior_weight >= 0 and extra_token_cost >= 0")
        _check_k(self.probe_k)

    @property
    def acceptance(self) -> float:
        """The current per-draft acceptance estimate."""
        w = self.prior_weight
        return (self._succ + w * self.initial_acceptance) / (self._succ + self._fail + w) if self._succ + self._fail + w > 0 else self.initial_acceptance

    def observe(self, accepted: int, scored: int) -> None:
        """Records one verify pass: ``accepted`` of ``scored`` drafts."""
        if scored <= 0:
            return
        self._succ = self._succ * self.decay + accepted
        self._fail = self._fail * self.decay + (1 if accepted < scored else 0)

    def speedup(self, k: int, batch_size: int = 1) -> float:
        """Expected speedup of ``k`` drafts per pass at this batch size (see the class docs)."""
        a = min(1.0, max(0.0, self.acceptance))
        tokens = float(k + 1) if a == 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)
        c = float(self.compute_bound_tokens)
        verify_cost = (max(1.0, batch_size * (k + 1) / c) + self.extra_token_cost * k) / max(1.0, batch_size / c)
        cost = verify_cost + k / self.size_ratio
        return tokens / cost

    def k(self, batch_size: int = 1) -> int:
        """The number of drafts to propose for the next pass (0: plain decoding)."""
        if not _is_int(batch_size) or batch_size < 1:
            raise UsageError(f"batch_size must be an int >= 1, got {batch_size!r}")
        best_k, best = 0, 1.0
        for k in range(1, self.k_max + 1):
            s = self.speedup(k, batch_size)
            if s > best:
                best_k, best = k, s
        if best < self.min_speedup:
            best_k = 0
        if best_k == 0:
            self._off_calls += 1
            if self.probe_every and self._off_calls % self.probe_every == 0:
                return min(self.probe_k, self.k_max)
            return 0
        self._off_calls = 0
        return best_k


# --------------------------------------------------------------------------------------------
# the decode loop


@dataclass
class SpeculativeResult(GenerationResult):
    """A :class:`corral.GenerationResult` (``steps`` = verify passes) plus :attr:`metrics`."""

    metrics: SpeculativeMetrics = field(default_factory=SpeculativeMetrics)


def _per_prefix(model_fn: ModelFn) -> VerifyFn:
    def fn(ids: list[int], n: int) -> "torch.Tensor":
        base = len(ids) - n + 1
        return torch.stack([_as_logits(model_fn(ids[: base + j])).to(torch.float32) for j in range(n)])

    return fn


def generate(
    model_fn: ModelFn,
    prompt_ids: Sequence[int],
    grammar_or_compiled: Union[_native.Grammar, _native.CompiledGrammar],
    vocab: Vocabulary,
    params: Optional[SamplingParams] = None,
    max_tokens: int = 256,
    *,
    drafter: Optional[Drafter] = None,
    k: int = 4,
    policy: Optional[AdaptivePolicy] = None,
    verify_fn: Optional[VerifyFn] = None,
    use_forced: bool = True,
    generator: Optional["torch.Generator"] = None,
    penalize_prompt: bool = False,
) -> SpeculativeResult:
    """Speculative constrained decoding of one sequence; same contract as :func:`corral.generate`.

    Each iteration: commit the grammar-forced run (:func:`corral.forced.forced_tokens`) or a
    single-choice token if any (no pass); else ask ``drafter`` for up to ``k`` drafts, cut
    them before the first position whose continuation would be grammar-forced (there
    :func:`corral.generate` commits the forced run, not the model's choice), score them in one
    pass and :func:`verify`. Greedy output equals :func:`corral.generate`'s for a
    deterministic model; sampled output has the same distribution.

    Args:
        model_fn: ``model_fn(ids) -> (V,) logits`` for the next token after ``ids``.
        prompt_ids, grammar_or_compiled, vocab, params, max_tokens, use_forced, generator,
            penalize_prompt: as in :func:`corral.generate`.
        drafter: a :class:`Drafter` (default ``NgramDrafter(3, k)``).
        k: drafts per pass (when ``policy`` is None).
        policy: an :class:`AdaptivePolicy` choosing ``k`` per pass (batch size 1).
        verify_fn: ``verify_fn(ids, n) -> (n, V)``: the target's logits at the last ``n``
            positions of ``ids`` in one forward pass (row ``j``: next token after
            ``ids[:len(ids) - n + 1 + j]``). Default: ``model_fn`` called once per prefix.

    >>> import torch, corral
    >>> vocab = corral.builtin_vocabulary()
    >>> g = corral.Grammar.from_regex(r"(ab){1,8}")
    >>> fav = vocab.encode(b"ab")[0]
    >>> model = lambda ids: torch.nn.functional.one_hot(torch.tensor(fav), vocab.size).float()
    >>> res = generate(model, vocab.encode(b"abababab"), g, vocab, corral.SamplingParams(temperature=0.0))
    >>> res.text, res.finished, res.metrics.verify_passes < len(res.token_ids)
    ('abababababababab', True, True)
    """
    compiled = _checked_args(grammar_or_compiled, vocab, max_tokens)
    k = _check_k(k)
    params = params if params is not None else SamplingParams()
    drafter = drafter if drafter is not None else NgramDrafter(3, k)
    if isinstance(drafter, ModelDrafter):
        drafter.check_vocab(vocab)
    vfn = verify_fn if verify_fn is not None else _per_prefix(model_fn)
    prompt = [int(i) for i in prompt_ids]

    matcher = _native.Matcher(compiled)
    res = SpeculativeResult()
    met = res.metrics
    out = res.token_ids
    size = vocab.size
    mask = np.empty((1, (size + 31) // 32), dtype=np.int32)

    def push(tok: int) -> None:
        if not matcher.accept_token(tok):
            raise InternalError(f"the matcher rejected token {tok} although the mask allowed it")
        out.append(tok)

    while len(out) < max_tokens and not matcher.is_terminated():
        left = max_tokens - len(out)
        if use_forced:
            run = forced_tokens(matcher, vocab)[:left]
            if run:
                for tok in run:
                    push(tok)
                met.forced += len(run)
                continue
            t0 = time.perf_counter()
            matcher.fill_next_token_bitmask(mask)
            only = _single_token(mask[0])
            if only is not None:
                push(only)
                met.forced += 1
                continue
            res.mask_times_us.append((time.perf_counter() - t0) * 1e6)
        kk = policy.k() if policy is not None else k
        kk = min(kk, left - 1)
        drafts: list[int] = []
        probs = None
        if kk > 0:
            drafts, probs = drafter.propose(matcher, prompt + out, kk)
            drafts = [int(t) for t in drafts][:kk]
        bonus = True
        if use_forced and drafts:
            # Cut before the first later position whose continuation is forced: corral.generate
            # commits the forced run there, whatever the model prefers.
            n = matcher.validate_tokens(drafts)
            drafts = drafts[:n]
            done = 0
            try:
                for j, t in enumerate(drafts):
                    matcher.accept_token(t)
                    done += 1
                    if matcher.is_terminated():
                        break
                    if forced_tokens(matcher, vocab):
                        drafts, bonus = drafts[: j + 1], False
                        break
            finally:
                matcher.rollback(done)
        ctx = prompt + out
        # Rows for the prefixes ctx + drafts[:j], j = 0..n_rows-1 (the last draft itself is
        # only fed when its successor row is needed).
        n_rows = len(drafts) + (1 if bonus else 0)
        logits = vfn(ctx + drafts[: n_rows - 1], n_rows)
        seen = (prompt + out) if penalize_prompt else list(out)
        r = verify(
            logits,
            drafts,
            matcher,
            params,
            draft_probs=probs if probs is not None and len(drafts) else None,
            generator=generator,
            output_ids=seen if params.has_penalties else None,
            bonus=bonus,
        )
        met.update(r)
        if policy is not None and r.scored:
            policy.observe(r.accepted, r.scored)
        out.extend(r.tokens)
    res.forced = met.forced
    res.steps = met.verify_passes
    res.finished = matcher.is_terminated()
    res.data = b"".join(vocab.token_bytes(t) for t in out)
    logger.debug("speculative decode: %s", met.as_dict())
    return res
