"""The orchestrator: one event → one run → exactly one terminal result, whatever the runner does."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agentrunner import (
    ActionRequestedResult,
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerPermissions,
    AgentRunResult,
    ArtifactRef,
    RunFailedResult,
    StateUpdatedResult,
)
from agentrunner_host.definitions import (
    AgentBinding,
    AgentEventEnvelope,
    ResourcePolicy,
    RunPolicy,
    StatePolicy,
)
from agentrunner_host.host import Host
from agentrunner_host.orchestrator import DeliveredResult, RunOutcome

from .fakes import PLUGIN, FakeScriptedRunner, binding, echo_script, event, hang_script, scripted


async def run_all(
    host: Host, ev: AgentEventEnvelope, b: AgentBinding
) -> tuple[list[DeliveredResult], RunOutcome]:
    handle = await host.orchestrator.start(ev, b)
    items = [item async for item in handle.results()]
    return items, await handle.outcome()


def make_host(*runners: FakeScriptedRunner, **kwargs: Any) -> Host:
    return Host.create(plugins={PLUGIN: list(runners)}, **kwargs)


async def test_a_run_delivers_results_in_order_with_host_sequence_and_ends_completed() -> None:
    """A well-behaved runner's results are delivered in order, numbered 1..n by the host."""
    host = make_host(scripted(echo_script))
    items, outcome = await run_all(host, event("hello"), binding())
    assert [i.result.type for i in items] == [
        "message.delta",
        "message.delta",
        "message.completed",
        "run.completed",
    ]
    assert [i.host_seq for i in items] == [1, 2, 3, 4]
    assert [i.result.sequence for i in items] == [1, 2, 3, 4]
    assert outcome.status == "completed" and outcome.results == 4
    assert host.dispatcher.live_count() == 0
    await host.aclose()


async def test_the_run_generator_yields_results_and_unregisters_the_run() -> None:
    """``run(event, binding)`` is the single entry: it yields results and the run is dead afterwards."""
    host = make_host(scripted(echo_script))
    results = [r async for r in host.orchestrator.run(event("hi"), binding())]
    assert results[-1].type == "run.completed"
    run_id = results[0].run_id
    assert not host.dispatcher.is_live(run_id)
    await host.aclose()


