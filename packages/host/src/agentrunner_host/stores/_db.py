"""How the stores talk to the engine: one write path, one read path, retries.

SQLite allows one writer at a time, so every write of this process goes through one held connection under an
``asyncio.Lock``. Its transactions open implicitly with their first write statement (inside that statement's
round trip) and write before they read, so the write lock is taken up front as ``BEGIN IMMEDIATE`` would,
and another process waits up to the busy timeout. Holding the connection also skips a pool checkout per
write; every SQLAlchemy statement over aiosqlite costs a few thread hops, so round trips are what a write
pays for. Reads use one held connection too when uncontended, in autocommit (WAL readers never block the
writer). PostgreSQL writes use pooled connections and rely on row locks; its reads run in autocommit.
Serialization failures, deadlocks and unique violations from racing inserts are retried.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Final, TypeVar

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agentrunner_host.db import SQLITE_BEGIN_OPTION

__all__ = ["Database", "RetryTransaction", "now_ms"]

T = TypeVar("T")

_RETRY_SQLSTATES: Final = frozenset({"40001", "40P01", "23505"})
_ATTEMPTS: Final = 8


def now_ms() -> int:
    """The current time in Unix epoch milliseconds."""
    return time.time_ns() // 1_000_000


class RetryTransaction(Exception):
    """Raised inside a write to roll it back and run it again (a concurrent writer got there first)."""


class Database:
    """The engine plus the single-writer discipline the stores share."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        """The injected engine."""
        self.dialect: str = engine.dialect.name
        """``sqlite`` or ``postgresql``."""
        self._lock = asyncio.Lock()
        self._writer: AsyncConnection | None = None
        self._read_lock = asyncio.Lock()
        # PostgreSQL reads run in autocommit: no BEGIN / ROLLBACK round trips around a single SELECT
        self._read_engine = (
            engine if self.is_sqlite else engine.execution_options(isolation_level="AUTOCOMMIT")
        )
        self._reader: AsyncConnection | None = None
        self._closed = False

    @property
    def is_sqlite(self) -> bool:
        """True on SQLite."""
        return self.dialect == "sqlite"

    async def transact(self, work: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """Run *work* in one write transaction, committing when it returns; retried on write races."""

        async def plain(conn: AsyncConnection, _careful: bool) -> T:
            return await work(conn)

        return await self.transact_optimistic(plain)

    async def transact_optimistic(self, work: Callable[[AsyncConnection, bool], Awaitable[T]]) -> T:
        """Like :meth:`transact`, for work with a cheap optimistic path: *work* gets ``careful=False`` first
        and, if that attempt hits a unique constraint, is rolled back and run again with ``careful=True``
        (it then looks before it inserts). A unique violation of a careful attempt is final on SQLite (the
        writer lock rules out races there) and retried on PostgreSQL (a concurrent insert may have won)."""
        careful = False
        for attempt in range(_ATTEMPTS):
            last = attempt == _ATTEMPTS - 1
            try:
                async with self._write() as conn:
                    return await work(conn, careful)
            except RetryTransaction:
                if last:
                    raise
            except IntegrityError as exc:
                if last or (careful and not self._retryable(exc)):
                    raise
                careful = True
                continue
            except DBAPIError as exc:
                if last or not self._retryable(exc):
                    raise
            await asyncio.sleep(0.001 * (attempt + 1))
        raise AssertionError("unreachable")

    @asynccontextmanager
    async def read(self) -> AsyncGenerator[AsyncConnection]:
        """A connection for reads (on SQLite without an explicit transaction: each statement is atomic).

        On SQLite one reader connection is held for the common, uncontended case (a pool checkout and its
        reset cost more than a short keyset read); concurrent readers fall back to the pool.
        """
        if self.is_sqlite and not self._read_lock.locked():
            async with self._read_lock:
                conn = self._reader
                if conn is None or conn.invalidated or conn.closed:
                    if self._closed:
                        raise RuntimeError("the stores are closed")
                    conn = await self.engine.connect()
                    await conn.execution_options(**{SQLITE_BEGIN_OPTION: None})
                    self._reader = conn
                # SQLAlchemy's transaction stays open between reads: no BEGIN was ever sent, so the driver is in
                # autocommit and every statement sees the latest commit; ending it would cost a round trip
                yield conn
            return
        async with self._read_engine.connect() as conn:
            if self.is_sqlite:
                await conn.execution_options(**{SQLITE_BEGIN_OPTION: None})
            yield conn

    @asynccontextmanager
    async def _write(self) -> AsyncGenerator[AsyncConnection]:
        if not self.is_sqlite:
            async with self.engine.begin() as conn:
                yield conn
            return
        async with self._lock:
            if self._closed:
                raise RuntimeError("the stores are closed")
            conn = self._writer
            if conn is None or conn.invalidated:
                if conn is not None:
                    await conn.close()
                conn = await self.engine.connect()
                # Let the driver open the transaction implicitly with the first write statement, inside
                # that statement's own round trip: saves one per transaction. Write transactions start with
                # a write (reads come after), so the lock is taken up front as with BEGIN IMMEDIATE.
                await conn.execution_options(**{SQLITE_BEGIN_OPTION: None})
                await conn.run_sync(_implicit_begin)
                self._writer = conn
            try:
                async with conn.begin():
                    yield conn
            except BaseException:
                if conn.invalidated or conn.closed:
                    self._writer = None
                    await conn.close()
                raise

    def _retryable(self, exc: DBAPIError) -> bool:
        if self.is_sqlite:
            return "locked" in str(exc.orig) or "busy" in str(exc.orig)
        orig: Any = exc.orig
        state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
        return state in _RETRY_SQLSTATES

    async def aclose(self) -> None:
        """Release the held connections."""
        async with self._read_lock:
            if self._reader is not None:
                await self._reader.close()
                self._reader = None
        async with self._lock:
            self._closed = True
            if self._writer is not None:
                # the driver connection was switched to implicit transactions: never hand it back to the pool
                await self._writer.invalidate()
                await self._writer.close()
                self._writer = None


def _implicit_begin(connection: Connection) -> None:
    dbapi: Any = connection.connection.dbapi_connection
    dbapi.isolation_level = "DEFERRED"
