"""Compiling a grammar against a vocabulary, with a cache keyed by both (under corral's memory
budget: :mod:`corral.memory`).

Example::

    >>> import corral
    >>> v = corral.Vocabulary.from_bytes([b"a", b"<eos>"], eos_token_ids=[1])
    >>> g = corral.Grammar.from_regex("a+")
    >>> corral.compile(g, v) is corral.compile(g, v)
    True
"""

from __future__ import annotations

import threading
import weakref
from pathlib import Path
from typing import Union

from . import _native
from .errors import UsageError
from .vocab import Vocabulary

# The compiled grammars handed out and still alive, so that compiling again returns the same
# object; the cache that keeps compiled grammars after their callers dropped them is native,
# bounded by the memory budget (corral.set_memory_budget).
_live: "weakref.WeakValueDictionary[tuple[str, int, int, int], _native.CompiledGrammar]" = weakref.WeakValueDictionary()
_lock = threading.Lock()


def compile(grammar: _native.Grammar, vocab: Vocabulary) -> _native.CompiledGrammar:
    """Pairs ``grammar`` with ``vocab``. Results are cached by (grammar source, its fill time
    budget, vocabulary), so compiling the same grammar again is a dictionary lookup. The cache
    is bounded by corral's memory budget (:func:`corral.set_memory_budget`): grammars no caller
    holds are evicted, least recently used and cheapest to compile first.

    >>> import corral
    >>> vocab = corral.Vocabulary.from_bytes([b"a", b"b", b""], eos_token_ids=[2])
    >>> grammar = corral.Grammar.from_regex("a+b")
    >>> compiled = corral.compile(grammar, vocab)
    >>> corral.compile(grammar, vocab) is compiled
    True
    >>> corral.Matcher(compiled).accept_token(0)
    True
    """
    if not isinstance(grammar, _native.Grammar):
        raise UsageError(f"compile() needs a corral.Grammar, got {type(grammar).__name__}")
    if not isinstance(vocab, Vocabulary):
        raise UsageError(f"compile() needs a corral.Vocabulary, got {type(vocab).__name__}")
    # id(vocab): equal vocabularies may differ in what the token data does not capture (an
    # encoder for forced tokens); the cached entry keeps its vocabulary alive, so ids stay unique.
    key = (grammar.source_key, grammar.max_fill_ms, vocab.fingerprint, id(vocab))
    with _lock:
        hit = _live.get(key)
    if hit is not None:
        return hit
    compiled = _native.compile_cached(grammar, vocab)
    with _lock:
        return _live.setdefault(key, compiled)


GrammarFormat = Union[str, None]


def load_grammar(path: str | Path, format: GrammarFormat = None, *, root: str = "root") -> _native.Grammar:
    """Reads a grammar file. ``format`` is ``"ebnf"``, ``"regex"``, ``"lark"``,
    ``"json-schema"`` or ``"structural-tag"``; by default it is guessed from the extension
    (``.ebnf``/``.gbnf`` -> ebnf, ``.regex``/``.re`` -> regex, ``.lark`` -> lark, ``.json`` ->
    a structural tag when the object is one, else a JSON Schema).

    Example::

        >>> import corral, tempfile, os
        >>> d = tempfile.mkdtemp(); f = os.path.join(d, "g.lark")
        >>> _ = open(f, "w").write('start: "yes" | "no"\\n')
        >>> corral.load_grammar(f).num_rules > 0
        True
    """
    p = Path(path)
    data = p.read_bytes()
    fmt = format or {".ebnf": "ebnf", ".gbnf": "ebnf", ".regex": "regex", ".re": "regex", ".lark": "lark", ".json": "json"}.get(p.suffix.lower())
    if fmt == "ebnf":
        return _native.Grammar.from_ebnf(data, root)
    if fmt == "regex":
        return _native.Grammar.from_regex(data.decode("utf-8").rstrip("\n"))
    if fmt == "lark":
        return _native.Grammar.from_lark(data)
    if fmt in ("json", "json-schema", "structural-tag"):
        import json as _json

        try:
            obj = _json.loads(data)
        except ValueError as e:
            raise UsageError(f"{p.name}: not valid JSON: {e}") from None
        if fmt == "structural-tag" or (fmt == "json" and is_structural_tag(obj)):
            return _native.Grammar.from_structural_tag(obj)
        return _native.Grammar.from_json_schema(obj)
    raise UsageError(f"cannot tell the grammar format of {p.name}; pass format='ebnf', 'regex', 'lark', 'json-schema' or 'structural-tag'")


def is_structural_tag(obj: object) -> bool:
    """Whether a parsed JSON object is an xgrammar structural tag (``"type":
    "structural_tag"``, or the legacy ``structures``/``triggers`` form) rather than a schema."""
    return isinstance(obj, dict) and (obj.get("type") == "structural_tag" or ("structures" in obj and "triggers" in obj))
