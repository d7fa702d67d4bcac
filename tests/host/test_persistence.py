"""Runs through the real SQLAlchemy stores: events, runs, results, transcript, state, artifacts, audit."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agentrunner import AgentRunAPI, AgentRunContext, AgentRunner, AgentRunnerPermissions, ArtifactRef
from agentrunner_host.access import ConversationKey, StateOwner
from agentrunner_host.definitions import StatePolicy
from agentrunner_host.errors import DuplicateEventError, RunnerNotFoundError
from agentrunner_host.host import Host
from agentrunner_host.stores import AuditFilter, HostStores, RunListFilter, StartFacts, StartReads
from agentrunner_host.stores.engine import create_engine, default_sqlite_url, upgrade
from sqlalchemy import event as sa_event

from .fakes import PLUGIN, FakeScriptedRunner, binding, echo_script, event, scripted


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[HostStores]:
    engine = create_engine(default_sqlite_url(tmp_path))
    await upgrade(engine)
    s = await HostStores.open(engine, data_dir=tmp_path)
    yield s
    await s.aclose()
    await engine.dispose()


def host_with(stores: HostStores, *runners: FakeScriptedRunner) -> Host:
    return Host.create(plugins={PLUGIN: list(runners)}, stores=stores, bindings=[binding()])


async def test_a_persisted_run_stores_event_run_results_and_both_turns(stores: HostStores) -> None:
    """One run leaves the event, the run row, every result for replay and user + assistant transcript items."""
    host = host_with(stores, scripted(echo_script))
    handle = await host.orchestrator.submit(event("hello there"))
    items = [i async for i in handle.results()]
    outcome = await handle.outcome()
    assert outcome.status == "completed"
    run = await stores.runs.get(handle.run_id)
    assert run is not None and run.status == "completed" and run.snapshot_hash.startswith("sha256:")
    replay = await stores.runs.results_after(handle.run_id, after_host_seq=1, limit=100)
    assert [r.host_seq for r in replay] == [i.host_seq for i in items[1:]]
    conv = ConversationKey("conv-1")
    page, _ = await stores.transcript.page(
        conversation=conv, before_seq=None, after_seq=None, limit=10, direction="backward"
    )
    assert [(t.role, t.content) for t in page] == [("user", "hello there"), ("assistant", "hello there")]
    await host.aclose()


async def test_streamed_deltas_without_a_final_message_are_assembled_into_the_transcript(
    stores: HostStores,
) -> None:
    """The assistant turn of a streamed-only reply is the concatenation of its deltas."""

    async def stream_only(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        for piece in ("str", "ea", "med"):
            yield out.delta(piece)
        yield out.complete()

    host = host_with(stores, scripted(stream_only))
    handle = await host.orchestrator.submit(event("x"))
    _ = [i async for i in handle.results()]
    page, _ = await stores.transcript.page(
        conversation=ConversationKey("conv-1"),
        before_seq=None,
        after_seq=None,
        limit=10,
        direction="backward",
    )
    assert [t.content for t in page if t.role == "assistant"] == ["streamed"]
    await host.aclose()


async def test_the_final_message_of_run_completed_is_recorded(stores: HostStores) -> None:
    """run.completed.message is a transcript turn like message.completed."""

    async def final_only(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        yield AgentRunner.emitter(ctx).complete("final words")

    host = host_with(stores, scripted(final_only))
    handle = await host.orchestrator.submit(event("x"))
    _ = [i async for i in handle.results()]
    assert (await handle.outcome()).status == "completed"
    page, _ = await stores.transcript.page(
        conversation=ConversationKey("conv-1"),
        before_seq=None,
        after_seq=None,
        limit=10,
        direction="backward",
    )
    assert [t.content for t in page if t.role == "assistant"] == ["final words"]
    await host.aclose()


async def test_the_same_event_delivered_twice_runs_once(stores: HostStores) -> None:
    """Re-delivery is a typed duplicate answer, never a crash or a second run."""
    host = host_with(stores, scripted(echo_script))
    handle = await host.orchestrator.submit(event("once", event_id="evt-dup"))
    _ = [i async for i in handle.results()]
    with pytest.raises(DuplicateEventError, match="was already accepted"):
        await host.orchestrator.submit(event("once", event_id="evt-dup"))
    await host.aclose()


async def test_a_short_runs_start_results_and_end_are_one_commit_on_sqlite(stores: HostStores) -> None:
    """The start waits in the journal for the run's first results: a run that ends at once is one commit,
    and everything it stores is there when submit returns (its id is given out only after the commit)."""
    host = host_with(stores, scripted(echo_script))
    commits = 0

    def count(*_: object) -> None:
        nonlocal commits
        commits += 1

    await host.orchestrator.submit(event("warm", event_id="evt-warm"))  # first-use reads and plans
    sa_event.listen(stores.engine.sync_engine, "commit", count)
    try:
        handle = await host.orchestrator.submit(event("one commit", event_id="evt-one"))
        assert commits == 1
        run = await stores.runs.get(handle.run_id)
        assert run is not None and run.status == "completed" and run.event_id == "evt-one"
        # inserted ended (no update of the row just written): the end's fields are in the row
        assert run.ended_at is not None and run.usage == {"output_tokens": 1}
        stored = await stores.runs.results_after(handle.run_id, after_host_seq=0, limit=10)
        assert [r.host_seq for r in stored] == [i.host_seq async for i in handle.results()]
        assert stored[-1].type == "run.completed"
    finally:
        sa_event.remove(stores.engine.sync_engine, "commit", count)
    await host.aclose()


async def test_a_subscribed_consumer_takes_each_result_only_once_it_is_committed(stores: HostStores) -> None:
    """The callback consumer of a handle (a service's feed) is told of results as the run queues them, takes
    each only after its commit, and learns when the delivery ended; a handle has one consumer."""
    gate = asyncio.Event()

    async def two_parts(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        yield out.delta("first")
        await gate.wait()
        yield out.complete("done")

    host = host_with(stores, scripted(two_parts))
    handle = await host.orchestrator.submit(event("x"))
    result_log = handle.control.state.log
    assert result_log is not None
    taken: list[tuple[int, int]] = []
    ended = asyncio.Event()

    def listener() -> None:
        while (item := handle.take()) is not None:
            taken.append((item.host_seq, result_log.committed))
        if handle.drained:
            ended.set()

    handle.subscribe(listener)
    with pytest.raises(RuntimeError, match="has a consumer already"):
        handle.subscribe(listener)
    gate.set()  # the rest is queued by the run's task before the journal commits it
    await asyncio.wait_for(ended.wait(), timeout=30)
    stored = await stores.runs.results_after(handle.run_id, after_host_seq=0, limit=10)
    assert [seq for seq, _ in taken] == [r.host_seq for r in stored] and len(stored) >= 2
    assert all(committed >= seq for seq, committed in taken)
    await host.aclose()


async def test_a_minted_event_id_is_not_looked_up_and_a_duplicate_still_fails_at_the_commit(
    stores: HostStores,
) -> None:
    """An id the host made up for the submission (``minted``) cannot be stored yet: its start reads no
    earlier copy of it. Should one exist all the same, the unique key refuses it at the start's commit and
    the caller gets the typed duplicate answer, with nothing of the second run stored."""
    host = host_with(stores, scripted(echo_script))
    lookups: list[str] = []

    def on_statement(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        if "events.event_id IN" in statement:
            lookups.append(statement)

    await host.orchestrator.submit(event("warm", event_id="evt-warm"))
    sa_event.listen(stores.engine.sync_engine, "before_cursor_execute", on_statement)
    try:
        fresh = await host.orchestrator.submit(event("fresh", event_id="evt-minted"), minted=True)
        assert (await fresh.outcome()).status == "completed"
        assert lookups == []
        await host.orchestrator.submit(event("client's id", event_id="evt-client"))
        assert len(lookups) == 1  # an id a client sent is looked up
        with pytest.raises(DuplicateEventError, match="evt-minted"):
            await host.orchestrator.submit(event("again", event_id="evt-minted"), minted=True)
    finally:
        sa_event.remove(stores.engine.sync_engine, "before_cursor_execute", on_statement)
    runs = await stores.runs.page(RunListFilter(), limit=10)
    assert sum(r.event_id == "evt-minted" for r in runs) == 1
    await host.aclose()


async def test_one_event_submitted_twice_at_once_runs_once(stores: HostStores) -> None:
    """A second submit of an event whose run is still waiting for its start's commit waits for that commit,
    then is the usual duplicate: one run, one typed duplicate answer."""
    runs = 0

    async def counting(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        nonlocal runs
        runs += 1
        async for result in echo_script(ctx, api):
            yield result

    host = host_with(stores, scripted(counting))
    first, second = await asyncio.gather(
        host.orchestrator.submit(event("twice", event_id="evt-twice")),
        host.orchestrator.submit(event("twice", event_id="evt-twice")),
        return_exceptions=True,
    )
    assert isinstance(second, DuplicateEventError), second
    assert not isinstance(first, BaseException)
    assert (await first.outcome()).status == "completed"
    assert runs == 1
    assert await stores.runs.for_event("evt-twice") == first.run_id
    await host.aclose()


async def test_a_duplicate_found_only_at_the_starts_commit_leaves_no_trace_of_the_run(
    stores: HostStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process may store the same event between the loop's look and the journal's commit: the start
    then fails as a duplicate, the caller gets the typed answer, and neither the run nor its results or
    records are stored (its end is not attempted)."""
    host = host_with(stores, scripted(echo_script))
    first = await host.orchestrator.submit(event("first", event_id="evt-race"))
    # the first run's handle goes only when it ends: wait for that, so what is left can only be the second's
    assert (await first.outcome()).status == "completed"
    original = stores.read_start

    async def not_looking(reads: StartReads, /, *, event_id: str | None) -> StartFacts | None:
        return await original(reads, event_id=None)  # as if the other process had not committed yet

    monkeypatch.setattr(stores, "read_start", not_looking)
    with pytest.raises(DuplicateEventError, match="evt-race"):
        await host.orchestrator.submit(event("second", event_id="evt-race"))
    # The refused run's task was cancelled as the caller got its answer; it ends (and drops its handle) on its
    # next turn, which under load can come after this line: wait for it, then look at what it left.
    refused = list(host.orchestrator._handles.values())
    async with asyncio.timeout(30):
        for handle in refused:
            await handle.outcome()  # completed or cancelled in memory; nothing of it is stored either way
    assert not host.orchestrator._handles
    running = await stores.runs.page(RunListFilter(), limit=10)
    assert [r.run_id for r in running] == [first.run_id]
    await host.aclose()


async def test_state_updates_are_applied_and_seen_by_the_next_run(stores: HostStores) -> None:
    """state.updated is persisted under the structured owner and inlined into the next run's snapshot."""
    seen: list[dict[str, Any]] = []

    async def counter(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        seen.append(dict(ctx.state.conversation))
        count = ctx.state.conversation.get("turns", 0)
        assert isinstance(count, int)
        out = AgentRunner.emitter(ctx)
        yield out.state("conversation", "turns", count + 1)
        yield out.message(f"turn {count + 1}")
        yield out.complete()

    host = Host.create(
        plugins={PLUGIN: [scripted(counter)]},
        stores=stores,
        bindings=[binding(state_policy=StatePolicy(scopes=["conversation"]))],
    )
    for n in range(3):
        handle = await host.orchestrator.submit(event("x", event_id=f"evt-{n}"))
        _ = [i async for i in handle.results()]
    assert seen == [{}, {"turns": 1}, {"turns": 2}]
    owner = StateOwner("conversation", ("plugin:test/fake/default", "b-1", "conv-1", ""))
    item = await stores.state.get(owner, "turns")
    assert item is not None and item.value == 3
    await host.aclose()


async def test_a_state_update_is_stored_with_its_result_and_read_back_in_the_same_run(
    stores: HostStores,
) -> None:
    """state.updated goes to the store with the run's next commit, and a state.get later in the same run
    (which may come before that commit) sees the new value; a ``None`` value deletes the key."""
    seen: list[object] = []

    async def writer(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        yield out.state("conversation", "k", {"v": 1})
        seen.append((await api.state.get("conversation", "k")).value)
        yield out.state("conversation", "gone", 1)
        yield out.state("conversation", "gone", None)
        yield out.message("ok")
        yield out.complete()

    host = Host.create(plugins={PLUGIN: [scripted(writer)]}, stores=stores, bindings=[binding()])
    handle = await host.orchestrator.submit(event("x"))
    kinds = [i.result.type async for i in handle.results()]
    assert kinds.count("state.updated") == 3 and seen == [{"v": 1}]
    owner = StateOwner("conversation", ("plugin:test/fake/default", "b-1", "conv-1", ""))
    item = await stores.state.get(owner, "k")
    assert item is not None and (item.value, item.version) == ({"v": 1}, 1)
    assert await stores.state.get(owner, "gone") is None
    await host.aclose()


async def test_inline_artifact_bytes_are_stored_with_host_measured_size_and_digest(
    stores: HostStores,
) -> None:
    """The host stores the bytes, picks the id and computes size and sha256; message refs are rewritten."""
    content = b"hello artifact"

    async def maker(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        ref = ArtifactRef(
            artifact_id="mine", mime_type="text/plain", name="a.txt", size=999, digest="sha256:lie"
        )
        yield out.artifact(ref, content_base64=base64.b64encode(content).decode())
        yield out.message("see file", artifacts=[ArtifactRef(artifact_id="mine")])
        yield out.complete()

    host = host_with(stores, scripted(maker))
    handle = await host.orchestrator.submit(event("x"))
    items = [i async for i in handle.results()]
    created = items[0].result.data.artifact  # pyright: ignore[reportAttributeAccessIssue]
    assert created.artifact_id != "mine" and created.size == len(content)
    import hashlib

    assert created.digest == "sha256:" + hashlib.sha256(content).hexdigest()
    message = items[1].result
    assert message.type == "message.completed"
    assert [a.artifact_id for a in message.data.message.artifacts] == [created.artifact_id]
    record = await stores.artifacts.get(created.artifact_id)
    assert record is not None and await stores.artifacts.read_range(record, 0, 100) == content
    await host.aclose()


async def test_back_calls_and_violations_land_in_the_event_log(stores: HostStores) -> None:
    """The audit trail: run start/end, back-call decisions and refused results are host records."""

    async def misbehaves(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        with contextlib.suppress(Exception):
            await api.state.get("workspace", "k")
        yield out.state("workspace", "k", 1)
        yield out.message("done")
        yield out.complete()

    runner = scripted(misbehaves, permissions=AgentRunnerPermissions())
    host = host_with(stores, runner)
    handle = await host.orchestrator.submit(event("x"))
    _ = [i async for i in handle.results()]
    records = await stores.events.for_run(handle.run_id)
    kinds = [r.event_type for r in records]
    assert kinds[0] == "run.started" and kinds[-1] == "run.completed"
    assert "host.backcall" in kinds and "violation.state_rejected" in kinds
    backcall = next(r for r in records if r.event_type == "host.backcall")
    assert backcall.data["decision"] == "unauthorized" and backcall.data["action"] == "state.get"
    await host.aclose()


async def test_a_non_message_event_is_kept_as_its_own_kind_in_the_transcript(stores: HostStores) -> None:
    """message.recalled becomes an ``event`` item, never user text."""

    async def ack(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        yield AgentRunner.emitter(ctx).complete()

    host = host_with(stores, scripted(ack))
    handle = await host.orchestrator.submit(
        event(None, event_type="message.recalled", subject={"subject_type": "message", "subject_id": "m1"})
    )
    _ = [i async for i in handle.results()]
    page, _ = await stores.transcript.page(
        conversation=ConversationKey("conv-1"),
        before_seq=None,
        after_seq=None,
        limit=10,
        direction="backward",
    )
    assert [(t.role, t.item_type, t.event_type) for t in page] == [("event", "event", "message.recalled")]
    await host.aclose()


async def test_the_second_turn_sees_history_handles_and_pages_the_first_turn(stores: HostStores) -> None:
    """ContextAccess points at the stored history, and history.page returns it through the dispatcher."""
    pages: list[list[tuple[str, str | None]]] = []
    handles: list[tuple[str | None, bool]] = []

    async def reader(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        handles.append((ctx.context.latest_cursor, ctx.context.has_history_before))
        if ctx.context.available_apis.history_page:
            page = await api.history.page(before_cursor=ctx.context.latest_cursor, limit=10)
            pages.append([(i.role, i.content) for i in page.items])
        out = AgentRunner.emitter(ctx)
        yield out.message(f"echo {ctx.input.text}")
        yield out.complete()

    runner = scripted(reader, permissions=AgentRunnerPermissions(history=["page"]))
    host = host_with(stores, runner)
    for n, text in enumerate(("first", "second")):
        handle = await host.orchestrator.submit(event(text, event_id=f"evt-h{n}"))
        _ = [i async for i in handle.results()]
    assert handles[0][1] is False
    assert handles[1][0] is not None and handles[1][1] is True
    assert pages[1][:2] == [("user", "first"), ("assistant", "echo first")]
    await host.aclose()


@pytest.mark.parametrize("pause", [0, 1, 3])
async def test_a_run_cancelled_before_or_while_it_starts_is_recorded_cancelled(
    stores: HostStores, pause: int
) -> None:
    """Cancelling right after submit (before the start record is written) still ends and records the run."""
    host = host_with(stores, scripted(echo_script))
    handle = await host.orchestrator.submit(event("x", event_id=f"evt-c{pause}"))
    for _ in range(pause):
        await asyncio.sleep(0)
    await host.orchestrator.cancel(handle.run_id)
    outcome = await asyncio.wait_for(handle.outcome(), 5)
    items = [i async for i in handle.results()]
    if outcome.status == "failed":
        assert outcome.code == "cancelled"
        assert items[-1].result.type == "run.failed"
    run = await stores.runs.get(handle.run_id)
    assert run is not None
    assert run.status == outcome.status
    await host.aclose()


async def test_an_event_for_an_unknown_runner_is_still_stored(stores: HostStores) -> None:
    """An accepted event is never lost: when its runner is unknown, it is stored with a reason."""
    host = Host.create(
        plugins={PLUGIN: [scripted(echo_script)]}, stores=stores, bindings=[binding("missing")]
    )
    with pytest.raises(
        RunnerNotFoundError, match="runner plugin:test/fake/missing not found: not declared by its plugin"
    ):
        await host.orchestrator.submit(event("x", event_id="evt-orphan"))
    stored = await stores.events.get("evt-orphan", conversation=ConversationKey("conv-1"))
    assert stored is not None
    page = await stores.events.page(
        conversation=ConversationKey("conv-1"), before_seq=None, limit=10, include_host=True
    )
    assert "event.unhandled" in [e.event_type for e in page]
    await host.aclose()


async def test_large_event_data_goes_to_an_artifact_behind_raw_ref(stores: HostStores) -> None:
    """Event data over the context's inline limit (16 KiB) is stored as a JSON artifact owned by the run; the
    context carries a marker in ``data`` and the artifact in ``raw_ref``. Small data stays inline."""
    seen: list[AgentRunContext] = []

    async def capture(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        seen.append(ctx)
        out = AgentRunner.emitter(ctx)
        yield out.message("ok")
        yield out.complete()

    host = host_with(stores, scripted(capture))
    big = {"rows": ["x" * 100] * 300}
    handle = await host.orchestrator.submit(event(event_id="evt-big", data=big))
    assert (await handle.outcome()).status == "completed"
    handle = await host.orchestrator.submit(event(event_id="evt-small", data={"n": 1}))
    assert (await handle.outcome()).status == "completed"
    large, small = seen[0].event, seen[1].event
    assert small.data == {"n": 1} and small.raw_ref is None
    assert large.data["truncated"] is True
    raw = large.raw_ref
    assert raw is not None and raw.artifact is not None and raw.mime_type == "application/json"
    record = await stores.artifacts.get(raw.artifact.artifact_id)
    assert record is not None and record.owner.run_id == seen[0].run_id and record.size == raw.size
    stored = await stores.artifacts.read_range(record, 0, record.size)
    assert json.loads(stored) == big
    await host.aclose()


async def test_a_live_runs_stored_audit_records_leave_its_memory(stores: HostStores) -> None:
    """Once the live audit writer stored a run's back-call records, the run no longer holds them (a run
    making calls for minutes keeps one flush's worth, not all); the run's end then stores only the rest, so
    the audit has each call exactly once, in call order."""
    stored = asyncio.Event()
    go_on = asyncio.Event()

    async def script(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        yield out.delta("working")  # the run's start is stored before its records can be
        for n in range(300):
            await api.state.get("conversation", f"k{n}")
        stored.set()
        await go_on.wait()
        await api.state.get("conversation", "last")
        yield out.message("done")
        yield out.complete()

    host = host_with(stores, scripted(script))
    run = asyncio.create_task(_drain(host.orchestrator.run(event(), binding())))
    await asyncio.wait_for(stored.wait(), 120)
    (run_id,) = host.dispatcher.live_run_ids()

    async def records() -> list[str]:
        page = await stores.audit.page(AuditFilter(run_id=run_id), order="asc", limit=500)
        return [entry.resource or "" for entry in page.entries]

    deadline = asyncio.get_running_loop().time() + 120
    while len(await records()) < 300:
        assert asyncio.get_running_loop().time() < deadline, "the live audit writer stored nothing"
        await asyncio.sleep(0.05)
    live = host.dispatcher.live_run(run_id)
    assert live is not None
    assert live.audit == []
    go_on.set()
    await asyncio.wait_for(run, 120)
    assert await records() == [f"k{n}" for n in range(300)] + ["last"]
    await host.aclose()


async def _drain(results: AsyncIterator[Any]) -> None:
    async for _ in results:
        pass
