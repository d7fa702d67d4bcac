"""Reading a binding's config with typed ``config_invalid`` failures that name the field (before any I/O)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, cast

from pydantic import JsonValue

from .errors import PlatformError

__all__ = ["ConfigReader"]


class ConfigReader:
    """Typed accessors over ``ctx.config`` (legacy kebab-case names). Empty strings count as unset, since
    legacy forms store untouched fields as ``""``."""

    __slots__ = ("_config",)

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._config = config

    def _raw(self, name: str) -> Any:
        value = self._config.get(name)
        return None if value == "" else value

    @staticmethod
    def invalid(name: str, problem: str) -> PlatformError:
        """The ``config_invalid`` failure for field *name*."""
        return PlatformError("config_invalid", f"config field '{name}' {problem}", details={"field": name})

    def string(self, name: str, *, default: str | None = None, required: bool = False) -> str:
        """A string field (stripped); *required* refuses a missing or empty value."""
        value = self._raw(name)
        if value is None:
            if required and not default:
                raise self.invalid(name, "is required")
            return default or ""
        if not isinstance(value, str):
            raise self.invalid(name, "must be a string")
        value = value.strip()
        if required and not value:
            raise self.invalid(name, "is required")
        return value

    def url(self, name: str, *, default: str | None = None, required: bool = True) -> str:
        """An ``http(s)://`` URL without a trailing slash."""
        value = self.string(name, default=default, required=required)
        if value and not value.startswith(("http://", "https://")):
            raise self.invalid(name, "must be an http:// or https:// URL")
        return value.rstrip("/")

    def choice(self, name: str, options: Sequence[str], *, default: str) -> str:
        """One of *options*."""
        value = self.string(name, default=default)
        if value not in options:
            raise self.invalid(name, f"must be one of {', '.join(options)} (got {value!r})")
        return value

    def number(self, name: str, *, default: float, minimum: float = 0.0) -> float:
        """A number greater than *minimum* (numeric strings are accepted: legacy forms stored some as text)."""
        value = self._raw(name)
        if value is None:
            return default
        if isinstance(value, bool):
            raise self.invalid(name, "must be a number")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise self.invalid(name, "must be a number") from None
        if not math.isfinite(number) or number <= minimum:
            raise self.invalid(name, f"must be a number greater than {minimum:g}")
        return number

    def boolean(self, name: str, *, default: bool) -> bool:
        """A boolean (``"true"``/``"false"`` strings are accepted)."""
        value = self._raw(name)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise self.invalid(name, "must be true or false")

    def mapping(self, name: str) -> dict[str, JsonValue]:
        """A JSON object (``{}`` when unset)."""
        value = self._raw(name)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.invalid(name, "must be an object")
        return dict(cast("Mapping[str, JsonValue]", value))
