"""The DashScope runner through the real host (service + HTTP API) against the loopback fake application API."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agentrunner import AgentInput, DeliveryContext
from agentrunner_host.definitions import AgentEventEnvelope
from agentrunner_http_kit.testing import HostHarness, migrate_legacy
from agentrunner_runner_dashscope import MANIFEST, RUNNER_ID
from dashscope_fake import AGENT_APP, WORKFLOW_APP, DashScopeFake, Script

SENTINEL = "sk-sentinel-dashscope-7f3a9c"
"""The API key: it must never appear in a result, an error, a log line or the transcript."""


def _config(fake: DashScopeFake, **extra: Any) -> dict[str, Any]:
    return {
        "app-type": "agent",
        "api-key": {"env": "DASHSCOPE_TEST_KEY"},
        "app-id": AGENT_APP,
        "base-url": fake.base_url,
        "timeout": 30,
        **extra,
    }


@pytest.fixture
async def fake() -> AsyncIterator[DashScopeFake]:
    async with DashScopeFake(SENTINEL) as server:
        yield server


@pytest.fixture
async def host(tmp_path: Path, fake: DashScopeFake) -> AsyncIterator[HostHarness]:
    async with HostHarness.open(
        tmp_path, runner_id=RUNNER_ID, runner_config=_config(fake), environ={"DASHSCOPE_TEST_KEY": SENTINEL}
    ) as harness:
        yield harness


async def test_a_non_streaming_turn_answers_with_one_message(host: HostHarness, fake: DashScopeFake) -> None:
    reply = await host.send("hi there")
    assert reply.status == "completed", reply.failure
    assert reply.text == "Hello from DashScope"
    assert reply.deltas == []
    [call] = fake.calls()
    assert call.headers["authorization"] == f"Bearer {SENTINEL}"
    assert "x-dashscope-sse" not in call.headers
    body = call.json()
    assert body["input"] == {"prompt": "hi there"}
    assert body["parameters"] == {"has_thoughts": True}
    assert reply.state_updates == {"external.conversation_id": "sess-1"}
    [done] = reply.of_type("run.completed")
    assert done["usage"] == {"input_tokens": 11, "output_tokens": 3, "total_tokens": 14}


async def test_a_streaming_turn_sends_increments_that_add_up_to_the_message(
    host: HostHarness, fake: DashScopeFake
) -> None:
    fake.script = Script(thoughts=["Greeting", " noticed."], pieces=["Hi", " you"])
    reply = await host.send("hello", stream=True)
    assert reply.status == "completed", reply.failure
    assert reply.text == "<think>\nGreeting noticed.\n</think>\nHi you"
    assert "".join(reply.deltas) == reply.text
    assert len(reply.deltas) >= 3
    [call] = fake.calls()
    assert call.headers["x-dashscope-sse"] == "enable"
    assert call.json()["parameters"] == {"incremental_output": True, "has_thoughts": True}


async def test_a_workflow_app_streams_message_format_nodes_and_rewrites_references(
    host: HostHarness, fake: DashScopeFake
) -> None:
    await host.put_agent(
        RUNNER_ID,
        _config(fake, **{"app-type": "workflow", "app-id": WORKFLOW_APP, "references-quote": "Source:"}),
    )
    fake.script = Script(
        pieces=["See <ref>", "[d1]</ref>", " now."],
        doc_references=[{"index_id": "d1", "doc_name": "Guide.pdf", "title": "Guide"}],
    )
    reply = await host.send("where?", stream=True, params={"city": "Hangzhou"})
    assert reply.status == "completed", reply.failure
    assert reply.text == "See (Source: Guide.pdf) now."
    assert "".join(reply.deltas) == reply.text
    body = fake.calls()[0].json()
    assert body["parameters"] == {"incremental_output": True, "flow_stream_mode": "message_format"}
    assert body["input"]["biz_params"] == {"city": "Hangzhou"}


async def test_the_second_turn_sends_the_stored_session_id(host: HostHarness, fake: DashScopeFake) -> None:
    first = await host.send("one", stream=True)
    second = await host.send("two", stream=True)
    assert first.status == second.status == "completed"
    bodies = [c.json()["input"] for c in fake.calls()]
    assert "session_id" not in bodies[0]
    assert bodies[1]["session_id"] == "sess-1"
    assert second.state_updates == {}  # unchanged: nothing to write


async def test_an_error_event_fails_the_run_with_the_request_id(
    host: HostHarness, fake: DashScopeFake
) -> None:
    fake.script = Script(
        error_event={
            "code": "DataInspectionFailed",
            "message": "Output data may contain inappropriate content.",
        }
    )
    reply = await host.send("hi", stream=True)
    assert reply.status == "failed"
    assert reply.code == "dashscope.api_error"
    failure = reply.failure
    assert failure is not None
    assert failure["details"]["platform_code"] == "DataInspectionFailed"
    assert failure["details"]["request_id"].startswith("req-")
    assert not failure["retryable"]
    assert reply.state_updates == {}


async def test_a_wrong_key_is_an_auth_error(host: HostHarness, fake: DashScopeFake) -> None:
    fake.api_key = "sk-other"
    reply = await host.send("hi", stream=True)
    assert reply.code == "dashscope.auth_error"
    assert reply.failure is not None
    assert reply.failure["details"]["platform_code"] == "InvalidApiKey"


async def test_a_server_error_is_retryable(host: HostHarness, fake: DashScopeFake) -> None:
    fake.script = Script(status=500)
    reply = await host.send("hi")
    streamed = await host.send("hi", stream=True)
    assert streamed.code == "dashscope.http_error"
    assert streamed.failure is not None
    assert streamed.failure["details"]["platform_code"] == "InternalError"
    assert reply.code == "dashscope.http_error"
    assert reply.failure is not None
    assert reply.failure["retryable"]
    assert reply.failure["details"]["status"] == 500


async def test_a_reply_slower_than_the_timeout_fails_retryable(
    host: HostHarness, fake: DashScopeFake
) -> None:
    await host.put_agent(RUNNER_ID, _config(fake, timeout=0.3))
    fake.script = Script(delay=30)
    reply = await host.send("hi", stream=True)
    assert reply.code == "dashscope.timeout"
    assert reply.failure is not None
    assert reply.failure["retryable"]


async def test_missing_config_fails_before_any_request(host: HostHarness, fake: DashScopeFake) -> None:
    config = _config(fake)
    del config["app-id"]
    refused = await host.refused_agent(RUNNER_ID, config)
    assert refused["code"] == "invalid_runner_config" and "runner_config.app-id: " in refused["message"]
    await host.put_agent(RUNNER_ID, config, admitted=False)  # as an agent stored before admission
    reply = await host.send("hi")
    assert reply.code == "dashscope.config_invalid"
    assert reply.failure is not None
    assert "app-id" in reply.failure["message"]
    assert fake.calls() == []


async def test_unknown_events_are_ignored(host: HostHarness, fake: DashScopeFake) -> None:
    fake.script = Script(unknown_events=True)
    reply = await host.send("hi", stream=True)
    assert reply.status == "completed"
    assert reply.text == "Hello from DashScope"


async def test_cancel_mid_stream_closes_the_connection(host: HostHarness, fake: DashScopeFake) -> None:
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
    host: HostHarness, fake: DashScopeFake, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.api_key = "sk-other"
    refused = await host.send("hi")
    fake.api_key = SENTINEL
    fake.script = Script(error_event={"code": "InternalError", "message": f"echo {SENTINEL}"})
    echoed = await host.send("hi", stream=True)
    ok = await host.send("hi")
    for reply in (refused, echoed, ok):
        assert SENTINEL not in reply.dump()
    assert echoed.failure is not None
    assert "***" in echoed.failure["message"]
    assert SENTINEL not in await host.transcript()
    assert SENTINEL not in caplog.text


async def test_a_legacy_pipeline_migrates_starts_and_answers(tmp_path: Path, fake: DashScopeFake) -> None:
    """A LangBot pipeline on ``dashscope-app-api`` (with the hyphenated ``references-quote`` of the default
    pipeline config) → ``migrate_pipeline_config`` as ``agentrunner migrate-config`` does (the key becomes an env reference) → the host answers."""
    legacy = {
        "ai": {
            "runner": {"runner": "dashscope-app-api", "expire-time": 0},
            "dashscope-app-api": {
                "app-type": "agent",
                "api-key": SENTINEL,
                "app-id": AGENT_APP,
                "references-quote": "From:",
                "base-url": fake.base_url,
            },
        }
    }
    agent = migrate_legacy(legacy, MANIFEST)
    assert agent.runner_id == RUNNER_ID
    assert agent.runner_config["api-key"] == {"env": "DASHSCOPE_AGENT_API_KEY"}
    assert agent.variables == {"DASHSCOPE_AGENT_API_KEY": SENTINEL}
    fake.script = Script(
        pieces=["It says <ref>[a]</ref>."], doc_references=[{"index_id": "a", "doc_name": "Doc"}]
    )
    async with HostHarness.open(
        tmp_path, runner_id=agent.runner_id, runner_config=agent.runner_config, environ=agent.variables
    ) as host:
        reply = await host.send("what does it say?")
    assert reply.status == "completed", reply.failure
    assert reply.text == "It says (From: Doc)."
    assert fake.calls()[0].json()["input"]["prompt"] == "what does it say?"
