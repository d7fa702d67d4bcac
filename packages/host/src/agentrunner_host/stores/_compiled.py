"""Hot statements of the SQLite writer thread, executed on the driver's cursor after one compile.

On the writer thread SQLAlchemy Core's execute path (execution context, parameter processing per call, result
set-up, event dispatch) cost about seven times what sqlite3 spends on the same short statements of a run start or
journal transaction (bench ``http``: ~0.9 ms vs ~0.13 ms per transaction). Statements the stores mark with
:func:`hot` (inserts, updates, deletes, and the selects a run start reads) are therefore compiled once per
dialect and shape of parameters (their names, and the length of each list an expanding ``IN`` takes) by
SQLAlchemy itself (same SQL text, same bind and result processors, so the same stored bytes and the same
values read) and then executed with ``cursor.execute`` / ``executemany``. What such a plan cannot reproduce
exactly goes through SQLAlchemy as before: statements not marked, ``RETURNING``, Python-side column defaults,
bind parameters with a callable value or a missing required value, parameter sets with differing names.

Each plan maps every positional parameter of the expanded statement to where its value comes from (a key of
the caller's parameters, an element of a list, or a literal of the statement): the map is found once by
expanding the statement over marker objects, so no per-call ``construct_params`` is needed.

Statement listeners (``before_cursor_execute``) of the injected engine still see every statement, and driver
errors are raised as SQLAlchemy's :class:`~sqlalchemy.exc.DBAPIError` subclasses, as from ``execute``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Final, TypeVar, cast, overload

from sqlalchemy import Connection, Dialect
from sqlalchemy.exc import DBAPIError, MultipleResultsFound, NoResultFound
from sqlalchemy.sql import Executable, Select

__all__ = ["CompiledWrites", "Positional", "hot"]

_S = TypeVar("_S", bound=Executable)

# id -> statement; the statement is kept alive here, so its id is never reused by another object
_HOT: Final[dict[int, Executable]] = {}


def hot(statement: _S) -> _S:
    """Mark a module-level *statement* (built once) for the writer thread's compiled path."""
    _HOT[id(statement)] = statement
    return statement


class Positional(Sequence[Mapping[str, object]]):
    """The rows of a hot write as tuples of values in the order of :attr:`keys`, for a caller that knows it
    runs on a :class:`CompiledWrites` (a SQLite batch): when :attr:`keys` are its plan's parameters in the
    plan's order, the tuples are bound as they are, with no dict per row to build and read back by name.
    Otherwise they are bound as :meth:`dicts`, the same rows. SQLAlchemy itself refuses it (not a list):
    give it :meth:`dicts`."""

    __slots__ = ("keys", "rows")

    def __init__(self, keys: tuple[str, ...], rows: list[tuple[object, ...]]) -> None:
        self.keys = keys
        self.rows = rows

    def dicts(self) -> list[dict[str, object]]:
        """The rows as dicts of :attr:`keys`."""
        keys = self.keys
        return [dict(zip(keys, row, strict=True)) for row in self.rows]

    @overload
    def __getitem__(self, index: int) -> Mapping[str, object]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Mapping[str, object]]: ...
    def __getitem__(self, index: int | slice) -> Mapping[str, object] | Sequence[Mapping[str, object]]:
        if isinstance(index, slice):
            return self.dicts()[index]
        return dict(zip(self.keys, self.rows[index], strict=True))

    def __len__(self) -> int:
        return len(self.rows)


class _Marker:
    """Stands for a caller's value while a plan is made: which key, and which element of a list."""

    __slots__ = ("index", "key")

    def __init__(self, key: str, index: int | None) -> None:
        self.key = key
        self.index = index


_Params = Mapping[str, object]
_Process = Callable[[Any], Any]
"""A bind processor (SQLAlchemy's, typed per column type)."""
_Source = tuple[str | None, int | None, object, _Process | None]
_Getter = Callable[[_Params], tuple[object, ...]]


