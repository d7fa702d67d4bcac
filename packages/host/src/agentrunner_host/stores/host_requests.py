"""Requests between hosts, stored so that none is lost with a notification (``stores.requests``).

A host that must ask another one to act — cancel a run that host executes, start a run on a remote runtime
attached to it — writes a row addressed to that host's incarnation and then notifies it. The target takes
its rows when notified, when its listening connection comes back (notifications sent meanwhile are lost),
and on a periodic poll (the only way on SQLite, where several processes share one file and nothing is
announced). A ``cancel`` is deleted when taken; a ``start`` is marked claimed, answered (the run id or the
error) and deleted by its sender once it has read the answer. Rows addressed to hosts that are no longer
registered are pruned: nobody will ever take them. A ``start`` whose sender died (or stopped waiting) before
it read the answer would stay while its target lives: starts older than any sender waits are expired
(:meth:`HostRequestStore.expire_starts`).

The same module records which remote runtimes are attached to which host (``runtime_attachments``), so a
host without a runtime of a plugin can send the event to one that has it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, cast

from pydantic import JsonValue
from sqlalchemy import Table, and_, bindparam, delete, exists, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from ._connections import Database, now_ms
from ._loop_reads import PointRead
from ._sql import insert_for
from .hosts import db_now_ms
from .tables import HostRequestRow, HostRow, RuntimeAttachmentRow

__all__ = ["HostRequest", "HostRequestStore", "RequestKind"]

REQUESTS: Final = cast(Table, HostRequestRow.__table__)
ATTACHMENTS: Final = cast(Table, RuntimeAttachmentRow.__table__)
HOSTS: Final = cast(Table, HostRow.__table__)

_PENDING: Final = select(
    exists().where(REQUESTS.c.target_host == bindparam("target_host"), REQUESTS.c.claimed_at.is_(None))
)
_PENDING_ON_LOOP: Final = PointRead.of(_PENDING)
"""``has_pending`` on the loop (see :mod:`._loop_reads`): an idle host polls it four times a second on SQLite,
and through aiosqlite each poll woke its thread about five times."""

RequestKind = Literal["cancel", "start"]
"""What a request asks its target to do."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HostRequest:
    """One request taken by its target."""

    request_id: str
    """Random id."""
    kind: RequestKind
    """``cancel`` or ``start``."""
    run_id: str | None
    """The run to cancel."""
    body: Mapping[str, JsonValue] | None
    """What a ``start`` needs."""


