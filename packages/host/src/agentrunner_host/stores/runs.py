"""Runs and their results: one transaction when a run starts, one when it ends (on SQLite often both in one).

``start`` writes the run row, its start records (e.g. ``run.started`` with the snapshot hash) and the user's
transcript item together; ``finish`` writes every result, the assistant items, the host records and the
outcome together. On SQLite a start can instead go through the journal (``begin``): it is committed with the
run's first results, so a run that ends at once is a single commit. A crash in between leaves a ``running`` row that :meth:`RunStore.close_interrupted`
turns into a failure (code ``host_restarted``) at the next start-up, with a ``run.failed`` result that
reconnecting clients can replay.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Generic, Literal, TypeVar, cast

from agentrunner.codec import JsonObject
from agentrunner.results import RunFailedData, RunFailedResult
from sqlalchemy import ColumnElement, RowMapping, Table, and_, bindparam, func, insert, or_, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from agentrunner_host.access import ConversationKey
from agentrunner_host.stores._connections import Database, now_ms
from agentrunner_host.stores.tables import JSONText, ResultRow, RunRow

from . import _pg_batch as pg_batch
from ._batch import Coalescer
from ._compiled import hot
from ._facts import bindable_rows, known_events, write_facts
from ._pg_batch import PgBatch
from .errors import DuplicateEventStoredError, RunExistsError, RunStateError
from .journal import (
    DEFAULT_BACKLOG_BYTES,
    DEFAULT_BACKLOG_RESULTS,
    DEFAULT_FLUSH_WINDOW,
    Journal,
    JournalEntry,
    ResultLog,
)
from .records import EventEntry, TranscriptEntry
from .state import StateWrite, apply_state_writes

__all__ = [
    "HOST_RESTARTED",
    "ResultRecord",
    "RunFinish",
    "RunListFilter",
    "RunRecord",
    "RunStart",
    "RunStatus",
    "RunStore",
    "StartPlan",
]

P = TypeVar("P")

HOST_RESTARTED: Final = "host_restarted"
"""Failure code of runs found ``running`` when the host starts."""

RunStatus = Literal["running", "completed", "failed"]

RUNS: Final = cast(Table, RunRow.__table__)
RESULTS: Final = cast(Table, ResultRow.__table__)


@dataclass(frozen=True, kw_only=True)
class RunStart:
    """Everything stored when a run starts."""

    run_id: str
    """Run id."""
    runner_id: str
    """Runner."""
    plugin_id: str
    """Plugin identity."""
    binding_id: str
    """Binding."""
    event_id: str
    """Triggering event."""
    conversation: ConversationKey | None
    """Conversation, when the event has one."""
    snapshot: JsonObject
    """Frozen authorization snapshot (JSON)."""
    snapshot_hash: str
    """Its hash."""
    deadline_at: float | None
    """Deadline (as the orchestrator measures it)."""
    started_at: int
    """Unix epoch milliseconds."""
    user_turn: TranscriptEntry | None = None
    """The user's transcript item, if the event is a message."""
    start_events: list[EventEntry] = field(default_factory=list[EventEntry])
    """Host records to append (``run.started`` ...)."""
    event: EventEntry | None = None
    """The triggering event, ingested in the same transaction (one commit instead of two). When its id is
    already stored, nothing is written and :class:`DuplicateEventStoredError` is raised."""


@dataclass(frozen=True, slots=True)
class StartPlan(Generic[P]):
    """A run start whose records depend on what it reads first (the runner's disable switch, the state
    snapshot, the conversation's positions). On SQLite *read* and *build* run inside the start's own
    transaction, in its one writer-thread hop, so the reads cost no round trip of their own; on PostgreSQL
    they run just before the start's one-statement write (a careful retry runs them inside its transaction).

    Both may run more than once (a grouped start that failed is retried alone, a unique violation retries
    carefully) and must do nothing but read and build; an exception from either writes nothing and reaches
    the caller of :meth:`RunStore.start`.
    """

    read: Callable[[AsyncConnection], Awaitable[P]]
    """Statements only (it may be driven on the writer thread without an event loop)."""
    build: Callable[[P], RunStart]
    """The start records, from what *read* returned."""


