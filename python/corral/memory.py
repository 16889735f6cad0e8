"""One memory budget over every cache corral keeps.

corral caches, per process: the vocabulary's token sets (the walks behind every mask), each
compiled grammar's whole masks, the compiled-grammar cache of :func:`corral.compile`, the
process-wide terminal automata, the interned terminal and language ids, and the JSON Schema
compiler's automata (patterns, formats, key sets). A single byte budget covers them all
(default 128 MiB): an entry that would pass it is not kept, and a
background thread evicts the least recently used, cheapest-to-rebuild entries once the caches
pass 15/16 of it, back to 13/16 — never everything at once, and never inside a mask fill.

Data in use is *pinned*: a compiled grammar's own tables while it lives, the automata its
grammar holds, a token set a fill is reading. Pinned data counts against the budget but is
never evicted; :func:`memory_stats` reports ``pinned_over_budget`` when it alone exceeds the
budget (nothing more can then be cached: raise the budget or hold fewer grammars).

Set the budget in code (:func:`set_memory_budget`), in the environment
(``CORRAL_MEMORY_BUDGET=512MiB``, read when corral first caches something), or through the
engine adapters (vLLM: ``--additional-config '{"corral_memory_budget": "512MiB"}'``; SGLang:
``CorralGrammarBackend(..., memory_budget=...)``).

Example::

    >>> import corral
    >>> corral.set_memory_budget("128MiB")
    >>> corral.memory_budget() == 128 * 2**20
    True
    >>> stats = corral.memory_stats()
    >>> stats["total_bytes"] <= stats["budget"] or stats["pinned_over_budget"]
    True
    >>> sorted(stats["caches"])
    ['automata', 'compiled_grammars', 'language_ids', 'schema_automata', 'terminal_ids', 'token_sets', 'whole_masks']
    >>> corral.set_memory_budget(None)   # unlimited
    >>> corral.memory_budget() is None
    True
    >>> corral.set_memory_budget(corral.DEFAULT_MEMORY_BUDGET)
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Union

from . import _native
from .errors import UsageError

#: The default budget: 128 MiB.
DEFAULT_MEMORY_BUDGET = 128 * 2**20

__all__ = ["DEFAULT_MEMORY_BUDGET", "memory_budget", "memory_stats", "set_memory_budget"]


def set_memory_budget(budget: Union[int, str, None]) -> None:
    """Sets the byte budget of every cache corral keeps in this process.

    ``budget`` is a number of bytes, a string such as ``"512MiB"``, ``"2G"`` or
    ``"unlimited"``, or None (unlimited). When the caches hold more, the least recently used
    entries are evicted now; entries in use are not.

    >>> import corral
    >>> corral.set_memory_budget("64MiB"); corral.memory_budget() // 2**20
    64
    >>> corral.set_memory_budget(-1)
    Traceback (most recent call last):
        ...
    corral.UsageError: the memory budget must be a positive number of bytes, a string such as "512MiB", or None; got -1
    >>> corral.set_memory_budget(corral.DEFAULT_MEMORY_BUDGET)
    """
    if isinstance(budget, str):
        value: Optional[int] = _native.parse_memory_budget(budget)
    elif budget is None:
        value = None
    elif isinstance(budget, int) and not isinstance(budget, bool) and budget > 0:
        value = budget
    else:
        raise UsageError(f'the memory budget must be a positive number of bytes, a string such as "512MiB", or None; got {budget!r}')
    _native.set_memory_budget(value)


def memory_budget() -> Optional[int]:
    """The byte budget of corral's caches (None: unlimited).

    >>> import corral
    >>> corral.memory_budget() == corral.DEFAULT_MEMORY_BUDGET
    True
    """
    return _native.memory_budget()


def memory_stats() -> Dict[str, Any]:
    """What corral's caches hold, per kind of cache.

    Returns a dict: ``budget`` (bytes, None when unlimited), ``total_bytes`` (everything
    charged, pinned data included), ``pinned_bytes`` (in use: compiled grammars' own tables,
    cached entries held by live grammars or fills), ``pinned_over_budget``,
    ``eviction_passes``, ``env_error`` (a ``CORRAL_MEMORY_BUDGET`` that could not be read,
    else None) and ``caches``: for each of ``token_sets``, ``whole_masks``,
    ``compiled_grammars``, ``automata``, ``terminal_ids``, ``language_ids`` and
    ``schema_automata`` (the JSON Schema compiler's patterns, formats and key sets) a dict of
    ``bytes`` (evictable), ``pinned_bytes``, ``hits``, ``misses``, ``evictions`` and
    ``refused`` (entries not kept because the budget was full at the time). With
    ``CORRAL_MISS_DIAG=1`` in the environment (a measuring tool: it keeps a hash of every
    key met) it also has ``diagnostics``: why token sets were rebuilt (keys never met, met
    and evicted, or new only because a terminal or language id was given again), how long
    before the evicted entry was last used, and what the fills' builds cost.

    >>> import corral
    >>> v = corral.Vocabulary.from_bytes([b"a", b"b", b""], eos_token_ids=[2])
    >>> m = corral.Matcher(corral.compile(corral.Grammar.from_regex("(ab)+"), v))
    >>> s = corral.memory_stats()
    >>> s["caches"]["compiled_grammars"]["pinned_bytes"] > 0     # the grammar m uses
    True
    >>> set(s["caches"]["token_sets"]) >= {"bytes", "hits", "misses", "evictions"}
    True
    """
    return _native.memory_stats()
