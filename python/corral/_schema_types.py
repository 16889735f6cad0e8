"""Turns whatever ``Grammar.from_json_schema`` is given into JSON Schema text.

A ``str``/``bytes`` schema never comes here (the native code reads it directly). A ``dict``
(or ``bool``, the two trivial schemas) is serialized as it is. A pydantic model class keeps
going through its ``model_json_schema()``. Anything else that describes a Python type -- a
pydantic ``TypeAdapter``, a dataclass, a ``TypedDict``, an annotated type such as
``list[Item]`` or ``Optional[int]`` -- goes through pydantic's
``TypeAdapter(tp).json_schema()``; without pydantic installed that raises
:class:`corral.MissingDependencyError` naming it.

Example::

    >>> from corral._schema_types import schema_json_text
    >>> schema_json_text({"type": "integer"})
    '{"type": "integer"}'
    >>> schema_json_text(list[int])  # doctest: +SKIP  (needs pydantic)
    '{"items": {"type": "integer"}, "type": "array"}'
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from .errors import MissingDependencyError, UsageError

__all__ = ["schema_json_text", "schema_object", "schema_of_type"]


def _is_type_like(obj: object) -> bool:
    """Whether ``obj`` looks like a type pydantic could describe (as opposed to a value such
    as a list or a number, which is a mistake we should word ourselves)."""
    if isinstance(obj, type):
        return True
    if dataclasses.is_dataclass(obj):
        return True
    # Generic aliases (list[int], typing.List[int], Optional[X], Literal[...], Annotated[...],
    # X | Y) and other typing special forms all live in `typing`/`types`.
    mod = type(obj).__module__
    return mod in ("typing", "types", "typing_extensions", "annotated_types")


def schema_of_type(tp: Any) -> dict[str, Any]:
    """The JSON Schema (a dict) pydantic generates for ``tp``: a ``TypeAdapter``, a pydantic
    model class, a dataclass, a ``TypedDict`` or any annotation pydantic accepts.

    Raises :class:`corral.MissingDependencyError` when pydantic is not installed and
    :class:`corral.UsageError` when pydantic cannot describe ``tp``."""
    if isinstance(tp, type) and hasattr(tp, "model_json_schema"):
        schema: dict[str, Any] = getattr(tp, "model_json_schema")()
        return schema
    try:
        import pydantic
    except ImportError:
        raise MissingDependencyError(
            f"a JSON Schema from the Python type {tp!r} needs pydantic, which is not installed "
            "(pip install pydantic); or pass the schema as a dict or JSON text",
            package="pydantic",
        ) from None
    if isinstance(tp, pydantic.TypeAdapter):
        adapter: pydantic.TypeAdapter[Any] = tp
    else:
        try:
            adapter = pydantic.TypeAdapter(tp)
        except pydantic.PydanticUserError as e:  # e.g. a type pydantic cannot build a schema for
            raise UsageError(f"pydantic cannot make a JSON Schema from {tp!r}: {e}") from None
        except pydantic.PydanticSchemaGenerationError as e:  # pragma: no cover - subclass above in pydantic 2
            raise UsageError(f"pydantic cannot make a JSON Schema from {tp!r}: {e}") from None
    try:
        out: dict[str, Any] = adapter.json_schema()
    except pydantic.PydanticUserError as e:
        raise UsageError(f"pydantic cannot make a JSON Schema from {tp!r}: {e}") from None
    return out


def schema_json_text(schema: Any) -> str:
    """JSON text of the schema ``schema`` stands for (see the module docstring)."""
    obj = schema_object(schema)
    try:
        return json.dumps(obj)
    except (TypeError, ValueError) as e:
        raise UsageError(f"the schema is not JSON-serializable: {e}") from None


def schema_object(schema: Any) -> Any:
    """The schema ``schema`` stands for as a dict or bool (not yet checked to be JSON):
    ``Grammar.from_json_schema`` converts it to JSON in Rust, under the compile budget."""
    if isinstance(schema, (dict, bool)):
        obj: Any = schema
    elif isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        obj = getattr(schema, "model_json_schema")()  # a pydantic model class
    elif _is_type_like(schema) or type(schema).__name__ == "TypeAdapter":
        obj = schema_of_type(schema)
    else:
        raise UsageError(
            "schema must be a dict, a JSON string, a pydantic model, a TypeAdapter, a dataclass, a TypedDict "
            f"or a type such as list[Item]; got {type(schema).__name__}"
        )
    return obj
