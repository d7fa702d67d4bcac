"""Drive one run of a runner against the simulated host and record everything that happened.

:func:`drive_run` plays the host's side of the run contract in process: it iterates ``runner.run(ctx, api)``,
validates each result as it arrives, applies ``state.updated`` to the host, ends the run's back-call session
at the terminal result, keeps reading to catch output after it, and optionally cancels the run or lets its
deadline pass. The :class:`RunRecord` it returns is what the invariants judge.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast

from agentrunner import (
    KNOWN_RESULT_TYPES,
    TERMINAL_RESULT_TYPES,
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunResultAdapter,
    ParsedResult,
    parse_result,
)
from pydantic import BaseModel, ValidationError

from .host import CallRecord, FaultPlan, SimulatedHost

__all__ = ["CancelPlan", "Ending", "ObservedResult", "RunHandle", "RunRecord", "drive_run", "start_run"]

Ending = Literal["returned", "raised", "cancelled", "abandoned"]
"""How run() ended: it returned, raised, let a cancel propagate, or never stopped and was abandoned."""

_MODEL_DUMP: Final = BaseModel.model_dump
_RESULT_VALIDATOR: Final = AgentRunResultAdapter.validator
_HOST_APPLIES: Final = frozenset({"state.updated", "artifact.created"})
"""Result types :meth:`SimulatedHost.apply` acts on."""

_HUNG_AFTER = 10.0
"""Seconds a run without a deadline may take before the host gives up on it."""
_STOP_TRIES = 5
_STOP_WAIT = 0.02


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelPlan:
    """When the host cancels a run: whichever comes first of a back-call waiting for its answer,
    *after_results* results, or *after_seconds* seconds."""

    after_results: int = 0
    """Cancel once this many results arrived (0: no result count)."""
    after_seconds: float = 0.02
    """Cancel this long after the start at the latest."""
    grace: float = 0.5
    """Seconds the run has to stop once cancelled."""


@dataclass(slots=True, kw_only=True)
class ObservedResult:
    """One item a runner yielded, as the host saw it."""

    index: int
    """0-based position in the stream."""
    raw: dict[str, Any] | None
    """The item as a JSON object (``None`` when it could not be encoded)."""
    parsed: ParsedResult | None
    """The validated result (``None`` when it failed validation)."""
    problem: str | None = None
    """Why it failed validation."""
    after_cancel: bool = False
    """It arrived after the host cancelled the run."""

    @property
    def type(self) -> str | None:
        """The result's ``type`` when it has one."""
        if self.parsed is not None:
            return self.parsed.type
        value = self.raw.get("type") if self.raw is not None else None
        return value if isinstance(value, str) else None

    @property
    def is_terminal(self) -> bool:
        """Whether it is a valid terminal result."""
        return self.parsed is not None and self.parsed.type in TERMINAL_RESULT_TYPES


def _no_results() -> list[ObservedResult]:
    # a plain function, not ``lambda: list[ObservedResult]()``: calling the generic alias costs more than the
    # list (the kit builds a record per run)
    return []


def _no_calls() -> list[CallRecord]:
    return []


@dataclass(slots=True, kw_only=True)
class RunRecord:
    """Everything observed about one run."""

    ctx: AgentRunContext
    """The context the run received."""
    results: list[ObservedResult] = field(default_factory=_no_results)
    """What it yielded, in order."""
    ending: Ending = "returned"
    """How run() ended."""
    exception: BaseException | None = None
    """What run() raised, when it raised."""
    calls: list[CallRecord] = field(default_factory=_no_calls)
    """Back-calls made for this run (including late ones)."""
    cancelled_at: int | None = None
    """Number of results received when the host cancelled the run (``None``: never cancelled)."""
    stopped_in_grace: bool | None = None
    """After a cancel: whether run() stopped within the grace period."""
    deadline_overrun: float | None = None
    """Seconds the run was still going past ``deadline_at`` + grace, when the host had to end it."""
    duration: float = 0.0
    """Wall time of the run in seconds."""
    crash_requirement: str = "run.no-unhandled-exception"
    """Requirement a non-API exception from run() breaks in this scenario."""
    marker: str | None = None
    """Unique marker of this run's data, for leak detection."""

    def output_text(self) -> str:
        """Every result, encoded, for leak searches."""
        return "\n".join(str(r.raw) for r in self.results)

    def describe(self) -> str:
        """A short summary: the types yielded and how the run ended."""
        types = ", ".join(r.type or "?" for r in self.results) or "nothing"
        return f"yielded [{types}]; {self.ending}" + (f" ({self.exception!r})" if self.exception else "")


