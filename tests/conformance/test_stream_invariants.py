"""The invariants judge result streams: valid streams pass, each adversarial defect trips its requirement."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerCapabilities,
    AgentRunnerManifest,
    AgentRunResult,
    I18nObject,
)
from agentrunner_conformance import SimulatedHost, drive_run, evaluate_run
from agentrunner_conformance.strategies import (
    EVENT_TYPES,
    AdversarialStream,
    Defect,
    adversarial_result_streams,
    result_streams,
    run_contexts,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .support import make_context

_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

EXPECTED: dict[Defect, str] = {
    "wrong_run_id": "result.run-id.matches",
    "bad_sequence": "result.sequence.strictly-increasing",
    "missing_terminal": "result.terminal.exactly-one",
    "two_terminals": "result.terminal.exactly-one",
    "output_after_terminal": "result.terminal.last",
    "oversized_state": "result.state-updated.valid",
    "unknown_type": "result.type.known",
    "invalid_data": "result.schema.valid",
}
"""The one requirement each defect breaks."""


class Replay(AgentRunner):
    """Yields a fixed list of results (dicts or models), whatever the context."""

    manifest = AgentRunnerManifest(
        id="plugin:tests/replay/default",
        name="default",
        label=I18nObject(en_US="Replay"),
        capabilities=AgentRunnerCapabilities(streaming=True),
    )

    def __init__(self, results: list[Any]) -> None:
        self.results = results

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        for result in self.results:
            yield result


async def _violations(results: list[Any]) -> set[str]:
    runner = Replay(results)
    record = await drive_run(runner, make_context(run_id="run-1"), SimulatedHost())
    return {v.requirement_id for v in evaluate_run(record, Replay.manifest)}


@_SETTINGS
@given(result_streams(run_id="run-1"))
async def test_valid_result_streams_break_no_requirement(results: list[AgentRunResult]) -> None:
    """Whatever valid stream the strategy builds, the invariants accept it."""
    assert await _violations(results) == set()


@_SETTINGS
@given(adversarial_result_streams(run_id="run-1"))
async def test_each_adversarial_stream_breaks_exactly_the_requirement_of_its_defect(
    stream: AdversarialStream,
) -> None:
    """The defect label predicts the violation, and nothing else is reported."""
    assert await _violations(stream.results) == {EXPECTED[stream.defect]}


def test_every_defect_has_an_expected_requirement() -> None:
    """The table above covers the strategy's whole vocabulary."""
    from agentrunner_conformance.strategies import ADVERSARIAL_DEFECTS

    assert set(EXPECTED) == set(ADVERSARIAL_DEFECTS)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(st.data())
def test_run_contexts_reach_every_event_kind_and_switch_apis_off(data: st.DataObject) -> None:
    """Generated contexts are valid models; non-message events carry no user text."""
    ctx = data.draw(run_contexts())
    assert ctx.event.event_type in EVENT_TYPES
    if ctx.event.event_type not in {"message.received", "api.invoked"}:
        assert ctx.input.text is None and not ctx.input.contents
    assert AgentRunContext.model_validate(ctx.model_dump(mode="json")) == ctx


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(run_contexts(marker="#R7#", multimodal=True, tools=True, knowledge=False))
def test_a_marked_context_carries_its_marker_and_the_forced_resources(ctx: AgentRunContext) -> None:
    """The marker lands in the input or event data, and tools / knowledge bases follow the switches."""
    assert "#R7#" in ctx.model_dump_json()
    assert ctx.resources.tools
    assert not ctx.resources.knowledge_bases
