"""The Tbox runner through the real host (service + HTTP API) against the loopback fake Tbox API."""

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
from agentrunner_runner_tbox import MANIFEST, RUNNER_ID
from tbox_fake import APP_ID, Script, TboxFake

SENTINEL = "tbox-sentinel-token-91c0e7"
"""The access token: it must never appear in a result, an error, a log line or the transcript."""
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def _config(fake: TboxFake, **extra: Any) -> dict[str, Any]:
    return {
        "api-key": {"env": "TBOX_TEST_TOKEN"},
        "app-id": APP_ID,
        "base-url": fake.base_url,
        "timeout": 30,
        **extra,
    }


@pytest.fixture
async def fake() -> AsyncIterator[TboxFake]:
    async with TboxFake(SENTINEL) as server:
        yield server


@pytest.fixture
async def host(tmp_path: Path, fake: TboxFake) -> AsyncIterator[HostHarness]:
    async with HostHarness.open(
        tmp_path, runner_id=RUNNER_ID, runner_config=_config(fake), environ={"TBOX_TEST_TOKEN": SENTINEL}
    ) as harness:
        yield harness


async def test_a_non_streaming_turn_reads_the_body(host: HostHarness, fake: TboxFake) -> None:
    fake.script = Script(thinking=["Because."])
    reply = await host.send("hi there")
    assert reply.status == "completed", reply.failure
    assert reply.text == "<think>\nBecause.\n</think>\nHello from Tbox"
    assert reply.deltas == []
    [call] = fake.calls()
    assert call.headers["authorization"] == SENTINEL  # the raw token, no "Bearer"
    assert call.headers["source"] == "AGENT_SDK"
    body = call.json()
    assert body == {
        "appId": APP_ID,
        "query": "hi there",
        "stream": False,
        "userId": body["userId"],
        "searchEngine": False,
    }
    assert body["userId"].startswith("user_")
    assert reply.state_updates == {"external.conversation_id": "conv-tbox-1"}


async def test_a_streaming_turn_sends_each_chunk(host: HostHarness, fake: TboxFake) -> None:
    fake.script = Script(thinking=["Hm", "m."])
    reply = await host.send("hello", stream=True)
    assert reply.status == "completed", reply.failure
    assert reply.text == "<think>\nHmm.\n</think>\nHello from Tbox"
    assert "".join(reply.deltas) == reply.text
    assert fake.calls()[0].json()["stream"] is True


async def test_the_second_turn_sends_the_stored_conversation(host: HostHarness, fake: TboxFake) -> None:
    await host.send("one", stream=True)
    second = await host.send("two")
    assert second.status == "completed"
    bodies = [c.json() for c in fake.calls()]
    assert "conversationId" not in bodies[0]
    assert bodies[1]["conversationId"] == "conv-tbox-1"


async def test_an_image_is_uploaded_and_referenced(host: HostHarness, fake: TboxFake) -> None:
    image = await host.store_image(PNG)
    reply = await host.send("what is this?", contents=[{"type": "text", "text": "what is this?"}, image])
    assert reply.status == "completed", reply.failure
    [upload] = fake.uploads
    assert upload.data == PNG
    assert upload.content_type == "image/png"
    upload_call = fake.platform.requests_to("/api/file/upload")[0]
    assert upload_call.headers["authorization"] == SENTINEL
    assert fake.calls()[0].json()["files"] == [{"fileId": upload.file_id, "type": "IMAGE"}]


async def test_an_error_event_fails_the_run(host: HostHarness, fake: TboxFake) -> None:
    fake.script = Script(error_event="the agent crashed")
    reply = await host.send("hi", stream=True)
    assert reply.code == "tbox.api_error"
    assert reply.failure is not None
    assert "the agent crashed" in reply.failure["message"]
    assert reply.state_updates == {}


