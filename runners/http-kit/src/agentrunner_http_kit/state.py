"""External ids (the platform's conversation or session id) kept in the host's conversation state.

They are read from ``ctx.state.conversation`` (the snapshot the host sends with the run) and written by
``state.updated`` results, which the host applies at once; a runner emits them only once the platform
answered, so a failed first turn leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterator

from agentrunner import AgentRunContext, ResultEmitter, StateUpdatedResult
from pydantic import JsonValue

__all__ = ["ExternalIds"]

_UNSET = object()


class ExternalIds:
    """The run's view of its external ids: what the host stored, what changed in this run."""

    __slots__ = ("_changed", "_stored")

    def __init__(self, ctx: AgentRunContext) -> None:
        self._stored: dict[str, JsonValue] = dict(ctx.state.conversation)
        self._changed: dict[str, str | None] = {}

    def get(self, key: str) -> str | None:
        """The id under *key* (a change made in this run wins); ``None`` when unset or not a non-empty string."""
        value = self._changed[key] if key in self._changed else self._stored.get(key)
        return value if isinstance(value, str) and value else None

    def set(self, key: str, value: str | None) -> None:
        """Remember a new id (``None`` or "" forgets it); written by :meth:`updates`."""
        value = value or None
        stored = self._stored.get(key)
        if value == (stored if isinstance(stored, str) and stored else None):
            self._changed.pop(key, None)
        else:
            self._changed[key] = value

    def forget(self, key: str) -> None:
        """Forget the id under *key* (the platform no longer knows it)."""
        self.set(key, None)

    @property
    def changed(self) -> dict[str, str | None]:
        """The keys changed in this run and their new values (``None``: deleted)."""
        return dict(self._changed)

    def updates(self, out: ResultEmitter) -> Iterator[StateUpdatedResult]:
        """One ``state.updated`` (scope ``conversation``) per changed key; ``None`` deletes the key."""
        for key, value in self._changed.items():
            yield out.state("conversation", key, value)