@dataclass(frozen=True, slots=True)
class _Plan:
    sql: str
    sources: tuple[_Source, ...]
    """Per positional parameter: the caller's key (``None``: the statement's own value, third), the index in
    that key's list (``None``: the value itself), and the bind processor."""
    columns: tuple[str, ...] | None
    """A select's result keys (``None``: a write)."""
    loaders: tuple[Callable[[Any], Any] | None, ...]
    """A select's result processor per column (empty: none has one)."""
    values: _Getter | None = None
    """When every parameter is a plain value of the caller's (no list element, no literal: every insert and
    update): the caller's values in positional order, as one ``itemgetter`` call."""
    processors: tuple[tuple[int, _Process], ...] = ()
    """With :attr:`values`: the positions that have a bind processor, and the processor."""
    width: int = -1
    """With :attr:`values`: the number of keys of every parameter set this plan was made for, all of them
    parameters (a set of that size whose keys are all found has exactly these keys), or ``-1``."""

    def rows(self, rows: list[dict[str, object]]) -> list[Sequence[object]] | None:
        """With :attr:`values` and :attr:`width`: the positional parameters of the dict *rows* (``None``: a
        row that is not a dict, or whose keys are not exactly this plan's, left to the general path)."""
        getter = cast(_Getter, self.values)
        width = self.width
        processors = self.processors
        out: list[Sequence[object]] = []
        try:
            for r in rows:  # no cast() in here: it is a Python call per row
                if type(r) is not dict or len(r) != width:
                    return None
                values = getter(r)  # a missing key raises KeyError: the keys are not ours
                if processors:
                    processed = list(values)
                    for position, process in processors:
                        processed[position] = process(processed[position])
                    values = processed
                out.append(values)
        except KeyError:
            return None
        return out

    def positional(self, rows: list[tuple[object, ...]]) -> list[Sequence[object]]:
        """The positional parameters of *rows*, tuples already in this plan's order (see :class:`Positional`):
        only the bind processors run."""
        processors = self.processors
        width = self.width
        out: list[Sequence[object]] = []
        for row in rows:
            if len(row) != width:  # as zip(strict=True) refuses it on the way to SQLAlchemy
                raise ValueError(f"a row of {len(row)} values for {width} keys")
            if processors:
                values = list(row)
                for position, process in processors:
                    values[position] = process(values[position])
                out.append(values)
            else:
                out.append(row)
        return out

    def row(self, parameters: _Params) -> Sequence[object]:
        if self.values is not None:
            values = self.values(parameters)
            if not self.processors:
                return values
            out = list(values)
            for position, process in self.processors:
                out[position] = process(out[position])
            return out
        walked: list[object] = []
        for key, index, literal, process in self.sources:
            if key is None:
                value = literal
            else:
                value = parameters[key]
                if index is not None:
                    value = cast(Sequence[object], value)[index]
            walked.append(value if process is None else process(value))
        return tuple(walked)


class _Outcome:
    """What callers of a write read from its result: the number of rows it touched."""

    __slots__ = ("rowcount",)

    def __init__(self, rowcount: int) -> None:
        self.rowcount = rowcount


class _Rows:
    """What callers of a hot select read from its result (the subset of SQLAlchemy's ``Result`` they use):
    rows as tuples, ``first`` / ``one`` / ``all``, and the ``mappings`` (dicts by column key) and ``scalars``
    (first column) views, which answer the same."""

    __slots__ = ("_columns", "_rows")

    def __init__(self, rows: Sequence[Any], columns: tuple[str, ...]) -> None:
        self._rows = rows
        self._columns = columns

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)

    def all(self) -> list[Any]:
        return list(self._rows)

    def first(self) -> Any:
        return self._rows[0] if self._rows else None

    def one(self) -> Any:
        if not self._rows:
            raise NoResultFound("No row was found when one was required")
        if len(self._rows) > 1:
            raise MultipleResultsFound("Multiple rows were found when exactly one was required")
        return self._rows[0]

    def scalars(self) -> _Rows:
        return _Rows([row[0] for row in self._rows], self._columns[:1])

    def mappings(self) -> _Rows:
        columns = self._columns
        return _Rows([dict(zip(columns, row, strict=True)) for row in self._rows], columns)


