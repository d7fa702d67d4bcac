"""Assertion helpers shared by the SDK tests."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

_M = TypeVar("_M", bound=BaseModel)


def assert_contains(expected: Any, actual: Any, path: str = "$") -> None:
    """Every key and value of *expected* is in *actual* (extra keys in *actual*, e.g. defaults, are fine)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: expected an object, got {actual!r}"
        for key, value in expected.items():
            assert key in actual, f"{path}.{key} is missing"
            assert_contains(value, actual[key], f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list), f"{path}: expected a list, got {actual!r}"
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            assert_contains(want, got, f"{path}[{index}]")
    else:
        assert expected == actual, f"{path}: {actual!r} != {expected!r}"


def round_trip(model: _M) -> _M:
    """Dump *model* to JSON and parse it back as the same class; the result must equal the original."""
    again = type(model).model_validate_json(model.model_dump_json())
    assert again == model
    assert again.model_dump_json() == model.model_dump_json()
    return again
