"""The fault matrix (issue 17) through the real host, in process and through a real plugin process.

Each test names the fault and the guarantee docs/architecture.md gives for it.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunResult,
    ChatMessage,
    MessageCompletedResult,
    MessageDeltaResult,
    ModelResource,
    ModelResponse,
    ModelStreamChunk,
    RerankResult,
    StateUpdatedData,
    StateUpdatedResult,
)
from agentrunner.actions import ModelInvokeParams, ModelRerankParams
from agentrunner_host.access import RunAccess, StateOwner
from agentrunner_host.catalog import ResourceCatalog
from agentrunner_host.definitions import AgentBinding, RunPolicy, StatePolicy
from agentrunner_host.host import Host
from agentrunner_host.orchestrator import RunHandle
from agentrunner_host.runtime import PluginSpec, RunnerEntry, RuntimeOptions, SubprocessRunnerConnection
from agentrunner_host.runtime.inprocess import InProcessConnection
from agentrunner_host.stores import HostStores
from agentrunner_host.stores.engine import create_engine, default_sqlite_url, upgrade

from . import oop_runners
from .fakes import PLUGIN, binding, event, scripted

HERE = Path(__file__).parent


class FakeEndlessModels:
    """A model provider that streams single-character chunks without end, as fast as it is read."""

    async def invoke(
        self, model: ModelResource, params: ModelInvokeParams, *, access: RunAccess
    ) -> ModelResponse:
        return ModelResponse(model_id=model.model_id, message=ChatMessage(role="assistant", content="x"))

    async def stream(
        self, model: ModelResource, params: ModelInvokeParams, *, access: RunAccess
    ) -> AsyncIterator[ModelStreamChunk]:
        while True:
            yield ModelStreamChunk(delta="x")

    async def rerank(
        self, model: ModelResource, params: ModelRerankParams, *, access: RunAccess
    ) -> RerankResult:
        return RerankResult()


CATALOG = ResourceCatalog(models=[ModelResource(model_id="m-fast")])


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[HostStores]:
    engine = create_engine(default_sqlite_url(tmp_path))
    await upgrade(engine)
    s = await HostStores.open(engine, data_dir=tmp_path)
    yield s
    await s.aclose()
    await engine.dispose()


def _spec() -> PluginSpec:
    return PluginSpec(
        plugin_id=oop_runners.PLUGIN,
        runners=tuple(
            RunnerEntry(name=cls.manifest.name, ref=f"oop_runners:{cls.__name__}") for cls in oop_runners.ALL
        ),
        plugin_dir=HERE,
    )


def make_host(
    mode: str,
    *,
    stores: HostStores | None = None,
    options: RuntimeOptions | None = None,
    force_end_grace: float = 5.0,
) -> Host:
    """The transport runners of :mod:`oop_runners` in process or in a real plugin process."""
    h = Host.create(catalog=CATALOG, models=FakeEndlessModels(), stores=stores)
    h.orchestrator.force_end_grace_seconds = force_end_grace
    if mode == "in-process":
        h.registry.add(
            InProcessConnection(oop_runners.PLUGIN, [cls() for cls in oop_runners.ALL], handler=h.dispatcher)
        )
    else:
        h.registry.add(
            SubprocessRunnerConnection(
                _spec(), h.dispatcher, options=options or RuntimeOptions(close_grace=2.0)
            )
        )
    return h


def bind(name: str, *, binding_id: str | None = None, **policy: Any) -> AgentBinding:
    config = {"model": {"primary": "m-fast", "fallbacks": []}} if name == "modelstream" else {}
    return AgentBinding(
        binding_id=binding_id or f"b-{name}",
        runner_id=f"plugin:{oop_runners.PLUGIN}/{name}",
        event_types=["*"],
        runner_config=config,
        state_policy=StatePolicy(scopes=["conversation"]),
        run_policy=RunPolicy(**policy),
    )


async def _take(handle: RunHandle, n: int) -> list[str]:
    """Read *n* results of a live run (fewer when it ends first)."""
    types: list[str] = []
    async for item in handle.results():
        types.append(item.result.type)
        if len(types) >= n:
            break
    return types


MODES = ["in-process", "subprocess"]


# -- cancel always lands ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_a_fast_stream_cancelled_at_random_points_always_ends_cancelled(mode: str) -> None:
    """200 runs relaying an endless model stream (the SDK's streaming back-call), each cancelled after a
    random number of results: every one ends ``cancelled`` by its own cancellation, none force-ended."""
    host = make_host(mode)
    rng = random.Random(17)
    try:
        for n in range(200):
            handle = await host.orchestrator.start(event("go", event_id=f"evt-{n}"), bind("modelstream"))
            await _take(handle, rng.randint(1, 40))
            assert await host.orchestrator.cancel(handle.run_id, reason="race") is True
            handle.detach()
            outcome = await handle.outcome()
            assert (outcome.status, outcome.code) == ("failed", "cancelled"), outcome
            assert handle.force_ended is False
        assert host.dispatcher.live_count() == 0
    finally:
        await host.aclose()


async def test_local_agent_streaming_a_fast_model_is_cancelled_at_random_points() -> None:
    """local-agent relaying an endless, fast model stream: 200 cancels at random points, 200 runs ``cancelled``."""
    from agentrunner import RunnerId
    from agentrunner_runner_local_agent import RUNNER_ID, LocalAgentRunner

    host = Host.create(
        plugins={RunnerId.parse(RUNNER_ID).plugin_id: [LocalAgentRunner()]},
        catalog=ResourceCatalog(models=[ModelResource(model_id="m-fast", capabilities=["streaming"])]),
        models=FakeEndlessModels(),
    )
    agent = AgentBinding(
        binding_id="b-la", runner_id=RUNNER_ID, event_types=["*"], runner_config={"model": "m-fast"}
    )
    rng = random.Random(71)
    try:
        for n in range(200):
            handle = await host.orchestrator.start(event("go", event_id=f"evt-la-{n}"), agent)
            types = await _take(handle, rng.randint(1, 40))
            assert "run.completed" not in types and "run.failed" not in types, types
            assert await host.orchestrator.cancel(handle.run_id, reason="race") is True
            handle.detach()
            outcome = await handle.outcome()
            assert (outcome.status, outcome.code) == ("failed", "cancelled"), outcome
            assert handle.force_ended is False
    finally:
        await host.aclose()


async def test_a_cancel_requested_while_the_runner_swallows_it_still_ends_cancelled() -> None:
    """A runner that catches CancelledError and completes anyway: the run ends ``cancelled``, not completed."""
    release = asyncio.Event()

    async def stubborn(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        yield out.delta("a")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            release.set()
        yield out.message("done anyway")
        yield out.complete()

    host = Host.create(plugins={PLUGIN: [scripted(stubborn)]})
    handle = await host.orchestrator.start(event(), binding())
    await _take(handle, 1)
    await host.orchestrator.cancel(handle.run_id)
    outcome = await handle.outcome()
    assert release.is_set()
    assert (outcome.status, outcome.code) == ("failed", "cancelled")
    await host.aclose()


# -- cancel escalation ------------------------------------------------------------------------------------------


def _swallowing(stop: asyncio.Event) -> Any:
    async def swallow(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        yield AgentRunner.emitter(ctx).delta("stuck")
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if stop.is_set():  # lets the test's event loop close; the host never relies on it
                    raise

    return swallow


@pytest.mark.parametrize("trigger", ["cancel", "deadline"])
async def test_in_process_a_runner_that_swallows_cancellation_is_force_ended_after_the_grace(
    trigger: str, caplog: pytest.LogCaptureFixture
) -> None:
    """No terminal would ever come: the host records it after the grace, logs the leaked task, and the next
    run of the plugin is served."""
    from .fakes import echo_script

    stop = asyncio.Event()
    host = Host.create(plugins={PLUGIN: [scripted(_swallowing(stop)), scripted(echo_script, name="echo")]})
    host.orchestrator.force_end_grace_seconds = 0.3
    policy = RunPolicy(timeout_seconds=0.5) if trigger == "deadline" else None
    handle = await host.orchestrator.start(event(), binding(run_policy=policy))
    await _take(handle, 1)
    if trigger == "cancel":
        await host.orchestrator.cancel(handle.run_id)
    with caplog.at_level(logging.WARNING, logger="agentrunner.host.orchestrator"):
        outcome = await handle.outcome()
    # Its own code: a client can tell a runner that broke the cancel contract from one that stopped when asked.
    assert (outcome.status, outcome.code) == ("failed", "runner.cancel_ignored")
    cause = "cancelled (cancelled)" if trigger == "cancel" else "past its deadline"
    assert (
        outcome.message
        == f"force-ended: the run was {cause} and the runner ignored the cancellation for 0.3s"
    )
    assert handle.force_ended is True
    assert any("leaked" in r.getMessage() for r in caplog.records)
    assert host.dispatcher.live_count() == 0
    after = [r async for r in host.orchestrator.run(event(event_id="evt-2"), binding("echo"))]
    assert after[-1].type == "run.completed"
    await host.aclose()
    stop.set()


async def test_a_leaked_task_does_not_keep_its_conversations_session_turn() -> None:
    """A ``stateful_session`` runner takes one turn at a time per conversation. Its first run swallows the
    cancellation and is force-ended; its task lives on (leaked), but the next run of that conversation gets its
    turn and completes instead of waiting behind the leaked task."""
    stop = asyncio.Event()
    swallow = _swallowing(stop)

    async def turn(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        if ctx.input.text == "swallow":
            async for item in swallow(ctx, api):
                yield item
        out = AgentRunner.emitter(ctx)
        yield out.message("next turn")
        yield out.complete()

    runner = scripted(turn, name="session")
    capabilities = type(runner).manifest.capabilities.model_copy(update={"stateful_session": True})
    type(runner).manifest = type(runner).manifest.model_copy(update={"capabilities": capabilities})
    host = Host.create(plugins={PLUGIN: [runner]})
    host.orchestrator.force_end_grace_seconds = 0.3
    try:
        first = await host.orchestrator.start(event("swallow", conversation_id="c-same"), binding("session"))
        await _take(first, 1)
        await host.orchestrator.cancel(first.run_id)
        first.detach()
        assert (await first.outcome()).code == "runner.cancel_ignored"
        leaked = first.control.task
        assert leaked is not None and not leaked.done()  # the runner still holds its task
        # A hang guard, not a timing assertion: without the fix this waits for the leaked task forever.
        async with asyncio.timeout(60):
            after = [
                r
                async for r in host.orchestrator.run(
                    event("again", event_id="evt-2", conversation_id="c-same"), binding("session")
                )
            ]
        assert after[-1].type == "run.completed"
    finally:
        stop.set()
        await host.aclose()


def _text(result: AgentRunResult) -> str:
    if isinstance(result, MessageCompletedResult):
        return result.data.message.text()
    assert isinstance(result, MessageDeltaResult), result
    return result.data.chunk.content or ""


def _gone(pid: int) -> bool:
    """The process no longer runs (reaped, or a zombie waiting for its new parent)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


async def _until(predicate: Any, *, what: str, limit: float = 60.0) -> None:
    """Wait for *predicate* (a generous limit: this is a hang guard, not a timing assertion)."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + limit
    while not predicate():
        assert loop.time() < give_up, f"still waiting for {what}"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("trigger", ["cancel", "deadline"])
async def test_out_of_process_a_runner_ignoring_cancellation_gets_its_runtime_restarted(trigger: str) -> None:
    """The run ends at once on the host; the child keeps the runner (and the process it spawned) alive, so after
    the grace the host kills the plugin's process group and the next run goes to a fresh process."""
    options = RuntimeOptions(close_grace=2.0, cancel_grace=0.5)
    host = make_host("subprocess", options=options)
    conn = host.registry.connection(oop_runners.PLUGIN)
    assert isinstance(conn, SubprocessRunnerConnection)
    try:
        policy: dict[str, Any] = {"timeout_seconds": 1.5} if trigger == "deadline" else {}
        handle = await host.orchestrator.start(event("spawn"), bind("swallow", **policy))
        first = [i.result async for i in _first(handle)]
        spawned = int(_text(first[0]).removeprefix("pid:"))
        pid = conn.pid
        assert pid is not None and not _gone(spawned)
        if trigger == "cancel":
            await host.orchestrator.cancel(handle.run_id)
        handle.detach()
        outcome = await handle.outcome()
        expected = "cancelled" if trigger == "cancel" else "deadline_exceeded"
        assert (outcome.status, outcome.code) == ("failed", expected)
        await _until(lambda: _gone(spawned) and _gone(pid), what="the ignoring runtime and its child to go")
        after = [r async for r in host.orchestrator.run(event(event_id="evt-2"), bind("echo"))]
        assert after[-1].type == "run.completed"
        assert conn.pid not in (None, pid) and conn.starts == 2
    finally:
        await host.aclose()


async def _first(handle: RunHandle) -> AsyncIterator[Any]:
    async for item in handle.results():
        yield item
        return


async def test_a_runtime_that_blocks_its_event_loop_is_killed_and_the_next_run_succeeds() -> None:
    """A ``time.sleep`` runner stops the whole child answering: the liveness ping times out, the child's group
    is killed, its live runs end ``runtime.unresponsive``, and the next run starts a fresh process."""
    options = RuntimeOptions(close_grace=2.0, ping_interval=0.2, ping_timeout=2.0, restart_backoff=0.05)
    host = make_host("subprocess", options=options)
    conn = host.registry.connection(oop_runners.PLUGIN)
    assert isinstance(conn, SubprocessRunnerConnection)
    try:
        blocked = await host.orchestrator.start(event("x"), bind("blocking"))
        sibling = await host.orchestrator.start(event("y", event_id="evt-sib"), bind("hang"))
        blocked_out, sibling_out = await blocked.outcome(), await sibling.outcome()
        assert (blocked_out.status, blocked_out.code) == ("failed", "runtime.unresponsive")
        assert sibling_out.code == "runtime.unresponsive"
        after = [r async for r in host.orchestrator.run(event(event_id="evt-2"), bind("echo"))]
        assert after[-1].type == "run.completed"
        assert conn.starts == 2
    finally:
        await host.aclose()


# -- per-run call credentials ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_concurrent_runs_of_one_plugin_cannot_act_for_each_other(mode: str, stores: HostStores) -> None:
    """Two conversations, one plugin, one connection: a run that names the other live run's id is refused
    ``unauthorized`` (nothing read, nothing written) and the refusal is audited under the named run."""
    host = make_host(mode, stores=stores)
    runner = f"plugin:{oop_runners.PLUGIN}/forger"
    owners = {
        conv: StateOwner("conversation", (runner, "b-forger", conv, "")) for conv in ("conv-a", "conv-b")
    }
    for conv, owner in owners.items():
        await stores.state.set(owner, "secret", f"secret of {conv}", runner_id=runner)
    try:
        for victim_conv, attacker_conv in (("conv-a", "conv-b"), ("conv-b", "conv-a")):
            victim = await host.orchestrator.start(
                event("hold", event_id=f"evt-v-{victim_conv}", conversation_id=victim_conv), bind("forger")
            )
            assert await _take(victim, 1) == ["message.delta"]
            attacker = await host.orchestrator.start(
                event(
                    f"forge:{victim.run_id}", event_id=f"evt-a-{attacker_conv}", conversation_id=attacker_conv
                ),
                bind("forger"),
            )
            said = [i.result async for i in attacker.results()]
            assert _text(said[0]) == "denied:unauthorized"
            await host.orchestrator.cancel(victim.run_id)
            victim.detach()
            await victim.outcome()
            audit = [r for r in await stores.events.for_run(victim.run_id) if r.event_type == "host.backcall"]
            assert [r.data["decision"] for r in audit] == ["unauthorized"]
        for conv, owner in owners.items():
            item = await stores.state.get(owner, "secret")
            assert item is not None and item.value == f"secret of {conv}"
        # The run's own credential still works: a run acting for itself reads its conversation.
        own = await host.orchestrator.start(
            event("self", event_id="evt-self", conversation_id="conv-a"), bind("forger")
        )
        said = [i.result async for i in own.results()]
        assert _text(said[0]) == "read:secret of conv-a"
    finally:
        await host.aclose()


# -- NaN / Infinity ----------------------------------------------------------------------------------------------


def test_the_sdk_refuses_nan_when_building_a_result() -> None:
    """JSON has no NaN: building a result with one fails in the runner, before it can turn into null."""
    with pytest.raises(ValueError, match="finite"):
        StateUpdatedData(scope="conversation", key="k", value=float("nan"))
    with pytest.raises(ValueError, match="finite"):
        StateUpdatedResult(
            run_id="r", data=StateUpdatedData(scope="conversation", key="k", value={"x": [float("inf")]})
        )


async def test_a_nan_state_value_is_a_recorded_violation_never_a_delete_nor_a_host_error(
    stores: HostStores,
) -> None:
    """In process a model built without validation carries NaN: refused and recorded, the key is kept."""
    owner = StateOwner("conversation", ("plugin:test/fake/default", "b-1", "conv-1", ""))
    await stores.state.set(owner, "keep", "kept", runner_id="plugin:test/fake/default")

    async def nan(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        data = StateUpdatedData.model_construct(scope="conversation", key="keep", value=float("nan"))
        yield StateUpdatedResult.model_construct(
            type="state.updated", run_id=ctx.run_id, sequence=None, timestamp=None, data=data, metadata={}
        )
        yield out.message("done")
        yield out.complete()

    host = Host.create(
        plugins={PLUGIN: [scripted(nan)]},
        stores=stores,
        bindings=[binding(state_policy=StatePolicy(scopes=["conversation"]))],
    )
    handle = await host.orchestrator.submit(event())
    _ = [i async for i in handle.results()]
    outcome = await handle.outcome()
    assert outcome.status == "completed", outcome
    item = await stores.state.get(owner, "keep")
    assert item is not None and item.value == "kept"
    kinds = [r.event_type for r in await stores.events.for_run(handle.run_id)]
    assert "violation.state_rejected" in kinds
    await host.aclose()


async def test_out_of_process_a_raw_nan_result_is_refused_by_the_runtime() -> None:
    """A runner yielding a raw dict with NaN: the runtime refuses to send it (it would arrive as null)."""
    host = make_host("subprocess")
    try:
        handle = await host.orchestrator.start(event("x"), bind("nanstate"))
        _ = [i async for i in handle.results()]
        outcome = await handle.outcome()
        assert (outcome.status, outcome.code) == ("failed", "runner.error")
        assert "NaN" in (outcome.message or "")
    finally:
        await host.aclose()


# -- log floods --------------------------------------------------------------------------------------------------


async def test_repeated_violations_of_one_run_are_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    """1,500 dropped deltas: a few warnings and one count, not 1,500 lines."""

    async def deltas(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        for _ in range(1500):
            yield out.delta("x")
        yield out.message("x")
        yield out.complete()

    host = Host.create(plugins={PLUGIN: [scripted(deltas, streaming=False)]})
    with caplog.at_level(logging.WARNING, logger="agentrunner.host.orchestrator"):
        items = [r async for r in host.orchestrator.run(event(), binding())]
    assert items[-1].type == "run.completed"
    lines = [r.getMessage() for r in caplog.records if r.name == "agentrunner.host.orchestrator"]
    assert len(lines) <= 10
    assert any("1495 more violation.streaming" in line for line in lines)
    await host.aclose()
