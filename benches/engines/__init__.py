"""One adapter per engine, all with the interface of :class:`engines.base.Engine`.

Imported only inside a worker process (``benches/worker.py``), one engine per process.
"""

from __future__ import annotations

import importlib

ENGINES = ("corral", "xgrammar", "llguidance", "outlines", "corral_base")

#: engines whose fill API takes a torch tensor (the others get a numpy array and a pointer);
#: the worker imports torch for them before measuring its baseline memory.
TORCH_MASK = {"corral", "xgrammar", "corral_base"}


def module(name: str):
    """Imports the adapter (and so the engine's package): not part of any timing."""
    if name not in ENGINES:
        raise SystemExit(f"unknown engine {name!r}; known: {', '.join(ENGINES)}")
    return importlib.import_module(f"engines.{name}")


def load(name: str, tok, options: dict):
    return module(name).Engine(tok, options)
