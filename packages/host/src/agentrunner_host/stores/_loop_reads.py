"""Short point reads of SQLite on the event loop's own thread, over a plain ``sqlite3`` connection.

A read through SQLAlchemy async over aiosqlite costs several thread hops (cursor, execute, fetch, close),
each a wake-up of aiosqlite's thread and a hand-back of the GIL: a primary-key ``SELECT`` that SQLite answers
in a few microseconds cost a back-call ~0.5 ms of the host's CPU (bench ``peer_langbot``, PF9). A point read
by primary key of one bounded row (state values are at most 256 KiB) costs less on the loop itself than a
single hop, so the run-scoped reads that back-calls make most (``state.get``) are served here.

Why this is safe on the loop:

* WAL readers never wait for the writer (this process's or another's): the statement reads the last
  committed snapshot. The connection has a zero busy timeout, so the rare moments SQLite would make a reader
  wait (another connection recovering the WAL index, a database not in WAL mode while it commits) raise at
  once instead; :meth:`LoopReader.fetch` then answers ``None`` and the caller reads through the async path.
* ``query_only`` is on: the connection can never write.
* Every statement is run to its end (``fetchall``), so no read transaction stays open between reads and
  checkpoints are never held back.

Only plain database files qualify (an in-memory database is private to its connection).
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, cast

from sqlalchemy import ClauseElement
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.sql.compiler import SQLCompiler

__all__ = ["LoopReader", "PointRead", "loop_reader_for", "open_read_only"]

_DIALECT: Final = sqlite_dialect.dialect()


@dataclass(frozen=True, slots=True)
class PointRead:
    """A ``SELECT`` compiled once by SQLAlchemy for SQLite (the same SQL text its execute would send), run
    with positional parameters taken by name."""

    sql: str
    """SQL text with ``?`` placeholders."""
    names: tuple[str, ...]
    """Bind parameter names, in placeholder order."""

    @classmethod
    def of(cls, statement: ClauseElement) -> PointRead:
        """Compile the ``SELECT`` *statement* (its bind parameters named with :func:`~sqlalchemy.bindparam`)."""
        compiled = cast(SQLCompiler, statement.compile(dialect=_DIALECT))
        if any(b.expanding for b in compiled.binds.values()):
            raise ValueError("a point read takes no expanding IN parameters")
        return cls(compiled.string, tuple(compiled.positiontup or ()))

    def parameters(self, values: Mapping[str, object]) -> tuple[object, ...]:
        """The positional parameters for *values* by name."""
        return tuple(values[name] for name in self.names)


def open_read_only(path: str) -> sqlite3.Connection:
    """A read-only ``sqlite3`` connection to the database file *path* that never waits for a lock.

    Autocommit (no implicit BEGIN): each statement reads the latest commit. mode=rw: a reader never creates
    the file. check_same_thread is off: the connection belongs to whichever thread runs the stores' event
    loop, one at a time."""
    uri = f"file:{urllib.parse.quote(path)}?mode=rw"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA query_only=ON")
        conn.execute("PRAGMA busy_timeout=0")
    except BaseException:
        conn.close()
        raise
    return conn


def loop_reader_for(database: str | None) -> LoopReader | None:
    """A reader of the SQLite *database* (the URL's path), or ``None`` unless it is a plain file."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return LoopReader(os.path.abspath(database))


class LoopReader:
    """The plain ``sqlite3`` connection of :mod:`._loop_reads` (opened at the first read, closed by
    :meth:`close`); use it only from the event loop's thread."""

    def __init__(self, path: str) -> None:
        self.path = path
        """The database file (absolute)."""
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self.reads = 0
        """Statements answered on the loop (what statement counters of the engine do not see)."""

    def fetch(self, read: PointRead, values: Mapping[str, object]) -> list[tuple[object, ...]] | None:
        """Every row *read* selects, or ``None`` when SQLite would make the reader wait (busy, locked) or
        the reader is closed: the caller then reads through the async path."""
        if self._closed:
            return None
        try:
            conn = self._conn or self._open()
            rows: list[tuple[object, ...]] = conn.execute(read.sql, read.parameters(values)).fetchall()
        except sqlite3.OperationalError:
            return None
        self.reads += 1
        return rows

    def _open(self) -> sqlite3.Connection:
        self._conn = open_read_only(self.path)
        return self._conn

    def close(self) -> None:
        """Close the connection; later reads answer ``None``."""
        self._closed = True
        if self._conn is not None:
            self._conn.close()
            self._conn = None
