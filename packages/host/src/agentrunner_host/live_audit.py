"""Back-call audit records stored while their run is still live, not only when it ends.

The dispatcher appends one :class:`~agentrunner_host.dispatcher.AuditRecord` per back-call to its run's
:class:`~agentrunner_host.dispatcher.LiveRun` and calls the run's ``notify``. :class:`LiveAuditWriter` then
writes the records not stored yet as ``host.backcall`` event-log records (the form the audit query reads),
every run's pending records in one transaction, a short ``delay`` after the first of them: a run that ends
within it has its records written with its end instead, so short runs cost no extra write. The end of a run
first :meth:`~LiveAuditWriter.settle`\\ s it: it waits for a write of that run in flight, and the end then stores
whatever is left (``live.audit[live.audit_stored:]``), so every record is stored exactly once and in call
order. Stored records are dropped from ``live.audit`` (memory per run is bounded by one flush's calls, not by
the run's total). A write that fails leaves its records to the next write or to the run's end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Final

from .dispatcher import LiveRun
from .persistence import backcall_entry
from .ports import RunStores
from .run_state import RunState
from .stores import EventEntry

__all__ = ["AUDIT_FLUSH_DELAY", "LiveAuditWriter"]

log = logging.getLogger(__name__)

AUDIT_FLUSH_DELAY: Final = 0.25
"""Seconds between a run's first unstored record and its write (a run ending sooner writes them itself)."""


class LiveAuditWriter:
    """Writes the audit records of live runs to the event log (see the module docstring)."""

    def __init__(self, stores: RunStores, *, delay: float = AUDIT_FLUSH_DELAY) -> None:
        self._stores = stores
        self._delay = delay
        self._dirty: dict[str, tuple[RunState, LiveRun]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._writing: set[str] = set()
        self._written = asyncio.Condition()

    def watch(self, state: RunState, live: LiveRun) -> None:
        """Store *live*'s records as they are made (until :meth:`settle`)."""
        live.notify = lambda: self._mark(state, live)

    def _mark(self, state: RunState, live: LiveRun) -> None:
        self._dirty[state.run_id] = (state, live)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="agentrunner-live-audit")
        self._wake.set()

    def settled(self, live: LiveRun) -> bool:
        """:meth:`settle` without waiting: stop watching *live* and say whether no write of its records is in
        flight (then what is unstored is the end's to store; otherwise call :meth:`settle`)."""
        live.notify = None
        run_id = live.snapshot.run_id
        self._dirty.pop(run_id, None)
        return run_id not in self._writing

    async def settle(self, live: LiveRun) -> None:
        """Stop watching *live* (its run is ending) and wait until no write of its records is in flight: what
        is still unstored then, ``live.audit[live.audit_stored:]``, is the end's to store."""
        live.notify = None
        run_id = live.snapshot.run_id
        self._dirty.pop(run_id, None)
        async with self._written:
            await self._written.wait_for(lambda: run_id not in self._writing)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            await asyncio.sleep(self._delay)  # gather the calls of the next moment; short runs end meanwhile
            self._wake.clear()
            await self._write()

    async def _write(self) -> None:
        batch, self._dirty = self._dirty, {}
        entries: list[EventEntry] = []
        ends: list[tuple[LiveRun, int]] = []
        for state, live in batch.values():
            if not state.start_persisted:
                self._dirty[state.run_id] = (state, live)  # its run record comes first
                continue
            end = len(live.audit)
            entries += [backcall_entry(state, record) for record in live.audit[live.audit_stored : end]]
            ends.append((live, end))
        if not entries:
            if self._dirty:
                self._wake.set()
            return
        runs = {live.snapshot.run_id for live, _ in ends}
        self._writing |= runs
        try:
            await self._stores.events.store_many(entries)
        except Exception:
            # The records stay unstored: the next write or the run's end stores them.
            log.warning("audit records of %d live run(s) could not be stored yet", len(runs), exc_info=True)
        else:
            for live, end in ends:
                # Stored records leave the run's memory: a run making back-calls for minutes (the default
                # rate allows 200/s) holds only those of the last flush, not all of them until it ends.
                del live.audit[: max(live.audit_stored, end)]
                live.audit_stored = 0
        finally:
            self._writing -= runs
            async with self._written:
                self._written.notify_all()

    async def aclose(self) -> None:
        """Stop writing (runs still live store their records when they end)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
