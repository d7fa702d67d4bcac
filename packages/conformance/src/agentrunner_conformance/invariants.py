"""The invariants: functions that judge run records, each tied to the requirement ids it enforces.

Per-run invariants take one :class:`~agentrunner_conformance.execution.RunRecord` and the runner's manifest;
group invariants take several records (concurrent runs, or the same input in two orders). Each returns the
:class:`Violation` it found. :func:`evaluate_run` applies every per-run invariant whose capability gate
applies to the runner.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from agentrunner import (
    MAX_STATE_VALUE_BYTES,
    AgentRunnerManifest,
    APIError,
    AssistantMessage,
    MessageCompletedResult,
    MessageDeltaResult,
    RunCompletedResult,
    RunFailedResult,
    StateUpdatedResult,
    TextContent,
    ToolCallCompletedResult,
    ToolCallStartedResult,
    UnknownResult,
    codec,
    is_compatible_protocol,
)
from agentrunner.results import ActionRequestedResult

from .execution import RunRecord
from .requirements import REQUIREMENTS, check

__all__ = [
    "RUN_INVARIANTS",
    "Violation",
    "check_equivalent_outputs",
    "check_instance_unchanged",
    "check_manifest",
    "check_no_cross_run_leak",
    "evaluate_run",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Violation:
    """A requirement broken by an observed run."""

    requirement_id: str
    """The requirement."""
    message: str
    """What was observed."""


RunInvariant = Callable[[RunRecord, AgentRunnerManifest], Iterator[Violation]]

RUN_INVARIANTS: list[RunInvariant] = []
"""Every per-run invariant, in evaluation order."""


def _run_invariant(*requirement_ids: str) -> Callable[[RunInvariant], RunInvariant]:
    mark = check(*requirement_ids)

    def register(func: RunInvariant) -> RunInvariant:
        RUN_INVARIANTS.append(mark(func))
        return func

    return register


def _v(requirement_id: str, message: str) -> Violation:
    return Violation(requirement_id=requirement_id, message=message)


def _terminal_indexes(record: RunRecord) -> list[int]:
    return [r.index for r in record.results if r.is_terminal]


# the result stream -----------------------------------------------------------------------------------------


@_run_invariant("result.schema.valid")
def _schema(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    for r in record.results:
        if r.problem is not None:
            yield _v(
                "result.schema.valid", f"result #{r.index} ({r.type or 'no type'}) is invalid: {r.problem}"
            )
            return


@_run_invariant("result.type.known")
def _known_types(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    for r in record.results:
        if isinstance(r.parsed, UnknownResult):
            yield _v("result.type.known", f"result #{r.index} has unknown type {r.parsed.type!r}")
            return


@_run_invariant("result.run-id.matches")
def _run_id(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    for r in record.results:
        run_id = r.raw.get("run_id") if r.raw is not None else None
        if r.raw is not None and run_id != record.ctx.run_id:
            yield _v(
                "result.run-id.matches", f"result #{r.index} has run_id {run_id!r}, not {record.ctx.run_id!r}"
            )
            return


@_run_invariant("result.sequence.strictly-increasing")
def _sequence(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    previous: int | None = None
    for r in record.results:
        sequence = r.raw.get("sequence") if r.raw is not None else None
        if not isinstance(sequence, int) or isinstance(sequence, bool):
            continue
        if previous is None and sequence != 1:
            yield _v("result.sequence.strictly-increasing", f"the first sequence is {sequence}, not 1")
            return
        if previous is not None and sequence <= previous:
            yield _v("result.sequence.strictly-increasing", f"sequence {sequence} follows {previous}")
            return
        previous = sequence


@_run_invariant("result.terminal.exactly-one")
def _exactly_one_terminal(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    if record.ending == "abandoned" and record.cancelled_at is None and record.deadline_overrun is None:
        yield _v("result.terminal.exactly-one", f"run() never ended (abandoned); {record.describe()}")
        return
    if record.ending != "returned":
        return  # a raised or cancelled run is ended by the host; other requirements judge it
    terminals = _terminal_indexes(record)
    if len(terminals) != 1:
        yield _v("result.terminal.exactly-one", f"{len(terminals)} terminal results; {record.describe()}")


@_run_invariant("result.terminal.last")
def _terminal_last(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    terminals = _terminal_indexes(record)
    if not terminals:
        return
    for r in record.results[terminals[0] + 1 :]:
        if not r.is_terminal:
            yield _v(
                "result.terminal.last", f"{r.type or 'an item'} (#{r.index}) follows the terminal result"
            )
            return


def _said_something(message: AssistantMessage | None) -> bool:
    """A message with text, or with content that is not text (an image, a file, an artifact)."""
    if message is None:
        return False
    if message.text() or message.artifacts:
        return True
    return any(not isinstance(c, TextContent) for c in message.contents)


@_run_invariant("result.output.present", "backcall.errors-reported")
def _output_present(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    terminals = _terminal_indexes(record)
    if record.ending != "returned" or len(terminals) != 1:
        return
    terminal = record.results[terminals[0]].parsed
    if not isinstance(terminal, RunCompletedResult) or _said_something(terminal.data.message):
        return
    for r in record.results:
        if isinstance(r.parsed, MessageCompletedResult) and _said_something(r.parsed.data.message):
            return
        if isinstance(r.parsed, MessageDeltaResult) and r.parsed.data.chunk.content:
            return
    failed = [c for c in record.calls if c.outcome not in {"ok", "pending", "cancelled"}]
    if failed:
        # The more specific rule: the empty success hides a refused or failed back-call.
        yield _v(
            "backcall.errors-reported",
            f"run.completed with an empty message after {failed[0].action} failed with {failed[0].outcome}: "
            "report it (run.failed) or answer with a real message",
        )
        return
    yield _v(
        "result.output.present",
        "run.completed with no message or an empty one: a run that produced nothing must end with run.failed",
    )


@_run_invariant("result.tool-calls.paired")
def _tool_calls_paired(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    open_calls: dict[str, str] = {}
    seen: set[str] = set()
    for r in record.results:
        if isinstance(r.parsed, ToolCallStartedResult):
            call_id = r.parsed.data.tool_call_id
            if call_id in seen:
                yield _v("result.tool-calls.paired", f"tool call {call_id!r} started twice")
                return
            seen.add(call_id)
            open_calls[call_id] = r.parsed.data.tool_name
        elif isinstance(r.parsed, ToolCallCompletedResult):
            call_id = r.parsed.data.tool_call_id
            if call_id not in open_calls:
                yield _v("result.tool-calls.paired", f"tool call {call_id!r} completed without being started")
                return
            del open_calls[call_id]
    if open_calls and record.ending == "returned":
        yield _v("result.tool-calls.paired", f"tool call(s) {sorted(open_calls)} never completed")


@_run_invariant("result.state-updated.valid")
def _state_updates(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    for r in record.results:
        if isinstance(r.parsed, StateUpdatedResult):
            try:
                size = codec.json_size(r.parsed.data.value)
            except TypeError:
                yield _v(
                    "result.state-updated.valid", f"state.updated {r.parsed.data.key!r}: value is not JSON"
                )
                return
            if size > MAX_STATE_VALUE_BYTES:
                yield _v(
                    "result.state-updated.valid",
                    f"state.updated {r.parsed.data.key!r}: value is {size} bytes, over {MAX_STATE_VALUE_BYTES}",
                )
                return


@_run_invariant("result.action.idempotency-key", "capability.platform-api.undeclared-actions")
def _actions(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    declared = manifest.capabilities.platform_api
    for r in record.results:
        if isinstance(r.parsed, ActionRequestedResult):
            if not declared:
                yield _v(
                    "capability.platform-api.undeclared-actions", f"action.requested {r.parsed.data.action!r}"
                )
                return
            if not r.parsed.data.idempotency_key:
                yield _v(
                    "result.action.idempotency-key", f"action.requested {r.parsed.data.action!r} has no key"
                )
                return
    if not declared:
        for call in record.calls:
            if call.action.startswith("platform."):
                yield _v("capability.platform-api.undeclared-actions", f"back-call {call.action}")
                return


# streaming -------------------------------------------------------------------------------------------------


@_run_invariant("capability.streaming.undeclared-deltas")
def _undeclared_deltas(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    for r in record.results:
        if r.type == "message.delta":
            yield _v(
                "capability.streaming.undeclared-deltas", f"message.delta (#{r.index}) without streaming"
            )
            return


@_run_invariant("capability.streaming.deltas-match-message")
def _deltas_match(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    pending: list[str] = []
    for r in record.results:
        parsed = r.parsed
        if isinstance(parsed, MessageDeltaResult):
            pending.append(parsed.data.chunk.content or "")
            continue
        message = None
        if isinstance(parsed, MessageCompletedResult | RunCompletedResult):
            message = parsed.data.message
        if message is None:
            if r.is_terminal:
                pending = []  # deltas of a run that failed (or completed without a message) have no message
            continue
        if pending and "".join(pending) != message.text():
            yield _v(
                "capability.streaming.deltas-match-message",
                f"deltas {''.join(pending)!r} do not add up to the message {message.text()!r}",
            )
            return
        pending = []


# back-calls ------------------------------------------------------------------------------------------------


@_run_invariant(
    "run.no-unhandled-exception",
    "backcall.errors-handled",
    "capability.multimodal-input.no-crash",
    "capability.tool-calling.survives-absence",
    "capability.knowledge-retrieval.survives-absence",
)
def _no_crash(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    exc = record.exception
    if exc is None:
        return
    if isinstance(exc, APIError):
        yield _v("backcall.errors-handled", f"run() raised {exc!r} from a back-call")
    else:
        yield _v(record.crash_requirement, f"run() raised {type(exc).__name__}: {exc}")


@_run_invariant("backcall.authorized")
def _authorized(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    for call in record.calls:
        if call.violation is not None:
            yield _v("backcall.authorized", f"{call.action}: {call.violation}")
            return


@_run_invariant("backcall.params-valid")
def _params_valid(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    for call in record.calls:
        if call.invalid_params is not None:
            yield _v("backcall.params-valid", f"{call.action}: {call.invalid_params}")
            return


@_run_invariant("backcall.only-while-live")
def _only_while_live(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    for call in record.calls:
        if call.late:
            yield _v("backcall.only-while-live", f"{call.action} was called after the run ended")
            return


@_run_invariant("capability.tool-calling.undeclared-calls", "capability.knowledge-retrieval.undeclared-calls")
def _undeclared_calls(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    caps = manifest.capabilities
    for call in record.calls:
        if call.action.startswith("tools.") and not caps.tool_calling:
            yield _v(
                "capability.tool-calling.undeclared-calls", f"back-call {call.action} without tool_calling"
            )
            return
        if call.action.startswith("knowledge.") and not caps.knowledge_retrieval:
            yield _v(
                "capability.knowledge-retrieval.undeclared-calls",
                f"back-call {call.action} without knowledge_retrieval",
            )
            return


# cancellation and deadlines --------------------------------------------------------------------------------


@_run_invariant("cancel.stops-within-grace", "cancel.reports-cancelled")
def _cancel(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    if record.cancelled_at is None:
        return
    if record.stopped_in_grace is False:
        late = sum(1 for r in record.results if r.after_cancel)
        yield _v(
            "cancel.stops-within-grace", f"still running after the grace period ({late} results after cancel)"
        )
    for r in record.results[record.cancelled_at :]:
        if r.is_terminal and not (
            isinstance(r.parsed, RunFailedResult) and r.parsed.data.code == "cancelled"
        ):
            yield _v("cancel.reports-cancelled", f"after the cancel the run ended with {r.type}")
            return


@_run_invariant("deadline.run-ends")
def _deadline(record: RunRecord, manifest: AgentRunnerManifest) -> Iterator[Violation]:
    if record.deadline_overrun is not None:
        yield _v("deadline.run-ends", f"still running {record.deadline_overrun:g}s after deadline_at passed")


def evaluate_run(record: RunRecord, manifest: AgentRunnerManifest) -> list[Violation]:
    """Every per-run invariant violation of *record* whose requirement applies to *manifest*."""
    found: list[Violation] = []
    for invariant in RUN_INVARIANTS:
        for violation in invariant(record, manifest):
            gate = REQUIREMENTS[violation.requirement_id].gate
            if gate is None or gate.applies(manifest.capabilities):
                found.append(violation)
    return found


# static and group invariants -------------------------------------------------------------------------------


@check("manifest.protocol-version")
def check_manifest(manifest: AgentRunnerManifest) -> list[Violation]:
    """The manifest's static requirements."""
    if is_compatible_protocol(manifest.protocol_version):
        return []
    return [_v("manifest.protocol-version", f"protocol_version {manifest.protocol_version!r} is not v1")]


