"""The same orchestrator scenarios, in process and through a real plugin process (agentrunner.wire)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agentrunner_host.definitions import AgentBinding, RunPolicy
from agentrunner_host.dispatcher import BackCallDispatcher
from agentrunner_host.host import Host
from agentrunner_host.orchestrator import DeliveredResult, RunOutcome
from agentrunner_host.runtime import PluginSpec, RunnerEntry, RuntimeOptions, SubprocessRunnerConnection
from agentrunner_host.runtime.inprocess import InProcessConnection

from . import oop_runners
from .fakes import event

HERE = Path(__file__).parent


@pytest.fixture(params=["in-process", "subprocess"])
async def host(request: pytest.FixtureRequest) -> AsyncIterator[Host]:
    h = Host.create()
    dispatcher: BackCallDispatcher = h.dispatcher
    if request.param == "in-process":
        h.registry.add(
            InProcessConnection(oop_runners.PLUGIN, [cls() for cls in oop_runners.ALL], handler=dispatcher)
        )
    else:
        spec = PluginSpec(
            plugin_id=oop_runners.PLUGIN,
            runners=tuple(
                RunnerEntry(name=cls.manifest.name, ref=f"oop_runners:{cls.__name__}")
                for cls in oop_runners.ALL
            ),
            plugin_dir=HERE,
        )
        h.registry.add(SubprocessRunnerConnection(spec, dispatcher, options=RuntimeOptions(close_grace=2.0)))
    yield h
    await h.aclose()


def bind(name: str, **policy: float) -> AgentBinding:
    return AgentBinding(
        binding_id=f"b-{name}",
        runner_id=f"plugin:{oop_runners.PLUGIN}/{name}",
        event_types=["*"],
        run_policy=RunPolicy(**policy),  # pyright: ignore[reportArgumentType]
    )


async def run_all(
    host: Host, name: str, text: str = "hello", **policy: float
) -> tuple[list[DeliveredResult], RunOutcome]:
    handle = await host.orchestrator.start(event(text), bind(name, **policy))
    items = [i async for i in handle.results()]
    return items, await handle.outcome()


async def test_a_good_run_is_delivered_in_order_with_the_runners_sequence(host: Host) -> None:
    """Results arrive in order, host_seq 1..n, the runner's sequence kept."""
    items, outcome = await run_all(host, "echo", "hello")
    assert [i.result.type for i in items] == [
        "message.delta",
        "message.delta",
        "message.completed",
        "run.completed",
    ]
    assert [i.host_seq for i in items] == [1, 2, 3, 4]
    assert [i.result.sequence for i in items] == [1, 2, 3, 4]
    assert outcome.status == "completed"


@pytest.mark.parametrize(
    ("runner", "code"),
    [
        ("crash", "runner.error"),
        ("big", "payload_too_large"),
        ("liar", "runner.protocol_error"),
        ("silent", "runner.empty_output"),
        ("unfinished", "runner.no_terminal"),
    ],
)
async def test_broken_runners_end_with_the_same_typed_failure_on_both_transports(
    host: Host, runner: str, code: str
) -> None:
    """Each way of breaking the protocol ends with exactly one terminal result carrying the same code."""
    items, outcome = await run_all(host, runner)
    assert outcome.code == code
    assert sum(1 for i in items if i.result.type in ("run.completed", "run.failed")) == 1
    assert items[-1].result.type == "run.failed"
    assert all(i.result.run_id != "run_someone_else" for i in items)
    _, ok = await run_all(host, "echo")
    assert ok.status == "completed"


async def test_a_hanging_runner_is_ended_at_its_deadline(host: Host) -> None:
    """deadline_exceeded, then the next run on the same plugin works."""
    _, outcome = await run_all(host, "hang", timeout_seconds=0.5)
    assert outcome.code == "deadline_exceeded"
    _, ok = await run_all(host, "echo")
    assert ok.status == "completed"


async def test_a_cancelled_run_ends_cancelled(host: Host) -> None:
    """cancel() reaches the runner and the run ends cancelled."""
    handle = await host.orchestrator.start(event(), bind("hang"))
    results = handle.results()
    first = await anext(results)
    assert first.result.type == "message.delta"
    assert await host.orchestrator.cancel(handle.run_id)
    rest = [i async for i in results]
    assert (await handle.outcome()).code == "cancelled"
    assert [i.result.type for i in rest] == ["run.failed"]


async def test_ten_thousand_deltas_arrive_complete(host: Host) -> None:
    """Backpressure does not lose or duplicate results."""
    items, outcome = await run_all(host, "flood")
    assert outcome.status == "completed"
    assert len(items) == 10_001


async def test_undeclared_streaming_is_dropped(host: Host) -> None:
    """A runner without the streaming capability cannot stream on either transport."""
    items, _ = await run_all(host, "nostream")
    assert [i.result.type for i in items] == ["message.completed", "run.completed"]


async def test_back_calls_are_checked_against_the_snapshot(host: Host) -> None:
    """An ungranted state scope is unauthorized through either transport's identity stamping."""
    items, _ = await run_all(host, "backcall")
    message = items[0].result
    assert message.type == "message.completed"
    assert message.data.message.content == "denied:unauthorized"


async def test_concurrent_runs_on_one_plugin_are_isolated(host: Host) -> None:
    """Twenty concurrent runs over one connection each get only their own input back."""

    async def one(i: int) -> list[str | None]:
        handle = await host.orchestrator.start(event(f"marker-{i}", event_id=f"e{i}"), bind("echo"))
        return [
            item.result.data.message.content
            async for item in handle.results()
            if item.result.type == "message.completed"
        ]

    texts = await asyncio.gather(*(one(i) for i in range(20)))
    assert texts == [[f"marker-{i}"] for i in range(20)]
