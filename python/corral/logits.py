"""Applying a token bitmask to logits: every disallowed entry becomes -inf, in place.

:func:`apply_token_bitmask_inplace` takes float32/float16/bfloat16 logits of shape
``(batch, V)`` or ``(V,)`` (torch tensors on any device, or numpy float32/float16 arrays) and a
bitmask in corral's layout (int32 words, token ``i`` allowed iff bit ``i % 32`` of word
``i // 32`` is set; see :func:`corral.allocate_token_bitmask`).

* **CPU** (torch CPU tensors, numpy arrays): the Rust kernel
  ``corral._native.apply_token_bitmask_cpu`` masks the buffer in place without copying (GIL
  released; words whose 32 tokens are all allowed are skipped). Non-contiguous torch views
  (e.g. ``scores[:, :V]``) take the torch path below.
* **CUDA** (and any other torch device): a Triton kernel when ``triton`` is importable, else
  torch ops (bits unpacked on the device, ``masked_fill_``). Neither synchronizes the host.
  A bitmask on another device is moved with ``.to(device, non_blocking=True)``; allocate it in
  pinned memory (``bitmask.pin_memory()``) for a truly asynchronous copy.

Rows that the bitmask leaves with nothing allowed make sampling meaningless: with
``check_empty`` (the default on CPU, where it is free) they raise
:class:`corral.EmptyMaskError` naming the rows. On CUDA the check needs a host sync, so it is
done only when ``check_empty=True`` is passed explicitly.

Example::

    >>> import torch, corral
    >>> logits = torch.zeros(2, 40)
    >>> mask = corral.allocate_token_bitmask(2, 40)
    >>> mask[0, 0] = 0b101          # row 0: tokens 0 and 2 only (and none of 32..39)
    >>> mask[0, 1] = 0
    >>> corral.apply_token_bitmask_inplace(logits, mask, indices=[0])
    >>> torch.isfinite(logits).sum(dim=1).tolist()
    [2, 40]
"""

from __future__ import annotations

import threading
import warnings
from typing import Any, Sequence, Union

import numpy as np

from . import _native
from .errors import EmptyMaskError, UsageError

__all__ = ["apply_token_bitmask_inplace"]

Indices = Union[Sequence[int], "np.ndarray", Any, None]

_FLOAT_NUMPY = (np.dtype(np.float32), np.dtype(np.float16))


def _torch() -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is installed in the test environment
        return None
    return torch


def _is_tensor(x: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def _rows_of(indices: Indices, rows: int) -> list[int] | None:
    if indices is None:
        return None
    seq: Any = indices
    if _is_tensor(indices) or isinstance(indices, np.ndarray):
        seq = seq.tolist()  # (a sync for device tensors: pass a list on CUDA)
    try:
        out = [int(i) for i in seq]
    except (TypeError, ValueError):
        raise UsageError(f"indices must be a sequence of row numbers, got {indices!r}") from None
    for i in out:
        if not 0 <= i < rows:
            raise UsageError(f"index {i} is out of range for {rows} rows")
    return out


def _check_widths(width: int, words: int, vocab_size: int | None) -> int:
    """The number of vocabulary columns (the rest of the logits are padding)."""
    if words > (width + 31) // 32:
        raise UsageError(
            f"logits have {width} columns but the bitmask covers {words * 32} tokens: logits narrower "
            "than the vocabulary"
        )
    if vocab_size is None:
        return min(width, words * 32)
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)) or vocab_size <= 0:
        raise UsageError(f"vocab_size must be a positive int, got {vocab_size!r}")
    vocab_size = int(vocab_size)
    if vocab_size > width:
        raise UsageError(f"logits have {width} columns but vocab_size is {vocab_size}: logits narrower than the vocabulary")
    if vocab_size > words * 32:
        raise UsageError(f"the bitmask has {words} words per row, too few for vocab_size {vocab_size} (needs {(vocab_size + 31) // 32})")
    return vocab_size


