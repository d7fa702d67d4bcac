"""Properties over generated values: whatever a valid context or result holds survives the wire."""

from __future__ import annotations

from typing import Any

import orjson
from agentrunner import AgentRunContext, AgentRunResultAdapter, ResultEmitter, parse_result
from agentrunner.results import AgentRunResultBase
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import strategies

# Modest on purpose: the whole file runs in a few seconds. Deep searches belong to the conformance kit.
# Generating a whole context is the slow part, so the context properties draw fewer examples.
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CONTEXT_PROPERTY = settings(PROPERTY, max_examples=25)


@CONTEXT_PROPERTY
@given(strategies.contexts)
def test_every_valid_context_survives_a_json_round_trip_unchanged(ctx: AgentRunContext) -> None:
    """``model_dump_json`` then ``model_validate_json`` gives an equal context and the same bytes again."""
    encoded = ctx.model_dump_json()
    again = AgentRunContext.model_validate_json(encoded)
    assert again == ctx
    assert again.model_dump_json() == encoded


@PROPERTY
@given(strategies.results)
def test_every_result_survives_a_json_round_trip_unchanged(result: AgentRunResultBase) -> None:
    """Through the discriminated union, each result comes back as the same class with equal fields."""
    encoded = result.model_dump_json()
    again = AgentRunResultAdapter.validate_json(encoded)
    assert type(again) is type(result)
    assert again == result
    assert parse_result(encoded) == result
    assert again.model_dump_json() == encoded


@settings(CONTEXT_PROPERTY, max_examples=12)
@given(
    strategies.contexts,
    st.dictionaries(st.from_regex(r"x_[a-z]{1,8}", fullmatch=True), strategies.json_values),
)
def test_unknown_top_level_fields_never_change_the_parsed_context(
    ctx: AgentRunContext, extra: dict[str, Any]
) -> None:
    """A newer host's extra fields are ignored: the context parses to the same value with or without them."""
    raw = orjson.loads(ctx.model_dump_json())
    raw.update(extra)
    assert AgentRunContext.model_validate(raw) == ctx


@PROPERTY
@given(st.lists(st.sampled_from(["delta", "message", "tool", "state", "tool_done"]), max_size=30))
def test_emitter_sequences_are_gapless_whatever_the_verbs(verbs: list[str]) -> None:
    """Any mix of verbs followed by a terminal gives sequences 1..n, with the terminal last."""
    out = ResultEmitter("run")
    made: list[AgentRunResultBase] = []
    for verb in verbs:
        if verb == "delta":
            made.append(out.delta("x"))
        elif verb == "message":
            made.append(out.message("x"))
        elif verb == "tool":
            made.append(out.tool_started("t", "tool"))
        elif verb == "state":
            made.append(out.state("conversation", "k", 1))
        else:
            made.append(out.tool_completed("t", "tool"))
    made.append(out.complete())
    assert [r.sequence for r in made] == list(range(1, len(verbs) + 2))
    assert made[-1].model_dump()["type"] == "run.completed"
