"""The SQLite writer thread's compiled path (``stores._compiled``) answers exactly what SQLAlchemy's own
``execute`` answers for the same statement and parameters: rows, mappings, scalars, row counts, stored bytes,
expanding ``IN`` lists of any length, literals held by the statement, result processors (JSON columns), and
SQLAlchemy's errors for what it cannot plan."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from agentrunner import codec
from agentrunner_host.stores._compiled import CompiledWrites, Positional, hot
from agentrunner_host.stores.tables import JSONText
from sqlalchemy import (
    Column,
    Connection,
    Integer,
    MetaData,
    String,
    Table,
    bindparam,
    create_engine,
    insert,
    select,
)
from sqlalchemy import update as sql_update
from sqlalchemy.exc import MultipleResultsFound, NoResultFound, StatementError

META = MetaData()
ITEMS = Table(
    "items",
    META,
    Column("owner", String(64), primary_key=True),
    Column("key", String(64), primary_key=True),
    Column("size", Integer, nullable=False),
    Column("status", String(16), nullable=False),
    Column("value", JSONText, nullable=True),
)

INSERT = hot(insert(ITEMS))
BY_OWNERS = hot(
    select(ITEMS.c.owner, ITEMS.c.key, ITEMS.c.size)
    .where(ITEMS.c.owner.in_(bindparam("owners", expanding=True)), ITEMS.c.status == "live")
    .order_by(ITEMS.c.owner, ITEMS.c.key)
)
VALUES = hot(
    select(ITEMS.c.key, ITEMS.c.value).where(
        ITEMS.c.owner == bindparam("owner"), ITEMS.c.key.in_(bindparam("keys", expanding=True))
    )
)
ONE = hot(select(ITEMS).where(ITEMS.c.owner == bindparam("owner"), ITEMS.c.key == bindparam("key")))
RETIRE = hot(
    sql_update(ITEMS)
    .where(ITEMS.c.owner == bindparam("b_owner"), ITEMS.c.status == "live")
    .values(status=bindparam("b_status"))
)


@pytest.fixture
def conn() -> Iterator[Connection]:
    engine = create_engine("sqlite://")
    META.create_all(engine)
    with engine.connect() as connection:
        yield connection
    engine.dispose()


def _writes(conn: Connection, seen: list[str]) -> CompiledWrites:
    class Hub:
        @staticmethod
        def before_cursor_execute(*args: Any) -> None:
            seen.append(args[2])

    return CompiledWrites(conn.dialect, listeners=Hub())


def _fill(conn: Connection, writes: CompiledWrites) -> None:
    rows = [
        {
            "owner": f"o{n % 3}",
            "key": f"k{n}",
            "size": n,
            "status": "live" if n % 4 else "gone",
            "value": [n, {"n": n}],
        }
        for n in range(12)
    ]
    outcome = writes.execute(conn, INSERT, rows)
    assert outcome.rowcount == 12


def test_selects_answer_what_sqlalchemy_answers(conn: Connection) -> None:
    seen: list[str] = []
    writes = _writes(conn, seen)
    _fill(conn, writes)
    for owners in (["o0"], ["o1", "o2"], ["o2", "o0", "o1"], ["none"]):
        ours = writes.execute(conn, BY_OWNERS, {"owners": owners}).all()
        theirs = conn.execute(BY_OWNERS, {"owners": owners}).all()
        assert ours == [tuple(r) for r in theirs]
    assert any("IN (?, ?, ?)" in sql for sql in seen)  # a plan per list length, executed on the cursor
    for keys in (["k1"], ["k1", "k5", "k7", "missing"]):
        ours_values = dict(writes.execute(conn, VALUES, {"owner": "o1", "keys": keys}))
        assert ours_values == {k: v for k, v in conn.execute(VALUES, {"owner": "o1", "keys": keys})}
    assert ours_values == {"k1": [1, {"n": 1}], "k7": [7, {"n": 7}]}  # the JSON column's result processor ran
    mapping = writes.execute(conn, ONE, {"owner": "o1", "key": "k1"}).mappings().first()
    assert mapping == dict(conn.execute(ONE, {"owner": "o1", "key": "k1"}).mappings().one())
    assert writes.execute(conn, ONE, {"owner": "o1", "key": "nope"}).mappings().first() is None
    assert writes.execute(conn, BY_OWNERS, {"owners": ["o1"]}).scalars().all() == ["o1"] * 3
    with pytest.raises(NoResultFound, match="No row was found"):
        writes.execute(conn, ONE, {"owner": "o1", "key": "nope"}).one()
    with pytest.raises(MultipleResultsFound, match="Multiple rows"):
        writes.execute(conn, BY_OWNERS, {"owners": ["o1"]}).one()


def test_writes_store_what_sqlalchemy_stores(conn: Connection) -> None:
    writes = _writes(conn, [])
    _fill(conn, writes)
    stored = conn.exec_driver_sql("SELECT value FROM items WHERE key = 'k7'").scalar_one()
    assert stored == '[7,{"n":7}]'
    retired = writes.execute(conn, RETIRE, {"b_owner": "o1", "b_status": "retired"})
    assert (
        retired.rowcount == 3
    )  # k1, k7, k10 were live (k4 was gone): the statement's literal "live" was bound
    statuses = dict(conn.execute(select(ITEMS.c.key, ITEMS.c.status).where(ITEMS.c.owner == "o1")).all())
    assert statuses == {"k1": "retired", "k4": "gone", "k7": "retired", "k10": "retired"}


def test_what_cannot_be_planned_goes_through_sqlalchemy(conn: Connection) -> None:
    writes = _writes(conn, [])
    with pytest.raises(StatementError, match="A value is required for bind parameter 'key'"):
        writes.execute(conn, ONE, {"owner": "o1"})
    # not marked hot: SQLAlchemy's own result
    plain = select(ITEMS.c.key).where(ITEMS.c.owner == "o1")
    assert writes.execute(conn, plain).all() == []


def test_rows_of_one_insert_may_name_their_keys_in_any_order(conn: Connection) -> None:
    """Values are taken by name: rows built in another key order are stored as SQLAlchemy stores them."""
    seen: list[str] = []
    writes = _writes(conn, seen)
    rows: list[dict[str, object]] = [
        {"owner": "o", "key": "a", "size": 1, "status": "live", "value": {"n": 1}},
        {"value": [2], "status": "gone", "size": 2, "key": "b", "owner": "o"},
    ]
    assert writes.execute(conn, INSERT, rows).rowcount == 2
    assert seen  # the compiled path ran (no fallback to SQLAlchemy for the second row's order)
    stored = conn.exec_driver_sql("SELECT key, size, status, value FROM items ORDER BY key").all()
    assert [tuple(r) for r in stored] == [("a", 1, "live", '{"n":1}'), ("b", 2, "gone", "[2]")]


def test_a_row_with_other_keys_than_the_first_goes_through_sqlalchemy(conn: Connection) -> None:
    """A later row missing a key (or naming another) is not bound by the first row's plan: SQLAlchemy's own
    error, as its ``execute`` raises it."""
    seen: list[str] = []
    writes = _writes(conn, seen)
    first = {"owner": "o", "key": "a", "size": 1, "status": "live", "value": None}
    other = {"owner": "o", "key": "b", "size": 2, "status": "live", "extra": None}
    with pytest.raises(StatementError, match="A value is required for bind parameter 'value'"):
        writes.execute(conn, INSERT, [first, other])
    assert seen == []
    assert conn.exec_driver_sql("SELECT count(*) FROM items").scalar_one() == 0


def test_json_given_encoded_and_none_are_stored_as_sqlalchemy_stores_them(conn: Connection) -> None:
    """A JSON value given as its encoded bytes is stored as the same text as the value itself, and ``None`` is
    bound as SQL ``NULL`` (not the JSON ``null``), on the compiled path as through SQLAlchemy."""
    writes = _writes(conn, [])
    value = {"b": [1, 2.5, None], "a": "\u00e9t\u00e9"}
    rows: list[dict[str, object]] = [
        {"owner": "o", "key": "value", "size": 1, "status": "live", "value": value},
        {"owner": "o", "key": "bytes", "size": 1, "status": "live", "value": codec.dumps(value)},
        {"owner": "o", "key": "none", "size": 1, "status": "live", "value": None},
    ]
    writes.execute(conn, INSERT, rows)
    conn.execute(insert(ITEMS), [{**r, "owner": "sqlalchemy"} for r in rows])
    stored = conn.exec_driver_sql("SELECT owner, key, typeof(value), value FROM items").all()
    by_key = {(owner, key): (kind, text) for owner, key, kind, text in stored}
    for owner in ("o", "sqlalchemy"):
        assert by_key[(owner, "value")] == by_key[(owner, "bytes")] == ("text", codec.dumps_str(value))
        assert by_key[(owner, "none")] == ("null", None)


def test_positional_rows_store_what_dict_rows_store(conn: Connection) -> None:
    """Rows given as tuples (``Positional``) in the plan's order are bound as they are; in another order
    they are bound by name: both store what SQLAlchemy stores for the same rows as dicts."""
    seen: list[str] = []
    writes = _writes(conn, seen)
    keys = ("owner", "key", "size", "status", "value")
    rows: list[tuple[object, ...]] = [
        ("p", "a", 1, "live", {"n": 1}),
        ("p", "b", 2, "gone", codec.dumps([2])),
    ]
    assert writes.execute(conn, INSERT, Positional(keys, rows)).rowcount == 2
    assert writes._positional_plan(INSERT, Positional(keys, rows)) is not None
    shuffled = ("value", "status", "size", "key", "owner")
    backwards = [(v, st, si, k, "q") for _, k, si, st, v in rows]
    assert writes.execute(conn, INSERT, Positional(shuffled, backwards)).rowcount == 2
    assert writes._positional_plan(INSERT, Positional(shuffled, backwards)) is None
    conn.execute(insert(ITEMS), [{**dict(zip(keys, r, strict=True)), "owner": "sqlalchemy"} for r in rows])
    stored = conn.exec_driver_sql("SELECT owner, key, size, status, typeof(value), value FROM items").all()
    by_owner: dict[str, list[tuple[object, ...]]] = {}
    for owner, *rest in stored:
        by_owner.setdefault(owner, []).append(tuple(rest))
    assert by_owner["p"] == by_owner["q"] == by_owner["sqlalchemy"]
    assert len(seen) == 2
    with pytest.raises(ValueError, match="a row of 4 values for 5 keys"):
        writes.execute(conn, INSERT, Positional(keys, [("p", "c", 3, "live")]))


def test_the_journal_binds_its_tuples_as_they_are() -> None:
    """The journal's rows are tuples in the order of its inserts' compiled parameters (a column order that
    changed would bind them by name: the same rows, only slower)."""
    from agentrunner_host.stores import runs
    from agentrunner_host.stores._facts import (
        _INSERT_EVENTS,
    )
    from agentrunner_host.stores.records import EVENT_KEYS

    engine = create_engine("sqlite://")
    writes = CompiledWrites(engine.dialect, listeners=None)
    for statement, keys in (
        (runs._INSERT_RUNS, runs._RUN_KEYS),
        (runs._INSERT_RESULTS, runs._RESULT_KEYS),
        (_INSERT_EVENTS, EVENT_KEYS),
    ):
        rows = Positional(keys, [tuple(None for _ in keys)])
        assert writes._positional_plan(statement, rows) is not None
    engine.dispose()
