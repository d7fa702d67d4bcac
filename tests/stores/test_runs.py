"""Runs: one transaction to start, one to finish, replay, and recovery after a crash."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest
from agentrunner import RunFailedResult, codec
from agentrunner_host.access import ConversationKey
from agentrunner_host.stores import (
    HOST_RESTARTED,
    EventEntry,
    HostStores,
    ResultRecord,
    RunExistsError,
    RunFinish,
    RunListFilter,
    RunStateError,
)
from agentrunner_host.stores.tables import HostRequestRow
from sqlalchemy import Table, event, insert, text
from sqlalchemy.ext.asyncio import AsyncEngine

from .helpers import item, run_start, uid

C1 = ConversationKey("c1", workspace_id="w1")


def _results(run_id: str, count: int) -> list[ResultRecord]:
    return [
        ResultRecord(
            run_id=run_id,
            host_seq=n,
            runner_sequence=n,
            type="message.delta",
            payload={"run_id": run_id, "type": "message.delta", "data": {"chunk": f"c{n}"}},
            created_at=2_000 + n,
        )
        for n in range(1, count + 1)
    ]


async def test_start_stores_the_run_its_records_and_the_user_item_together(stores: HostStores) -> None:
    """After ``start`` the run is running, ``run.started`` is logged and the user item is in the transcript."""
    user = item(C1, "hello")
    await stores.runs.start(run_start("r1", C1, user_turn=user))
    run = await stores.runs.get("r1")
    assert run is not None
    assert (run.status, run.conversation, run.snapshot, run.snapshot_hash) == (
        "running",
        C1,
        {"grants": ["history.page"]},
        "sha256:abc",
    )
    records = await stores.events.for_run("r1")
    assert [e.event_type for e in records] == ["run.started"]
    items, _ = await stores.transcript.page(conversation=C1, limit=10)
    assert [i.item_id for i in items] == [user.item_id]
    assert [r.run_id for r in await stores.runs.list_running()] == ["r1"]


async def test_a_failing_start_writes_nothing(stores: HostStores) -> None:
    """When part of ``start`` fails (a duplicate run id), none of its rows are written."""
    await stores.runs.start(run_start("r1", C1))
    second_user = item(C1, "never stored")
    with pytest.raises(RunExistsError, match="run r1 is already stored"):
        await stores.runs.start(
            run_start(
                "r1",
                C1,
                user_turn=second_user,
                start_events=[
                    EventEntry(event_id=uid("x"), event_type="run.started", source="host", kind="host")
                ],
            )
        )
    items, _ = await stores.transcript.page(conversation=C1, limit=10)
    assert items == []


async def test_finish_stores_results_transcript_records_and_outcome(stores: HostStores) -> None:
    """``finish`` writes every result, the assistant items, the host records and the outcome."""
    await stores.runs.start(run_start("r1", C1, user_turn=item(C1, "question")))
    answer = item(C1, "answer", role="assistant", run_id="r1")
    await stores.runs.finish(
        RunFinish(
            run_id="r1",
            status="completed",
            ended_at=5_000,
            results=_results("r1", 52),
            transcript=[answer],
            events=[
                EventEntry(
                    event_id="run.completed:r1",
                    event_type="run.completed",
                    source="host",
                    kind="host",
                    conversation_id="c1",
                    run_id="r1",
                )
            ],
            usage={"input_tokens": 3},
        )
    )
    run = await stores.runs.get("r1")
    assert run is not None
    assert (run.status, run.ended_at, run.usage, run.code) == ("completed", 5_000, {"input_tokens": 3}, None)
    replay = await stores.runs.results_after("r1", after_host_seq=0, limit=100)
    assert [r.host_seq for r in replay] == list(range(1, 53))
    payload = replay[0].payload
    assert isinstance(payload, dict) and payload["data"] == {"chunk": "c1"}
    items, _ = await stores.transcript.page(conversation=C1, limit=10)
    assert [(i.role, i.content, i.seq) for i in items] == [
        ("user", "question", 1),
        ("assistant", "answer", 2),
    ]
    assert [e.event_type for e in await stores.events.for_run("r1")] == ["run.started", "run.completed"]
    assert await stores.runs.list_running() == []


async def test_results_after_replays_from_a_position(stores: HostStores) -> None:
    """``results_after`` returns the results after a host seq, in order, up to the limit."""
    await stores.runs.start(run_start("r1", C1))
    await stores.runs.finish(
        RunFinish(run_id="r1", status="completed", ended_at=1, results=_results("r1", 10))
    )
    tail = await stores.runs.results_after("r1", after_host_seq=7, limit=100)
    assert [r.host_seq for r in tail] == [8, 9, 10]
    head = await stores.runs.results_after("r1", after_host_seq=0, limit=2)
    assert [r.host_seq for r in head] == [1, 2]
    assert await stores.runs.results_after("other", after_host_seq=0, limit=10) == []


async def test_finishing_twice_is_refused_and_changes_nothing(stores: HostStores) -> None:
    """A second ``finish`` raises and writes none of its rows (one transaction)."""
    await stores.runs.start(run_start("r1", C1))
    await stores.runs.finish(
        RunFinish(run_id="r1", status="completed", ended_at=1, results=_results("r1", 2))
    )
    with pytest.raises(RunStateError, match="run r1 is unknown or not running"):
        await stores.runs.finish(
            RunFinish(
                run_id="r1",
                status="failed",
                code="x",
                ended_at=2,
                transcript=[item(C1, "late")],
            )
        )
    run = await stores.runs.get("r1")
    assert run is not None and run.status == "completed"
    items, _ = await stores.transcript.page(conversation=C1, limit=10)
    assert items == []
    with pytest.raises(RunStateError, match="run unknown is unknown or not running"):
        await stores.runs.finish(RunFinish(run_id="unknown", status="completed", ended_at=1))


async def test_a_failing_finish_rolls_back_every_row(stores: HostStores) -> None:
    """When a result row cannot be written (duplicate host seq), the outcome, items and records stay unwritten."""
    await stores.runs.start(run_start("r1", C1))
    results = _results("r1", 3)
    with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
        await stores.runs.finish(
            RunFinish(
                run_id="r1",
                status="completed",
                ended_at=9,
                results=[*results, results[0]],
                transcript=[item(C1, "answer")],
            )
        )
    run = await stores.runs.get("r1")
    assert run is not None and run.status == "running"
    assert await stores.runs.results_after("r1", after_host_seq=0, limit=10) == []
    items, _ = await stores.transcript.page(conversation=C1, limit=10)
    assert items == []


async def test_close_interrupted_fails_running_runs_with_a_replayable_result(stores: HostStores) -> None:
    """Runs left running get status failed/host_restarted, a run.failed result after their results, and a host record."""
    await stores.runs.start(run_start("r1", C1))
    await stores.runs.start(run_start("r2", None))
    await stores.runs.start(run_start("done", C1))
    await stores.runs.finish(RunFinish(run_id="done", status="completed", ended_at=1))
    closed = await stores.runs.close_interrupted(ended_at=7_000)
    assert sorted(closed) == ["r1", "r2"]
    for run_id in closed:
        run = await stores.runs.get(run_id)
        assert run is not None
        assert (run.status, run.code, run.ended_at) == ("failed", HOST_RESTARTED, 7_000)
        (failed,) = await stores.runs.results_after(run_id, after_host_seq=0, limit=10)
        assert (failed.host_seq, failed.type) == (1, "run.failed")
        parsed = RunFailedResult.model_validate(failed.payload)
        assert parsed.data.code == HOST_RESTARTED
        assert [e.event_type for e in await stores.events.for_run(run_id)] == ["run.started", "run.failed"]
    assert await stores.runs.close_interrupted(ended_at=8_000) == []
    done = await stores.runs.get("done")
    assert done is not None and done.status == "completed"


async def test_run_results_are_deleted_with_their_run(stores: HostStores) -> None:
    """Results reference their run; deleting a run removes its results (foreign key with cascade)."""
    await stores.runs.start(run_start("r1", C1))
    await stores.runs.finish(
        RunFinish(run_id="r1", status="completed", ended_at=1, results=_results("r1", 3))
    )
    async with stores.engine.begin() as conn:
        await conn.execute(text("DELETE FROM runs WHERE run_id = 'r1'"))
    assert await stores.runs.results_after("r1", after_host_seq=0, limit=10) == []


async def test_concurrent_runs_are_all_stored_with_gapless_transcripts(stores: HostStores) -> None:
    """Thirty runs starting and finishing at once in three conversations are all stored, items numbered 1..20."""
    conversations = [ConversationKey(f"busy-{n}") for n in range(3)]

    async def one(n: int) -> None:
        conversation = conversations[n % 3]
        run_id = f"r{n}"
        await stores.runs.start(run_start(run_id, conversation, user_turn=item(conversation, f"q{n}")))
        await stores.runs.finish(
            RunFinish(
                run_id=run_id,
                status="completed",
                ended_at=n,
                results=_results(run_id, 5),
                transcript=[item(conversation, f"a{n}", role="assistant", run_id=run_id)],
                usage={"n": n},
            )
        )

    await asyncio.gather(*(one(n) for n in range(30)))
    for conversation in conversations:
        items, _ = await stores.transcript.page(conversation=conversation, limit=100)
        assert [i.seq for i in items] == list(range(1, 21))
    for n in range(30):
        run = await stores.runs.get(f"r{n}")
        assert run is not None and (run.status, run.ended_at, run.usage) == ("completed", n, {"n": n})
        assert len(await stores.runs.results_after(f"r{n}", after_host_seq=0, limit=10)) == 5


async def test_a_bad_request_in_a_group_fails_alone(stores: HostStores) -> None:
    """Among concurrent starts and finishes, only the duplicate start and the unknown finish fail."""
    await stores.runs.start(run_start("taken", C1))
    starts = await asyncio.gather(
        *(stores.runs.start(run_start(run_id, C1)) for run_id in ("s1", "s2", "taken", "s3")),
        return_exceptions=True,
    )
    assert [type(o).__name__ for o in starts] == ["NoneType", "NoneType", "RunExistsError", "NoneType"]
    finishes = await asyncio.gather(
        *(
            stores.runs.finish(
                RunFinish(run_id=run_id, status="completed", ended_at=1, results=_results(run_id, 2))
            )
            for run_id in ("s1", "ghost", "s2", "s3")
        ),
        return_exceptions=True,
    )
    assert [type(o).__name__ for o in finishes] == ["NoneType", "RunStateError", "NoneType", "NoneType"]
    for run_id in ("s1", "s2", "s3"):
        run = await stores.runs.get(run_id)
        assert run is not None and run.status == "completed"
        assert len(await stores.runs.results_after(run_id, after_host_seq=0, limit=10)) == 2


async def test_concurrent_runs_share_commits_on_sqlite(stores: HostStores) -> None:
    """Twenty runs started at once share transactions on SQLite's one writer; PostgreSQL writes each alone."""
    commits: list[int] = []

    def count(_conn: object) -> None:
        commits.append(1)

    event.listen(stores.engine.sync_engine, "commit", count)
    try:
        await asyncio.gather(*(stores.runs.start(run_start(f"g{n}", C1)) for n in range(20)))
    finally:
        event.remove(stores.engine.sync_engine, "commit", count)
    if stores.engine.dialect.name == "sqlite":
        assert 1 <= len(commits) < 20
    else:
        assert len(commits) == 20
    assert len(await stores.runs.list_running()) == 20


