"""Allocating and reading token bitmasks.

Layout (shared with vLLM and xgrammar): int32 words, token ``i`` allowed iff bit ``i % 32``
of word ``i // 32`` is set; shape ``(batch, ceil(vocab_size / 32))``.

Example::

    >>> import corral
    >>> m = corral.allocate_token_bitmask(2, 100)
    >>> tuple(m.shape)
    (2, 4)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import UsageError


def bitmask_words(vocab_size: int) -> int:
    """Words per bitmask row: ``ceil(vocab_size / 32)``.

    >>> import corral
    >>> corral.bitmask_words(128256)
    4008
    """
    if vocab_size <= 0:
        raise UsageError(f"vocab_size must be positive, got {vocab_size}")
    return (vocab_size + 31) // 32


def allocate_token_bitmask(batch_size: int, vocab_size: int, *, pin_memory: bool = False) -> Any:
    """An all-allowed int32 bitmask of shape ``(batch_size, ceil(vocab_size / 32))``.

    A torch tensor on CPU when torch is importable, else a numpy array. ``pin_memory=True``
    allocates page-locked memory so ``.to("cuda", non_blocking=True)`` is truly asynchronous.

    >>> import corral
    >>> bitmask = corral.allocate_token_bitmask(2, 100)
    >>> tuple(bitmask.shape), int(bitmask[0, 0])
    ((2, 4), -1)
    """
    if batch_size <= 0:
        raise UsageError(f"batch_size must be positive, got {batch_size}")
    words = bitmask_words(vocab_size)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is installed in the test environment
        return np.full((batch_size, words), -1, dtype=np.int32)
    if pin_memory and torch.cuda.is_available():
        tensor = torch.full((batch_size, words), -1, dtype=torch.int32, pin_memory=True)
        # (A view of the tensor's pinned bytes: it does not own them, and with the attribute
        # below the two form a reference cycle that the garbage collector frees. The native
        # repeat check reads the tensor's data pointer each call, so bytes the tensor has let
        # go of are never written.)
        arr = tensor.numpy()
    else:
        arr = np.full((batch_size, words), -1, dtype=np.int32)
        tensor = torch.from_numpy(arr)
    # Lets corral's native code reach the buffer without several torch attribute calls; it
    # still checks that the tensor aliases this array before writing.
    setattr(tensor, "_corral_np", arr)
    return tensor


def _as_numpy(row: Any) -> np.ndarray:
    if hasattr(row, "detach") and hasattr(row, "cpu"):
        row = row.detach().cpu().numpy()
    return np.asarray(row)


def allowed_token_ids(row: Any, vocab_size: int) -> list[int]:
    """Token ids whose bit is set in one bitmask row (numpy or torch), below ``vocab_size``.

    >>> import numpy as np
    >>> allowed_token_ids(np.array([0b101], dtype=np.int32), 3)
    [0, 2]
    """
    words = _as_numpy(row).astype(np.int32).view(np.uint32)
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")
    ids: list[int] = np.flatnonzero(bits[:vocab_size]).tolist()
    return ids