def _observe(index: int, item: object, *, after_cancel: bool) -> ObservedResult:
    raw: dict[str, Any] | None
    if isinstance(item, BaseModel):
        try:
            cls = type(item)
            if cls.model_dump is _MODEL_DUMP:
                # model_dump's own serializer called directly (the same arguments): its wrapper costs about as
                # much as the dump of a small result. A model that overrides model_dump keeps its own.
                dumped: dict[str, object] = cls.__pydantic_serializer__.to_python(
                    item, mode="json", warnings=False
                )
                raw = dumped
            else:
                raw = item.model_dump(mode="json", warnings=False)
        except Exception as exc:  # a broken model must be reported, not crash the kit
            return ObservedResult(index=index, raw=None, parsed=None, problem=f"cannot encode: {exc}")
    elif isinstance(item, dict):
        raw = {str(k): v for k, v in cast(dict[Any, Any], item).items()}
    else:
        return ObservedResult(
            index=index, raw=None, parsed=None, problem=f"yielded a {type(item).__name__}, not a result"
        )
    try:
        parsed = _parse(raw)
    except (ValidationError, ValueError) as exc:
        problem = str(exc).splitlines()[0] if not isinstance(exc, ValidationError) else _first_error(exc)
        return ObservedResult(index=index, raw=raw, parsed=None, problem=problem, after_cancel=after_cancel)
    return ObservedResult(index=index, raw=raw, parsed=parsed, after_cancel=after_cancel)


def _parse(raw: dict[str, object]) -> ParsedResult:
    """:func:`~agentrunner.parse_result` of a decoded object, with the result union's validator called directly
    (the TypeAdapter's wrapper costs a sixth of a small result's validation)."""
    result_type = raw.get("type")
    if not isinstance(result_type, str) or result_type not in KNOWN_RESULT_TYPES:
        return parse_result(raw)  # its errors and UnknownResult
    return _RESULT_VALIDATOR.validate_python(raw)


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"])
    return f"{where}: {error['msg']}"


