"""Narrowing decoded JSON (``object``) to the shapes a parser expects, without unchecked casts at call sites."""

from __future__ import annotations

from typing import Any, cast

__all__ = ["as_list", "as_object"]


def as_object(value: object) -> dict[str, Any] | None:
    """*value* if it is a JSON object, else ``None``."""
    return cast(dict[str, Any], value) if isinstance(value, dict) else None


def as_list(value: object) -> list[object]:
    """*value* if it is a JSON array, else ``[]``."""
    return cast(list[object], value) if isinstance(value, list) else []
