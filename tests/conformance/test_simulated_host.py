"""The simulated host serves back-calls from memory, checks them against the context, and injects faults."""

from __future__ import annotations

import asyncio
import time

import pytest
from agentrunner import (
    AgentResources,
    ArtifactRef,
    DeadlineExceededError,
    InvalidArgumentError,
    ModelResource,
    RateLimitedError,
    StateUpdatedData,
    StateUpdatedResult,
    ToolResource,
    UnauthorizedError,
)
from agentrunner_conformance import CallBehaviour, FaultPlan, SimulatedHost

from .support import make_context


async def test_granted_resources_are_served_and_recorded_as_allowed() -> None:
    """A granted model echoes, a granted tool echoes its arguments, state round-trips."""
    resources = AgentResources(
        models=[ModelResource(model_id="m1", operations=["invoke", "stream"])],
        tools=[ToolResource(tool_name="search", operations=["call"])],
    )
    host = SimulatedHost()
    api = host.open(make_context(resources=resources))
    answer = await api.models.invoke("m1", [{"role": "user", "content": "ping"}])
    assert answer.message.content == "ping"
    chunks = [c.delta async for c in api.models.stream("m1", [{"role": "user", "content": "a b"}])]
    assert "".join(c or "" for c in chunks).split() == ["a", "b"]
    assert (await api.tools.call("search", {"q": "x"})).content == {"tool": "search", "echo": {"q": "x"}}
    await api.state.set("conversation", "k", {"v": 1})
    assert (await api.state.get("conversation", "k")).value == {"v": 1}
    assert all(c.violation is None and c.outcome == "ok" for c in host.calls)


async def test_calls_outside_the_context_are_refused_and_recorded_as_violations() -> None:
    """An ungranted model, an ungranted operation, a switched-off API and an invisible artifact."""
    resources = AgentResources(models=[ModelResource(model_id="m1", operations=["invoke"])])
    host = SimulatedHost()
    api = host.open(make_context(resources=resources, state=False))
    with pytest.raises(UnauthorizedError, match=r"model 'gpt-4o' is not in ctx\.resources\.models"):
        await api.models.invoke("gpt-4o", [{"role": "user", "content": "x"}])
    with pytest.raises(UnauthorizedError, match="operation 'rerank' is not granted on model 'm1'"):
        await api.models.rerank("m1", "q", ["d"])
    with pytest.raises(UnauthorizedError, match=r"state is switched off in ctx\.context\.available_apis"):
        await api.state.get("conversation", "k")
    with pytest.raises(
        UnauthorizedError, match=r"artifacts\.metadata is switched off in ctx\.context\.available_apis"
    ):
        await api.artifacts.metadata("art-unknown")
    assert [c.violation is not None for c in host.calls] == [True, True, True, True]


async def test_artifacts_of_the_input_are_visible_and_readable() -> None:
    """Attachments are served with deterministic bytes when artifact reads are on."""
    ctx = make_context(attachments=[ArtifactRef(artifact_id="art-1", size=100)])
    ctx = ctx.model_copy(
        update={
            "context": ctx.context.model_copy(
                update={
                    "available_apis": ctx.context.available_apis.model_copy(
                        update={"artifact_read": True, "artifact_metadata": True}
                    )
                }
            )
        }
    )
    api = SimulatedHost().open(ctx)
    assert (await api.artifacts.metadata("art-1")).size == 100
    assert len(await api.artifacts.read_all("art-1")) == 100


async def test_invalid_parameters_are_refused_and_recorded() -> None:
    """Parameters are validated against the action table."""
    host = SimulatedHost()
    api = host.open(make_context())
    with pytest.raises(
        InvalidArgumentError,
        match="invalid parameters: scope: Input should be 'conversation', 'actor', 'subject', 'runner',",
    ):
        await api.call_raw("state.get", {"scope": "galaxy", "key": "k"})
    assert host.calls[0].invalid_params is not None


async def test_faults_are_injected_in_call_order() -> None:
    """The n-th call gets the n-th behaviour, then the default."""
    plan = FaultPlan(
        calls=(CallBehaviour(error="rate_limited"),), default=CallBehaviour(error="deadline_exceeded")
    )
    host = SimulatedHost(plan=plan)
    api = host.open(make_context())
    with pytest.raises(RateLimitedError, match="injected rate_limited"):
        await api.state.get("conversation", "k")
    with pytest.raises(DeadlineExceededError, match="injected deadline_exceeded"):
        await api.state.get("conversation", "k")
    assert [c.outcome for c in host.calls] == ["rate_limited", "deadline_exceeded"]


async def test_a_call_that_never_answers_is_cut_by_the_run_deadline() -> None:
    """A hanging host plus a deadline gives DeadlineExceededError, not a hang."""
    plan = FaultPlan(default=CallBehaviour(delay=float("inf")))
    api = SimulatedHost(plan=plan).open(make_context(deadline_at=time.time() + 0.05))
    with pytest.raises(DeadlineExceededError, match="deadline"):
        await api.state.get("conversation", "k")  # without the cut this never returns (pytest-timeout)


async def test_calls_after_the_run_ended_are_refused_and_marked_late() -> None:
    """close() ends the session: later calls are unauthorized and recorded as late."""
    host = SimulatedHost()
    api = host.open(make_context())
    host.close("run-1")
    with pytest.raises(UnauthorizedError, match="the run has ended"):
        await api.state.get("conversation", "k")
    assert host.calls[0].late


async def test_state_updates_are_applied_and_oversized_ones_ignored() -> None:
    """state.updated results write host state; a value over 256 KiB is dropped."""
    host = SimulatedHost()
    ctx = make_context()
    host.open(ctx)
    host.apply(
        "run-1",
        StateUpdatedResult(run_id="run-1", data=StateUpdatedData(scope="conversation", key="a", value=1)),
    )
    big = StateUpdatedData(scope="conversation", key="b", value="x" * (300 * 1024))
    host.apply("run-1", StateUpdatedResult(run_id="run-1", data=big))
    assert host.state_value(ctx, "conversation", "a") == 1
    assert host.state_value(ctx, "conversation", "b") is None


async def test_a_slow_answer_waits_before_answering() -> None:
    """delay makes the call take at least that long."""
    host = SimulatedHost(plan=FaultPlan(default=CallBehaviour(delay=0.03)))
    api = host.open(make_context())
    started = time.monotonic()
    await asyncio.wait_for(api.state.get("conversation", "k"), timeout=60)  # a hang guard
    assert time.monotonic() - started >= 0.03
