"""An independent reference recognizer for GBNF grammars, in plain Python.

This module does not use corral at all. It exists so that the tests can compare corral's
token masks against a second, deliberately simple implementation:

1. ``parse_gbnf`` reads a subset of the llama.cpp GBNF dialect into a small AST
   (rules ``name ::= ...``, ``|``, grouping, ``* + ? {m} {m,} {m,n} {,n}``, string literals,
   character classes with ranges and negation, ``.``, rule references, ``#`` comments;
   a rule continues on the next line after ``::=`` or ``|``, inside parentheses, and when
   the next line starts with ``|``).
2. ``Reference`` expands the AST into a plain context-free grammar whose terminals are sets
   of Unicode scalar values (code points, surrogates excluded), removes unproductive
   productions (so that every viable prefix really can be completed) and recognizes
   strings with an Earley parser over code points.
3. ``is_prefix(grammar, data)`` / ``is_complete(grammar, data)`` answer the byte-level
   questions the token masks are about.

Everything is written for clarity, not speed; the only optimisation is a cache of Earley
charts keyed by the decoded text, so that checking many tokens after the same prefix
does not re-parse the prefix each time.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple, Union

MAX_CP = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)


class ReferenceGrammarError(ValueError):
    """The reference could not use the grammar (syntax error, undefined rule, ...)."""


class EmptyLanguageError(ReferenceGrammarError):
    """The start rule derives no finite string at all."""


# ---------------------------------------------------------------------------------------
# Character classes: sorted, disjoint, inclusive intervals of Unicode scalar values.
# ---------------------------------------------------------------------------------------

Intervals = Tuple[Tuple[int, int], ...]


def _merge(ranges: Sequence[Tuple[int, int]]) -> List[Tuple[int, int]]:
    out: List[Tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _remove(ranges: List[Tuple[int, int]], cut_lo: int, cut_hi: int) -> List[Tuple[int, int]]:
    out = []
    for lo, hi in ranges:
        if hi < cut_lo or lo > cut_hi:
            out.append((lo, hi))
            continue
        if lo < cut_lo:
            out.append((lo, cut_lo - 1))
        if hi > cut_hi:
            out.append((cut_hi + 1, hi))
    return out


def make_class(ranges: Sequence[Tuple[int, int]], negated: bool = False) -> Intervals:
    """The set of scalar values in ``ranges`` (or not in them, if ``negated``)."""
    merged = _merge([(max(0, lo), min(MAX_CP, hi)) for lo, hi in ranges if lo <= hi and lo <= MAX_CP])
    if negated:
        complement = []
        nxt = 0
        for lo, hi in merged:
            if lo > nxt:
                complement.append((nxt, lo - 1))
            nxt = hi + 1
        if nxt <= MAX_CP:
            complement.append((nxt, MAX_CP))
        merged = complement
    return tuple(_remove(merged, *SURROGATES))


def class_contains(cls: Intervals, cp: int) -> bool:
    for lo, hi in cls:
        if lo <= cp <= hi:
            return True
    return False


def class_intersects(cls: Intervals, lo: int, hi: int) -> bool:
    for a, b in cls:
        if a <= hi and lo <= b:
            return True
    return False


class Terminal:
    """A grammar terminal: one code point out of a class."""

    __slots__ = ("cls", "label")

    def __init__(self, cls: Intervals, label: str) -> None:
        self.cls = cls
        self.label = label

    def __contains__(self, cp: int) -> bool:
        return class_contains(self.cls, cp)

    def __repr__(self) -> str:
        return f"T({self.label})"


# ---------------------------------------------------------------------------------------
# GBNF parsing
# ---------------------------------------------------------------------------------------
# AST nodes are tuples:
#   ("seq", [nodes]) ("alt", [nodes]) ("lit", str) ("cls", Intervals, label)
#   ("ref", name) ("rep", node, min, max_or_None)

_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
_SIMPLE_ESCAPES = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "v": 0x0B, "b": 0x08, "0": 0x00}
_PUNCT_ESCAPES = set("\"\\[]-^/.|()*+?{}'# ")
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


class _GbnfParser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    # -- helpers -------------------------------------------------------------------------
    def fail(self, msg: str) -> None:
        line = self.s.count("\n", 0, self.i) + 1
        raise ReferenceGrammarError(f"{msg} (line {line}, offset {self.i})")

    def peek(self, k: int = 0) -> Optional[str]:
        j = self.i + k
        return self.s[j] if j < len(self.s) else None

    def skip_space(self, newlines: bool) -> None:
        while True:
            c = self.peek()
            if c in (" ", "\t"):
                self.i += 1
            elif newlines and c in ("\n", "\r"):
                self.i += 1
            elif c == "#":
                while self.peek() is not None and self.peek() != "\n":
                    self.i += 1
            elif c == "\\" and self.peek(1) in ("\n", "\r"):
                self.i += 2  # line continuation
            else:
                return

    # -- grammar structure -----------------------------------------------------------------
    def grammar(self) -> List[Tuple[str, tuple]]:
        rules = []
        self.skip_space(True)
        while self.peek() is not None:
            rules.append(self.rule())
            self.skip_space(True)
        return rules

    def name(self) -> str:
        start = self.i
        while self.peek() is not None and self.peek() in _NAME_CHARS:
            self.i += 1
        if start == self.i:
            self.fail("expected a rule name")
        return self.s[start : self.i]

    def rule(self) -> Tuple[str, tuple]:
        name = self.name()
        self.skip_space(False)
        if not self.s.startswith("::=", self.i):
            self.fail(f"expected ::= after {name!r}")
        self.i += 3
        self.skip_space(True)
        body = self.alternatives(nested=False)
        self.skip_space(False)
        if self.peek() not in (None, "\n", "\r"):
            self.fail(f"unexpected {self.peek()!r} at end of rule {name!r}")
        return name, body

    def alternatives(self, nested: bool) -> tuple:
        alts = [self.sequence(nested)]
        while True:
            save = self.i
            self.skip_space(True)
            if self.peek() != "|":
                self.i = save
                break
            self.i += 1
            self.skip_space(True)
            alts.append(self.sequence(nested))
        return alts[0] if len(alts) == 1 else ("alt", alts)

    def sequence(self, nested: bool) -> tuple:
        items = []
        while True:
            self.skip_space(nested)
            c = self.peek()
            if c is None or c in "|)\n\r":
                break
            if c == '"':
                item = ("lit", self.literal())
            elif c == "[":
                item = self.char_class()
            elif c == "." and not (self.peek(1) is not None and self.peek(1) in _NAME_CHARS):
                self.i += 1
                item = ("cls", make_class([], negated=True), ".")
            elif c == "(":
                self.i += 1
                self.skip_space(True)
                item = self.alternatives(nested=True)
                self.skip_space(True)
                if self.peek() != ")":
                    self.fail("missing ')'")
                self.i += 1
            elif c in _NAME_CHARS:
                ref = self.name()
                save = self.i
                self.skip_space(False)
                if self.s.startswith("::=", self.i):
                    self.fail(f"rule {ref!r} starts before the previous rule ended")
                self.i = save
                item = ("ref", ref)
            else:
                self.fail(f"unexpected {c!r}")
            items.append(self.postfix(item))
        return items[0] if len(items) == 1 else ("seq", items)

    def postfix(self, item: tuple) -> tuple:
        while True:
            self.skip_space(False)
            c = self.peek()
            if c == "*":
                lo, hi = 0, None
            elif c == "+":
                lo, hi = 1, None
            elif c == "?":
                lo, hi = 0, 1
            elif c == "{":
                self.i += 1
                self.skip_space(False)
                lo = self.number()
                self.skip_space(False)
                if self.peek() == ",":
                    self.i += 1
                    self.skip_space(False)
                    hi = self.number()
                else:
                    if lo is None:
                        self.fail("empty repetition")
                    hi = lo
                lo = lo or 0
                self.skip_space(False)
                if self.peek() != "}":
                    self.fail("missing '}'")
                if hi is not None and hi < lo:
                    self.fail("repetition maximum below minimum")
            else:
                return item
            self.i += 1
            item = ("rep", item, lo, hi)

    def number(self) -> Optional[int]:
        start = self.i
        while self.peek() is not None and self.peek().isdigit() and self.peek() in "0123456789":
            self.i += 1
        return int(self.s[start : self.i]) if self.i > start else None

    def char(self, in_class: bool) -> int:
        c = self.peek()
        if c is None:
            self.fail("unterminated literal or class")
        if c == "\n" and not in_class:
            self.fail("newline inside a string literal")
        self.i += 1
        if c != "\\":
            return ord(c)
        e = self.peek()
        if e is None:
            self.fail("unterminated escape")
        self.i += 1
        if e in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[e]
        if e in _HEX_ESCAPES:
            n = _HEX_ESCAPES[e]
            digits = self.s[self.i : self.i + n]
            if len(digits) != n or any(d not in "0123456789abcdefABCDEF" for d in digits):
                self.fail(f"bad \\{e} escape")
            self.i += n
            v = int(digits, 16)
            if v > MAX_CP or SURROGATES[0] <= v <= SURROGATES[1]:
                self.fail("escape is not a Unicode scalar value")
            return v
        if e in _PUNCT_ESCAPES:
            return ord(e)
        self.fail(f"invalid escape \\{e}")
        raise AssertionError  # unreachable

    def literal(self) -> str:
        self.i += 1  # opening quote
        out = []
        while True:
            c = self.peek()
            if c is None:
                self.fail("unterminated string literal")
            if c == '"':
                self.i += 1
                return "".join(out)
            out.append(chr(self.char(in_class=False)))

    def char_class(self) -> tuple:
        start = self.i
        self.i += 1  # '['
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        ranges = []
        while True:
            c = self.peek()
            if c is None:
                self.fail("unterminated character class")
            if c == "]":
                self.i += 1
                break
            lo = self.char(in_class=True)
            hi = lo
            if self.peek() == "-" and self.peek(1) is not None and self.peek(1) != "]":
                self.i += 1
                hi = self.char(in_class=True)
                if hi < lo:
                    self.fail("reversed character range")
            ranges.append((lo, hi))
        return ("cls", make_class(ranges, negated), self.s[start : self.i])


def parse_gbnf(text: str) -> List[Tuple[str, tuple]]:
    """Parses GBNF text into ``[(rule_name, ast), ...]`` in source order."""
    return _GbnfParser(text).grammar()


# ---------------------------------------------------------------------------------------
# Expansion to a plain CFG, pruning, Earley recognition
# ---------------------------------------------------------------------------------------

Symbol = Union[str, Terminal]  # str = nonterminal name, Terminal = one code point of a class
START = "<start>"


class _EarleySet:
    __slots__ = ("items", "waiting", "scans")

    def __init__(self) -> None:
        self.items: set = set()
        self.waiting: Dict[str, list] = defaultdict(list)  # nonterminal -> items expecting it
        self.scans: list = []  # (item, terminal) for items expecting a terminal


_EMPTY_SET = _EarleySet()


class Reference:
    """A GBNF grammar turned into a pruned CFG over code-point classes, with an Earley parser."""

    def __init__(self, text: str, root: str = "root") -> None:
        self.text = text
        rules = parse_gbnf(text)
        if not rules:
            raise ReferenceGrammarError("empty grammar")
        defs: Dict[str, tuple] = {}
        for name, body in rules:
            if name in defs:
                raise ReferenceGrammarError(f"rule {name!r} defined twice")
            defs[name] = body
        if root not in defs:
            raise ReferenceGrammarError(f"no rule named {root!r}")
        self.productions: List[Tuple[str, Tuple[Symbol, ...]]] = []
        self._fresh = 0
        self._defs = defs
        for name, body in rules:
            alts = body[1] if body[0] == "alt" else [body]
            for alt in alts:
                self.productions.append((name, tuple(self._symbols(alt, name))))
        self.productions.append((START, (root,)))
        self._prune()
        self.by_lhs: Dict[str, List[int]] = defaultdict(list)
        for i, (lhs, _) in enumerate(self.productions):
            self.by_lhs[lhs].append(i)
        self.start_prod = next(i for i, (lhs, _) in enumerate(self.productions) if lhs == START)
        self.nullable = self._nullable()
        self._charts: Dict[str, Tuple[_EarleySet, ...]] = {}

    # -- expansion ---------------------------------------------------------------------------
    def _new_nt(self, base: str) -> str:
        self._fresh += 1
        return f"{base}#{self._fresh}"

    def _symbols(self, node: tuple, owner: str) -> List[Symbol]:
        """The symbol sequence standing for ``node`` (adding helper productions as needed)."""
        kind = node[0]
        if kind == "seq":
            out: List[Symbol] = []
            for item in node[1]:
                out.extend(self._symbols(item, owner))
            return out
        if kind == "alt":
            nt = self._new_nt(owner)
            for alt in node[1]:
                self.productions.append((nt, tuple(self._symbols(alt, owner))))
            return [nt]
        if kind == "lit":
            return [Terminal(make_class([(ord(ch), ord(ch))]), repr(ch)) for ch in node[1]]
        if kind == "cls":
            return [Terminal(node[1], node[2])]
        if kind == "ref":
            if node[1] not in self._defs:
                raise ReferenceGrammarError(f"undefined rule {node[1]!r}")
            return [node[1]]
        if kind == "rep":
            _, inner, lo, hi = node
            body = self._symbols(inner, owner)
            if len(body) == 1:
                unit = body[0]
            else:
                unit = self._new_nt(owner)
                self.productions.append((unit, tuple(body)))
            out = [unit] * lo
            if hi is None:
                star = self._new_nt(owner)  # star -> ε | unit star
                self.productions.append((star, ()))
                self.productions.append((star, (unit, star)))
                out.append(star)
            elif hi > lo:
                opt: Optional[str] = None  # opt_k -> ε | unit opt_{k-1}
                for _ in range(hi - lo):
                    nxt = self._new_nt(owner)
                    self.productions.append((nxt, ()))
                    self.productions.append((nxt, (unit,) if opt is None else (unit, opt)))
                    opt = nxt
                out.append(opt)
            return out
        raise AssertionError(kind)

    def _prune(self) -> None:
        productive: set = set()
        changed = True
        while changed:
            changed = False
            for lhs, rhs in self.productions:
                if lhs not in productive and all(self._sym_ok(s, productive) for s in rhs):
                    productive.add(lhs)
                    changed = True
        if START not in productive:
            raise EmptyLanguageError("the start rule derives no finite string")
        self.productions = [(l, r) for l, r in self.productions if all(self._sym_ok(s, productive) for s in r)]

    @staticmethod
    def _sym_ok(sym: Symbol, productive: set) -> bool:
        if isinstance(sym, Terminal):
            return len(sym.cls) > 0
        return sym in productive

    def _nullable(self) -> set:
        nullable: set = set()
        changed = True
        while changed:
            changed = False
            for lhs, rhs in self.productions:
                if lhs not in nullable and all(isinstance(s, str) and s in nullable for s in rhs):
                    nullable.add(lhs)
                    changed = True
        return nullable

    # -- Earley ------------------------------------------------------------------------------
    def _build_set(self, chart: Tuple[_EarleySet, ...], kernel: List[tuple]) -> _EarleySet:
        """Earley set number ``len(chart)`` from its kernel items (prediction + completion)."""
        k = len(chart)
        s = _EarleySet()
        agenda = []

        def add(item: tuple) -> None:
            if item not in s.items:
                s.items.add(item)
                agenda.append(item)

        for item in kernel:
            add(item)
        while agenda:
            item = agenda.pop()
            p, dot, origin = item
            lhs, rhs = self.productions[p]
            if dot == len(rhs):  # completion
                parents = s.waiting.get(lhs, ()) if origin == k else chart[origin].waiting.get(lhs, ())
                for pp, pd, po in list(parents):
                    add((pp, pd + 1, po))
                continue
            sym = rhs[dot]
            if isinstance(sym, Terminal):
                s.scans.append((item, sym))
                continue
            s.waiting[sym].append(item)
            for q in self.by_lhs.get(sym, ()):
                add((q, 0, k))
            if sym in self.nullable:  # Aycock & Horspool: step over a nullable nonterminal
                add((p, dot + 1, origin))
        return s

    def chart(self, text: str) -> Tuple[_EarleySet, ...]:
        """Earley sets 0..len(text) for the code points of ``text`` (cached)."""
        hit = self._charts.get(text)
        if hit is not None:
            return hit
        # Find the longest cached prefix, then extend one code point at a time.
        n = len(text)
        while n > 0 and text[:n] not in self._charts:
            n -= 1
        if n == 0 and "" not in self._charts:
            self._charts[""] = (self._build_set((), [(self.start_prod, 0, 0)]),)
        chart = self._charts[text[:n]]
        if len(self._charts) > 20000:
            self._charts.clear()
        for j in range(n, len(text)):
            last = chart[-1]
            cp = ord(text[j])
            if not last.items:
                new = _EMPTY_SET
            else:
                kernel = [(p, d + 1, o) for (p, d, o), term in last.scans if cp in term]
                new = self._build_set(chart, kernel) if kernel else _EMPTY_SET
            chart = chart + (new,)
            self._charts[text[: j + 1]] = chart
        return chart

    def text_is_prefix(self, text: str) -> bool:
        return bool(self.chart(text)[-1].items)

    def text_is_complete(self, text: str) -> bool:
        return (self.start_prod, 1, 0) in self.chart(text)[-1].items

    def is_prefix(self, data: bytes) -> bool:
        split = split_utf8(data)
        if split is None:
            return False
        text, tail = split
        last = self.chart(text)[-1]
        if not last.items:
            return False
        if not tail:
            return True
        lo, hi = tail_range(tail)
        return any(class_intersects(term.cls, lo, hi) for _, term in last.scans)

    def is_complete(self, data: bytes) -> bool:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return self.text_is_complete(text)

    # -- sampling (to build vocabularies and test strings near the language) -----------------
    def sample(self, rng: random.Random, budget: int = 24, prefer: Sequence[int] = ()) -> str:
        """A random sentence of the language (short: recursion is cut once ``budget`` symbols are spent)."""
        height = self._heights()
        best = {}
        for lhs, idxs in self.by_lhs.items():
            best[lhs] = [i for i in idxs if self._prod_height(i, height) == height[lhs]]
        out: List[str] = []
        spent = [0]

        def expand(sym: Symbol, depth: int) -> None:
            spent[0] += 1
            if isinstance(sym, Terminal):
                out.append(chr(pick_member(sym.cls, rng, prefer)))
                return
            idxs = self.by_lhs[sym]
            if spent[0] > budget or depth > 60:
                idxs = best[sym]
            p = rng.choice(idxs)
            for s in self.productions[p][1]:
                expand(s, depth + 1)

        expand(START, 0)
        return "".join(out)

    def _prod_height(self, p: int, height: Dict[str, int]) -> float:
        rhs = self.productions[p][1]
        return 1 + max([height.get(s, float("inf")) for s in rhs if isinstance(s, str)] or [0])

    def _heights(self) -> Dict[str, int]:
        height: Dict[str, float] = {}
        changed = True
        while changed:
            changed = False
            for i, (lhs, _) in enumerate(self.productions):
                h = self._prod_height(i, height)
                if h < height.get(lhs, float("inf")):
                    height[lhs] = h
                    changed = True
        return height  # type: ignore[return-value]


def pick_member(cls: Intervals, rng: random.Random, prefer: Sequence[int] = ()) -> int:
    """A member of a (non-empty) class, biased towards the ``prefer`` code points."""
    liked = [cp for cp in prefer if class_contains(cls, cp)]
    if liked and rng.random() < 0.7:
        return rng.choice(liked)
    lo, hi = rng.choice(cls)
    r = rng.random()
    if r < 0.25:
        return lo
    if r < 0.5:
        return hi
    return rng.randint(lo, hi)


# ---------------------------------------------------------------------------------------
# UTF-8 helpers
# ---------------------------------------------------------------------------------------


def split_utf8(data: bytes) -> Optional[Tuple[str, bytes]]:
    """Splits ``data`` into (decoded complete characters, incomplete trailing bytes).

    Returns None if ``data`` is not a prefix of any valid UTF-8 text.
    """
    try:
        return data.decode("utf-8"), b""
    except UnicodeDecodeError as e:
        # Python's decoder is strict (no overlongs, no surrogates, nothing above U+10FFFF) and
        # reports "unexpected end of data" only when the bytes so far are a valid beginning.
        if e.reason == "unexpected end of data" and e.end == len(data):
            return data[: e.start].decode("utf-8"), data[e.start :]
        return None


def tail_range(tail: bytes) -> Tuple[int, int]:
    """The code points whose UTF-8 encoding starts with ``tail`` (1-3 bytes of an incomplete
    but valid beginning), as an inclusive range."""
    lead = tail[0]
    if lead >= 0xF0:
        n = 4
    elif lead >= 0xE0:
        n = 3
    else:
        n = 2
    lo_bytes = tail + b"\x80" * (n - len(tail))
    hi_bytes = tail + b"\xbf" * (n - len(tail))

    def raw_decode(bs: bytes) -> int:
        v = bs[0] & (0xFF >> (n + 1))
        for b in bs[1:]:
            v = (v << 6) | (b & 0x3F)
        return v

    lo, hi = raw_decode(lo_bytes), raw_decode(hi_bytes)
    lo = max(lo, {2: 0x80, 3: 0x800, 4: 0x10000}[n])
    hi = min(hi, {2: 0x7FF, 3: 0xFFFF, 4: MAX_CP}[n])
    assert lo <= hi, tail
    # Sanity check of the arithmetic above (the range is never entirely surrogates, since
    # split_utf8 rejects ED A0..ED BF).
    for cp in (lo, hi):
        if not SURROGATES[0] <= cp <= SURROGATES[1]:
            assert chr(cp).encode("utf-8").startswith(tail), (tail, hex(cp))
    return lo, hi


# ---------------------------------------------------------------------------------------
# Module-level convenience API
# ---------------------------------------------------------------------------------------

_cache: Dict[Tuple[str, str], Reference] = {}


def reference(grammar: Union[str, Reference], root: str = "root") -> Reference:
    """The (cached) ``Reference`` for grammar text, or the argument itself."""
    if isinstance(grammar, Reference):
        return grammar
    key = (grammar, root)
    ref = _cache.get(key)
    if ref is None:
        if len(_cache) > 64:
            _cache.clear()
        ref = _cache[key] = Reference(grammar, root)
    return ref


def is_prefix(grammar: Union[str, Reference], data: bytes) -> bool:
    """True iff ``data`` can be extended to a sentence of ``grammar`` (byte level, UTF-8)."""
    return reference(grammar).is_prefix(data)


def is_complete(grammar: Union[str, Reference], data: bytes) -> bool:
    """True iff ``data`` is a sentence of ``grammar``."""
    return reference(grammar).is_complete(data)
