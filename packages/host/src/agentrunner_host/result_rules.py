"""The per-result rules: how the host validates each result a runner sends and applies it to the run's state.

:meth:`ResultRules.accept` takes one raw result (a wire dict or an in-process model) and either refuses it
(a warning record, the run goes on), ends the run (:class:`RunViolation`), or returns it as delivered, numbered
with the host's own sequence and handed to the run's result log. The table of outcomes is in
docs/architecture.md ("Results: what the host checks").
"""

from __future__ import annotations

import base64
import binascii
import re
import time
from collections.abc import Awaitable
from typing import Final, TypeAlias, cast

from agentrunner import (
    MAX_STATE_VALUE_BYTES,
    TERMINAL_RESULT_TYPES,
    ActionRequestedResult,
    AgentRunResult,
    ArtifactCreatedResult,
    ArtifactRef,
    AssistantMessage,
    MessageCompletedResult,
    MessageDeltaResult,
    RunCompletedResult,
    RunFailedData,
    RunFailedResult,
    StateUpdatedResult,
    ToolCallCompletedResult,
    ToolCallStartedResult,
    UnknownResult,
    parse_result,
)
from agentrunner import codec as json
from agentrunner.codec import JsonObject
from agentrunner.results import AgentRunResultBase
from pydantic import ValidationError

from agentrunner_host.runtime.connection import RawResult
from agentrunner_host.stores import ResultRecord, StateWrite

from .harness_audit import harness_tool_completed, harness_tool_started
from .persistence import store_runner_artifact
from .ports import RunStores
from .redaction import ResultRedactor
from .run_state import DeliveredResult, RunState

__all__ = ["MAX_INLINE_ARTIFACT", "Accepted", "ResultRules", "RunViolation", "host_failure", "store_result"]

Accepted: TypeAlias = DeliveredResult | Awaitable[DeliveredResult | None] | None
"""What :meth:`ResultRules.accept` answers: the delivered result, ``None`` (dropped), or, for an inline artifact
the host stores first, an awaitable of one of those."""

_STATE_KEY: Final = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:\-/]{0,199}$")
_PLAIN_RESULTS: Final[frozenset[type[AgentRunResultBase]]] = frozenset(
    {
        MessageDeltaResult,
        MessageCompletedResult,
        ToolCallStartedResult,
        ToolCallCompletedResult,
        StateUpdatedResult,
        ActionRequestedResult,
        RunCompletedResult,
        RunFailedResult,
    }
)
"""The result classes that are neither unknown nor an artifact: a result of exactly one of them answers
``accept``'s class checks with a set look-up. An isinstance miss on a model class goes through its ABC
metaclass's ``__instancecheck__`` (~60 ns), and every result took two of them."""
MAX_INLINE_ARTIFACT: Final = 1024 * 1024
"""Largest artifact a runner may send inline (base64 in ``artifact.created``), in bytes."""


