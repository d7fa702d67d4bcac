"""The result stream (PROTOCOL_V1 §7): the nine types, the union, and forward compatibility."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from agentrunner import (
    KNOWN_RESULT_TYPES,
    STATE_SCOPES,
    TERMINAL_RESULT_TYPES,
    ActionRequestedResult,
    AgentRunResultAdapter,
    ArtifactCreatedResult,
    AssistantMessage,
    MessageCompletedResult,
    MessageDeltaResult,
    RunCompletedResult,
    RunFailedResult,
    StateUpdatedResult,
    TextContent,
    ToolCallCompletedResult,
    ToolCallStartedResult,
    UnknownResult,
    parse_result,
)
from pydantic import BaseModel, ValidationError

from . import payloads
from .helpers import assert_contains

RESULT_CLASSES: dict[str, type[BaseModel]] = {
    "message.delta": MessageDeltaResult,
    "message.completed": MessageCompletedResult,
    "tool.call.started": ToolCallStartedResult,
    "tool.call.completed": ToolCallCompletedResult,
    "artifact.created": ArtifactCreatedResult,
    "state.updated": StateUpdatedResult,
    "action.requested": ActionRequestedResult,
    "run.completed": RunCompletedResult,
    "run.failed": RunFailedResult,
}


def test_the_sdk_knows_exactly_the_nine_stable_result_types() -> None:
    """The known set, the terminal subset and the state scopes match PROTOCOL_V1 §7."""
    assert set(RESULT_CLASSES) == KNOWN_RESULT_TYPES
    assert {"run.completed", "run.failed"} == TERMINAL_RESULT_TYPES
    assert {"conversation", "actor", "subject", "runner", "binding", "workspace"} == STATE_SCOPES


@pytest.mark.parametrize("result_type", sorted(RESULT_CLASSES))
def test_every_result_type_round_trips_through_the_union(result_type: str) -> None:
    """Each type parses into its own class and survives dump JSON → parse unchanged, keeping every field."""
    raw = payloads.result(result_type)
    result = AgentRunResultAdapter.validate_python(raw)
    assert type(result) is RESULT_CLASSES[result_type]
    dumped = AgentRunResultAdapter.dump_json(result)
    again = AgentRunResultAdapter.validate_json(dumped)
    assert again == result
    assert_contains(raw, orjson.loads(dumped))


@pytest.mark.parametrize("result_type", sorted(RESULT_CLASSES))
def test_parse_result_accepts_bytes_text_and_dicts(result_type: str) -> None:
    """``parse_result`` gives the same typed result whatever form the JSON arrives in."""
    raw = payloads.result(result_type)
    encoded = orjson.dumps(raw)
    parsed = [parse_result(raw), parse_result(encoded), parse_result(encoded.decode())]
    assert all(type(p) is RESULT_CLASSES[result_type] for p in parsed)
    assert parsed[0] == parsed[1] == parsed[2]


def test_a_result_of_an_unknown_type_parses_to_unknown_result() -> None:
    """A newer runner's result type is not an error: it becomes an ``UnknownResult`` keeping its payload."""
    raw = {"type": "reasoning.delta", "run_id": "r", "sequence": 4, "data": {"text": "hmm"}, "extra": 1}
    parsed = parse_result(orjson.dumps(raw))
    assert isinstance(parsed, UnknownResult)
    assert parsed.type == "reasoning.delta"
    assert parsed.sequence == 4
    assert parsed.data == {"text": "hmm"}
    assert parsed.model_dump()["extra"] == 1


def test_unknown_optional_fields_in_a_known_result_are_ignored() -> None:
    """Fields a newer runner adds to the envelope or the payload are dropped, not rejected."""
    raw = payloads.result("run.failed", future_envelope=True)
    raw["data"]["future_payload"] = {"x": 1}
    parsed = parse_result(raw)
    assert isinstance(parsed, RunFailedResult)
    assert "future_envelope" not in parsed.model_dump()
    assert "future_payload" not in parsed.data.model_dump()


