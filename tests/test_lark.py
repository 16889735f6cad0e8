"""Grammar.from_lark: exact against the `lark` package's Earley parser with the
``dynamic_complete`` lexer (every split of the text into terminals), on hand-written grammars
and the shared Lark corpus (``../shared/data/grammars``).

Strings come from random derivations of each grammar (read through lark's own grammar
loader) and from mutations of them; both engines must give the same answer on every one.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

import corral

lark = pytest.importorskip("lark", reason="the lark package is not installed")

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data" / "grammars"


@pytest.fixture(scope="module")
def vocab():
    return corral.builtin_vocabulary()


def corral_accepts(compiled, text: str) -> bool:
    m = corral.Matcher(compiled)
    return m.accept_bytes(text.encode()) and m.is_accepting()


def lark_accepts(parser, text: str) -> bool:
    try:
        parser.parse(text)
        return True
    except lark.exceptions.LarkError:
        return False


class Sampler:
    """Random derivations of a Lark grammar, from lark's own loaded rules and terminals."""

    def __init__(self, parser, rng: random.Random, alphabet: str):
        self.rng = rng
        self.rules: dict = {}
        for r in parser.rules:
            self.rules.setdefault(r.origin.name, []).append([s.name for s in r.expansion])
        self.terms = {t.name: t for t in parser.terminals}
        self.ignore = list(parser.ignore_tokens)
        self.alphabet = alphabet
        self.pools: dict = {}

    def terminal(self, name: str) -> str:
        t = self.terms[name]
        p = t.pattern
        if p.type == "str":
            s = p.value
            if "i" in p.flags:
                s = "".join(c.upper() if self.rng.random() < 0.5 else c for c in s)
            return s
        pool = self.pools.get(name)
        if pool is None:
            rx = re.compile(p.to_regexp())
            pool, tries = [], 0
            while len(pool) < 8 and tries < 4000:
                tries += 1
                cand = "".join(self.rng.choice(self.alphabet) for _ in range(self.rng.randint(1, 6)))
                if rx.fullmatch(cand):
                    pool.append(cand)
            self.pools[name] = pool
        if not pool:
            raise LookupError(name)
        return self.rng.choice(pool)

    def derive(self, sym: str, depth: int = 0) -> str:
        if sym in self.terms:
            out = self.terminal(sym)
            if self.ignore and self.rng.random() < 0.3:
                out = self.terminal(self.rng.choice(self.ignore)) + out
            return out
        options = self.rules[sym]
        if depth > 12:
            options = sorted(options, key=len)[:1]
        return "".join(self.derive(s, depth + 1) for s in self.rng.choice(options))


def mutate(s: str, rng: random.Random, alphabet: str) -> str:
    if not s:
        return rng.choice(alphabet)
    i = rng.randrange(len(s))
    op = rng.randrange(3)
    if op == 0:
        return s[:i] + s[i + 1 :]
    if op == 1:
        return s[:i] + rng.choice(alphabet) + s[i:]
    return s[:i] + rng.choice(alphabet) + s[i + 1 :]


def compare(grammar: str, vocab, alphabet: str, n: int = 150, seed: int = 0) -> tuple[int, int]:
    parser = lark.Lark(grammar, parser="earley", lexer="dynamic_complete", start="start")
    compiled = corral.compile(corral.Grammar.from_lark(grammar), vocab)
    rng = random.Random(seed)
    sampler = Sampler(parser, rng, alphabet)
    texts = set()
    for _ in range(n):
        try:
            s = sampler.derive("start")
        except (LookupError, RecursionError):
            continue
        texts.add(s)
        for _ in range(3):
            texts.add(mutate(s, rng, alphabet))
    pos = 0
    for t in sorted(texts):
        want = lark_accepts(parser, t)
        got = corral_accepts(compiled, t)
        assert got == want, (grammar, t, want, got)
        pos += want
    return pos, len(texts)


