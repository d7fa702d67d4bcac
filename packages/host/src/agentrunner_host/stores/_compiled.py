"""Hot write statements of the SQLite writer thread, executed on the driver's cursor after one compile.

On the writer thread SQLAlchemy Core's execute path (execution context, parameter processing per call, result
set-up, event dispatch) cost about seven times what sqlite3 spends on the same short inserts of a run start or
journal transaction (bench ``http``: ~0.9 ms vs ~0.13 ms per transaction). Statements the stores mark with
:func:`hot` are therefore compiled once per dialect and set of parameter names by SQLAlchemy itself (same SQL
text, same bind processors, so the same stored bytes) and then executed with ``cursor.execute`` /
``executemany``. What such a plan cannot reproduce exactly goes through SQLAlchemy as before: statements not
marked, ``RETURNING``, expanding ``IN`` parameters, Python-side column defaults, parameter sets with differing
names.

Statement listeners (``before_cursor_execute``) of the injected engine still see every statement, and driver
errors are raised as SQLAlchemy's :class:`~sqlalchemy.exc.DBAPIError` subclasses, as from ``execute``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar, cast

from sqlalchemy import Connection, Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import Delete, Insert, Update

__all__ = ["CompiledWrites", "hot"]

_S = TypeVar("_S", Insert, Update, Delete)

# id -> statement; the statement is kept alive here, so its id is never reused by another object
_HOT: Final[dict[int, Insert | Update | Delete]] = {}


def hot(statement: _S) -> _S:
    """Mark a module-level write *statement* (built once) for the writer thread's compiled path."""
    _HOT[id(statement)] = statement
    return statement


@dataclass(frozen=True, slots=True)
class _Plan:
    sql: str
    names: tuple[str, ...]
    processors: tuple[Callable[[Any], Any] | None, ...]
    construct: Callable[[Mapping[str, Any]], Mapping[str, Any]]

    def row(self, parameters: Mapping[str, Any]) -> tuple[Any, ...]:
        values = self.construct(parameters)
        return tuple(
            value if process is None else process(value)
            for value, process in zip((values[n] for n in self.names), self.processors, strict=True)
        )


class _Outcome:
    """What callers of a write read from its result: the number of rows it touched."""

    __slots__ = ("rowcount",)

    def __init__(self, rowcount: int) -> None:
        self.rowcount = rowcount


_NO_PLAN: Final = object()


class CompiledWrites:
    """The compiled plans of one synchronous SQLite connection (use it on that connection's thread only)."""

    __slots__ = ("_dialect", "_hub", "_plans")

    def __init__(self, dialect: Dialect, *, listeners: Any) -> None:
        self._dialect = dialect
        self._hub = listeners
        self._plans: dict[tuple[int, tuple[str, ...]], _Plan | object] = {}

    def execute(self, conn: Connection, statement: Any, parameters: Any = None) -> Any:
        """``conn.execute(statement, parameters)``, on the driver's cursor when *statement* is hot."""
        rows = _parameter_sets(parameters) if id(statement) in _HOT else None
        if not rows:
            return conn.execute(statement, parameters)
        names = tuple(sorted(rows[0]))
        plan = self._plan(statement, names)
        if not isinstance(plan, _Plan) or any(tuple(sorted(r)) != names for r in rows[1:]):
            return conn.execute(statement, parameters)
        many = not isinstance(parameters, Mapping) and parameters is not None
        values = [plan.row(r) for r in rows]
        cursor: Any = conn.connection.dbapi_connection.cursor()  # pyright: ignore[reportOptionalMemberAccess]
        try:
            if self._hub.before_cursor_execute:
                self._hub.before_cursor_execute(
                    conn, cursor, plan.sql, values if many else values[0], None, many
                )
            try:
                if many:
                    cursor.executemany(plan.sql, values)
                else:
                    cursor.execute(plan.sql, values[0])
            except sqlite3.Error as exc:
                raise DBAPIError.instance(
                    plan.sql, values, exc, sqlite3.Error, hide_parameters=True, dialect=self._dialect
                ) from exc
            return _Outcome(cursor.rowcount)
        finally:
            cursor.close()

    def _plan(self, statement: Insert | Update | Delete, names: tuple[str, ...]) -> _Plan | object:
        key = (id(statement), names)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        plan = _compile(statement, names, self._dialect)
        self._plans[key] = plan
        return plan


def _parameter_sets(parameters: object) -> list[Mapping[str, Any]] | None:
    """The parameter sets of an ``execute`` call (``None``: a shape the plans do not handle)."""
    if parameters is None:
        return [{}]
    if isinstance(parameters, Mapping):
        return [cast(Mapping[str, Any], parameters)]
    if isinstance(parameters, list) and all(isinstance(p, Mapping) for p in cast(list[object], parameters)):
        return cast(list[Mapping[str, Any]], parameters)
    return None


def _compile(statement: Insert | Update | Delete, names: tuple[str, ...], dialect: Dialect) -> _Plan | object:
    if statement.is_dml and getattr(statement, "_returning", ()):  # RETURNING needs SQLAlchemy's result
        return _NO_PLAN
    compiled: Any = statement.compile(dialect=dialect, column_keys=list(names))
    if compiled.insert_prefetch or compiled.update_prefetch:  # Python-side defaults: SQLAlchemy computes them
        return _NO_PLAN
    binds: Mapping[str, Any] = compiled.binds
    if any(b.expanding for b in binds.values()) or not compiled.positional:
        return _NO_PLAN
    order: tuple[str, ...] = tuple(compiled.positiontup or ())
    by_name = {compiled.bind_names[b]: b for b in binds.values()}
    processors = tuple(by_name[n].type.dialect_impl(dialect).bind_processor(dialect) for n in order)

    def construct(parameters: Mapping[str, Any]) -> Mapping[str, Any]:
        return cast(Mapping[str, Any], compiled.construct_params(parameters))

    return _Plan(compiled.string, order, processors, construct)
