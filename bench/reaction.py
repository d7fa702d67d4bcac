"""Reaction suite: how fast the host ends a run on a cancel or a passed deadline, in process and out of process.

Earlier test suites bounded these by the wall clock (a cancel "within 1 s", a deadline "within 2 s"); those bounds
were taken out of the tests, where a loaded machine made them flaky and they were not measurements. Measured
here instead, each next to a floor of the same work in the same run:

* **cancel**: a run that streams one delta and then waits for ever, cancelled through
  ``Orchestrator.cancel`` as soon as the delta arrives and read to its terminal, vs a run of the same runner
  kind that streams one delta and completes on its own. The ratio is what ending a run by cancel costs over
  ending it normally (start, first result, terminal, unregistering are in both). Goal ≤ 2×.
* **deadline**: the waiting run with a 50 ms ``timeout_seconds``, read to its terminal, vs
  ``asyncio.timeout(0.05)`` around an event that never fires. The ratio is the deadline's overshoot plus the
  run's own cost (about 1.1× when the host ends the run right after the deadline). Goal ≤ 1.5×.

Both in process and through a warm plugin process (``SubprocessRunnerConnection``), where the cancel goes over
the wire and the child's task is cancelled there.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerManifest,
    AgentRunResult,
    I18nObject,
)

from ._framework import Goal, Measure, SuiteContext

if TYPE_CHECKING:
    from agentrunner_host.definitions import AgentBinding
    from agentrunner_host.host import Host

__all__ = ["measures"]

ROOT = Path(__file__).resolve().parents[1]
_PLUGIN = "bench/reaction"
_DEADLINE = 0.05


def _manifest(name: str) -> AgentRunnerManifest:
    return AgentRunnerManifest(
        id=f"plugin:{_PLUGIN}/{name}",
        name=name,
        label=I18nObject(en_US=name),
        capabilities={"streaming": True, "interrupt": True},  # pyright: ignore[reportArgumentType]
    )


class BenchOneDelta(AgentRunner):
    """Streams one delta and completes: a run that ends on its own."""

    manifest: ClassVar[AgentRunnerManifest] = _manifest("one-delta")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.delta("tok")
        yield out.complete("tok")


class BenchWaiter(AgentRunner):
    """Streams one delta, then waits until it is cancelled (or its deadline ends it)."""

    manifest: ClassVar[AgentRunnerManifest] = _manifest("waiter")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.delta("tok")
        await asyncio.Event().wait()
        yield out.complete("unreachable")


def _bindings() -> tuple[AgentBinding, AgentBinding, AgentBinding]:
    from agentrunner_host.definitions import AgentBinding, RunPolicy

    def bind(name: str, policy: RunPolicy | None = None) -> AgentBinding:
        return AgentBinding(
            binding_id=f"b-{name}",
            runner_id=f"plugin:{_PLUGIN}/{name}",
            event_types=["*"],
            run_policy=policy or RunPolicy(),
        )

    return bind("one-delta"), bind("waiter"), bind("waiter", RunPolicy(timeout_seconds=_DEADLINE))


def _host(*, out_of_process: bool) -> Host:
    from agentrunner_host.host import Host
    from agentrunner_host.runtime import PluginSpec, RunnerEntry, SubprocessRunnerConnection

    if not out_of_process:
        return Host.create(plugins={_PLUGIN: [BenchOneDelta(), BenchWaiter()]})
    host = Host.create()
    spec = PluginSpec(
        plugin_id=_PLUGIN,
        runners=(
            RunnerEntry(name="one-delta", ref="bench.reaction:BenchOneDelta"),
            RunnerEntry(name="waiter", ref="bench.reaction:BenchWaiter"),
        ),
        plugin_dir=ROOT,
    )
    host.registry.add(SubprocessRunnerConnection(spec, host.dispatcher))
    return host


def _rows(ctx: SuiteContext, where: str, host: Host) -> list[Measure]:
    from agentrunner_host.definitions import AgentEventEnvelope

    ctx.add_cleanup(host.aclose)
    one_delta, waiter, with_deadline = _bindings()
    counter = itertools.count()

    def new_event() -> AgentEventEnvelope:
        return AgentEventEnvelope(
            event_id=f"evt-{where}-{next(counter)}",
            event_type="message.received",
            conversation_id="conv-bench",
            input={"text": "hello"},  # pyright: ignore[reportArgumentType]
        )

    async def ends_on_its_own() -> None:
        handle = await host.orchestrator.start(new_event(), one_delta)
        async for _ in handle.results():
            pass

    async def cancelled_after_first_delta() -> None:
        handle = await host.orchestrator.start(new_event(), waiter)
        results = handle.results()
        await anext(results)
        await host.orchestrator.cancel(handle.run_id, reason="bench")
        async for _ in results:
            pass
        outcome = await handle.outcome()
        if outcome.code != "cancelled":
            raise RuntimeError(f"a cancelled run ended {outcome.status} ({outcome.code})")

    async def ended_by_its_deadline() -> None:
        handle = await host.orchestrator.start(new_event(), with_deadline)
        async for _ in handle.results():
            pass
        outcome = await handle.outcome()
        if outcome.code != "deadline_exceeded":
            raise RuntimeError(f"a run past its deadline ended {outcome.status} ({outcome.code})")

    async def bare_timeout() -> None:
        try:
            async with asyncio.timeout(_DEADLINE):
                await asyncio.Event().wait()
        except TimeoutError:
            pass

    return [
        Measure(
            f"cancel → terminal, {where}",
            cancelled_after_first_delta,
            ends_on_its_own,
            floor_name=f"a one-delta run that completes on its own, {where}",
            goal=Goal.ratio(2.0, source="a cancel should cost about what a run's own end does"),
            unit="µs/run",
        ),
        Measure(
            f"{_DEADLINE * 1000:g} ms deadline → terminal, {where}",
            ended_by_its_deadline,
            bare_timeout,
            floor_name=f"asyncio.timeout({_DEADLINE:g}) around an event that never fires",
            goal=Goal.ratio(1.5, source="the host ends the run right after its deadline"),
            unit="µs/run",
        ),
    ]


def measures(ctx: SuiteContext) -> list[Measure]:
    """The reaction suite's rows (see the module docstring)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return _rows(ctx, "in process", _host(out_of_process=False)) + _rows(
        ctx, "out of process", _host(out_of_process=True)
    )