async def test_statement_listeners_see_every_write_and_payload_bytes_are_stored_as_given(
    stores: HostStores,
) -> None:
    """The SQLite writer thread runs hot inserts on the driver's cursor: listeners on the engine still see each
    statement (the bench counts them), a result payload given as bytes is stored as those bytes, and a
    duplicate run id is still the typed refusal."""
    seen: list[str] = []

    def on_statement(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        seen.append(" ".join(statement.split()[:3]).upper())

    encoded = b'{"run_id":"b1","type":"message.delta","data":{"chunk":"\\u00e9t\xc3\xa9"}}'
    event.listen(stores.engine.sync_engine, "before_cursor_execute", on_statement)
    try:
        await stores.runs.start(run_start("b1", C1, user_turn=item(C1, "question")))
        await stores.runs.finish(
            RunFinish(
                run_id="b1",
                status="completed",
                ended_at=5_000,
                results=[
                    ResultRecord(
                        run_id="b1",
                        host_seq=1,
                        runner_sequence=1,
                        type="message.delta",
                        payload=encoded,
                        created_at=2_001,
                    )
                ],
            )
        )
    finally:
        event.remove(stores.engine.sync_engine, "before_cursor_execute", on_statement)
    if stores.engine.dialect.name == "postgresql":
        # one statement per transaction (see test_a_start_and_an_end_are_one_statement_each_on_postgresql)
        assert seen == ["WITH INS_RUNS AS", "WITH FIN AS"], seen
    else:
        for prefix in (
            "INSERT INTO RUNS",
            "INSERT INTO EVENTS",
            "INSERT INTO TRANSCRIPT_ITEMS",
            "UPDATE RUNS SET",
        ):
            assert prefix in seen, (prefix, seen)
        assert "INSERT INTO RUN_RESULTS" in seen
    async with stores.engine.connect() as conn:
        stored = (
            await conn.execute(text("SELECT payload FROM run_results WHERE run_id = 'b1'"))
        ).scalar_one()
    assert stored == encoded.decode()
    replay = await stores.runs.results_after("b1", after_host_seq=0, limit=10)
    assert replay[0].payload == {"run_id": "b1", "type": "message.delta", "data": {"chunk": "été"}}
    with pytest.raises(RunExistsError, match="run b1 is already stored"):
        await stores.runs.start(run_start("b1", C1))


async def test_a_run_is_found_by_its_event_and_its_results_are_counted(stores: HostStores) -> None:
    """What the service asks of runs without queries of its own: the run an event started, the result count."""
    await stores.runs.start(run_start("r-ev", C1, event_id="ev-counted"))
    assert await stores.runs.for_event("ev-counted") == "r-ev"
    assert await stores.runs.for_event("ev-unknown") is None
    assert await stores.runs.result_count("r-ev") == 0
    await stores.runs.finish(
        RunFinish(run_id="r-ev", status="completed", ended_at=5_000, results=_results("r-ev", 3))
    )
    assert await stores.runs.result_count("r-ev") == 3


async def test_page_lists_runs_newest_first_by_each_filter_and_cursor(stores: HostStores) -> None:
    """``page`` (the console's runs list) filters by binding, runner, status, code and start time, orders by
    start then run id, both descending, and continues after a ``(started_at, run_id)`` cursor."""
    c2 = ConversationKey("c2", workspace_id="w1")
    await stores.runs.start(run_start("a", C1, started_at=1_000))
    await stores.runs.start(run_start("b", c2, started_at=2_000, binding_id="b2", runner_id="acme/other:x"))
    await stores.runs.start(run_start("c", C1, started_at=2_000))
    await stores.runs.start(run_start("d", C1, started_at=3_000))
    await stores.runs.start(run_start("e", None, started_at=500))
    await stores.runs.finish(RunFinish(run_id="a", status="completed", ended_at=1_500))
    await stores.runs.finish(RunFinish(run_id="c", status="failed", code="cancelled", ended_at=2_500))

    async def ids(where: RunListFilter, limit: int = 10) -> list[str]:
        return [r.run_id for r in await stores.runs.page(where, limit=limit)]

    assert await ids(RunListFilter()) == ["d", "c", "b", "a", "e"]
    assert await ids(RunListFilter(), limit=2) == ["d", "c"]
    assert await ids(RunListFilter(after=(2_000, "c"))) == ["b", "a", "e"]
    assert await ids(RunListFilter(binding_ids=["b2"])) == ["b"]
    assert await ids(RunListFilter(binding_ids=[])) == []
    assert await ids(RunListFilter(runner_id="acme/other:x")) == ["b"]
    assert await ids(RunListFilter(status="running")) == ["d", "b", "e"]
    assert await ids(RunListFilter(status="failed", code="cancelled")) == ["c"]
    assert await ids(RunListFilter(started_from=2_000, started_before=3_000)) == ["c", "b"]
    (first,) = await stores.runs.page(RunListFilter(status="completed"), limit=10)
    assert (first.run_id, first.conversation, first.ended_at) == ("a", C1, 1_500)
    # by each conversation's latest run (c1: d at 3,000; c2: b at 2,000); runs without one are not listed
    assert await stores.runs.recent_conversations(limit=10) == ["c1", "c2"]
    assert await stores.runs.recent_conversations(limit=1) == ["c1"]


async def test_lookup_finds_an_event_whatever_its_conversation(stores: HostStores) -> None:
    """``EventLog.lookup`` (the operator's view) finds an event of any conversation, which the
    conversation-scoped ``get`` does not."""
    await stores.runs.start(run_start("r1", C1))
    (started,) = await stores.events.for_run("r1")
    found = await stores.events.lookup(started.event_id)
    assert found is not None
    assert (found.event_type, found.conversation_id) == ("run.started", "c1")
    assert await stores.events.get(started.event_id, conversation=None) is None
    assert await stores.events.lookup("no-such-event") is None


async def test_a_json_column_stores_a_value_and_its_encoded_bytes_as_the_same_text(
    engine: AsyncEngine,
) -> None:
    """JSON columns bind a value as the codec encodes it and bytes as given (results are encoded once): the
    same text on both engines, and ``None`` is SQL ``NULL``."""
    value = {"b": [1, 2.5, None], "a": "\u00e9t\u00e9", "n": {"x": True}}
    rows = [
        {"request_id": "value", "target_host": "h", "kind": "start", "body": value, "created_at": 1},
        {
            "request_id": "bytes",
            "target_host": "h",
            "kind": "start",
            "body": codec.dumps(value),
            "created_at": 1,
        },
        {"request_id": "none", "target_host": "h", "kind": "start", "body": None, "created_at": 1},
    ]
    async with engine.begin() as conn:
        await conn.execute(insert(cast(Table, HostRequestRow.__table__)), rows)
        found = await conn.execute(text("SELECT request_id, body FROM host_requests"))
        stored = {str(key): body for key, body in found.all()}
    assert stored == {"value": codec.dumps_str(value), "bytes": codec.dumps_str(value), "none": None}
