"""PostgreSQL: a run start or a journal transaction as one statement, sent to the server in one round trip.

Through SQLAlchemy over asyncpg every statement of a transaction waits for the server once: a journal
transaction that ends a run cost ``BEGIN``, the run's update, the state updates, the results, the sequence
counters (``RETURNING``), the events, the transcript items and ``COMMIT`` — eight waits — and a start six.
Here the whole transaction is **one** statement: data-modifying CTEs, one per table, whose rows arrive as one
array per column (``unnest``), executed in autocommit. PostgreSQL runs a lone statement as its own
transaction and commits it when the statement ends, so the client waits once (asyncpg sends a prepared
statement's Bind/Execute/Sync together; the prepare itself is cached per connection). Every CTE runs to
completion whether the main query reads it or not, and if any part fails the whole statement rolls back.

What the multi-statement path did and this one keeps:

* numbering without gaps: the ``sequence_counters`` rows are bumped by one ``INSERT ... ON CONFLICT DO
  UPDATE ... RETURNING`` in sorted order (row locks held to the commit, no lock cycles), and each event or
  item takes ``last_seq - <rows of its line in this batch> + <its place in the line>``;
* insertion order: events and items are inserted ``ORDER BY`` their place in the batch, so ``events.id`` is
  append order, as before;
* a run's end only from ``running``: the run updates return the ids they touched, and the statement's
  result divides by ``count = expected`` (``1 / 0`` when a run was unknown, not running or finished by
  another host meanwhile), which aborts — and so rolls back — everything; that error becomes
  :class:`RunStateError`;
* idempotent ids: a known event or item id makes the statement fail with a unique violation, and the caller
  then runs the old, careful path (it looks before it inserts);
* triggers fire as for separate statements (the FTS index is an expression index; the ``run_results``
  statement trigger sends its ``NOTIFY`` at commit).

Shapes this statement does not cover go through the multi-statement path (:func:`covers`): a state key
written twice in one transaction (``ON CONFLICT DO UPDATE`` cannot touch a row twice in one statement).
Column lists, types and bind processing come from the SQLAlchemy tables, which stay the schema's source.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final, cast

from sqlalchemy import Table, TextClause, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import DBAPIError
from sqlalchemy.types import String

from agentrunner_host.stores.tables import EventRow, ResultRow, RunRow, SequenceCounterRow, StateRow

from ._sql import digest, main_line
from .errors import RunStateError
from .records import EVENTS, ITEMS, EventEntry, TranscriptEntry, event_row, item_row
from .state import StateWrite, owner_text

__all__ = ["PgBatch", "covers", "run_state_error", "statement"]

_DIALECT: Final = postgresql.dialect()
_PREPARER: Final = _DIALECT.identifier_preparer
_RUNS: Final = cast(Table, RunRow.__table__)
_RESULTS: Final = cast(Table, ResultRow.__table__)
_STATE: Final = cast(Table, StateRow.__table__)
_COUNTERS: Final = cast(Table, SequenceCounterRow.__table__)
assert cast(Table, EventRow.__table__) is EVENTS

_GUARD_SQLSTATE: Final = "22012"
"""``division_by_zero``: raised on purpose by the statement when a run's end found the run not running."""


def _q(name: str) -> str:
    return _PREPARER.quote(name)


