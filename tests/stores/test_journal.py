"""The journal: live results committed in groups, a per-run watermark, run ends after their results."""

from __future__ import annotations

import asyncio

from agentrunner_host.access import ConversationKey
from agentrunner_host.stores import HostStores, ResultLogError, ResultRecord, RunFinish
from sqlalchemy import event

from .helpers import run_start

C1 = ConversationKey("c1")


def _result(run_id: str, host_seq: int) -> ResultRecord:
    return ResultRecord(
        run_id=run_id,
        host_seq=host_seq,
        runner_sequence=host_seq,
        type="message.delta",
        payload={"run_id": run_id, "type": "message.delta", "data": {"chunk": {"content": f"c{host_seq}"}}},
        created_at=host_seq,
    )


async def test_appended_results_are_stored_once_durable_returns(stores: HostStores) -> None:
    """``durable(n)`` returns only when result n is committed: a reader of the store sees it then."""
    await stores.runs.start(run_start("r1", C1))
    log = stores.runs.log("r1")
    for n in range(1, 4):
        log.append(n, _result("r1", n), size=10)
    assert log.committed == 0
    await asyncio.wait_for(log.durable(3), timeout=30)
    stored = await stores.runs.results_after("r1", after_host_seq=0, limit=10)
    assert [r.host_seq for r in stored] == [1, 2, 3] and log.committed == 3


async def test_pre_encoded_payloads_are_stored_as_is_and_read_back_as_json(stores: HostStores) -> None:
    """A payload given as its encoding (bytes) is written without re-encoding and reads back decoded."""
    await stores.runs.start(run_start("r1", C1))
    log = stores.runs.log("r1")
    log.append(
        1,
        ResultRecord(
            run_id="r1", host_seq=1, runner_sequence=None, type="x", payload=b'{"a":[1]}', created_at=1
        ),
        size=9,
    )
    await asyncio.wait_for(log.durable(1), timeout=30)
    (stored,) = await stores.runs.results_after("r1", after_host_seq=0, limit=10)
    assert stored.payload == {"a": [1]}


async def test_results_of_many_runs_and_their_ends_share_commits(stores: HostStores) -> None:
    """Twenty runs appending five results each and finishing at once take far fewer than 120 commits, and
    every end is stored after its results."""
    for n in range(20):
        await stores.runs.start(run_start(f"g{n}", C1))
    commits: list[int] = []

    def count(_conn: object) -> None:
        commits.append(1)

    async def one(n: int) -> None:
        log = stores.runs.log(f"g{n}")
        for seq in range(1, 6):
            log.append(seq, _result(f"g{n}", seq), size=10)
            await asyncio.sleep(0)
        await stores.runs.finish(
            RunFinish(run_id=f"g{n}", status="completed", ended_at=1, results=[_result(f"g{n}", 6)])
        )
        assert log.committed == 5

    event.listen(stores.engine.sync_engine, "commit", count)
    try:
        await asyncio.gather(*(one(n) for n in range(20)))
    finally:
        event.remove(stores.engine.sync_engine, "commit", count)
    assert 1 <= len(commits) < 20
    for n in range(20):
        run = await stores.runs.get(f"g{n}")
        assert run is not None and run.status == "completed"
        stored = await stores.runs.results_after(f"g{n}", after_host_seq=0, limit=10)
        assert [r.host_seq for r in stored] == [1, 2, 3, 4, 5, 6]


async def test_a_log_that_cannot_be_written_fails_alone(stores: HostStores) -> None:
    """A result for an unknown run cannot be stored: its log fails (``durable`` raises), other runs' results
    in the same group are committed."""
    await stores.runs.start(run_start("ok", C1))
    good, bad = stores.runs.log("ok"), stores.runs.log("ghost")
    good.append(1, _result("ok", 1), size=10)
    bad.append(1, _result("ghost", 1), size=10)
    await asyncio.wait_for(good.durable(1), timeout=30)
    try:
        await asyncio.wait_for(bad.durable(1), timeout=30)
    except ResultLogError:
        pass
    else:
        raise AssertionError("the result of an unknown run was acknowledged")
    assert bad.error is not None and not bad.backlogged
    assert len(await stores.runs.results_after("ok", after_host_seq=0, limit=10)) == 1


async def test_a_backlogged_run_waits_for_room(stores: HostStores) -> None:
    """Past the backlog bound a run is told to wait; ``room`` returns once the writer caught up."""
    await stores.runs.start(run_start("r1", C1))
    log = stores.runs.log("r1")
    for n in range(1, 2000):
        log.append(n, _result("r1", n), size=10)
    assert log.backlogged
    await asyncio.wait_for(log.room(), timeout=60)
    assert not log.backlogged
    await asyncio.wait_for(log.durable(1999), timeout=60)