def _empty_error(rows: Sequence[int]) -> EmptyMaskError:
    rows = sorted(set(int(r) for r in rows))
    shown = ", ".join(map(str, rows[:20])) + (", ..." if len(rows) > 20 else "")
    return EmptyMaskError(
        f"the bitmask allows no token in row{'s' if len(rows) > 1 else ''} {shown}: nothing can be sampled "
        "(a matcher that is not terminated always allows a token: was the bitmask filled for these rows?)"
    )


def apply_token_bitmask_inplace(
    logits: Any,
    bitmask: Any,
    indices: Indices = None,
    vocab_size: int | None = None,
    *,
    check_empty: bool | None = None,
) -> None:
    """Sets every logit the bitmask disallows to -inf, in place.

    Args:
        logits: float32/float16/bfloat16 torch tensor (any device) or float32/float16 numpy
            array, shape ``(batch, V)`` or ``(V,)``. Columns past the vocabulary (padded
            models: ``V > vocab_size``) are always masked.
        bitmask: int32 ``(batch, ceil(vocab/32))`` (or ``(words,)`` with 1-D logits), torch
            or numpy. Moved to the logits' device when it is elsewhere.
        indices: rows to mask (the same rows of ``logits`` and ``bitmask``, as in xgrammar);
            default all rows. Other rows are left untouched.
        vocab_size: the vocabulary size; default ``min(V, 32 * words)``. Must not exceed
            ``V``: logits narrower than the vocabulary are an error.
        check_empty: raise :class:`~corral.EmptyMaskError` when a masked row allows nothing.
            Default: True on CPU (free), False on other devices (the check syncs the host;
            pass True to enable it there).

    Raises:
        UsageError: wrong dtype, shape, device type, indices, or logits narrower than the
            vocabulary.
        EmptyMaskError: see ``check_empty``.

    >>> import numpy as np, corral
    >>> logits = np.zeros(5, dtype=np.float32)
    >>> apply_token_bitmask_inplace(logits, np.array([0b10011], dtype=np.int32), vocab_size=4)
    >>> logits.tolist()
    [0.0, 0.0, -inf, -inf, -inf]
    """
    torch = _torch()
    if torch is not None and isinstance(logits, torch.Tensor):
        if (
            logits.is_cpu
            and isinstance(bitmask, torch.Tensor)
            and bitmask.is_cpu
            and (indices is None or isinstance(indices, list))
            and logits.dim() in (1, 2)
            and bitmask.dim() in (1, 2)
            and logits.is_contiguous()
        ):
            # Fast path: the Rust kernel validates dtypes, shapes, rows and widths itself.
            if vocab_size is not None:
                _check_widths(logits.shape[-1], bitmask.shape[-1], vocab_size)
            empty = _native.apply_token_bitmask_cpu(logits, bitmask, indices, vocab_size)
            if empty and (check_empty is None or check_empty):
                raise _empty_error(empty)
            return
        if (
            indices is None
            and not check_empty
            and logits.is_cuda
            and isinstance(bitmask, torch.Tensor)
            and bitmask.is_cuda
            and bitmask.get_device() == logits.get_device()
            and _launch_direct(logits, bitmask, vocab_size)
        ):
            return
        _apply_tensor(logits, bitmask, indices, vocab_size, check_empty)
        return
    if isinstance(logits, np.ndarray):
        _apply_numpy(logits, bitmask, indices, vocab_size, check_empty)
        return
    raise UsageError(f"logits must be a torch tensor or a numpy array, got {type(logits).__name__}")


def _shape2(shape: tuple[int, ...], what: str) -> tuple[int, int]:
    if len(shape) == 1:
        return 1, int(shape[0])
    if len(shape) == 2:
        return int(shape[0]), int(shape[1])
    raise UsageError(f"{what} must be 1-D or 2-D (batch, ...), got shape {tuple(shape)}")


