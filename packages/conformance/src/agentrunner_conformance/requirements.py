"""The requirements manifest: every rule the kit checks, with its level, spec section and capability gate.

A check names the requirement it enforces with :func:`check`; an unknown id raises
:class:`UnknownRequirementError` when the checking module is imported, so a typo can never become a rule
that silently checks nothing. The set is frozen per protocol major version (:data:`PROTOCOL`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal, TypeVar

from agentrunner import AgentRunnerCapabilities

from .errors import UnknownRequirementError

__all__ = [
    "CHECKS",
    "PROTOCOL",
    "REQUIREMENTS",
    "Gate",
    "Level",
    "Requirement",
    "check",
    "requirement",
]

PROTOCOL: Final = "1"
"""The protocol major version these requirements are written against."""

Level = Literal["MUST", "SHOULD", "MAY"]
"""RFC 2119 level."""

CapabilityName = Literal[
    "streaming",
    "tool_calling",
    "knowledge_retrieval",
    "multimodal_input",
    "platform_api",
    "interrupt",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Gate:
    """When a requirement applies: only when the runner declares (or does not declare) a capability."""

    capability: CapabilityName
    """Capability flag of the manifest."""
    declared: bool = True
    """``True``: applies to runners that declare it; ``False``: applies to runners that do not."""

    def applies(self, capabilities: AgentRunnerCapabilities) -> bool:
        """Whether the requirement applies to a runner with these capabilities."""
        return bool(getattr(capabilities, self.capability)) is self.declared

    def describe(self) -> str:
        """``streaming`` or ``not streaming``."""
        return self.capability if self.declared else f"not {self.capability}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Requirement:
    """One rule of Protocol v1 as the kit checks it."""

    id: str
    """Stable id ``<area>.<subject>.<rule>``."""
    level: Level
    """RFC 2119 level."""
    section: str
    """Where the rule comes from: ``protocol: results`` (a topic of docs/protocol.md) or ``AgentRunner contract``."""
    summary: str
    """The rule in one sentence."""
    gate: Gate | None = None
    """Capability gate; ``None`` applies to every runner."""


def _req(
    id: str, level: Level, section: str, summary: str, *, gate: Gate | None = None
) -> tuple[str, Requirement]:
    return id, Requirement(id=id, level=level, section=section, summary=summary, gate=gate)


_CONTRACT = "AgentRunner contract (runner.py)"

REQUIREMENTS: Final[dict[str, Requirement]] = dict(
    [
        # discovery
        _req(
            "manifest.protocol-version",
            "MUST",
            "protocol: versions, discovery",
            "The manifest declares a protocol version this host major version accepts.",
        ),
        # the result stream
        _req(
            "result.schema.valid",
            "MUST",
            "protocol: results",
            "Every result validates against the schema of its type.",
        ),
        _req(
            "result.type.known",
            "SHOULD",
            "protocol: versions, results",
            "Results use the nine stable result types (hosts ignore others).",
        ),
        _req(
            "result.run-id.matches",
            "MUST",
            "protocol: results",
            "Every result carries the run_id of the run that produced it.",
        ),
        _req(
            "result.sequence.strictly-increasing",
            "MUST",
            "protocol: results",
            "When results carry a sequence it starts at 1 and strictly increases.",
        ),
        _req(
            "result.terminal.exactly-one",
            "MUST",
            "protocol: results; " + _CONTRACT,
            "A run yields exactly one terminal result (run.completed or run.failed).",
        ),
        _req(
            "result.terminal.last",
            "MUST",
            _CONTRACT,
            "Nothing but the terminal result follows the terminal result.",
        ),
        _req(
            "result.output.present",
            "MUST",
            _CONTRACT,
            "A run that ends with run.completed produced a non-empty message (text or other content); "
            "otherwise it ends with run.failed.",
        ),
        _req(
            "result.tool-calls.paired",
            "MUST",
            "protocol: results",
            "Every tool.call.started has exactly one later tool.call.completed with the same id, and no other.",
        ),
        _req(
            "result.state-updated.valid",
            "MUST",
            "protocol: results",
            "state.updated values are JSON and at most 256 KiB encoded.",
        ),
        _req(
            "result.action.idempotency-key",
            "MUST",
            "protocol: results",
            "Every action.requested carries a stable idempotency_key.",
            gate=Gate(capability="platform_api"),
        ),
        # run behaviour
        _req(
            "run.no-unhandled-exception",
            "MUST",
            _CONTRACT,
            "run() ends by yielding its terminal result, never by raising (text input, every event kind).",
        ),
        _req(
            "backcall.errors-handled",
            "MUST",
            "protocol: errors; " + _CONTRACT,
            "An APIError from a back-call is handled or turned into run.failed; it never escapes run().",
        ),
        _req(
            "backcall.errors-reported",
            "MUST",
            "protocol: errors; " + _CONTRACT,
            "A run whose back-call failed reports it honestly: run.failed or a real message, never an empty success.",
        ),
        _req(
            "backcall.authorized",
            "MUST",
            "protocol: back-calls, security",
            "Back-calls reach only resources in ctx.resources and APIs enabled in ctx.context.available_apis.",
        ),
        _req(
            "backcall.params-valid",
            "MUST",
            "protocol: back-calls",
            "Back-call parameters validate against the action's schema.",
        ),
        _req(
            "backcall.only-while-live",
            "MUST",
            "protocol: back-calls, deadlines and cancellation",
            "No back-call is made after the run's terminal result or after run() returned.",
        ),
        _req(
            "cancel.stops-within-grace",
            "MUST",
            "protocol: deadlines and cancellation; " + _CONTRACT,
            "A cancelled run stops within the grace period.",
            gate=Gate(capability="interrupt"),
        ),
        _req(
            "cancel.reports-cancelled",
            "SHOULD",
            "protocol: deadlines and cancellation",
            "A terminal result yielded after a cancel is run.failed with code 'cancelled'.",
            gate=Gate(capability="interrupt"),
        ),
        _req(
            "deadline.run-ends",
            "MUST",
            "protocol: deadlines and cancellation",
            "Once ctx.runtime.deadline_at has passed, the run ends within the grace period.",
        ),
        _req(
            "isolation.concurrent-runs",
            "MUST",
            "protocol: concurrency",
            "Concurrent runs on one instance never see each other's data.",
        ),
        _req(
            "isolation.no-instance-state",
            "MUST",
            _CONTRACT,
            "A runner keeps no state on its instance: runs change no attribute and do not depend on earlier runs.",
        ),
        # capability honesty
        _req(
            "capability.streaming.undeclared-deltas",
            "MUST",
            "protocol: capabilities",
            "A runner that does not declare streaming emits no message.delta.",
            gate=Gate(capability="streaming", declared=False),
        ),
        _req(
            "capability.streaming.deltas-match-message",
            "SHOULD",
            "protocol: results",
            "The deltas before a complete message add up to that message's text.",
            gate=Gate(capability="streaming"),
        ),
        _req(
            "capability.platform-api.undeclared-actions",
            "MUST",
            "protocol: capabilities",
            "A runner that does not declare platform_api emits no action.requested and calls no platform API.",
            gate=Gate(capability="platform_api", declared=False),
        ),
        _req(
            "capability.tool-calling.undeclared-calls",
            "MUST",
            "protocol: capabilities",
            "A runner that does not declare tool_calling calls no tools.* API.",
            gate=Gate(capability="tool_calling", declared=False),
        ),
        _req(
            "capability.tool-calling.survives-absence",
            "SHOULD",
            "protocol: capabilities, resources",
            "A tool-calling runner handles runs with and without granted tools without raising.",
            gate=Gate(capability="tool_calling"),
        ),
        _req(
            "capability.knowledge-retrieval.undeclared-calls",
            "MUST",
            "protocol: capabilities",
            "A runner that does not declare knowledge_retrieval calls no knowledge.* API.",
            gate=Gate(capability="knowledge_retrieval", declared=False),
        ),
        _req(
            "capability.knowledge-retrieval.survives-absence",
            "SHOULD",
            "protocol: capabilities, resources",
            "A knowledge-retrieval runner handles runs with and without knowledge bases without raising.",
            gate=Gate(capability="knowledge_retrieval"),
        ),
        _req(
            "capability.multimodal-input.no-crash",
            "MUST",
            "protocol: capabilities, run context (input)",
            "A multimodal runner handles images, files, audio and artifact refs without raising.",
            gate=Gate(capability="multimodal_input"),
        ),
    ]
)
"""Every requirement of Protocol v1 the kit checks, by id."""

CHECKS: Final[dict[str, list[Callable[..., object]]]] = {}
"""The functions that enforce each requirement id (filled by :func:`check` at import)."""

_F = TypeVar("_F", bound=Callable[..., object])


def requirement(requirement_id: str) -> Requirement:
    """The requirement with this id; raises :class:`UnknownRequirementError` for an unknown one."""
    try:
        return REQUIREMENTS[requirement_id]
    except KeyError:
        raise UnknownRequirementError(requirement_id) from None


def check(*requirement_ids: str) -> Callable[[_F], _F]:
    """Mark a function as enforcing *requirement_ids*; unknown ids fail when the module is imported."""
    for requirement_id in requirement_ids:
        requirement(requirement_id)

    def register(func: _F) -> _F:
        for requirement_id in requirement_ids:
            CHECKS.setdefault(requirement_id, []).append(func)
        return func

    return register
