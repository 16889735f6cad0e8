"""Serving engines' fills that end a request instead of raising when a fill runs out of time.

A fill that runs past its grammar's ``max_fill_ms`` raises :class:`corral.FillTimeoutError`
and leaves its row all zeros (the other rows of a batch are filled). Inside a serving engine's
step there is no per-request error path -- vLLM's ``StructuredOutputManager`` and SGLang's
scheduler would take the exception down with the whole batch -- so the adapters call
:func:`fill_or_end`: each row left all zeros gets only the vocabulary's EOS tokens (the request
ends at its next token, with the output cut short where the grammar became too costly), its
grammar is told through ``on_end`` so it reports itself terminated, and the event is logged as
an error. Without EOS tokens in the vocabulary there is no way to end the request, and the
error is raised as before.

Example::

    >>> import numpy as np, corral
    >>> from corral.fill_guard import fill_or_end
    >>> vocab = corral.builtin_vocabulary()
    >>> m = corral.Matcher(corral.compile(corral.Grammar.from_regex("[0-9]+"), vocab))
    >>> mask = np.zeros((1, corral.bitmask_words(vocab.size)), dtype=np.int32)
    >>> fill_or_end([m], mask, [0], lambda i: None)  # a normal fill: nothing ends
    >>> bool(mask.any())
    True
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

import numpy as np

from . import _native
from .errors import FillTimeoutError

logger = logging.getLogger("corral")


def _row_is_zero(bitmask: Any, row: int) -> bool:
    return not bool(bitmask[row].any())


def eos_only_row(bitmask: Any, row: int, eos_ids: Sequence[int]) -> None:
    """Sets row ``row`` of an int32 bitmask (numpy array or torch tensor) to allow only ``eos_ids``."""
    words = np.zeros(bitmask.shape[-1], dtype=np.uint32)
    for e in eos_ids:
        if 0 <= e < words.size * 32:
            words[e >> 5] |= np.uint32(1 << (e & 31))
    target = bitmask[row]
    if isinstance(target, np.ndarray):
        target[...] = words.view(np.int32)
    else:  # a torch tensor, on any device
        import torch

        target.copy_(torch.from_numpy(words.view(np.int32)))


def fill_or_end(matchers: Sequence[Any], bitmask: Any, rows: Sequence[int], on_end: Callable[[int], None]) -> None:
    """Fills row ``rows[i]`` for ``matchers[i]`` in one parallel call; when fills run out of
    time, each row they left all zeros allows only EOS and ``on_end(i)`` is called for it.

    Raises the :class:`corral.FillTimeoutError` when no such row can be ended (a vocabulary
    without EOS tokens)."""
    try:
        _native.fill_next_token_bitmask_batch(matchers, bitmask, rows)
    except FillTimeoutError as err:
        ended = [i for i, r in enumerate(rows) if _row_is_zero(bitmask, r)]
        eos = list(matchers[ended[0]].compiled.vocab.eos_token_ids) if ended else []
        if not eos:
            raise
        for i in ended:
            eos_only_row(bitmask, rows[i], eos)
            logger.error(
                "corral: the mask fill for row %d ran past the grammar's max_fill_ms (%s); the request is "
                "ended with EOS (its output stops here)",
                rows[i],
                err,
            )
            on_end(i)
