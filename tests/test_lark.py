"""Lark grammars (corral.Grammar.from_lark) against the `lark` package's Earley parser with
``lexer='dynamic_complete'``: corral must accept exactly the strings lark parses.

Strings come from random derivations of each grammar (terminals sampled from their regexes,
ignored terminals sprinkled between tokens) and from mutations of those. The corpus test
checks every .lark file of the shared grammar data compiles or fails naming the construct.
"""

from __future__ import annotations

import functools
import random
import re
import sys
import zlib
from pathlib import Path

import pytest

import corral

lark = pytest.importorskip("lark")
try:  # Python >= 3.11
    import re._parser as sre_parse  # type: ignore[import-not-found]
    from re import _constants as sre_c  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    import sre_constants as sre_c  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

DATA = Path(__file__).resolve().parent.parent / ".." / "shared" / "data" / "grammars"


@functools.lru_cache(maxsize=1)
def vocab():
    return corral.builtin_vocabulary()


def corral_accepts(g, data: bytes, _cache: dict = {}) -> bool:
    key = id(g)
    if key not in _cache:
        _cache.clear()
        _cache[key] = (g, corral.Matcher(corral.compile(g, vocab())))
    m = _cache[key][1]
    m.reset()
    return m.accept_bytes(data) and m.is_accepting()


def lark_accepts(parser, text: str) -> bool | None:
    """Whether lark parses ``text``; None when lark fails internally (lark 1.3.1's Earley raises
    "should not generate multiple start symbol items" on a few ambiguous grammars)."""
    try:
        parser.parse(text)
        return True
    except lark.exceptions.LarkError:
        return False
    except RuntimeError:
        return None


# ---------------------------------------------------------------------------------------------
# A random string generator for lark grammars (derivations; regexes sampled via sre_parse)


def sample_regex(pattern: str, flags: frozenset, rng: random.Random) -> str:
    ci = "i" in flags
    parsed = sre_parse.parse(pattern, re.I if ci else 0)

    def pick_class(items) -> str:
        neg = False
        chars: list[str] = []
        for op, av in items:
            if op is sre_c.NEGATE:
                neg = True
            elif op is sre_c.LITERAL:
                chars.append(chr(av))
            elif op is sre_c.RANGE:
                lo, hi = av
                chars.extend(chr(c) for c in range(lo, min(hi, lo + 40) + 1))
            elif op is sre_c.CATEGORY:
                chars.extend({sre_c.CATEGORY_DIGIT: "0123456789", sre_c.CATEGORY_SPACE: " \t\n", sre_c.CATEGORY_WORD: "aZ_9"}.get(av, "a"))
        if neg:
            pool = [c for c in "abcXYZ019 _-+.,;:!?\"'()[]{}<>/\\\n\t" if c not in chars]
            return rng.choice(pool)
        return rng.choice(chars)

    def gen(seq) -> str:
        out = []
        for op, av in seq:
            if op is sre_c.LITERAL:
                c = chr(av)
                out.append(c.upper() if ci and rng.random() < 0.5 else c)
            elif op is sre_c.NOT_LITERAL:
                out.append(rng.choice([c for c in "ab0 ,\"" if c != chr(av)]))
            elif op is sre_c.IN:
                out.append(pick_class(av))
            elif op is sre_c.ANY:
                out.append(rng.choice("ab0 ,"))
            elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT):
                lo, hi, sub = av
                n = rng.randint(lo, min(hi, lo + 3))
                out.extend(gen(sub) for _ in range(n))
            elif op is sre_c.SUBPATTERN:
                out.append(gen(av[-1]))
            elif op is sre_c.BRANCH:
                out.append(gen(rng.choice(av[1])))
            elif op in (sre_c.AT, sre_c.ASSERT, sre_c.ASSERT_NOT):
                pass  # may make a non-sentence: the comparison with lark still holds
            else:
                raise NotImplementedError(op)
        return "".join(out)

    return gen(parsed)


