"""What one run is while it executes: its frozen inputs, its counters and buffers, and how it ended.

The orchestrator drives a :class:`RunState`, the per-result rules (:mod:`agentrunner_host.result_rules`)
update it, and persistence (:mod:`agentrunner_host.persistence`) turns it into stored facts. It lives in its
own module so that all three can import it without importing each other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

from agentrunner import AgentRunResult, ArtifactRef, MessageDeltaResult, RunFailedResult
from agentrunner.codec import JsonObject

from agentrunner_host.definitions import AgentBinding, AgentEventEnvelope
from agentrunner_host.stores import ResultLog, ResultRecord, RunStart, StateWrite

from .authorization import AuthorizationSnapshot
from .context_builder import HistoryHandles
from .dispatcher import LiveRun
from .redaction import StreamMasker
from .registry import RunnerDescriptor

__all__ = [
    "WARNINGS_PER_KIND",
    "AssistantTurn",
    "DeliveredResult",
    "Failure",
    "HostRecord",
    "RunOutcome",
    "RunState",
]

log = logging.getLogger("agentrunner.host.orchestrator")

WARNINGS_PER_KIND: Final = 5
"""Warnings of one kind logged and recorded per run; the rest are counted in one summary record."""

Failure = tuple[str, str, bool]
"""How the host ends a run that has no terminal result of its own: ``(code, message, retryable)``."""


@dataclass(frozen=True, slots=True)
class DeliveredResult:
    """A result as the host delivers it: the runner's result plus the host's own per-run sequence."""

    host_seq: int
    """1-based, gap-free per run; the replay cursor."""
    result: AgentRunResult
    """The validated result (the runner's ``sequence`` kept as sent)."""
    encoded: bytes | None = None
    """Its JSON exactly as stored (readers send these bytes on instead of encoding the result again)."""


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a run ended."""

    run_id: str
    status: Literal["completed", "failed"]
    """``completed`` or ``failed``."""
    code: str | None
    """Failure code (``cancelled``, ``deadline_exceeded``, ``runner.error``...)."""
    message: str | None
    """Failure message."""
    results: int
    """Results delivered, the terminal one included."""


@dataclass(frozen=True, slots=True)
class AssistantTurn:
    """An assistant message of the run, as the transcript will store it."""

    text: str
    """Its plain text."""
    message: JsonObject
    """The message as JSON (``contents``, ``artifacts``, ``metadata``)."""


@dataclass(frozen=True, slots=True)
class HostRecord:
    """A host record of the run (a tool call, a refused result, a warning...), stored with the run's end."""

    event_type: str
    """Record type (``tool.call.started``, ``violation.state_rejected``...)."""
    data: JsonObject
    """Its JSON data."""


# Typed factories for RunState's containers: calling a generic alias (``list[str]()``) costs a failed
# ``__orig_class__`` assignment (an AttributeError raised and caught) per call, eight times per run.


def _no_text() -> list[str]:
    return []


def _no_tool_calls() -> dict[str, str]:
    return {}


def _no_harness_tools() -> dict[str, tuple[float, str, str | None]]:
    return {}


def _no_artifacts() -> dict[str, ArtifactRef]:
    return {}


def _no_turns() -> list[AssistantTurn]:
    return []


def _no_records() -> list[HostRecord]:
    return []


def _no_counts() -> dict[str, int]:
    return {}


def _no_state() -> dict[str, JsonObject]:
    return {}


@dataclass(slots=True)
class RunState:
    """One run's inputs and everything the host learned while running it."""

    run_id: str
    binding: AgentBinding
    descriptor: RunnerDescriptor
    snapshot: AuthorizationSnapshot
    event: AgentEventEnvelope
    live: LiveRun | None = None
    """The run's registration with the dispatcher, while it accepts back-calls."""
    host_seq: int = 0
    """Results accepted so far (the host's per-run sequence of the last one)."""
    last_runner_seq: int = 0
    terminal: AgentRunResult | None = None
    has_message: bool = False
    has_output: bool = False
    delta_buffer: list[str] = field(default_factory=_no_text)
    delta_chars: int = 0
    """Characters in ``delta_buffer``: streamed text kept for the transcript is capped (one result's size)."""
    delta_truncated: bool = False
    stream_mask: StreamMasker | None = None
    """The run's window over streamed text (``redaction.StreamMasker``), when the host knows secrets."""
    last_delta: MessageDeltaResult | None = None
    """The latest delta delivered (a held-back tail is released as a copy of it)."""
    open_tool_calls: dict[str, str] = field(default_factory=_no_tool_calls)
    harness_tools: dict[str, tuple[float, str, str | None]] = field(default_factory=_no_harness_tools)
    """Tools a code-executing runner's CLI started and has not ended: call id → (start time, name, detail)."""
    artifact_ids: dict[str, ArtifactRef] = field(default_factory=_no_artifacts)
    log: ResultLog[ResultRecord, StateWrite, RunStart] | None = None
    """The run's result log (``stores.runs.log``): results go to the store as they come, not at the end."""
    output_bytes: int = 0
    """Encoded bytes of every result received so far (capped by ``run_policy.max_output_bytes``)."""
    side_write: StateWrite | None = None
    """The state update the result being accepted carries, committed with it."""
    transcript: list[AssistantTurn] = field(default_factory=_no_turns)
    host_events: list[HostRecord] = field(default_factory=_no_records)
    warnings: int = 0
    warning_counts: dict[str, int] = field(default_factory=_no_counts)
    """Warnings by kind; past :data:`WARNINGS_PER_KIND` they are only counted."""
    results_seen: int = 0
    start_persisted: bool = False
    """The run's start record is committed (a run cancelled before that must write it at its end)."""
    state_snapshot: dict[str, JsonObject] = field(default_factory=_no_state)
    """Host state inlined into the context (read before the run's start is written)."""
    history: HistoryHandles = field(default_factory=HistoryHandles)
    """History handles as they stood before this run's user turn."""
    leave_session: Callable[[], None] | None = None
    """Gives up the run's turn on its native session (idempotent); set while the run takes part in one."""

    def record(self, kind: str, data: JsonObject) -> None:
        """Keep a host record of the run (stored with its end)."""
        self.host_events.append(HostRecord(kind, data))

    def assistant_turn(self, text: str, message: JsonObject) -> None:
        """Keep an assistant message for the transcript."""
        self.transcript.append(AssistantTurn(text, message))

    def clear_deltas(self) -> None:
        """Forget the streamed text (a complete message replaces it)."""
        self.delta_buffer.clear()
        self.delta_chars = 0
        self.delta_truncated = False

    def warn(self, kind: str, message: str) -> None:
        """Log and record a warning about the runner's behaviour (the first few of each kind)."""
        self.warnings += 1
        seen = self.warning_counts.get(kind, 0) + 1
        self.warning_counts[kind] = seen
        # A runner repeating one violation must not flood the log or the event log: the first few of each kind
        # are logged and recorded, the rest are counted and summarised once at the run's end.
        if seen <= WARNINGS_PER_KIND:
            log.warning("run %s (%s): %s", self.run_id, self.descriptor.runner_id, message)
            self.record(kind, {"message": message})

    def summarise_warnings(self) -> None:
        """One record per kind of warning that passed :data:`WARNINGS_PER_KIND`."""
        for kind, seen in self.warning_counts.items():
            if seen > WARNINGS_PER_KIND:
                dropped = seen - WARNINGS_PER_KIND
                log.warning(
                    "run %s (%s): %d more %s warnings not logged",
                    self.run_id,
                    self.descriptor.runner_id,
                    dropped,
                    kind,
                )
                self.record(kind, {"message": f"{dropped} more like this", "suppressed": dropped})

    def outcome(self) -> RunOutcome:
        """How the run ended (``completed`` unless its terminal result is a failure)."""
        terminal = self.terminal
        if isinstance(terminal, RunFailedResult):
            return RunOutcome(self.run_id, "failed", terminal.data.code, terminal.data.message, self.host_seq)
        return RunOutcome(self.run_id, "completed", None, None, self.host_seq)
