"""``HostStores``: every store of the host over one injected engine."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from sqlalchemy import String, bindparam, select
from sqlalchemy.ext.asyncio import AsyncEngine

from agentrunner_host.access import ConversationKey
from agentrunner_host.stores._connections import Database

from ._sql import main_line
from .agents import AgentStore
from .artifacts import ArtifactStore
from .audit import AuditLog
from .controls import RunnerControlStore
from .events import EventLog
from .host_requests import HostRequestStore
from .hosts import HostStore
from .idempotency import IdempotencyStore
from .journal import DEFAULT_FLUSH_WINDOW
from .records import EVENTS, ITEMS
from .runs import RunStore
from .state import StateStore
from .storage import DEFAULT_STORAGE_MAX_BYTES, StorageStore
from .transcript import Transcript

__all__ = ["ARTIFACTS_DIR_NAME", "HostStores"]

ARTIFACTS_DIR_NAME = "artifacts"
"""Artifact files live in ``<data_dir>/artifacts/``."""

_CONVERSATION: Final = bindparam("conversation_id", type_=String())
_THREAD: Final = bindparam("thread_id", type_=String())
# Built once (a run start reads it): the newest transcript seq and event seq of one thread, one round trip.
_POSITIONS: Final = select(
    select(ITEMS.c.seq)
    .where(ITEMS.c.conversation_id == _CONVERSATION, ITEMS.c.thread_id == _THREAD)
    .order_by(ITEMS.c.seq.desc())
    .limit(1)
    .scalar_subquery(),
    select(EVENTS.c.seq)
    .where(EVENTS.c.conversation_id == _CONVERSATION, EVENTS.c.thread_id == _THREAD, EVENTS.c.kind == "event")
    .order_by(EVENTS.c.seq.desc())
    .limit(1)
    .scalar_subquery(),
)


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

    async def positions(self, *, conversation: ConversationKey) -> tuple[int | None, int | None]:
        """The newest transcript seq and the newest event seq (real events, not host records) of the
        conversation's thread, read in one round trip (what a run context needs when it starts)."""
        thread = main_line(conversation.thread_id)
        params = {"conversation_id": conversation.conversation_id, "thread_id": thread}
        async with self._db.read() as conn:
            row = (await conn.execute(_POSITIONS, params)).one()
        return row[0], row[1]

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
