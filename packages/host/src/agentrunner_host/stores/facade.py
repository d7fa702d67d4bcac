"""``HostStores``: every store of the host over one injected engine."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

from sqlalchemy import BigInteger, Label, Select, String, bindparam, literal_column, null, select, union_all
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agentrunner_host.access import ConversationKey, StateOwner
from agentrunner_host.stores._connections import Database

from ._compiled import hot
from ._facts import known_events
from ._sql import main_line
from .agents import AgentStore
from .artifacts import ArtifactStore
from .audit import AuditLog
from .controls import CONTROLS, RunnerControl, RunnerControlStore, read_control
from .events import EventLog
from .host_requests import HostRequestStore
from .hosts import HostStore
from .idempotency import IdempotencyStore
from .journal import DEFAULT_FLUSH_WINDOW
from .records import EVENTS, ITEMS
from .runs import RunStart, RunStore, StartPlan
from .state import (
    SNAPSHOT_KEYS_PER_SCOPE,
    SNAPSHOT_SIZE_ROWS,
    SNAPSHOT_SIZE_ROWS_OF_ONE,
    StateStore,
    snapshot_owners,
    snapshot_values,
)
from .storage import DEFAULT_STORAGE_MAX_BYTES, StorageStore
from .transcript import Transcript

__all__ = ["ARTIFACTS_DIR_NAME", "HostStores", "StartFacts", "StartReads"]

ARTIFACTS_DIR_NAME = "artifacts"
"""Artifact files live in ``<data_dir>/artifacts/``."""

_CONVERSATION: Final = bindparam("conversation_id", type_=String())
_THREAD: Final = bindparam("thread_id", type_=String())
_TRANSCRIPT_SEQ: Final = (
    select(ITEMS.c.seq)
    .where(ITEMS.c.conversation_id == _CONVERSATION, ITEMS.c.thread_id == _THREAD)
    .order_by(ITEMS.c.seq.desc())
    .limit(1)
    .scalar_subquery()
)
_EVENT_SEQ: Final = (
    select(EVENTS.c.seq)
    .where(EVENTS.c.conversation_id == _CONVERSATION, EVENTS.c.thread_id == _THREAD, EVENTS.c.kind == "event")
    .order_by(EVENTS.c.seq.desc())
    .limit(1)
    .scalar_subquery()
)
# Built once (a run start reads it): the newest transcript seq and event seq of one thread, one round trip.
_POSITIONS: Final = hot(select(_TRANSCRIPT_SEQ, _EVENT_SEQ))
_CONTROL_PART, _POSITIONS_PART, _SIZES_PART = 0, 1, 2


def _part(tag: int) -> Label[int]:
    return literal_column(str(tag), BigInteger()).label("part")


def _start_read(*, owners: int, positions: bool) -> Select[int, object, object, object]:
    """A start's reads on the loop as one statement (one cursor and one pass of the compiled path instead of
    one per read): rows of (part, a, b, c): the runner's control (reason, disabled_by, disabled_at), the
    conversation's positions (transcript seq, event seq) and the snapshot's candidate keys (owner hash, key,
    size) of *owners* owners (0: none read; 1: parameter ``owner``; 2: several, parameter ``owners``), in
    that order, each owner's keys in key order."""
    parts: list[Select[int, object, object, object]] = [
        select(
            _part(_CONTROL_PART),
            CONTROLS.c.reason,
            CONTROLS.c.disabled_by,
            CONTROLS.c.disabled_at,
        ).where(CONTROLS.c.runner_id == bindparam("runner_id"))
    ]
    if positions:
        parts.append(select(_part(_POSITIONS_PART), _TRANSCRIPT_SEQ, _EVENT_SEQ, null()))
    if owners:
        sized = (SNAPSHOT_SIZE_ROWS_OF_ONE if owners == 1 else SNAPSHOT_SIZE_ROWS).subquery()
        parts.append(select(_part(_SIZES_PART), sized.c.owner_hash, sized.c.key, sized.c.size))
    rows = union_all(*parts).subquery()
    part, a, b, _c = rows.c
    return select(*rows.c).order_by(part, a, b)


# Built once each (hot: the compiled path knows them by identity), by (owners read: none, one or several,
# positions read).
_START_READS: Final = {
    (owners, positions): hot(_start_read(owners=owners, positions=positions))
    for owners in (0, 1, 2)
    for positions in (False, True)
}


def _positions_params(conversation: ConversationKey) -> dict[str, object]:
    """The parameters of the positions read (:data:`_POSITIONS`, and its part of :func:`_start_read`)."""
    return {"conversation_id": conversation.conversation_id, "thread_id": main_line(conversation.thread_id)}


