"""The orchestrator: the single entry ``run(event, binding)`` (HOST_SDK §4.4).

One run: resolve the runner → freeze the authorization snapshot → register it with the dispatcher → build the
context → call the runner through its connection → validate and apply each result → persist → unregister.
The runner can fail in any way it likes (raise, hang, flood, lie about its run id, break the protocol): the
run ends with exactly one terminal result and the host stays up.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import dataclasses
import logging
import re
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from agentrunner import (
    MAX_STATE_VALUE_BYTES,
    TERMINAL_RESULT_TYPES,
    ActionRequestedResult,
    AgentRunRequest,
    AgentRunResult,
    ArtifactCreatedResult,
    ArtifactRef,
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
from agentrunner import _json as json
from agentrunner.results import AgentRunResultBase
from pydantic import ValidationError

from agentrunner_host.definitions import AgentBinding, AgentEventEnvelope
from agentrunner_host.runtime.connection import RawResult

from .authorization import AuthorizationSnapshot, SnapshotBuilder
from .bindings import BindingSet
from .channel import Channel, ChannelClosed
from .context_builder import ContextBuilder, HistoryHandles
from .dispatcher import BackCallDispatcher, LiveRun
from .errors import BindingNotFoundError, DuplicateEventError, HostError, RunnerTransportError
from .harness import HarnessSupport, refuse_code_execution
from .redaction import ResultRedactor
from .registry import RunnerDescriptor, RunnerRegistry

__all__ = ["DeliveredResult", "Orchestrator", "RunHandle", "RunOutcome"]

log = logging.getLogger("agentrunner.host.orchestrator")

_STATE_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:\-/]{0,199}$")
_MAX_INLINE_ARTIFACT = 1024 * 1024
_QUEUE_SIZE = 256
_WARNINGS_PER_KIND = 5
_FORCE_ENDED = "runner.cancel_ignored"
"""Failure code of a run the host force-ended: it was cancelled (or passed its deadline) and its runner ignored
that for the force-end grace, so the host recorded its end without it."""
"""Warnings of one kind logged and recorded per run; the rest are counted in one summary record."""


@dataclass(frozen=True, slots=True)
class DeliveredResult:
    """A result as the host delivers it: the runner's result plus the host's own per-run sequence."""

    host_seq: int
    """1-based, gap-free per run; the replay cursor."""
    result: AgentRunResult
    """The validated result (the runner's ``sequence`` kept as sent)."""


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a run ended."""

    run_id: str
    status: str
    """``completed`` or ``failed``."""
    code: str | None
    """Failure code (``cancelled``, ``deadline_exceeded``, ``runner.error``...)."""
    message: str | None
    """Failure message."""
    results: int
    """Results delivered, the terminal one included."""


class _Violation(Exception):
    """A protocol violation that ends the run."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(slots=True)
class _RunState:
    run_id: str
    binding: AgentBinding
    descriptor: RunnerDescriptor
    snapshot: AuthorizationSnapshot
    event: AgentEventEnvelope
    live: LiveRun | None = None
    host_seq: int = 0
    last_runner_seq: int = 0
    terminal: AgentRunResult | None = None
    has_message: bool = False
    has_output: bool = False
    delta_buffer: list[str] = field(default_factory=list[str])
    delta_chars: int = 0
    """Characters in ``delta_buffer``: streamed text kept for the transcript is capped (one result's size)."""
    delta_truncated: bool = False
    open_tool_calls: dict[str, str] = field(default_factory=dict[str, str])
    artifact_ids: dict[str, ArtifactRef] = field(default_factory=dict[str, ArtifactRef])
    log: Any = None
    """The run's result log (``stores.runs.log``): results go to the store as they come, not at the end."""
    output_bytes: int = 0
    side_write: Any = None
    """The state update (``stores.StateWrite``) the result being accepted carries, committed with it."""
    """Encoded bytes of every result received so far (capped by ``run_policy.max_output_bytes``)."""
    transcript: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    host_events: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    warnings: int = 0
    warning_counts: dict[str, int] = field(default_factory=dict[str, int])
    """Warnings by kind; past :data:`_WARNINGS_PER_KIND` they are only counted."""
    results_seen: int = 0
    start_persisted: bool = False
    state_snapshot: dict[str, dict[str, Any]] = field(default_factory=dict[str, dict[str, Any]])
    """Host state inlined into the context (read before the run's start is written)."""
    history: HistoryHandles = field(default_factory=HistoryHandles)
    """History handles as they stood before this run's user turn."""
    leave_session: Callable[[], None] | None = None
    """Gives up the run's turn on its native session (idempotent); set while the run takes part in one."""
    """The run's start record is committed (a run cancelled before that must write it at its end)."""


@dataclass(slots=True)
class _SessionGate:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class RunHandle:
    """A started run. Iterate :meth:`results` to receive its results; ``outcome`` resolves at the end."""

    def __init__(
        self, run_id: str, binding: AgentBinding, snapshot: AuthorizationSnapshot, *, log: Any = None
    ) -> None:
        self.run_id = run_id
        self.binding = binding
        self.snapshot = snapshot
        self._channel: Channel[DeliveredResult] = Channel(_QUEUE_SIZE)
        self._detached = False
        self._outcome: asyncio.Future[RunOutcome] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None
        self._started = False
        self._finishing = False
        self._terminal_seen = False
        self._state: _RunState | None = None
        self._watchdogs: list[asyncio.TimerHandle] = []
        self._log = log
        self.cancel_requested: str | None = None
        """Why the run was asked to stop, once :meth:`Orchestrator.cancel` accepted a cancellation."""
        self.force_ended = False
        """The host recorded the run's end without its task (the runner ignored cancellation past the grace)."""

    @property
    def cancelling(self) -> bool:
        """A cancellation was accepted and the run has not ended yet."""
        return self.cancel_requested is not None and not self.done

    @property
    def done(self) -> bool:
        """The run has ended."""
        return self._outcome.done()

    async def outcome(self) -> RunOutcome:
        """Wait for the end of the run."""
        return await asyncio.shield(self._outcome)

    def detach(self) -> None:
        """Stop delivering to a consumer (the run goes on and is still persisted)."""
        self._detached = True
        self._channel.clear()

    async def _deliver(self, item: DeliveredResult) -> None:
        if not self._detached:
            # Bounded: a runner faster than its consumer is slowed down, host memory stays bounded.
            await self._channel.push(item)

    def _deliver_final(self, item: DeliveredResult | None) -> None:
        if item is not None and not self._detached:
            self._channel.push_final(item)
        else:
            self._channel.close()

    async def results(self) -> AsyncIterator[DeliveredResult]:
        """The delivered results, ending after the terminal one. One consumer per handle.

        With stores, a result is handed out only once it is committed (a client never sees a result a crash
        could lose); results that can no longer be committed end the iteration early.
        """
        result_log = self._log
        while True:
            try:
                item = await self._channel.pull()
            except ChannelClosed:
                return
            if result_log is not None and result_log.committed < item.host_seq:
                try:
                    await result_log.durable(item.host_seq)
                except HostError:
                    log.error("run %s: results could not be stored; its stream ends here", self.run_id)
                    return
            yield item


class Orchestrator:
    """Runs events through runners. One instance per host process."""

    def __init__(
        self,
        *,
        registry: RunnerRegistry,
        snapshots: SnapshotBuilder,
        dispatcher: BackCallDispatcher,
        contexts: ContextBuilder | None = None,
        bindings: BindingSet | None = None,
        stores: Any = None,
        pull: Any = None,
        cancel_grace_seconds: float = 2.0,
        harness: HarnessSupport | None = None,
        force_end_grace_seconds: float = 5.0,
    ) -> None:
        self.registry = registry
        self.snapshots = snapshots
        self.dispatcher = dispatcher
        self.contexts = contexts or ContextBuilder()
        self.bindings = bindings
        self.stores = stores
        self.pull = pull
        self.cancel_grace_seconds = cancel_grace_seconds
        self.harness = harness
        """Support of code-executing runners; without it such runners are refused."""
        self.force_end_grace_seconds = force_end_grace_seconds
        """Seconds a run may go on after its cancellation or deadline before the host force-ends it."""
        self.secret_values: ResultRedactor | None = None
        """Known secret values masked in every result before it is delivered or stored (set by the service)."""
        self._handles: dict[str, RunHandle] = {}
        self._force_ends: set[asyncio.Task[None]] = set()
        self._sessions: dict[str, _SessionGate] = {}

    # -- entry points ------------------------------------------------------------------------------------------

    async def submit(self, event: AgentEventEnvelope) -> RunHandle:
        """Accept an event (stored once, idempotently), resolve its one binding and start the run.

        The event is written together with the run's start record (one commit); an event that cannot start a
        run (no binding, unknown runner) is still stored, with a host record saying why.
        """
        try:
            if self.bindings is None:
                raise BindingNotFoundError("this host has no bindings configured")
            binding = self.bindings.resolve(event)
        except BindingNotFoundError as exc:
            await self._ingest(event)
            await self._host_record(event, "event.unhandled", {"reason": exc.message})
            raise
        return await self.start(event, binding)

    async def run(self, event: AgentEventEnvelope, binding: AgentBinding) -> AsyncIterator[AgentRunResult]:
        """Run *event* with *binding* and yield its results; closing this iterator early cancels the run."""
        handle = await self.start(event, binding)
        finished = False
        try:
            async for item in handle.results():
                yield item.result
            finished = True
        finally:
            if not finished:
                await self.cancel(handle.run_id, reason="the consumer went away")
                handle.detach()

    async def start(
        self, event: AgentEventEnvelope, binding: AgentBinding, *, ingested: bool = False
    ) -> RunHandle:
        """Start a run and return its handle (the run proceeds in its own task).

        With stores, the event (unless *ingested* already) and the run's start record are committed before
        this returns: a duplicate event id raises :class:`DuplicateEventError` and nothing runs.
        """
        try:
            descriptor = await self.registry.get(binding.runner_id)
            refuse_code_execution(descriptor, self.harness.policy if self.harness is not None else None)
        except HostError as exc:
            if not ingested:
                await self._ingest(event)
                await self._host_record(event, "event.unhandled", {"reason": exc.message})
            raise
        run_id = "run_" + uuid.uuid4().hex
        snapshot = self.snapshots.build(run_id=run_id, descriptor=descriptor, binding=binding, event=event)
        state = _RunState(
            run_id=run_id, binding=binding, descriptor=descriptor, snapshot=snapshot, event=event
        )
        if self.stores is not None:
            await self._persist_start(state, include_event=not ingested)
            state.log = self.stores.runs.log(run_id)
        handle = RunHandle(run_id, binding, snapshot, log=state.log)
        handle._state = state  # pyright: ignore[reportPrivateUsage]
        self._handles[run_id] = handle
        handle._task = asyncio.create_task(self._drive(handle, state), name=f"agentrunner-run-{run_id}")  # pyright: ignore[reportPrivateUsage]
        # A runner that swallows the deadline's cancellation must still end: force it a grace period later.
        self._arm_watchdog(
            handle, state, at=_loop_time_for(snapshot.deadline_at) + self.force_end_grace_seconds
        )
        return handle

    async def _persist_start(self, state: _RunState, *, include_event: bool) -> None:
        """Read what the context needs (before the user turn is written), then commit the start."""
        from .persistence import event_entry
        from .stores import DuplicateEventStoredError

        access = state.snapshot.access()
        if state.binding.state_policy.snapshot and access.state_owners:
            state.state_snapshot = await self.stores.state.snapshot(access.state_owners)
        state.history = await self._history_handles(access)
        start = self._run_start(state, state.history)
        if include_event:
            start = dataclasses.replace(start, event=event_entry(state.event))
        try:
            await self.stores.runs.start(start)
        except DuplicateEventStoredError:
            raise DuplicateEventError(state.event.event_id) from None
        state.start_persisted = True

    @contextlib.asynccontextmanager
    async def _session_turn(self, state: _RunState, request: AgentRunRequest) -> AsyncGenerator[None]:
        """One turn at a time per native session (PROTOCOL_V1 §13).

        A runner declaring ``stateful_session`` may resume one external session per stable session key
        (workspace / bot / binding / runner / conversation / thread); harnesses rarely accept concurrent turns
        on one session, so such runs wait for the previous turn of the same key. Other runs never wait, and
        nothing is serialised per runner or per plugin.
        """
        if not state.snapshot.capabilities.stateful_session:
            yield
            return
        key = str(request.context.runtime.metadata.get("session_key", ""))
        gate = self._sessions.get(key)
        if gate is None:
            gate = self._sessions[key] = _SessionGate()
        gate.users += 1
        holding = left = False

        def leave() -> None:
            # Called by the run's own task on the way out, or by the host when it force-ends the run: a leaked
            # task (one that swallowed its cancellation) must not keep the next turn of its session waiting.
            nonlocal holding, left
            if left:
                return
            left = True
            if holding:
                holding = False
                gate.lock.release()
            gate.users -= 1
            if gate.users == 0 and self._sessions.get(key) is gate:
                del self._sessions[key]

        state.leave_session = leave
        try:
            await gate.lock.acquire()
            holding = True
            if left:  # force-ended while it waited for its turn: pass the turn on at once
                holding = False
                gate.lock.release()
            yield
        finally:
            leave()

    def _harness_scope(
        self, state: _RunState, request: AgentRunRequest
    ) -> contextlib.AbstractAsyncContextManager[AgentRunRequest]:
        """The workspace policy and bridge registration of a code-executing / bridge runner's run."""
        if self.harness is None:
            return contextlib.nullcontext(request)
        return self.harness.scope(state.descriptor, request)

    def handle(self, run_id: str) -> RunHandle | None:
        """The handle of a live run."""
        return self._handles.get(run_id)

    async def cancel(self, run_id: str, *, reason: str = "cancelled") -> bool:
        """Cancel a live run. Idempotent; False when the run is unknown or already ended.

        The runtime is asked to stop the runner and the run's task is cancelled; the run ends ``run.failed`` with
        code ``cancelled``. A runner that swallows the cancellation is force-ended ``force_end_grace_seconds``
        later with code ``runner.cancel_ignored`` (its task is left behind, logged as leaked).
        """
        handle = self._handles.get(run_id)
        if handle is None or handle.done or handle.cancel_requested is not None:
            return False
        if handle._terminal_seen or handle._finishing:  # pyright: ignore[reportPrivateUsage]
            return False  # the runner already ended the run; a cancel after the terminal changes nothing
        handle.cancel_requested = reason
        state = handle._state  # pyright: ignore[reportPrivateUsage]
        if state is not None:
            loop = asyncio.get_running_loop()
            self._arm_watchdog(handle, state, at=loop.time() + self.force_end_grace_seconds)
        try:
            conn = self.registry.connection(handle.snapshot.plugin_id)
            # asyncio.timeout, never wait_for: wait_for can swallow a cancellation of this caller on 3.11.
            async with asyncio.timeout(self.cancel_grace_seconds):
                await conn.cancel(run_id)
        except Exception:  # the runtime may already be gone; ending the task below is enough
            log.debug("cancel of %s could not reach the runtime", run_id, exc_info=True)
        task = handle._task  # pyright: ignore[reportPrivateUsage]
        # A task cancelled before its first step never enters its try/finally; an unstarted run sees
        # cancel_requested itself as soon as it starts.
        started, finishing = handle._started, handle._finishing  # pyright: ignore[reportPrivateUsage]
        if task is not None and not task.done() and started and not finishing:
            task.cancel()
        return True

    async def aclose(self) -> None:
        """Cancel every live run and wait for them to end (a task that ignores its cancellation is left behind
        after the force-end grace, logged as leaked)."""
        for run_id in list(self._handles):
            await self.cancel(run_id, reason="host shutting down")
        tasks = {h._task for h in self._handles.values() if h._task is not None}  # pyright: ignore[reportPrivateUsage]
        tasks |= self._force_ends
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=self.force_end_grace_seconds * 2)
            for task in pending:
                log.error("task %s ignored its cancellation through host shutdown; leaked", task.get_name())

    # -- escalation --------------------------------------------------------------------------------------------

    def _arm_watchdog(self, handle: RunHandle, state: _RunState, *, at: float) -> None:
        loop = asyncio.get_running_loop()
        timer = loop.call_at(at, self._escalate, handle, state)
        handle._watchdogs.append(timer)  # pyright: ignore[reportPrivateUsage]

    def _escalate(self, handle: RunHandle, state: _RunState) -> None:
        """The grace after a cancel or the deadline is over and the run has not ended: end it without its task."""
        if handle.done or handle._finishing:  # pyright: ignore[reportPrivateUsage]
            return
        grace = self.force_end_grace_seconds
        # Its own code, not the cooperative ``cancelled`` / ``deadline_exceeded``: the runner broke the cancel
        # contract, and a client (or operator) must be able to tell that from a run that stopped when asked.
        cause = "cancelled" if handle.cancel_requested is not None else "deadline_exceeded"
        why = (
            f"cancelled ({handle.cancel_requested})"
            if handle.cancel_requested is not None
            else "past its deadline"
        )
        failure = (
            _FORCE_ENDED,
            f"force-ended: the run was {why} and the runner ignored the cancellation for {grace:g}s",
            False,
        )
        handle.force_ended = True
        task = handle._task  # pyright: ignore[reportPrivateUsage]
        log.warning(
            "run %s (%s) ignored its cancellation for %gs: its end is recorded now and its task %s is left"
            " running (leaked)",
            state.run_id,
            state.descriptor.runner_id,
            grace,
            task.get_name() if task is not None else "?",
        )
        self._record(state, "run.force_ended", {"code": _FORCE_ENDED, "cause": cause, "grace_seconds": grace})
        if state.leave_session is not None:
            state.leave_session()  # the leaked task keeps running; the session's next turn must not wait for it
        ender = asyncio.create_task(
            self._finish(handle, state, failure), name=f"agentrunner-end-{state.run_id}"
        )
        self._force_ends.add(ender)
        ender.add_done_callback(self._force_ends.discard)

    # -- the run -----------------------------------------------------------------------------------------------

    async def _drive(self, handle: RunHandle, state: _RunState) -> None:
        run_id = state.run_id
        failure: tuple[str, str, bool] | None = None
        handle._started = True  # pyright: ignore[reportPrivateUsage]
        try:
            if handle.cancel_requested is not None:
                raise asyncio.CancelledError
            state.live = self.dispatcher.register(state.snapshot)
            request = await self._prepare(state)
            conn = self.registry.connection(state.descriptor.plugin_id)
            async with (
                asyncio.timeout_at(_loop_time_for(state.snapshot.deadline_at)),
                self._session_turn(state, request),
                self._harness_scope(state, request) as request,
                aclosing(conn.run(request)) as stream,
            ):
                async for raw in stream:
                    if handle.cancel_requested is not None:
                        # The cancellation may have been swallowed on its way through the runner: a run whose
                        # cancel was accepted never goes on to deliver (or complete).
                        raise asyncio.CancelledError
                    delivered = await self._accept(state, raw)
                    if state.terminal is not None:
                        handle._terminal_seen = True  # pyright: ignore[reportPrivateUsage]
                    if delivered is not None:
                        await handle._deliver(delivered)  # pyright: ignore[reportPrivateUsage]
                        if state.log is not None and state.log.backlogged:
                            await state.log.room()  # the store is behind: slow the runner down
                    if state.terminal is not None:
                        break
        except asyncio.CancelledError:
            reason = handle.cancel_requested or "cancelled"
            failure = ("cancelled", f"run cancelled: {reason}", False)
            if handle.cancel_requested is None:
                raise  # not our cancellation: the host itself is being torn down
        except TimeoutError:
            failure = ("deadline_exceeded", "the run did not finish before its deadline", True)
        except _Violation as v:
            failure = (v.code, v.message, False)
        except RunnerTransportError as exc:
            failure = (exc.code, exc.message, exc.retryable)
        except Exception as exc:
            if handle.force_ended:  # the end is recorded already; this is the leaked task finally stopping
                log.debug("force-ended run %s: its task ended with %r", run_id, exc)
            else:
                log.exception("run %s failed inside the host", run_id)
            failure = ("host.error", f"host error: {type(exc).__name__}", True)
        finally:
            await self._finish(handle, state, failure)

    async def _prepare(self, state: _RunState) -> AgentRunRequest:
        snapshot, event, binding = state.snapshot, state.event, state.binding
        data, too_big = self.contexts.event_data(event)
        raw_ref = None
        if too_big:
            self._record(state, "event.data_truncated", {"size": json.json_size(event.data)})
        state_snapshot = state.state_snapshot
        history = state.history
        ctx = self.contexts.build(
            snapshot=snapshot,
            binding=binding,
            event=event,
            state=state_snapshot,
            history=history,
            event_data=data,
            raw_ref=raw_ref,
        )
        return AgentRunRequest(
            runner_id=snapshot.runner_id,
            runner_name=state.descriptor.manifest.name,
            context=ctx,
            call_token=state.live.call_token if state.live is not None else None,
        )

    # -- result validation -------------------------------------------------------------------------------------

    async def _accept(self, state: _RunState, raw: RawResult) -> DeliveredResult | None:
        if state.terminal is not None:
            self._warn(state, "result.after_terminal", "a result arrived after the terminal one; dropped")
            return None
        state.results_seen += 1
        policy = state.snapshot.run_policy
        if state.results_seen > policy.max_results:
            raise _Violation(
                "runner.too_many_results", f"the runner sent more than {policy.max_results} results"
            )
        if isinstance(raw, dict):
            size = json.json_size(raw)
            if size > policy.max_result_bytes:
                raise _Violation(
                    "payload_too_large", f"a result of {size} bytes exceeds {policy.max_result_bytes}"
                )
            try:
                parsed = parse_result(raw)
            except (ValidationError, ValueError) as exc:
                raise _Violation("runner.invalid_result", f"invalid result: {_first_error(exc)}") from None
            payload: dict[str, Any] | bytes = raw
        else:
            obj: object = raw  # an in-process runner can yield anything at run time
            if not isinstance(obj, (AgentRunResultBase, UnknownResult)):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise _Violation(
                    "runner.invalid_result", f"the runner yielded a {type(obj).__name__}, not a result"
                )
            parsed = raw
            payload = raw.__pydantic_serializer__.to_json(raw)
            if (b"NaN" in payload or b"Infinity" in payload) and not isinstance(raw, StateUpdatedResult):
                # A model built without validation can hold NaN/Infinity, written as bare constants: not JSON.
                where = json.non_finite_path(raw.model_dump())
                if where is not None:
                    raise _Violation(
                        "runner.invalid_result", f"invalid result: {where}: NaN or Infinity is not JSON"
                    )
            size = len(payload)
            if size > policy.max_result_bytes:
                raise _Violation(
                    "payload_too_large", f"a result of {size} bytes exceeds {policy.max_result_bytes}"
                )

        if self.secret_values is not None:
            parsed, payload = self.secret_values.scrub(parsed, payload)
        state.output_bytes += size
        if state.output_bytes > policy.max_output_bytes:
            raise _Violation(
                "runner.output_too_large",
                f"the runner's results passed {policy.max_output_bytes} bytes in total",
            )
        if isinstance(parsed, UnknownResult):
            self._warn(state, "result.unknown_type", f"ignored a result of unknown type {parsed.type!r}")
            return None
        result: AgentRunResult = parsed
        if result.run_id != state.run_id:
            raise _Violation("runner.protocol_error", f"a result carries another run id ({result.run_id!r})")
        if result.sequence is not None:
            if result.sequence <= state.last_runner_seq:
                self._warn(state, "result.duplicate", f"duplicate sequence {result.sequence}; dropped")
                return None
            if result.sequence != state.last_runner_seq + 1:
                self._warn(
                    state,
                    "result.sequence_gap",
                    f"sequence jumped from {state.last_runner_seq} to {result.sequence}",
                )
            state.last_runner_seq = result.sequence

        delivered = await self._apply(state, result)
        if delivered is None:
            return None
        state.host_seq += 1
        if delivered is result:
            self._store_result(state, result.sequence, delivered.type, payload, size=size)
        else:
            self._store_result(
                state, result.sequence, delivered.type, delivered.__pydantic_serializer__.to_json(delivered)
            )
        if delivered.type in TERMINAL_RESULT_TYPES:
            state.terminal = delivered
        return DeliveredResult(state.host_seq, delivered)

    async def _apply(self, state: _RunState, result: AgentRunResult) -> AgentRunResult | None:
        caps = state.snapshot.capabilities
        match result:
            case MessageDeltaResult():
                if not caps.streaming:
                    self._warn(
                        state,
                        "violation.streaming",
                        "message.delta from a runner that does not declare streaming",
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
                _clear_deltas(state)
                self._assistant_turn(state, message.text(), message.model_dump(mode="json"))
                state.has_output = state.has_message = True
                return result
            case ToolCallStartedResult():
                state.open_tool_calls[result.data.tool_call_id] = result.data.tool_name
                self._record(state, "tool.call.started", result.data.model_dump(mode="json"))
                state.has_output = True
                return result
            case ToolCallCompletedResult():
                if state.open_tool_calls.pop(result.data.tool_call_id, None) is None:
                    self._warn(
                        state,
                        "violation.tool_unpaired",
                        f"tool call {result.data.tool_call_id} completed without start",
                    )
                self._record(state, "tool.call.completed", result.data.model_dump(mode="json"))
                return result
            case StateUpdatedResult():
                return await self._state_update(state, result)
            case ArtifactCreatedResult():
                return await self._artifact(state, result)
            case ActionRequestedResult():
                data = result.data
                allowed = caps.platform_api and data.action in state.snapshot.platform_actions
                if not allowed or not data.idempotency_key:
                    reason = "missing idempotency_key" if allowed else "action not granted"
                    self._warn(
                        state,
                        "violation.action_denied",
                        f"action.requested {data.action!r} refused: {reason}",
                    )
                    return None
                self._record(
                    state,
                    "action.requested",
                    {
                        **data.model_dump(mode="json"),
                        "executed": False,
                        "approval": state.snapshot.action_approval,
                    },
                )
                state.has_output = True
                return result
            case RunCompletedResult():
                final = result.data.message
                if final is not None:
                    _clear_deltas(state)
                    self._assistant_turn(state, final.text(), final.model_dump(mode="json"))
                    state.has_output = state.has_message = True
                needs_message = state.event.event_type == "message.received"
                if (needs_message and not state.has_message) or not (state.has_output or state.has_message):
                    return self._host_failure(
                        state, "runner.empty_output", "the runner completed without producing any output"
                    )
                return result
            case RunFailedResult():
                return result

    async def _state_update(self, state: _RunState, result: StateUpdatedResult) -> AgentRunResult | None:
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
            self._warn(
                state, "violation.state_rejected", f"state.updated {data.scope}/{data.key} refused: {reason}"
            )
            return None
        if self.stores is not None:
            owner = state.live.access.state_owners[data.scope] if state.live else None
            if owner is not None:
                from .stores import StateWrite

                # Committed with the result itself (the run's next flush) before anyone sees the result;
                # state reads wait for pending updates, so a state.get later in the same run sees it.
                state.side_write = StateWrite.of(
                    owner, data.key, data.value, runner_id=state.snapshot.runner_id
                )
        state.has_output = True
        self._record(state, "state.updated", {"scope": data.scope, "key": data.key})
        return result

    async def _artifact(self, state: _RunState, result: ArtifactCreatedResult) -> AgentRunResult | None:
        data = result.data
        ref = data.artifact
        if data.content_base64 is not None:
            try:
                content = base64.b64decode(data.content_base64, validate=True)
            except (binascii.Error, ValueError):
                self._warn(
                    state, "violation.artifact_rejected", f"artifact {ref.artifact_id}: invalid base64"
                )
                return None
            if len(content) > _MAX_INLINE_ARTIFACT:
                self._warn(
                    state,
                    "violation.artifact_rejected",
                    f"artifact {ref.artifact_id}: inline content too large",
                )
                return None
            if self.stores is not None:
                stored = await self._store_artifact(state, ref, content)
                state.artifact_ids[ref.artifact_id] = stored
                self._record(state, "artifact.created", stored.model_dump(mode="json"))
                state.has_output = True
                return result.model_copy(
                    update={"data": data.model_copy(update={"artifact": stored, "content_base64": None})}
                )
        # Sizes and digests are measured by the host when it stores bytes; never trust the runner's.
        clean = ref.model_copy(update={"size": None, "digest": None})
        state.artifact_ids[ref.artifact_id] = clean
        self._record(state, "artifact.created", clean.model_dump(mode="json"))
        state.has_output = True
        return result.model_copy(
            update={"data": data.model_copy(update={"artifact": clean, "content_base64": None})}
        )

    async def _store_artifact(self, state: _RunState, ref: ArtifactRef, content: bytes) -> ArtifactRef:
        from .persistence import store_runner_artifact

        return await store_runner_artifact(self.stores, state, ref, content)

    def _host_failure(
        self, state: _RunState, code: str, message: str, *, retryable: bool = False
    ) -> RunFailedResult:
        return RunFailedResult(
            run_id=state.run_id,
            timestamp=time.time_ns() // 1_000_000,
            data=RunFailedData(code=code, message=message, retryable=retryable),
            metadata={"origin": "host"},
        )

    # -- records -----------------------------------------------------------------------------------------------

    def _store_result(
        self,
        state: _RunState,
        runner_sequence: int | None,
        kind: str,
        payload: dict[str, Any] | bytes,
        *,
        size: int | None = None,
    ) -> None:
        """Hand the result numbered ``state.host_seq`` to the run's log (committed by the store's journal)."""
        if state.log is None:
            return
        from .stores import ResultRecord

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

    def _assistant_turn(self, state: _RunState, text: str, message: dict[str, Any]) -> None:
        state.transcript.append({"role": "assistant", "content": text, "message": message})

    def _record(self, state: _RunState, kind: str, data: dict[str, Any]) -> None:
        state.host_events.append({"event_type": kind, "data": data})

    def _warn(self, state: _RunState, kind: str, message: str) -> None:
        state.warnings += 1
        seen = state.warning_counts.get(kind, 0) + 1
        state.warning_counts[kind] = seen
        # A runner repeating one violation must not flood the log or the event log: the first few of each kind
        # are logged and recorded, the rest are counted and summarised once at the run's end.
        if seen <= _WARNINGS_PER_KIND:
            log.warning("run %s (%s): %s", state.run_id, state.descriptor.runner_id, message)
            state.host_events.append({"event_type": kind, "data": {"message": message}})

    def _summarise_warnings(self, state: _RunState) -> None:
        for kind, seen in state.warning_counts.items():
            if seen > _WARNINGS_PER_KIND:
                dropped = seen - _WARNINGS_PER_KIND
                log.warning(
                    "run %s (%s): %d more %s warnings not logged",
                    state.run_id,
                    state.descriptor.runner_id,
                    dropped,
                    kind,
                )
                state.host_events.append(
                    {
                        "event_type": kind,
                        "data": {"message": f"{dropped} more like this", "suppressed": dropped},
                    }
                )

    async def _finish(
        self, handle: RunHandle, state: _RunState, failure: tuple[str, str, bool] | None
    ) -> None:
        if handle._finishing:  # pyright: ignore[reportPrivateUsage]
            return  # already ended (force-ended while its task went on): one terminal per run
        final_item: DeliveredResult | None = None
        handle._finishing = True  # pyright: ignore[reportPrivateUsage]
        for timer in handle._watchdogs:  # pyright: ignore[reportPrivateUsage]
            timer.cancel()
        try:
            if state.terminal is None:
                if failure is None:
                    if state.has_output or state.has_message:
                        failure = (
                            "runner.no_terminal",
                            "the runner's stream ended without a terminal result",
                            False,
                        )
                    else:
                        failure = ("runner.empty_output", "the runner ended without any output", False)
                code, message, retryable = failure
                terminal = self._host_failure(state, code, message, retryable=retryable)
                state.host_seq += 1
                self._store_result(
                    state, None, terminal.type, terminal.__pydantic_serializer__.to_json(terminal)
                )
                state.terminal = terminal
                final_item = DeliveredResult(state.host_seq, terminal)
            if state.delta_buffer:
                # the streamed text of a reply that never completed, at most one result's size of it
                text = "".join(state.delta_buffer)
                partial: dict[str, Any] = {"role": "assistant", "content": text}
                if state.delta_truncated:
                    partial["metadata"] = {"truncated": True}
                self._assistant_turn(state, text, partial)
                _clear_deltas(state)
            for call_id, name in state.open_tool_calls.items():
                self._warn(state, "violation.tool_unpaired", f"tool call {call_id} ({name}) never completed")
            self._summarise_warnings(state)
        finally:
            live = self.dispatcher.unregister(state.run_id)
            terminal = state.terminal
            outcome = _outcome(state)
            interrupted: BaseException | None = None
            try:
                await asyncio.shield(self._persist_finish(state, live))
            except asyncio.CancelledError as exc:
                # The shielded write goes on; the outcome must still be published before we give way.
                interrupted = exc
            except Exception:
                log.exception("could not persist the end of run %s", state.run_id)
            self._handles.pop(state.run_id, None)
            handle._deliver_final(final_item)  # pyright: ignore[reportPrivateUsage]
            if not handle._outcome.done():  # pyright: ignore[reportPrivateUsage]
                handle._outcome.set_result(outcome)  # pyright: ignore[reportPrivateUsage]
            del terminal
            if interrupted is not None:
                raise interrupted

    # -- persistence hooks (implemented over agentrunner_host.stores) -------------------------------------------

    async def _ingest(self, event: AgentEventEnvelope) -> None:
        if self.stores is None:
            return
        outcome = await self.stores.events.append(_event_entry(event))
        if outcome.duplicate:
            raise DuplicateEventError(event.event_id, run_id=getattr(outcome.event, "run_id", None))

    async def _host_record(self, event: AgentEventEnvelope, kind: str, data: dict[str, Any]) -> None:
        if self.stores is None:
            return
        from .stores import EventEntry

        await self.stores.events.append_many(
            [
                EventEntry(
                    event_id="host_" + uuid.uuid4().hex,
                    event_type=kind,
                    source="host",
                    kind="host",
                    conversation_id=event.conversation_id,
                    thread_id=event.thread_id,
                    workspace_id=event.workspace_id,
                    data=data,
                    summary=None,
                )
            ]
        )

    async def _history_handles(self, access: Any) -> HistoryHandles:
        if self.pull is not None and hasattr(self.pull, "history_handles"):
            handles: HistoryHandles = await self.pull.history_handles(access)
            return handles
        return HistoryHandles()

    def _run_start(self, state: _RunState, history: HistoryHandles) -> Any:
        from .persistence import run_start

        return run_start(state, history)

    async def _persist_finish(self, state: _RunState, live: LiveRun | None) -> None:
        if self.stores is None:
            return
        from .persistence import persist_finish

        await persist_finish(self.stores, state, live)


def _clear_deltas(state: _RunState) -> None:
    state.delta_buffer.clear()
    state.delta_chars = 0
    state.delta_truncated = False


def _outcome(state: _RunState) -> RunOutcome:
    terminal = state.terminal
    if isinstance(terminal, RunFailedResult):
        return RunOutcome(state.run_id, "failed", terminal.data.code, terminal.data.message, state.host_seq)
    return RunOutcome(state.run_id, "completed", None, None, state.host_seq)


def _loop_time_for(deadline_at: float) -> float:
    loop = asyncio.get_running_loop()
    return loop.time() + (deadline_at - time.time())


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        return f"{loc}: {first['msg']}"
    return str(exc)


def _event_entry(event: AgentEventEnvelope) -> Any:
    from .persistence import event_entry

    return event_entry(event)
