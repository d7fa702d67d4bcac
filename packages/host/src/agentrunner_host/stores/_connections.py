"""How the stores talk to the engine: one write path, one read path, retries.

SQLite allows one writer at a time, so every write of this process goes through one held connection under an
``asyncio.Lock``. Its transactions open implicitly with their first write statement (inside that statement's
round trip) and write before they read, so the write lock is taken up front as ``BEGIN IMMEDIATE`` would,
and another process waits up to the busy timeout. Holding the connection also skips a pool checkout per
write; every SQLAlchemy statement over aiosqlite costs a few thread hops, so round trips are what a write
pays for. Reads use one held connection too when uncontended, in autocommit (WAL readers never block the
writer). PostgreSQL writes use pooled connections and rely on row locks; its reads run in autocommit.
Serialization failures, deadlocks and unique violations from racing inserts are retried.

Batches of the hot path (the journal: live results, state updates and run ends) take one thread hop per
transaction on SQLite instead of several per statement: :meth:`Database.transact_batch` runs the whole
transaction on a dedicated writer thread with a plain ``sqlite3`` connection under SQLAlchemy Core (same
statements, same types), still under the process's one write lock; a short journal batch is committed
on the event loop's own thread instead when the writer thread is idle (see :mod:`._inline`). On
PostgreSQL the same two hot transactions (run starts and the journal) are each one statement run alone in
autocommit (:meth:`Database.execute_alone`, built by :mod:`._pg_batch`): one round trip instead of one per
statement plus ``BEGIN`` and ``COMMIT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from queue import SimpleQueue
from typing import Any, Final, TypeVar, cast

from sqlalchemy import Connection, Engine, Executable, event
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import QueuePool, StaticPool

from agentrunner_host.stores.engine import SQLITE_BEGIN_OPTION, SQLITE_BUSY_TIMEOUT_MS

from ._compiled import CompiledWrites
from ._inline import READING, InlineCommits, checkpoint
from ._loop_reads import LoopReader, loop_reader_for, open_read_only

__all__ = ["Database", "RetryTransaction", "now_ms"]

T = TypeVar("T")

log = logging.getLogger("agentrunner.host.stores")

# sqlite3 binds int, float and str as they are but adapts every other value, None included: a registry look-up
# that misses, then a failed attribute look-up on its protocol type that formats an AttributeError message
# and drops it (about 160 ns per NULL bound, some 40 per echo request). With an adapter for None the look-up
# hits; the adapter is a dict's ``get`` (C, no Python frame) answering None for None: the same NULL is bound.
_NO_ADAPTATION: Final[dict[None, None]] = {}
sqlite3.register_adapter(type(None), _NO_ADAPTATION.get)

_RETRY_SQLSTATES: Final = frozenset({"40001", "40P01", "23505"})
_ATTEMPTS: Final = 8


def _pool_size(engine: AsyncEngine) -> int:
    """The pool's steady size (a pool without one, e.g. ``NullPool``, counts as 5)."""
    pool = engine.sync_engine.pool
    return pool.size() if isinstance(pool, QueuePool) else 5


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
        # Readers beyond the pool's size queue here, with no deadline: the pool itself gives up after its
        # checkout timeout (30 s), which hundreds of open SSE streams reach on a loaded machine, and a read
        # that waits is better than one that fails. Overflow connections stay for the writers.
        self._pool_readers = asyncio.Semaphore(max(1, _pool_size(engine)))
        self._closed = False
        self._batch_thread: _WriterThread | None = None
        self._batch_engine: Engine | None = None
        self._batch_conn: Connection | None = None
        self._batch_writes: CompiledWrites | None = None
        self.loop_reader: LoopReader | None = (
            loop_reader_for(engine.url.database) if self.dialect == "sqlite" else None
        )
        """Point reads on the event loop's thread (SQLite files only; see :mod:`._loop_reads`)."""
        self._loop_conn: Connection | None = None
        self._loop_writes: CompiledWrites | None = None
        self._checkpointing: asyncio.Task[None] | None = None
        self.inline: InlineCommits | None = None if self.loop_reader is None else InlineCommits()
        """Batches committed on the event loop's thread when it is idle (SQLite files; see :mod:`._inline`)."""

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

    async def transact_batch(
        self, work: Callable[[AsyncConnection, bool], Awaitable[T]], *, inline: bool = False
    ) -> T:
        """:meth:`transact_optimistic` for work that only executes statements: on SQLite the whole transaction
        (every statement, the commit, a careful retry) runs in one hop to the writer thread. *work* is
        written against :class:`AsyncConnection` but is given a synchronous connection behind the same
        ``execute``; it must await nothing else (it is driven without an event loop).

        *inline*: the transaction may instead run right here, on the loop's thread, when the writer thread is
        idle and SQLite would not make it wait (see :mod:`._inline`); otherwise, as before."""
        if not self.is_sqlite:
            return await self.transact_optimistic(work)
        if inline and self.inline is not None and not self._closed and self._writer_idle():
            done = self._batch_inline(work)
            if done is not None:
                return done[0]
        for attempt in range(_ATTEMPTS):
            try:
                async with self._lock:
                    if self._closed:
                        raise RuntimeError("the stores are closed")
                    result = await self._writer_thread().call(lambda: self._run_batch(work, on_loop=False))
            except DBAPIError as exc:
                if attempt == _ATTEMPTS - 1 or not self._retryable(exc):
                    raise
            else:
                self._committed(on_loop=False)
                return result
            await asyncio.sleep(0.001 * (attempt + 1))
        raise AssertionError("unreachable")

    async def execute_alone(self, statement: Executable, parameters: Mapping[str, Any]) -> None:
        """PostgreSQL: run one *statement* as its own transaction (autocommit: no ``BEGIN`` / ``COMMIT``
        round trips; the server commits when the statement ends), retried on serialization failures and
        deadlocks. Unique violations are raised: the caller decides (see :mod:`._pg_batch`)."""
        if self.is_sqlite:
            raise RuntimeError("execute_alone is for PostgreSQL")
        for attempt in range(_ATTEMPTS):
            try:
                async with self._read_engine.connect() as conn:
                    await conn.execute(statement, parameters)
                    # the server committed: listeners counting commits (metrics, tests) see it as one,
                    # as they see the SQLite writer thread's
                    self.engine.sync_engine.dispatch.commit(conn.sync_connection)
                return
            except IntegrityError:
                raise
            except DBAPIError as exc:
                if attempt == _ATTEMPTS - 1 or not self._retryable(exc):
                    raise
            await asyncio.sleep(0.001 * (attempt + 1))

    def read_on_loop(self, work: Callable[[AsyncConnection], Awaitable[T]]) -> T | None:
        """Run the statement-only reads *work* on the event loop's own thread (SQLite files only), each
        statement in autocommit on the loop's connection (:mod:`._inline`), ``SELECT`` statements only, never
        waiting for a lock, as the point reads of :mod:`._loop_reads` (same safety, same fallback): ``None``
        when SQLite would make it wait, the stores are closed, or the database is not a file; the caller then
        reads through the async path. *work* is driven as :meth:`transact_batch` drives its work (it must
        await nothing but statements), and the statements go through the writer thread's compiled path;
        listeners of the injected engine see them. *work* must not return ``None`` (that answer means "read
        elsewhere").

        The loop's commits and these reads share one connection: its page cache stays valid across its own
        commits, where a reader of its own dropped it at each commit and read its pages again (about four
        page reads per echo request; callgrind: 4.35M -> 4.24M instructions per in-process echo request)."""
        if self.inline is None or self._closed:
            return None
        try:
            if self._writer_idle():
                conn = self._batch_connection()
                conn.info[READING] = True
                try:
                    return _drive(work(_ReadExecutor(conn, self._batch_writes)))  # pyright: ignore[reportArgumentType]
                finally:
                    conn.info[READING] = False
                    conn.rollback()  # ends SQLAlchemy's own transaction object; the driver never began one
            conn = self._loop_connection()
            try:
                return _drive(work(_SyncExecutor(conn, self._loop_writes)))  # pyright: ignore[reportArgumentType]
            finally:
                conn.rollback()
        except DBAPIError as exc:
            if self._retryable(exc):
                return None
            raise

    def _loop_connection(self) -> Connection:
        """The loop's read-only connection, for reads while the writer thread uses the shared one."""
        if self._loop_conn is not None and not self._loop_conn.invalidated:
            return self._loop_conn
        reader = self.loop_reader
        if (
            reader is None
        ):  # pragma: no cover - inline (the only caller's condition) is set only with a reader
            raise RuntimeError("loop reads need a database file")
        path = reader.path
        engine = create_sync_engine(
            "sqlite+pysqlite://", creator=lambda: open_read_only(path), poolclass=StaticPool
        )
        hub: Any = self.engine.sync_engine.dispatch

        def on_statement(*args: Any) -> None:
            hub.before_cursor_execute(*args)

        event.listen(engine, "before_cursor_execute", on_statement)
        self._loop_writes = CompiledWrites(engine.dialect, listeners=hub)
        self._loop_conn = engine.connect()
        return self._loop_conn

    def _writer_idle(self) -> bool:
        """No write of this process is in flight and the writer thread has nothing queued or running: the
        loop may use the writer thread's connection now (the lock alone does not say it: a caller cancelled
        while the thread runs its batch leaves the lock, not the thread)."""
        return not self._lock.locked() and (self._batch_thread is None or self._batch_thread.idle)

    def _batch_inline(self, work: Callable[[AsyncConnection, bool], Awaitable[T]]) -> tuple[T] | None:
        """*work* committed on the loop's thread now, on the writer thread's connection (the caller checked
        that the writer thread is idle), or ``None`` when SQLite reported the database busy or
        locked (rolled back: the writer thread runs it, waiting for the lock). Its other errors are raised as
        the writer thread's path raises them. The write lock is not taken: nothing else runs on the loop
        until this returns."""
        try:
            result = self._run_batch(work, on_loop=True)
        except DBAPIError as exc:
            if self._retryable(exc):
                return None
            raise
        self._committed(on_loop=True)
        return (result,)

    def _committed(self, *, on_loop: bool) -> None:
        """Count a commit of the shared connection; start the writer thread's checkpoint when it is due."""
        inline = self.inline
        if inline is None or not inline.committed(on_loop=on_loop):
            return
        if self._checkpointing is None or self._checkpointing.done():
            self._checkpointing = asyncio.get_running_loop().create_task(
                self._checkpoint(inline), name="agentrunner-sqlite-checkpoint"
            )

    async def _checkpoint(self, inline: InlineCommits) -> None:
        """The shared connection never checkpoints by itself (:mod:`._inline`): the writer thread does, under
        the write lock, so no commit of this process runs meanwhile: the checkpoint can copy the whole WAL
        and the next writer starts it over."""
        async with self._lock:
            if self._closed:
                return
            try:
                frames = await self._writer_thread().call(
                    lambda: checkpoint(
                        cast(sqlite3.Connection, self._batch_connection().connection.dbapi_connection)
                    )
                )
            except Exception as exc:  # as SQLite's own automatic checkpoint, a failed one is no write's error
                log.warning("SQLite checkpoint failed: %s", exc)
                return
            inline.checkpointed(frames)

    def _writer_thread(self) -> _WriterThread:
        if self._batch_thread is None:
            self._batch_thread = _WriterThread("agentrunner-sqlite-batch")
        return self._batch_thread

    def _run_batch(self, work: Callable[[AsyncConnection, bool], Awaitable[T]], *, on_loop: bool) -> T:
        """*work* in one transaction with a careful retry, on the writer thread's connection, from that
        thread or (*on_loop*) from the loop's: then ``BEGIN`` never waits for another connection's lock."""
        conn = self._batch_connection()
        careful = False
        while True:
            try:
                return self._in_transaction(conn, work, careful, wait=not on_loop)
            except IntegrityError:
                if careful:
                    raise
                careful = True

    def _in_transaction(
        self,
        conn: Connection,
        work: Callable[[AsyncConnection, bool], Awaitable[T]],
        careful: bool,
        *,
        wait: bool,
    ) -> T:
        """*work* between ``BEGIN IMMEDIATE`` and ``COMMIT`` sent on the driver itself: SQLAlchemy's
        ``Transaction`` around them took about an eighth of this thread's CPU per echo request (cProfile on
        thread time). A statement that goes through SQLAlchemy (not :func:`~._compiled.hot`) makes it begin
        its own transaction object, which then commits or rolls back in its place (``on_begin`` sends no
        second ``BEGIN``). Listeners of the injected engine see the ``BEGIN`` statement and exactly one
        commit, as with ``conn.begin()``. *wait*: for another connection's write lock, up to the busy timeout
        (the shared connection's own is 0 when the loop commits on it too, see :mod:`._inline`)."""
        dbapi: Any = conn.connection.dbapi_connection
        hub: Any = self.engine.sync_engine.dispatch
        if hub.before_cursor_execute:
            hub.before_cursor_execute(conn, None, "BEGIN IMMEDIATE", (), None, False)
        try:
            try:
                dbapi.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                if not (wait and self.inline is not None):
                    raise
                # busy or locked now: wait for the lock as a connection with a busy timeout would, on this
                # thread only; the connection never waits on the loop's
                dbapi.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
                try:
                    dbapi.execute("BEGIN IMMEDIATE")
                finally:
                    dbapi.execute("PRAGMA busy_timeout=0")
        except sqlite3.Error as exc:
            raise DBAPIError.instance(
                "BEGIN IMMEDIATE", (), exc, sqlite3.Error, hide_parameters=True
            ) from exc
        try:
            result = _drive(work(_SyncExecutor(conn, self._batch_writes), careful))  # pyright: ignore[reportArgumentType]
        except BaseException:
            if conn.in_transaction():
                conn.rollback()
            if dbapi.in_transaction:
                dbapi.rollback()
            raise
        if conn.in_transaction():
            conn.commit()  # SQLAlchemy's commit event reaches the listeners through on_commit
            return result
        try:
            dbapi.commit()
        except sqlite3.Error as exc:
            if dbapi.in_transaction:
                dbapi.rollback()
            raise DBAPIError.instance("COMMIT", (), exc, sqlite3.Error, hide_parameters=True) from exc
        hub.commit(conn)
        return result

    def _batch_connection(self) -> Connection:
        if self._batch_conn is not None and not self._batch_conn.invalidated:
            return self._batch_conn
        url = self.engine.url.set(drivername="sqlite+pysqlite")
        engine = create_sync_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False})

        shared = self.inline is not None

        def on_connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # transactions are begun below, as the async writer does
            dbapi_connection.execute("PRAGMA synchronous=NORMAL")
            dbapi_connection.execute("PRAGMA foreign_keys=ON")
            if shared:  # the loop commits and reads on it too: it never waits, never checkpoints (._inline)
                dbapi_connection.execute("PRAGMA busy_timeout=0")
                dbapi_connection.execute("PRAGMA wal_autocheckpoint=0")
            else:
                dbapi_connection.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")

        event.listen(engine, "connect", on_connect)
        self._batch_engine = engine
        self._batch_writes = self._forwarding(engine)
        self._batch_conn = engine.connect()
        return self._batch_conn

    def _forwarding(self, engine: Engine) -> CompiledWrites:
        """Make *engine* (a synchronous writer's, before its first connect) begin its transactions as
        :meth:`_in_transaction` does, and forward its commit and statement events to the listeners of the
        injected engine (metrics, tests counting commits and statements see the writer's work too); the
        compiled statements of its dialect."""
        hub: Any = self.engine.sync_engine.dispatch

        def on_begin(connection: Connection) -> None:
            # on the driver directly: through exec_driver_sql it cost a whole SQLAlchemy execute per batch
            dbapi: Any = connection.connection.dbapi_connection
            if dbapi.in_transaction:  # begun by _in_transaction: SQLAlchemy's transaction joins it
                return
            if connection.info.get(READING):  # a read on the loop's connection: no transaction at all
                return
            if hub.before_cursor_execute:
                hub.before_cursor_execute(connection, None, "BEGIN IMMEDIATE", (), None, False)
            dbapi.execute("BEGIN IMMEDIATE")

        def on_commit(connection: Connection) -> None:
            hub.commit(connection)

        def on_statement(*args: Any) -> None:
            hub.before_cursor_execute(*args)

        event.listen(engine, "begin", on_begin)
        event.listen(engine, "commit", on_commit)
        event.listen(engine, "before_cursor_execute", on_statement)
        return CompiledWrites(engine.dialect, listeners=hub)

    def _close_batch(self) -> None:
        if self._batch_conn is not None:
            self._batch_conn.close()
            self._batch_conn = None
        if self._batch_engine is not None:
            self._batch_engine.dispose()
            self._batch_engine = None

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
        async with self._pool_readers, self._read_engine.connect() as conn:
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
        if self.loop_reader is not None:
            self.loop_reader.close()
        if self._checkpointing is not None:
            await self._checkpointing
        async with self._read_lock:
            if self._reader is not None:
                await self._reader.close()
                self._reader = None
        async with self._lock:
            self._closed = True
            if self._batch_thread is not None:
                await self._batch_thread.call(self._close_batch)
                self._batch_thread.stop()
                self._batch_thread = None
            else:  # every commit and read on the shared connection was the loop's: no thread to close it
                self._close_batch()
            if self._writer is not None:
                # the driver connection was switched to implicit transactions: never hand it back to the pool
                await self._writer.invalidate()
                await self._writer.close()
                self._writer = None
        if self._loop_conn is not None:  # after _closed: no loop read opens it again
            self._loop_conn.close()
            self._loop_conn.engine.dispose()
            self._loop_conn = None


