"""The one JSON codec of the protocol (orjson), so every package encodes the wire the same way."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import orjson
from pydantic import JsonValue

__all__ = [
    "JsonObject",
    "JsonValue",
    "WireObject",
    "dumps",
    "dumps_canonical",
    "dumps_str",
    "json_size",
    "loads",
    "loads_object",
    "non_finite_path",
]

JsonObject: TypeAlias = dict[str, JsonValue]
"""A JSON object: what results, back-call answers and stored payloads are on the wire. Its values are
``JsonValue`` (pydantic's recursive JSON type), so code reading one narrows each value before using it."""

if TYPE_CHECKING:
    WireObject: TypeAlias = JsonObject
else:
    WireObject: TypeAlias = dict[str, Any]
"""A JSON object held by a protocol model's field: :data:`JsonObject` to the type checker, validated at run
time only as a ``dict`` with string keys. Its values come from decoded JSON or from typed code (both are JSON
already), so pydantic's recursive ``JsonValue`` check (about 10x the cost on a result frame) would repeat
what is known; the field's JSON schema stays ``{"type": "object"}``."""

_OPTIONS = orjson.OPT_NON_STR_KEYS
# what orjson decodes a document that is not an object to
_JSON_KINDS: dict[type, str] = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "true or false",
    type(None): "null",
}


def dumps(value: Any) -> bytes:
    """Encode *value* as compact UTF-8 JSON bytes; raises ``TypeError`` for values JSON cannot hold."""
    return orjson.dumps(value, option=_OPTIONS)


def dumps_str(value: Any) -> str:
    """Like :func:`dumps`, as ``str``."""
    return orjson.dumps(value, option=_OPTIONS).decode()


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode JSON; raises ``orjson.JSONDecodeError`` (a ``ValueError``) on malformed input."""
    return orjson.loads(data)


def loads_object(data: bytes | bytearray | memoryview | str) -> JsonObject:
    """Decode a JSON object; raises ``ValueError`` (``orjson.JSONDecodeError`` is one) on malformed input or
    when the document is not an object.

    Decoded JSON holds only JSON values, so the result is typed as what it is instead of ``Any``."""
    value = orjson.loads(data)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, not {_JSON_KINDS[type(value)]}")
    return cast(JsonObject, value)


def json_size(value: Any) -> int:
    """Size in bytes of *value* encoded as JSON; raises ``TypeError`` when it is not JSON-serialisable."""
    return len(orjson.dumps(value, option=_OPTIONS))


def dumps_canonical(value: Any) -> bytes:
    """Deterministic JSON (sorted keys) for hashing."""
    return orjson.dumps(value, option=_OPTIONS | orjson.OPT_SORT_KEYS)


def non_finite_path(value: Any, path: str = "") -> str | None:
    """Where *value* holds NaN or ±Infinity (``"a.b[2]"``, ``""`` for the root), or ``None``.

    JSON has no such numbers and orjson would write them as ``null``, which the protocol reads as "delete" for
    state: every producer refuses them instead of letting them turn into something else.
    """
    if isinstance(value, float):
        return None if math.isfinite(value) else (path or "value")
    if isinstance(value, dict):
        for key, item in value.items():  # pyright: ignore[reportUnknownVariableType]
            found = non_finite_path(item, f"{path}.{key}" if path else str(key))  # pyright: ignore[reportUnknownArgumentType]
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            found = non_finite_path(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None