async def _read_positions(
    conn: AsyncConnection, conversation: ConversationKey
) -> tuple[int | None, int | None]:
    row = (await conn.execute(_POSITIONS, _positions_params(conversation))).one()
    return row[0], row[1]


async def _read_folded(
    conn: AsyncConnection,
    reads: StartReads,
    owners: Mapping[str, StateOwner] | None,
    conversation: ConversationKey | None,
) -> StartFacts:
    """What :meth:`HostStores.read_start` reads, in one statement (:func:`_start_read`; the snapshot's values,
    when any fit, in a second): the snapshot's keys without a lifetime rule."""
    params: dict[str, object] = {"runner_id": reads.runner_id}
    by_hash: dict[str, str] = {}
    owners_read = 0
    if owners:
        by_hash = snapshot_owners(owners)
        if len(by_hash) == 1:
            owners_read = 1
            params["owner"] = next(iter(by_hash))
        else:
            owners_read = 2
            params["owners"] = list(by_hash)
        params["per_scope"] = SNAPSHOT_KEYS_PER_SCOPE
    if conversation is not None:
        params.update(_positions_params(conversation))
    statement = _START_READS[owners_read, conversation is not None]
    control: RunnerControl | None = None
    latest: int | None = None
    event_seq: int | None = None
    sized: list[tuple[str, str, int]] = []
    for part, a, b, c in await conn.execute(statement, params):
        # the columns' types are the part's own (see _start_read)
        if part == _SIZES_PART:
            sized.append((cast(str, a), cast(str, b), cast(int, c)))
        elif part == _CONTROL_PART:
            control = RunnerControl(
                runner_id=reads.runner_id,
                reason=cast(str, a),
                disabled_by=cast("str | None", b),
                disabled_at=cast(int, c),
            )
        else:
            latest, event_seq = cast("int | None", a), cast("int | None", b)
    snapshot = await snapshot_values(conn, owners, by_hash, sized) if owners else {}
    return StartFacts(control=control, state=snapshot, transcript_seq=latest, event_seq=event_seq)


@dataclass(frozen=True, slots=True, kw_only=True)
class StartReads:
    """What a starting run reads before its start records are written (see :meth:`HostStores.start_run`)."""

    runner_id: str
    """The runner whose disable switch is read."""
    state_owners: Mapping[str, StateOwner] | None = None
    """The scopes of the state snapshot to inline (``None``: no snapshot)."""
    conversation: ConversationKey | None = None
    """The conversation whose positions are read (``None``: none read)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StartFacts:
    """What :class:`StartReads` found, in the start's own transaction."""

    control: RunnerControl | None
    """The runner's disable switch, when it is set."""
    state: dict[str, dict[str, Any]]
    """The state snapshot by scope name (empty without one)."""
    transcript_seq: int | None = None
    """The newest transcript seq of the conversation's thread."""
    event_seq: int | None = None
    """The newest event seq (real events, not host records) of the thread."""