_NO_PLAN: Final = object()


class CompiledWrites:
    """The compiled plans of one synchronous SQLite connection (use it on that connection's thread only)."""

    __slots__ = ("_dialect", "_expanding", "_hub", "_plans", "_positional", "_row_plans")

    def __init__(self, dialect: Dialect, *, listeners: Any) -> None:
        self._dialect = dialect
        self._hub = listeners
        self._plans: dict[tuple[object, ...], _Plan | object] = {}
        self._expanding: dict[int, frozenset[str]] = {}
        self._row_plans: dict[int, _Plan] = {}
        """Per hot write: the last plan that bound a list of rows by name (see :meth:`_Plan.rows`)."""
        self._positional: dict[tuple[int, tuple[str, ...]], _Plan | None] = {}
        """Per hot write and :attr:`Positional.keys`: the plan that binds such tuples as they are, if any."""

    def execute(self, conn: Connection, statement: Any, parameters: Any = None) -> Any:
        """``conn.execute(statement, parameters)``, on the driver's cursor when *statement* is hot."""
        given: object = parameters
        if type(given) is Positional:
            return self._execute_positional(conn, statement, given)
        if type(given) is list and given:
            # The journal's inserts: rows of the keys a plan was made for. Its getter takes them by name and
            # its width refuses other keys, so neither the rows' shape nor the plan is looked up per call.
            known = self._row_plans.get(id(statement))
            if known is not None:
                values = known.rows(cast(list[dict[str, object]], given))
                if values is not None:
                    return self._run(conn, known, values, True)
        rows = _parameter_sets(parameters) if id(statement) in _HOT else None
        if not rows:
            return conn.execute(statement, parameters)
        first = rows[0]
        expanding = self._expanding.get(id(statement))
        if expanding is None:
            expanding = _expanding_keys(statement, sorted(first), self._dialect)
            self._expanding[id(statement)] = expanding
        shape = _shape(first, expanding)
        if shape is None:
            return conn.execute(statement, parameters)
        plan = self._plan(statement, shape, first, expanding)
        if not isinstance(plan, _Plan):
            return conn.execute(statement, parameters)
        many = not isinstance(parameters, Mapping) and parameters is not None
        if many and plan.columns is not None:  # a select with several parameter sets: SQLAlchemy refuses it
            return conn.execute(statement, cast(Any, parameters))
        values = _values(plan, rows, shape, expanding)
        if values is None:
            return conn.execute(statement, cast(Any, parameters))
        if many and plan.width >= 0 and isinstance(parameters, list):
            self._row_plans[id(statement)] = plan
        return self._run(conn, plan, values, many)

    def _execute_positional(self, conn: Connection, statement: Executable, given: Positional) -> object:
        if not given.rows:
            return conn.execute(statement, [])
        key = (id(statement), given.keys)
        plan = self._positional.get(key, _NO_PLAN)
        if plan is _NO_PLAN:
            plan = self._positional_plan(statement, given)
            self._positional[key] = plan
        if not isinstance(plan, _Plan):
            return self.execute(conn, statement, given.dicts())
        return self._run(conn, plan, plan.positional(given.rows), True)

    def _positional_plan(self, statement: Executable, given: Positional) -> _Plan | None:
        """The plan of *statement* for rows of *given*'s keys when it binds exactly those keys in their order
        (a write: no list element, no literal, no key it does not bind)."""
        if id(statement) not in _HOT:
            return None
        first = dict(zip(given.keys, given.rows[0], strict=True))
        expanding = self._expanding.get(id(statement))
        if expanding is None:
            expanding = _expanding_keys(statement, sorted(first), self._dialect)
            self._expanding[id(statement)] = expanding
        shape = _shape(first, expanding)
        plan = None if shape is None else self._plan(statement, shape, first, expanding)
        if not isinstance(plan, _Plan) or plan.columns is not None or plan.width != len(given.keys):
            return None
        if tuple(key for key, _, _, _ in plan.sources) != given.keys:
            return None
        return plan

    def _run(
        self, conn: Connection, plan: _Plan, values: list[Sequence[object]], many: bool
    ) -> _Outcome | _Rows:
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
                fetched = None if plan.columns is None else cursor.fetchall()
            except sqlite3.Error as exc:
                raise DBAPIError.instance(
                    plan.sql, values, exc, sqlite3.Error, hide_parameters=True, dialect=self._dialect
                ) from exc
            if fetched is None or plan.columns is None:
                return _Outcome(cursor.rowcount)
            loaders = plan.loaders
            if loaders:
                fetched = [
                    tuple(v if load is None else load(v) for v, load in zip(row, loaders, strict=True))
                    for row in fetched
                ]
            return _Rows(fetched, plan.columns)
        finally:
            cursor.close()

    def _plan(
        self, statement: Any, shape: tuple[object, ...], parameters: _Params, expanding: frozenset[str]
    ) -> _Plan | object:
        key = (id(statement), shape)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        plan = _compile(statement, parameters, expanding, self._dialect)
        self._plans[key] = plan
        return plan