def _bitmask_shape(bitmask: Any) -> tuple[int, int]:
    if _is_tensor(bitmask):
        torch = _torch()
        if bitmask.dtype != torch.int32:
            raise UsageError(f"bitmask must have dtype torch.int32, got {bitmask.dtype}")
        return _shape2(tuple(bitmask.shape), "bitmask")
    if isinstance(bitmask, np.ndarray):
        if bitmask.dtype != np.int32:
            raise UsageError(f"bitmask must have dtype int32, got {bitmask.dtype}")
        return _shape2(bitmask.shape, "bitmask")
    raise UsageError(f"bitmask must be a torch tensor or a numpy array of int32, got {type(bitmask).__name__}")


def _apply_numpy(logits: np.ndarray, bitmask: Any, indices: Indices, vocab_size: int | None, check_empty: bool | None) -> None:
    if logits.dtype not in _FLOAT_NUMPY:
        raise UsageError(f"numpy logits must be float32 or float16, got {logits.dtype} (use a torch tensor for bfloat16)")
    rows, width = _shape2(logits.shape, "logits")
    brows, words = _bitmask_shape(bitmask)
    if _is_tensor(bitmask) and not bitmask.is_cpu:
        bitmask = bitmask.cpu()
    if brows != rows:
        raise UsageError(f"bitmask has {brows} rows but logits have {rows}")
    vocab = _check_widths(width, words, vocab_size)
    sel = _rows_of(indices, rows)
    if not logits.flags.c_contiguous:
        raise UsageError("numpy logits must be C-contiguous")
    empty = _native.apply_token_bitmask_cpu(logits, bitmask, sel, vocab)
    if empty and (check_empty is None or check_empty):
        raise _empty_error(empty)


def _apply_tensor(logits: Any, bitmask: Any, indices: Indices, vocab_size: int | None, check_empty: bool | None) -> None:
    torch = _torch()
    if logits.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise UsageError(f"logits must be float32, float16 or bfloat16, got {logits.dtype}")
    rows, width = _shape2(tuple(logits.shape), "logits")
    if isinstance(bitmask, np.ndarray):
        if bitmask.dtype != np.int32:
            raise UsageError(f"bitmask must have dtype int32, got {bitmask.dtype}")
        bitmask = torch.from_numpy(bitmask)
    brows, words = _bitmask_shape(bitmask)
    if brows != rows:
        raise UsageError(f"bitmask has {brows} rows but logits have {rows}")
    vocab = _check_widths(width, words, vocab_size)
    device = logits.device
    if bitmask.device != device:
        bitmask = bitmask.to(device, non_blocking=True)
    sel = _rows_of(indices, rows)
    if device.type == "cpu":
        if logits.is_contiguous() and bitmask.is_contiguous():
            empty = _native.apply_token_bitmask_cpu(logits, bitmask, sel, vocab)
            if empty and (check_empty is None or check_empty):
                raise _empty_error(empty)
            return
        empty_t = _apply_torch(logits, bitmask, sel, vocab)
        if check_empty is None or check_empty:
            bad = torch.nonzero(empty_t).flatten().tolist()
            if bad:
                raise _empty_error([sel[i] if sel is not None else i for i in bad])
        return
    if device.type == "cuda" and _use_triton(logits):
        _apply_triton(logits, bitmask, sel, vocab)
        if check_empty:
            _check_empty_torch(bitmask, sel, vocab)
        return
    empty_t = _apply_torch(logits, bitmask, sel, vocab)
    if check_empty:
        bad = torch.nonzero(empty_t).flatten().tolist()  # syncs the host
        if bad:
            raise _empty_error([sel[i] if sel is not None else i for i in bad])


# --------------------------------------------------------------------------------------------
# torch ops (any device; no host sync)

_SHIFTS: dict[Any, Any] = {}
_INDEX_CACHE_LOCK = threading.Lock()


def _shifts(device: Any) -> Any:
    hit = _SHIFTS.get(device)
    if hit is None:
        torch = _torch()
        hit = torch.arange(32, dtype=torch.int32, device=device)
        with _INDEX_CACHE_LOCK:
            _SHIFTS[device] = hit
    return hit


