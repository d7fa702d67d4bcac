"""Event types are stable dotted names: a platform's own name is refused with a typed 422 on /v1/events and on
bindings (over HTTP and in the configuration file)."""

from __future__ import annotations

import httpx
import pytest
from agentrunner_host.config import BindingSpec
from pydantic import ValidationError


@pytest.mark.parametrize(
    "event_type", ["Message Received", "FriendMessage", "message", "message.", ".x", "Message.Received"]
)
async def test_a_raw_platform_name_is_refused_on_events(client: httpx.AsyncClient, event_type: str) -> None:
    response = await client.post("/v1/events", json={"text": "hi", "event_type": event_type})
    assert response.status_code == 422
    body = response.json()
    assert body["error"]["code"] == "invalid_request"
    assert "event_type" in body["error"]["message"]


async def test_dotted_names_are_accepted(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/events?wait=true", json={"text": "hi", "event_type": "message.received"}
    )
    assert response.status_code == 200
    other = await client.post("/v1/events", json={"text": "hi", "event_type": "schedule.daily_report"})
    assert other.status_code == 404  # valid, but no binding handles it
    assert other.json()["error"]["code"] != "invalid_request"


async def test_a_binding_with_a_raw_platform_name_is_refused(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/bindings",
        json={"binding_id": "b1", "agent_id": "default", "event_types": ["Message Received"]},
    )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_request"
    assert "stable dotted name" in response.json()["error"]["message"]


def test_binding_specs_accept_dotted_names_and_the_wildcard() -> None:
    assert BindingSpec(binding_id="b", agent_id="a", event_types=["*", "message.received"]).event_types == [
        "*",
        "message.received",
    ]
    with pytest.raises(ValidationError, match="stable dotted name"):
        BindingSpec(binding_id="b", agent_id="a", event_types=["GroupMessage"])