_Starter = Callable[[AsyncConnection], Awaitable[RunStart]]


@dataclass(frozen=True, kw_only=True)
class ResultRecord:
    """One result of a run, as stored for replay."""

    run_id: str
    """Run."""
    host_seq: int
    """1-based order assigned by the host."""
    runner_sequence: int | None
    """The runner's own ``sequence``."""
    type: str
    """Result type."""
    payload: JsonObject | bytes
    """Result payload: JSON, or (when writing) its orjson encoding, stored as is. Read back as JSON."""
    created_at: int
    """Unix epoch milliseconds."""


@dataclass(frozen=True, kw_only=True)
class RunFinish:
    """Everything stored when a run ends."""

    run_id: str
    """Run."""
    status: Literal["completed", "failed"]
    """Outcome."""
    code: str | None = None
    """Failure code."""
    message: str | None = None
    """Failure message."""
    ended_at: int
    """Unix epoch milliseconds."""
    results: list[ResultRecord] = field(default_factory=list[ResultRecord])
    """Every result, in ``host_seq`` order."""
    transcript: list[TranscriptEntry] = field(default_factory=list[TranscriptEntry])
    """Assistant (and tool) transcript items."""
    events: list[EventEntry] = field(default_factory=list[EventEntry])
    """Host records (``run.completed`` / ``run.failed``, back-call audit, warnings)."""
    usage: JsonObject = field(default_factory=JsonObject)
    """Usage totals."""


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """A stored run."""

    run_id: str
    """Run id."""
    runner_id: str
    """Runner."""
    plugin_id: str
    """Plugin identity."""
    binding_id: str
    """Binding."""
    event_id: str
    """Triggering event."""
    conversation: ConversationKey | None
    """Conversation."""
    status: RunStatus
    """``running``, ``completed`` or ``failed``."""
    code: str | None
    """Failure code."""
    message: str | None
    """Failure message."""
    snapshot: JsonObject
    """Frozen authorization snapshot."""
    snapshot_hash: str
    """Its hash."""
    deadline_at: float | None
    """Deadline."""
    started_at: int
    """Start, Unix epoch milliseconds."""
    ended_at: int | None
    """End, Unix epoch milliseconds."""
    usage: JsonObject
    """Usage totals."""
    owner_host: str | None = None
    """The host incarnation executing it (``None``: started without the host registry)."""


@dataclass(frozen=True, kw_only=True)
class RunListFilter:
    """Which runs :meth:`RunStore.page` lists (the operator's view: the console's runs page); ``None`` does
    not filter."""

    binding_ids: Sequence[str] | None = None
    """Runs of one of these bindings (an empty sequence matches nothing)."""
    runner_id: str | None = None
    """Runs of this runner."""
    status: RunStatus | None = None
    """Runs in this status."""
    code: str | None = None
    """Runs that ended with this code (``cancelled``, ``host_restarted``...)."""
    started_from: int | None = None
    """Started at or after, Unix epoch milliseconds."""
    started_before: int | None = None
    """Started before, Unix epoch milliseconds."""
    after: tuple[int, str] | None = None
    """Keyset cursor: ``(started_at, run_id)`` of the last run of the previous page."""


def _run_from_row(m: RowMapping) -> RunRecord:
    conversation = (
        None
        if m["conversation_id"] is None
        else ConversationKey(m["conversation_id"], m["thread_id"], workspace_id=m["workspace_id"])
    )
    return RunRecord(
        run_id=m["run_id"],
        runner_id=m["runner_id"],
        plugin_id=m["plugin_id"],
        binding_id=m["binding_id"],
        event_id=m["event_id"],
        conversation=conversation,
        status=m["status"],
        code=m["code"],
        message=m["message"],
        snapshot=m["snapshot"],
        snapshot_hash=m["snapshot_hash"],
        deadline_at=m["deadline_at"],
        started_at=m["started_at"],
        ended_at=m["ended_at"],
        usage=m["usage"],
        owner_host=m["owner_host"],
    )