async def test_an_error_code_in_a_200_body_fails_the_run(host: HostHarness, fake: TboxFake) -> None:
    fake.script = Script(error_code="APP_OFFLINE")
    for stream in (False, True):
        reply = await host.send("hi", stream=stream)
        assert reply.code == "tbox.api_error"
        assert reply.failure is not None
        assert reply.failure["details"]["platform_code"] == "APP_OFFLINE"


async def test_a_wrong_token_is_an_auth_error(host: HostHarness, fake: TboxFake) -> None:
    fake.token = "another-token"
    reply = await host.send("hi", stream=True)
    assert reply.code == "tbox.auth_error"


async def test_a_server_error_is_retryable(host: HostHarness, fake: TboxFake) -> None:
    fake.script = Script(status=502)
    reply = await host.send("hi")
    assert reply.code == "tbox.http_error"
    assert reply.failure is not None
    assert reply.failure["retryable"]


async def test_a_reply_slower_than_the_timeout_fails_retryable(host: HostHarness, fake: TboxFake) -> None:
    await host.put_agent(RUNNER_ID, _config(fake, timeout=0.3))
    fake.script = Script(delay=30)
    reply = await host.send("hi", stream=True)
    assert reply.code == "tbox.timeout"
    assert reply.failure is not None
    assert reply.failure["retryable"]


async def test_missing_config_fails_before_any_request(host: HostHarness, fake: TboxFake) -> None:
    refused = await host.refused_agent(RUNNER_ID, _config(fake, **{"app-id": ""}))
    assert refused["code"] == "invalid_runner_config" and "runner_config.app-id: " in refused["message"]
    await host.put_agent(RUNNER_ID, _config(fake, **{"app-id": ""}), admitted=False)
    image = await host.store_image(PNG)
    reply = await host.send("hi", contents=[image])
    assert reply.code == "tbox.config_invalid"
    assert reply.failure is not None
    assert "app-id" in reply.failure["message"]
    assert fake.platform.requests == []


async def test_unknown_frames_are_ignored(host: HostHarness, fake: TboxFake) -> None:
    fake.script = Script(unknown_frames=True)
    reply = await host.send("hi", stream=True)
    assert reply.status == "completed"
    assert reply.text == "Hello from Tbox"


async def test_cancel_mid_stream_closes_the_connection(host: HostHarness, fake: TboxFake) -> None:
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


async def test_the_token_never_leaks(
    host: HostHarness, fake: TboxFake, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.token = "another-token"
    refused = await host.send("hi")
    fake.token = SENTINEL
    fake.script = Script(error_event=f"bad token {SENTINEL}")
    echoed = await host.send("hi", stream=True)
    ok = await host.send("hi")
    for reply in (refused, echoed, ok):
        assert SENTINEL not in reply.dump()
    assert echoed.failure is not None
    assert "***" in echoed.failure["message"]
    assert SENTINEL not in await host.transcript()
    assert SENTINEL not in caplog.text


async def test_a_legacy_pipeline_migrates_starts_and_answers(tmp_path: Path, fake: TboxFake) -> None:
    """A LangBot pipeline on ``tbox-app-api`` → migrated as ``agentrunner migrate-config`` does (the key
    becomes an env reference) → the host answers (``base-url`` is new; the legacy block had only the key and the app id)."""
    legacy = {
        "ai": {
            "runner": {"runner": "tbox-app-api"},
            "tbox-app-api": {"api-key": SENTINEL, "app-id": APP_ID, "base-url": fake.base_url},
        }
    }
    agent = migrate_legacy(legacy, MANIFEST)
    assert agent.runner_id == RUNNER_ID
    assert agent.runner_config["api-key"] == {"env": "TBOX_AGENT_API_KEY"}
    assert agent.variables == {"TBOX_AGENT_API_KEY": SENTINEL}
    async with HostHarness.open(
        tmp_path, runner_id=agent.runner_id, runner_config=agent.runner_config, environ=agent.variables
    ) as host:
        reply = await host.send("hello")
    assert reply.status == "completed", reply.failure
    assert reply.text == "Hello from Tbox"
    assert fake.calls()[0].headers["authorization"] == SENTINEL
