"""Grammar errors: the right exception class, a location (line, column) and a caret line under
the offending character; every error derives from corral.CorralError; Rust panics surface as
corral.InternalError.

Where the independent reference (tests/reference.py) has an opinion, it must agree that the
grammar is unusable.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import corral  # noqa: E402
from reference import EmptyLanguageError, Reference, ReferenceGrammarError  # noqa: E402


def caret_column(message: str, line_text: str) -> int:
    """The 1-based column the caret points at, checking the source line is quoted above it."""
    lines = message.split("\n")
    carets = [i for i, l in enumerate(lines) if l.strip() == "^"]
    assert carets, f"no caret line in:\n{message}"
    i = carets[-1]
    assert i >= 1 and lines[i - 1] == "  " + line_text, f"the line above the caret is not the source line:\n{message}"
    caret = lines[i]
    assert caret.startswith("  ")
    pad = caret[2 : caret.index("^")]
    assert set(pad) <= {" ", "\t"}
    return len(pad) + 1


def assert_located(e: corral.GrammarError, line: int, column: int, line_text: str) -> None:
    assert (e.line, e.column) == (line, column), (e.line, e.column, str(e))
    msg = str(e)
    assert f"line {line}, column {column}" in msg, msg
    assert caret_column(msg, line_text) == column, msg


# (grammar text, expected line, expected column, the line quoted, words the message must contain)
SYNTAX_ERRORS = {
    "unterminated literal": ('root ::= "abc', 1, 10, 'root ::= "abc', ["unterminated", "literal"]),
    "unterminated literal, line 2": ('root ::= x\nx ::= "a" "b', 2, 11, 'x ::= "a" "b', ["unterminated"]),
    "newline inside literal": ('root ::= "ab\ncd"', 1, 13, 'root ::= "ab', ["newline"]),
    "unbalanced (": ('root ::= ("a" "b"\n', 1, 10, 'root ::= ("a" "b"', ["unbalanced", "("]),
    "unbalanced ( nested": ('root ::= ("a" ("b" | "c")', 1, 10, 'root ::= ("a" ("b" | "c")', ["unbalanced", "("]),
    "unbalanced )": ('root ::= "a" )', 1, 14, 'root ::= "a" )', ["unbalanced", ")"]),
    "unbalanced ) after group": ('root ::= ("a")) "b"', 1, 15, 'root ::= ("a")) "b"', ["unbalanced", ")"]),
    "invalid escape": ('root ::= "\\q"', 1, 11, 'root ::= "\\q"', ["escape"]),
    "invalid escape in class": ("root ::= [a\\k]", 1, 12, "root ::= [a\\k]", ["escape"]),
    "short hex escape": ('root ::= "\\x4"', 1, 11, 'root ::= "\\x4"', ["escape"]),
    "surrogate escape": ('root ::= "\\ud800"', 1, 11, 'root ::= "\\ud800"', ["escape"]),
    "reversed range": ("root ::= [z-a]", 1, 11, "root ::= [z-a]", ["reversed"]),
    "reversed range, line 3": ('root ::= a\na ::= "x" b\nb ::= [0-9b-a]', 3, 11, "b ::= [0-9b-a]", ["reversed"]),
    "unterminated class": ("root ::= [abc", 1, 10, "root ::= [abc", ["unterminated", "class"]),
    "repeat max below min": ('root ::= "a"{3,1}', 1, 13, 'root ::= "a"{3,1}', ["repetition"]),
    "nothing to repeat": ("root ::= *", 1, 10, "root ::= *", ["nothing to repeat"]),
    "missing ::=": ('root "a"', 1, 6, 'root "a"', ["::="]),
    "tab before the error": ('root ::=\t"abc', 1, 10, 'root ::=\t"abc', ["unterminated"]),
    "non-ASCII before the error": ('root ::= "é" [z-a]', 1, 15, 'root ::= "é" [z-a]', ["reversed"]),
}


@pytest.mark.parametrize("name", list(SYNTAX_ERRORS))
def test_syntax_errors_are_located(name):
    text, line, column, line_text, words = SYNTAX_ERRORS[name]
    with pytest.raises(corral.GrammarSyntaxError) as info:
        corral.Grammar.from_ebnf(text)
    e = info.value
    assert isinstance(e, corral.GrammarError) and isinstance(e, corral.CorralError) and isinstance(e, ValueError)
    assert_located(e, line, column, line_text)
    assert e.line_text == line_text
    assert e.reason and e.reason in str(e)
    for w in words:
        assert w in str(e), (w, str(e))
    with pytest.raises(ReferenceGrammarError):
        Reference(text)


def test_undefined_rule_is_named_and_located():
    with pytest.raises(corral.GrammarError) as info:
        corral.Grammar.from_ebnf('root ::= "a" foo')
    e = info.value
    assert "foo" in str(e)
    assert_located(e, 1, 14, 'root ::= "a" foo')

    text = 'root ::= "a" x\nx ::= "b" missing-rule'
    with pytest.raises(corral.GrammarError) as info:
        corral.Grammar.from_ebnf(text)
    assert "missing-rule" in str(info.value)
    assert_located(info.value, 2, 11, 'x ::= "b" missing-rule')
    with pytest.raises(ReferenceGrammarError):
        Reference(text)

    # Even a rule nobody uses may not reference an undefined rule.
    with pytest.raises(corral.GrammarError, match="ghost"):
        corral.Grammar.from_ebnf('root ::= "a"\nunused ::= ghost')


@pytest.mark.parametrize("text", ["", "   \n\n", "# only a comment\n", "\n# one\n# two"])
def test_empty_grammar(text):
    with pytest.raises(corral.GrammarError, match="empty"):
        corral.Grammar.from_ebnf(text)
    with pytest.raises(ReferenceGrammarError):
        Reference(text)


def test_missing_root():
    text = 'start ::= "a"\nother ::= "b"'
    with pytest.raises(corral.GrammarError, match="root") as info:
        corral.Grammar.from_ebnf(text)
    assert not isinstance(info.value, corral.GrammarSyntaxError)
    with pytest.raises(corral.GrammarError, match="main"):
        corral.Grammar.from_ebnf(text, root="main")
    # The same text is fine with the right start rule.
    assert corral.Grammar.from_ebnf(text, root="start").num_rules == 2
    with pytest.raises(ReferenceGrammarError):
        Reference(text)


def test_rule_defined_twice():
    with pytest.raises(corral.GrammarError, match="twice") as info:
        corral.Grammar.from_ebnf('root ::= "a"\nroot ::= "b"')
    assert_located(info.value, 2, 1, 'root ::= "b"')


def test_invalid_utf8_bytes():
    with pytest.raises(corral.GrammarSyntaxError) as info:
        corral.Grammar.from_ebnf(b'root ::= "\xff"')
    e = info.value
    assert "UTF-8" in str(e)
    assert (e.line, e.column) == (1, 11)
    assert "line 1, column 11" in str(e) and "^" in str(e)
    with pytest.raises(corral.GrammarSyntaxError) as info:
        corral.Grammar.from_ebnf(b'root ::= "a"\nx ::= "\xe4\xb8"')  # truncated character on line 2
    assert info.value.line == 2
    # Valid UTF-8 bytes are fine and equal to the str form.
    assert corral.Grammar.from_ebnf('root ::= "é"'.encode()).source_key == corral.Grammar.from_ebnf('root ::= "é"').source_key


NEVER_FINISH = [
    'root ::= "a" root',
    'root ::= x\nx ::= "(" x ")"',
    'root ::= x "a"\nx ::= x "b" | y\ny ::= "c" x',
    "root ::= [^\\x00-\\U0010FFFF]",  # an empty class
    'root ::= "a" [^\\x00-\\ud7ff\\ue000-\\U0010FFFF]',  # only surrogates: empty as well
    'root ::= ("a" root)+',
]


@pytest.mark.parametrize("text", NEVER_FINISH)
def test_rule_that_can_never_finish(text):
    with pytest.raises(corral.GrammarError, match="no finite string") as info:
        corral.Grammar.from_ebnf(text)
    assert "root" in str(info.value)
    with pytest.raises(EmptyLanguageError):
        Reference(text)


def test_unproductive_alternatives_are_pruned_not_errors():
    # Only the root matters: other rules that never finish just drop out of the language.
    text = 'root ::= "a" | "b" loop\nloop ::= "c" loop'
    g = corral.Grammar.from_ebnf(text)
    vocab = corral.Vocabulary.from_bytes([b"a", b"b", b"c", b"</s>"], eos_token_ids=[3])
    m = corral.Matcher(corral.compile(g, vocab))
    mask = corral.allocate_token_bitmask(1, vocab.size)
    m.fill_next_token_bitmask(mask, 0)
    assert corral.allowed_token_ids(mask[0], vocab.size) == [0]
    assert Reference(text).is_prefix(b"a") and not Reference(text).is_prefix(b"b")


def test_error_hierarchy():
    for cls in (
        corral.GrammarError,
        corral.GrammarSyntaxError,
        corral.UnsupportedSchemaError,
        corral.LimitExceededError,
        corral.CompileTimeoutError,
        corral.TokenizerError,
        corral.UsageError,
        corral.EmptyMaskError,
        corral.InternalError,
    ):
        assert issubclass(cls, corral.CorralError), cls
    assert issubclass(corral.GrammarSyntaxError, corral.GrammarError)
    # Errors from other entry points use the hierarchy too.
    with pytest.raises(corral.TokenizerError):
        corral.Vocabulary.from_bytes([b"a"], eos_token_ids=[5])
    with pytest.raises(corral.UsageError):
        corral.Grammar.from_ebnf(42)
    with pytest.raises(corral.GrammarSyntaxError):
        corral.Grammar.from_regex("(a")


def test_panic_becomes_internal_error():
    with pytest.raises(corral.InternalError) as info:
        corral._native._trigger_panic()
    assert type(info.value).__name__ == "InternalError"
    assert isinstance(info.value, corral.CorralError)
    assert "panic" in str(info.value)
    # The module keeps working afterwards.
    assert corral.Grammar.from_ebnf('root ::= "a"').num_rules == 1
