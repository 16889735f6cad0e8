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
    """Base class of every error corral raises.

    >>> import corral
    >>> try:
    ...     corral.Grammar.from_regex("(")
    ... except corral.CorralError as e:
    ...     print(type(e).__name__)
    GrammarSyntaxError
    """


class GrammarError(CorralError, ValueError):
    """The grammar is unusable: undefined rule, missing root, matches nothing...

    >>> import corral
    >>> try:
    ...     corral.Grammar.from_ebnf("root ::= missing")
    ... except corral.GrammarError as e:
    ...     print(e.line, e.column)
    1 10
    """

    line: int | None = None
    column: int | None = None


class GrammarSyntaxError(GrammarError):
    """The grammar (or regex) text does not parse; ``line``/``column`` say where.

    >>> import corral
    >>> try:
    ...     corral.Grammar.from_ebnf('root ::= "unterminated')
    ... except corral.GrammarSyntaxError as e:
    ...     print(e.line, e.column)
    1 10
    """

    line_text: str | None = None
    reason: str | None = None


class UnsupportedSchemaError(GrammarError):
    """A JSON Schema keyword or value cannot be enforced exactly (``pointer`` says where).

    >>> import corral
    >>> try:
    ...     corral.Grammar.from_json_schema({"type": "array", "uniqueItems": True})
    ... except corral.UnsupportedSchemaError as e:
    ...     print(e.keyword, e.pointer)
    uniqueItems /uniqueItems
    """

    pointer: str | None = None
    keyword: str | None = None


class InvalidSchemaError(GrammarError):
    """The JSON Schema itself is malformed (``pointer`` says where).

    >>> import corral
    >>> try:
    ...     corral.Grammar.from_json_schema({"type": 5})
    ... except corral.InvalidSchemaError as e:
    ...     print(e.pointer)
    /type
    """

    pointer: str | None = None


class UnsupportedGrammarError(GrammarError):
    """A construct of the grammar's format that corral does not support (``construct`` names
    it, ``location`` says where: line:col in a grammar text, a JSON pointer in a structural tag).

    >>> import corral
    >>> try:
    ...     corral.Grammar.from_lark("start: /(?=a)a/")
    ... except corral.UnsupportedGrammarError as e:
    ...     print(e.construct)
    regex look-around
    """

    construct: str | None = None
    location: str | None = None


class InvalidStructuralTagError(GrammarError):
    """The structural tag does not follow xgrammar's format (``pointer`` says where).

    >>> import corral
    >>> try:
    ...     corral.Grammar.from_structural_tag({"type": "nope"})
    ... except corral.InvalidStructuralTagError as e:
    ...     print(e.pointer)
    /type
    """

    pointer: str | None = None


class LimitExceededError(CorralError, ValueError):
    """A resource limit was exceeded; ``limit_name`` names the limit to raise.

    >>> import corral
    >>> try:
    ...     corral.Grammar.from_regex("a{1,100000}")
    ... except corral.LimitExceededError as e:
    ...     print(e.limit_name)
    max_repeat
    >>> corral.Grammar.from_regex("a{1,12000}", limits={"max_repeat": 12000}).num_rules > 0
    True
    """

    limit_name: str | None = None
    limit: int | None = None


class CompileTimeoutError(LimitExceededError):
    """Compilation ran past its time budget (``limits={"max_compile_ms": ...}``).

    >>> import corral
    >>> issubclass(corral.CompileTimeoutError, corral.LimitExceededError)
    True
    """


class FillTimeoutError(LimitExceededError):
    """A mask fill ran past its time budget (``max_fill_ms``); the mask row is all zeros.

    Ordinary grammars fill in microseconds; this means a highly ambiguous grammar at a position
    where the vocabulary's long tokens split into terminals in very many ways.

    >>> import corral
    >>> issubclass(corral.FillTimeoutError, corral.LimitExceededError)
    True
    """


class TokenizerError(CorralError, ValueError):
    """The tokenizer or vocabulary is inconsistent or unsupported.

    >>> import corral
    >>> try:
    ...     corral.Vocabulary.from_bytes([b"a"], eos_token_ids=[5])
    ... except corral.TokenizerError as e:
    ...     print("out of range" in str(e))
    True
    """


class UsageError(CorralError, ValueError):
    """The API was used wrongly: bad token id, wrong tensor shape or dtype, rollback too far...

    >>> import corral
    >>> vocab = corral.Vocabulary.from_bytes([b"a", b""], eos_token_ids=[1])
    >>> matcher = corral.Matcher(corral.compile(corral.Grammar.from_regex("a"), vocab))
    >>> try:
    ...     matcher.rollback(3)
    ... except corral.UsageError as e:
    ...     print(e)
    cannot roll back 3 tokens: only 0 have been accepted
    """


class MissingDependencyError(CorralError, ImportError):
    """An optional package a feature needs is not installed; ``package`` names it (e.g. pydantic,
    for a JSON Schema from a Python type). Also an :class:`ImportError`.

    >>> import corral
    >>> e = corral.MissingDependencyError("this needs pydantic: pip install pydantic", package="pydantic")
    >>> isinstance(e, ImportError), e.package
    (True, 'pydantic')
    """

    def __init__(self, msg: str, *, package: str) -> None:
        super().__init__(msg, name=package)
        self.package = package


class EmptyMaskError(CorralError, RuntimeError):
    """A mask row allows no token at all: sampling from it would be meaningless.

    >>> import corral, torch
    >>> bitmask = corral.allocate_token_bitmask(1, 3)
    >>> bitmask[:] = 0
    >>> try:
    ...     corral.apply_token_bitmask_inplace(torch.zeros(1, 3), bitmask, check_empty=True)
    ... except corral.EmptyMaskError:
    ...     print("empty")
    empty
    """


class InternalError(CorralError, RuntimeError):
    """A bug inside corral (a Rust panic caught at the boundary). Please report it.

    >>> import corral
    >>> issubclass(corral.InternalError, (corral.CorralError, RuntimeError))
    True
    """


class SchemaWarning(UserWarning):
    """A JSON Schema keyword was ignored (non-strict mode); the grammar is looser than the schema.

    >>> import corral, warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     g = corral.Grammar.from_json_schema({"type": "array", "uniqueItems": True}, strict=False)
    >>> [w.category.__name__ for w in caught]
    ['SchemaWarning']
    """


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
