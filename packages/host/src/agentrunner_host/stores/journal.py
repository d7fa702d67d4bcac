"""The results of live runs on their way to the database: group commit with a per-run commit watermark.

A result is acknowledged (delivered to any reader) only once it is committed, so after a crash every result a
client saw is stored with the same ``host_seq``. Committing each result alone would cost a transaction per
delta; instead a run appends its results to its :class:`ResultLog` without waiting, and one writer task of the
process commits everything pending — the results of every live run and the ends of the runs that finished —
in one transaction, then raises each run's watermark. Readers wait on the watermark, not on the write.

The writer runs as soon as the appending task yields (so results produced in one go share a commit) or,
with a flush window, that long after the first pending write (more company per commit, more latency).
A run's start may travel the same way (:meth:`ResultLog.begin`): it is then committed with the run's first
results, in the same transaction and before them, and a short run (its start, results and end ready within
one loop turn) costs one commit. Nobody may learn of such a run before :meth:`ResultLog.begun` returns.
A run whose results are not committed yet is slowed down once its backlog passes a bound (bytes and count):
host memory is bounded by the backlog, not by what the run produces. A run's end is queued behind its own
results and is never committed before them. When a grouped transaction fails, every part of it is written
on its own, so one run's error never fails another.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from .errors import StoreError

__all__ = [
    "DEFAULT_BACKLOG_BYTES",
    "DEFAULT_BACKLOG_RESULTS",
    "DEFAULT_FLUSH_WINDOW",
    "Journal",
    "JournalEntry",
    "ResultLog",
    "ResultLogError",
]

log = logging.getLogger("agentrunner.host.stores")

R = TypeVar("R")
F = TypeVar("F")
S = TypeVar("S")
B = TypeVar("B")

DEFAULT_FLUSH_WINDOW: Final = 0.0
"""Seconds the writer waits after the first pending write before it commits (0: as soon as it runs)."""
DEFAULT_BACKLOG_BYTES: Final = 4 * 1024 * 1024
"""Uncommitted result bytes of one run beyond which the run waits for the writer."""
DEFAULT_BACKLOG_RESULTS: Final = 1024
"""Uncommitted results of one run beyond which the run waits for the writer."""


class ResultLogError(StoreError):
    """The results of a run could not be committed (the run cannot acknowledge them)."""


@dataclass(frozen=True, slots=True)
class JournalEntry(Generic[R, F, S, B]):
    """What one grouped transaction writes: run starts, appended results per run, their side writes, whole
    run ends (in this order)."""

    results: Sequence[R]
    """Results, in append order (every run's own results in ``host_seq`` order)."""
    finishes: Sequence[F]
    """Run ends; each comes after every result its run appended before it."""
    side: Sequence[S] = ()
    """Writes a result carries (state updates), in append order: committed with their result."""
    starts: Sequence[B] = ()
    """Starts of runs whose results (and ends) may be in this entry: written before them."""


class ResultLog(Generic[R, S, B]):
    """The results one live run appended, and how far they are committed."""

    __slots__ = (
        "_begun",
        "_begun_waiters",
        "_journal",
        "_max_bytes",
        "_max_results",
        "_on_begun",
        "_pending",
        "_pending_bytes",
        "_room",
        "_start",
        "_unsettled",
        "_unsettled_bytes",
        "_waiter",
        "committed",
        "error",
        "run_id",
        "started",
    )

    def __init__(
        self, journal: Journal[R, Any, S, B], run_id: str, *, max_bytes: int, max_results: int
    ) -> None:
        self._journal = journal
        self.run_id = run_id
        """Run."""
        self.committed = 0
        """The highest ``host_seq`` committed (results are appended in order)."""
        self.error: BaseException | None = None
        """Why the results could not be committed, once that happened."""
        self._pending: list[tuple[int, R, S | None]] = []
        self._pending_bytes = 0
        self._unsettled = 0
        self._unsettled_bytes = 0
        self._max_bytes = max_bytes
        self._max_results = max_results
        self._waiter: asyncio.Future[None] | None = None
        self._room: asyncio.Future[None] | None = None
        self._start: B | None = None
        self._begun: BaseException | bool | None = None
        """``None``: not begun through this log; ``False``: its start is queued; ``True``: committed; an
        error: the start could not be committed."""
        self._begun_waiters: list[asyncio.Future[None]] = []
        self._on_begun: Callable[[], None] | None = None
        self.started = True
        """The run's start is committed (before this log was made, or by the journal after :meth:`begin`)."""

    def begin(self, start: B, *, settled: Callable[[], None] | None = None) -> None:
        """Queue the run's *start* for the next commit, before anything appended to this log (once, before
        the first :meth:`append`); *settled* is called once the start is committed or failed."""
        if self._start is not None or self._begun is not None or self._pending:
            raise RuntimeError(f"run {self.run_id} is begun once, before its results")
        self._start = start
        self.started = False
        self._on_begun = settled
        self._begun = False
        self._journal.mark(self)

    async def begun(self) -> None:
        """Wait until the start queued by :meth:`begin` is committed; raises the write's own error when it
        cannot be (nothing of the run is stored then). A waiter that is cancelled leaves the start queued."""
        outcome = self._begun
        if outcome is None:
            raise RuntimeError(f"run {self.run_id} was not begun through its log")
        if outcome is False:
            # A future of this waiter's own, awaited directly: cancelling the waiter cancels only it (what
            # asyncio.shield around one shared future gave, at two loop turns per wake-up instead of one).
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._begun_waiters.append(waiter)
            await waiter
        elif outcome is not True:
            raise outcome

    def append(self, host_seq: int, record: R, *, size: int, side: S | None = None) -> None:
        """Queue *record* (the result numbered *host_seq*, *size* bytes encoded) for the next commit, with
        the *side* write it carries (committed in the same transaction)."""
        self._pending.append((host_seq, record, side))
        if side is not None:
            self._journal.side_queued()
        self._pending_bytes += size
        self._unsettled += 1
        self._unsettled_bytes += size
        self._journal.mark(self)

    @property
    def backlogged(self) -> bool:
        """More is uncommitted than the bound allows: the producer should wait for :meth:`room`."""
        return self._unsettled > self._max_results or self._unsettled_bytes > self._max_bytes

    async def room(self) -> None:
        """Wait until the uncommitted backlog is back under its bound (or the log failed)."""
        while self.backlogged and self.error is None:
            self._room = asyncio.get_running_loop().create_future()
            await self._room

    async def durable(self, host_seq: int) -> None:
        """Wait until the result *host_seq* is committed; raises :class:`ResultLogError` if it never will be."""
        while self.committed < host_seq:
            if self.error is not None:
                raise ResultLogError(f"results of run {self.run_id} could not be stored") from self.error
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter

    def _take(self) -> tuple[B | None, list[tuple[int, R, S | None]], int]:
        start, taken, size = self._start, self._pending, self._pending_bytes
        self._start, self._pending, self._pending_bytes = None, [], 0
        return start, taken, size

    def _settle(
        self, start: B | None, taken: list[tuple[int, R, S | None]], size: int, error: BaseException | None
    ) -> None:
        self._unsettled -= len(taken)
        self._unsettled_bytes -= size
        if error is not None:
            self.error = self.error or error
        else:
            if start is not None:
                self.started = True
            if taken:
                self.committed = max(self.committed, taken[-1][0])
        if start is not None and self._begun is False:
            self._begun = True if error is None else error
            waiters, self._begun_waiters = self._begun_waiters, []
            for waiter in waiters:
                _settle(waiter, error)
            if self._on_begun is not None:
                self._on_begun()
        for waiter in (self._waiter, self._room):
            if waiter is not None and not waiter.done():
                waiter.set_result(None)


class Journal(Generic[R, F, S, B]):
    """The process's one writer of live results and run ends (see the module docstring)."""

    def __init__(
        self,
        write: Callable[[JournalEntry[R, F, S, B]], Awaitable[None]],
        *,
        flush_window: float = DEFAULT_FLUSH_WINDOW,
        backlog_bytes: int = DEFAULT_BACKLOG_BYTES,
        backlog_results: int = DEFAULT_BACKLOG_RESULTS,
    ) -> None:
        self._write = write
        self.flush_window = flush_window
        """Seconds to collect writes before a commit."""
        self._backlog_bytes = backlog_bytes
        self._backlog_results = backlog_results
        self._dirty: dict[int, ResultLog[R, S, B]] = {}
        self._side_queued = 0
        self._side_settled = 0
        self._side_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._finishes: list[tuple[F, asyncio.Future[None]]] = []
        self._drainer: asyncio.Task[None] | None = None
        self._closed = False

    def log(self, run_id: str) -> ResultLog[R, S, B]:
        """A new result log for the live run *run_id*."""
        return ResultLog(
            self,
            run_id,
            max_bytes=self._backlog_bytes,
            max_results=self._backlog_results,
        )

    def side_queued(self) -> None:
        """A side write was queued (see :meth:`side_settled`)."""
        self._side_queued += 1

    async def side_settled(self) -> None:
        """Wait until every side write queued so far is committed (or failed): a read after this sees them.
        Returns at once when none is pending."""
        target = self._side_queued
        if self._side_settled >= target:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._side_waiters.append((target, future))
        await future  # the caller's own: a cancelled caller cancels only it (_settle skips a done future)

    def _sides_done(self, count: int) -> None:
        if not count:
            return
        self._side_settled += count
        ready = [w for w in self._side_waiters if w[0] <= self._side_settled]
        self._side_waiters = [w for w in self._side_waiters if w[0] > self._side_settled]
        for _, future in ready:
            _settle(future, None)

    def mark(self, result_log: ResultLog[R, S, B]) -> None:
        """*result_log* has pending results."""
        self._dirty.setdefault(id(result_log), result_log)
        self._wake()

    async def finish(self, finish: F) -> None:
        """Commit *finish* after every result appended so far; returns once committed, raises its own error."""
        await self.queue_finish(finish)

    def queue_finish(self, finish: F) -> asyncio.Future[None]:
        """Queue *finish* (as :meth:`finish`) now and return the future of its commit, for the caller to
        await: cancelling it cancels only the wait, the end queued is still committed (``_settle`` skips a
        done future)."""
        if self._closed:
            raise RuntimeError("the stores are closed")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._finishes.append((finish, future))
        self._wake()
        return future

    def _wake(self) -> None:
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain(), name="agentrunner-journal")

    async def _drain(self) -> None:
        while self._dirty or self._finishes:
            # Let every task that is ready add its writes first: results produced in one go share a commit.
            # With no window and no other callback ready, no task can add any before this write: a loop turn
            # (an epoll_wait) saved per commit, the serial request's case.
            if self.flush_window or not _loop_idle():
                await asyncio.sleep(self.flush_window)
            logs = list(self._dirty.values())
            self._dirty.clear()
            taken = [(result_log, *result_log._take()) for result_log in logs]  # pyright: ignore[reportPrivateUsage]
            finishes, self._finishes = self._finishes, []
            starts = [start for _, start, _, _ in taken if start is not None]
            results = [record for _, _, part, _ in taken for _, record, _ in part]
            side = [extra for _, _, part, _ in taken for _, _, extra in part if extra is not None]
            try:
                await self._write(JournalEntry(results, [f for f, _ in finishes], side, starts))
            except asyncio.CancelledError:
                error = RuntimeError("the stores were closed during the write")
                for result_log, start, part, size in taken:
                    result_log._settle(start, part, size, error)  # pyright: ignore[reportPrivateUsage]
                for _, future in finishes:
                    _settle(future, error)
                self._sides_done(len(side))
                raise
            except Exception as exc:
                if len(taken) + len(finishes) == 1:
                    for result_log, start, part, size in taken:
                        if start is None:  # a start's error is its caller's to report (a duplicate event...)
                            log.error("results of run %s could not be stored: %s", result_log.run_id, exc)
                        result_log._settle(start, part, size, exc)  # pyright: ignore[reportPrivateUsage]
                    for _, future in finishes:
                        _settle(future, exc)
                    self._sides_done(len(side))
                    continue
                await self._one_by_one(taken, finishes)
                self._sides_done(len(side))
            else:
                # the ends first: a run whose end and start are in this commit closes its delivery as its
                # task resumes, before its submitter does, so a reader sends the results and the end at once
                # (all are settled in this one step, before any waiting task runs)
                for _, future in finishes:
                    _settle(future, None)
                for result_log, start, part, size in taken:
                    result_log._settle(start, part, size, None)  # pyright: ignore[reportPrivateUsage]
                self._sides_done(len(side))

    async def _one_by_one(
        self,
        taken: list[tuple[ResultLog[R, S, B], B | None, list[tuple[int, R, S | None]], int]],
        finishes: list[tuple[F, asyncio.Future[None]]],
    ) -> None:
        # starts and results first, run by run, then the ends: a run's end still comes after its results
        for result_log, start, part, size in taken:
            try:
                side = [extra for _, _, extra in part if extra is not None]
                starts = [] if start is None else [start]
                await self._write(JournalEntry([record for _, record, _ in part], [], side, starts))
            except Exception as exc:
                if start is None:
                    log.error("results of run %s could not be stored: %s", result_log.run_id, exc)
                result_log._settle(start, part, size, exc)  # pyright: ignore[reportPrivateUsage]
            else:
                result_log._settle(start, part, size, None)  # pyright: ignore[reportPrivateUsage]
        for finish, future in finishes:
            try:
                await self._write(JournalEntry([], [finish]))
            except Exception as exc:
                _settle(future, exc)
            else:
                _settle(future, None)

    async def aclose(self) -> None:
        """Commit what is pending and refuse new run ends."""
        self._closed = True
        while self._drainer is not None and not self._drainer.done():
            await asyncio.gather(self._drainer, return_exceptions=True)


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


def _loop_idle() -> bool:
    """The running loop has no callback ready besides the one running now.

    The ready queue is an attribute of asyncio's own loops (``BaseEventLoop._ready``) and of no public API; a
    loop without it (another implementation) never counts as idle, so the drain keeps its turn there."""
    ready: object = getattr(asyncio.get_running_loop(), "_ready", None)
    return isinstance(ready, deque) and not ready
