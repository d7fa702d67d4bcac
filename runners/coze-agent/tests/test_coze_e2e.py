"""The Coze runner through the real host (service + HTTP API) against a loopback fake of Coze's v3 chat API."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agentrunner_http_kit.testing import FakePlatform, HostHarness, migrate_legacy
from agentrunner_runner_coze import CONVERSATION_KEY, MANIFEST, RUNNER_ID
from coze_fake import SENTINEL_TOKEN, CozeFake

PNG = b"\x89PNG\r\n\x1a\n" + b"\x01" * 32
ENV = {"COZE_TEST_TOKEN": SENTINEL_TOKEN}


@pytest.fixture
async def coze() -> AsyncIterator[CozeFake]:
    async with FakePlatform() as platform:
        yield CozeFake(platform)


def _config(fake: CozeFake, **extra: Any) -> dict[str, Any]:
    return {
        "api-base": fake.platform.base_url,
        "api-key": {"env": "COZE_TEST_TOKEN"},
        "bot-id": "bot-1",
        **extra,
    }


@pytest.fixture
async def host(tmp_path: Path, coze: CozeFake) -> AsyncIterator[HostHarness]:
    async with HostHarness.open(
        tmp_path, runner_id=RUNNER_ID, runner_config=_config(coze), environ=ENV
    ) as harness:
        yield harness


async def test_a_text_message_without_streaming(host: HostHarness, coze: CozeFake) -> None:
    reply = await host.send("hello", params={"city": "x", "n": 2})
    assert reply.status == "completed", reply.run
    assert reply.text == "Hi from Coze" and reply.deltas == []
    [request] = coze.platform.requests_to("/v3/chat")
    assert request.headers["authorization"] == f"Bearer {SENTINEL_TOKEN}"
    assert request.headers["accept"] == "text/event-stream"
    body = request.json()
    assert body["bot_id"] == "bot-1" and body["stream"] is True and body["auto_save_history"] is True
    assert body["additional_messages"] == [{"role": "user", "content": "hello", "content_type": "text"}]
    assert body["custom_variables"] == {"city": "x", "n": "2"}
    assert "conversation_id" not in request.query
    [done] = reply.of_type("run.completed")
    assert done["usage"] == {"input_tokens": 20, "output_tokens": 10, "total_tokens": 30}
    [message] = reply.of_type("message.completed")
    assert message["message"]["metadata"] == {"follow_up": ["Tell me more?"]}
    [started] = reply.of_type("tool.call.started")
    [completed] = reply.of_type("tool.call.completed")
    assert started["tool_name"] == completed["tool_name"] == "weather"


async def test_streaming_increments_and_unknown_events_ignored(host: HostHarness) -> None:
    reply = await host.send("hello", stream=True)
    assert reply.status == "completed", reply.run
    assert reply.deltas == ["Hi ", "from ", "Coze"]  # conversation.audio.delta and verbose were ignored
    assert "".join(reply.deltas) == reply.text


async def test_reasoning_is_a_prefix_unless_removed(tmp_path: Path, coze: CozeFake) -> None:
    coze.reasoning = True
    async with HostHarness.open(
        tmp_path, runner_id=RUNNER_ID, runner_config=_config(coze), environ=ENV
    ) as host:
        kept = await host.send("hello", stream=True)
        await host.put_agent(RUNNER_ID, _config(coze, **{"remove-think": True}))
        removed = await host.send("hello", stream=True)
    assert kept.text == "🤔\nthink hard\n💬\nHi from Coze"
    assert "".join(kept.deltas) == kept.text
    assert removed.text == "Hi from Coze" and "".join(removed.deltas) == "Hi from Coze"


async def test_the_second_turn_sends_the_stored_conversation_id(host: HostHarness, coze: CozeFake) -> None:
    first = await host.send("one")
    assert first.state_updates == {CONVERSATION_KEY: "c-1"}
    second = await host.send("two")
    assert second.status == "completed"
    requests = coze.platform.requests_to("/v3/chat")
    assert requests[1].query == {"conversation_id": "c-1"}
    assert second.state_updates == {}


async def test_chat_failed_and_requires_action(host: HostHarness, coze: CozeFake) -> None:
    coze.failure = "chat_failed"
    failed = await host.send("hi")
    assert failed.code == "coze.api_error"
    assert failed.failure is not None and "quota exhausted" in failed.failure["message"]
    assert failed.state_updates == {}
    coze.failure = "requires_action"
    action = await host.send("hi")
    assert action.code == "coze.requires_action"


async def test_http_200_json_error_bodies_are_errors(
    host: HostHarness, coze: CozeFake, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    coze.failure = "json_error"
    api = await host.send("hi")
    assert api.code == "coze.api_error" and api.failure is not None
    assert "the bot is not published" in api.failure["message"] and api.failure["details"]["code"] == 4000
    coze.failure = "json_auth"
    auth = await host.send("hi")
    assert auth.code == "coze.auth_error"
    for seen in (api.dump(), auth.dump(), caplog.text, await host.transcript()):
        assert SENTINEL_TOKEN not in seen


async def test_401_and_500(host: HostHarness, coze: CozeFake) -> None:
    coze.failure = "401"
    auth = await host.send("hi")
    assert auth.code == "coze.auth_error" and auth.failure is not None
    assert auth.failure["retryable"] is False and SENTINEL_TOKEN not in auth.dump()
    coze.failure = "500"
    server = await host.send("hi")
    assert server.code == "coze.http_error" and server.failure is not None
    assert server.failure["retryable"] is True


async def test_a_reply_slower_than_the_timeout_fails_timeout(tmp_path: Path, coze: CozeFake) -> None:
    coze.failure = "slow"
    async with HostHarness.open(
        tmp_path, runner_id=RUNNER_ID, runner_config=_config(coze, timeout=1), environ=ENV
    ) as host:
        reply = await host.send("hi")
    assert reply.code == "coze.timeout"
    assert reply.failure is not None and reply.failure["retryable"] is True


async def test_missing_required_config_fails_before_any_request(tmp_path: Path, coze: CozeFake) -> None:
    """The API refuses the agent (admission against the form); stored past it, the runner refuses too."""
    config = {"api-base": coze.platform.base_url, "api-key": {"env": "COZE_TEST_TOKEN"}}
    async with HostHarness.open(
        tmp_path, runner_id=RUNNER_ID, runner_config=config, environ=ENV, admitted=False
    ) as host:
        refused = await host.refused_agent(RUNNER_ID, config)
        reply = await host.send("hi")
    assert refused["code"] == "invalid_runner_config"
    assert refused["message"] == f"runner_config.bot-id: runner {RUNNER_ID} requires it"
    assert reply.code == "coze.config_invalid"
    assert reply.failure is not None and "'bot-id'" in reply.failure["message"]
    assert coze.platform.requests == []


async def test_an_image_artifact_is_uploaded_and_sent_as_object_string(
    host: HostHarness, coze: CozeFake
) -> None:
    image = await host.store_image(PNG)
    reply = await host.send("what is this?", contents=[image])
    assert reply.status == "completed", reply.run
    [upload] = coze.platform.requests_to("/v1/files/upload")
    assert (await upload.form()).files["file"].data == PNG
    message = coze.platform.requests_to("/v3/chat")[0].json()["additional_messages"][0]
    assert message["content_type"] == "object_string"
    assert json.loads(message["content"]) == [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "file_id": coze.uploads[0]},
    ]


async def test_cancelling_mid_stream_closes_the_connection(host: HostHarness, coze: CozeFake) -> None:
    coze.failure = "hold"
    run_id = await host.submit("hi")
    await coze.platform.streaming.wait()
    await host.cancel(run_id)
    await coze.platform.disconnected.wait()
    reply = await host.reply(run_id)
    assert reply.status == "failed" and reply.code == "cancelled"


async def test_a_legacy_coze_pipeline_migrates_starts_and_answers(tmp_path: Path, coze: CozeFake) -> None:
    legacy = {
        "ai": {
            "runner": {"runner": "coze-api"},
            "coze-api": {
                "api-key": SENTINEL_TOKEN,
                "bot-id": "bot-1",
                "api-base": coze.platform.base_url,
                "auto-save-history": True,
                "timeout": 120,
            },
        }
    }
    agent = migrate_legacy(legacy, MANIFEST)
    assert agent.runner_id == RUNNER_ID
    assert agent.runner_config["api-key"] == {"env": "COZE_AGENT_API_KEY"}
    async with HostHarness.open(
        tmp_path, runner_id=agent.runner_id, runner_config=agent.runner_config, environ=agent.variables
    ) as host:
        reply = await host.send("hello from a legacy pipeline")
    assert reply.status == "completed", reply.run
    assert reply.text == "Hi from Coze"
