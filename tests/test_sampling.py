"""corral.sampling: each stage against a direct numpy computation, the order of the stages,
per-row parameters, seeds, validation."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import corral
from corral.sampling import SamplingParams, apply_penalties, apply_truncation, probabilities, sample

NEG = -np.inf


def mask_of(allowed_rows: list[list[int]], vocab: int) -> torch.Tensor:
    words = (vocab + 31) // 32
    m = np.zeros((len(allowed_rows), words), dtype=np.uint32)
    for r, ids in enumerate(allowed_rows):
        for i in ids:
            m[r, i // 32] |= np.uint32(1 << (i % 32))
    return torch.from_numpy(m.view(np.int32))


# ------------------------------------------------------------------ numpy reference pipeline


def np_softmax(x: np.ndarray) -> np.ndarray:
    finite = np.isfinite(x)
    e = np.where(finite, np.exp(x - np.max(x[finite])), 0.0)
    return e / e.sum()


def np_penalties(x: np.ndarray, ids: list[int], p: SamplingParams) -> np.ndarray:
    x = x.astype(np.float64).copy()
    counts = np.bincount(np.array(ids, dtype=np.int64), minlength=x.size).astype(np.float64) if ids else np.zeros(x.size)
    for t in np.flatnonzero(counts):
        if np.isfinite(x[t]):
            x[t] = x[t] * p.repetition_penalty if x[t] < 0 else x[t] / p.repetition_penalty
            x[t] -= p.frequency_penalty * counts[t] + p.presence_penalty
    return x


def np_truncate(x: np.ndarray, p: SamplingParams) -> np.ndarray:
    probs = np_softmax(x)
    order = np.argsort(-probs, kind="stable")
    keep = np.zeros(x.size, dtype=bool)
    cum = 0.0
    for rank, t in enumerate(order):
        if rank > 0 and ((p.top_k and rank >= p.top_k) or (p.top_p < 1 and cum >= p.top_p)):
            break
        keep[t] = True
        cum += probs[t]
    keep &= probs >= p.min_p * probs.max()
    return np.where(keep, x, NEG)


def np_distribution(x: np.ndarray, allowed: list[int] | None, ids: list[int], p: SamplingParams) -> np.ndarray:
    x = x.astype(np.float64).copy()
    if allowed is not None:
        m = np.full(x.size, NEG)
        m[allowed] = 0.0
        x = x + m
    x = np_penalties(x, ids, p)
    if p.temperature == 0:
        out = np.zeros(x.size)
        out[np.argmax(x)] = 1.0
        return out
    x = x / p.temperature
    return np_softmax(np_truncate(x, p))


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_k": -1}, "top_k"),
        ({"top_k": 1.5}, "top_k"),
        ({"top_k": True}, "top_k"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.01}, "top_p"),
        ({"min_p": -0.5}, "min_p"),
        ({"repetition_penalty": 0.0}, "repetition_penalty"),
        ({"presence_penalty": float("inf")}, "presence_penalty"),
        ({"frequency_penalty": "1"}, "frequency_penalty"),
        ({"seed": -1}, "seed"),
        ({"seed": 1.0}, "seed"),
    ],
)
def test_validation(kwargs, message):
    with pytest.raises(corral.UsageError, match=message) as info:
        SamplingParams(**kwargs)
    assert isinstance(info.value, ValueError)


def test_top_k_and_top_p_warn_exactly_once_per_construction():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SamplingParams(top_k=5, top_p=0.9)
        first = list(caught)
        SamplingParams(top_k=5)
        SamplingParams(top_p=0.9)
        SamplingParams(top_k=5, top_p=1.0)
    assert len(first) == 1 and issubclass(first[0].category, UserWarning)
    assert "stricter" in str(first[0].message)
    assert len(caught) == 1
    assert first[0].filename == __file__  # points at the caller


# ------------------------------------------------------------------ stages vs numpy


def test_penalties_match_numpy_and_never_resurrect_masked_tokens():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(50) * 3
    x[[3, 7, 11]] = NEG
    ids = [1, 1, 1, 2, 3, 3, 7, 9, 9, 20]
    for p in [
        SamplingParams(repetition_penalty=1.7),
        SamplingParams(repetition_penalty=0.6),  # < 1 boosts repeats: must not lift -inf
        SamplingParams(presence_penalty=0.8, frequency_penalty=0.3),
        SamplingParams(presence_penalty=-2.0, frequency_penalty=-1.0, repetition_penalty=0.5),
    ]:
        got = apply_penalties(torch.tensor(x, dtype=torch.float32).unsqueeze(0), [ids], p)[0].numpy()
        exp = np_penalties(x, ids, p)
        np.testing.assert_allclose(got, exp, rtol=1e-5)
        assert np.isneginf(got[[3, 7, 11]]).all()
    # repetition penalty divides positive and multiplies negative logits
    got = apply_penalties(torch.tensor([[2.0, -2.0, 2.0]]), [[0, 1]], SamplingParams(repetition_penalty=2.0))
    assert got.tolist() == [[1.0, -4.0, 2.0]]


def test_output_ids_forms_agree():
    x = torch.randn(2, 40)
    p = SamplingParams(frequency_penalty=0.5, presence_penalty=0.25)
    a = apply_penalties(x.clone(), [[1, 1, 5], [7]], p)
    b = apply_penalties(x.clone(), torch.tensor([[1, 1, 5], [7, -1, -1]]), p)  # -1 pads
    c = apply_penalties(x.clone(), np.array([[1, 1, 5], [-1, 7, -1]]), p)
    assert torch.equal(a, b) and torch.equal(a, c)
    with pytest.raises(corral.UsageError, match="one list per logits row"):
        apply_penalties(x.clone(), [[1]], p)


@pytest.mark.parametrize(
    "p",
    [
        SamplingParams(top_k=3),
        SamplingParams(top_p=0.7),
        SamplingParams(min_p=0.2),
        SamplingParams(temperature=0.6, min_p=0.05, top_p=0.95),
    ],
)
def test_truncation_matches_numpy(p):
    rng = np.random.default_rng(1)
    for _ in range(20):
        x = rng.standard_normal(64) * 2
        got = apply_truncation(torch.tensor(x, dtype=torch.float64).unsqueeze(0), p)[0].numpy()
        np.testing.assert_array_equal(np.isfinite(got), np.isfinite(np_truncate(x, p)))


def test_top_k_and_top_p_together_keep_the_stricter_set():
    x = torch.log(torch.tensor([[0.4, 0.3, 0.2, 0.1]]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loose_k = SamplingParams(top_k=3, top_p=0.5)  # top-p keeps 2 < 3
        loose_p = SamplingParams(top_k=1, top_p=0.95)  # top-k keeps 1 < 4
    assert apply_truncation(x.clone(), loose_k).isfinite().sum().item() == 2
    assert apply_truncation(x.clone(), loose_p).isfinite().sum().item() == 1


def test_full_distribution_matches_numpy_per_row():
    rng = np.random.default_rng(2)
    vocab = 70
    x = rng.standard_normal((4, vocab)) * 2
    allowed = [sorted(rng.choice(vocab, 20, replace=False).tolist()) for _ in range(4)]
    ids = [[allowed[r][0]] * 3 + [allowed[r][1]] for r in range(4)]
    params = [
        SamplingParams(temperature=0.7, top_p=0.9, presence_penalty=0.5),
        SamplingParams(temperature=1.3, min_p=0.1, frequency_penalty=0.4, repetition_penalty=1.3),
        SamplingParams(temperature=0.0, repetition_penalty=2.0),
        SamplingParams(top_k=5),
    ]
    got = probabilities(torch.tensor(x, dtype=torch.float32), params, bitmask=mask_of(allowed, vocab), output_ids=ids)
    for r in range(4):
        exp = np_distribution(x[r], allowed[r], ids[r], params[r])
        np.testing.assert_allclose(got[r].numpy(), exp, atol=2e-6)
        assert set(np.flatnonzero(got[r].numpy())) <= set(allowed[r])


def test_penalties_come_before_temperature():
    """(x - presence) / T, not x / T - presence: the penalty is applied before temperature."""
    x = torch.tensor([[1.0, 0.0]])
    p = SamplingParams(temperature=0.5, presence_penalty=1.0)
    got = probabilities(x, p, output_ids=[[0]])[0]
    before = np_softmax(np.array([0.0, 0.0]) / 0.5)  # (1 - 1) / 0.5 = 0 -> uniform
    np.testing.assert_allclose(got.numpy(), before, atol=1e-7)


def test_mask_is_applied_before_truncation():
    """The two most likely tokens are illegal. Truncating to top-2 first and masking after
    would leave nothing; corral masks first and always samples a legal token."""
    vocab = 64
    x = torch.full((1, vocab), -5.0)
    x[0, 10], x[0, 11] = 10.0, 9.0  # the top-2, both illegal
    legal = [3, 40, 63]
    x[0, legal] = torch.tensor([-3.0, -2.0, -4.0])
    mask = mask_of([legal], vocab)
    top2 = set(torch.topk(x[0], 2).indices.tolist())
    assert top2.isdisjoint(legal)  # truncate-then-mask would be empty
    p = SamplingParams(top_k=2, seed=0)
    drawn = {int(sample(x, p, bitmask=mask)[0]) for _ in range(200)}
    assert drawn <= set(legal) and drawn == {40, 3}  # top-2 of the legal tokens


def test_greedy_uses_no_randomness():
    x = torch.randn(3, 50)
    state = torch.random.get_rng_state()
    out = sample(x, SamplingParams(temperature=0.0))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert out.tolist() == x.argmax(dim=1).tolist()
    assert out.dtype == torch.int64 and out.shape == (3,)


def test_draws_follow_the_distribution():
    torch.manual_seed(0)
    x = torch.tensor([1.0, 0.5, 0.0, -1.0, 2.0, -0.5])
    p = SamplingParams(temperature=0.8, min_p=0.1)
    n = 20000
    batch = x.unsqueeze(0).repeat(n, 1)
    draws = sample(batch, p, generator=torch.Generator().manual_seed(1))
    freq = np.bincount(draws.numpy(), minlength=6) / n
    exp = np_distribution(x.numpy(), None, [], p)
    np.testing.assert_allclose(freq, exp, atol=0.015)
    assert freq[exp == 0].sum() == 0


def test_seeds_replay_and_rows_are_independent():
    x = torch.randn(1, 1000)
    a = SamplingParams(seed=42)
    first = [int(sample(x, a)[0]) for _ in range(10)]
    a.reseed()
    assert [int(sample(x, a)[0]) for _ in range(10)] == first
    b = SamplingParams(seed=42)
    assert [int(sample(x, b)[0]) for _ in range(10)] == first
    c = SamplingParams(seed=43)
    assert [int(sample(x, c)[0]) for _ in range(10)] != first
    # A seeded row in a batch draws the same as alone, whatever the other rows do.
    d = SamplingParams(seed=42)
    batch = torch.cat([torch.randn(1, 1000), x])
    got = [int(sample(batch, [SamplingParams(), d])[1]) for _ in range(10)]
    assert got == first


def test_numpy_and_1d_logits():
    assert sample(np.array([0.0, 3.0, 1.0], dtype=np.float32), SamplingParams(temperature=0)).tolist() == [1]
    assert sample(torch.tensor([0.0, 3.0, 1.0]), SamplingParams(temperature=0)).shape == (1,)


def test_logits_are_not_modified():
    x = torch.randn(2, 64)
    before = x.clone()
    sample(x, SamplingParams(top_k=3, repetition_penalty=1.5), bitmask=mask_of([[1, 2], [3]], 64), output_ids=[[1], [3]])
    assert torch.equal(x, before)


def test_empty_mask_row_raises_on_cpu():
    with pytest.raises(corral.EmptyMaskError, match="row 1"):
        sample(torch.randn(2, 64), SamplingParams(), bitmask=mask_of([[1], []], 64))


def test_params_list_length_checked():
    with pytest.raises(corral.UsageError, match="2 SamplingParams for 3 rows"):
        sample(torch.randn(3, 8), [SamplingParams(), SamplingParams()])