class _WriterThread:
    """The thread the SQLite writer's transactions run on, fed through a queue: one hop costs a queue put and
    one ``call_soon_threadsafe`` back, about half the event loop's CPU of a ``run_in_executor`` hop (no work
    item, no concurrent future chained to the asyncio one)."""

    def __init__(self, name: str) -> None:
        self._queue: SimpleQueue[
            tuple[Callable[[], Any], asyncio.Future[Any], asyncio.AbstractEventLoop] | None
        ] = SimpleQueue()
        # a daemon: a process that exits without closing its stores is not held up by it (an unfinished
        # transaction is rolled back by SQLite, and nothing was acknowledged before its commit returned)
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        # Calls handed over (counted on the caller's thread) and calls finished (on this one): each counter
        # has one writer, so no lock; a stale read of the second only ever says "busy"
        self._queued = 0
        self._finished = 0
        self._thread.start()

    async def call(self, fn: Callable[[], T]) -> T:
        """Run *fn* on the thread (after what was queued before) and return its result or raise its error."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queued += 1
        self._queue.put((fn, future, loop))
        return await future

    @property
    def idle(self) -> bool:
        """Nothing queued or running (as far as the caller's thread knows: a call that just ended may still
        count as running)."""
        return self._finished == self._queued

    def stop(self) -> None:
        """Let the thread end after the queued calls, and wait for it."""
        self._queue.put(None)
        self._thread.join()

    def _serve(self) -> None:
        while (item := self._queue.get()) is not None:
            fn, future, loop = item
            try:
                result = fn()
            except BaseException as exc:  # handed to the caller, as run_in_executor does
                self._finished += 1
                _call_back(loop, _fail, future, exc)
            else:
                self._finished += 1
                _call_back(loop, _succeed, future, result)


def _call_back(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits for the answer any more
        loop.call_soon_threadsafe(fn, *args)


def _succeed(future: asyncio.Future[T], result: T) -> None:
    if not future.done():  # the caller may have been cancelled meanwhile
        future.set_result(result)


def _fail(future: asyncio.Future[T], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


class _SyncExecutor:
    """The ``execute`` of an :class:`AsyncConnection` over a synchronous connection (same results): lets
    the stores' statement-only async work run unchanged in one hop on the writer thread. Statements marked
    :func:`~._compiled.hot` run on the driver's cursor (see :mod:`._compiled`)."""

    __slots__ = ("_conn", "_writes")

    def __init__(self, conn: Connection, writes: CompiledWrites | None) -> None:
        self._conn = conn
        self._writes = writes

    async def execute(self, statement: Any, parameters: Any = None) -> Any:
        if self._writes is None:
            return self._conn.execute(statement, parameters)
        return self._writes.execute(self._conn, statement, parameters)


class _ReadExecutor(_SyncExecutor):
    """:class:`_SyncExecutor` for the reads of :meth:`Database.read_on_loop`, on a connection that also
    writes: it runs ``SELECT`` statements only (what ``query_only`` guaranteed on a reader of its own;
    switching that pragma per read expires every prepared statement of the connection)."""

    __slots__ = ()

    async def execute(self, statement: object, parameters: object = None) -> object:
        if not getattr(statement, "is_select", False):
            raise RuntimeError(
                f"a read on the loop runs SELECT statements only, not {type(statement).__name__}"
            )
        return await super().execute(statement, parameters)


def _drive(coroutine: Awaitable[T]) -> T:
    """Run a coroutine that never suspends to its end, without an event loop."""
    step: Any = coroutine.__await__()
    try:
        step.send(None)
    except StopIteration as stop:
        return cast(T, stop.value)
    step.close()
    raise RuntimeError("a batch write awaited something other than a statement")


def _implicit_begin(connection: Connection) -> None:
    dbapi: Any = connection.connection.dbapi_connection
    dbapi.isolation_level = "DEFERRED"