GRAMMARS = {
    "arith": (
        """
        ?start: sum
        ?sum: product | sum ("+" | "-") product
        ?product: atom | product ("*" | "/") atom
        ?atom: NUMBER | "-" atom | "(" sum ")"
        %import common.NUMBER
        %import common.WS_INLINE
        %ignore WS_INLINE
        """,
        "0123456789+-*/(). e",
    ),
    "literals-ranges-flags": (
        r"""
        start: greeting ","? NAME ("!" | "?")~1..3
        greeting: "hello"i | "hi"
        NAME: ("a".."z")+ | /x[0-9]{2}/i
        """,
        "helloHELOi,!?azx019X",
    ),
    "repeat-and-optional": (
        r"""
        start: item ("," item)~0..2 [";"]
        !item: "a" | "b" | pair
        ?pair: "(" item item ")"
        """,
        "ab(),;",
    ),
    "json-like": (
        r"""
        start: value
        ?value: object | array | ESCAPED_STRING | SIGNED_NUMBER | "true" | "false" | "null"
        array: "[" [value ("," value)*] "]"
        object: "{" [pair ("," pair)*] "}"
        pair: ESCAPED_STRING ":" value
        %import common.ESCAPED_STRING
        %import common.SIGNED_NUMBER
        %import common.WS
        %ignore WS
        """,
        '{}[]:,"ab\\ 1-.e9tru',
    ),
    "regex-dot-and-s-flag": (
        r"""
        start: "<" BODY ">" | "#" LINE
        BODY: /[^<>]+/
        LINE: /.+/s
        """,
        "<>#ab\n",
    ),
    "priorities-and-aliases": (
        r"""
        start: word+ -> words
        word.2: WORD | NUM -> number
        WORD.3: /[a-z]+/
        NUM: /[0-9]+/
        %ignore " "
        """,
        "ab12 ;",
    ),
    "terminals-from-terminals": (
        r"""
        start: ID ("." ID)* COMMENT?
        ID: _HEAD _TAIL*
        _HEAD: LETTER | "_"
        _TAIL: LETTER | DIGIT | "_"
        COMMENT: C_COMMENT | CPP_COMMENT
        %import common (LETTER, DIGIT, C_COMMENT, CPP_COMMENT)
        """,
        "ab_1./*x\n",
    ),
}


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_exact_against_lark_dynamic_complete(vocab, name):
    grammar, alphabet = GRAMMARS[name]
    pos, total = compare(grammar, vocab, alphabet)
    assert pos > 10 and total - pos > 10, (pos, total)  # both sides exercised


def test_masks_exact_on_a_lark_grammar(vocab):
    """Every allowed token of each mask along a text continues to a text lark accepts or
    to a live prefix; every refused token leads nowhere (checked on single-character steps
    against the brute-force reference of tests/reference.py where available)."""
    reference = pytest.importorskip("reference")
    grammar = GRAMMARS["arith"][0]
    compiled = corral.compile(corral.Grammar.from_lark(grammar), vocab)
    g2 = corral.Grammar.from_ebnf(
        'root ::= ws sum ws\nsum ::= product | sum ws ("+" | "-") ws product\nproduct ::= atom | product ws ("*" | "/") ws atom\n'
        'atom ::= num | "-" ws atom | "(" ws sum ws ")"\nws ::= [ \\t]*\n'
        'num ::= [0-9]+ ("." [0-9]*)? ([eE] [+-]? [0-9]+)? | "." [0-9]+ ([eE] [+-]? [0-9]+)?'
    )
    other = corral.compile(g2, vocab)
    for text in ["", "1", "1 +", "(2*3", "-(4 - 5e3) /", "1.5 * (2"]:
        a, b = corral.Matcher(compiled), corral.Matcher(other)
        assert a.accept_bytes(text.encode()) and b.accept_bytes(text.encode())
        ma = corral.allocate_token_bitmask(1, vocab.size)
        mb = corral.allocate_token_bitmask(1, vocab.size)
        a.fill_next_token_bitmask(ma, 0)
        b.fill_next_token_bitmask(mb, 0)
        assert corral.allowed_token_ids(ma[0], vocab.size) == corral.allowed_token_ids(mb[0], vocab.size), text
    del reference


def test_where_larks_own_lexers_define_a_smaller_language(vocab):
    """corral reads a terminal as its whole regular language (as dynamic_complete's Earley
    does for ordinary regexes and llguidance does for every lexeme). Lark's longest-match
    lexers (lalr, and Earley's 'dynamic' lexer) commit to one split, so they refuse texts
    that only another split parses."""
    grammar = 'start: A B\nA: /a+/\nB: /ab/\n'
    compiled = corral.compile(corral.Grammar.from_lark(grammar), vocab)
    complete = lark.Lark(grammar, parser="earley", lexer="dynamic_complete")
    lalr = lark.Lark(grammar, parser="lalr")
    assert corral_accepts(compiled, "aab") and lark_accepts(complete, "aab")
    assert not lark_accepts(lalr, "aab")  # the basic lexer takes "aa" for A, then needs "ab"
    # Python's re picks the first alternative that matches: /a|ab/ never lexes "ab" in
    # Lark, whatever the lexer; corral (and llguidance) take both.
    grammar = 'start: X "c"\nX: /a|ab/\n'
    compiled = corral.compile(corral.Grammar.from_lark(grammar), vocab)
    assert corral_accepts(compiled, "abc") and not lark_accepts(lark.Lark(grammar, parser="earley", lexer="dynamic_complete"), "abc")


@pytest.mark.parametrize(
    "text,construct,where",
    [
        ("start: <|eot_id|>\n", "special token <|eot_id|>", "1:8"),
        ('start: "a" <[128009]>\n', "special token <[128009]>", "1:12"),
        ("start: _sep{x, \",\"}\n_sep{a, b}: a (b a)*\n", "rule template", "1:8"),
        ('start: "a"\n%declare X\n', "%declare", "2:1"),
        ('%import python (NAME)\nstart: NAME\n', "%import", "1:1"),
        ('start[max_tokens=5]: "a"\n', "rule attribute", "1:6"),
        ('start: %regex {"substring_words": "a b"}\n', "%regex", "1:8"),
    ],
)
def test_refused_constructs_are_named(text, construct, where):
    with pytest.raises(corral.UnsupportedGrammarError) as err:
        corral.Grammar.from_lark(text)
    assert err.value.construct == construct and err.value.location == where, str(err.value)