class HostRequestStore:
    """The ``host_requests`` and ``runtime_attachments`` tables."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # -- requests ------------------------------------------------------------------------------------------

    async def ask(
        self,
        target_host: str,
        kind: RequestKind,
        *,
        run_id: str | None = None,
        body: Mapping[str, JsonValue] | None = None,
    ) -> str:
        """Store a request for *target_host*; returns its id (notify the target after this returns)."""
        request_id = "req_" + uuid.uuid4().hex
        values = {
            "request_id": request_id,
            "target_host": target_host,
            "kind": kind,
            "run_id": run_id,
            "body": None if body is None else dict(body),
            "created_at": now_ms(),
        }

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(REQUESTS.insert().values(values))

        await self._db.transact(work)
        return request_id

    async def has_pending(self, target_host: str) -> bool:
        """Whether an untaken request waits for *target_host* (a read: the poll costs no write; on a SQLite file
        it is answered on the loop's thread)."""
        reader = self._db.loop_reader
        rows = None if reader is None else reader.fetch(_PENDING_ON_LOOP, {"target_host": target_host})
        if rows is not None:
            return bool(rows[0][0])
        async with self._db.read() as conn:
            return bool((await conn.execute(_PENDING, {"target_host": target_host})).scalar_one())

    async def take(self, target_host: str) -> list[HostRequest]:
        """Take every untaken request for *target_host*: cancels are deleted, starts marked claimed (each is
        taken once, even by two tasks of the target at the same time)."""

        async def work(conn: AsyncConnection) -> list[HostRequest]:
            cancels = await conn.execute(
                delete(REQUESTS)
                .where(REQUESTS.c.target_host == target_host, REQUESTS.c.kind == "cancel")
                .returning(REQUESTS.c.request_id, REQUESTS.c.run_id)
            )
            taken = [
                HostRequest(request_id=r.request_id, kind="cancel", run_id=r.run_id, body=None)
                for r in cancels.all()
            ]
            starts = await conn.execute(
                update(REQUESTS)
                .where(
                    REQUESTS.c.target_host == target_host,
                    REQUESTS.c.kind == "start",
                    REQUESTS.c.claimed_at.is_(None),
                )
                .values(claimed_at=now_ms())
                .returning(REQUESTS.c.request_id, REQUESTS.c.body)
            )
            taken += [
                HostRequest(request_id=r.request_id, kind="start", run_id=None, body=r.body)
                for r in starts.all()
            ]
            return taken

        return await self._db.transact(work)

    async def answer(self, request_id: str, answer: Mapping[str, JsonValue]) -> None:
        """Record the target's answer to a ``start`` (its sender reads it with :meth:`answer_of`)."""

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(
                update(REQUESTS).where(REQUESTS.c.request_id == request_id).values(answer=dict(answer))
            )

        await self._db.transact(work)

    async def answer_of(self, request_id: str) -> tuple[bool, Mapping[str, JsonValue] | None]:
        """``(claimed, answer)`` of a request this host sent; ``(False, None)`` once it is gone."""
        stmt = select(REQUESTS.c.claimed_at, REQUESTS.c.answer).where(REQUESTS.c.request_id == request_id)
        async with self._db.read() as conn:
            row = (await conn.execute(stmt)).first()
        if row is None:
            return False, None
        return row.claimed_at is not None, row.answer

    async def withdraw(self, request_id: str) -> bool:
        """Delete a request nobody took yet; False when its target already took it (it will act on it)."""

        async def work(conn: AsyncConnection) -> bool:
            found = await conn.execute(
                delete(REQUESTS)
                .where(REQUESTS.c.request_id == request_id, REQUESTS.c.claimed_at.is_(None))
                .returning(REQUESTS.c.request_id)
            )
            return found.first() is not None

        return await self._db.transact(work)

    async def drop(self, request_id: str) -> None:
        """Delete a request (its sender has read the answer)."""

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(delete(REQUESTS).where(REQUESTS.c.request_id == request_id))

        await self._db.transact(work)

    async def prune(self) -> int:
        """Delete requests and attachments of hosts that are no longer registered; returns the requests
        deleted."""
        registered = select(HOSTS.c.host_id)

        async def work(conn: AsyncConnection) -> int:
            gone = await conn.execute(
                delete(REQUESTS)
                .where(REQUESTS.c.target_host.not_in(registered))
                .returning(REQUESTS.c.request_id)
            )
            await conn.execute(delete(ATTACHMENTS).where(ATTACHMENTS.c.host_id.not_in(registered)))
            return len(gone.all())

        return await self._db.transact(work)

    async def expire_starts(self, *, created_before: int) -> int:
        """Delete the ``start`` requests stored before *created_before* (epoch ms), taken or not: their sender
        waits a bounded time for the answer, so one older than that has nobody left to read it. Returns how
        many were deleted. Cancels are left alone (they end with their run's host, see :meth:`prune`)."""

        async def work(conn: AsyncConnection) -> int:
            gone = await conn.execute(
                delete(REQUESTS)
                .where(REQUESTS.c.kind == "start", REQUESTS.c.created_at < created_before)
                .returning(REQUESTS.c.request_id)
            )
            return len(gone.all())

        return await self._db.transact(work)

    # -- remote runtimes -----------------------------------------------------------------------------------

    async def attach(self, plugin_id: str, host_id: str) -> None:
        """Record that a runtime of *plugin_id* is connected to *host_id*."""
        stmt = (
            insert_for(self._db.dialect, ATTACHMENTS)
            .values(plugin_id=plugin_id, host_id=host_id, attached_at=now_ms())
            .on_conflict_do_nothing()
        )

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(stmt)

        await self._db.transact(work)

    async def detach(self, plugin_id: str, host_id: str) -> None:
        """Forget the runtime of *plugin_id* on *host_id* (it disconnected)."""

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(
                delete(ATTACHMENTS).where(
                    ATTACHMENTS.c.plugin_id == plugin_id, ATTACHMENTS.c.host_id == host_id
                )
            )

        await self._db.transact(work)

    async def attached(self, plugin_id: str) -> list[str]:
        """Hosts with a live lease that have a runtime of *plugin_id* attached, most recently attached first."""
        stmt = (
            select(ATTACHMENTS.c.host_id)
            .join(HOSTS, HOSTS.c.host_id == ATTACHMENTS.c.host_id)
            .where(
                and_(
                    ATTACHMENTS.c.plugin_id == plugin_id,
                    HOSTS.c.lease_expires_at > db_now_ms(self._db.dialect),
                )
            )
            .order_by(ATTACHMENTS.c.attached_at.desc())
        )
        async with self._db.read() as conn:
            return [r.host_id for r in (await conn.execute(stmt)).all()]