class Generator:
    """Random sentences of a lark grammar, from lark's own compiled rules and terminals."""

    def __init__(self, parser) -> None:
        self.rules: dict[str, list[list]] = {}
        for r in parser.rules:
            self.rules.setdefault(r.origin.name, []).append(list(r.expansion))
        self.terms = {t.name: t for t in parser.terminals}
        self.ignore = list(parser.ignore_tokens)
        # Least derivation height of each rule, to end derivations.
        inf = float("inf")
        h = {n: inf for n in self.rules}
        changed = True
        while changed:
            changed = False
            for n, alts in self.rules.items():
                for alt in alts:
                    v = 1 + max([h.get(s.name, 0) if not s.is_term else 0 for s in alt] or [0])
                    if v < h[n]:
                        h[n], changed = v, True
        self.height = h

    def term(self, name: str, rng: random.Random) -> str:
        p = self.terms[name].pattern
        if p.type == "str":
            s = p.value
            return "".join(c.upper() if "i" in p.flags and rng.random() < 0.5 else c for c in s)
        return sample_regex(p.value, frozenset(p.flags), rng)

    def sentence(self, rng: random.Random, depth: int = 7) -> str:
        out: list[str] = []

        def ign() -> None:
            if self.ignore and rng.random() < 0.3:
                out.append(self.term(rng.choice(self.ignore), rng))

        def expand(name: str, d: int) -> None:
            alts = self.rules[name]
            if d <= 0:
                best = min(1 + max([self.height.get(s.name, 0) if not s.is_term else 0 for s in a] or [0]) for a in alts)
                alts = [a for a in alts if 1 + max([self.height.get(s.name, 0) if not s.is_term else 0 for s in a] or [0]) == best]
            for s in rng.choice(alts):
                if s.is_term:
                    out.append(self.term(s.name, rng))
                    ign()
                else:
                    expand(s.name, d - 1)

        ign()
        expand("start", depth)
        return "".join(out)