def _expanding_keys(statement: Any, names: list[str], dialect: Dialect) -> frozenset[str]:
    """The parameter names of *statement*'s expanding binds (``IN`` lists; a write's are in its ``WHERE``,
    the same whichever columns *names* sets)."""
    select = isinstance(statement, Select)
    compiled: Any = (
        statement.compile(dialect=dialect)
        if select
        else statement.compile(dialect=dialect, column_keys=names)
    )
    keys: set[str] = set()
    for name, bind in compiled.binds.items():
        if bind.expanding:
            keys.update((name, bind.key))
    return frozenset(keys)


def _shape(parameters: _Params, expanding: frozenset[str]) -> tuple[object, ...] | None:
    """What a plan depends on: the parameter names (in the caller's order: rows built by one function share
    it, and another order only makes another plan), and the length of each expanding ``IN`` list (``None``:
    an expanding value that is not a list, left to SQLAlchemy)."""
    if not expanding:
        return tuple(parameters)
    out: list[object] = []
    for name in parameters:
        if name in expanding:
            value = parameters[name]
            if not isinstance(value, list | tuple):
                return None
            out.append((name, len(cast(Sequence[object], value))))
        else:
            out.append(name)
    return tuple(out)


def _parameter_sets(parameters: object) -> list[_Params] | None:
    """The parameter sets of an ``execute`` call (``None``: a shape the plans do not handle)."""
    if parameters is None:
        return [{}]
    if isinstance(parameters, Mapping):
        return [cast(_Params, parameters)]
    if not isinstance(parameters, list):
        return None
    sets = cast(list[object], parameters)
    for p in sets:  # a loop, not all(): no generator per call on the writer's every statement
        if type(p) is not dict and not isinstance(p, Mapping):
            return None
    return cast(list[_Params], sets)


def _values(
    plan: _Plan, rows: list[_Params], shape: tuple[object, ...], expanding: frozenset[str]
) -> list[Sequence[object]] | None:
    """The positional parameters of *rows* (``None``: a row of another shape than the first, left to
    SQLAlchemy)."""
    width = plan.width
    if width < 0:
        # loops, not any() over a generator and a comprehension (a function object each on Python 3.11): a
        # run start's read comes here on every request
        for r in rows[1:]:
            if _shape(r, expanding) != shape:
                return None
        walked: list[Sequence[object]] = []
        for r in rows:
            walked.append(plan.row(r))
        return walked
    # Every key of the first row is a parameter of the plan, so a row of the same size whose keys are all
    # found has the same keys (in any order: values are taken by name): no shape per row.
    out: list[Sequence[object]] = []
    try:
        for r in rows:
            if len(r) != width:
                return None
            out.append(plan.row(r))  # by the plan's getter: a missing key raises KeyError
    except KeyError:
        return None
    return out


