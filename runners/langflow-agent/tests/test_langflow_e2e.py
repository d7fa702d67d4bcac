"""The Langflow runner through the real host (service + HTTP API) against the loopback fake Langflow."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agentrunner import AgentInput, DeliveryContext
from agentrunner_host.definitions import AgentEventEnvelope
from agentrunner_http_kit.testing import HostHarness, migrate_legacy
from agentrunner_runner_langflow import MANIFEST, RUNNER_ID
from langflow_fake import FLOW_ID, MISSING_FLOW, LangflowFake, Script

SENTINEL = "lf-sentinel-4b8e1d92"
"""The API key: it must never appear in a result, an error, a log line or the transcript."""


def _config(fake: LangflowFake, **extra: Any) -> dict[str, Any]:
    return {
        "base-url": fake.base_url,
        "api-key": {"env": "LANGFLOW_TEST_KEY"},
        "flow-id": FLOW_ID,
        "tweaks": '{"ChatOutput-x1Y2z": {"sender_name": "Bot"}}',
        "timeout": 30,
        **extra,
    }


@pytest.fixture
async def fake() -> AsyncIterator[LangflowFake]:
    async with LangflowFake(SENTINEL) as server:
        yield server


@pytest.fixture
async def host(tmp_path: Path, fake: LangflowFake) -> AsyncIterator[HostHarness]:
    async with HostHarness.open(
        tmp_path, runner_id=RUNNER_ID, runner_config=_config(fake), environ={"LANGFLOW_TEST_KEY": SENTINEL}
    ) as harness:
        yield harness


async def test_a_non_streaming_turn_reads_the_run_body(host: HostHarness, fake: LangflowFake) -> None:
    reply = await host.send("hi there")
    assert reply.status == "completed", reply.failure
    assert reply.text == "Hello from Langflow"
    assert reply.deltas == []
    [call] = fake.calls()
    assert call.query == {"stream": "false"}
    assert call.headers["x-api-key"] == SENTINEL
    body = call.json()
    assert body["input_value"] == "hi there"
    assert (body["input_type"], body["output_type"]) == ("chat", "chat")
    assert body["tweaks"] == {"ChatOutput-x1Y2z": {"sender_name": "Bot"}}
    uuid.UUID(body["session_id"])  # a fresh session on the first turn
    assert reply.state_updates == {"external.session_id": body["session_id"]}


async def test_a_streaming_turn_sends_each_token(host: HostHarness, fake: LangflowFake) -> None:
    fake.script = Script(split=True)
    reply = await host.send("hello", stream=True)
    assert reply.status == "completed", reply.failure
    assert reply.deltas == ["Hello", " from", " Langflow"]
    assert reply.text == "Hello from Langflow"
    assert fake.calls()[0].query == {"stream": "true"}


async def test_a_flow_without_a_streaming_model_answers_from_the_end_event(
    host: HostHarness, fake: LangflowFake
) -> None:
    fake.script = Script(tokens=False, pieces=["All at once"])
    reply = await host.send("hello", stream=True)
    assert reply.text == "All at once"
    assert reply.deltas == ["All at once"]


async def test_the_second_turn_reuses_the_session(host: HostHarness, fake: LangflowFake) -> None:
    await host.send("one", stream=True)
    second = await host.send("two")
    assert second.status == "completed"
    first_id, second_id = (c.json()["session_id"] for c in fake.calls())
    assert first_id == second_id
    assert second.state_updates == {}


async def test_an_error_event_fails_the_run(host: HostHarness, fake: LangflowFake) -> None:
    fake.script = Script(error="Error building Component OpenAI: quota exceeded")
    reply = await host.send("hi", stream=True)
    assert reply.code == "langflow.api_error"
    assert reply.failure is not None
    assert "quota exceeded" in reply.failure["message"]
    assert reply.state_updates == {}


async def test_a_wrong_key_is_an_auth_error(host: HostHarness, fake: LangflowFake) -> None:
    fake.api_key = "another-key"
    reply = await host.send("hi")
    assert reply.code == "langflow.auth_error"
    assert reply.failure is not None
    assert reply.failure["details"]["status"] == 403


async def test_server_errors_and_unknown_flows_are_http_errors(host: HostHarness, fake: LangflowFake) -> None:
    fake.script = Script(status=500)
    failed = await host.send("hi")
    assert failed.code == "langflow.http_error"
    assert failed.failure is not None
    assert failed.failure["retryable"]
    await host.put_agent(RUNNER_ID, _config(fake, **{"flow-id": MISSING_FLOW}))
    missing = await host.send("hi")
    assert missing.code == "langflow.http_error"
    assert missing.failure is not None
    assert "flow not found" in missing.failure["message"]
    assert not missing.failure["retryable"]


async def test_a_reply_slower_than_the_timeout_fails_retryable(host: HostHarness, fake: LangflowFake) -> None:
    await host.put_agent(RUNNER_ID, _config(fake, timeout=0.3))
    fake.script = Script(delay=30)
    reply = await host.send("hi")
    assert reply.code == "langflow.timeout"
    assert reply.failure is not None
    assert reply.failure["retryable"]


async def test_missing_config_fails_before_any_request(host: HostHarness, fake: LangflowFake) -> None:
    refused = await host.refused_agent(RUNNER_ID, _config(fake, **{"flow-id": ""}))
    assert refused["code"] == "invalid_runner_config" and "runner_config.flow-id: " in refused["message"]
    await host.put_agent(RUNNER_ID, _config(fake, **{"flow-id": ""}), admitted=False)
    reply = await host.send("hi")
    assert reply.code == "langflow.config_invalid"
    assert reply.failure is not None
    assert "flow-id" in reply.failure["message"]
    await host.put_agent(RUNNER_ID, _config(fake, tweaks="{broken"))
    bad = await host.send("hi")
    assert bad.code == "langflow.config_invalid"
    assert fake.calls() == []


async def test_unknown_events_are_ignored(host: HostHarness, fake: LangflowFake) -> None:
    fake.script = Script(unknown_events=True)
    reply = await host.send("hi", stream=True)
    assert reply.status == "completed"
    assert reply.text == "Hello from Langflow"


async def test_cancel_mid_stream_closes_the_connection(host: HostHarness, fake: LangflowFake) -> None:
    fake.script = Script(hold=True)
    event = AgentEventEnvelope(
        event_id="evt-cancel",
        event_type="message.received",
        source="api",
        conversation_id="conv-1",
        input=AgentInput(text="hi"),
        delivery=DeliveryContext(surface="api", supports_streaming=True),
    )
    feed = await host.service.submit(event)
    await asyncio.wait_for(fake.platform.streaming.wait(), 30)
    await host.cancel(feed.run_id)
    await asyncio.wait_for(fake.platform.disconnected.wait(), 30)
    reply = await host.reply(feed.run_id)
    assert reply.code == "cancelled"
    assert reply.of_type("message.completed") == []


async def test_the_key_never_leaks(
    host: HostHarness, fake: LangflowFake, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.api_key = "another-key"
    refused = await host.send("hi")
    fake.api_key = SENTINEL
    fake.script = Script(error=f"upstream said {SENTINEL}")
    echoed = await host.send("hi", stream=True)
    ok = await host.send("hi")
    for reply in (refused, echoed, ok):
        assert SENTINEL not in reply.dump()
    assert echoed.failure is not None
    assert "***" in echoed.failure["message"]
    assert SENTINEL not in await host.transcript()
    assert SENTINEL not in caplog.text


async def test_a_legacy_pipeline_migrates_starts_and_answers(tmp_path: Path, fake: LangflowFake) -> None:
    """A LangBot pipeline on ``langflow-api`` (tweaks as JSON text, as its form stored them) →
    ``migrate_pipeline_config`` as ``agentrunner migrate-config`` does (the key becomes an env reference) → the host answers."""
    legacy = {
        "ai": {
            "runner": {"runner": "langflow-api"},
            "langflow-api": {
                "base-url": fake.base_url,
                "api-key": SENTINEL,
                "flow-id": FLOW_ID,
                "input-type": "chat",
                "output-type": "chat",
                "tweaks": "{}",
            },
        }
    }
    agent = migrate_legacy(legacy, MANIFEST)
    assert agent.runner_id == RUNNER_ID
    assert agent.runner_config["api-key"] == {"env": "LANGFLOW_AGENT_API_KEY"}
    assert agent.variables == {"LANGFLOW_AGENT_API_KEY": SENTINEL}
    async with HostHarness.open(
        tmp_path, runner_id=agent.runner_id, runner_config=agent.runner_config, environ=agent.variables
    ) as host:
        reply = await host.send("status?")
    assert reply.status == "completed", reply.failure
    assert reply.text == "Hello from Langflow"
    assert "tweaks" not in fake.calls()[0].json()