@pytest.mark.parametrize(
    "text,line,column",
    [
        ('start: "a"\nb: ( "x"\n', 3, 1),
        ('start: "abc\n', 1, 8),
        ("start: /a(/\n", 1, 10),
        ('start: "a" )\n', 1, 12),
        ("start: a\n", 1, 8),
    ],
)
def test_syntax_errors_carry_line_and_column(text, line, column):
    with pytest.raises(corral.GrammarError) as err:
        corral.Grammar.from_lark(text)
    assert (err.value.line, err.value.column) == (line, column), str(err.value)


def test_missing_start_rule():
    with pytest.raises(corral.GrammarError, match="start"):
        corral.Grammar.from_lark('rule: "a"\n')


def test_json_block_embeds_a_schema(vocab):
    """llguidance's %json { schema }: the value must validate against the schema."""
    g = corral.Grammar.from_lark('start: "answer: " %json {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}\n')
    compiled = corral.compile(g, vocab)
    assert corral_accepts(compiled, 'answer: {"a": 1}')
    assert not corral_accepts(compiled, 'answer: {"b": 1}')
    with pytest.raises(corral.UnsupportedSchemaError) as err:
        corral.Grammar.from_lark('start: %json {"type": "string", "pattern": "(?<=a)b"}\n')
    assert "%json at 1:8" in str(err.value)


def test_ignore_between_every_token_keeps_masks_cheap(vocab):
    """%ignore WS in a JSON-like grammar: whitespace runs merge into the neighbouring
    terminals' automata (no terminal of its own per gap), so a text walk stays fast and the
    masks equal those of a GBNF grammar with explicit whitespace."""
    grammar = GRAMMARS["json-like"][0]
    g = corral.Grammar.from_lark(grammar)
    compiled = corral.compile(g, vocab)
    text = '{"a": [1, 2, {"b": "c"}], "d": null}'
    m = corral.Matcher(compiled)
    mask = corral.allocate_token_bitmask(1, vocab.size)
    for ch in text:
        m.fill_next_token_bitmask(mask, 0)
        assert m.accept_bytes(ch.encode())
    assert m.is_accepting()


# ----------------------------------------------------------------------------- the corpus

CORPUS = {
    "lark/lark/grammars/lark.lark": ("error", "look-around"),
    "lark/lark/grammars/python.lark": ("unsupported", "rule template"),
    "lark/lark/grammars/common.lark": ("error", "look-around"),
    "lark/lark/grammars/unicode.lark": ("error", "start"),
    "lark/examples/advanced/python2.lark": ("error", "look-around"),
    "lark/examples/composition/csv.lark": ("ok", None),
    "lark/examples/composition/json.lark": ("ok", None),
    "lark/examples/composition/storage.lark": ("unsupported", "%import"),
    "lark/examples/grammars/verilog.lark": ("error", "look-around"),
    "lark/examples/standalone/json.lark": ("ok", None),
    "llguidance/lark.lark": ("ok", None),
    "llguidance/rfc.lark": ("ok", None),
}


@pytest.mark.parametrize("path", sorted(CORPUS))
def test_corpus(path):
    """Each corpus grammar compiles, or fails with an error naming the construct (the table
    in docs/lark.md)."""
    f = DATA / path
    if not f.exists():
        pytest.skip(f"../shared/data/grammars/{path} is absent")
    outcome, what = CORPUS[path]
    text = f.read_text()
    if outcome == "ok":
        g = corral.Grammar.from_lark(text)
        assert g.num_terminals > 0
        return
    cls = corral.UnsupportedGrammarError if outcome == "unsupported" else corral.GrammarError
    with pytest.raises(cls) as err:
        corral.Grammar.from_lark(text)
    assert what in str(err.value), str(err.value)


def test_rfc_sample_is_accepted(vocab):
    lark_file, xml = DATA / "llguidance" / "rfc.lark", DATA / "llguidance" / "rfc.xml"
    if not (lark_file.exists() and xml.exists()):
        pytest.skip("../shared/data/grammars/llguidance/rfc.* is absent")
    compiled = corral.compile(corral.Grammar.from_lark(lark_file.read_text()), vocab)
    text = xml.read_text()
    assert corral_accepts(compiled, text)
    assert not corral_accepts(compiled, text.replace("</rfc>", "</rfx>"))


def test_corpus_json_examples_exact(vocab):
    for path in ("lark/examples/composition/json.lark", "lark/examples/standalone/json.lark"):
        f = DATA / path
        if not f.exists():
            pytest.skip(f"{path} is absent")
        text = f.read_text()
        if "start" not in text:
            continue
        pos, total = compare(text, vocab, '{}[]:,"ab 1-.e9tru', n=60, seed=1)
        assert pos > 5
