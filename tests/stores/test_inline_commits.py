"""Journal batches committed on the event loop's own thread (``stores._inline``): only when the writer
thread is idle and no write is in flight; never waiting for SQLite's write lock (another connection's lock
sends the batch to the writer thread, which waits for it); never checkpointing on the loop (the writer thread
does)."""

from __future__ import annotations

import asyncio
import sqlite3
import struct
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from agentrunner_host.access import ConversationKey
from agentrunner_host.stores import HostStores, ResultRecord
from agentrunner_host.stores._connections import Database
from agentrunner_host.stores._inline import InlineCommits, checkpoint
from agentrunner_host.stores.runs import INLINE_MAX_ROWS
from sqlalchemy import event, func, select, table, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from .helpers import run_start

SQLITE = pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
"""SQLite files only: PostgreSQL has no writer thread (its journal transaction is one statement)."""

WRITER = "agentrunner-sqlite-batch"


@pytest.fixture
async def db(engine: AsyncEngine) -> AsyncIterator[Database]:
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE scratch (x BLOB)"))
    opened = Database(engine)
    try:
        yield opened
    finally:
        await opened.aclose()


class Seen:
    """The threads the engine's listeners saw ``BEGIN IMMEDIATE`` and commits on (forwarded from the
    stores' own connections)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.begins: list[str] = []
        self.commits: list[str] = []
        self.writer_began = threading.Event()

        def on_statement(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
            if statement == "BEGIN IMMEDIATE":
                name = threading.current_thread().name
                self.begins.append(name)
                if name == WRITER:
                    self.writer_began.set()

        def on_commit(_conn: object) -> None:
            self.commits.append(threading.current_thread().name)

        event.listen(engine.sync_engine, "before_cursor_execute", on_statement)
        event.listen(engine.sync_engine, "commit", on_commit)


def _insert(size: int = 10) -> Callable[[AsyncConnection, bool], Awaitable[None]]:
    async def work(conn: AsyncConnection, _careful: bool) -> None:
        await conn.execute(text("INSERT INTO scratch (x) VALUES (:x)"), {"x": b"x" * size})

    return work


def _held(
    release: threading.Event, started: threading.Event
) -> Callable[[AsyncConnection, bool], Awaitable[None]]:
    """A batch that holds the writer thread (inside its transaction) until *release* is set."""

    async def work(conn: AsyncConnection, _careful: bool) -> None:
        await conn.execute(text("INSERT INTO scratch (x) VALUES (:x)"), {"x": b"held"})
        started.set()
        release.wait(30)

    return work


def _path(engine: AsyncEngine) -> str:
    database = engine.url.database
    assert database is not None
    return database


def _stored(engine: AsyncEngine) -> int:
    with sqlite3.connect(_path(engine)) as conn:
        return int(conn.execute("SELECT count(*) FROM scratch").fetchone()[0])


def _wal_index(engine: AsyncEngine) -> tuple[int, int]:
    """The WAL's last frame and how far it is copied into the database (``mxFrame``, ``nBackfill`` of the
    wal-index header in the ``-shm`` file, native byte order; https://www.sqlite.org/walformat.html)."""
    data = Path(_path(engine) + "-shm").read_bytes()
    return struct.unpack_from("=I", data, 16)[0], struct.unpack_from("=I", data, 96)[0]


@SQLITE
async def test_with_the_writer_thread_idle_the_loop_commits_the_batch_itself(
    engine: AsyncEngine, db: Database
) -> None:
    seen = Seen(engine)
    await db.transact_batch(_insert(), inline=True)
    loop_thread = threading.current_thread().name
    assert seen.begins == [loop_thread]
    assert seen.commits == [loop_thread]
    assert db.inline is not None and db.inline.commits == 1
    assert _stored(engine) == 1


@SQLITE
async def test_without_inline_the_writer_thread_commits_and_other_work_on_the_loop_does_not_matter(
    engine: AsyncEngine, db: Database
) -> None:
    seen = Seen(engine)
    await db.transact_batch(_insert())  # not asked for
    asyncio.get_running_loop().call_soon(lambda: None)  # a callback is ready: the loop commits all the same
    await db.transact_batch(_insert(), inline=True)
    assert seen.commits == [WRITER, threading.current_thread().name]
    assert db.inline is not None and db.inline.commits == 1
    assert _stored(engine) == 2