def _result_from_row(m: RowMapping) -> ResultRecord:
    return ResultRecord(
        run_id=m["run_id"],
        host_seq=m["host_seq"],
        runner_sequence=m["runner_sequence"],
        type=m["type"],
        payload=m["payload"],
        created_at=m["created_at"],
    )


_RUN_KEYS: Final = (
    "run_id",
    "runner_id",
    "plugin_id",
    "binding_id",
    "event_id",
    "conversation_id",
    "thread_id",
    "workspace_id",
    "status",
    "code",
    "message",
    "snapshot",
    "snapshot_hash",
    "deadline_at",
    "started_at",
    "ended_at",
    "usage",
    "owner_host",
)
"""The keys of :func:`_run_values`: the columns of ``runs`` in the table's order (the order of the SQLite
writer's compiled insert, which binds such tuples as they are)."""


def _run_values(
    start: RunStart, owner_host: str | None, *, finish: RunFinish | None = None
) -> tuple[object, ...]:
    """The ``runs`` row of *start* as values of :data:`_RUN_KEYS`; ended by *finish* when the run starts and
    ends in one transaction."""
    conversation = start.conversation
    if conversation is None:
        conversation_id = thread_id = workspace_id = None
    else:
        conversation_id = conversation.conversation_id
        thread_id = conversation.thread_id
        workspace_id = conversation.workspace_id
    if finish is None:
        status, code, message, ended_at, usage = "running", None, None, None, {}
    else:
        status, code, message = finish.status, finish.code, finish.message
        ended_at, usage = finish.ended_at, finish.usage
    return (
        start.run_id,
        start.runner_id,
        start.plugin_id,
        start.binding_id,
        start.event_id,
        conversation_id,
        thread_id,
        workspace_id,
        status,
        code,
        message,
        start.snapshot,
        start.snapshot_hash,
        start.deadline_at,
        start.started_at,
        ended_at,
        usage,
        owner_host,
    )


def _run_row(start: RunStart, owner_host: str | None) -> dict[str, object]:
    return dict(zip(_RUN_KEYS, _run_values(start, owner_host), strict=True))


_INSERT_RUNS: Final = hot(insert(RUNS))
_INSERT_RESULTS: Final = hot(insert(RESULTS))
_FINISH: Final = hot(
    update(RUNS)
    .where(RUNS.c.run_id == bindparam("b_run_id"), RUNS.c.status == "running")
    .values(
        status=bindparam("b_status"),
        code=bindparam("b_code"),
        message=bindparam("b_message"),
        ended_at=bindparam("b_ended_at"),
        usage=bindparam("b_usage", type_=JSONText()),
    )
)


def _finish_params(finish: RunFinish) -> dict[str, object]:
    return {
        "b_run_id": finish.run_id,
        "b_status": finish.status,
        "b_code": finish.code,
        "b_message": finish.message,
        "b_ended_at": finish.ended_at,
        "b_usage": finish.usage,
    }


def _finish_row(finish: RunFinish) -> dict[str, object]:
    return {
        "run_id": finish.run_id,
        "status": finish.status,
        "code": finish.code,
        "message": finish.message,
        "ended_at": finish.ended_at,
        "usage": finish.usage,
    }


def _triggers_of(starts: Sequence[RunStart]) -> list[EventEntry]:
    """The triggering events the starts ingest."""
    return [s.event for s in starts if s.event is not None]


INLINE_MAX_ROWS: Final = 64
"""Results and state updates of a journal transaction the event loop may commit itself (see :mod:`._inline`)."""
INLINE_MAX_BYTES: Final = 256 * 1024
"""Encoded result and state bytes of such a transaction: a larger one would hold the loop for milliseconds
(an idle loop is no promise that nothing arrives meanwhile); the writer thread takes it."""