class RunHandle:
    """A run in progress on the simulated host; obtained from :func:`start_run`."""

    record: RunRecord
    """What has been observed so far (complete once :meth:`finish` returned)."""

    def __init__(self, runner: AgentRunner, record: RunRecord, host: SimulatedHost, api: AgentRunAPI) -> None:
        self.record = record
        self._host = host
        self._started = time.monotonic()
        self._waiters: list[asyncio.Future[None]] = []
        self._task = asyncio.create_task(self._consume(runner, api), name=f"run {record.ctx.run_id}")

    @property
    def done(self) -> bool:
        """Whether run() has stopped."""
        return self._task.done()

    async def _consume(self, runner: AgentRunner, api: AgentRunAPI) -> None:
        record, host = self.record, self._host
        run_id = record.ctx.run_id
        stream = aiter(runner.run(record.ctx, api))
        try:
            async for item in stream:
                observed = _observe(len(record.results), item, after_cancel=record.cancelled_at is not None)
                record.results.append(observed)
                parsed = observed.parsed
                if parsed is not None:
                    # Only these types change the host (SimulatedHost.apply ignores every other one).
                    if parsed.type in _HOST_APPLIES:
                        host.apply(run_id, parsed)
                    elif parsed.type in TERMINAL_RESULT_TYPES:
                        host.close(run_id)
        finally:
            try:
                closer = getattr(stream, "aclose", None)
                if closer is not None:
                    await closer()
            finally:
                self._release()

    def _release(self, _: object = None) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    async def _wait(self, timeout: float) -> None:
        """Wait until run() stopped or *timeout* seconds passed, whichever comes first.

        Like ``asyncio.wait({task}, timeout=...)``, but the run's task wakes the waiter from its own last step
        (``_consume``'s ``finally``), so the waiter resumes in the next loop iteration instead of two later
        (the task's done callbacks, then asyncio.wait's own): about a tenth of a short kit run's instructions.
        """
        if self._task.done():
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        timer = loop.call_later(timeout, _wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    async def cancel(self, *, grace: float) -> None:
        """Cancel the run as the host does and give it *grace* seconds to stop (then end it by force)."""
        if self._task.done() or self.record.cancelled_at is not None:
            return
        self.record.cancelled_at = len(self.record.results)
        # A task cancelled before its first step never runs _consume's finally: its done callback still wakes
        # the waiters. Added here, the only place a waited-for run is cancelled, so a run nobody cancels pays
        # no callback (one loop handle per run).
        self._task.add_done_callback(self._release)
        self._task.cancel()
        await self._wait(grace)
        self.record.stopped_in_grace = self._task.done()
        if not self._task.done():
            # Already judged late; cancelling again a few times is all a host owes it (a runner swallowing
            # every cancel is abandoned, not waited for).
            await _stop(self._task, within=min(grace, _STOP_TRIES * _STOP_WAIT))

    async def cancel_when_due(self, plan: CancelPlan) -> None:
        """Cancel once *plan* says so: after its result count, or while the run waits on a back-call."""
        run_id = self.record.ctx.run_id
        give_up = self._started + plan.after_seconds
        while not self._task.done() and time.monotonic() < give_up:
            due = plan.after_results > 0 and len(self.record.results) >= plan.after_results
            if due or self._host.pending(run_id):
                break
            await asyncio.sleep(0.001)
        await self.cancel(grace=plan.grace)

    async def finish(
        self, *, deadline_grace: float = 0.5, linger: float = 0.0, hung_after: float = _HUNG_AFTER
    ) -> RunRecord:
        """Wait for the run to end (enforcing its deadline) and return the complete record.

        A run without a deadline that is still going after *hung_after* seconds is abandoned; a run that was
        cancelled and did not stop is abandoned at once (its cancel already waited the grace period).
        """
        record, task = self.record, self._task
        deadline = record.ctx.runtime.deadline_at
        try:
            if record.cancelled_at is not None:
                pass
            elif deadline is not None:
                budget = max(0.0, deadline - time.time()) + deadline_grace
                await self._wait(budget)
                if not task.done():
                    record.deadline_overrun = deadline_grace
            else:
                await self._wait(hung_after)
            if not task.done():
                await _stop(task, within=_STOP_TRIES * _STOP_WAIT)
        finally:
            if not task.done():  # our caller was cancelled: never leave the run behind
                task.cancel()
        record.duration = time.monotonic() - self._started
        if not task.done():
            record.ending = "abandoned"
        elif task.cancelled():
            record.ending = "cancelled"
        elif task.exception() is not None:
            record.ending = "raised"
            record.exception = task.exception()
        self._host.close(record.ctx.run_id)
        if linger > 0:
            await asyncio.sleep(linger)
        record.calls = self._host.calls_for(record.ctx.run_id)
        return record


async def start_run(
    runner: AgentRunner,
    ctx: AgentRunContext,
    host: SimulatedHost,
    *,
    plan: FaultPlan | None = None,
    crash_requirement: str = "run.no-unhandled-exception",
    marker: str | None = None,
) -> RunHandle:
    """Start *runner* on *ctx* against *host* in the current event loop and return its handle."""
    api = host.open(ctx, plan=plan)
    record = RunRecord(ctx=ctx, crash_requirement=crash_requirement, marker=marker)
    return RunHandle(runner, record, host, api)


async def drive_run(
    runner: AgentRunner,
    ctx: AgentRunContext,
    host: SimulatedHost,
    *,
    plan: FaultPlan | None = None,
    cancel: CancelPlan | None = None,
    deadline_grace: float = 0.5,
    linger: float = 0.0,
    crash_requirement: str = "run.no-unhandled-exception",
    marker: str | None = None,
) -> RunRecord:
    """Run *runner* on *ctx* against *host* and record the run (see the module docstring).

    *cancel* cancels the run as planned; *linger* keeps watching the host for that many seconds after the run
    ended, to catch late back-calls.
    """
    handle = await start_run(runner, ctx, host, plan=plan, crash_requirement=crash_requirement, marker=marker)
    if cancel is not None:
        await handle.cancel_when_due(cancel)
    return await handle.finish(deadline_grace=deadline_grace, linger=linger)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def _stop(task: asyncio.Task[None], *, within: float) -> None:
    """End a run that did not stop by itself: cancel it again a few times, for at most *within* seconds."""
    for _ in range(_STOP_TRIES):
        if task.done():
            return
        task.cancel()
        await asyncio.wait({task}, timeout=within / _STOP_TRIES)
