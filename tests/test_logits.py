"""apply_token_bitmask_inplace: CPU kernel, torch-ops path, Triton kernel (interpreter), CUDA."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import corral
from corral import logits as L

NEG = float("-inf")


def random_mask(rows: int, vocab: int, density: float, seed: int) -> np.ndarray:
    """An int32 bitmask whose bits are set with probability ``density``, padding bits clear."""
    rng = np.random.default_rng(seed)
    words = (vocab + 31) // 32
    bits = rng.random((rows, words * 32)) < density
    bits[:, vocab:] = False
    return np.packbits(bits, axis=1, bitorder="little").view(np.int32).reshape(rows, words).copy()


def reference(logits: np.ndarray, mask: np.ndarray, indices, vocab: int) -> np.ndarray:
    """Direct numpy computation: selected rows get -inf where the bit is clear or past ``vocab``."""
    out = np.array(logits, dtype=np.float64, copy=True)
    out2 = out.reshape(-1, out.shape[-1])
    m2 = mask.reshape(-1, mask.shape[-1])
    rows = range(out2.shape[0]) if indices is None else indices
    width = out2.shape[1]
    for r in rows:
        bits = np.unpackbits(m2[r].view(np.uint8), bitorder="little")[:width].astype(bool)
        allowed = np.zeros(width, dtype=bool)
        allowed[: min(vocab, bits.size)] = bits[: min(vocab, bits.size)]
        out2[r, ~allowed] = NEG
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape, vocab, indices", [((4, 100), 100, None), ((3, 130), 100, [2, 0]), ((77,), 77, None), ((5, 64), 50, [4])])
def test_cpu_torch_matches_reference(dtype, shape, vocab, indices):
    torch.manual_seed(0)
    rows = shape[0] if len(shape) == 2 else 1
    mask = random_mask(rows, vocab, 0.3, seed=1)
    if len(shape) == 1:
        mask = mask[0]
    logits = torch.randn(shape).to(dtype)
    before = logits.clone()
    ptr = logits.data_ptr()
    corral.apply_token_bitmask_inplace(logits, torch.from_numpy(mask), indices=indices, vocab_size=vocab)
    assert logits.data_ptr() == ptr  # in place
    expected = reference(before.float().numpy(), mask, indices, vocab)
    np.testing.assert_array_equal(logits.float().numpy(), expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_numpy_logits(dtype):
    mask = random_mask(2, 70, 0.5, seed=2)
    logits = np.random.default_rng(0).standard_normal((2, 96)).astype(dtype)
    before = logits.copy()
    corral.apply_token_bitmask_inplace(logits, mask, vocab_size=70)
    np.testing.assert_array_equal(logits.astype(np.float64), reference(before, mask, None, 70))
    assert np.isneginf(logits[:, 70:]).all()  # the padding past the vocabulary


def test_no_copy_through_views():
    """A contiguous slice of a bigger buffer is masked in the buffer itself."""
    big = torch.zeros(4, 64)
    mask = torch.zeros(2, 2, dtype=torch.int32)
    mask[:, 0] = 1  # token 0 only
    corral.apply_token_bitmask_inplace(big[1:3], mask)
    assert torch.isfinite(big).sum(dim=1).tolist() == [64, 1, 1, 64]


def test_non_contiguous_view_takes_the_torch_path():
    scores = torch.randn(3, 128)
    view = scores[:, :100]  # e.g. the vocabulary part of padded scores
    assert not view.is_contiguous()
    mask = random_mask(3, 100, 0.4, seed=3)
    before = scores.clone()
    corral.apply_token_bitmask_inplace(view, torch.from_numpy(mask))
    np.testing.assert_array_equal(scores[:, :100].numpy(), reference(before[:, :100].numpy(), mask, None, 100))
    assert torch.equal(scores[:, 100:], before[:, 100:])  # outside the view: untouched


@pytest.mark.parametrize("indices", [None, [1], [0, 3, 2]])
@pytest.mark.parametrize("width, vocab", [(50257, 50257), (50304, 50257), (1000, 999)])
def test_torch_ops_path_equals_native_kernel(indices, width, vocab):
    """The device path (torch ops, used on CUDA) computed on CPU equals the Rust kernel."""
    mask = torch.from_numpy(random_mask(4, vocab, 0.05, seed=width))
    a = torch.randn(4, width)
    b = a.clone()
    L._apply_torch(a, mask, indices, vocab)
    corral._native.apply_token_bitmask_cpu(b, mask, indices, vocab)
    assert torch.equal(a, b)


def test_torch_ops_path_reports_empty_rows():
    mask = torch.from_numpy(random_mask(3, 64, 0.5, seed=4))
    mask[1] = 0
    empty = L._apply_torch(torch.randn(3, 64), mask, None, 64)
    assert empty.tolist() == [False, True, False]
    assert L._apply_torch(torch.randn(3, 64), mask, [2, 1], 64).tolist() == [False, True]


def test_empty_rows_raise_naming_them_and_still_mask():
    mask = torch.from_numpy(random_mask(4, 64, 0.5, seed=5))
    mask[1] = 0
    mask[3] = 0
    logits = torch.zeros(4, 64)
    with pytest.raises(corral.EmptyMaskError, match=r"rows 1, 3"):
        corral.apply_token_bitmask_inplace(logits, mask)
    assert torch.isneginf(logits[1]).all() and torch.isneginf(logits[3]).all()
    logits = torch.zeros(4, 64)
    corral.apply_token_bitmask_inplace(logits, mask, check_empty=False)
    corral.apply_token_bitmask_inplace(torch.zeros(4, 64), mask, indices=[0, 2])  # empty rows not selected
    with pytest.raises(corral.EmptyMaskError, match="row 1"):
        corral.apply_token_bitmask_inplace(torch.zeros(4, 128)[:, :64], mask, indices=[1])  # torch path too


def test_only_selected_rows_change():
    mask = torch.zeros(3, 2, dtype=torch.int32)
    mask[:, 0] = 0b11
    logits = torch.ones(3, 64)
    corral.apply_token_bitmask_inplace(logits, mask, indices=[1])
    assert torch.isfinite(logits).sum(dim=1).tolist() == [64, 2, 64]


@pytest.mark.parametrize(
    "logits, mask, kwargs, message",
    [
        (torch.zeros(2, 64, dtype=torch.float64), torch.zeros(2, 2, dtype=torch.int32), {}, "float32, float16 or bfloat16"),
        (torch.zeros(2, 64, dtype=torch.int32), torch.zeros(2, 2, dtype=torch.int32), {}, "float32"),
        (torch.zeros(2, 2, 64), torch.zeros(2, 2, dtype=torch.int32), {}, "1-D.* or 2-D"),
        (torch.zeros(2, 40), torch.zeros(2, 2, dtype=torch.int32), {"vocab_size": 50}, "narrower"),
        (torch.zeros(2, 60), torch.zeros(2, 4, dtype=torch.int32), {}, "narrower"),
        (torch.zeros(2, 64), torch.zeros(3, 2, dtype=torch.int32), {}, "3 rows but logits have 2"),
        (torch.zeros(2, 64), torch.zeros(2, 2, dtype=torch.int64), {}, "int32"),
        (torch.zeros(2, 64), torch.zeros(2, 2, dtype=torch.int32), {"indices": [2]}, "out of range"),
        (torch.zeros(2, 64), torch.zeros(2, 2, dtype=torch.int32), {"vocab_size": 0}, "positive"),
        (np.zeros((2, 64), dtype=np.float64), np.zeros((2, 2), dtype=np.int32), {}, "float32 or float16"),
        ([0.0] * 64, np.zeros((1, 2), dtype=np.int32), {}, "torch tensor or a numpy array"),
    ],
)
def test_usage_errors(logits, mask, kwargs, message):
    with pytest.raises(corral.UsageError, match=message) as info:
        corral.apply_token_bitmask_inplace(logits, mask, **kwargs)
    assert isinstance(info.value, ValueError)


def test_wider_logits_mask_the_padding_with_a_real_fill():
    vocab = corral.Vocabulary.from_bytes([b"a", b"b", b""], eos_token_ids=[2], vocab_size=5)
    m = corral.Matcher(corral.compile(corral.Grammar.from_regex("a+"), vocab))
    mask = corral.allocate_token_bitmask(1, vocab.size)
    m.fill_next_token_bitmask(mask)
    logits = torch.zeros(1, 64)  # e.g. a model padded to a multiple of 64
    corral.apply_token_bitmask_inplace(logits, mask, vocab_size=vocab.size)
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [0]


TRITON_SCRIPT = textwrap.dedent(
    """
    import os, torch
    from corral import logits as L
    assert os.environ["TRITON_INTERPRET"] == "1"
    torch.manual_seed(0)
    for dt, words in ((torch.float32, 64), (torch.float16, 32), (torch.bfloat16, 128), (torch.float32, 32)):
        L._TRITON_WORDS = words  # the tile size (the benchmark sweeps it)
        for rows, width, vocab, sel in ((3, 100, 90, [0, 2]), (2, 4200, 4100, None), (1, 64, 64, None), (2, 8256, 8193, [1])):
            bm = torch.randint(-2**31, 2**31 - 1, (rows, (vocab + 31) // 32), dtype=torch.int32)
            bm[0, ::3] = -1  # whole words allowed (skipped), none allowed (stored only), mixed
            bm[-1, 1::3] = 0
            bm[:, -1] = -1  # padding bits set in the last word: the columns past vocab stay masked
            a = torch.randn(rows, width).to(dt)
            b = a.clone()
            L._apply_triton(a, bm, sel, vocab)
            L._apply_torch(b, bm, sel, vocab)
            assert not L._TRITON.get("disabled"), "the kernel failed"
            assert torch.equal(a, b), (dt, words, rows, width, vocab, sel)
    # The direct launch (the common GPU call) on the same inputs.
    bm = torch.randint(-2**31, 2**31 - 1, (4, 129), dtype=torch.int32)
    bm[0] = -1
    bm[1] = 0
    a = torch.randn(4, 4200)
    b = a.clone()
    L._triton_kernel()
    assert L._launch_direct(a, bm, 4100)
    L._apply_torch(b, bm, None, 4100)
    assert torch.equal(a, b)
    assert not L._launch_direct(a, bm.to(torch.int64), 4100), "the general path handles (and rejects) other dtypes"
    print("triton ok")
    """
)


def test_triton_kernel_in_the_interpreter():
    """The Triton kernel, run by Triton's CPU interpreter, equals the torch-ops path."""
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", TRITON_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "triton ok" in proc.stdout, proc.stderr[-3000:]


# --------------------------------------------------------------------------------------------
# CUDA (skipped without a GPU)

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def use_kernel(triton: bool, monkeypatch) -> None:
    """Masks on CUDA go through the Triton kernel (skipped without triton) or, with
    ``triton=False``, through the torch-ops fallback."""
    if not triton:
        monkeypatch.setitem(L._TRITON, "disabled", True)
    elif L._triton_kernel() is None:
        pytest.skip("triton is not installed")


@pytest.mark.cuda
@cuda
@pytest.mark.parametrize("triton", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cuda_matches_cpu_without_host_sync(triton, dtype, monkeypatch):
    use_kernel(triton, monkeypatch)
    vocab, width = 50257, 50304
    mask = torch.from_numpy(random_mask(8, vocab, 0.1, seed=6)).pin_memory()
    cpu = torch.randn(8, width).to(dtype)
    gpu = cpu.cuda()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # any host sync raises
    try:
        corral.apply_token_bitmask_inplace(gpu, mask, indices=[0, 5, 7], vocab_size=vocab)
        corral.apply_token_bitmask_inplace(gpu, mask.cuda(non_blocking=True), indices=[1], vocab_size=vocab)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    corral.apply_token_bitmask_inplace(cpu, mask, indices=[0, 5, 7], vocab_size=vocab)
    corral.apply_token_bitmask_inplace(cpu, mask, indices=[1], vocab_size=vocab)
    assert torch.equal(gpu.cpu(), cpu)
    if triton:
        assert not L._TRITON.get("disabled")


@pytest.mark.cuda
@cuda
def test_cuda_empty_check_only_when_asked():
    mask = torch.zeros(2, 2, dtype=torch.int32)
    mask[0, 0] = 1
    logits = torch.zeros(2, 64, device="cuda")
    corral.apply_token_bitmask_inplace(logits, mask)  # no check by default on CUDA
    assert torch.isneginf(logits[1]).all().item()
    with pytest.raises(corral.EmptyMaskError, match="row 1"):
        corral.apply_token_bitmask_inplace(torch.zeros(2, 64, device="cuda"), mask, check_empty=True)


@pytest.mark.cuda
@cuda
def test_cuda_bitmask_with_cpu_logits_and_sample_on_cuda():
    mask = torch.from_numpy(random_mask(2, 64, 0.2, seed=7))
    cpu = torch.randn(2, 64)
    expected = reference(cpu.numpy(), mask.numpy(), None, 64)
    corral.apply_token_bitmask_inplace(cpu, mask.cuda())
    np.testing.assert_array_equal(cpu.numpy(), expected)
    toks = corral.sample(torch.randn(2, 64, device="cuda"), corral.SamplingParams(seed=1), bitmask=mask)
    assert toks.device.type == "cuda"
    for r, t in enumerate(toks.tolist()):
        assert (int(mask[r, t // 32]) >> (t % 32)) & 1
