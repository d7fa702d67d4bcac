"""Native harness output, normalised: what a CLI-specific parser turns each output line into.

A parser (Claude stream-json, Codex JSONL) is a small stateful object fed one stdout line at a time; it
returns these events, and the driver turns them into results. Keeping the native formats out of the driver
is OFFICIAL_RUNNER_PLUGINS §6.1's rule: native parsing and result assembly are separate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from pydantic import JsonValue

__all__ = [
    "NativeEvent",
    "NativeParser",
    "NativeResult",
    "NativeSession",
    "NativeText",
    "NativeToolCompleted",
    "NativeToolStarted",
    "NativeUnknown",
]


@dataclass(frozen=True, slots=True)
class NativeSession:
    """The CLI named its native session (Claude ``session_id``, Codex ``thread_id``)."""

    session_id: str
    """The id to resume with."""


@dataclass(frozen=True, slots=True)
class NativeText:
    """Assistant text as it arrives (an increment)."""

    text: str
    """New text."""


@dataclass(frozen=True, slots=True)
class NativeToolStarted:
    """The harness started a tool."""

    call_id: str
    """Native call id."""
    name: str
    """Tool name as the harness knows it."""
    parameters: dict[str, JsonValue] = field(default_factory=dict[str, JsonValue])
    """Arguments."""


@dataclass(frozen=True, slots=True)
class NativeToolCompleted:
    """A tool of the harness ended."""

    call_id: str
    """Native call id."""
    name: str
    """Tool name."""
    preview: str | None = None
    """Start of the result text."""
    error: str | None = None
    """Error text when it failed."""


@dataclass(frozen=True, slots=True)
class NativeUnknown:
    """A line the parser does not know (kept in the native log; counted in the run's metadata)."""

    kind: str
    """Its ``type`` (or ``invalid`` for a line that is not JSON)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeResult:
    """The end of the harness's turn."""

    text: str | None = None
    """The final reply (``None``: use the streamed text)."""
    is_error: bool = False
    """The harness reports failure."""
    error_kind: Literal["cli_error", "turn_failed"] = "cli_error"
    """Failure code suffix when ``is_error`` (``cli_error``, ``turn_failed``)."""
    error_message: str | None = None
    """What it said about the failure."""
    usage: dict[str, JsonValue] = field(default_factory=dict[str, JsonValue])
    """Normalised usage: ``input_tokens``, ``output_tokens``, ``total_tokens`` and extras."""
    metadata: dict[str, JsonValue] = field(default_factory=dict[str, JsonValue])
    """``num_turns``, ``cost_usd``, ``permission_denials``, ``subtype`` ..."""
    finish_reason: str = "stop"
    """Run finish reason."""


NativeEvent = (
    NativeSession | NativeText | NativeToolStarted | NativeToolCompleted | NativeUnknown | NativeResult
)
"""What one output line can mean."""


class NativeParser(Protocol):
    """Turns a CLI's stdout into :data:`NativeEvent` s."""

    def feed(self, line: bytes) -> list[NativeEvent]:
        """Events of one stdout line."""
        ...

    def finish(self) -> list[NativeEvent]:
        """Events once stdout ended (e.g. a final result assembled from the whole output)."""
        ...