@SQLITE
async def test_another_connections_write_lock_sends_the_batch_to_the_writer_thread(
    engine: AsyncEngine, db: Database
) -> None:
    seen = Seen(engine)
    other = sqlite3.connect(_path(engine), isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        write = asyncio.create_task(db.transact_batch(_insert(), inline=True))
        # the loop tried once (busy at once), then the writer thread began and waits for the lock
        assert await asyncio.to_thread(seen.writer_began.wait, 10)
        assert seen.begins[0] == threading.current_thread().name
        assert not write.done()
        other.rollback()
        await write
    finally:
        other.close()
    assert seen.commits == [WRITER]
    assert db.inline is not None and db.inline.commits == 0
    assert _stored(engine) == 1
    await db.transact_batch(_insert(), inline=True)  # the lock is free again: the loop commits
    assert seen.commits == [WRITER, threading.current_thread().name]


@SQLITE
async def test_a_large_commit_on_the_loop_leaves_the_checkpoint_to_the_writer_thread(
    engine: AsyncEngine, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit past SQLite's automatic checkpoint size (1000 frames) on the loop does not checkpoint; the
    writer thread does, after the interval (commits on either thread count), and the WAL then starts over."""
    ran_on: list[str] = []
    done = threading.Event()

    def recording(dbapi: sqlite3.Connection) -> int:
        ran_on.append(threading.current_thread().name)
        try:
            return checkpoint(dbapi)
        finally:
            done.set()

    monkeypatch.setattr("agentrunner_host.stores._connections.checkpoint", recording)
    inline = db.inline
    assert inline is not None
    await db.transact_batch(_insert(6 * 1024 * 1024), inline=True)
    frames, copied = _wal_index(engine)
    assert frames > 1000
    assert copied == 0
    due = inline.interval
    for n in range(due - 1):
        await db.transact_batch(_insert(), inline=n % 2 == 0)
    assert await asyncio.to_thread(done.wait, 10)
    assert ran_on == [WRITER]
    frames, copied = _wal_index(engine)
    assert copied == frames  # the whole WAL, nobody wrote meanwhile (the checkpoint holds the write lock)
    await db.transact_batch(_insert(), inline=True)
    assert _wal_index(engine)[0] < 100  # the next writer started the WAL over
    assert _stored(engine) == due + 1


@SQLITE
async def test_the_writer_threads_commits_do_not_checkpoint_either(engine: AsyncEngine, db: Database) -> None:
    """The writer thread commits on the same connection: past 1000 frames, nothing is copied until the
    checkpoint is due."""
    await db.transact_batch(_insert(6 * 1024 * 1024))
    frames, copied = _wal_index(engine)
    assert frames > 1000
    assert copied == 0


def test_the_checkpoint_interval_aims_at_a_thousand_frames() -> None:
    inline = InlineCommits()
    interval = inline.interval
    assert [inline.committed(on_loop=True) for _ in range(interval)] == [False] * (interval - 1) + [True]
    assert inline.commits == interval
    inline.checkpointed(interval * 20)  # 20 frames a commit
    assert inline.interval == 50
    for _ in range(50):
        inline.committed(on_loop=False)
    assert inline.commits == interval
    inline.checkpointed(50 * 2000)  # very large commits: checkpoint after every one
    assert inline.interval == 1


@SQLITE
async def test_reads_on_the_loop_share_its_connection_read_only_and_without_a_transaction(
    engine: AsyncEngine, db: Database
) -> None:
    """A start's reads on the loop use the connection the loop commits on (its page cache stays valid): they
    run SELECT statements only, begin no transaction (another connection's write lock does not stop them),
    and the connection commits again afterwards."""
    await db.transact_batch(_insert(), inline=True)

    async def count(conn: AsyncConnection) -> int:
        return int((await conn.execute(select(func.count()).select_from(table("scratch")))).scalar_one())

    async def write(conn: AsyncConnection) -> int:
        await conn.execute(text("INSERT INTO scratch (x) VALUES (1)"))
        return 1

    other = sqlite3.connect(_path(engine), isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        assert db.read_on_loop(count) == 1
        other.rollback()
    finally:
        other.close()
    with pytest.raises(RuntimeError, match="SELECT statements only"):
        db.read_on_loop(write)
    await db.transact_batch(_insert(), inline=True)
    assert db.inline is not None and db.inline.commits == 2
    assert db.read_on_loop(count) == 2


@SQLITE
async def test_the_journal_commits_short_transactions_on_the_loop_and_long_ones_on_the_writer_thread(
    stores: HostStores,
) -> None:
    seen = Seen(stores.engine)
    await stores.runs.start(run_start("r1", ConversationKey("c1")))
    seen.commits.clear()
    log = stores.runs.log("r1")

    def append(first: int, count: int) -> None:
        for n in range(first, first + count):
            payload = b'{"type":"message.delta","data":{"chunk":{"content":"c"}}}'
            record = ResultRecord(
                run_id="r1",
                host_seq=n,
                runner_sequence=n,
                type="message.delta",
                payload=payload,
                created_at=n,
            )
            log.append(n, record, size=len(payload))

    append(1, 3)
    await asyncio.wait_for(log.durable(3), timeout=30)
    assert seen.commits == [threading.current_thread().name]
    append(4, INLINE_MAX_ROWS + 1)
    await asyncio.wait_for(log.durable(4 + INLINE_MAX_ROWS), timeout=30)
    assert seen.commits[1:] == [WRITER]


@SQLITE
async def test_a_cancelled_caller_leaves_the_connection_to_the_writer_thread_until_it_is_done(
    engine: AsyncEngine, db: Database
) -> None:
    """A caller cancelled while the writer thread runs its batch gives up the write lock, not the thread: the
    loop neither commits nor reads on the shared connection until the thread is idle again."""
    seen = Seen(engine)
    release, started = threading.Event(), threading.Event()
    held = asyncio.create_task(db.transact_batch(_held(release, started)))
    try:
        assert await asyncio.to_thread(started.wait, 10)
        held.cancel()
        with pytest.raises(asyncio.CancelledError):  # noqa: PT011 - a cancellation has no message
            await held

        async def count(conn: AsyncConnection) -> int:
            return int((await conn.execute(select(func.count()).select_from(table("scratch")))).scalar_one())

        # the read goes to the read-only connection: the held batch is not committed yet
        assert db.read_on_loop(count) == 0
        queued = asyncio.create_task(db.transact_batch(_insert(), inline=True))
        await asyncio.sleep(0)  # let it start: it must queue behind the thread, not commit on the loop
        assert seen.commits == []
    finally:
        release.set()
    await queued
    assert seen.commits == [WRITER, WRITER]
    assert db.inline is not None and db.inline.commits == 0
    assert _stored(engine) == 2
