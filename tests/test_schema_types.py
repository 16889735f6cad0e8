"""`Grammar.from_json_schema` given Python types (through pydantic's `TypeAdapter`): a
`TypeAdapter`, a model class, a dataclass, a `TypedDict`, `list[Item]`, `Optional`, `Literal`,
`Enum`, discriminated unions, constrained strings and numbers.

Both directions against the type's own validator (`TypeAdapter.validate_json`):
- every text corral accepts -- random walks of the matcher and hand-written instances --
  validates;
- every hand-written text the validator rejects for its shape (missing or wrong fields, bad
  literal or discriminator, out-of-range numbers, strings too long or off-pattern) corral
  rejects too.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import random
import sys
from typing import Any, Literal, Optional, Union

import numpy as np
import pytest

import corral

pydantic = pytest.importorskip("pydantic")
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, with_config  # noqa: E402
from typing_extensions import Annotated, TypedDict  # noqa: E402


class Color(str, enum.Enum):
    RED = "red"
    GREEN = "green"


class Size(enum.IntEnum):
    S = 1
    M = 2


# Extra keys forbidden (`additionalProperties: false`), so that random walks stay on the
# declared fields; the types' validators forbid them too.
FORBID = ConfigDict(extra="forbid")


class Address(BaseModel):
    model_config = FORBID
    street: Annotated[str, StringConstraints(min_length=1, max_length=8)]
    zip: Annotated[str, StringConstraints(pattern=r"^[0-9]{5}$")]


class Cat(BaseModel):
    model_config = FORBID
    kind: Literal["cat"]
    lives: Annotated[int, Field(ge=0, le=9)]


class Dog(BaseModel):
    model_config = FORBID
    kind: Literal["dog"]
    weight: Annotated[float, Field(gt=0, lt=100)]


Pet = Annotated[Union[Cat, Dog], Field(discriminator="kind")]


class Person(BaseModel):
    model_config = FORBID
    name: Annotated[str, StringConstraints(max_length=6)]
    age: Optional[Annotated[int, Field(ge=0, le=150)]] = None
    color: Color
    size: Size
    address: Address
    pets: Annotated[list[Pet], Field(max_length=3)]
    tag: Literal["a", "b"] = "a"


@with_config(FORBID)
@dataclasses.dataclass
class Item:
    id: Annotated[int, Field(ge=1)]
    label: Optional[str] = None


@with_config(FORBID)
class Movie(TypedDict):
    title: Annotated[str, StringConstraints(min_length=1, max_length=5)]
    year: Annotated[int, Field(ge=1900, le=2100)]
    rating: Literal["G", "PG"]


TYPES: dict[str, Any] = {
    "model": Person,
    "type_adapter": TypeAdapter(Person),
    "dataclass": Item,
    "typeddict": Movie,
    "list_of_dataclass": list[Item],
    "optional_int": Optional[int],
    "literal": Literal["x", "y", 3],
    "enum": Color,
    "int_enum": Size,
    "discriminated_union": Pet,
    "constrained_str": Annotated[str, StringConstraints(min_length=2, max_length=4, pattern=r"^[a-c]+$")],
    "constrained_number": Annotated[float, Field(ge=-2.5, lt=7)],
    "list_of_models": Annotated[list[Cat], Field(min_length=1, max_length=2)],
}

# Hand-written texts: (type name, text). `True`: the validator accepts it; corral must too.
VALID = [
    ("model", '{"name": "Ann", "color": "red", "size": 1, "address": {"street": "Main", "zip": "12345"}, "pets": []}'),
    ("model", '{"name": "Bo", "age": 40, "color": "green", "size": 2, "address": {"street": "X", "zip": "00000"}, '
     '"pets": [{"kind": "cat", "lives": 9}, {"kind": "dog", "weight": 12.5}], "tag": "b"}'),
    ("type_adapter", '{"name": "", "age": null, "color": "red", "size": 2, "address": {"street": "abcdefgh", "zip": "99999"}, "pets": [{"kind": "dog", "weight": 0.5}]}'),
    ("dataclass", '{"id": 1}'),
    ("dataclass", '{"id": 7, "label": null}'),
    ("dataclass", '{"label": "x", "id": 3}'),
    ("typeddict", '{"title": "Up", "year": 2009, "rating": "PG"}'),
    ("list_of_dataclass", "[]"),
    ("list_of_dataclass", '[{"id": 1, "label": "a"}, {"id": 2}]'),
    ("optional_int", "null"),
    ("optional_int", "-12"),
    ("literal", '"x"'),
    ("literal", "3"),
    ("enum", '"green"'),
    ("int_enum", "2"),
    ("discriminated_union", '{"kind": "cat", "lives": 0}'),
    ("discriminated_union", '{"weight": 99.9, "kind": "dog"}'),
    ("constrained_str", '"abca"'),
    ("constrained_number", "-2.5"),
    ("constrained_number", "6.999"),
    ("list_of_models", '[{"kind": "cat", "lives": 3}]'),
]

# Rejected by the validator for their shape; corral must reject them too.
INVALID = [
    ("model", '{"name": "Ann", "color": "red", "size": 1, "pets": []}'),  # address missing
    ("model", '{"name": "Annabel", "color": "red", "size": 1, "address": {"street": "M", "zip": "12345"}, "pets": []}'),  # name too long
    ("model", '{"name": "A", "color": "blue", "size": 1, "address": {"street": "M", "zip": "12345"}, "pets": []}'),  # enum
    ("model", '{"name": "A", "color": "red", "size": 3, "address": {"street": "M", "zip": "12345"}, "pets": []}'),  # int enum
    ("model", '{"name": "A", "color": "red", "size": 1, "address": {"street": "M", "zip": "1234"}, "pets": []}'),  # pattern
    ("model", '{"name": "A", "color": "red", "size": 1, "address": {"street": "", "zip": "12345"}, "pets": []}'),  # min_length
    ("model", '{"name": "A", "age": -1, "color": "red", "size": 1, "address": {"street": "M", "zip": "12345"}, "pets": []}'),
    ("model", '{"name": "A", "color": "red", "size": 1, "address": {"street": "M", "zip": "12345"}, "pets": [], "tag": "c"}'),
    ("model", '{"name": "A", "color": "red", "size": 1, "address": {"street": "M", "zip": "12345"}, '
     '"pets": [{"kind": "cat", "lives": 1}, {"kind": "cat", "lives": 1}, {"kind": "cat", "lives": 1}, {"kind": "cat", "lives": 1}]}'),  # max_length
    ("type_adapter", '{"name": "A", "color": "red", "size": 1, "address": {"street": "M", "zip": "12345"}, "pets": [{"kind": "cat", "weight": 1}]}'),
    ("dataclass", "{}"),
    ("dataclass", '{"id": 0}'),
    ("dataclass", '{"id": 1, "label": 5}'),
    ("dataclass", "[1]"),
    ("typeddict", '{"title": "Up", "year": 2009}'),
    ("typeddict", '{"title": "Up", "year": 1800, "rating": "G"}'),
    ("typeddict", '{"title": "Up", "year": 2000, "rating": "R"}'),
    ("list_of_dataclass", '{"id": 1}'),
    ("list_of_dataclass", '[{"id": 1}, {"label": "x"}]'),
    ("optional_int", '"1"'),
    ("optional_int", "true"),
    ("literal", '"z"'),
    ("literal", "4"),
    ("enum", '"RED"'),
    ("int_enum", "0"),
    ("discriminated_union", '{"kind": "bird", "lives": 1}'),
    ("discriminated_union", '{"kind": "cat", "lives": 10}'),
    ("discriminated_union", '{"kind": "dog", "weight": 0}'),
    ("discriminated_union", '{"kind": "dog", "weight": 100}'),
    ("discriminated_union", '{"lives": 1}'),
    ("constrained_str", '"a"'),
    ("constrained_str", '"abcab"'),
    ("constrained_str", '"abd"'),
    ("constrained_number", "-2.6"),
    ("constrained_number", "7"),
    ("constrained_number", '"1"'),
    ("list_of_models", "[]"),
    ("list_of_models", '[{"kind": "dog", "weight": 1}]'),
]

# A vocabulary of the printable ASCII characters, one a token, and an end of sequence.
CHARS = [bytes([c]) for c in range(32, 127)]
EOS = len(CHARS)


@pytest.fixture(scope="module")
def vocab() -> corral.Vocabulary:
    return corral.Vocabulary.from_bytes([*CHARS, b"<eos>"], eos_token_ids=[EOS])


@pytest.fixture(scope="module")
def compiled(vocab: corral.Vocabulary) -> dict[str, corral.CompiledGrammar]:
    return {name: corral.compile(corral.Grammar.from_json_schema(tp), vocab) for name, tp in TYPES.items()}


def adapter(name: str) -> Any:
    tp = TYPES[name]
    return tp if isinstance(tp, TypeAdapter) else TypeAdapter(tp)


def corral_accepts(compiled: corral.CompiledGrammar, text: str) -> bool:
    m = corral.Matcher(compiled)
    return m.accept_string(text) and m.is_accepting()


def validator_accepts(name: str, text: str, strict: bool = False) -> bool:
    try:
        adapter(name).validate_json(text, strict=strict)
    except pydantic.ValidationError:
        return False
    return True


CLOSERS = {ord(c) - 32 for c in '"]},'}
SHORT = {ord(c) - 32 for c in "0123456789abcnrtuefl"}


def walk(compiled: corral.CompiledGrammar, rng: random.Random, max_steps: int = 600) -> str | None:
    """A random text the matcher accepts (biased towards closing what is open), or None when
    the walk ran too long."""
    m = corral.Matcher(compiled)
    mask = np.zeros((1, corral.bitmask_words(EOS + 1)), dtype=np.int32)
    out = bytearray()
    for _ in range(max_steps):
        m.fill_next_token_bitmask(mask)
        allowed = corral.allowed_token_ids(mask[0], EOS + 1)
        assert allowed, f"dead end after {bytes(out)!r}"
        if EOS in allowed and (len(allowed) == 1 or rng.random() < 0.5):
            assert m.is_accepting()
            return out.decode()
        choices = [t for t in allowed if t != EOS]
        if out[-1:].isdigit() or out[-1:] == b".":
            # No exponents: numbers beyond the double range or precision are a known difference
            # (test_known_differences_numbers_beyond_doubles).
            choices = [t for t in choices if CHARS[t] not in (b"e", b"E")]
            if not choices:
                return None
        r = rng.random()
        close = [t for t in choices if t in CLOSERS]
        short = [t for t in choices if t in SHORT]
        if close and r < 0.25:
            t = rng.choice(close)
        elif short and r < 0.6:
            t = rng.choice(short)
        else:
            t = rng.choice(choices)
        assert m.accept_token(t)
        out += CHARS[t]
    return None


@pytest.mark.parametrize("name", list(TYPES))
def test_walks_validate_with_the_types_validator(name: str, compiled: dict[str, corral.CompiledGrammar]) -> None:
    rng = random.Random(name)
    done = 0
    for _ in range(60):
        text = walk(compiled[name], rng)
        if text is None:
            continue
        done += 1
        try:
            adapter(name).validate_json(text)
        except pydantic.ValidationError as e:
            raise AssertionError(f"{name}: corral accepted {text!r}, which the validator rejects: {e}") from None
    assert done >= 10, f"{name}: only {done} walks finished"


@pytest.mark.parametrize("name, text", VALID)
def test_valid_instances_accepted_by_both(name: str, text: str, compiled: dict[str, corral.CompiledGrammar]) -> None:
    assert validator_accepts(name, text), text
    assert corral_accepts(compiled[name], text), text


@pytest.mark.parametrize("name, text", INVALID)
def test_shape_errors_rejected_by_both(name: str, text: str, compiled: dict[str, corral.CompiledGrammar]) -> None:
    # Strict: "1" for an int is refused for its shape, not coerced.
    assert not validator_accepts(name, text, strict=True), text
    assert not corral_accepts(compiled[name], text), text


def test_type_adapter_equals_model_class() -> None:
    a = corral.Grammar.from_json_schema(Person)
    b = corral.Grammar.from_json_schema(TypeAdapter(Person))
    c = corral.Grammar.from_json_schema(json.dumps(TypeAdapter(Person).json_schema()))
    assert a.source_key == b.source_key == c.source_key


def test_builtin_generic_aliases_and_pep604_unions() -> None:
    for tp in (list[int], dict[str, int], tuple[int, str], int | None, Optional[list[Item]]):
        g = corral.Grammar.from_json_schema(tp)
        assert g.num_rules > 0, tp


def test_missing_pydantic_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pydantic", None)  # `import pydantic` now raises ImportError
    with pytest.raises(corral.MissingDependencyError, match="pydantic") as info:
        corral.Grammar.from_json_schema(Item)
    assert isinstance(info.value, corral.CorralError) and isinstance(info.value, ImportError)
    assert info.value.package == "pydantic"
    # Dicts and JSON text need no pydantic.
    corral.Grammar.from_json_schema({"type": "integer"})
    corral.Grammar.from_json_schema('{"type": "integer"}')


@pytest.mark.parametrize("bad", [42, [1, 2], object(), 1.5])
def test_values_that_are_not_schemas_or_types(bad: Any) -> None:
    with pytest.raises(corral.UsageError, match="schema must be a dict, a JSON string, a pydantic model, a TypeAdapter"):
        corral.Grammar.from_json_schema(bad)


def test_types_pydantic_cannot_describe() -> None:
    class Opaque:
        pass

    with pytest.raises(corral.UsageError, match="pydantic cannot make a JSON Schema"):
        corral.Grammar.from_json_schema(Opaque)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"enum": [1, 2.5, -0.0, 1e300, True, None, "x\u00e9", [1, {"b": []}]]}}, "required": ("a",)},
        {"enum": [2**70, -(2**63), 2**64 - 1, 0.1, 1.0]},
        {"type": "string", "const": "\ud800"},  # a lone surrogate: json.dumps escapes it
        {"type": "object", "properties": {1: {"type": "integer"}}},  # a non-string key: json.dumps names it "1"
    ],
)
def test_dict_conversion_matches_json_text(schema: Any) -> None:
    """A dict is converted to JSON in Rust (under the compile budget), or through json.dumps
    for what that path leaves to it: either way the grammar is the one of its JSON text."""
    import json

    text = json.dumps(schema)
    outcomes = []
    for s in (schema, text):
        try:
            g = corral.Grammar.from_json_schema(s)
        except corral.CorralError as e:
            outcomes.append((type(e).__name__, str(e)))
            continue
        cg = corral.CompiledGrammar(g, corral.builtin_vocabulary())
        docs = ['{"a": 2.5}', '{"a": 3}', '{"a": [1, {"b": []}]}', "1180591620717411303424", "0.1", '"x"', '{"1": 5}', '{"1": "x"}', "{}"]
        accepted = []
        for d in docs:
            m = corral.Matcher(cg)
            if m.accept_bytes(d.encode()) and m.is_accepting():
                accepted.append(d)
        outcomes.append(accepted)
    assert outcomes[0] == outcomes[1]


def test_nan_in_a_dict_is_not_json() -> None:
    with pytest.raises(corral.CorralError, match="not valid JSON"):
        corral.Grammar.from_json_schema({"type": "number", "const": float("nan")})


def test_unserializable_dict() -> None:
    with pytest.raises(corral.UsageError, match="not JSON-serializable"):
        corral.Grammar.from_json_schema({"type": "object", "default": object()})


@pytest.mark.parametrize(
    "name, text",
    [
        ("dataclass", '{"id": 3E48974}'),  # an integer to JSON Schema; inf to pydantic
        ("optional_int", "4.7357839E73"),  # an integer; too big for pydantic's float-to-int
        ("discriminated_union", '{"kind": "dog", "weight": 8e-299755}'),  # > 0; 0.0 as a double
    ],
)
def test_known_differences_numbers_beyond_doubles(name: str, text: str, compiled: dict[str, corral.CompiledGrammar]) -> None:
    """JSON Schema compares numbers as exact decimals, pydantic parses them as doubles first:
    a number written with a large exponent can satisfy the schema and fail the validator.
    corral follows the schema (docs/install.md, "Schemas from Python types"); a model writes
    such numbers only by choice, never by accident of the grammar's width."""
    assert corral_accepts(compiled[name], text)
    assert not validator_accepts(name, text)
