"""Errors of the stores. The pull APIs translate them into the protocol's §9 errors.

Exception tree (all under :class:`agentrunner_host.errors.HostError`)::

    StoreError
    ├── InvalidValueError        a value the store refuses (not JSON, NaN, bad key ...)
    ├── ValueTooLargeError       a state value, storage value or artifact is over its limit
    ├── StateVersionConflict     compare-and-set found another version
    ├── ArtifactUnavailableError the artifact is unknown, expired, or its bytes are gone
    ├── RunExistsError           ``runs.start`` of a run id that is already stored
    └── RunStateError            ``runs.finish`` of an unknown or already finished run
"""

from __future__ import annotations

from agentrunner_host.errors import HostError

__all__ = [
    "ArtifactUnavailableError",
    "DuplicateEventStoredError",
    "InvalidValueError",
    "RunExistsError",
    "RunStateError",
    "StateVersionConflict",
    "StoreError",
    "ValueTooLargeError",
]


class StoreError(HostError):
    """Root of the stores' errors."""


class InvalidValueError(StoreError):
    """The store refuses the value or key."""


class ValueTooLargeError(StoreError):
    """A value is over its size limit."""

    def __init__(self, what: str, *, size: int, limit: int) -> None:
        super().__init__(f"{what} is {size} bytes; the limit is {limit} bytes")
        self.size = size
        self.limit = limit


class StateVersionConflict(StoreError):
    """A compare-and-set write found a different version than expected."""

    def __init__(self, key: str, *, expected: int, current: int) -> None:
        super().__init__(f"state key {key!r} is at version {current}, not {expected}")
        self.key = key
        self.expected = expected
        self.current = current


class ArtifactUnavailableError(StoreError):
    """The artifact does not exist, has expired, or its bytes are missing."""


class DuplicateEventStoredError(StoreError):
    """The event id is already stored; nothing was written."""

    def __init__(self, event_id: str) -> None:
        super().__init__(f"event {event_id} is already stored")
        self.event_id = event_id


class RunExistsError(StoreError):
    """A run with this id is already stored."""


class RunStateError(StoreError):
    """The run is unknown or no longer running."""
