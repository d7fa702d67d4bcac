"""Runner ids: ``plugin:<author>/<plugin>/<runner>`` (PROTOCOL_V1 §4.2)."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["InvalidRunnerIdError", "RunnerId"]

_PREFIX = "plugin:"
_MAX_LENGTH = 255
_MAX_PART = 64
_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class InvalidRunnerIdError(ValueError):
    """A runner id that does not have the form ``plugin:<author>/<plugin>/<runner>``."""

    def __init__(self, runner_id: object, reason: str) -> None:
        self.runner_id = runner_id
        self.reason = reason
        super().__init__(
            f"invalid runner id {runner_id!r}: {reason} (expected plugin:<author>/<plugin>/<runner>)"
        )


@dataclass(frozen=True, slots=True)
class RunnerId:
    """A parsed runner id. Immutable; ``str(rid)`` gives the canonical form."""

    author: str
    """Plugin author, e.g. ``langbot``."""
    plugin: str
    """Plugin name, e.g. ``local-agent``."""
    runner: str
    """Runner name inside the plugin, e.g. ``default``."""

    def __post_init__(self) -> None:
        for label, part in (("author", self.author), ("plugin", self.plugin), ("runner", self.runner)):
            _check_part(f"plugin:{self.author}/{self.plugin}/{self.runner}", label, part)

    @classmethod
    def parse(cls, value: str) -> RunnerId:
        """Parse and validate; raises :class:`InvalidRunnerIdError` with the reason."""
        if not isinstance(value, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise InvalidRunnerIdError(value, "not a string")
        if len(value) > _MAX_LENGTH:
            raise InvalidRunnerIdError(value, f"longer than {_MAX_LENGTH} characters")
        if not value.startswith(_PREFIX):
            raise InvalidRunnerIdError(value, "missing the 'plugin:' prefix")
        parts = value[len(_PREFIX) :].split("/")
        if len(parts) != 3:
            raise InvalidRunnerIdError(value, f"needs exactly 3 '/'-separated parts, got {len(parts)}")
        author, plugin, runner = parts
        for label, part in (("author", author), ("plugin", plugin), ("runner", runner)):
            _check_part(value, label, part)
        return cls(author, plugin, runner)

    @classmethod
    def is_valid(cls, value: str) -> bool:
        """True when :meth:`parse` would succeed."""
        try:
            cls.parse(value)
        except InvalidRunnerIdError:
            return False
        return True

    @property
    def plugin_id(self) -> str:
        """The plugin identity ``author/plugin`` that owns this runner."""
        return f"{self.author}/{self.plugin}"

    def __str__(self) -> str:
        return f"{_PREFIX}{self.author}/{self.plugin}/{self.runner}"


def _check_part(value: str, label: str, part: str) -> None:
    if not part:
        raise InvalidRunnerIdError(value, f"the {label} part is empty")
    if len(part) > _MAX_PART:
        raise InvalidRunnerIdError(value, f"the {label} part is longer than {_MAX_PART} characters")
    if not _PART.match(part):
        raise InvalidRunnerIdError(
            value, f"the {label} part {part!r} may hold only letters, digits, '.', '_' and '-'"
        )
