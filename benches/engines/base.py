"""The interface every engine adapter implements.

A *spec* says which grammar to build:

* ``{"kind": "schema", "schema": <dict>, "text": <str>}`` -- a JSON Schema, in the engine's
  default JSON Schema mode (``text`` is the schema serialized with ``json.dumps``);
* ``{"kind": "json"}`` -- "any JSON": corral's ``grammars/json.ebnf``, each peer's built-in JSON;
* ``{"kind": "gbnf", "name": ..., "text": ...}`` -- a llama.cpp GBNF grammar.

``compile(spec)`` goes from the grammar source to a token-level artifact; ``matcher(artifact)``
makes a fresh per-sequence matcher. The worker times ``compile`` + the first ``matcher`` as
"compile". ``fill(m)`` writes the next-token mask into ``self.mask`` (int32, shape ``(1, ceil(V/32))``:
what ``allocate_mask`` returned — not asked for corral under ``--corral-numpy-mask`` — else a
torch tensor for the engines in ``engines.TORCH_MASK`` and a numpy array for the others);
``accept(m, id)`` advances and returns whether it was accepted.
One-time work that depends only on the tokenizer happens in ``__init__`` (timed separately as
"vocabulary preprocessing").
"""

from __future__ import annotations

from typing import Any


class Unsupported(Exception):
    """The engine has no way to build this kind of grammar (not an error of the engine)."""


class Engine:
    name = "?"
    version = "?"

    def __init__(self, tok, options: dict) -> None:
        self.tok = tok
        self.options = options
        self.mask = None  # set by the worker before any fill

    def allocate_mask(self, vocab_size: int) -> Any:
        """The engine's own bitmask allocation, ``(1, ceil(vocab_size / 32))`` int32 (what its
        serving-engine integrations fill), or None: the worker then allocates one."""
        return None

    def set_mask(self, mask: Any) -> None:
        """The worker's mask row; ``mask_ptr`` / ``mask_words`` for pointer-based APIs."""
        self.mask = mask
        if hasattr(mask, "ctypes"):
            self.mask_ptr, self.mask_words = mask.ctypes.data, mask.size
        else:
            self.mask_ptr, self.mask_words = mask.data_ptr(), mask.numel()

    def compile(self, spec: dict) -> Any:
        raise NotImplementedError

    def matcher(self, compiled: Any) -> Any:
        raise NotImplementedError

    def fill(self, m: Any) -> None:
        raise NotImplementedError

    def accept(self, m: Any, token_id: int) -> bool:
        raise NotImplementedError

    def error(self, m: Any) -> str | None:
        """An engine-side error state of the matcher, if the engine has one."""
        return None