def _short(entry: JournalEntry[ResultRecord, RunFinish, StateWrite, RunStart]) -> bool:
    """*entry* is small enough for the loop to commit (results given as JSON objects count as small: only
    the pre-encoded ones, the live path's, are measured)."""
    # loops, not comprehensions and generator expressions (a function object each on Python 3.11): this is
    # asked on the loop for every journal transaction
    rows = len(entry.results) + len(entry.side)
    size = 0
    for r in entry.results:
        if isinstance(r.payload, bytes):
            size += len(r.payload)
    for f in entry.finishes:
        rows += len(f.results)
        for r in f.results:
            if isinstance(r.payload, bytes):
                size += len(r.payload)
    if rows > INLINE_MAX_ROWS:
        return False
    for w in entry.side:
        if w.encoded is not None:
            size += len(w.encoded)
    return size <= INLINE_MAX_BYTES


_RESULT_KEYS: Final = ("run_id", "host_seq", "runner_sequence", "type", "payload", "created_at")
"""The keys of :func:`_result_values`, in the order of the ``run_results`` columns (see :data:`_RUN_KEYS`)."""


def _result_values(result: ResultRecord) -> tuple[object, ...]:
    return (
        result.run_id,
        result.host_seq,
        result.runner_sequence,
        result.type,
        result.payload,
        result.created_at,
    )


def _result_row(result: ResultRecord) -> dict[str, object]:
    return dict(zip(_RESULT_KEYS, _result_values(result), strict=True))


