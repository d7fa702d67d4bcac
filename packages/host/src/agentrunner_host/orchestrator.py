"""The orchestrator: the single entry ``run(event, binding)`` (HOST_SDK §4.4).

One run: resolve the runner → freeze the authorization snapshot → register it with the dispatcher → build the
context → call the runner through its connection → validate and apply each result → persist → unregister.
The runner can fail in any way it likes (raise, hang, flood, lie about its run id, break the protocol): the
run ends with exactly one terminal result and the host stays up.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field

from agentrunner import AgentRunRequest, AgentRunResult, RawEventRef
from agentrunner import codec as json
from agentrunner.codec import JsonObject

from agentrunner_host.definitions import AgentBinding, AgentEventEnvelope
from agentrunner_host.stores import DuplicateEventStoredError, EventEntry, RunStart, StartFacts, StartReads

from .authorization import AuthorizationSnapshot, SnapshotBuilder
from .bindings import BindingSet
from .channel import Channel, ChannelClosed
from .context_builder import ContextBuilder, HistoryHandles
from .deadlines import Alarm, alarms
from .dispatcher import BackCallDispatcher, LiveRun
from .errors import (
    BindingNotFoundError,
    DuplicateEventError,
    HostError,
    RunnerDisabledError,
    RunnerTransportError,
)
from .harness import HarnessPolicyError, HarnessSupport, refuse_code_execution
from .harness_audit import harness_tools_unfinished
from .ids import event_id as new_event_id
from .ids import ordered_hex
from .live_audit import LiveAuditWriter
from .persistence import event_entry, finish_record, persist_finish, run_start, store_event_data
from .ports import FactsAPI, RunStores
from .redaction import ResultRedactor
from .registry import RunnerRegistry
from .result_rules import ResultRules, RunViolation, host_failure, store_result
from .run_state import DeliveredResult, Failure, RunOutcome, RunState
from .runtime.connection import RawResult

__all__ = ["DeliveredResult", "Orchestrator", "RunHandle", "RunOutcome"]

log = logging.getLogger("agentrunner.host.orchestrator")

_QUEUE_SIZE = 256
_FORCE_ENDED = "runner.cancel_ignored"
"""Failure code of a run the host force-ended: it was cancelled (or passed its deadline) and its runner ignored
that for the force-end grace, so the host recorded its end without it."""


@dataclass(slots=True)
class _SessionGate:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


def _new_channel() -> Channel[DeliveredResult]:
    # not Channel[DeliveredResult](...): a generic alias call tries to set __orig_class__ on the slotted
    # channel, raising and catching an AttributeError per run
    return Channel(_QUEUE_SIZE)


def _no_watchdogs() -> list[Alarm]:
    return []


@dataclass(slots=True, eq=False)
class RunControl:
    """The orchestrator's side of a run's handle: its task, where it stands, and its delivery channel.

    Consumers use :class:`RunHandle`; only the orchestrator reads or changes this.
    """

    state: RunState
    """The run's state."""
    outcome: asyncio.Future[RunOutcome]
    """Resolved once, when the run's end is recorded."""
    channel: Channel[DeliveredResult] = field(default_factory=_new_channel)
    """Delivered results on their way to the handle's one consumer."""
    task: asyncio.Task[None] | None = None
    """The task driving the run."""
    started: bool = False
    """The task entered its first step (a task cancelled before that never runs its cleanup)."""
    finishing: bool = False
    """The run's end is being recorded: one terminal per run."""
    terminal_seen: bool = False
    """The runner sent its terminal result."""
    detached: bool = False
    """The consumer went away; results are still stored but no longer queued."""
    watchdogs: list[Alarm] = field(default_factory=_no_watchdogs)
    """Force-end timers (deadline, cancellation grace)."""

    def deliver_now(self, item: DeliveredResult) -> bool:
        """Queue a result for the consumer if that needs no wait; ``False`` when the caller must await
        :meth:`deliver` instead."""
        return self.detached or self.channel.offer(item)

    async def deliver(self, item: DeliveredResult) -> None:
        """Queue a result for the consumer (waits while the consumer is behind)."""
        if not self.detached:
            # Bounded: a runner faster than its consumer is slowed down, host memory stays bounded.
            await self.channel.push(item)

    def deliver_final(self, item: DeliveredResult | None) -> None:
        """Queue the host's own terminal result, if any, and close the channel."""
        if item is not None and not self.detached:
            self.channel.push_final(item)
        else:
            self.channel.close()


