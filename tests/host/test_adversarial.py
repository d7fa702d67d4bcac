"""Property: whatever a runner streams, the host ends the run with exactly one terminal result and stays up."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

from agentrunner import TERMINAL_RESULT_TYPES, AgentRunAPI, AgentRunContext
from agentrunner_host.definitions import RunPolicy
from agentrunner_host.host import Host
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .fakes import PLUGIN, binding, echo_script, event, scripted

RUN = "__RUN__"  # replaced by the live run id when the fake runner streams
STREAM_EXAMPLES = int(os.environ.get("AGENTRUNNER_STREAM_EXAMPLES", "60"))
"""Generated streams per test run: 60 in the suite; CI's fault-matrix step runs 10,000 (see .ci/run)."""
_checked = [0]

_texts = st.text(max_size=20)
_valid = st.one_of(
    st.builds(lambda t: {"type": "message.delta", "data": {"chunk": {"content": t}}}, _texts),
    st.builds(lambda t: {"type": "message.completed", "data": {"message": {"content": t}}}, _texts),
    st.builds(
        lambda i: {"type": "tool.call.started", "data": {"tool_call_id": f"t{i}", "tool_name": "x"}},
        st.integers(0, 3),
    ),
    st.builds(
        lambda i: {"type": "tool.call.completed", "data": {"tool_call_id": f"t{i}", "tool_name": "x"}},
        st.integers(0, 3),
    ),
    st.builds(
        lambda k, v: {"type": "state.updated", "data": {"scope": "conversation", "key": k, "value": v}},
        st.sampled_from(["a", "b.c", "bad key", ""]),
        st.one_of(st.none(), st.integers(), _texts),
    ),
    st.just({"type": "run.completed", "data": {}}),
    st.builds(lambda t: {"type": "run.completed", "data": {"message": {"content": t}}}, _texts),
    st.builds(
        lambda c: {"type": "run.failed", "data": {"code": c, "message": "m"}},
        st.sampled_from(["runner.error", "x"]),
    ),
)
_hostile = st.one_of(
    st.just({"type": "message.reaction", "data": {}}),  # unknown type
    st.just({"type": "run.failed", "data": {}}),  # invalid known type
    st.just({"data": {}}),  # no type at all
    st.just(
        {"type": "message.delta", "run_id": "run_other", "data": {"chunk": {"content": "x"}}}
    ),  # foreign id
    st.just({"type": "action.requested", "data": {"action": "a", "target": {}}}),  # not granted
    st.just(
        {"type": "state.updated", "data": {"scope": "conversation", "key": "big", "value": "x" * 300_000}}
    ),
)


@st.composite
def streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    items = draw(st.lists(st.one_of(_valid, _valid, _hostile), max_size=12))
    out: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        entry = {"run_id": RUN, **item}
        if draw(st.booleans()):
            entry["sequence"] = draw(st.sampled_from([index + 1, index, 1, index + 3]))
        out.append(entry)
    return out


@settings(
    max_examples=STREAM_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(stream=streams(), raise_at_end=st.booleans())
def test_any_result_stream_ends_in_exactly_one_terminal_result(
    stream: list[dict[str, Any]], raise_at_end: bool
) -> None:
    """Exactly one terminal result, gap-free host sequence, only this run's id, no live run left, next run fine."""

    async def adversary(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        for item in stream:
            yield {**item, "run_id": ctx.run_id if item["run_id"] == RUN else item["run_id"]}
        if raise_at_end:
            raise RuntimeError("boom")

    async def scenario() -> None:
        host = Host.create(plugins={PLUGIN: [scripted(adversary, name="adversary"), scripted(echo_script)]})
        handle = await host.orchestrator.start(
            event(), binding("adversary", run_policy=RunPolicy(max_result_bytes=64 * 1024))
        )
        items = [i async for i in handle.results()]
        outcome = await handle.outcome()
        terminals = [i for i in items if i.result.type in TERMINAL_RESULT_TYPES]
        assert len(terminals) == 1
        assert items[-1] is terminals[0]
        assert [i.host_seq for i in items] == list(range(1, len(items) + 1))
        assert {i.result.run_id for i in items} == {handle.run_id}
        assert outcome.results == len(items)
        assert host.dispatcher.live_count() == 0
        after = [r async for r in host.orchestrator.run(event(event_id="evt-next"), binding())]
        assert after[-1].type == "run.completed"
        await host.aclose()

    asyncio.run(scenario())
    _checked[0] += 1


def test_zz_report_how_many_streams_were_checked() -> None:
    """Prints the count (CI runs this module with ``-s`` so the number is in its log)."""
    print(f"\nadversarial result streams checked through the real host: {_checked[0]}, host crashes: 0")