class RunViolation(Exception):
    """A protocol violation that ends the run."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def host_failure(state: RunState, code: str, message: str, *, retryable: bool = False) -> RunFailedResult:
    """The ``run.failed`` the host itself sends for the run."""
    return RunFailedResult(
        run_id=state.run_id,
        timestamp=time.time_ns() // 1_000_000,
        data=RunFailedData(code=code, message=message, retryable=retryable),
        metadata={"origin": "host"},
    )


def store_result(
    state: RunState,
    runner_sequence: int | None,
    kind: str,
    payload: JsonObject | bytes,
    *,
    size: int | None = None,
) -> None:
    """Hand the result numbered ``state.host_seq`` to the run's log (committed by the store's journal)."""
    if state.log is None:
        return
    record = ResultRecord(
        run_id=state.run_id,
        host_seq=state.host_seq,
        runner_sequence=runner_sequence,
        type=kind,
        payload=payload,
        created_at=time.time_ns() // 1_000_000,
    )
    if size is None:
        size = len(payload) if isinstance(payload, bytes) else json.json_size(payload)
    side, state.side_write = state.side_write, None
    state.log.append(state.host_seq, record, size=size, side=side)


def _is_delta(raw: object) -> bool:
    """Whether a raw result (a dict out of process, a model in process) is a ``message.delta``."""
    if isinstance(raw, dict):
        return cast(dict[str, object], raw).get("type") == "message.delta"
    return isinstance(raw, MessageDeltaResult)


def _keep_turn(state: RunState, message: AssistantMessage) -> None:
    """Keep an assistant message for the transcript: only a run in a conversation has one to write it to (see
    persistence.finish_record), so no other run dumps its messages for it."""
    if state.event.conversation_id is not None:
        state.assistant_turn(message.text(), message.model_dump(mode="json"))


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        return f"{loc}: {first['msg']}"
    return str(exc)


class ResultRules:
    """Validates and applies results. One instance per orchestrator; the run's own facts live in its state."""

    def __init__(self, *, stores: RunStores | None = None) -> None:
        self.stores = stores
        self.secret_values: ResultRedactor | None = None
        """Known secret values masked in every result before it is delivered or stored (set by the service)."""

    def accept(self, state: RunState, raw: RawResult) -> Accepted:
        """Check one raw result; ``None`` when it is dropped (a warning is recorded), raises
        :class:`RunViolation` when it ends the run.

        Synchronous for every result but an inline artifact the host stores, for which it returns an awaitable
        of the same answer: the per-result path is the host's hottest, and most results never wait for I/O.
        """
        # Never called after the terminal result: the orchestrator stops reading the runner's stream there.
        state.results_seen += 1
        policy = state.snapshot.run_policy
        if state.results_seen > policy.max_results:
            raise RunViolation(
                "runner.too_many_results", f"the runner sent more than {policy.max_results} results"
            )
        if isinstance(raw, dict):
            # encoded once: these bytes are measured, stored and sent to readers as they are
            payload: JsonObject | bytes = json.dumps(raw)
            size = len(payload)
            if size > policy.max_result_bytes:
                raise RunViolation(
                    "payload_too_large", f"a result of {size} bytes exceeds {policy.max_result_bytes}"
                )
            try:
                parsed = parse_result(raw)
            except (ValidationError, ValueError) as exc:
                raise RunViolation("runner.invalid_result", f"invalid result: {_first_error(exc)}") from None
        else:
            obj: object = raw  # an in-process runner can yield anything at run time
            if type(obj) not in _PLAIN_RESULTS and not isinstance(obj, (AgentRunResultBase, UnknownResult)):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise RunViolation(
                    "runner.invalid_result", f"the runner yielded a {type(obj).__name__}, not a result"
                )
            parsed = raw
            payload = raw.__pydantic_serializer__.to_json(raw)
            # find, not ``in``: on Python 3.11 ``bytes in bytes`` first tries the operand as an int and formats
            # a TypeError to drop, on every result
            if (payload.find(b"NaN") >= 0 or payload.find(b"Infinity") >= 0) and not isinstance(
                raw, StateUpdatedResult
            ):
                # A model built without validation can hold NaN/Infinity, written as bare constants: not JSON.
                where = json.non_finite_path(raw.model_dump())
                if where is not None:
                    raise RunViolation(
                        "runner.invalid_result", f"invalid result: {where}: NaN or Infinity is not JSON"
                    )
            size = len(payload)
            if size > policy.max_result_bytes:
                raise RunViolation(
                    "payload_too_large", f"a result of {size} bytes exceeds {policy.max_result_bytes}"
                )

        if self.secret_values is not None:
            parsed, payload = self.secret_values.scrub(parsed, payload)
            if isinstance(parsed, MessageDeltaResult) and parsed.data.chunk.content:
                parsed, payload = self._mask_stream(state, parsed, payload)
        state.output_bytes += size
        if state.output_bytes > policy.max_output_bytes:
            raise RunViolation(
                "runner.output_too_large",
                f"the runner's results passed {policy.max_output_bytes} bytes in total",
            )
        plain = type(parsed) in _PLAIN_RESULTS
        if not plain and isinstance(parsed, UnknownResult):
            state.warn("result.unknown_type", f"ignored a result of unknown type {parsed.type!r}")
            return None
        result = cast("AgentRunResult", parsed)  # checked just above: not an UnknownResult
        if result.run_id != state.run_id:
            raise RunViolation(
                "runner.protocol_error", f"a result carries another run id ({result.run_id!r})"
            )
        if result.sequence is not None:
            if result.sequence <= state.last_runner_seq:
                state.warn("result.duplicate", f"duplicate sequence {result.sequence}; dropped")
                return None
            if result.sequence != state.last_runner_seq + 1:
                state.warn(
                    "result.sequence_gap",
                    f"sequence jumped from {state.last_runner_seq} to {result.sequence}",
                )
            state.last_runner_seq = result.sequence

        if not plain and isinstance(result, ArtifactCreatedResult) and result.data.content_base64 is not None:
            return self._accept_artifact(state, result, payload, size)
        return self._deliver(state, result, self._apply(state, result), payload, size)

    async def _accept_artifact(
        self, state: RunState, result: ArtifactCreatedResult, payload: JsonObject | bytes, size: int
    ) -> DeliveredResult | None:
        return self._deliver(state, result, await self._artifact(state, result), payload, size)

    @staticmethod
    def _deliver(
        state: RunState,
        result: AgentRunResult,
        delivered: AgentRunResult | None,
        payload: JsonObject | bytes,
        size: int,
    ) -> DeliveredResult | None:
        """Number and log the result the rules let through (*delivered*: *result* itself or what replaced it)."""
        if delivered is None:
            return None
        state.host_seq += 1
        if delivered is result:
            store_result(state, result.sequence, delivered.type, payload, size=size)
        else:
            payload = delivered.__pydantic_serializer__.to_json(delivered)
            store_result(state, result.sequence, delivered.type, payload)
        if delivered.type in TERMINAL_RESULT_TYPES:
            state.terminal = delivered
        return DeliveredResult(state.host_seq, delivered, payload if isinstance(payload, bytes) else None)

    def _mask_stream(
        self, state: RunState, result: MessageDeltaResult, payload: JsonObject | bytes
    ) -> tuple[MessageDeltaResult, JsonObject | bytes]:
        """The delta with its text passed through the run's window (a secret split across deltas is masked:
        a tail that may begin one is held back until the next chunk shows whether it does)."""
        assert self.secret_values is not None
        if state.stream_mask is None:
            state.stream_mask = self.secret_values.stream()
        content = result.data.chunk.content or ""
        shown = state.stream_mask.feed(content)
        if shown != content:
            chunk = result.data.chunk.model_copy(update={"content": shown})
            result = result.model_copy(update={"data": result.data.model_copy(update={"chunk": chunk})})
            payload = result.__pydantic_serializer__.to_json(result)
        state.last_delta = result
        return result, payload

    def release_stream(self, state: RunState, raw: RawResult) -> DeliveredResult | None:
        """Before a result that is not a delta: the held-back tail of the streamed text as one more delta
        (no runner sequence: the host made it); ``None`` when nothing is held."""
        if state.stream_mask is None or not state.stream_mask.holding or _is_delta(raw):
            return None
        held = state.stream_mask.flush()
        last = state.last_delta
        if not held or last is None:
            return None
        chunk = last.data.chunk.model_copy(update={"content": held})
        result = last.model_copy(
            update={"sequence": None, "data": last.data.model_copy(update={"chunk": chunk})}
        )
        if state.delta_chars + len(held) <= state.snapshot.run_policy.max_result_bytes:
            state.delta_buffer.append(held)
            state.delta_chars += len(held)
        state.host_seq += 1
        encoded = result.__pydantic_serializer__.to_json(result)
        store_result(state, None, result.type, encoded)
        return DeliveredResult(state.host_seq, result, encoded)

    def _apply(self, state: RunState, result: AgentRunResult) -> AgentRunResult | None:
        caps = state.snapshot.capabilities
        # The cases in order of how often they come (every run ends with one run.completed): each case passed
        # is an isinstance miss, which an ABC-based model class makes about three times a hit's cost.
        match result:
            case MessageDeltaResult():
                if not caps.streaming:
                    state.warn(
                        "violation.streaming", "message.delta from a runner that does not declare streaming"
                    )
                    return None
                content = result.data.chunk.content
                if content:
                    room = state.snapshot.run_policy.max_result_bytes - state.delta_chars
                    if len(content) > room:
                        content, state.delta_truncated = content[: max(0, room)], True
                    if content:
                        state.delta_buffer.append(content)
                        state.delta_chars += len(content)
                state.has_output = state.has_message = True
                return result
            case MessageCompletedResult():
                message = result.data.message
                if state.artifact_ids and message.artifacts:
                    message = message.model_copy(
                        update={
                            "artifacts": [state.artifact_ids.get(a.artifact_id, a) for a in message.artifacts]
                        }
                    )
                    result = result.model_copy(
                        update={"data": result.data.model_copy(update={"message": message})}
                    )
                state.clear_deltas()
                _keep_turn(state, message)
                state.has_output = state.has_message = True
                return result
            case RunCompletedResult():
                final = result.data.message
                if final is not None:
                    state.clear_deltas()
                    _keep_turn(state, final)
                    state.has_output = state.has_message = True
                needs_message = state.event.event_type == "message.received"
                if (needs_message and not state.has_message) or not (state.has_output or state.has_message):
                    return host_failure(
                        state, "runner.empty_output", "the runner completed without producing any output"
                    )
                return result
            case ToolCallStartedResult():
                state.open_tool_calls[result.data.tool_call_id] = result.data.tool_name
                state.record("tool.call.started", result.data.model_dump(mode="json"))
                harness_tool_started(state, result.data)
                state.has_output = True
                return result
            case ToolCallCompletedResult():
                if state.open_tool_calls.pop(result.data.tool_call_id, None) is None:
                    state.warn(
                        "violation.tool_unpaired",
                        f"tool call {result.data.tool_call_id} completed without start",
                    )
                state.record("tool.call.completed", result.data.model_dump(mode="json"))
                harness_tool_completed(state, result.data)
                return result
            case StateUpdatedResult():
                return self._state_update(state, result)
            case ArtifactCreatedResult():
                # inline content goes through _artifact (awaited by accept's caller); a bare reference is kept
                return self._artifact_unstored(state, result)
            case ActionRequestedResult():
                return self._action_requested(state, result)
            case RunFailedResult():
                return result

    @staticmethod
    def _action_requested(state: RunState, result: ActionRequestedResult) -> AgentRunResult | None:
        data = result.data
        allowed = state.snapshot.capabilities.platform_api and data.action in state.snapshot.platform_actions
        if not allowed or not data.idempotency_key:
            reason = "missing idempotency_key" if allowed else "action not granted"
            state.warn("violation.action_denied", f"action.requested {data.action!r} refused: {reason}")
            return None
        state.record(
            "action.requested",
            {**data.model_dump(mode="json"), "executed": False, "approval": state.snapshot.action_approval},
        )
        state.has_output = True
        return result

    def _state_update(self, state: RunState, result: StateUpdatedResult) -> AgentRunResult | None:
        data = result.data
        owners = state.snapshot.state_owners
        reason: str | None = None
        if data.scope not in owners:
            reason = f"scope {data.scope!r} is not granted"
        elif not _STATE_KEY.match(data.key):
            reason = f"key {data.key!r} is not a valid state key"
        elif (where := json.non_finite_path(data.value)) is not None:
            # orjson would store it as null, and null means "delete": refuse it instead.
            reason = f"value holds NaN or Infinity at {where}, which JSON cannot carry"
        else:
            try:
                size = json.json_size(data.value)
            except TypeError:
                reason = "value is not JSON-serialisable"
            else:
                if size > MAX_STATE_VALUE_BYTES:
                    reason = f"value of {size} bytes exceeds {MAX_STATE_VALUE_BYTES}"
        if reason is not None:
            state.warn("violation.state_rejected", f"state.updated {data.scope}/{data.key} refused: {reason}")
            return None
        if self.stores is not None:
            owner = state.live.access.state_owners[data.scope] if state.live else None
            if owner is not None:
                # Committed with the result itself (the run's next flush) before anyone sees the result;
                # state reads wait for pending updates, so a state.get later in the same run sees it.
                state.side_write = StateWrite.of(
                    owner, data.key, data.value, runner_id=state.snapshot.runner_id
                )
        state.has_output = True
        state.record("state.updated", {"scope": data.scope, "key": data.key})
        return result

    async def _artifact(self, state: RunState, result: ArtifactCreatedResult) -> AgentRunResult | None:
        data = result.data
        ref = data.artifact
        if data.content_base64 is not None:
            try:
                content = base64.b64decode(data.content_base64, validate=True)
            except (binascii.Error, ValueError):
                state.warn("violation.artifact_rejected", f"artifact {ref.artifact_id}: invalid base64")
                return None
            if len(content) > MAX_INLINE_ARTIFACT:
                state.warn(
                    "violation.artifact_rejected", f"artifact {ref.artifact_id}: inline content too large"
                )
                return None
            if self.stores is not None:
                stored = await store_runner_artifact(self.stores, state, ref, content)
                return self._artifact_created(state, result, stored)
        return self._artifact_unstored(state, result)

    @classmethod
    def _artifact_unstored(cls, state: RunState, result: ArtifactCreatedResult) -> AgentRunResult:
        # Sizes and digests are measured by the host when it stores bytes; never trust the runner's.
        ref = result.data.artifact.model_copy(update={"size": None, "digest": None})
        return cls._artifact_created(state, result, ref)

    @staticmethod
    def _artifact_created(state: RunState, result: ArtifactCreatedResult, ref: ArtifactRef) -> AgentRunResult:
        state.artifact_ids[result.data.artifact.artifact_id] = ref
        state.record("artifact.created", ref.model_dump(mode="json"))
        state.has_output = True
        return result.model_copy(
            update={"data": result.data.model_copy(update={"artifact": ref, "content_base64": None})}
        )
