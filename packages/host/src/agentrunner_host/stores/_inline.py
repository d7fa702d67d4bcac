"""Journal commits on the event loop's own thread, when the writer thread is idle (SQLite files).

A journal transaction of a short run (its start, results and end: about six statements and one commit) used
to be handed to the writer thread (:meth:`.Database.transact_batch`) always: a queue put, a futex wake-up of
that thread, the GIL handed over and back, a wake-up of the loop through its self-pipe and one more loop
iteration. A short transaction is committed right on the loop instead whenever no write of the process is in
flight and the writer thread has nothing queued or running; a long one (see ``runs.INLINE_MAX_ROWS``), or
one that arrives while the thread works, still goes to the thread. Measured against handing over only when
the loop had no other callback ready (same tree otherwise, same quiet machine, ``bench.http_echo`` and
``bench --only host``, 2026-12-07): requests/s at 10 clients 831–894 → 1,166–1,207, server CPU per request
987–1,000 → 912 µs, 50 concurrent persisted runs of 52 results 1,010 → 997 µs/run. (An earlier version with
a write connection of its own for the loop had lost a third of the requests/s at 10 clients this way.)

The loop commits on the writer thread's own connection (the two never use it at once: the loop only when
the thread has nothing queued or running). One connection, not one per thread: each writing connection
drops its page cache whenever another commits, and with two of them concurrent runs that followed serial
ones wrote at about 60% of their speed (measured, see bench/RESULTS.md).

What keeps the loop from ever waiting on SQLite here:

* the connection's ``busy_timeout`` is 0: when another connection (another process) holds the write lock,
  ``BEGIN IMMEDIATE`` fails at once and the batch goes to the writer thread, which waits for the lock
  (it sets the busy timeout for that one ``BEGIN``).
* its ``wal_autocheckpoint`` is 0: a commit here never copies the WAL into the database file (milliseconds
  at times). The writer thread runs a passive checkpoint instead (:meth:`InlineCommits.committed` says
  when), after about as many WAL frames as SQLite's own automatic checkpoint waits for.

The loop's reads (:meth:`.Database.read_on_loop`, a run start's: ``SELECT`` statements only) use that
connection too when the writer thread is idle: a connection's page cache stays valid across its own commits,
while a reader of its own drops it at every commit of another connection and reads its pages again.
(``query_only`` is not switched on for them: changing that pragma expires every prepared statement of the
connection.) While the thread works, they use a read-only connection of their own.

Everything else is the writer thread's path: the same transaction code, compiled statements, listeners,
careful retry and errors (see :mod:`._connections`).
"""

from __future__ import annotations

import sqlite3
from typing import Final

__all__ = ["CHECKPOINT_COMMITS", "CHECKPOINT_FRAMES", "READING", "InlineCommits", "checkpoint"]

READING: Final = "agentrunner_loop_read"
"""Key of a connection's ``info`` set while :meth:`.Database.read_on_loop` reads on it (a SQLAlchemy
transaction begun then sends no ``BEGIN``)."""
CHECKPOINT_FRAMES: Final = 1000
"""WAL frames after which the writer thread checkpoints the shared connection's commits (SQLite's own default)."""
CHECKPOINT_COMMITS: Final = 32
"""Commits here before the first checkpoint, before the WAL's growth per commit is known (an echo request's
commit writes about 16 frames)."""
_MAX_INTERVAL: Final = 128


class InlineCommits:
    """When the writer thread checkpoints the shared write connection (whose own automatic checkpoint is off,
    so that no commit on the loop ever copies the WAL), and how many commits the loop made itself."""

    def __init__(self, *, checkpoint_frames: int = CHECKPOINT_FRAMES) -> None:
        self._checkpoint_frames = checkpoint_frames
        self._interval = CHECKPOINT_COMMITS
        self._since = 0
        self._measured = CHECKPOINT_COMMITS
        """Commits since the last checkpoint was handed to the writer thread."""
        self.commits = 0
        """Transactions committed on the loop (what the writer thread's round-trip counters do not see)."""

    def committed(self, *, on_loop: bool) -> bool:
        """Count a commit of the shared connection (*on_loop*: made on the loop's thread); True when the
        writer thread should now checkpoint (then report the WAL's size to :meth:`checkpointed`). Called on
        the loop's thread only."""
        if on_loop:
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
        copies the pages every commit rewrites (the tables' last leaves) more often."""
        if frames > 0:
            self._interval = max(1, min(_MAX_INTERVAL, self._measured * self._checkpoint_frames // frames))

    @property
    def interval(self) -> int:
        """Commits between two checkpoints (the current estimate)."""
        return self._interval


def checkpoint(dbapi: sqlite3.Connection) -> int:
    """Run a passive checkpoint on *dbapi* (it never waits for a lock); the WAL's frames before it."""
    row: tuple[int, int, int] | None = dbapi.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return 0 if row is None else row[1]
