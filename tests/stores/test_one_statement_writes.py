"""PostgreSQL writes a run start and a journal transaction as one statement in autocommit (``_pg_batch``); the
rows are the ones the multi-statement path writes. The shapes it leaves to that path work on both engines."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg.transaction
import pytest
from agentrunner_host.access import ConversationKey, StateOwner
from agentrunner_host.stores import HostStores, ResultRecord, RunFinish, StateWrite
from sqlalchemy import event, text

from .helpers import event as platform_event
from .helpers import item, run_start

C1 = ConversationKey("c1")
OWNER = StateOwner("conversation", ("acme/echo:echo", "b1", "c1", ""))


def _result(run_id: str, host_seq: int, kind: str = "message.delta") -> ResultRecord:
    return ResultRecord(
        run_id=run_id,
        host_seq=host_seq,
        runner_sequence=host_seq,
        type=kind,
        payload={"run_id": run_id, "type": kind, "data": {"n": host_seq}},
        created_at=host_seq,
    )


@pytest.fixture
def begins(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the ``BEGIN``s asyncpg sends (every explicit transaction starts through ``Transaction.start``)."""
    started: list[int] = []
    original: Any = asyncpg.transaction.Transaction.start

    async def start(self: Any) -> None:
        started.append(1)
        await original(self)

    monkeypatch.setattr(asyncpg.transaction.Transaction, "start", start)
    return started


async def test_a_start_and_an_end_are_one_statement_each_on_postgresql(
    stores: HostStores, begins: list[int]
) -> None:
    """A start (run, trigger event, host record, user item) and a run's end (results, a state update, host
    records, assistant items, outcome) each reach the server as one statement with no ``BEGIN``/``COMMIT``;
    the events and items are numbered without gaps in append order, and the state value is stored."""
    if stores.engine.dialect.name != "postgresql":
        pytest.skip("the one-statement path is PostgreSQL's; SQLite has its writer thread")
    statements: list[str] = []

    def on_statement(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        statements.append(statement)

    trigger = platform_event("c1")
    event.listen(stores.engine.sync_engine, "before_cursor_execute", on_statement)
    try:
        await stores.runs.start(run_start("p1", C1, event=trigger, user_turn=item(C1, "question")))
        log = stores.runs.log("p1")
        log.append(1, _result("p1", 1), size=10, side=StateWrite(OWNER, "k", '"v1"', "acme/echo:echo"))
        log.append(2, _result("p1", 2), size=10)
        await asyncio.wait_for(log.durable(2), timeout=60)
        await stores.runs.finish(
            RunFinish(
                run_id="p1",
                status="completed",
                ended_at=5_000,
                results=[_result("p1", 3, "run.completed")],
                transcript=[item(C1, "answer", role="assistant"), item(C1, "more", role="assistant")],
                events=[platform_event("c1", kind="host"), platform_event(None, kind="host")],
            )
        )
    finally:
        event.remove(stores.engine.sync_engine, "before_cursor_execute", on_statement)
    assert [s.split()[1] for s in statements] == ["ins_runs", "st", "fin"], statements
    assert begins == []
    async with stores.engine.connect() as conn:
        status = (await conn.execute(text("SELECT status FROM runs WHERE run_id = 'p1'"))).scalar_one()
        seqs = (await conn.execute(text("SELECT host_seq FROM run_results ORDER BY host_seq"))).scalars()
        events = (
            await conn.execute(text("SELECT event_id, seq FROM events ORDER BY id"))
        ).all()  # insertion order
        items = (await conn.execute(text("SELECT content, seq FROM transcript_items ORDER BY seq"))).all()
    assert status == "completed" and list(seqs) == [1, 2, 3]
    assert events[0][0] == trigger.event_id
    assert [seq for _, seq in events] == [1, 2, 3, None]
    assert [tuple(row) for row in items] == [("question", 1), ("answer", 2), ("more", 3)]
    stored = await stores.state.get(OWNER, "k")
    assert stored is not None and stored.value == "v1" and stored.version == 1


async def test_a_key_written_twice_in_one_transaction_ends_with_the_last_value(stores: HostStores) -> None:
    """Two updates of one key committed together (the statement cannot touch a row twice, so PostgreSQL takes
    the multi-statement path): the last value wins and the version counts both; a delete then a write
    leaves a fresh key."""
    await stores.runs.start(run_start("s1", C1))
    log = stores.runs.log("s1")
    log.append(1, _result("s1", 1), size=10, side=StateWrite(OWNER, "k", '"a"', None))
    log.append(2, _result("s1", 2), size=10, side=StateWrite(OWNER, "k", '"b"', None))
    log.append(3, _result("s1", 3), size=10, side=StateWrite(OWNER, "gone", '"x"', None))
    await asyncio.wait_for(log.durable(3), timeout=60)
    stored = await stores.state.get(OWNER, "k")
    assert stored is not None and (stored.value, stored.version) == ("b", 2)
    log.append(4, _result("s1", 4), size=10, side=StateWrite(OWNER, "gone", None, None))
    log.append(5, _result("s1", 5), size=10, side=StateWrite(OWNER, "gone", '"y"', None))
    await asyncio.wait_for(log.durable(5), timeout=60)
    fresh = await stores.state.get(OWNER, "gone")
    assert fresh is not None and (fresh.value, fresh.version) == ("y", 1)


async def test_a_delete_and_writes_of_other_keys_share_one_transaction(stores: HostStores) -> None:
    """A delete of one key and writes of others in one commit: each lands (PostgreSQL: in the statement)."""
    await stores.runs.start(run_start("s2", C1))
    log = stores.runs.log("s2")
    log.append(1, _result("s2", 1), size=10, side=StateWrite(OWNER, "old", '"x"', None))
    await asyncio.wait_for(log.durable(1), timeout=60)
    log.append(2, _result("s2", 2), size=10, side=StateWrite(OWNER, "old", None, None))
    log.append(3, _result("s2", 3), size=10, side=StateWrite(OWNER, "new", '"n"', None))
    await asyncio.wait_for(log.durable(3), timeout=60)
    assert await stores.state.get(OWNER, "old") is None
    new = await stores.state.get(OWNER, "new")
    assert new is not None and new.value == "n"