def _compile(
    statement: Any, parameters: _Params, expanding: frozenset[str], dialect: Dialect
) -> _Plan | object:
    select = isinstance(statement, Select)
    if not select and getattr(statement, "_returning", ()):  # RETURNING needs SQLAlchemy's result
        return _NO_PLAN
    names = sorted(parameters)
    compiled: Any = (
        statement.compile(dialect=dialect)
        if select
        else statement.compile(dialect=dialect, column_keys=names)
    )
    if getattr(compiled, "insert_prefetch", None) or getattr(compiled, "update_prefetch", None):
        return _NO_PLAN  # Python-side defaults: SQLAlchemy computes them
    binds: Mapping[str, Any] = compiled.binds
    if not compiled.positional or any(b.callable is not None for b in binds.values()):
        return _NO_PLAN
    markers: dict[str, Any] = {}
    for name in names:
        if name in expanding:
            markers[name] = [_Marker(name, i) for i in range(len(cast(Sequence[object], parameters[name])))]
        else:
            markers[name] = _Marker(name, None)
    try:
        expanded: Any = compiled.construct_expanded_state(markers)
    except Exception:  # e.g. a required value missing: SQLAlchemy's own execute raises it as it should
        return _NO_PLAN
    by_name = {compiled.bind_names[b]: b for b in binds.values()}
    origin = {e: name for name, group in expanded.parameter_expansion.items() for e in group}
    sources: list[_Source] = []
    for position in expanded.positiontup or ():
        bind = by_name.get(origin.get(position, position))
        if bind is None:
            return _NO_PLAN
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        value = expanded.parameters[position]
        if isinstance(value, _Marker):
            sources.append((value.key, value.index, None, process))
        elif isinstance(value, list):  # an expanding parameter SQLAlchemy did not expand
            return _NO_PLAN
        else:
            sources.append((None, None, value, process))
    getter, processors, width = _getter(sources, names)
    if not select:
        return _Plan(expanded.statement, tuple(sources), None, (), getter, processors, width)
    columns = list(statement.selected_columns)
    loaders = tuple(c.type.dialect_impl(dialect).result_processor(dialect, None) for c in columns)
    if all(loader is None for loader in loaders):
        loaders = ()  # found here once, not asked per call
    keys = tuple(str(k) for k in statement.selected_columns.keys())  # noqa: SIM118 - iterating yields columns
    return _Plan(expanded.statement, tuple(sources), keys, loaders, getter, processors, width)


def _one_key(key: str) -> _Getter:
    def getter(parameters: _Params) -> tuple[object, ...]:
        return (parameters[key],)

    return getter


def _getter(
    sources: list[_Source], names: list[str]
) -> tuple[_Getter | None, tuple[tuple[int, _Process], ...], int]:
    """:attr:`_Plan.values`, :attr:`_Plan.processors` and :attr:`_Plan.width` of *sources* (no getter when
    a parameter is a list element or a literal: :meth:`_Plan.row` walks the sources then)."""
    if not sources or any(key is None or index is not None for key, index, _, _ in sources):
        return None, (), -1
    keys = [cast(str, key) for key, _, _, _ in sources]
    # itemgetter of one key answers the value itself, not a 1-tuple
    getter = _one_key(keys[0]) if len(keys) == 1 else cast(_Getter, itemgetter(*keys))
    processors = tuple((i, process) for i, (_, _, _, process) in enumerate(sources) if process is not None)
    width = len(names) if set(keys) == set(names) else -1
    return getter, processors, width
