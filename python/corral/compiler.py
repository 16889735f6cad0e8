"""Compiling a grammar against a vocabulary, with a cache keyed by both.

Example::

    >>> import corral
    >>> v = corral.Vocabulary.from_bytes([b"a", b"<eos>"], eos_token_ids=[1])
    >>> g = corral.Grammar.from_regex("a+")
    >>> corral.compile(g, v) is corral.compile(g, v)
    True
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Union

from . import _native
from .errors import UsageError
from .vocab import Vocabulary

_CACHE_SIZE = 256
_cache: "OrderedDict[tuple[str, int, int, int], _native.CompiledGrammar]" = OrderedDict()
_lock = threading.Lock()


def compile(grammar: _native.Grammar, vocab: Vocabulary) -> _native.CompiledGrammar:
    """Pairs ``grammar`` with ``vocab``. Results are cached by (grammar source, its fill time
    budget, vocabulary fingerprint), so compiling the same grammar again is a dictionary lookup.

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
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    compiled = _native.CompiledGrammar(grammar, vocab)
    with _lock:
        _cache[key] = compiled
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return compiled


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