class RunHandle:
    """A started run. Iterate :meth:`results` to receive its results; ``outcome`` resolves at the end."""

    def __init__(
        self, run_id: str, binding: AgentBinding, snapshot: AuthorizationSnapshot, *, state: RunState
    ) -> None:
        self.run_id = run_id
        self.binding = binding
        self.snapshot = snapshot
        self.control = RunControl(state, asyncio.get_running_loop().create_future())
        """The orchestrator's bookkeeping of the run (not for consumers)."""
        self.cancel_requested: str | None = None
        """Why the run was asked to stop, once :meth:`Orchestrator.cancel` accepted a cancellation."""
        self.force_ended = False
        """The host recorded the run's end without its task (the runner ignored cancellation past the grace)."""
        self._listener: Callable[[], None] | None = None
        self._commit_wait: asyncio.Task[None] | None = None
        self._unstorable = False

    @property
    def cancelling(self) -> bool:
        """A cancellation was accepted and the run has not ended yet."""
        return self.cancel_requested is not None and not self.done

    @property
    def done(self) -> bool:
        """The run has ended."""
        return self.control.outcome.done()

    async def outcome(self) -> RunOutcome:
        """Wait for the end of the run."""
        return await asyncio.shield(self.control.outcome)

    def detach(self) -> None:
        """Stop delivering to a consumer (the run goes on and is still persisted)."""
        self.control.detached = True
        self.control.channel.clear()

    def subscribe(self, listener: Callable[[], None]) -> None:
        """Take the results with :meth:`take` instead of iterating :meth:`results` (one consumer either way).

        *listener* is called now and whenever :meth:`take` may have more or :attr:`drained` may have become
        true: from the run's own task as it queues a result or ends (so a consumer learns of a committed result
        without a task of its own waking up for it), or from a short wait of the handle's own while a queued
        result waits for its commit. It must not raise or wait.
        """
        if self._listener is not None:
            raise RuntimeError(f"run {self.run_id} has a consumer already")
        self._listener = listener
        self.control.channel.listener = listener
        listener()

    def unsubscribe(self) -> None:
        """Forget the consumer of :meth:`subscribe` (once it is :attr:`drained`: a consumer refers to its
        handle, and without this the pair would wait for the cyclic garbage collector with the run's whole
        state)."""
        self._listener = None
        self.control.channel.listener = None

    def take(self) -> DeliveredResult | None:
        """The next result for the consumer of :meth:`subscribe` if it is queued and committed, else ``None``
        (the listener is called when that may change)."""
        ready = self.take_ready(limit=1)
        return ready[0] if ready else None

    def take_ready(self, *, limit: int | None = None) -> list[DeliveredResult]:
        """What :meth:`take` hands out until it answers ``None`` (at most *limit*), in one call: a short run's
        results, committed together, are taken at once."""
        channel = self.control.channel
        if self._unstorable or not len(channel):
            return []
        result_log = self.control.state.log
        ready: list[DeliveredResult] = []
        while len(channel) and (limit is None or len(ready) < limit):
            host_seq = channel.peek().host_seq
            if result_log is not None and result_log.committed < host_seq:
                # a result is handed out only once a crash can no longer lose it
                if self._commit_wait is None:
                    self._commit_wait = asyncio.get_running_loop().create_task(
                        self._await_commit(host_seq), name=f"agentrunner-commit-{self.run_id}"
                    )
                break
            ready.append(channel.pull_nowait())
        return ready

    @property
    def drained(self) -> bool:
        """The consumer of :meth:`subscribe` took every result it will get: the delivery ended, or the results
        could not be stored (its stream ends there, as :meth:`results` does)."""
        channel = self.control.channel
        return self._unstorable or (channel.closed and not len(channel))

    async def _await_commit(self, host_seq: int) -> None:
        result_log = self.control.state.log
        assert result_log is not None  # only a run with stores waits for commits
        try:
            await result_log.durable(host_seq)
        except HostError:
            log.error("run %s: results could not be stored; its stream ends here", self.run_id)
            self._unstorable = True
            self.detach()  # nobody takes the rest: the run must not wait on a full channel for it
        finally:
            self._commit_wait = None
        if self._listener is not None:
            self._listener()

    async def results(self) -> AsyncIterator[DeliveredResult]:
        """The delivered results, ending after the terminal one. One consumer per handle.

        With stores, a result is handed out only once it is committed (a client never sees a result a crash
        could lose); results that can no longer be committed end the iteration early.
        """
        result_log = self.control.state.log
        channel = self.control.channel
        while True:
            if len(channel):
                item = channel.pull_nowait()  # no coroutine per result while the run is ahead of its reader
            else:
                try:
                    item = await channel.pull()
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
        stores: RunStores | None = None,
        pull: FactsAPI | None = None,
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
        self.rules = ResultRules(stores=stores)
        """The per-result rules."""
        self._handles: dict[str, RunHandle] = {}
        self._force_ends: set[asyncio.Task[None]] = set()
        self._sessions: dict[str, _SessionGate] = {}
        self._live_audit = LiveAuditWriter(stores) if stores is not None else None

    @property
    def secret_values(self) -> ResultRedactor | None:
        """Known secret values masked in every result before it is delivered or stored (set by the service)."""
        return self.rules.secret_values

    @secret_values.setter
    def secret_values(self, redactor: ResultRedactor | None) -> None:
        self.rules.secret_values = redactor

    # -- entry points ------------------------------------------------------------------------------------------

    async def submit(self, event: AgentEventEnvelope, *, minted: bool = False) -> RunHandle:
        """Accept an event (stored once, idempotently), resolve its one binding and start the run.

        The event is written together with the run's start record (one commit); an event that cannot start a
        run (no binding, unknown runner) is still stored, with a host record saying why. *minted*: see
        :meth:`start`.
        """
        try:
            if self.bindings is None:
                raise BindingNotFoundError("this host has no bindings configured")
            binding = self.bindings.resolve(event)
        except BindingNotFoundError as exc:
            await self._ingest(event)
            await self._host_record(event, "event.unhandled", {"reason": exc.message})
            raise
        return await self.start(event, binding, minted=minted)

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
        self,
        event: AgentEventEnvelope,
        binding: AgentBinding,
        *,
        ingested: bool = False,
        minted: bool = False,
    ) -> RunHandle:
        """Start a run and return its handle (the run proceeds in its own task).

        With stores, the event (unless *ingested* already) and the run's start record are committed before
        this returns: a duplicate event id raises :class:`DuplicateEventError` and nothing runs. *minted* says
        the event's id was made by this host for this submission (the time and 80 random bits), so no
        stored or starting event can have it and the start does not look for one; the unique key still
        refuses a duplicate at the commit.
        """
        try:
            descriptor = await self.registry.get(binding.runner_id)
            refuse_code_execution(descriptor, self.harness.policy if self.harness is not None else None)
        except HostError as exc:
            await self._refused(event, exc, ingested=ingested)
            raise
        run_id = "run_" + ordered_hex()
        snapshot = self.snapshots.build(run_id=run_id, descriptor=descriptor, binding=binding, event=event)
        state = RunState(
            run_id=run_id, binding=binding, descriptor=descriptor, snapshot=snapshot, event=event
        )
        begun: RunStart | None = None
        if self.stores is not None:
            try:
                begun = await self._read_start(
                    self.stores, state, include_event=not ingested, look_for_duplicate=not minted
                )
                if begun is None:
                    await self._persist_start(self.stores, state, include_event=not ingested)
            except RunnerDisabledError as exc:
                await self._refused(event, exc, ingested=ingested)
                raise
            if begun is None:
                state.log = self.stores.runs.log(run_id)
        handle = RunHandle(run_id, binding, snapshot, state=state)
        self._handles[run_id] = handle
        handle.control.task = asyncio.create_task(
            self._drive(handle, state), name=f"agentrunner-run-{run_id}"
        )
        # A runner that swallows the deadline's cancellation must still end: force it a grace period later.
        self._arm_watchdog(
            handle, state, at=_loop_time_for(snapshot.deadline_at) + self.force_end_grace_seconds
        )
        if begun is not None and self.stores is not None:
            await self._begin(self.stores, handle, state, begun)
        return handle

    async def _read_start(
        self, stores: RunStores, state: RunState, *, include_event: bool, look_for_duplicate: bool
    ) -> RunStart | None:
        """The start of a run the journal will commit with its first results, built from reads made on the
        loop (``None``: the start is committed on its own first, see :meth:`_persist_start`). Raises
        :class:`RunnerDisabledError` as that does."""
        reads = self._start_reads(state)
        duplicate_of = state.event.event_id if include_event and look_for_duplicate else None
        facts = await stores.read_start(reads, event_id=duplicate_of)
        if facts is None:
            return None
        history = self._history(state, facts)
        start = self._build_start(state, facts, history, include_event=include_event)
        state.state_snapshot = facts.state
        state.history = history
        return start

    async def _begin(self, stores: RunStores, handle: RunHandle, state: RunState, start: RunStart) -> None:
        """Queue *start* for the journal's next commit and wait for it. The run's task was created first, so
        it has its first turn before the journal writes: a short run's start, results and end share one
        commit. Nobody learns of the run (its id, a result) before that commit."""
        state.log = stores.runs.begin(start)
        state.start_persisted = True  # queued: the journal writes it before anything else of the run
        try:
            await state.log.begun()
        except asyncio.CancelledError:
            handle.detach()  # the caller went away before it could learn of the run: it ends unseen
            raise
        except Exception as exc:
            # nothing of the run is stored, nor will be: end it without a trace
            handle.detach()
            control = handle.control
            if handle.cancel_requested is None:
                handle.cancel_requested = "its start could not be stored"
            task = control.task
            if task is not None and not task.done() and control.started and not control.finishing:
                task.cancel()
            if isinstance(exc, DuplicateEventStoredError):
                raise DuplicateEventError(state.event.event_id) from None
            raise

    def _start_reads(self, state: RunState) -> StartReads:
        access = state.snapshot.access()
        return StartReads(
            runner_id=state.descriptor.runner_id,
            state_owners=access.state_owners if state.binding.state_policy.snapshot else None,
            conversation=access.conversation if self.pull is not None else None,
        )

    def _history(self, state: RunState, facts: StartFacts) -> HistoryHandles:
        """Where the conversation's history stood when the start's reads were made."""
        if self.pull is None:
            return HistoryHandles()
        return self.pull.history_handles_at(state.snapshot.access(), facts.transcript_seq, facts.event_seq)

    def _build_start(
        self, state: RunState, facts: StartFacts, history: HistoryHandles, *, include_event: bool
    ) -> RunStart:
        if facts.control is not None:
            raise RunnerDisabledError(facts.control.runner_id, facts.control.reason)
        return run_start(state, history, event=event_entry(state.event) if include_event else None)

    async def _refused(self, event: AgentEventEnvelope, exc: HostError, *, ingested: bool) -> None:
        """An event that cannot start a run is still stored, with a host record saying why."""
        if not ingested:
            await self._ingest(event)
            await self._host_record(event, "event.unhandled", {"reason": exc.message})

    async def _persist_start(self, stores: RunStores, state: RunState, *, include_event: bool) -> None:
        """Commit the start with the reads the context needs, in one transaction: the runner's disable switch
        (read at every start, not cached: a switch set by the CLI or another host counts at once), the state
        snapshot and the conversation's positions (read before the run's own user turn is written)."""
        reads = self._start_reads(state)

        def build(facts: StartFacts) -> RunStart:
            return self._build_start(state, facts, self._history(state, facts), include_event=include_event)

        try:
            facts = await stores.start_run(reads, build)
        except DuplicateEventStoredError:
            raise DuplicateEventError(state.event.event_id) from None
        state.state_snapshot = facts.state
        state.history = self._history(state, facts)
        state.start_persisted = True

    @contextlib.asynccontextmanager
    async def _session_turn(self, state: RunState, request: AgentRunRequest) -> AsyncGenerator[None]:
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

    def _harnessed(self, state: RunState) -> bool:
        """The run's request is scoped by the harness (a code-executing or bridge runner's run)."""
        caps = state.descriptor.manifest.capabilities
        return self.harness is not None and (caps.executes_code or caps.mcp_bridge)

    def _harness_scope(
        self, state: RunState, request: AgentRunRequest
    ) -> contextlib.AbstractAsyncContextManager[AgentRunRequest]:
        """The workspace policy and bridge registration of a code-executing / bridge runner's run."""
        if self.harness is None or not self._harnessed(state):
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
        control = handle.control
        if control.terminal_seen or control.finishing:
            return False  # the runner already ended the run; a cancel after the terminal changes nothing
        handle.cancel_requested = reason
        loop = asyncio.get_running_loop()
        self._arm_watchdog(handle, control.state, at=loop.time() + self.force_end_grace_seconds)
        try:
            conn = self.registry.connection(handle.snapshot.plugin_id)
            # asyncio.timeout, never wait_for: wait_for can swallow a cancellation of this caller on 3.11.
            async with asyncio.timeout(self.cancel_grace_seconds):
                await conn.cancel(run_id)
        except Exception:  # the runtime may already be gone; ending the task below is enough
            log.debug("cancel of %s could not reach the runtime", run_id, exc_info=True)
        task = control.task
        # A task cancelled before its first step never enters its try/finally; an unstarted run sees
        # cancel_requested itself as soon as it starts.
        if task is not None and not task.done() and control.started and not control.finishing:
            task.cancel()
        return True

    async def aclose(self) -> None:
        """Cancel every live run and wait for them to end (a task that ignores its cancellation is left behind
        after the force-end grace, logged as leaked)."""
        for run_id in list(self._handles):
            await self.cancel(run_id, reason="host shutting down")
        tasks = {h.control.task for h in self._handles.values() if h.control.task is not None}
        tasks |= self._force_ends
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=self.force_end_grace_seconds * 2)
            for task in pending:
                log.error("task %s ignored its cancellation through host shutdown; leaked", task.get_name())
        if self._live_audit is not None:
            await self._live_audit.aclose()

    # -- escalation --------------------------------------------------------------------------------------------

    def _arm_watchdog(self, handle: RunHandle, state: RunState, *, at: float) -> None:
        # on the shared alarms: nearly every run ends long before, and withdraws it
        timer = alarms().call_at(at, functools.partial(self._escalate, handle, state))
        handle.control.watchdogs.append(timer)

    def _escalate(self, handle: RunHandle, state: RunState) -> None:
        """The grace after a cancel or the deadline is over and the run has not ended: end it without its task."""
        if handle.done or handle.control.finishing:
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
        task = handle.control.task
        log.warning(
            "run %s (%s) ignored its cancellation for %gs: its end is recorded now and its task %s is left"
            " running (leaked)",
            state.run_id,
            state.descriptor.runner_id,
            grace,
            task.get_name() if task is not None else "?",
        )
        state.record("run.force_ended", {"code": _FORCE_ENDED, "cause": cause, "grace_seconds": grace})
        if state.leave_session is not None:
            state.leave_session()  # the leaked task keeps running; the session's next turn must not wait for it
        ender = asyncio.create_task(
            self._finish(handle, state, failure), name=f"agentrunner-end-{state.run_id}"
        )
        self._force_ends.add(ender)
        ender.add_done_callback(self._force_ends.discard)

    # -- the run -----------------------------------------------------------------------------------------------

    async def _drive(self, handle: RunHandle, state: RunState) -> None:
        run_id = state.run_id
        failure: Failure | None = None
        control = handle.control
        control.started = True
        try:
            if handle.cancel_requested is not None:
                raise asyncio.CancelledError
            state.live = self.dispatcher.register(state.snapshot)
            if self._live_audit is not None:
                self._live_audit.watch(state, state.live)  # its audit is queryable while it runs
            request = await self._prepare(state)
            conn = self.registry.connection(state.descriptor.plugin_id)
            deadline = _Deadline(_loop_time_for(state.snapshot.deadline_at))
            try:
                if state.snapshot.capabilities.stateful_session or self._harnessed(state):
                    async with (
                        self._session_turn(state, request),
                        self._harness_scope(state, request) as request,
                    ):
                        await self._relay(handle, state, conn.run(request))
                else:
                    # no session turn to take and nothing to scope (the usual run): no context managers to
                    # enter and leave around its results
                    await self._relay(handle, state, conn.run(request))
            except asyncio.CancelledError as exc:
                if deadline.withdraw():
                    raise TimeoutError from exc
                raise
            finally:
                deadline.withdraw()
        except asyncio.CancelledError:
            reason = handle.cancel_requested or "cancelled"
            failure = ("cancelled", f"run cancelled: {reason}", False)
            if handle.cancel_requested is None:
                raise  # not our cancellation: the host itself is being torn down
        except TimeoutError:
            failure = ("deadline_exceeded", "the run did not finish before its deadline", True)
        except RunViolation as v:
            failure = (v.code, v.message, False)
        except HarnessPolicyError as refused:
            failure = (refused.code, refused.message, False)
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

    async def _relay(self, handle: RunHandle, state: RunState, stream: AsyncGenerator[RawResult]) -> None:
        """Accept and deliver the results of the runner's *stream* up to its terminal one, then close it."""
        control = handle.control
        try:
            async for raw in stream:
                if handle.cancel_requested is not None:
                    # The cancellation may have been swallowed on its way through the runner: a run whose
                    # cancel was accepted never goes on to deliver (or complete).
                    raise asyncio.CancelledError
                if handle.force_ended:
                    break  # the host recorded the run's end already (past its deadline): read no further
                if state.stream_mask is not None:
                    # text held back in case it began a secret is released before what follows it
                    released = self.rules.release_stream(state, raw)
                    if released is not None:
                        await control.deliver(released)
                delivered = self.rules.accept(state, raw)
                if delivered is not None and not isinstance(delivered, DeliveredResult):
                    delivered = await delivered  # an inline artifact, stored first
                if state.terminal is not None:
                    control.terminal_seen = True
                if delivered is not None:
                    if not control.deliver_now(delivered):
                        await control.deliver(delivered)
                    if state.log is not None and state.log.backlogged:
                        await state.log.room()  # the store is behind: slow the runner down
                if state.terminal is not None:
                    break
        finally:
            await stream.aclose()  # the runner's own ``finally`` blocks run when the run ends early

    async def _prepare(self, state: RunState) -> AgentRunRequest:
        snapshot, event, binding = state.snapshot, state.event, state.binding
        data, too_big = self.contexts.event_data(event)
        raw_ref: RawEventRef | None = None
        if too_big:
            # Large event data goes to an artifact the run can read (artifacts.read_range / open_stream);
            # without stores there is nowhere to keep it, and the context only says it was cut.
            if self.stores is not None:
                raw_ref = await store_event_data(self.stores, state)
            state.record(
                "event.data_truncated",
                {"size": json.json_size(event.data), "artifact_id": raw_ref.ref_id if raw_ref else None},
            )
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
        # the model's own validator, without __init__'s Python wrapper (the context model is kept as it is)
        request: AgentRunRequest = AgentRunRequest.__pydantic_validator__.validate_python(
            {
                "runner_id": snapshot.runner_id,
                "runner_name": state.descriptor.manifest.name,
                "context": ctx,
                "call_token": state.live.call_token if state.live is not None else None,
            }
        )
        return request

    # -- the end --------------------------------------------------------------------------------------------

    async def _finish(self, handle: RunHandle, state: RunState, failure: Failure | None) -> None:
        control = handle.control
        if control.finishing:
            return  # already ended (force-ended while its task went on): one terminal per run
        final_item: DeliveredResult | None = None
        control.finishing = True
        for timer in control.watchdogs:
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
                terminal = host_failure(state, code, message, retryable=retryable)
                state.host_seq += 1
                encoded = terminal.__pydantic_serializer__.to_json(terminal)
                store_result(state, None, terminal.type, encoded)
                state.terminal = terminal
                final_item = DeliveredResult(state.host_seq, terminal, encoded)
            if state.delta_buffer:
                # the streamed text of a reply that never completed, at most one result's size of it
                text = "".join(state.delta_buffer)
                partial: JsonObject = {"role": "assistant", "content": text}
                if state.delta_truncated:
                    partial["metadata"] = {"truncated": True}
                state.assistant_turn(text, partial)
                state.clear_deltas()
            for call_id, name in state.open_tool_calls.items():
                state.warn("violation.tool_unpaired", f"tool call {call_id} ({name}) never completed")
            harness_tools_unfinished(state)
            state.summarise_warnings()
        finally:
            live = self.dispatcher.unregister(state.run_id)
            terminal = state.terminal
            outcome = state.outcome()
            interrupted: BaseException | None = None
            try:
                if self.stores is not None:
                    queued = self._queue_finish(self.stores, state, live)
                    if queued is not None:
                        await queued  # the end is queued: a cancel stops only this wait
                    else:
                        # a shield is a task of its own: only when the end cannot be queued at once
                        await asyncio.shield(self._persist_finish(state, live))
            except asyncio.CancelledError as exc:
                # The shielded write goes on; the outcome must still be published before we give way.
                interrupted = exc
            except Exception:
                if _never_stored(state):
                    log.debug("run %s ended; its start could not be stored, nor its end", state.run_id)
                else:
                    log.exception("could not persist the end of run %s", state.run_id)
            self._handles.pop(state.run_id, None)
            control.deliver_final(final_item)
            if not control.outcome.done():
                control.outcome.set_result(outcome)
            del terminal
            if interrupted is not None:
                raise interrupted

    # -- persistence hooks (implemented over agentrunner_host.stores) -------------------------------------------

    async def _ingest(self, event: AgentEventEnvelope) -> None:
        if self.stores is None:
            return
        outcome = await self.stores.events.append(event_entry(event))
        if outcome.duplicate:
            raise DuplicateEventError(event.event_id, run_id=outcome.event.run_id)

    async def _host_record(self, event: AgentEventEnvelope, kind: str, data: JsonObject) -> None:
        if self.stores is None:
            return
        await self.stores.events.append_many(
            [
                EventEntry(
                    event_id=new_event_id(),
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

    def _queue_finish(
        self, stores: RunStores, state: RunState, live: LiveRun | None
    ) -> asyncio.Future[None] | None:
        """The usual end, queued for the journal right here (no task): the run's start is stored or queued
        and no write of its live audit is in flight. Returns the future of the commit, or ``None`` when the
        end needs :meth:`_persist_finish` (the caller shields it)."""
        if _never_stored(state) or not state.start_persisted:
            return None
        if live is not None and self._live_audit is not None and not self._live_audit.settled(live):
            return None
        return stores.runs.queue_finish(finish_record(state, live))

    async def _persist_finish(self, state: RunState, live: LiveRun | None) -> None:
        if self.stores is None or _never_stored(state):
            return
        if live is not None and self._live_audit is not None:
            await self._live_audit.settle(live)  # what it wrote while live is not written twice
        await persist_finish(self.stores, state, live)


def _never_stored(state: RunState) -> bool:
    """The run's start, queued with its results (``runs.begin``), could not be committed: nothing of the run
    is stored, and its end has nothing to update."""
    result_log = state.log
    return result_log is not None and result_log.error is not None and not result_log.started


class _Deadline:
    """A run's deadline as ``asyncio.timeout_at`` keeps it, on the shared alarms instead of a loop timer of its
    own (and with no context manager to enter and leave): due, it cancels the task;
    :meth:`withdraw` says whether that cancellation is the one the task ended by (a ``TimeoutError``)."""

    __slots__ = ("_alarm", "_cancelling", "_expired", "_task")

    def __init__(self, when: float) -> None:
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - a run is driven by its own task
            raise RuntimeError("a deadline is kept for a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._expired = False
        self._alarm: Alarm | None = alarms().call_at(when, self._expire)

    def _expire(self) -> None:
        self._alarm = None
        self._expired = True
        self._task.cancel()

    def withdraw(self) -> bool:
        """Stop the deadline (idempotent); ``True`` when it cancelled the task and nothing else did since it
        started (the cancellation is the deadline's: the caller raises ``TimeoutError`` for it)."""
        if self._alarm is not None:
            self._alarm.cancel()
            self._alarm = None
            return False
        if not self._expired:
            return False
        self._expired = False  # its cancellation is taken back once, as asyncio.Timeout's exit does
        return self._task.uncancel() <= self._cancelling


def _loop_time_for(deadline_at: float) -> float:
    loop = asyncio.get_running_loop()
    return loop.time() + (deadline_at - time.time())
