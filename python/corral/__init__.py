"""corral: exact grammar-constrained decoding.

Grammars (GBNF, regex) compile to token-level masks over a tokenizer's vocabulary.

Example::

    >>> import corral
    >>> vocab = corral.Vocabulary.from_bytes([b"{", b"}", b" ", b"<eos>"], eos_token_ids=[3])
    >>> grammar = corral.Grammar.from_ebnf('root ::= "{" " "? "}"')
    >>> matcher = corral.Matcher(corral.compile(grammar, vocab))
    >>> mask = corral.allocate_token_bitmask(1, vocab.size)
    >>> matcher.fill_next_token_bitmask(mask)
    >>> corral.allowed_token_ids(mask[0], vocab.size)
    [0]
"""

from __future__ import annotations

from typing import Any

from ._native import CompiledGrammar, Grammar, Matcher, fill_next_token_bitmask_batch
from .bitmask import allocate_token_bitmask, allowed_token_ids, bitmask_words
from .compiler import compile, load_grammar
from .errors import (
    CompileTimeoutError,
    CorralError,
    EmptyMaskError,
    FillTimeoutError,
    GrammarError,
    GrammarSyntaxError,
    InternalError,
    LimitExceededError,
    MissingDependencyError,
    SchemaWarning,
    TokenizerError,
    UnsupportedSchemaError,
    InvalidSchemaError,
    InvalidStructuralTagError,
    UnsupportedGrammarError,
    UsageError,
)
from .forced import forced_tokens
from .grammars import builtin_grammar
from .memory import DEFAULT_MEMORY_BUDGET, memory_budget, memory_stats, set_memory_budget
from .logits import apply_token_bitmask_inplace
from .vocab import Vocabulary, builtin_vocabulary

__version__ = "0.1.0"

__all__ = [
    "CompiledGrammar",
    "Grammar",
    "Matcher",
    "Vocabulary",
    "compile",
    "fill_next_token_bitmask_batch",
    "builtin_grammar",
    "builtin_vocabulary",
    "load_grammar",
    "set_memory_budget",
    "memory_budget",
    "memory_stats",
    "DEFAULT_MEMORY_BUDGET",
    "allocate_token_bitmask",
    "allowed_token_ids",
    "bitmask_words",
    "CorralError",
    "GrammarError",
    "GrammarSyntaxError",
    "UnsupportedSchemaError",
    "InvalidSchemaError",
    "InvalidStructuralTagError",
    "UnsupportedGrammarError",
    "LimitExceededError",
    "CompileTimeoutError",
    "FillTimeoutError",
    "TokenizerError",
    "UsageError",
    "MissingDependencyError",
    "EmptyMaskError",
    "InternalError",
    "SchemaWarning",
    "apply_token_bitmask_inplace",
    "forced_tokens",
    "SamplingParams",
    "sample",
    "generate",
    "GenerationResult",
    "speculative",
]

# Names whose modules import torch: loaded on first use, so that `import corral` (and the CLI)
# stays fast without it.
_LAZY = {
    "SamplingParams": "sampling",
    "sample": "sampling",
    "generate": "generate",
    "GenerationResult": "generate",
}

_LAZY_MODULES = {"speculative"}  # imports torch


def __getattr__(name: str) -> Any:  # PEP 562
    if name in _LAZY_MODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'corral' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | _LAZY_MODULES)
