"""Type stubs for corral._native (the Rust extension). See the Python docs of each name."""

from typing import Any, Sequence, final

from typing_extensions import Self

__all__ = [
    "Vocabulary",
    "Grammar",
    "CompiledGrammar",
    "Matcher",
    "_trigger_panic",
    "_allocator_purge_delay",
    "set_memory_budget",
    "memory_budget",
    "parse_memory_budget",
    "memory_stats",
    "compile_cached",
    "fill_next_token_bitmask_batch",
    "accept_token_batch",
    "apply_token_bitmask_cpu",
    "__version__",
]

__version__: str

@final
class Vocabulary:
    """Token id -> bytes for one tokenizer (use ``corral.Vocabulary`` constructors)."""

    def __new__(
        cls,
        tokens: Sequence[bytes],
        eos_token_ids: Sequence[int],
        special_token_ids: Sequence[int] = ...,
        vocab_size: int | None = None,
        token_names: Sequence[tuple[str, int]] = ...,
    ) -> Self: ...
    @property
    def size(self) -> int: ...
    @property
    def num_tokens(self) -> int: ...
    @property
    def eos_token_ids(self) -> list[int]: ...
    @property
    def fingerprint(self) -> int: ...
    @property
    def memory_bytes(self) -> int: ...
    @property
    def cache_bytes(self) -> int: ...
    def token_bytes(self, id: int) -> bytes: ...
    def is_special(self, id: int) -> bool: ...
    def has_token_extending(self, prefix: bytes) -> bool: ...
    def token_id(self, name: str) -> int | None: ...
    def __len__(self) -> int: ...

@final
class Grammar:
    """A tokenizer-independent grammar: build one with a ``from_*`` constructor, then pair it
    with a vocabulary with ``corral.compile``.

    Constructors: ``from_ebnf`` (GBNF), ``from_regex``, ``from_json_schema``, ``from_lark``,
    ``from_structural_tag``. Each takes ``limits={...}`` (see ``corral.LimitExceededError``).

    >>> import corral
    >>> g = corral.Grammar.from_ebnf('root ::= "yes" | "no"')
    >>> g.num_rules > 0
    True
    >>> s = corral.Grammar.from_json_schema({"type": "object", "properties": {"n": {"type": "integer"}}})
    >>> s.schema_keywords
    ['properties', 'type']
    >>> r = corral.Grammar.from_regex(r"[0-9]{3}-[0-9]{4}")
    >>> r.num_dfa_states > 0
    True
    """

    @staticmethod
    def from_ebnf(text: str | bytes, root: str = "root", *, limits: dict[str, int] | None = None) -> Grammar: ...
    @staticmethod
    def from_regex(pattern: str | bytes, *, limits: dict[str, int] | None = None) -> Grammar: ...
    @staticmethod
    def from_lark(text: str | bytes, *, limits: dict[str, int] | None = None) -> Grammar:
        """A Lark grammar (llguidance's dialect; root ``start``) with the language of Lark's
        Earley parser with ``lexer='dynamic_complete'`` (see docs/lark.md).

        >>> g = Grammar.from_lark('start: "a"+ NUMBER\\n%import common.NUMBER\\n%ignore " "\\n')

        Raises GrammarSyntaxError (line, column, line_text) or UnsupportedGrammarError
        (construct, location) for constructs corral refuses (special tokens, max_tokens, %declare...).
        """
        ...
    @staticmethod
    def from_structural_tag(tag: Any, *, limits: dict[str, int] | None = None) -> Grammar: ...
    @staticmethod
    def from_json_schema(
        schema: Any,
        *,
        whitespace: str = "flexible",
        indent: int | None = None,
        separators: tuple[str, str] | None = None,
        strict: bool = True,
        max_whitespace: int = 20,
        property_order: str = "any",
        limits: dict[str, int] | None = None,
    ) -> Grammar:
        """A grammar for the JSON texts whose value validates against ``schema``: a dict, JSON
        text (str or bytes), a pydantic model class, or a Python type pydantic can describe (a
        ``TypeAdapter``, a dataclass, a ``TypedDict``, ``list[Item]``, ``Optional[int]``...;
        needs pydantic, else :class:`corral.MissingDependencyError`). See docs/install.md."""
    @property
    def schema_keywords(self) -> list[str] | None: ...
    @property
    def schema_warnings(self) -> list[tuple[str, str, str]]: ...
    @property
    def num_rules(self) -> int: ...
    @property
    def num_terminals(self) -> int: ...
    @property
    def num_productions(self) -> int: ...
    @property
    def num_dfa_states(self) -> int: ...
    @property
    def source_key(self) -> str: ...
    @property
    def max_fill_ms(self) -> int: ...

@final
class CompiledGrammar:
    """A grammar paired with a vocabulary; immutable, shared across threads.

    Constructing it fills and caches the start state's mask, so every matcher's first
    ``fill_next_token_bitmask`` is a copy; token-level work past the start is done lazily by
    the fills (and ahead of them by a background thread). ``corral.compile`` caches these.

    >>> import corral
    >>> vocab = corral.Vocabulary.from_bytes([b"a", b"b", b""], eos_token_ids=[2])
    >>> compiled = corral.CompiledGrammar(corral.Grammar.from_regex("a+b"), vocab)
    >>> compiled.vocab.size, compiled.memory_bytes > 0
    (3, True)
    """

    def __new__(cls, grammar: Grammar, vocab: Any) -> Self: ...
    @property
    def vocab(self) -> Any: ...
    @property
    def grammar(self) -> Grammar: ...
    @property
    def memory_bytes(self) -> int: ...