async def _raise_at_start(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
    raise RuntimeError("boom at start")
    yield  # pragma: no cover


async def _raise_mid_stream(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
    out = AgentRunner.emitter(ctx)
    yield out.delta("part")
    raise ValueError("boom mid-stream")


@pytest.mark.parametrize("script", [_raise_at_start, _raise_mid_stream])
async def test_a_runner_exception_ends_the_run_as_runner_error_and_the_next_run_succeeds(script: Any) -> None:
    """A runner that raises gets a controlled run.failed; the host stays up and the next run works."""
    broken = scripted(script, name="broken")
    host = make_host(broken, scripted(echo_script))
    items, outcome = await run_all(host, event(), binding("broken"))
    assert outcome.status == "failed" and outcome.code == "runner.error"
    assert isinstance(items[-1].result, RunFailedResult)
    assert sum(1 for i in items if i.result.type in ("run.completed", "run.failed")) == 1
    _, ok = await run_all(host, event(event_id="evt-2"), binding())
    assert ok.status == "completed"
    await host.aclose()


async def test_a_hanging_runner_is_ended_at_its_deadline() -> None:
    """Past the binding's deadline the run ends deadline_exceeded (retryable) and the runner is cancelled."""
    host = make_host(scripted(hang_script))
    items, outcome = await run_all(host, event(), binding(run_policy=RunPolicy(timeout_seconds=0.2)))
    assert outcome.code == "deadline_exceeded"
    last = items[-1].result
    assert isinstance(last, RunFailedResult) and last.data.retryable
    await host.aclose()


async def test_ten_thousand_deltas_are_delivered_and_counted() -> None:
    """A flood of deltas is consumed without losing or duplicating any."""

    async def flood(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        for _ in range(10_000):
            yield out.delta("x")
        yield out.complete()

    host = make_host(scripted(flood))
    items, outcome = await run_all(host, event(), binding())
    assert outcome.status == "completed"
    assert len(items) == 10_001
    await host.aclose()


async def test_an_oversized_result_fails_the_run_with_payload_too_large() -> None:
    """A 2 MiB result is rejected and the run fails; nothing of it is delivered."""

    async def big(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        yield out.message("x" * (2 * 1024 * 1024))
        yield out.complete()

    host = make_host(scripted(big))
    items, outcome = await run_all(host, event(), binding())
    assert outcome.code == "payload_too_large"
    assert [i.result.type for i in items] == ["run.failed"]
    await host.aclose()


async def test_the_host_stops_reading_at_the_terminal_result() -> None:
    """Nothing follows the terminal result: the host closes the runner's stream there, so whatever the runner
    meant to send next is never even produced."""
    reached_after: list[bool] = []
    closed = asyncio.Event()

    async def chatty(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        try:
            yield out.message("done")
            yield out.complete()
            reached_after.append(True)
            yield out.message("after the end")
            yield out.complete()
        finally:
            closed.set()

    host = make_host(scripted(chatty))
    items, outcome = await run_all(host, event(), binding())
    assert [i.result.type for i in items] == ["message.completed", "run.completed"]
    assert outcome.status == "completed"
    await asyncio.wait_for(closed.wait(), timeout=30)
    assert reached_after == []
    await host.aclose()


async def test_a_result_with_another_runs_id_fails_the_run_and_is_not_delivered() -> None:
    """A runner lying about its run id gets a protocol error; the foreign result never reaches anyone."""

    async def liar(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        yield out.message("mine")
        other = AgentRunner.emitter(ctx.model_copy(update={"run_id": "run_someone_else"}))
        yield other.message("not mine")
        yield out.complete()

    host = make_host(scripted(liar))
    items, outcome = await run_all(host, event(), binding())
    assert outcome.code == "runner.protocol_error"
    assert all(i.result.run_id != "run_someone_else" for i in items)
    await host.aclose()


async def test_repeated_sequence_numbers_are_deduplicated(caplog: pytest.LogCaptureFixture) -> None:
    """A result repeating a sequence number is applied at most once; a gap is only warned about."""

    async def repeats(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        first = out.delta("a")
        yield first
        yield first
        out.delta("skipped")  # consumes sequence 2: a gap
        yield out.message("ab")
        yield out.complete()

    host = make_host(scripted(repeats))
    with caplog.at_level(logging.WARNING):
        items, outcome = await run_all(host, event(), binding())
    assert [i.result.sequence for i in items] == [1, 3, 4]
    assert outcome.status == "completed"
    assert "duplicate sequence" in caplog.text and "sequence jumped" in caplog.text
    await host.aclose()


async def test_unknown_result_types_are_ignored_and_the_run_continues() -> None:
    """A newer runner's result type is skipped with a warning; later results still arrive."""

    async def newer(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        yield {"type": "message.reaction", "run_id": ctx.run_id, "data": {"emoji": "+1"}}
        out = AgentRunner.emitter(ctx)
        yield out.message("still here")
        yield out.complete()

    host = make_host(scripted(newer))
    items, outcome = await run_all(host, event(), binding())
    assert [i.result.type for i in items] == ["message.completed", "run.completed"]
    assert outcome.status == "completed"
    await host.aclose()


async def test_an_invalid_result_of_a_known_type_fails_the_run_naming_the_field() -> None:
    """Garbage shaped like a known type is a protocol violation reported with the field."""

    async def garbage(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        yield {"type": "run.failed", "run_id": ctx.run_id, "data": {"message": "no code"}}

    host = make_host(scripted(garbage))
    items, outcome = await run_all(host, event(), binding())
    assert outcome.code == "runner.invalid_result"
    assert outcome.message is not None and "code" in outcome.message
    assert len(items) == 1
    await host.aclose()


async def test_a_stream_without_a_terminal_result_ends_as_no_terminal() -> None:
    """Output but no terminal result → runner.no_terminal."""

    async def unfinished(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        yield AgentRunner.emitter(ctx).message("half")

    host = make_host(scripted(unfinished))
    _, outcome = await run_all(host, event(), binding())
    assert outcome.code == "runner.no_terminal"
    await host.aclose()


async def test_completing_without_any_message_ends_as_empty_output() -> None:
    """run.completed with nothing said to a message event is not an empty success (QA LA-08)."""

    async def silent(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        yield AgentRunner.emitter(ctx).complete()

    host = make_host(scripted(silent))
    items, outcome = await run_all(host, event(), binding())
    assert outcome.code == "runner.empty_output"
    assert [i.result.type for i in items] == ["run.failed"]
    await host.aclose()


async def test_a_non_message_event_may_complete_with_only_a_state_update() -> None:
    """message.recalled is handled without a chat message and is never shown as user text."""
    seen: list[AgentRunContext] = []

    async def recall(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        seen.append(ctx)
        out = AgentRunner.emitter(ctx)
        yield out.state("conversation", "last_recalled", ctx.subject.subject_id if ctx.subject else None)
        yield out.complete()

    host = make_host(scripted(recall))
    ev = event(
        None,
        event_type="message.recalled",
        subject={"subject_type": "message", "subject_id": "m-7", "data": {"reason": "user_recall"}},
    )
    _, outcome = await run_all(host, ev, binding())
    assert outcome.status == "completed"
    ctx = seen[0]
    assert ctx.event.event_type == "message.recalled" and ctx.input.text is None
    assert ctx.subject is not None and ctx.subject.data == {"reason": "user_recall"}
    await host.aclose()


async def test_deltas_from_a_runner_without_streaming_are_dropped() -> None:
    """A runner that did not declare streaming must not stream; its deltas are recorded as violations."""
    host = make_host(scripted(echo_script, streaming=False))
    items, outcome = await run_all(host, event("abcd"), binding())
    assert [i.result.type for i in items] == ["message.completed", "run.completed"]
    assert outcome.status == "completed"
    await host.aclose()


async def test_state_updates_outside_the_granted_scopes_are_refused() -> None:
    """state.updated for a scope the binding does not grant, a bad key or a huge value is not applied."""

    async def writer(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        yield out.state("conversation", "ok.key", 1)
        yield out.state("workspace", "not.granted", 1)
        yield out.state("conversation", "bad key with spaces", 1)
        yield out.state("conversation", "huge", "x" * (300 * 1024))
        yield out.message("done")
        yield out.complete()

    host = make_host(scripted(writer))
    items, _ = await run_all(host, event(), binding(state_policy=StatePolicy(scopes=["conversation"])))
    applied = [i.result for i in items if isinstance(i.result, StateUpdatedResult)]
    assert [(s.data.scope, s.data.key) for s in applied] == [("conversation", "ok.key")]
    await host.aclose()


async def test_platform_actions_are_recorded_only_when_declared_granted_and_idempotent() -> None:
    """action.requested needs the capability, both allow lists and an idempotency key; it is never executed."""

    async def actor(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        yield out.action("message.edit", {"message_id": "m1"}, idempotency_key="k1")
        yield out.action("friend.request.accept", {"request_id": "r1"}, idempotency_key="k2")
        yield out.message("done")
        yield out.complete()

    perms = AgentRunnerPermissions(platform_api=["message.edit", "friend.request.accept"])
    granted = scripted(actor, name="granted", platform_api=True, permissions=perms)
    undeclared = scripted(actor, name="undeclared", platform_api=False, permissions=perms)
    host = make_host(granted, undeclared)
    policy = ResourcePolicy(platform_actions=["message.edit"])
    items, _ = await run_all(host, event(), binding("granted", resource_policy=policy))
    assert [i.result.type for i in items].count("action.requested") == 1
    items, _ = await run_all(host, event(event_id="evt-2"), binding("undeclared", resource_policy=policy))
    assert "action.requested" not in [i.result.type for i in items]
    await host.aclose()


async def test_a_granted_platform_action_without_an_idempotency_key_is_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The idempotency key alone decides here: same runner, same grant, the keyless request is dropped."""

    async def actor(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        # the emitter insists on a key; a runner speaking the wire directly can leave it out
        keyless = out.action("message.edit", {"message_id": "m1"}, idempotency_key="k1")
        yield keyless.model_copy(update={"data": keyless.data.model_copy(update={"idempotency_key": None})})
        yield out.action("message.edit", {"message_id": "m2"}, idempotency_key="k2")
        yield out.message("done")
        yield out.complete()

    perms = AgentRunnerPermissions(platform_api=["message.edit"])
    host = make_host(scripted(actor, name="granted", platform_api=True, permissions=perms))
    policy = ResourcePolicy(platform_actions=["message.edit"])
    with caplog.at_level(logging.WARNING, logger="agentrunner.host.orchestrator"):
        items, outcome = await run_all(host, event(), binding("granted", resource_policy=policy))
    requested = [i.result for i in items if isinstance(i.result, ActionRequestedResult)]
    assert [r.data.target for r in requested] == [{"message_id": "m2"}]
    assert outcome.status == "completed"
    assert "action.requested 'message.edit' refused: missing idempotency_key" in caplog.text
    await host.aclose()


async def test_cancel_ends_the_run_as_cancelled_and_is_idempotent() -> None:
    """cancel(run_id) reaches the runner (its generator is closed) and the run ends cancelled, once."""
    closed = asyncio.Event()

    async def waits(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        try:
            yield out.delta("working")
            await asyncio.sleep(3600)
            yield out.complete()
        finally:
            closed.set()

    host = make_host(scripted(waits))
    handle = await host.orchestrator.start(event(), binding())
    results = handle.results()
    first = await anext(results)
    assert first.result.type == "message.delta"
    assert await host.orchestrator.cancel(handle.run_id) is True
    assert await host.orchestrator.cancel(handle.run_id) is False
    rest = [i async for i in results]
    outcome = await handle.outcome()
    assert outcome.code == "cancelled"
    assert [i.result.type for i in rest] == ["run.failed"]
    await closed.wait()
    assert not host.dispatcher.is_live(handle.run_id)
    await host.aclose()


async def test_cancel_after_the_run_finished_is_a_no_op() -> None:
    """A cancel racing with a terminal result already accepted changes nothing."""
    host = make_host(scripted(echo_script))
    handle = await host.orchestrator.start(event(), binding())
    _ = [i async for i in handle.results()]
    assert await host.orchestrator.cancel(handle.run_id) is False
    assert (await handle.outcome()).status == "completed"
    await host.aclose()


async def test_closing_the_run_iterator_early_cancels_the_run() -> None:
    """A consumer that goes away cancels its run instead of leaving the runner going."""
    host = make_host(scripted(hang_script))
    gen = host.orchestrator.run(event(), binding())
    first = await anext(gen)
    handle = host.orchestrator.handle(first.run_id)
    assert handle is not None
    await gen.aclose()  # pyright: ignore[reportAttributeAccessIssue]
    assert (await handle.outcome()).code == "cancelled"
    assert not host.dispatcher.is_live(first.run_id)
    await host.aclose()


async def test_concurrent_runs_do_not_see_each_others_data() -> None:
    """Fifty concurrent runs on one runner instance each get only their own input back."""
    host = make_host(scripted(echo_script))

    async def one(i: int) -> tuple[int, list[AgentRunResult]]:
        ev = event(f"marker-{i}", event_id=f"evt-{i}", conversation_id=f"conv-{i}")
        return i, [r async for r in host.orchestrator.run(ev, binding())]

    outcomes = await asyncio.gather(*(one(i) for i in range(50)))
    for i, results in outcomes:
        run_ids = {r.run_id for r in results}
        assert len(run_ids) == 1
        texts = [r.data.message.content for r in results if r.type == "message.completed"]
        assert texts == [f"marker-{i}"]
    await host.aclose()


async def test_artifacts_declared_by_the_runner_never_carry_its_claimed_size_or_digest() -> None:
    """Without stored bytes the host keeps no runner-declared size or digest."""

    async def maker(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        yield out.artifact(ArtifactRef(artifact_id="a1", size=1, digest="sha256:lies"))
        yield out.message("made", artifacts=[ArtifactRef(artifact_id="a1")])
        yield out.complete()

    host = make_host(scripted(maker))
    items, _ = await run_all(host, event(), binding())
    created = items[0].result
    assert created.type == "artifact.created"
    assert created.data.artifact.size is None and created.data.artifact.digest is None
    await host.aclose()


async def test_stateful_session_runners_take_one_turn_at_a_time_per_session_key() -> None:
    """Two runs of one conversation on a stateful_session runner never overlap; another conversation does."""
    names = [f"s{i}" for i in range(5)]
    entered = {n: asyncio.Event() for n in names}
    release = {n: asyncio.Event() for n in names}

    async def turn(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        name = ctx.input.text or ""
        entered[name].set()
        await release[name].wait()
        out = AgentRunner.emitter(ctx)
        yield out.message("done")
        yield out.complete()

    runner = scripted(turn, name="session")
    type(runner).manifest = type(runner).manifest.model_copy(
        update={
            "capabilities": type(runner).manifest.capabilities.model_copy(update={"stateful_session": True})
        }
    )
    host = make_host(runner)
    handles = [
        await host.orchestrator.start(
            event(n, event_id=n, conversation_id="same" if i < 3 else f"other-{i}"), binding("session")
        )
        for i, n in enumerate(names)
    ]
    # s3 and s4 (other conversations, started last) run while s0 holds the turn of "same": by then s1 and s2,
    # started earlier, have reached the session gate and wait there.
    for n in ("s0", "s3", "s4"):
        await entered[n].wait()
    assert not entered["s1"].is_set() and not entered["s2"].is_set()
    release["s0"].set()
    await entered["s1"].wait()
    assert not entered["s2"].is_set()
    release["s1"].set()
    await entered["s2"].wait()
    for gate in release.values():
        gate.set()
    outcomes = [await h.outcome() for h in handles]
    assert all(o.status == "completed" for o in outcomes)
    await host.aclose()