def mutations(s: str, rng: random.Random, alphabet: str) -> list[str]:
    out = []
    for _ in range(4):
        if s:
            i = rng.randrange(len(s))
            out.append(s[:i] + s[i + 1 :])
            out.append(s[:i] + rng.choice(alphabet) + s[i + 1 :])
        i = rng.randrange(len(s) + 1)
        out.append(s[:i] + rng.choice(alphabet) + s[i:])
    out.append(s + s)
    out.append(s[: len(s) // 2])
    return out


# ---------------------------------------------------------------------------------------------
# Hand-written grammars (regexes whose Python match and truncations give their full language,
# see docs/lark.md "Differences")

GRAMMARS = {
    "arith": r"""
?start: sum
?sum: product | sum ("+" | "-") product
?product: atom | product ("*" | "/") atom
?atom: NUMBER | "-" atom | "(" sum ")"
%import common.NUMBER
%import common.WS_INLINE
%ignore WS_INLINE
""",
    "json": r"""
start: value
?value: object | array | string | SIGNED_NUMBER -> number | "true" | "false" | "null"
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : string ":" value
string : ESCAPED_STRING
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
""",
    "features": r"""
start: greet name ~ 1..2 tail? opt
greet: "hello"i | "hi"
!name.2: NAME | _quoted{NAME}
_quoted{x}: "'" x "'"
NAME: LETTER (LETTER | DIGIT)*
LETTER: "a".."f"
DIGIT: /[0-9]/
tail: ("," "x" ~ 2)+
opt: [";"] -> semicolon
%ignore " "
""",
    "lists": r"""
start: _sep{item, ","} | "[" _sep{item, ";"} "]"
_sep{x, s}: x (s x)*
item: WORD | INT
%import common (WORD, INT)
%ignore /[ \t]+/
%ignore COMMENT
COMMENT: /#[^\n]*\n/
""",
    "flags": r"""
start: A B C
A: /ab+c/i
B: /x.y/s
C: /[0-9] [a-z]/x
""",
    "dynamic": r"""
start: WORD+ "!"?
WORD: /[a-c]+/
%ignore " "
""",
}


#: Corpus grammars in the random comparison (lark loads them; no lazy regexes, no ignored
#: terminal that can swallow the start of a token: see docs/lark.md "Differences").
CORPUS_COMPARED = ["lark/examples/composition/csv.lark", "lark/examples/standalone/json.lark", "lark/examples/composition/json.lark"]


def lark_parser(text: str):
    return lark.Lark(text, parser="earley", lexer="dynamic_complete", start="start")


def grammar_text(name: str) -> str:
    if name in GRAMMARS:
        return GRAMMARS[name]
    path = DATA / name
    if not path.is_file():
        pytest.skip(f"{path} is missing")
    return path.read_text()


@pytest.mark.parametrize("name", sorted(GRAMMARS) + CORPUS_COMPARED)
def test_accepts_exactly_what_lark_accepts(name):
    text = grammar_text(name)
    parser = lark_parser(text)
    g = corral.Grammar.from_lark(text)
    gen = Generator(parser)
    rng = random.Random(zlib.crc32(name.encode()))
    alphabet = sorted(set(text) - {"\n"}) + ["\n", "\t", "Z"]
    positives = 0
    checked = 0
    seen = set()
    for _ in range(60):
        s = gen.sentence(rng)
        for t in [s, *mutations(s, rng, "".join(alphabet))]:
            if t in seen or len(t) > 60:
                continue
            seen.add(t)
            want = lark_accepts(parser, t)
            if want is None:
                continue
            got = corral_accepts(g, t.encode())
            assert got == want, f"{name}: corral {'accepts' if got else 'rejects'} {t!r}, lark {'accepts' if want else 'rejects'}"
            positives += want
            checked += 1
    # The generator must produce real sentences, and mutations real non-sentences.
    assert positives >= 15, positives
    assert checked - positives >= 30, checked - positives


def test_ignore_positions():
    text = 'start: "a" "b"\n%ignore " "\n'
    parser = lark_parser(text)
    g = corral.Grammar.from_lark(text)
    for s in ["ab", " ab", "a b", "ab ", "  a  b  ", "a  b", "a\tb", "", " ", "a"]:
        assert corral_accepts(g, s.encode()) == lark_accepts(parser, s), repr(s)
    # Not inside terminals:
    text = 'start: AB\nAB: "a" "b"\n%ignore " "\n'
    parser = lark_parser(text)
    g = corral.Grammar.from_lark(text)
    assert not lark_accepts(parser, "a b") and not corral_accepts(g, b"a b")
    assert lark_accepts(parser, " ab ") and corral_accepts(g, b" ab ")


def test_ignored_terminals_match_any_of_their_strings():
    """The one known difference from lark's Earley: lark matches an ignored terminal greedily
    (Python's preferred match only), corral lets it match any of its strings. They differ only
    when an ignored span could swallow the start of the next token."""
    text = 'start: "a" ":"\n%ignore /#[^\\n]*/\n'
    parser = lark_parser(text)
    g = corral.Grammar.from_lark(text)
    assert lark_accepts(parser, "a:#x") and corral_accepts(g, b"a:#x")
    assert not lark_accepts(parser, "a#:")  # the comment took ':'
    assert corral_accepts(g, b"a#:")  # comment '#', then ':'


def test_dynamic_complete_versus_standard_lexers():
    """A string the character-level (dynamic_complete) language has, which lark's standard
    longest-match lexers (LALR + contextual/basic) reject: corral follows dynamic_complete."""
    text = 'start: A B\nA: /a+/\nB: /ab/\n'
    g = corral.Grammar.from_lark(text)
    assert lark_accepts(lark_parser(text), "aab")
    assert corral_accepts(g, b"aab")
    for lexer in ("contextual", "basic"):
        lalr = lark.Lark(text, parser="lalr", lexer=lexer)
        assert not lark_accepts(lalr, "aab"), lexer
    # And one both accept.
    assert lark_accepts(lark.Lark(text, parser="lalr"), "aab") is False
    text2 = 'start: A B\nA: /a+/\nB: /b/\n'
    assert lark_accepts(lark.Lark(text2, parser="lalr"), "aab") and corral_accepts(corral.Grammar.from_lark(text2), b"aab")


def test_errors_carry_locations():
    with pytest.raises(corral.GrammarSyntaxError) as e:
        corral.Grammar.from_lark('start: a\na: "x" | (\n')
    assert e.value.line == 2 and e.value.column == 10, (e.value.line, e.value.column)
    assert e.value.line_text == 'a: "x" | ('
    with pytest.raises(corral.GrammarSyntaxError) as e:
        corral.Grammar.from_lark("start: b\n")
    assert "not defined" in str(e.value) and e.value.line == 1


@pytest.mark.parametrize(
    "text, construct",
    [
        ("start: x\nx[max_tokens=3]: /[a-z]+/\n", "max_tokens"),
        ("start: x\nx[stop=\"\"]: /[a-z]+/\n", "stop"),
        ("%declare _INDENT\nstart: \"a\"\n", "%declare"),
        ("start: \"a\"\n%override start: \"b\"\n", "%override"),
        ("start: \"a\"\n%import .other.x\n", "relative %import"),
        ("start: %regex {\"type\": \"number\"}\n", '%regex {"type": ...}'),
        ("start: /a/l\n", "regex flag 'l'"),
        ("start: X\n%import common._STRING_INNER -> X\n", "common._STRING_INNER"),
    ],
)
def test_refused_constructs_are_named(text, construct):
    with pytest.raises(corral.UnsupportedGrammarError) as e:
        corral.Grammar.from_lark(text)
    assert e.value.construct == construct
    assert re.fullmatch(r"\d+:\d+", e.value.location or ""), e.value.location


def test_llguidance_extensions():
    g = corral.Grammar.from_lark('%llguidance {}\nstart: "n=" %json {"type": "integer", "minimum": 0} x\nx[capture, temperature=0.5]: "."\n')
    assert corral_accepts(g, b"n=12.")
    assert not corral_accepts(g, b"n=-1.")
    assert not corral_accepts(g, b"n=1")


def test_regex_case_insensitive_literal_and_range():
    g = corral.Grammar.from_lark('start: "select"i " " "a".."c"+\n')
    for s, ok in [("SeLeCt abc", True), ("select d", False), ("select ", False)]:
        assert corral_accepts(g, s.encode()) == ok, s


@pytest.mark.parametrize("word", ["kiss", "STRASSE", "straße", "ıi", "σς", "µ", "ǅ", "θϑ", "вд", "ﬅ"])
def test_case_insensitive_literals_fold_like_lark(word):
    """"..."i matches what lark's Python regex matches: simple lowercase forms and Unicode's
    extra equivalences (Kelvin sign, long s, dotless i, final sigma...), never a multi-character
    folding ("ß" is not "SS")."""
    g = corral.Grammar.from_lark(f'start: "{word}"i\n')
    parser = lark_parser(f'start: "{word}"i\n')
    # Candidates: every character equal to one of the word's under some case mapping.
    others = {d for c in word for d in (c, c.upper(), c.lower(), c.swapcase(), c.casefold())}
    alphabet = sorted({chr(x) for x in range(0x2200)} & {d for d in map(chr, range(0x2200)) if d.lower() in {o.lower() for o in others} or d.upper() in {o.upper() for o in others}} | others | {"\u212a", "\u1e9e", "\u017f", "\u0131", "\u0130", "\u1fbe", "\u1c80", "\u1c81"})
    rng = random.Random(word)
    checked = 0
    for c_at in range(len(word)):
        for d in alphabet:
            text = word[:c_at] + d + word[c_at + 1 :]
            expected = lark_accepts(parser, text)
            assert corral_accepts(g, text.encode()) == expected, (word, text)
            checked += expected
    for _ in range(50):
        text = "".join(rng.choice([c, c.upper(), c.lower()]) for c in word)
        assert corral_accepts(g, text.encode()) == lark_accepts(parser, text), text
    assert checked >= len(word)


def test_mask_matches_brute_force():
    """Masks of a Lark grammar with %ignore equal a brute-force mask of the same language
    written in GBNF (tests/reference.py), on a small vocabulary, along random walks."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from reference import Reference

    lark_text = 'start: "[" [item ("," item)*] "]"\nitem: /[0-9]+/ | "x"\n%ignore " "\n'
    gbnf = 'root ::= ws "[" ws ( item ( "," ws item )* )? "]" ws\nitem ::= ( [0-9]+ | "x" ) ws\nws ::= " "*\n'
    ref = Reference(gbnf, "root")
    tokens = [b"[", b"]", b",", b" ", b"1", b"23", b"x", b"[ ", b", ", b"] ", b"x,", b"1]", b"  ", b"[1", b"a", b"]]"]
    eos = len(tokens)
    v = corral.Vocabulary.from_bytes(tokens + [b""], eos_token_ids=[eos])
    m = corral.Matcher(corral.compile(corral.Grammar.from_lark(lark_text), v))
    rng = random.Random(7)
    for _ in range(20):
        m.reset()
        out = b""
        for _ in range(12):
            mask = corral.allocate_token_bitmask(1, v.size)
            m.fill_next_token_bitmask(mask, 0)
            got = set(corral.allowed_token_ids(mask[0], v.size))
            want = {i for i, t in enumerate(tokens) if ref.is_prefix(out + t)}
            if ref.is_complete(out):
                want.add(eos)
            assert got == want, (out, sorted(got), sorted(want))
            choices = sorted(got - {eos})
            if not choices:
                break
            t = rng.choice(choices)
            assert m.accept_token(t)
            out += tokens[t]


# ---------------------------------------------------------------------------------------------
# Corpus: every .lark file of the shared grammar data

CORPUS = {
    # file (relative to the grammars folder): None (compiles) or the construct named in the refusal
    "lark/lark/grammars/common.lark": "regex look-around",
    "lark/lark/grammars/python.lark": "%declare",
    "lark/lark/grammars/lark.lark": "regex look-around",
    "lark/lark/grammars/unicode.lark": "no start rule",
    "lark/examples/grammars/verilog.lark": "regex look-around",
    "lark/examples/composition/storage.lark": "relative %import",
    "lark/examples/composition/csv.lark": None,
    "lark/examples/composition/json.lark": None,
    "lark/examples/standalone/json.lark": None,
    "lark/examples/advanced/python2.lark": "regex look-around",
    "llguidance/rfc.lark": None,
    "llguidance/lark.lark": None,
}


def test_corpus_is_listed():
    if not DATA.is_dir():
        pytest.skip(f"shared grammar data not found at {DATA}")
    found = {str(p.relative_to(DATA)) for p in DATA.rglob("*.lark")}
    assert found == set(CORPUS), found ^ set(CORPUS)


@pytest.mark.parametrize("rel", sorted(CORPUS))
def test_corpus(rel):
    path = DATA / rel
    if not path.is_file():
        pytest.skip(f"{path} is missing")
    text = path.read_text()
    expected = CORPUS[rel]
    if expected is None:
        g = corral.Grammar.from_lark(text)
        assert g.num_rules > 0
    elif expected == "no start rule":
        with pytest.raises(corral.GrammarError, match="no 'start' rule"):
            corral.Grammar.from_lark(text)
    else:
        with pytest.raises(corral.UnsupportedGrammarError) as e:
            corral.Grammar.from_lark(text)
        assert e.value.construct == expected


def test_corpus_lark_grammar_sentences():
    """llguidance's lark.lark (Lark's own grammar, without look-around) accepts what lark's
    Earley accepts, on real grammars."""
    path = DATA / "llguidance" / "lark.lark"
    if not path.is_file():
        pytest.skip(f"{path} is missing")
    text = path.read_text()
    g = corral.Grammar.from_lark(text)
    parser = lark_parser(text)
    samples = [GRAMMARS["arith"].lstrip(), GRAMMARS["lists"].lstrip(), "start: a\n", "start: a b\n", "start a\n", "start: (a\n"]
    for s in samples:
        assert corral_accepts(g, s.encode()) == lark_accepts(parser, s), s


# ---------------------------------------------------------------------------------------
# Special tokens (llguidance's <|name|>, <[id]>, <[a-b,c]>), masks against llguidance
# ---------------------------------------------------------------------------------------

SPECIAL_GRAMMARS = [
    (
        'start: "Answer: " WORD | call\ncall: <|python_tag|> "get(" NUM ")" <|eom_id|>\nWORD: /[a-z]+/\nNUM: /[0-9]+/\n',
        ["<|python_tag|>", "get(42)", "<|eom_id|>"],
    ),
    ('start: "Answer: " WORD | call\ncall: <|python_tag|> "get(" NUM ")" <|eom_id|>\nWORD: /[a-z]+/\nNUM: /[0-9]+/\n', ["Answer: yes"]),
    ('start: <[128006]> ROLE <[128007]> "\\n\\n" BODY <[128008,128009]>\nROLE: "user" | "assistant"\nBODY: /[a-z ]+/\n',
     ["<|start_header_id|>", "assistant", "<|end_header_id|>", "\n\nhi there", "<|eom_id|>"]),
    ('start: item+\nitem: <[128010-128012]> WORD\nWORD: /[a-z]+/\n', ["<|python_tag|>", "ab", "<|python_tag|>", "c"]),
]


@functools.lru_cache(maxsize=None)
def _llama3_pair():
    from tokenizers_util import llama3

    llg = pytest.importorskip("llguidance")
    import llguidance.tiktoken  # noqa: F401

    enc = llama3()
    # One EOS on both sides (<|eot_id|>; llguidance takes one).
    vocab = corral.Vocabulary.from_tiktoken(enc, eos_token_ids=[128009])
    lltok = llg.tiktoken.lltokenizer_from_encoding(enc, n_vocab=vocab.size, eos_token=128009)
    return enc, vocab, llg, lltok


@pytest.mark.parametrize("grammar, pieces", SPECIAL_GRAMMARS)
def test_special_tokens_match_llguidance_llama3(grammar, pieces):
    """Special tokens by name, id and id ranges are allowed exactly where the grammar names
    them: corral's allowed-token sets equal llguidance's at every step."""
    import numpy as np

    enc, vocab, llg, lltok = _llama3_pair()
    n = vocab.size
    words = (n + 31) // 32
    m = corral.Matcher(corral.CompiledGrammar(corral.Grammar.from_lark(grammar), vocab))
    # (Without no_forcing, llguidance allows only the tokenizer's own first token of a forced
    # string, e.g. "get" and not "g" or "ge" before "get(": a choice of tokenization, not
    # of the language.)
    lm = llg.LLMatcher(lltok, llg.grammar_from("lark", '%llguidance {"no_forcing": true}\n' + grammar), log_level=0)
    assert not lm.is_error(), lm.get_error()
    ids = [t for p in pieces for t in enc.encode(p, allowed_special="all")]

    def bits(mask):
        return set(np.nonzero(np.unpackbits(mask.view(np.uint8), bitorder="little")[:n])[0].tolist())

    for step, t in enumerate(ids + [None]):
        a = np.zeros(words, dtype=np.int32)
        m.fill_next_token_bitmask(a)
        b = np.zeros(words, dtype=np.int32)
        lm.unsafe_compute_mask_ptr(b.ctypes.data, words * 4)
        got, want = bits(a), bits(b)
        assert got == want, f"step {step}: only corral {sorted(got - want)[:8]}, only llguidance {sorted(want - got)[:8]}"
        if t is None:
            break
        assert m.accept_token(t) and lm.consume_token(t), (step, t)
    assert m.is_accepting()


SUBSTRING_SPECS = [
    {"substring_words": "foo bar. baz, qux!! the_end"},
    {"substring_chars": "abcab c"},
    {"substring_chunks": ["abc", "de", "fg", "", "de"]},
    {"substring_words": "Ünïcode wörds — and 数字 123"},
]


@pytest.mark.parametrize("spec", SUBSTRING_SPECS, ids=lambda s: next(iter(s)))
def test_regex_substring_matches_llguidance(spec):
    """%regex substring forms accept exactly the runs of consecutive chunks llguidance accepts:
    every substring of the text, and near misses, judged alike (Llama 3 tokens)."""
    import json

    enc, vocab, llg, lltok = _llama3_pair()
    grammar = f'start: "<" X ">"\nX: %regex {json.dumps(spec)}\n'
    cg = corral.CompiledGrammar(corral.Grammar.from_lark(grammar), vocab)
    llg_grammar = llg.grammar_from("lark", '%llguidance {"no_forcing": true}\n' + grammar)
    v = next(iter(spec.values()))
    text = v if isinstance(v, str) else "".join(v)
    cands = {text[i:j] for i in range(len(text) + 1) for j in range(i, len(text) + 1)}
    rng = random.Random(0)
    cands |= {c[:-1] + rng.choice("ab .x") for c in sorted(cands) if c}
    accepted = 0
    for c in sorted(cands):
        s = "<" + c + ">"
        m = corral.Matcher(cg)
        mine = m.accept_bytes(s.encode()) and m.is_accepting()
        lm = llg.LLMatcher(lltok, llg_grammar, log_level=0)
        theirs = all(lm.consume_token(t) for t in enc.encode(s)) and lm.is_accepting()
        assert mine == theirs, (c, mine)
        accepted += mine
    assert 0 < accepted < len(cands)


def test_regex_substring_forms():
    g = corral.Grammar.from_lark('start: %regex {"substring_chunks": ["abc", "de", "fg"]}\n')
    for s, ok in [("", True), ("abc", True), ("abcde", True), ("defg", True), ("abcdefg", True), ("ab", False), ("cde", False), ("fgde", False)]:
        assert corral_accepts(g, s.encode()) == ok, s
    with pytest.raises(corral.GrammarSyntaxError, match="exactly one"):
        corral.Grammar.from_lark('start: %regex {"substring_chars": "a", "substring_words": "b"}\n')
    with pytest.raises(corral.GrammarSyntaxError, match="list of strings"):
        corral.Grammar.from_lark('start: %regex {"substring_chunks": "ab"}\n')


def test_special_token_errors():
    _, vocab, _, _ = _llama3_pair()
    with pytest.raises(corral.TokenizerError, match="no_such"):
        corral.CompiledGrammar(corral.Grammar.from_lark("start: <|no_such|>\n"), vocab)
    with pytest.raises(corral.GrammarSyntaxError, match="inside a terminal"):
        corral.Grammar.from_lark('start: X\nX: "a" <|eom_id|>\n')
    with pytest.raises(corral.GrammarSyntaxError, match="token id"):
        corral.Grammar.from_lark("start: <[12x]>\n")
