"""A run's start reads (the runner's disable switch, the state snapshot, the conversation's positions) made in
the start's own transaction: what they see, what a refusal leaves, and, on SQLite, that they cost no round
trip through aiosqlite (the whole start is one hop to the writer thread)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiosqlite.core
import pytest
from agentrunner_host.access import ConversationKey, StateOwner
from agentrunner_host.stores import HostStores, RunStart, StartFacts, StartReads
from agentrunner_host.stores.state import SNAPSHOT_KEYS_PER_SCOPE

from .helpers import item, run_start

C1 = ConversationKey("c1", workspace_id="w1")
OWNER = StateOwner("conversation", ("acme/echo:echo", "b1", "c1", ""))
RUNNER = "acme/echo:echo"


class _Refused(Exception):
    pass


def _reads() -> StartReads:
    return StartReads(runner_id=RUNNER, state_owners={"conversation": OWNER}, conversation=C1)


async def test_the_start_reads_what_is_stored_before_it_and_writes_its_records(stores: HostStores) -> None:
    """The facts are the state and positions stored before the start; the records *build* makes are stored."""
    await stores.runs.start(run_start("r1", C1, user_turn=item(C1, "earlier")))
    await stores.state.set(OWNER, "turns", 3, runner_id=RUNNER)
    seen: list[StartFacts] = []

    def build(facts: StartFacts) -> RunStart:
        seen.append(facts)
        return run_start("r2", C1, user_turn=item(C1, "now"))

    facts = await stores.start_run(_reads(), build)
    assert facts == seen[-1]
    assert (facts.control, facts.state, facts.transcript_seq) == (None, {"conversation": {"turns": 3}}, 1)
    run = await stores.runs.get("r2")
    assert run is not None and run.status == "running"
    # the run's own user item came after the read: the next start sees it
    again = await stores.start_run(_reads(), lambda _: run_start("r3", C1))
    assert again.transcript_seq == 2


async def test_a_build_that_refuses_the_run_writes_nothing(stores: HostStores) -> None:
    """With the runner disabled, *build* sees the switch; raising there leaves no run and no user item."""
    await stores.controls.disable(RUNNER, reason="maintenance", by="test")

    def build(facts: StartFacts) -> RunStart:
        if facts.control is not None:
            raise _Refused(facts.control.reason)
        return run_start("r1", C1, user_turn=item(C1, "never stored"))

    with pytest.raises(_Refused, match="maintenance"):
        await stores.start_run(_reads(), build)
    assert await stores.runs.get("r1") is None
    items, _ = await stores.transcript.page(conversation=C1, limit=10)
    assert items == []


async def test_concurrent_starts_each_get_their_own_facts(stores: HostStores) -> None:
    """Starts queued together (one grouped transaction on SQLite) each read and store their own run; one
    refused start does not fail the others."""

    def build_for(run_id: str) -> Any:
        def build(facts: StartFacts) -> RunStart:
            if run_id == "r3":
                raise _Refused(run_id)
            return run_start(run_id, C1)

        return build

    outcomes = await asyncio.gather(
        *(stores.start_run(_reads(), build_for(f"r{n}")) for n in range(6)), return_exceptions=True
    )
    assert [isinstance(o, _Refused) for o in outcomes] == [n == 3 for n in range(6)]
    stored = {r.run_id for r in await stores.runs.list_running()}
    assert stored == {"r0", "r1", "r2", "r4", "r5"}


async def test_on_sqlite_a_start_takes_no_aiosqlite_round_trip(
    stores: HostStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reads run on the writer thread inside the start's one hop: aiosqlite is not called at all."""
    if stores.engine.dialect.name != "sqlite":
        pytest.skip("aiosqlite is SQLite's driver")
    await stores.state.set(OWNER, "turns", 1, runner_id=RUNNER)
    calls: list[object] = []
    original = aiosqlite.core.Connection._execute

    async def counting(self: aiosqlite.core.Connection, fn: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(fn)
        return await original(self, fn, *args, **kwargs)

    monkeypatch.setattr(aiosqlite.core.Connection, "_execute", counting)
    facts = await stores.start_run(_reads(), lambda _: run_start("r1", C1, user_turn=item(C1, "hi")))
    assert facts.state == {"conversation": {"turns": 1}}
    assert calls == []


async def test_the_loop_read_answers_what_the_starts_own_transaction_reads(stores: HostStores) -> None:
    """``read_start`` (one statement on the loop, SQLite files) sees the same facts as ``start_run``'s reads:
    the disable switch, every scope's snapshot in key order within its byte budget, and the positions, with
    and without each of them."""
    if stores.engine.dialect.name != "sqlite":
        pytest.skip("the loop read is SQLite's")
    runner = StateOwner("runner", (RUNNER, "b1"))
    owners = {"conversation": OWNER, "runner": runner}

    async def both(reads: StartReads) -> tuple[StartFacts | None, StartFacts]:
        on_loop = await stores.read_start(reads, event_id=None)
        own: list[StartFacts] = []

        def refuse(facts: StartFacts) -> RunStart:
            own.append(facts)
            raise _Refused("read only")

        with pytest.raises(_Refused, match="read only"):
            await stores.start_run(reads, refuse)
        return on_loop, own[0]

    many = StateOwner("actor", (RUNNER, "b1", "user", "u1"))
    every = [
        StartReads(runner_id=RUNNER),
        StartReads(runner_id=RUNNER, state_owners=owners),
        StartReads(runner_id=RUNNER, conversation=C1),
        StartReads(runner_id=RUNNER, state_owners=owners, conversation=C1),
        # one owner: its keys are read without the window over several owners' keys
        StartReads(runner_id=RUNNER, state_owners={"conversation": OWNER}),
        StartReads(runner_id=RUNNER, state_owners={"runner": runner}, conversation=C1),
        StartReads(runner_id=RUNNER, state_owners={"actor": many}),
    ]
    for reads in every:  # nothing stored yet
        on_loop, own = await both(reads)
        assert on_loop == own
    await stores.runs.start(run_start("r1", C1, user_turn=item(C1, "earlier")))
    for n, key in enumerate(["b", "a", "c", "zz"]):
        await stores.state.set(OWNER, key, n, runner_id=RUNNER)
    await stores.state.set(runner, "big", "x" * 70_000, runner_id=RUNNER)  # past the snapshot's budget
    await stores.state.set(runner, "small", [1, 2], runner_id=RUNNER)
    for n in range(SNAPSHOT_KEYS_PER_SCOPE + 3):  # more keys than a scope inlines
        await stores.state.set(many, f"k{n:03}", n, runner_id=RUNNER)
    await stores.controls.disable(RUNNER, reason="maintenance", by="test")
    for reads in every:
        on_loop, own = await both(reads)
        assert on_loop == own
    on_loop, _ = await both(every[3])
    assert on_loop is not None
    assert on_loop.control is not None and on_loop.control.reason == "maintenance"
    assert list(on_loop.state["conversation"]) == ["a", "b", "c", "zz"]
    assert on_loop.state["runner"] == {"small": [1, 2]}
    assert on_loop.transcript_seq == 1
    alone, _ = await both(every[-1])
    assert alone is not None
    assert list(alone.state["actor"]) == [f"k{n:03}" for n in range(SNAPSHOT_KEYS_PER_SCOPE)]
