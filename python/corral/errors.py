"""The exception hierarchy of corral: everything it raises derives from :class:`CorralError`.

Example::

    >>> import corral
    >>> try:
    ...     corral.Grammar.from_ebnf('root ::= "unterminated')
    ... except corral.GrammarSyntaxError as e:
    ...     print(e.line, e.column)
    1 10
"""

from __future__ import annotations


class CorralError(Exception):
    """Base class of every error corral raises."""


class GrammarError(CorralError, ValueError):
    """The grammar is unusable: undefined rule, missing root, matches nothing..."""

    line: int | None = None
    column: int | None = None


class GrammarSyntaxError(GrammarError):
    """The grammar (or regex) text does not parse; ``line``/``column`` say where."""

    line_text: str | None = None
    reason: str | None = None


class UnsupportedSchemaError(GrammarError):
    """A JSON Schema keyword or value cannot be enforced exactly (``pointer`` says where)."""

    pointer: str | None = None
    keyword: str | None = None


class InvalidSchemaError(GrammarError):
    """The JSON Schema itself is malformed (``pointer`` says where)."""

    pointer: str | None = None


class UnsupportedGrammarError(GrammarError):
    """A construct of the grammar's format that corral does not support (``construct`` names
    it, ``location`` says where: line:col in a grammar text, a JSON pointer in a structural tag)."""

    construct: str | None = None
    location: str | None = None


class InvalidStructuralTagError(GrammarError):
    """The structural tag does not follow xgrammar's format (``pointer`` says where)."""

    pointer: str | None = None


class LimitExceededError(CorralError, ValueError):
    """A resource limit was exceeded; ``limit_name`` names the limit to raise."""

    limit_name: str | None = None
    limit: int | None = None


class CompileTimeoutError(LimitExceededError):
    """Compilation ran past its time budget."""


class FillTimeoutError(LimitExceededError):
    """A mask fill ran past its time budget (``max_fill_ms``); the mask row is all zeros.

    Ordinary grammars fill in microseconds; this means a highly ambiguous grammar at a position
    where the vocabulary's long tokens split into terminals in very many ways."""


class TokenizerError(CorralError, ValueError):
    """The tokenizer or vocabulary is inconsistent or unsupported."""


class UsageError(CorralError, ValueError):
    """The API was used wrongly: bad token id, wrong tensor shape or dtype, rollback too far..."""


class MissingDependencyError(CorralError, ImportError):
    """An optional package a feature needs is not installed; ``package`` names it (e.g. pydantic,
    for a JSON Schema from a Python type). Also an :class:`ImportError`."""

    def __init__(self, msg: str, *, package: str) -> None:
        super().__init__(msg, name=package)
        self.package = package


class EmptyMaskError(CorralError, RuntimeError):
    """A mask row allows no token at all: sampling from it would be meaningless."""


class InternalError(CorralError, RuntimeError):
    """A bug inside corral (a Rust panic caught at the boundary). Please report it."""


class SchemaWarning(UserWarning):
    """A JSON Schema keyword was ignored (non-strict mode); the grammar is looser than the schema."""


__all__ = [
    "CorralError",
    "GrammarError",
    "GrammarSyntaxError",
    "UnsupportedSchemaError",
    "InvalidSchemaError",
    "UnsupportedGrammarError",
    "InvalidStructuralTagError",
    "LimitExceededError",
    "CompileTimeoutError",
    "FillTimeoutError",
    "TokenizerError",
    "UsageError",
    "MissingDependencyError",
    "EmptyMaskError",
    "InternalError",
    "SchemaWarning",
]
