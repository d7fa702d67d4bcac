"""Journal commits on the event loop's own thread, when nothing else waits for that thread (SQLite files).

A journal transaction of a short run (its start, results and end: about six statements and one commit) is
handed to the writer thread (:meth:`.Database.transact_batch`): a queue put, a futex wake-up of that thread,
a wake-up of the loop through its self-pipe and one more loop iteration, about 100 µs of the host's CPU per
serial echo request beyond the transaction itself. But the writer thread's work overlaps the loop's: under
concurrent load the loop is the bottleneck, and committing every batch on it cost a third of the requests/s
at 10 clients (the transactions it no longer handed off no longer overlapped, nor were they grouped while the
writer was busy). So a batch is committed here only when that takes nothing from anyone:

* the loop has no other callback ready to run (its ready queue is empty; a loop without that queue never
  qualifies): bench ``http_echo`` found it empty at 99% of the journal's commits of serial requests and at 2%
  of those at 10 clients;
* no write of the process is in flight (the write lock is free, so the writer thread is idle).

What keeps the loop from ever waiting on SQLite here:

* ``busy_timeout`` is 0: when another connection (another process) holds the write lock, ``BEGIN
  IMMEDIATE`` fails at once and the batch goes to the writer thread, which waits for the lock as before.
* ``wal_autocheckpoint`` is 0: a commit here never copies the WAL into the database file (milliseconds at
  times). The writer thread runs a passive checkpoint instead (:meth:`InlineCommits.committed` says when),
  after about as many WAL frames as SQLite's own automatic checkpoint waits for.

The loop's reads (:meth:`.Database.read_on_loop`, a run start's: ``SELECT`` statements only) use the same
connection: a connection's page cache stays valid across its own commits, while a reader of its own dropped
it at every commit of another connection and read its pages again. (``query_only`` is not switched on for
them: changing that pragma expires every prepared statement of the connection.)

Everything else is the writer thread's path: the same transaction code, compiled statements, listeners,
careful retry and errors (see :mod:`._connections`).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import urllib.parse
from collections import deque
from collections.abc import Callable
from typing import Final, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.pool import StaticPool

from ._compiled import CompiledWrites

__all__ = ["CHECKPOINT_COMMITS", "CHECKPOINT_FRAMES", "READING", "InlineCommits", "checkpoint", "loop_idle"]

T = TypeVar("T")

READING: Final = "agentrunner_loop_read"
"""Key of a connection's ``info`` set while :meth:`InlineCommits.read` runs (a SQLAlchemy transaction begun
then sends no ``BEGIN``)."""
CHECKPOINT_FRAMES: Final = 1000
"""WAL frames after which the writer thread checkpoints what the loop committed (SQLite's own default)."""
CHECKPOINT_COMMITS: Final = 32
"""Commits here before the first checkpoint, before the WAL's growth per commit is known (an echo request's
commit writes about 16 frames)."""
_MAX_INTERVAL: Final = 128


def loop_idle() -> bool:
    """The running loop has no callback ready besides the one running now: nothing would wait for it.

    The ready queue is an attribute of asyncio's own loops (``BaseEventLoop._ready``) and of no public API; a
    loop without it (another implementation) never counts as idle, so its batches keep the writer thread.
    """
    ready: object = getattr(asyncio.get_running_loop(), "_ready", None)
    return isinstance(ready, deque) and not ready


class InlineCommits:
    """The loop thread's write connection to the database file *path* (opened at its first commit) and when
    the writer thread checkpoints after it. Use :meth:`connection` only from the loop's thread."""

    def __init__(
        self,
        path: str,
        *,
        on_connect: Callable[[sqlite3.Connection], None],
        forward: Callable[[Engine], CompiledWrites],
        checkpoint_frames: int = CHECKPOINT_FRAMES,
    ) -> None:
        self._path = os.path.abspath(path)
        self._on_connect = on_connect
        self._forward = forward
        self._conn: Connection | None = None
        self.writes: CompiledWrites | None = None
        """The compiled statements of :meth:`connection` (set when it opens)."""
        self._checkpoint_frames = checkpoint_frames
        self._interval = CHECKPOINT_COMMITS
        self._since = 0
        self._measured = CHECKPOINT_COMMITS
        """Commits here since the last checkpoint was handed to the writer thread."""
        self.commits = 0
        """Transactions committed on the loop (what the writer thread's round-trip counters do not see)."""

    def connection(self) -> Connection:
        """The connection (opened now if it is not open)."""
        if self._conn is not None and not self._conn.invalidated:
            return self._conn
        on_connect = self._on_connect
        uri = f"file:{urllib.parse.quote(self._path)}?mode=rw"  # mode=rw: never creates the file

        def connect() -> sqlite3.Connection:
            dbapi = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            try:
                on_connect(dbapi)
                dbapi.execute("PRAGMA busy_timeout=0")
                dbapi.execute("PRAGMA wal_autocheckpoint=0")
            except BaseException:
                dbapi.close()
                raise
            return dbapi

        engine = create_sync_engine("sqlite+pysqlite://", creator=connect, poolclass=StaticPool)
        self.writes = self._forward(engine)  # before the connect: a connection sees the listeners of then
        self._conn = engine.connect()
        return self._conn

    def read(self, run: Callable[[Connection, CompiledWrites | None], T]) -> T:
        """*run* the ``SELECT`` statements of :meth:`.Database.read_on_loop` on the connection, each in
        autocommit (no transaction stays open between reads, none is begun for them)."""
        conn = self.connection()
        conn.info[READING] = True
        try:
            return run(conn, self.writes)
        finally:
            conn.info[READING] = False
            conn.rollback()  # ends SQLAlchemy's own transaction object; the driver never began one

    def committed(self) -> bool:
        """Count a commit made here; True when the writer thread should now checkpoint (then report the
        WAL's size to :meth:`checkpointed`)."""
        self.commits += 1
        self._since += 1
        if self._since < self._interval:
            return False
        self._since = 0
        self._measured = self._interval
        return True

    def checkpointed(self, frames: int) -> None:
        """The WAL held *frames* frames at the checkpoint :meth:`committed` asked for, :meth:`committed`'s
        interval after the one before (which the next writer started over, see :meth:`.Database._checkpoint`):
        aim the next one at :data:`CHECKPOINT_FRAMES` frames. An estimate, bounded: the frames also hold the
        other connections' commits (which checkpoint on their own past that size). Checkpointing more often
        copies the pages every commit rewrites (the tables' last leaves) more often. Called on the writer
        thread: an int is replaced, nothing is read back there."""
        if frames > 0:
            self._interval = max(1, min(_MAX_INTERVAL, self._measured * self._checkpoint_frames // frames))

    @property
    def interval(self) -> int:
        """Commits here between two checkpoints (the current estimate)."""
        return self._interval

    def close(self) -> None:
        """Close the connection (from any thread, once nothing uses it)."""
        if self._conn is not None:
            engine = self._conn.engine
            self._conn.close()
            engine.dispose()
            self._conn = None


def checkpoint(dbapi: sqlite3.Connection) -> int:
    """Run a passive checkpoint on *dbapi* (it never waits for a lock); the WAL's frames before it."""
    row: tuple[int, int, int] | None = dbapi.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return 0 if row is None else row[1]
