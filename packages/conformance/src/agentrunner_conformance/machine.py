"""The stateful probe: a Hypothesis state machine that plays a busy host against one runner instance.

It starts runs (some with deadlines that pass), lets them interleave on one instance and one simulated host,
cancels some mid-stream (when the runner declares ``interrupt``), and at the end of each example judges every
run with the per-run invariants plus the cross-run leak check. Hypothesis's stateful testing is synchronous,
so every coroutine goes through one anyio blocking portal: one event loop for the whole machine.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import TypeVar

from agentrunner import (
    ActorContext,
    AgentEventContext,
    AgentInput,
    AgentResources,
    AgentRunContext,
    AgentRunner,
    AgentRunnerManifest,
    AgentRuntimeContext,
    AgentTrigger,
    ContextAccess,
    ContextAPICapabilities,
    ConversationContext,
    DeliveryContext,
)
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from .execution import RunHandle, RunRecord, start_run
from .host import CallBehaviour, FaultPlan, SimulatedHost
from .invariants import Violation, check_no_cross_run_leak, evaluate_run
from .loop import ExampleTimeoutError, LoopThread
from .profiles import Profile
from .requirements import REQUIREMENTS
from .strategies import EVENT_TYPES, MESSAGE_EVENT_TYPES, fault_plans, texts

T = TypeVar("T")

__all__ = ["MachineFinding", "OutOfTime", "ViolationFound", "runner_machine"]


@dataclass(slots=True, kw_only=True)
class MachineFinding:
    """Where a machine example found its violation; the last one recorded is the shrunk example."""

    violation: Violation
    """What broke."""
    steps: list[str] = field(default_factory=lambda: list[str]())
    """The steps of the example, in order."""


class OutOfTime(Exception):
    """Raised inside machine examples once the check's (or the shrink's) time budget is spent."""


class ViolationFound(Exception):
    """Raised inside Hypothesis examples to mark a violation (caught by the engine)."""

    violation: Violation
    """The violation."""

    def __init__(self, violation: Violation) -> None:
        super().__init__(f"{violation.requirement_id}: {violation.message}")
        self.violation = violation


@st.composite
def _core_contexts(draw: st.DrawFn, marker: str, run_id: str) -> AgentRunContext:
    """Contexts with few choices: event kind, text, streaming, state. The machine is about timing and
    interleaving, and small examples keep its shrinking fast; the other probes cover the variety."""
    event_type = draw(st.sampled_from(EVENT_TYPES))
    text = f"{marker} {draw(texts(max_size=12))}" if event_type in MESSAGE_EVENT_TYPES else None
    conversation = f"conv{marker}"
    return AgentRunContext(
        run_id=run_id,
        trigger=AgentTrigger(type=event_type, source="platform"),
        event=AgentEventContext(
            event_id=f"evt{marker}", event_type=event_type, source="telegram", data={"marker": marker}
        ),
        conversation=ConversationContext(conversation_id=conversation),
        actor=ActorContext(actor_type="user", actor_id=f"user{marker}"),
        input=AgentInput(text=text),
        delivery=DeliveryContext(surface="http.stream", supports_streaming=draw(st.booleans())),
        resources=AgentResources(),
        context=ContextAccess(
            conversation_id=conversation, available_apis=ContextAPICapabilities(state=draw(st.booleans()))
        ),
        runtime=AgentRuntimeContext(trace_id=f"trace{marker}", metadata={"session_key": f"session{marker}"}),
    )


def runner_machine(
    factory: Callable[[], AgentRunner],
    manifest: AgentRunnerManifest,
    *,
    portal: LoopThread,
    profile: Profile,
    ignored: Collection[str] = (),
    findings: list[MachineFinding] | None = None,
    cancel_grace: Callable[[], float] | None = None,
    deadline_grace: Callable[[], float] | None = None,
    out_of_time: Callable[[], bool] = lambda: False,
    on_found: Callable[[], None] = lambda: None,
) -> type[RuleBasedStateMachine]:
    """A state machine class bound to one runner, event loop and profile.

    Violations of requirements in *ignored* are not reported; the others are appended to *findings* and
    raised as :class:`ViolationFound`. *cancel_grace* / *deadline_grace* give the current grace periods (the
    profile's by default); once *out_of_time* says so, every step raises :class:`OutOfTime` at once, which
    ends the search (and its shrinking) without running anything more.
    """
    caps = manifest.capabilities
    found = findings if findings is not None else []
    cancel_grace_now = cancel_grace or (lambda: profile.cancel_grace)
    deadline_grace_now = deadline_grace or (lambda: profile.deadline_grace)
    budget = profile.example_budget

    def call(func: Callable[..., Awaitable[T]], *args: object) -> T:
        if out_of_time():
            raise OutOfTime
        try:
            return portal.call(func, *args, timeout=budget)
        except ExampleTimeoutError:
            violation = Violation(
                requirement_id="result.terminal.exactly-one",
                message=f"a step took over {budget:g}s: a run never ended",
            )
            if not applies(violation):
                raise OutOfTime from None
            found.append(MachineFinding(violation=violation, steps=[]))
            on_found()
            raise ViolationFound(violation) from None

    def applies(violation: Violation) -> bool:
        gate = REQUIREMENTS[violation.requirement_id].gate
        return violation.requirement_id not in ignored and (gate is None or gate.applies(caps))

    class RunnerMachine(RuleBasedStateMachine):
        """Concurrent runs, cancels and deadlines on one runner instance."""

        def __init__(self) -> None:
            super().__init__()
            self.runner = factory()
            self.host = SimulatedHost()
            self.handles: list[RunHandle] = []
            self.pending: list[tuple[AgentRunContext, FaultPlan, str]] = []
            self.steps: list[str] = []

        def _prepare(
            self, data: st.DataObject, *, deadline_in: float | None
        ) -> tuple[AgentRunContext, FaultPlan, str]:
            number = len(self.handles) + len(self.pending)
            marker = f"#R{number}#"
            ctx = data.draw(_core_contexts(marker, f"run-{number}"))
            if deadline_in is None:
                plan = data.draw(fault_plans(max_delay=0.02, error_weight=0.2))
            else:
                slow = data.draw(st.sampled_from([0.05, float("inf")]))
                plan = FaultPlan(default=CallBehaviour(delay=slow))
                runtime = ctx.runtime.model_copy(update={"deadline_at": time.time() + deadline_in})
                ctx = ctx.model_copy(update={"runtime": runtime})
            deadline = "" if deadline_in is None else f", deadline in {deadline_in:g}s"
            self.steps.append(
                f"start run {marker} ({ctx.event.event_type}, input {ctx.input.text!r}, host {plan.describe()}{deadline})"
            )
            self.pending.append((ctx, plan, marker))
            return ctx, plan, marker

        def _launch(self) -> None:
            """Start every prepared run in one step of the event loop, so they run side by side."""
            batch, self.pending = self.pending, []

            async def launch() -> list[RunHandle]:
                return [await start_run(self.runner, c, self.host, plan=p, marker=m) for c, p, m in batch]

            self.handles.extend(call(launch))

        def _start(self, data: st.DataObject, *, deadline_in: float | None) -> None:
            self._prepare(data, deadline_in=deadline_in)
            self._launch()

        @rule(data=st.data(), count=st.integers(1, 4))
        def start_runs(self, data: st.DataObject, count: int) -> None:
            for _ in range(count):
                self._prepare(data, deadline_in=None)
            if count > 1:
                self.steps.append(f"(the {count} runs above start together)")
            self._launch()

        @rule(data=st.data(), deadline_in=st.sampled_from([0.0, 0.01, 0.03]))
        def start_a_run_whose_deadline_passes(self, data: st.DataObject, deadline_in: float) -> None:
            self._start(data, deadline_in=deadline_in)

        # Draws depend only on earlier steps, never on timing (which runs have ended), so every example
        # replays the same way; a cancel of a run that has already ended is a no-op.
        @precondition(lambda self: caps.interrupt and bool(self.handles))
        @rule(data=st.data())
        def cancel_a_run(self, data: st.DataObject) -> None:
            handle = self.handles[data.draw(st.integers(0, len(self.handles) - 1))]
            self.steps.append(f"cancel run {handle.record.marker}")
            grace = cancel_grace_now()
            call(lambda: handle.cancel(grace=grace))

        @rule(ticks=st.integers(1, 5))
        def let_time_pass(self, ticks: int) -> None:
            self.steps.append(f"wait {ticks * 2}ms")
            call(asyncio.sleep, ticks * 0.002)

        def teardown(self) -> None:
            async def finish_all() -> list[RunRecord]:
                # Side by side, so the runs' grace periods and lingers overlap instead of adding up.
                grace = deadline_grace_now()
                finishing = (h.finish(deadline_grace=grace, linger=0.002) for h in self.handles)
                return list(await asyncio.gather(*finishing))

            records = call(finish_all)
            violations = [v for r in records for v in evaluate_run(r, manifest)]
            violations += check_no_cross_run_leak(records)
            for violation in violations:
                if applies(violation):
                    found.append(MachineFinding(violation=violation, steps=list(self.steps)))
                    on_found()
                    raise ViolationFound(violation)

    return RunnerMachine
