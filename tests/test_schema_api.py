"""`corral.Grammar.from_json_schema` through Python: inputs, options, errors and warnings.
(Keyword-level exactness is tested in the Rust crate `corral-schema` against the official
JSON-Schema-Test-Suite and JSONSchemaBench.)"""

from __future__ import annotations

import json
import warnings

import pytest

import corral

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 5}, "age": {"type": "integer", "minimum": 0, "maximum": 150}},
    "required": ["name"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def vocab():
    return corral.builtin_vocabulary()


def accepts(grammar, text: str, vocab) -> bool:
    m = corral.Matcher(corral.compile(grammar, vocab))
    return m.accept_string(text) and m.is_accepting()


def test_dict_string_and_bytes_inputs_agree(vocab):
    for schema in (PERSON, json.dumps(PERSON), json.dumps(PERSON).encode()):
        g = corral.Grammar.from_json_schema(schema)
        assert accepts(g, '{"age": 42, "name": "Bob"}', vocab)
        assert not accepts(g, '{"name": "Robert"}', vocab), "maxLength"
        assert not accepts(g, '{"age": 42}', vocab), "required"
        assert not accepts(g, '{"name": "Bob", "x": 1}', vocab), "additionalProperties"
        assert not accepts(g, '{"name": "Bob", "age": 151}', vocab), "maximum"
    assert set(g.schema_keywords) >= {"type", "properties", "required", "maxLength", "minimum"}


def test_pydantic_model_class(vocab):
    pydantic = pytest.importorskip("pydantic")

    class Point(pydantic.BaseModel):
        x: int
        y: int

    g = corral.Grammar.from_json_schema(Point)
    assert accepts(g, '{"x": 1, "y": -2}', vocab)
    assert not accepts(g, '{"x": 1}', vocab)


def test_whitespace_modes(vocab):
    compact = corral.Grammar.from_json_schema(PERSON, whitespace="compact")
    assert accepts(compact, '{"name":"Bob"}', vocab) and not accepts(compact, '{"name": "Bob"}', vocab)
    fixed = corral.Grammar.from_json_schema(PERSON, indent=2)
    assert accepts(fixed, json.dumps({"name": "Bob", "age": 3}, indent=2), vocab)
    assert not accepts(fixed, json.dumps({"name": "Bob", "age": 3}), vocab)
    flexible = corral.Grammar.from_json_schema(PERSON, max_whitespace=2)
    assert accepts(flexible, '{  "name":"Bob"}', vocab) and not accepts(flexible, '{   "name":"Bob"}', vocab)
    with pytest.raises(corral.UsageError, match="whitespace must be"):
        corral.Grammar.from_json_schema(PERSON, whitespace="loose")


def test_strict_errors_name_keyword_and_pointer():
    schema = {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}
    with pytest.raises(corral.UnsupportedSchemaError) as e:
        corral.Grammar.from_json_schema(schema)
    assert e.value.keyword == "uniqueItems" and e.value.pointer == "/properties/tags/uniqueItems"
    assert "/properties/tags/uniqueItems" in str(e.value)


def test_non_strict_warns_once_per_ignored_keyword(vocab):
    schema = {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        g = corral.Grammar.from_json_schema(schema, strict=False)
    msgs = [str(x.message) for x in w if issubclass(x.category, corral.SchemaWarning)]
    assert len(msgs) == 1 and "/properties/tags/uniqueItems" in msgs[0]
    assert accepts(g, '{"tags": [1, 1]}', vocab), "looser, never tighter"
    assert g.schema_warnings[0][1] == "uniqueItems"


def test_annotations_are_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        corral.Grammar.from_json_schema({"title": "T", "description": "d", "examples": [1], "$comment": "c", "default": 1, "deprecated": True, "type": "integer"})


def test_malformed_schema():
    with pytest.raises(corral.InvalidSchemaError):
        corral.Grammar.from_json_schema("{not json")
    with pytest.raises(corral.CorralError):
        corral.Grammar.from_json_schema({"type": 12})


def test_the_common_email_pattern_compiles_with_a_literal_dash(vocab):
    # `[\w-\.]`: a `-` after a class escape is literal in ECMA-262 as browsers read it (this
    # pattern was rejected as an invalid range before).
    g = corral.Grammar.from_json_schema({"type": "string", "pattern": r"^[\w-\.]+@([\w-]+\.)+[\w-]{2,4}$"})
    assert accepts(g, '"john.doe-x@mail.example.com"', vocab)
    assert not accepts(g, '"john doe@mail.example.com"', vocab)
    assert not accepts(g, '"john@example.c"', vocab)
