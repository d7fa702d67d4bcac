"""The run context (PROTOCOL_V1 §5): parsing, round trips and forward compatibility."""

from __future__ import annotations

import pytest
from agentrunner import (
    AgentInput,
    AgentRunContext,
    AgentRunRequest,
    ContextAccess,
    ImageContent,
    TextContent,
)
from pydantic import ValidationError

from . import payloads
from .helpers import assert_contains, round_trip


def test_a_full_context_round_trips_without_losing_a_field() -> None:
    """Every field of a realistic context survives parse → dump JSON → parse, and the dump keeps the input."""
    ctx = AgentRunContext.model_validate(payloads.context())
    round_trip(ctx)
    assert_contains(payloads.context(), ctx.model_dump(mode="json"))


def test_a_minimal_context_gets_the_documented_defaults() -> None:
    """Only the required parts are needed; the state snapshot, config and inline policy default sensibly."""
    minimal = {
        "run_id": "r",
        "trigger": {"type": "message.received", "source": "api"},
        "event": {"event_id": "e", "event_type": "message.received", "source": "api"},
        "input": {},
        "delivery": {"surface": "http.wait"},
        "resources": {},
        "context": {},
        "runtime": {"trace_id": "t"},
    }
    ctx = AgentRunContext.model_validate(minimal)
    assert ctx.conversation is None
    assert ctx.config == {}
    assert ctx.state.conversation == {}
    assert ctx.context.inline_policy.mode == "current_event"
    assert ctx.context.available_apis.history_page is False
    assert ctx.runtime.protocol_version == "1"
    assert ctx.runtime.deadline_at is None
    round_trip(ctx)


def test_unknown_fields_anywhere_in_a_context_are_accepted_and_ignored() -> None:
    """A newer host may add fields at any level; an older runner parses the context and drops them."""
    raw = payloads.context(future_top_level={"x": 1})
    raw["event"]["future_event_field"] = "y"
    raw["runtime"]["future_runtime_field"] = [1, 2]
    ctx = AgentRunContext.model_validate(raw)
    dumped = ctx.model_dump()
    assert "future_top_level" not in dumped
    assert "future_event_field" not in dumped["event"]
    assert "future_runtime_field" not in dumped["runtime"]


@pytest.mark.parametrize("field", ["run_id", "trigger", "event", "input", "delivery", "resources", "runtime"])
def test_a_context_without_a_required_part_fails_naming_it(field: str) -> None:
    """Missing required parts are rejected with an error that names the missing field."""
    raw = payloads.context()
    del raw[field]
    with pytest.raises(ValidationError, match="Field required") as info:
        AgentRunContext.model_validate(raw)
    assert any(error["loc"] == (field,) and error["type"] == "missing" for error in info.value.errors())
    assert field in str(info.value)


def test_a_trigger_from_an_unknown_source_is_rejected() -> None:
    """``trigger.source`` is a closed set in v1."""
    raw = payloads.context(trigger={"type": "message.received", "source": "carrier-pigeon"})
    with pytest.raises(ValidationError, match=r"trigger\.source"):
        AgentRunContext.model_validate(raw)


def test_an_image_given_as_a_data_url_is_rejected() -> None:
    """Binary data never travels inline: a ``data:`` URL fails validation, naming the ``url`` field."""
    raw = payloads.context()
    raw["input"]["contents"] = [{"type": "image", "url": "data:image/png;base64,iVBORw0KGgo="}]
    with pytest.raises(
        ValidationError,
        match=r"Value error, only http\(s\) URLs are allowed; binary data travels as an artifact ref",
    ) as info:
        AgentRunContext.model_validate(raw)
    assert "input.contents.0.image.url" in str(info.value)
    assert "http(s)" in str(info.value)


def test_a_content_element_of_an_unknown_kind_is_rejected() -> None:
    """Content elements are a closed, discriminated union on ``type``."""
    raw = payloads.context()
    raw["input"]["contents"] = [{"type": "hologram", "text": "hi"}]
    with pytest.raises(ValidationError, match="hologram"):
        AgentRunContext.model_validate(raw)


def test_input_text_parts_prefer_the_structured_text_elements() -> None:
    """``text_parts`` gives the text elements in order, and falls back to ``text`` when there are none."""
    structured = AgentInput(
        text="ignored",
        contents=[TextContent(text="a"), ImageContent(url="https://x.test/i.png"), TextContent(text="b")],
    )
    assert structured.text_parts() == ["a", "b"]
    assert AgentInput(text="plain").text_parts() == ["plain"]
    assert AgentInput().text_parts() == []


def test_context_access_defaults_to_the_current_event_only() -> None:
    """Without a policy the host declares it inlined the current event, and no pull API is granted."""
    access = ContextAccess()
    assert access.inline_policy.mode == "current_event"
    assert access.inline_policy.delivered_count == 0
    assert not any(access.available_apis.model_dump().values())


def test_a_negative_max_message_size_is_rejected() -> None:
    """``delivery.max_message_size`` is a positive number of characters."""
    raw = payloads.context()
    raw["delivery"]["max_message_size"] = 0
    with pytest.raises(ValidationError, match=r"delivery\.max_message_size"):
        AgentRunContext.model_validate(raw)


def test_a_run_request_wraps_a_context_and_round_trips() -> None:
    """``RUN_AGENT`` carries the runner's id and name next to the context."""
    request = AgentRunRequest.model_validate(
        {"runner_id": "plugin:acme/helper/default", "runner_name": "default", "context": payloads.context()}
    )
    assert request.context.run_id == payloads.RUN_ID
    round_trip(request)


def test_deadline_at_is_float_epoch_seconds_and_timestamps_are_int_epoch_milliseconds() -> None:
    """The two time units of the protocol stay distinct after parsing."""
    ctx = AgentRunContext.model_validate(payloads.context())
    assert ctx.runtime.deadline_at == pytest.approx(1_767_000_030.5)
    assert isinstance(ctx.runtime.deadline_at, float)
    assert ctx.trigger.timestamp == 1_767_000_000_000
    assert isinstance(ctx.trigger.timestamp, int)