def _index_tensor(sel: Sequence[int], device: Any) -> Any:
    torch = _torch()
    t = torch.tensor(sel, dtype=torch.long)
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def _allowed_bits(bitmask2d: Any, vocab: int) -> Any:
    """(rows, vocab) bool: bit ``i % 32`` of word ``i // 32``."""
    words = (vocab + 31) // 32
    bm = bitmask2d[:, :words]
    bits = (bm.unsqueeze(-1) >> _shifts(bm.device)) & 1
    return bits.reshape(bm.shape[0], words * 32)[:, :vocab].bool()


def _apply_torch(logits: Any, bitmask: Any, sel: list[int] | None, vocab: int) -> Any:
    """Masks with torch ops; returns a (selected rows,) bool tensor: rows with nothing allowed."""
    lg = logits.unsqueeze(0) if logits.dim() == 1 else logits
    bm = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    width = lg.shape[1]
    if sel is None:
        allowed = _allowed_bits(bm, vocab)
        lg[:, :vocab].masked_fill_(~allowed, float("-inf"))
        if width > vocab:
            lg[:, vocab:].fill_(float("-inf"))
        return ~allowed.any(dim=1)
    if not sel:
        return bm.new_zeros(0, dtype=bool)
    idx = _index_tensor(sel, lg.device)
    allowed = _allowed_bits(bm.index_select(0, idx), vocab)
    sub = lg.index_select(0, idx)
    sub[:, :vocab].masked_fill_(~allowed, float("-inf"))
    if width > vocab:
        sub[:, vocab:].fill_(float("-inf"))
    lg.index_copy_(0, idx, sub)
    return ~allowed.any(dim=1)


def _check_empty_torch(bitmask: Any, sel: list[int] | None, vocab: int) -> None:
    torch = _torch()
    bm = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    if sel is not None:
        bm = bm.index_select(0, _index_tensor(sel, bm.device))
    empty = ~_allowed_bits(bm, vocab).any(dim=1)
    bad = torch.nonzero(empty).flatten().tolist()  # syncs the host
    if bad:
        raise _empty_error([sel[i] if sel is not None else i for i in bad])


# --------------------------------------------------------------------------------------------
# Triton (CUDA; optional)

_TRITON: dict[str, Any] = {}
_TRITON_LOCK = threading.Lock()
_TRITON_WORDS = 64  # bitmask words per Triton program (2,048 logits)


