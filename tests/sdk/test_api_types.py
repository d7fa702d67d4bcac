"""Back-call payloads (PROTOCOL_V1 §8): every action's params and result model round-trip."""

from __future__ import annotations

import pytest
from agentrunner import ACTIONS, BackCallRequest, StorageValue
from pydantic import ValidationError

from . import payloads
from .helpers import assert_contains, round_trip


def test_the_examples_cover_every_action() -> None:
    """Each action of the table has example params and an example result below."""
    assert set(payloads.ACTION_PARAMS) == set(ACTIONS)
    assert set(payloads.ACTION_RESULTS) == set(ACTIONS)


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_action_params_round_trip_without_losing_a_field(action: str) -> None:
    """Params validate into the action's params model and survive dump JSON → parse."""
    raw = payloads.ACTION_PARAMS[action]
    params = round_trip(ACTIONS[action].params.model_validate(raw))
    assert_contains(raw, params.model_dump(mode="json"))


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_action_results_round_trip_without_losing_a_field(action: str) -> None:
    """Results validate into the action's result model and survive dump JSON → parse."""
    raw = payloads.ACTION_RESULTS[action]
    result = round_trip(ACTIONS[action].result.model_validate(raw))
    assert_contains(raw, result.model_dump(mode="json"))


@pytest.mark.parametrize(
    ("action", "field", "value"),
    [
        ("models.invoke", "messages", []),
        ("models.rerank", "documents", ["d"] * 1001),
        ("knowledge.retrieve", "top_k", 51),
        ("knowledge.retrieve", "query_text", ""),
        ("history.page", "limit", 0),
        ("history.page", "direction", "sideways"),
        ("history.search", "query", ""),
        ("artifacts.read_range", "offset", -1),
        ("artifacts.read_range", "length", 0),
        ("state.get", "scope", "global"),
        ("state.set", "expected_version", -1),
        ("state.list", "key", None),
        ("storage.get", "area", "global"),
        ("storage.set", "key", "k" * 201),
        ("platform.request_action", "idempotency_key", ""),
    ],
)
def test_invalid_action_params_fail_naming_the_field(action: str, field: str, value: object) -> None:
    """Params models enforce their bounds and closed vocabularies, and the error names the field."""
    raw = dict(payloads.ACTION_PARAMS[action])
    if value is None:
        raw.pop("scope")
        field = "scope"
    else:
        raw[field] = value
    with pytest.raises(ValidationError) as info:  # noqa: PT011 - the error's location is checked below
        ACTIONS[action].params.model_validate(raw)
    assert info.value.errors()[0]["loc"][0] == field


def test_streaming_and_side_effecting_flags_match_the_spec() -> None:
    """Two actions stream; the writes (tool calls, state, storage, platform) are side-effecting."""
    assert {n for n, s in ACTIONS.items() if s.streaming} == {"models.stream", "artifacts.open_stream"}
    assert {n for n, s in ACTIONS.items() if s.side_effecting} == {
        "tools.call",
        "state.set",
        "state.delete",
        "storage.set",
        "storage.delete",
        "platform.request_action",
    }
    assert all(spec.name == name for name, spec in ACTIONS.items())


def test_a_back_call_request_round_trips_and_needs_a_run_id() -> None:
    """The envelope keeps run id, action, params, caller and idempotency key; an empty run id is refused."""
    request = BackCallRequest(
        run_id="r", action="tools.call", params={"tool_name": "t"}, caller="acme/helper", idempotency_key="k"
    )
    round_trip(request)
    with pytest.raises(ValidationError, match="run_id"):
        BackCallRequest(run_id="", action="tools.call")
    with pytest.raises(ValidationError, match="idempotency_key"):
        BackCallRequest(run_id="r", action="tools.call", idempotency_key="k" * 201)


def test_storage_values_decode_their_bytes() -> None:
    """``value_bytes`` decodes base64, and is ``None`` for an unset key."""
    assert StorageValue.model_validate(payloads.ACTION_RESULTS["storage.get"]).value_bytes() == b"hi"
    assert StorageValue(area="plugin", key="k").value_bytes() is None