@check("isolation.concurrent-runs")
def check_no_cross_run_leak(records: Sequence[RunRecord]) -> list[Violation]:
    """No run's output contains the marker of another run that ran concurrently with it."""
    for record in records:
        text = record.output_text()
        for other in records:
            if other is not record and other.marker and other.marker in text:
                return [
                    _v(
                        "isolation.concurrent-runs",
                        f"run {record.ctx.run_id} output contains data of run {other.ctx.run_id} ({other.marker})",
                    )
                ]
    return []


def _signature(record: RunRecord) -> list[str]:
    """What a run said, without ids, timestamps and sequences."""
    out: list[str] = [record.ending]
    for r in record.results:
        parsed = r.parsed
        if isinstance(parsed, MessageDeltaResult):
            out.append(f"delta:{parsed.data.chunk.content}")
        elif isinstance(parsed, MessageCompletedResult):
            out.append(f"message:{parsed.data.message.text()}")
        elif isinstance(parsed, RunCompletedResult):
            out.append(f"completed:{parsed.data.message.text() if parsed.data.message else ''}")
        elif isinstance(parsed, RunFailedResult):
            out.append(f"failed:{parsed.data.code}")
        else:
            out.append(r.type or "?")
    return out


@check("isolation.no-instance-state")
def check_equivalent_outputs(fresh: RunRecord, contaminated: RunRecord) -> list[Violation]:
    """The same context gives the same output on a fresh instance and on one that ran before."""
    first, second = _signature(fresh), _signature(contaminated)
    if first == second:
        return []
    return [
        _v(
            "isolation.no-instance-state",
            f"the same input gave {first} on a fresh instance but {second} after an earlier run",
        )
    ]


@check("isolation.no-instance-state")
def check_instance_unchanged(before: dict[str, str], after: dict[str, str]) -> list[Violation]:
    """Running changed no attribute of the runner instance."""
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if not changed:
        return []
    return [_v("isolation.no-instance-state", f"runs changed instance attribute(s) {changed}")]