@final
class Matcher:
    """Per-sequence matcher state: one per sequence being generated, over a compiled grammar.

    ``fill_next_token_bitmask`` writes the allowed tokens into a bitmask row (the GIL is
    released while filling); ``accept_token`` advances (``False``, state unchanged, when the
    token is not allowed); ``rollback`` undoes tokens; ``is_accepting`` says whether the text
    so far is complete, ``is_terminated`` whether EOS was accepted.

    >>> import corral
    >>> vocab = corral.Vocabulary.from_bytes([b"a", b"b", b"ab", b""], eos_token_ids=[3])
    >>> matcher = corral.Matcher(corral.compile(corral.Grammar.from_regex("ab"), vocab))
    >>> bitmask = corral.allocate_token_bitmask(1, vocab.size)
    >>> matcher.fill_next_token_bitmask(bitmask)
    >>> corral.allowed_token_ids(bitmask[0], vocab.size)
    [0, 2]
    >>> matcher.accept_token(1), matcher.accept_token(0)
    (False, True)
    >>> matcher.accept_token(1), matcher.is_accepting()
    (True, True)
    >>> matcher.rollback(1); matcher.is_accepting()
    False
    >>> matcher.accept_token(1), matcher.accept_token(3), matcher.is_terminated()
    (True, True, True)
    """

    def __new__(cls, compiled: CompiledGrammar) -> Self: ...
    @property
    def compiled(self) -> CompiledGrammar: ...
    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0) -> None: ...
    def accept_token(self, id: int) -> bool: ...
    def accept_bytes(self, data: bytes) -> bool: ...
    def accept_string(self, text: str) -> bool: ...
    def validate_tokens(self, ids: Sequence[int]) -> int: ...
    def rollback(self, n: int = 1) -> None: ...
    def is_accepting(self) -> bool: ...
    def is_terminated(self) -> bool: ...
    def forced_bytes(self) -> bytes: ...
    def last_tokens(self, n: int) -> list[int | None]: ...
    def forced_tokens(self) -> list[int]: ...
    def reset(self) -> None: ...
    @property
    def num_accepted(self) -> int: ...
    @property
    def memory_bytes(self) -> int: ...
    def copy(self) -> Matcher: ...
    def __copy__(self) -> Matcher: ...
    def __deepcopy__(self, memo: Any) -> Matcher: ...

def fill_next_token_bitmask_batch(matchers: Sequence[Matcher], bitmask: Any, indices: Sequence[int] | None = None) -> None:
    """Fills row ``indices[i]`` (default ``i``) of ``bitmask`` for ``matchers[i]``, many rows
    at once: the calling thread fills rows while corral's thread pool joins in; the GIL is
    released.

    >>> import corral
    >>> vocab = corral.Vocabulary.from_bytes([b"a", b"b", b""], eos_token_ids=[2])
    >>> compiled = corral.compile(corral.Grammar.from_regex("a|b"), vocab)
    >>> matchers = [corral.Matcher(compiled), corral.Matcher(compiled)]
    >>> _ = matchers[1].accept_token(0)
    >>> bitmask = corral.allocate_token_bitmask(2, vocab.size)
    >>> corral.fill_next_token_bitmask_batch(matchers, bitmask)
    >>> [corral.allowed_token_ids(row, vocab.size) for row in bitmask]
    [[0, 1], [2]]
    """
def accept_token_batch(matchers: Sequence[Matcher], tokens: Sequence[int | None]) -> int:
    """Accepts ``tokens[i]`` in ``matchers[i]`` for each row in one call; a row whose token is
    None, or whose matcher has accepted EOS, is skipped. Returns -1 when every other row
    accepted its token, else the index of the first row that refused it (that matcher
    unchanged, the rows after it not advanced).

    >>> import corral
    >>> vocab = corral.Vocabulary.from_bytes([b"a", b"b", b""], eos_token_ids=[2])
    >>> compiled = corral.compile(corral.Grammar.from_regex("ab"), vocab)
    >>> ms = [corral.Matcher(compiled) for _ in range(3)]
    >>> corral._native.accept_token_batch(ms, [0, None, 0])
    -1
    >>> corral._native.accept_token_batch(ms, [1, 0, 0])
    2
    >>> [m.num_accepted for m in ms]
    [2, 1, 1]
    """
    ...

def apply_token_bitmask_cpu(logits: Any, bitmask: Any, indices: Sequence[int] | None = None, vocab_size: int | None = None) -> list[int]: ...
def _trigger_panic() -> None: ...
def _allocator_purge_delay() -> int: ...
def set_memory_budget(bytes: int | None) -> None:
    """Sets the byte budget of every cache corral keeps (None: unlimited); caches over it are evicted now."""
def memory_budget() -> int | None:
    """The byte budget of every cache corral keeps (None: unlimited)."""
def parse_memory_budget(text: str) -> int | None:
    """The bytes ``CORRAL_MEMORY_BUDGET``-style text stands for (None for ``unlimited``)."""
def memory_stats() -> dict[str, Any]:
    """The budget, and the bytes, hits, misses and evictions of each kind of cache."""
def compile_cached(grammar: Grammar, vocab: Any) -> CompiledGrammar:
    """``CompiledGrammar(grammar, vocab)`` through the process-wide compiled-grammar cache."""