@dataclass(frozen=True, slots=True)
class _Columns:
    """The columns of one table written from arrays: names, array types and bind processors."""

    table: Table
    names: tuple[str, ...]
    arrays: tuple[str, ...]
    processors: tuple[Callable[[Any], Any] | None, ...]

    def unnest(self, prefix: str, extra: Sequence[tuple[str, str]] = ()) -> str:
        """``unnest(CAST(:p_a AS T[]), ...)`` over the columns, then *extra* (bind name, array type)."""
        casts = [f"CAST(:{prefix}_{n} AS {a})" for n, a in zip(self.names, self.arrays, strict=True)]
        casts += [f"CAST(:{prefix}_{n} AS {a})" for n, a in extra]
        return f"unnest({', '.join(casts)})"

    def params(self, prefix: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
        """One array per column, each value through the column's bind processor (JSON text, ...)."""
        out: dict[str, list[Any]] = {}
        for name, process in zip(self.names, self.processors, strict=True):
            values = [row[name] for row in rows]
            out[f"{prefix}_{name}"] = values if process is None else [process(v) for v in values]
        return out


def _array_type(column: Any) -> str:
    # strings as TEXT[]: a column's COLLATE cannot go inside an array cast, and the insert assigns TEXT to
    # VARCHAR(n) with the same length check as before
    if isinstance(column.type, String):
        return "TEXT[]"
    impl = column.type.dialect_impl(_DIALECT)
    if isinstance(impl, String):
        return "TEXT[]"
    return f"{column.type.compile(dialect=_DIALECT)}[]"


@cache
def _columns(table_name: str, exclude: frozenset[str] = frozenset()) -> _Columns:
    table = {t.name: t for t in (_RUNS, _RESULTS, _STATE, EVENTS, ITEMS)}[table_name]
    columns = [c for c in table.columns if c.name not in exclude]
    return _Columns(
        table=table,
        names=tuple(c.name for c in columns),
        arrays=tuple(_array_type(c) for c in columns),
        processors=tuple(c.type.dialect_impl(_DIALECT).bind_processor(_DIALECT) for c in columns),
    )


@dataclass(slots=True)
class PgBatch:
    """The rows of one start or journal transaction."""

    runs: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    """``runs`` rows to insert (starts)."""
    finishes: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    """Run ends: ``run_id``, ``status``, ``code``, ``message``, ``ended_at``, ``usage``."""
    results: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    """``run_results`` rows."""
    state: list[StateWrite] = field(default_factory=list[StateWrite])
    """State updates, in order (each key at most once: see :func:`covers`)."""
    events: list[EventEntry] = field(default_factory=list[EventEntry])
    """Events and host records (ids assumed new; duplicates in the batch are stored once)."""
    items: list[TranscriptEntry] = field(default_factory=list[TranscriptEntry])
    """Transcript items (likewise)."""


def covers(batch: PgBatch) -> bool:
    """Whether :func:`statement` can write *batch* (no state key written twice)."""
    keys = [(owner_text(w.owner), w.key) for w in batch.state]
    return len(set(keys)) == len(keys)


def run_state_error(exc: DBAPIError, batch: PgBatch) -> RunStateError | None:
    """The :class:`RunStateError` that *exc* stands for, when it is the statement's own guard."""
    orig: Any = exc.orig
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if state != _GUARD_SQLSTATE or not batch.finishes:
        return None
    if len(batch.finishes) == 1:
        return RunStateError(f"run {batch.finishes[0]['run_id']} is unknown or not running")
    return RunStateError("a run of the group is unknown, not running, or finished twice")


_FINISH_COLUMNS: Final = (
    ("run_id", "TEXT[]"),
    ("status", "TEXT[]"),
    ("code", "TEXT[]"),
    ("message", "TEXT[]"),
    ("ended_at", "BIGINT[]"),
    ("usage", "TEXT[]"),
)


def _first_copies(entries: Sequence[Any], key: Callable[[Any], str]) -> list[Any]:
    seen: set[str] = set()
    fresh: list[Any] = []
    for entry in entries:
        ident = key(entry)
        if ident not in seen:
            seen.add(ident)
            fresh.append(entry)
    return fresh


def statement(batch: PgBatch, *, now: int) -> tuple[TextClause, dict[str, Any]]:
    """The one statement writing *batch*, and its parameters (arrays). Raises :class:`RunStateError` for
    a run ended twice in the batch (nothing is sent)."""
    params: dict[str, Any] = {}
    shape: list[str] = []
    if batch.runs:
        shape.append("runs")
        params.update(_columns("runs").params("runs", batch.runs))
    if batch.finishes:
        run_ids = [f["run_id"] for f in batch.finishes]
        if len(set(run_ids)) != len(run_ids):
            raise RunStateError("a run of the group is unknown, not running, or finished twice")
        shape.append("fin")
        usage = _columns("runs").processors[_columns("runs").names.index("usage")]
        for name, _ in _FINISH_COLUMNS:
            values = [f[name] for f in batch.finishes]
            params[f"fin_{name}"] = [usage(v) for v in values] if name == "usage" and usage else values
        params["fin_expected"] = len(run_ids)
    upserts = [w for w in batch.state if w.encoded is not None]
    deletes = [w for w in batch.state if w.encoded is None]
    if upserts:
        shape.append("st")
        rows = [
            {
                "owner_hash": digest(owner_text(w.owner)),
                "key": w.key,
                "scope": w.owner.scope,
                "owner": owner_text(w.owner),
                "value": w.encoded,
                "size": len(cast(str, w.encoded).encode()),
                "version": 1,
                "runner_id": w.runner_id,
                "created_at": now,
                "updated_at": now,
            }
            for w in upserts
        ]
        params.update(_columns("state_entries").params("st", rows))
    if deletes:
        shape.append("std")
        params["std_owner_hash"] = [digest(owner_text(w.owner)) for w in deletes]
        params["std_key"] = [w.key for w in deletes]
    if batch.results:
        shape.append("res")
        params.update(_columns("run_results").params("res", batch.results))
    events = _first_copies(batch.events, lambda e: e.event_id)
    items = _first_copies(batch.items, lambda i: i.item_id)
    counts: dict[tuple[str, str, str], int] = {}
    event_rows: list[dict[str, Any]] = []
    for entry in cast(list[EventEntry], events):
        row = event_row(entry, seq=None, now=now)
        if entry.conversation_id is not None:
            line = ("event", entry.conversation_id, "")
            counts[line] = counts.get(line, 0) + 1
            row["line_pos"] = counts[line]
        else:
            row["line_pos"] = 0
        event_rows.append(row)
    item_rows: list[dict[str, Any]] = []
    for entry in cast(list[TranscriptEntry], items):
        row = item_row(entry, seq=0, now=now)
        line = ("transcript", entry.conversation.conversation_id, main_line(entry.conversation.thread_id))
        counts[line] = counts.get(line, 0) + 1
        row["line_pos"] = counts[line]
        item_rows.append(row)
    if counts:
        shape.append("ctr")
        lines = sorted(counts)
        params["ctr_stream"] = [s for s, _, _ in lines]
        params["ctr_conversation_id"] = [c for _, c, _ in lines]
        params["ctr_thread_id"] = [t for _, _, t in lines]
        params["ctr_count"] = [counts[line] for line in lines]
    if event_rows:
        shape.append("ev")
        for row in event_rows:
            line = ("event", row["conversation_id"], "")
            row["line_total"] = counts.get(line, 0) if row["conversation_id"] is not None else 0
        params.update(_columns("events", frozenset({"id", "seq"})).params("ev", event_rows))
        params["ev_line_total"] = [r["line_total"] for r in event_rows]
        params["ev_line_pos"] = [r["line_pos"] for r in event_rows]
    if item_rows:
        shape.append("it")
        for row in item_rows:
            row["line_total"] = counts[("transcript", row["conversation_id"], row["thread_id"])]
        params.update(_columns("transcript_items", frozenset({"seq"})).params("it", item_rows))
        params["it_line_total"] = [r["line_total"] for r in item_rows]
        params["it_line_pos"] = [r["line_pos"] for r in item_rows]
    return _sql(tuple(shape)), params


@cache
def _sql(shape: tuple[str, ...]) -> TextClause:
    """The statement for one combination of parts (built once: its text is also asyncpg's cache key)."""
    ctes: list[str] = []
    if "runs" in shape:
        cols = _columns("runs")
        names = ", ".join(_q(n) for n in cols.names)
        ctes.append(f"ins_runs AS (INSERT INTO runs ({names}) SELECT * FROM {cols.unnest('runs')})")
    if "fin" in shape:
        unnest = "unnest(" + ", ".join(f"CAST(:fin_{n} AS {a})" for n, a in _FINISH_COLUMNS) + ")"
        aliases = ", ".join(_q(n) for n, _ in _FINISH_COLUMNS)
        ctes.append(
            "fin AS (UPDATE runs SET status = f.status, code = f.code, message = f.message, "
            f"ended_at = f.ended_at, {_q('usage')} = f.{_q('usage')} FROM {unnest} AS f({aliases}) "
            "WHERE runs.run_id = f.run_id AND runs.status = 'running' RETURNING runs.run_id)"
        )
    if "st" in shape:
        cols = _columns("state_entries")
        names = ", ".join(_q(n) for n in cols.names)
        ctes.append(
            f"st AS (INSERT INTO state_entries ({names}) SELECT * FROM {cols.unnest('st')} "
            f"ON CONFLICT (owner_hash, {_q('key')}) DO UPDATE SET value = EXCLUDED.value, "
            "size = EXCLUDED.size, version = state_entries.version + 1, runner_id = EXCLUDED.runner_id, "
            "updated_at = EXCLUDED.updated_at)"
        )
    if "std" in shape:
        ctes.append(
            "std AS (DELETE FROM state_entries AS s USING unnest(CAST(:std_owner_hash AS TEXT[]), "
            f"CAST(:std_key AS TEXT[])) AS d(owner_hash, {_q('key')}) "
            f"WHERE s.owner_hash = d.owner_hash AND s.{_q('key')} = d.{_q('key')})"
        )
    if "res" in shape:
        cols = _columns("run_results")
        names = ", ".join(_q(n) for n in cols.names)
        ctes.append(f"res AS (INSERT INTO run_results ({names}) SELECT * FROM {cols.unnest('res')})")
    if "ctr" in shape:
        ctes.append(
            "ctr AS (INSERT INTO sequence_counters (stream, conversation_id, thread_id, last_seq) "
            "SELECT k.stream, k.conversation_id, k.thread_id, k.n FROM unnest(CAST(:ctr_stream AS TEXT[]), "
            "CAST(:ctr_conversation_id AS TEXT[]), CAST(:ctr_thread_id AS TEXT[]), "
            "CAST(:ctr_count AS BIGINT[])) WITH ORDINALITY AS k(stream, conversation_id, thread_id, n, ord) "
            "ORDER BY k.ord ON CONFLICT (stream, conversation_id, thread_id) "
            "DO UPDATE SET last_seq = sequence_counters.last_seq + EXCLUDED.last_seq "
            "RETURNING stream, conversation_id, thread_id, last_seq)"
        )
    line = [("line_total", "BIGINT[]"), ("line_pos", "BIGINT[]")]
    if "ev" in shape:
        cols = _columns("events", frozenset({"id", "seq"}))
        names = ", ".join(_q(n) for n in cols.names)
        aliases = ", ".join([*(_q(n) for n in cols.names), "line_total", "line_pos", "ord"])
        picked = ", ".join(f"e.{_q(n)}" for n in cols.names)
        source = f"{cols.unnest('ev', line)} WITH ORDINALITY AS e({aliases})"
        if "ctr" in shape:
            seq = "CASE WHEN e.conversation_id IS NULL THEN NULL ELSE c.last_seq - e.line_total + e.line_pos END"
            source += (
                " LEFT JOIN ctr AS c ON c.stream = 'event' AND c.conversation_id = e.conversation_id "
                "AND c.thread_id = ''"
            )
        else:  # no event of the batch has a conversation: none is numbered
            seq = "CAST(NULL AS BIGINT)"
        ctes.append(
            f"ev AS (INSERT INTO events ({names}, seq) SELECT {picked}, {seq} FROM {source} ORDER BY e.ord)"
        )
    if "it" in shape:
        cols = _columns("transcript_items", frozenset({"seq"}))
        names = ", ".join(_q(n) for n in cols.names)
        aliases = ", ".join([*(_q(n) for n in cols.names), "line_total", "line_pos", "ord"])
        picked = ", ".join(f"i.{_q(n)}" for n in cols.names)
        # LEFT JOIN: an item without its counter row would get seq NULL and fail loudly (primary key)
        ctes.append(
            f"it AS (INSERT INTO transcript_items ({names}, seq) SELECT {picked}, "
            f"c.last_seq - i.line_total + i.line_pos FROM {cols.unnest('it', line)} "
            f"WITH ORDINALITY AS i({aliases}) LEFT JOIN ctr AS c ON c.stream = 'transcript' "
            "AND c.conversation_id = i.conversation_id AND c.thread_id = i.thread_id ORDER BY i.ord)"
        )
    if "fin" in shape:
        tail = "SELECT 1 / CAST((SELECT count(*) FROM fin) = :fin_expected AS INTEGER)"
    else:
        tail = "SELECT 1"
    return text(f"WITH {', '.join(ctes)} {tail}")
