"""Grammars shipped with corral (no repository checkout needed).

Only ``"json"`` exists: JSON (RFC 8259) as GBNF, the same file as ``grammars/json.ebnf`` in
the source tree (any JSON value at top level, every string escape, bounded whitespace).

Example::

    >>> from corral.grammars import builtin_grammar
    >>> g = builtin_grammar("json")
    >>> g.num_rules
    12
"""

from __future__ import annotations

import functools
from importlib.resources import files

from .._native import Grammar
from ..errors import UsageError

__all__ = ["builtin_grammar", "builtin_grammar_text", "BUILTIN_GRAMMARS"]

#: name -> file inside the ``corral.grammars`` package.
BUILTIN_GRAMMARS: dict[str, str] = {"json": "json.ebnf"}


def builtin_grammar_text(name: str = "json") -> str:
    """The GBNF source of built-in grammar ``name``."""
    fname = BUILTIN_GRAMMARS.get(name)
    if fname is None:
        raise UsageError(f"no built-in grammar named {name!r}; available: {', '.join(sorted(BUILTIN_GRAMMARS))}")
    return (files(__name__) / fname).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=None)
def _builtin(name: str) -> Grammar:
    return Grammar.from_ebnf(builtin_grammar_text(name), "root")


def builtin_grammar(name: str = "json") -> Grammar:
    """Built-in grammar ``name`` as a :class:`corral.Grammar` (parsed once per process).

    >>> builtin_grammar().num_terminals
    12
    """
    if name not in BUILTIN_GRAMMARS:
        builtin_grammar_text(name)  # raises UsageError with the list of names
    return _builtin(name)