def _triton_kernel() -> Any:
    """The Triton kernel, built on first use (None when triton is not importable)."""
    with _TRITON_LOCK:
        if "kernel" in _TRITON:
            return _TRITON["kernel"]
        try:
            import triton
            import triton.language as tl
        except Exception:  # noqa: BLE001 - any import failure means no triton
            _TRITON["kernel"] = None
            return None

        # triton ships no type information: its decorator is untyped.
        @triton.jit  # type: ignore[untyped-decorator,unused-ignore]
        def _mask_kernel(
            logits_ptr: Any,
            bitmask_ptr: Any,
            rows_ptr: Any,
            vocab_size: Any,
            width: Any,
            logits_stride: Any,
            bitmask_stride: Any,
            HAS_ROWS: tl.constexpr,
            WORDS: tl.constexpr,
        ) -> None:
            # One program: WORDS bitmask words of one row, as a (WORDS, 32) tile of logits.
            # Per word: all 32 allowed -> nothing read or written; none allowed -> 32 x -inf
            # stored, nothing read; mixed -> the 32 logits read and written back with -inf
            # where the bit is clear. Whole 32-logit groups are written, never single logits:
            # storing only the masked entries of a mixed group leaves partly written 32-byte
            # sectors for the memory system to merge, which measured 1.7x (float32) to 3.5x
            # (bfloat16) slower on an H200 (benches/cuda_bench.py).
            pid_row = tl.program_id(0)
            pid_col = tl.program_id(1)
            if HAS_ROWS:
                row = tl.load(rows_ptr + pid_row).to(tl.int64)
            else:
                row = pid_row.to(tl.int64)
            word = pid_col * WORDS + tl.arange(0, WORDS)
            words = tl.load(bitmask_ptr + row * bitmask_stride + word, mask=word < (vocab_size + 31) // 32, other=0)
            bit = tl.arange(0, 32)
            offs = word[:, None] * 32 + bit[None, :]
            allowed = (((words[:, None] >> bit[None, :]) & 1) != 0) & (offs < vocab_size)
            full = (words == -1) & ((word + 1) * 32 <= vocab_size)
            mixed = (words != 0) & (~full)
            in_width = offs < width
            ptrs = logits_ptr + row * logits_stride + offs
            x = tl.load(ptrs, mask=in_width & mixed[:, None], other=0.0)
            ninf = tl.full([WORDS, 32], float("-inf"), tl.float32).to(logits_ptr.dtype.element_ty)
            tl.store(ptrs, tl.where(allowed, x, ninf), mask=in_width & (~full[:, None]))

        _TRITON["kernel"] = _mask_kernel
        return _mask_kernel


def _launch_direct(logits: Any, bitmask: Any, vocab_size: int | None) -> bool:
    """The common GPU call (2-D logits and bitmask on one device, all rows, no check): the
    Triton kernel launched after the fewest attribute reads (each costs about a microsecond
    of the launching thread, whose time is the whole cost at small batch). False when the
    call needs the general path (then nothing was done). Raises :class:`UsageError` for
    widths that do not fit, like the general path."""
    kernel = _TRITON.get("kernel")
    if kernel is None or _TRITON.get("disabled"):
        return False
    torch = _torch()
    if bitmask.dtype is not torch.int32 or logits.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        return False
    lshape, bshape = logits.shape, bitmask.shape
    if len(lshape) != 2 or len(bshape) != 2 or lshape[0] != bshape[0] or logits.stride(1) != 1 or bitmask.stride(1) != 1:
        return False
    rows, width = lshape
    return _launch(kernel, logits, bitmask, None, rows, _check_widths(width, bshape[1], vocab_size), width)


def _launch(kernel: Any, lg: Any, bm: Any, rows: Any, n_rows: int, vocab: int, width: int) -> bool:
    """Launches the kernel over ``n_rows`` rows (``rows``: their indices on the device, or
    None for all). False if it cannot compile or launch: then it is disabled for good, with a
    warning, and the caller uses torch ops."""
    words = _TRITON_WORDS
    try:
        kernel[(n_rows, (width + 32 * words - 1) // (32 * words))](
            lg, bm, bm if rows is None else rows, vocab, width, lg.stride(0), bm.stride(0), HAS_ROWS=rows is not None, WORDS=words
        )
    except Exception as e:  # noqa: BLE001 - compile/launch problems: use torch ops from now on
        _TRITON["disabled"] = True
        warnings.warn(f"corral: the Triton bitmask kernel failed ({type(e).__name__}: {e}); using torch ops instead", RuntimeWarning, stacklevel=4)
        return False
    return True


def _use_triton(logits: Any) -> bool:
    if _TRITON.get("disabled"):
        return False
    lg = logits.unsqueeze(0) if logits.dim() == 1 else logits
    kernel = _TRITON["kernel"] if "kernel" in _TRITON else _triton_kernel()
    return lg.stride(1) == 1 and kernel is not None


def _apply_triton(logits: Any, bitmask: Any, sel: list[int] | None, vocab: int) -> None:
    """Masks with the Triton kernel (falls back to torch ops for good if it cannot compile)."""
    kernel = _triton_kernel()
    lg = logits.unsqueeze(0) if logits.dim() == 1 else logits
    bm = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    bm = bm.contiguous()
    width = lg.shape[1]
    if sel is not None and not sel:
        return
    rows = _index_tensor(sel, lg.device) if sel is not None else None
    n_rows = len(sel) if sel is not None else lg.shape[0]
    if not _launch(kernel, lg, bm, rows, n_rows, vocab, width):
        _apply_torch(logits, bitmask, sel, vocab)