class HostStores:
    """The host-owned facts. Build with :meth:`open` (it does not migrate: call
    :func:`agentrunner_host.stores.engine.upgrade` first) and close with :meth:`aclose`.

    Open one per engine and process: on SQLite it holds the process's single writer connection, and a
    second instance would be a second writer queueing on SQLite's lock instead of on the in-process one.
    """

    events: EventLog
    """Event log."""
    transcript: Transcript
    """Transcript."""
    runs: RunStore
    """Runs and results."""
    artifacts: ArtifactStore
    """Artifacts."""
    state: StateStore
    """State."""
    storage: StorageStore
    """Storage areas."""
    idempotency: IdempotencyStore
    """Idempotency keys."""
    agents: AgentStore
    """Operator-managed agents and bindings (shared by every host on the database)."""
    hosts: HostStore
    """The host registry (heartbeat leases of every host process on the database)."""
    controls: RunnerControlStore
    """Operator controls on runners (the disable switch)."""
    requests: HostRequestStore
    """Requests between hosts (cancel, start on an attached runtime) and the remote runtimes' attachments."""
    audit: AuditLog
    """The stored back-call audit, as a query."""

    def __init__(
        self,
        db: Database,
        *,
        data_dir: Path,
        storage_max_value_bytes: int,
        flush_window: float = DEFAULT_FLUSH_WINDOW,
    ) -> None:
        self._db = db
        self.data_dir = data_dir
        """The host's data directory."""
        self.events = EventLog(db)
        self.transcript = Transcript(db)
        self.runs = RunStore(db, flush_window=flush_window)
        self.artifacts = ArtifactStore(db, root=data_dir / ARTIFACTS_DIR_NAME)
        self.state = StateStore(db, settled=self.runs.state_settled)
        self.storage = StorageStore(db, max_value_bytes=storage_max_value_bytes)
        self.idempotency = IdempotencyStore(db)
        self.agents = AgentStore(db)
        self.hosts = HostStore(db)
        self.controls = RunnerControlStore(db)
        self.requests = HostRequestStore(db)
        self.audit = AuditLog(db)

    @property
    def engine(self) -> AsyncEngine:
        """The injected engine."""
        return self._db.engine

    @property
    def loop_reads(self) -> int:
        """Point reads answered on the event loop's thread so far (SQLite files; see ``state.get``): statement
        counters on the engine do not see them."""
        reader = self._db.loop_reader
        return 0 if reader is None else reader.reads

    async def positions(self, *, conversation: ConversationKey) -> tuple[int | None, int | None]:
        """The newest transcript seq and the newest event seq (real events, not host records) of the
        conversation's thread, read in one round trip (what a run context needs when it starts)."""
        async with self._db.read() as conn:
            return await _read_positions(conn, conversation)

    async def start_run(self, reads: StartReads, build: Callable[[StartFacts], RunStart]) -> StartFacts:
        """Read what a starting run needs and store its start: on SQLite in one transaction, one hop to the
        writer thread for reads and writes together, grouped with other runs' starts; on PostgreSQL the reads
        come just before the start's one-statement write (see :class:`~.runs.StartPlan`).

        *build* gets the facts and returns the start records; it may raise to refuse the run (e.g. when
        ``control`` says the runner is disabled), and then nothing is written. State updates queued with
        results are committed first, so the snapshot sees them.
        """
        if reads.state_owners:
            await self.runs.state_settled()
        state, owners, conversation = self.state, reads.state_owners, reads.conversation

        async def read(conn: AsyncConnection) -> StartFacts:
            control = await read_control(conn, reads.runner_id)
            snapshot = await state.read_snapshot(conn, owners) if owners else {}
            latest, event_seq = (None, None)
            if conversation is not None:
                latest, event_seq = await _read_positions(conn, conversation)
            return StartFacts(control=control, state=snapshot, transcript_seq=latest, event_seq=event_seq)

        return await self.runs.start_planned(StartPlan(read, build))

    async def read_start(self, reads: StartReads, /, *, event_id: str | None) -> StartFacts | None:
        """What :meth:`start_run` reads, read on the event loop's own thread (no writer hop), for a start the
        journal commits with the run's first results (:meth:`RunStore.begin`). ``None`` when that cannot be:
        not a SQLite file, SQLite would make the read wait, or the triggering *event_id* is stored already
        or being started here; the caller then uses :meth:`start_run` (which reports a duplicate).

        The reads see the last commit, not the start's own transaction: a runner disabled, or a turn of the
        same conversation stored, between them and the start's commit is not seen by this run (as if it
        had started a moment earlier)."""
        if not self.runs.begins_runs:
            return None
        if event_id is not None and await self.runs.beginning(event_id):
            return None
        if reads.state_owners:
            await self.runs.state_settled()
        state, owners, conversation = self.state, reads.state_owners, reads.conversation

        async def read(conn: AsyncConnection) -> tuple[StartFacts | None]:
            if event_id is not None and await known_events(conn, [event_id]):
                return (None,)
            if not (owners and state.expires):
                return (await _read_folded(conn, reads, owners or None, conversation),)
            control = await read_control(conn, reads.runner_id)
            snapshot = await state.read_snapshot(conn, owners) if owners else {}
            latest, event_seq = (None, None)
            if conversation is not None:
                latest, event_seq = await _read_positions(conn, conversation)
            return (StartFacts(control=control, state=snapshot, transcript_seq=latest, event_seq=event_seq),)

        found = self._db.read_on_loop(read)
        return None if found is None else found[0]

    @classmethod
    async def open(
        cls,
        engine: AsyncEngine,
        *,
        data_dir: Path,
        storage_max_value_bytes: int = DEFAULT_STORAGE_MAX_BYTES,
        flush_window: float = DEFAULT_FLUSH_WINDOW,
    ) -> HostStores:
        """The stores over *engine*, with artifact files under *data_dir*. The engine stays the caller's to
        dispose. *flush_window* is how long (seconds) live results are collected before a commit (see
        :mod:`agentrunner_host.stores.journal`)."""
        stores = cls(
            Database(engine),
            data_dir=data_dir,
            storage_max_value_bytes=storage_max_value_bytes,
            flush_window=flush_window,
        )
        await stores.artifacts.prepare()
        return stores

    async def aclose(self) -> None:
        """Finish grouped writes in flight and release the connections the stores hold (not the engine)."""
        await self.runs.aclose()
        await self._db.aclose()