def test_a_run_failed_without_a_code_fails_naming_the_field() -> None:
    """Required payload fields of known types stay required."""
    raw = payloads.result("run.failed")
    del raw["data"]["code"]
    with pytest.raises(ValidationError, match="Field required") as info:
        parse_result(raw)
    assert [e["loc"] for e in info.value.errors()] == [("run.failed", "data", "code")]
    assert "data.code" in str(info.value)


def test_a_state_update_of_the_global_scope_fails_naming_the_field() -> None:
    """``state.updated`` scopes are a closed set; ``global`` is not one of them."""
    raw = payloads.result("state.updated")
    raw["data"]["scope"] = "global"
    with pytest.raises(
        ValidationError,
        match="Input should be 'conversation', 'actor', 'subject', 'runner', 'binding' or 'workspace'",
    ) as info:
        parse_result(raw)
    assert info.value.errors()[0]["loc"] == ("state.updated", "data", "scope")
    assert "data.scope" in str(info.value)


_DELETE: Any = object()


@pytest.mark.parametrize(
    ("result_type", "path", "value"),
    [
        ("run.failed", ("code",), ""),
        ("state.updated", ("key",), ""),
        ("state.updated", ("key",), "k" * 201),
        ("state.updated", ("value",), _DELETE),
        ("tool.call.started", ("tool_call_id",), ""),
        ("tool.call.completed", ("tool_name",), _DELETE),
        ("action.requested", ("target",), _DELETE),
        ("action.requested", ("target",), ["not", "an", "object"]),
        ("artifact.created", ("artifact", "artifact_id"), _DELETE),
        ("message.delta", ("chunk", "role"), "user"),
        ("message.completed", ("message",), _DELETE),
        ("run.completed", ("message", "contents"), [{"type": "image", "url": "data:image/png;base64,AA=="}]),
    ],
)
def test_invalid_payloads_of_known_types_fail_naming_the_field(
    result_type: str, path: tuple[str, ...], value: Any
) -> None:
    """Each known type validates its payload, and the error's location names the offending field."""
    raw = payloads.result(result_type)
    parent = raw["data"]
    for key in path[:-1]:
        parent = parent[key]
    if value is _DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    with pytest.raises(ValidationError) as info:  # noqa: PT011 - the error's location is checked below
        parse_result(raw)
    locations = [e["loc"] for e in info.value.errors()]
    expected = (result_type, "data", *path)
    assert any(loc[: len(expected)] == expected for loc in locations), locations


def test_a_result_without_a_run_id_is_rejected() -> None:
    """``run_id`` is required on every known result."""
    raw = payloads.result("message.delta")
    del raw["run_id"]
    with pytest.raises(ValidationError, match="run_id"):
        parse_result(raw)


@pytest.mark.parametrize("sequence", [0, -1])
def test_sequence_is_one_based(sequence: int) -> None:
    """Sequences start at 1; zero and negatives are rejected."""
    with pytest.raises(ValidationError, match="sequence"):
        parse_result(payloads.result("message.delta", sequence=sequence))


@pytest.mark.parametrize("raw", [b"[1, 2]", "42", {"run_id": "r"}, {"type": 7, "run_id": "r"}])
def test_input_that_is_not_a_typed_object_raises_value_error(raw: Any) -> None:
    """A non-object or an object without a string ``type`` is a ``ValueError``, not an unknown result."""
    with pytest.raises(ValueError, match=r"JSON object|string 'type'"):
        parse_result(raw)


def test_a_run_completed_without_data_gets_the_default_payload() -> None:
    """``run.completed`` may omit ``data``; it defaults to ``finish_reason="stop"``."""
    parsed = parse_result({"type": "run.completed", "run_id": "r"})
    assert isinstance(parsed, RunCompletedResult)
    assert parsed.data.finish_reason == "stop"
    assert parsed.data.message is None


def test_assistant_message_text_prefers_content_then_joins_text_elements() -> None:
    """``AssistantMessage.text()`` gives ``content`` when set, else the concatenated text elements."""
    assert AssistantMessage(content="a", contents=[TextContent(text="b")]).text() == "a"
    assert AssistantMessage(contents=[TextContent(text="b"), TextContent(text="c")]).text() == "bc"
    assert AssistantMessage().text() == ""