class RunStore:
    """Runs and their results (``stores.runs``).

    Starts of runs that arrive while the SQLite writer is busy are written together: one transaction and one
    multi-row statement per table for the group (see :mod:`._batch`). Results of live runs and the ends of
    runs go through the journal (see :mod:`.journal`): every live run's pending results and every pending end
    are committed together, on both engines. Each caller still gets its own outcome. On PostgreSQL a start
    and a journal transaction are each one statement sent in one round trip (see :mod:`._pg_batch`).
    """

    def __init__(
        self,
        db: Database,
        *,
        flush_window: float = DEFAULT_FLUSH_WINDOW,
        backlog_bytes: int = DEFAULT_BACKLOG_BYTES,
        backlog_results: int = DEFAULT_BACKLOG_RESULTS,
    ) -> None:
        self._db = db
        self.owner_host: str | None = None
        """The host incarnation recorded as the owner of the runs this store starts (set by the service
        once it registered; see :mod:`.hosts`)."""
        self._starts: Coalescer[RunStart | _Starter] = Coalescer(self._write_starts)
        self._beginning: dict[str, ResultLog[ResultRecord, StateWrite, RunStart]] = {}
        self._journal: Journal[ResultRecord, RunFinish, StateWrite, RunStart] = Journal(
            self._write_journal,
            flush_window=flush_window,
            backlog_bytes=backlog_bytes,
            backlog_results=backlog_results,
        )

    async def start(self, start: RunStart) -> None:
        """Store the run as ``running`` with its start records and user item, in one transaction.

        Raises :class:`RunExistsError` when the run id is already stored (nothing is written).
        """
        await self._submit_start(start)

    async def start_planned(self, plan: StartPlan[P]) -> P:
        """:meth:`start` with the records *plan* builds from its reads, made in the same transaction;
        returns what the reads found (from the attempt that committed)."""
        found: list[P] = []

        async def starter(conn: AsyncConnection) -> RunStart:
            facts = await plan.read(conn)
            found[:] = [facts]
            return plan.build(facts)

        await self._submit_start(starter)
        return found[0]

    async def _submit_start(self, start: RunStart | _Starter) -> None:
        if self._db.is_sqlite:
            await self._starts.submit(start)
        else:
            await self._write_starts([start])

    def log(self, run_id: str) -> ResultLog[ResultRecord, StateWrite, RunStart]:
        """The result log of the live run *run_id* (started already): results appended to it are committed
        by the journal; :meth:`ResultLog.durable` tells when. Pass each result with its ``host_seq`` and the
        state update it carries, if any (``side``)."""
        return self._journal.log(run_id)

    @property
    def begins_runs(self) -> bool:
        """:meth:`begin` is available: SQLite, where the journal's transaction and a start's are both one hop
        to the writer thread (on PostgreSQL each is already one statement; see :mod:`._pg_batch`)."""
        return self._db.is_sqlite

    def begin(self, start: RunStart) -> ResultLog[ResultRecord, StateWrite, RunStart]:
        """The result log of a run whose *start* is committed by the journal with its first results (one
        commit instead of two; see :mod:`.journal`). Nothing about the run may be shown to anyone before
        :meth:`ResultLog.begun` returns; it raises what :meth:`start` raises when the start cannot be stored
        (:class:`DuplicateEventStoredError`, :class:`RunExistsError`). The caller must have read the start's
        facts already (:meth:`HostStores.read_start`)."""
        result_log = self._journal.log(start.run_id)
        trigger = start.event
        if trigger is None:
            result_log.begin(start)
            return result_log
        event_id = trigger.event_id

        def forget() -> None:
            if self._beginning.get(event_id) is result_log:
                del self._beginning[event_id]

        result_log.begin(start, settled=forget)
        self._beginning[event_id] = result_log
        return result_log

    async def beginning(self, event_id: str) -> bool:
        """Whether a run begun here ingests *event_id* and is not committed yet; waits for its commit (or
        failure) first, so that a start written after this sees the event if it was stored."""
        pending = self._beginning.get(event_id)
        if pending is None:
            return False
        with contextlib.suppress(Exception):
            await pending.begun()
        return True

    async def state_settled(self) -> None:
        """Wait until every state update queued with a result so far is committed (reads see it after)."""
        await self._journal.side_settled()

    async def finish(self, finish: RunFinish) -> None:
        """Store the outcome, its results, the transcript items and host records, in one transaction, after
        every result appended to the run's log before (possibly in the same transaction).

        Raises :class:`RunStateError` when the run is unknown or already finished (nothing is written).
        """
        await self._journal.finish(finish)

    def queue_finish(self, finish: RunFinish) -> asyncio.Future[None]:
        """:meth:`finish` queued at once: the future of its commit (awaiting it is waiting for the commit;
        cancelling that wait leaves the end queued)."""
        return self._journal.queue_finish(finish)

    async def aclose(self) -> None:
        """Wait for grouped writes in flight."""
        await self._starts.aclose()
        await self._journal.aclose()

    async def _write_starts(self, requests: Sequence[RunStart | _Starter]) -> None:
        async def work(conn: AsyncConnection, careful: bool) -> None:
            # every start's reads before any start's writes, as when each run read before it was queued
            starts = [r if isinstance(r, RunStart) else await r(conn) for r in requests]
            run_ids = [s.run_id for s in starts]
            # optimistic first: a unique violation (known run or event id) brings us back here carefully
            if careful:
                found = await conn.execute(select(RUNS.c.run_id).where(RUNS.c.run_id.in_(run_ids)))
                known = found.scalars().first()
                if known is not None:
                    raise RunExistsError(f"run {known} is already stored")
            if len(set(run_ids)) != len(run_ids):
                raise RunExistsError("the same run is started twice")
            triggers = [s.event for s in starts if s.event is not None]
            if careful and triggers:
                known = await known_events(conn, [e.event_id for e in triggers])
                if known:
                    raise DuplicateEventStoredError(next(iter(known)))
            await conn.execute(_INSERT_RUNS, [_run_row(s, self.owner_host) for s in starts])
            await write_facts(
                conn,
                self._db.dialect,
                events=[*triggers, *(event for s in starts for event in s.start_events)],
                items=[s.user_turn for s in starts if s.user_turn is not None],
                now=now_ms(),
                careful=careful,
                returning=False,
            )

        if not self._db.is_sqlite:
            # PostgreSQL: the reads first (autocommit, like any read), then the start as one statement
            async with self._db.read() as conn:
                starts = [r if isinstance(r, RunStart) else await r(conn) for r in requests]
            run_ids = [s.run_id for s in starts]
            batch = PgBatch(
                runs=[_run_row(s, self.owner_host) for s in starts],
                events=[*_triggers_of(starts), *(event for s in starts for event in s.start_events)],
                items=[s.user_turn for s in starts if s.user_turn is not None],
            )
            if len(set(run_ids)) != len(run_ids):
                raise RunExistsError("the same run is started twice")
            if await self._pg_alone(batch):
                return
            await self._db.transact(lambda conn: work(conn, True))
            return
        await self._db.transact_batch(work)

    async def _pg_alone(self, batch: PgBatch) -> bool:
        """PostgreSQL: write *batch* as one statement in one round trip (see :mod:`._pg_batch`). False when
        the careful path must write it instead: a shape the statement does not cover, or a known id."""
        if not pg_batch.covers(batch):
            return False
        statement, parameters = pg_batch.statement(batch, now=now_ms())
        try:
            await self._db.execute_alone(statement, parameters)
        except IntegrityError:
            return False
        except DBAPIError as exc:
            error = pg_batch.run_state_error(exc, batch)
            if error is None:
                raise
            raise error from None
        return True

    async def _write_journal(
        self, entry: JournalEntry[ResultRecord, RunFinish, StateWrite, RunStart]
    ) -> None:
        starts = entry.starts
        finishes = entry.finishes
        # a run that starts and ends in this transaction (once) is inserted ended: no update of the row just
        # written (one statement fewer, its status index touched once). Loops, not comprehensions: see work.
        born_ended: dict[str, RunFinish] = {}
        if starts and finishes:
            started_here: set[str] = set()
            for s in starts:
                started_here.add(s.run_id)
            ending: dict[str, int] = {}
            for f in finishes:
                ending[f.run_id] = ending.get(f.run_id, 0) + 1
            for f in finishes:
                if f.run_id in started_here and ending[f.run_id] == 1:
                    born_ended[f.run_id] = f
        updates: list[RunFinish] = []
        run_ids: list[str] = []
        for f in finishes:
            if f.run_id not in born_ended:
                updates.append(f)
                run_ids.append(f.run_id)

        async def work(conn: AsyncConnection, careful: bool) -> None:
            # Loops rather than comprehensions and generator expressions: this runs on the SQLite writer
            # thread for every journal transaction, and on Python 3.11 each of those makes a function object.
            triggers: list[EventEntry] = []
            if starts:
                started: list[str] = []
                for s in starts:
                    started.append(s.run_id)
                    if s.event is not None:
                        triggers.append(s.event)
                if careful:
                    found = await conn.execute(select(RUNS.c.run_id).where(RUNS.c.run_id.in_(started)))
                    known_run = found.scalars().first()
                    if known_run is not None:
                        raise RunExistsError(f"run {known_run} is already stored")
                    known = await known_events(conn, [e.event_id for e in triggers]) if triggers else {}
                    if known:
                        raise DuplicateEventStoredError(next(iter(known)))
                if len(set(started)) != len(started):
                    raise RunExistsError("the same run is started twice")
                owner = self.owner_host
                runs: list[tuple[object, ...]] = []
                for s in starts:
                    runs.append(_run_values(s, owner, finish=born_ended.get(s.run_id)))
                await conn.execute(_INSERT_RUNS, bindable_rows(conn, _RUN_KEYS, runs))
            if len(updates) == 1:
                finish = updates[0]
                updated = await conn.execute(_FINISH, _finish_params(finish))
                if updated.rowcount != 1:
                    raise RunStateError(f"run {finish.run_id} is unknown or not running")
            elif updates:
                # the rows are locked (SQLite: the writer lock; PostgreSQL: FOR UPDATE) until the update
                found = await conn.execute(
                    select(RUNS.c.run_id)
                    .where(RUNS.c.run_id.in_(run_ids), RUNS.c.status == "running")
                    .with_for_update()
                )
                if len(set(found.scalars().all())) != len(run_ids):
                    raise RunStateError("a run of the group is unknown, not running, or finished twice")
                await conn.execute(_FINISH, [_finish_params(f) for f in updates])
            if entry.side:
                await apply_state_writes(conn, self._db.dialect, entry.side, now=now_ms())
            results: list[tuple[object, ...]] = []
            for r in entry.results:
                results.append(_result_values(r))
            for f in finishes:
                for r in f.results:
                    results.append(_result_values(r))
            if results:
                await conn.execute(_INSERT_RESULTS, bindable_rows(conn, _RESULT_KEYS, results))
            if finishes or starts:
                # one statement per table for starts and ends together, the starts' records first (their
                # events and items are numbered before the ends')
                events = triggers
                items: list[TranscriptEntry] = []
                for s in starts:
                    events.extend(s.start_events)
                    if s.user_turn is not None:
                        items.append(s.user_turn)
                for f in finishes:
                    events.extend(f.events)
                    items.extend(f.transcript)
                await write_facts(
                    conn,
                    self._db.dialect,
                    events=events,
                    items=items,
                    now=now_ms(),
                    careful=careful,
                    returning=False,
                )

        if not self._db.is_sqlite:
            if starts:  # begins_runs is False there: nobody queues a start
                raise RuntimeError("run starts go through RunStore.start on PostgreSQL")
            batch = PgBatch(
                finishes=[_finish_row(f) for f in finishes],
                results=[_result_row(r) for r in (*entry.results, *(r for f in finishes for r in f.results))],
                state=list(entry.side),
                events=[event for f in finishes for event in f.events],
                items=[item for f in finishes for item in f.transcript],
            )
            if await self._pg_alone(batch):
                return
            await self._db.transact_optimistic(work)
            return
        # statements only: one hop to the SQLite writer thread for the whole transaction, or none when the
        # loop has nothing else to do and the transaction is short (see ._inline)
        await self._db.transact_batch(work, inline=_short(entry))

    async def get(self, run_id: str) -> RunRecord | None:
        """The run, or ``None``."""
        async with self._db.read() as conn:
            row = (await conn.execute(select(RUNS).where(RUNS.c.run_id == run_id))).mappings().first()
        return None if row is None else _run_from_row(row)

    async def for_event(self, event_id: str) -> str | None:
        """The id of the first run the event started, or ``None``."""
        stmt = select(RUNS.c.run_id).where(RUNS.c.event_id == event_id).order_by(RUNS.c.started_at).limit(1)
        async with self._db.read() as conn:
            return (await conn.execute(stmt)).scalar_one_or_none()

    async def result_count(self, run_id: str) -> int:
        """How many results of the run are stored."""
        stmt = select(func.count()).select_from(RESULTS).where(RESULTS.c.run_id == run_id)
        async with self._db.read() as conn:
            return int((await conn.execute(stmt)).scalar_one())

    async def results_after(self, run_id: str, *, after_host_seq: int, limit: int) -> list[ResultRecord]:
        """Up to *limit* results with ``host_seq`` greater than *after_host_seq*, in order (replay)."""
        stmt = (
            select(RESULTS)
            .where(RESULTS.c.run_id == run_id, RESULTS.c.host_seq > after_host_seq)
            .order_by(RESULTS.c.host_seq)
            .limit(max(0, limit))
        )
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return [_result_from_row(row) for row in rows]

    async def page(self, where: RunListFilter, *, limit: int) -> list[RunRecord]:
        """Runs matching *where*, newest first (ties by run id, descending), at most *limit*."""
        stmt = select(RUNS)
        if where.binding_ids is not None:
            stmt = stmt.where(RUNS.c.binding_id.in_(list(where.binding_ids)))
        if where.runner_id is not None:
            stmt = stmt.where(RUNS.c.runner_id == where.runner_id)
        if where.status is not None:
            stmt = stmt.where(RUNS.c.status == where.status)
        if where.code is not None:
            stmt = stmt.where(RUNS.c.code == where.code)
        if where.started_from is not None:
            stmt = stmt.where(RUNS.c.started_at >= where.started_from)
        if where.started_before is not None:
            stmt = stmt.where(RUNS.c.started_at < where.started_before)
        if where.after is not None:
            at, run_id = where.after
            stmt = stmt.where(
                or_(RUNS.c.started_at < at, and_(RUNS.c.started_at == at, RUNS.c.run_id < run_id))
            )
        stmt = stmt.order_by(RUNS.c.started_at.desc(), RUNS.c.run_id.desc()).limit(max(0, limit))
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return [_run_from_row(row) for row in rows]

    async def recent_conversations(self, *, limit: int) -> list[str]:
        """Ids of the conversations with the latest runs, most recent first, at most *limit*."""
        last = func.max(RUNS.c.started_at)
        stmt = (
            select(RUNS.c.conversation_id)
            .where(RUNS.c.conversation_id.is_not(None))
            .group_by(RUNS.c.conversation_id)
            .order_by(last.desc())
            .limit(max(0, limit))
        )
        async with self._db.read() as conn:
            return [str(value) for value in (await conn.execute(stmt)).scalars().all()]

    async def list_running(self) -> list[RunRecord]:
        """Every run still marked ``running``."""
        async with self._db.read() as conn:
            rows = (await conn.execute(select(RUNS).where(RUNS.c.status == "running"))).mappings().all()
        return [_run_from_row(row) for row in rows]

    async def close_interrupted(
        self,
        *,
        ended_at: int,
        code: str = HOST_RESTARTED,
        message: str | None = None,
        where: ColumnElement[bool] | None = None,
    ) -> list[str]:
        """Fail every ``running`` run (after a crash), or only those matching *where* (the runs of hosts
        that are gone: :meth:`HostStore.orphaned`): outcome, a ``run.failed`` result appended after the
        stored ones (its payload is the whole wire result, a valid ``RunFailedResult``), and a ``run.failed``
        host record, all in one transaction. Returns the run ids. The rows are locked while they are closed,
        so two hosts closing the same runs at once close each run once."""
        text = message or "the host stopped while the run was in progress"
        running = RUNS.c.status == "running"
        condition = running if where is None else running & where

        async def work(conn: AsyncConnection) -> list[str]:
            rows = (await conn.execute(select(RUNS).where(condition).with_for_update())).mappings().all()
            runs = [_run_from_row(row) for row in rows]
            if not runs:
                return []
            last_rows = await conn.execute(
                select(RESULTS.c.run_id, func.max(RESULTS.c.host_seq))
                .where(RESULTS.c.run_id.in_([r.run_id for r in runs]))
                .group_by(RESULTS.c.run_id)
            )
            last_seqs: dict[str, int] = {run_id: int(seq) for run_id, seq in last_rows}
            results: list[dict[str, object]] = []
            events: list[EventEntry] = []
            for run in runs:
                host_seq = int(last_seqs.get(run.run_id) or 0) + 1
                results.append(
                    _result_row(
                        ResultRecord(
                            run_id=run.run_id,
                            host_seq=host_seq,
                            runner_sequence=None,
                            type="run.failed",
                            payload=RunFailedResult(
                                run_id=run.run_id,
                                timestamp=ended_at,
                                data=RunFailedData(code=code, message=text),
                            ).model_dump(mode="json", exclude_none=True),
                            created_at=ended_at,
                        )
                    )
                )
                conversation = run.conversation
                events.append(
                    EventEntry(
                        event_id=f"run.failed:{run.run_id}",
                        event_type="run.failed",
                        source="host",
                        kind="host",
                        conversation_id=None if conversation is None else conversation.conversation_id,
                        thread_id=None if conversation is None else conversation.thread_id,
                        workspace_id=None if conversation is None else conversation.workspace_id,
                        run_id=run.run_id,
                        runner_id=run.runner_id,
                        summary=text,
                        data={"code": code, "message": text},
                        event_time=ended_at,
                    )
                )
            await conn.execute(
                update(RUNS)
                .where(RUNS.c.run_id.in_([r.run_id for r in runs]), running)
                .values(status="failed", code=code, message=text, ended_at=ended_at)
            )
            await conn.execute(insert(RESULTS), results)
            await write_facts(
                conn, self._db.dialect, events=events, now=now_ms(), careful=True, returning=False
            )
            return [r.run_id for r in runs]

        return await self._db.transact(work)
