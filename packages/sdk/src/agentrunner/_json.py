"""The one JSON codec of the protocol (orjson), so every package encodes the wire the same way."""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["dumps", "dumps_canonical", "dumps_str", "json_size", "loads"]

_OPTIONS = orjson.OPT_NON_STR_KEYS


def dumps(value: Any) -> bytes:
    """Encode *value* as compact UTF-8 JSON bytes; raises ``TypeError`` for values JSON cannot hold."""
    return orjson.dumps(value, option=_OPTIONS)


def dumps_str(value: Any) -> str:
    """Like :func:`dumps`, as ``str``."""
    return orjson.dumps(value, option=_OPTIONS).decode()


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode JSON; raises ``orjson.JSONDecodeError`` (a ``ValueError``) on malformed input."""
    return orjson.loads(data)


def json_size(value: Any) -> int:
    """Size in bytes of *value* encoded as JSON; raises ``TypeError`` when it is not JSON-serialisable."""
    return len(orjson.dumps(value, option=_OPTIONS))


def dumps_canonical(value: Any) -> bytes:
    """Deterministic JSON (sorted keys) for hashing."""
    return orjson.dumps(value, option=_OPTIONS | orjson.OPT_SORT_KEYS)
