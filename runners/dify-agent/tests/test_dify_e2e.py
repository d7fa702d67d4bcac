"""The Dify runner through the real host (service + HTTP API) against a loopback fake of Dify's API."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agentrunner_http_kit.testing import FakePlatform, HostHarness, migrate_legacy
from agentrunner_runner_dify import CONVERSATION_KEY, MANIFEST, RUNNER_ID, WORKFLOW_SESSION_KEY
from dify_fake import SENTINEL_KEY, DifyFake

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


@pytest.fixture
async def dify() -> AsyncIterator[DifyFake]:
    async with FakePlatform() as platform:
        yield DifyFake(platform)


def _config(fake: DifyFake, **extra: Any) -> dict[str, Any]:
    return {"base-url": fake.base_url, "api-key": {"env": "DIFY_TEST_KEY"}, **extra}


@pytest.fixture
async def host(tmp_path: Path, dify: DifyFake) -> AsyncIterator[HostHarness]:
    async with HostHarness.open(
        tmp_path, runner_id=RUNNER_ID, runner_config=_config(dify), environ={"DIFY_TEST_KEY": SENTINEL_KEY}
    ) as harness:
        yield harness


async def test_a_chat_app_answers_without_streaming(host: HostHarness, dify: DifyFake) -> None:
    reply = await host.send("hi there", params={"lang": "en"})
    assert reply.status == "completed", reply.run
    assert reply.text == "Hello there"
    assert reply.deltas == []
    [request] = dify.platform.requests_to("/v1/chat-messages")
    body = request.json()
    assert request.headers["authorization"] == f"Bearer {SENTINEL_KEY}"
    assert body["query"] == "hi there" and body["response_mode"] == "streaming"
    assert body["conversation_id"] == "" and body["files"] == [] and body["user"].startswith("user_")
    assert body["inputs"] == {"lang": "en"}
    [done] = reply.of_type("run.completed")
    assert done["usage"] == {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}


async def test_streaming_delivers_increments_that_add_up_to_the_message(host: HostHarness) -> None:
    reply = await host.send("hi", stream=True)
    assert reply.status == "completed", reply.run
    assert reply.deltas == ["Hel", "lo ", "there"]
    assert "".join(reply.deltas) == reply.text


async def test_the_second_turn_reuses_difys_conversation_id(host: HostHarness, dify: DifyFake) -> None:
    first = await host.send("one")
    conversation = first.state_updates[CONVERSATION_KEY]
    assert conversation in dify.conversations
    second = await host.send("two")
    assert second.status == "completed"
    bodies = [r.json() for r in dify.platform.requests_to("/v1/chat-messages")]
    assert [b["conversation_id"] for b in bodies] == ["", conversation]
    assert CONVERSATION_KEY not in second.state_updates  # unchanged, so not written again


async def test_an_unknown_stored_conversation_is_cleared_and_retried_once(
    host: HostHarness, dify: DifyFake
) -> None:
    await host.send("one")
    dify.conversations.clear()  # Dify forgot it (the conversation was deleted)
    reply = await host.send("two")
    assert reply.status == "completed", reply.run
    bodies = [r.json() for r in dify.platform.requests_to("/v1/chat-messages")]
    assert bodies[1]["conversation_id"] != "" and bodies[2]["conversation_id"] == ""
    assert reply.state_updates[CONVERSATION_KEY] in dify.conversations


async def test_the_platforms_error_event_fails_the_run(host: HostHarness, dify: DifyFake) -> None:
    dify.failure = "error_event"
    reply = await host.send("hi")
    assert reply.code == "dify.api_error"
    assert reply.failure is not None and "model quota exceeded" in reply.failure["message"]
    assert CONVERSATION_KEY not in reply.state_updates  # written only on success


async def test_401_is_an_auth_error_and_never_echoes_the_key(
    host: HostHarness, dify: DifyFake, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    dify.failure = "401"
    reply = await host.send("hi")
    assert reply.code == "dify.auth_error"
    assert reply.failure is not None and reply.failure["retryable"] is False
    assert reply.failure["details"]["status"] == 401
    for seen in (reply.dump(), caplog.text, await host.transcript()):
        assert SENTINEL_KEY not in seen


async def test_500_is_a_retryable_http_error(host: HostHarness, dify: DifyFake) -> None:
    dify.failure = "500"
    reply = await host.send("hi")
    assert reply.code == "dify.http_error"
    assert reply.failure is not None and reply.failure["retryable"] is True


async def test_a_reply_slower_than_the_timeout_fails_timeout(tmp_path: Path, dify: DifyFake) -> None:
    dify.failure = "slow"
    async with HostHarness.open(
        tmp_path,
        runner_id=RUNNER_ID,
        runner_config=_config(dify, timeout=1),
        environ={"DIFY_TEST_KEY": SENTINEL_KEY},
    ) as host:
        reply = await host.send("hi")
    assert reply.code == "dify.timeout"
    assert reply.failure is not None and reply.failure["retryable"] is True


async def test_missing_required_config_fails_before_any_request(tmp_path: Path, dify: DifyFake) -> None:
    """The API refuses both agents (admission against the form); stored past it, the runner refuses too."""
    async with HostHarness.open(
        tmp_path,
        runner_id=RUNNER_ID,
        runner_config={"base-url": dify.base_url},
        environ={"DIFY_TEST_KEY": SENTINEL_KEY},
        admitted=False,
    ) as host:
        no_key = await host.refused_agent(RUNNER_ID, {"base-url": dify.base_url})
        reply = await host.send("hi")
        wrong_type = await host.refused_agent(RUNNER_ID, _config(dify, **{"app-type": "completion"}))
        await host.put_agent(RUNNER_ID, _config(dify, **{"app-type": "completion"}), admitted=False)
        bad_type = await host.send("hi")
    assert "runner_config.api-key: " in no_key["message"]
    assert "runner_config.app-type: expected one of chat" in wrong_type["message"]
    assert reply.code == "dify.config_invalid"
    assert reply.failure is not None and "'api-key'" in reply.failure["message"]
    assert bad_type.code == "dify.config_invalid"
    assert bad_type.failure is not None and "'app-type'" in bad_type.failure["message"]
    assert dify.platform.requests == []


async def test_an_image_artifact_is_uploaded_and_referenced(host: HostHarness, dify: DifyFake) -> None:
    image = await host.store_image(PNG)
    reply = await host.send("", contents=[image])
    assert reply.status == "completed", reply.run
    [upload] = dify.platform.requests_to("/v1/files/upload")
    form = await upload.form()
    assert form.fields["user"] == dify.platform.requests_to("/v1/chat-messages")[0].json()["user"]
    file = form.files["file"]
    assert file.data == PNG and file.content_type == "image/png"
    body = dify.platform.requests_to("/v1/chat-messages")[0].json()
    assert body["files"] == [
        {"type": "image", "transfer_method": "local_file", "upload_file_id": dify.uploads[0]}
    ]
    assert body["query"].startswith(
        "When the file content is readable"
    )  # the base prompt stands in for no text


async def test_unknown_events_and_pings_are_ignored(host: HostHarness) -> None:
    reply = await host.send("hi", stream=True)
    assert reply.status == "completed"
    assert reply.text == "Hello there"  # brand_new_event and ping in the stream changed nothing


async def test_cancelling_mid_stream_closes_the_connection(host: HostHarness, dify: DifyFake) -> None:
    dify.failure = "hold"
    run_id = await host.submit("hi")
    await dify.platform.streaming.wait()
    await host.cancel(run_id)
    await dify.platform.disconnected.wait()
    reply = await host.reply(run_id)
    assert reply.status == "failed" and reply.code == "cancelled"
    assert [r["type"] for r in reply.results if r["type"] == "message.completed"] == []


async def test_an_agent_app_reports_tools_and_images(tmp_path: Path, dify: DifyFake) -> None:
    dify.mode = "agent"
    async with HostHarness.open(
        tmp_path,
        runner_id=RUNNER_ID,
        runner_config=_config(dify, **{"app-type": "agent"}),
        environ={"DIFY_TEST_KEY": SENTINEL_KEY},
    ) as host:
        reply = await host.send("find x", stream=True)
    assert reply.status == "completed", reply.run
    assert reply.text == "Hello there"
    [started] = reply.of_type("tool.call.started")
    [completed] = reply.of_type("tool.call.completed")
    assert started["tool_name"] == completed["tool_name"] == "search"
    assert completed["result_preview"] == {"observation": "found"}
    [message] = reply.of_type("message.completed")
    assert message["message"]["contents"][0]["url"] == dify.platform.base_url + "/files/tools/f-1.png"


async def test_a_chatflow_app_answers_from_its_stream(tmp_path: Path, dify: DifyFake) -> None:
    dify.mode = "chatflow"
    async with HostHarness.open(
        tmp_path,
        runner_id=RUNNER_ID,
        runner_config=_config(dify, **{"app-type": "chatflow"}),
        environ={"DIFY_TEST_KEY": SENTINEL_KEY},
    ) as host:
        reply = await host.send("hi")
    assert reply.status == "completed", reply.run
    assert reply.text == "Hello there"
    assert [t["tool_name"] for t in reply.of_type("tool.call.completed")] == ["LLM"]


async def test_a_workflow_app_runs_with_stable_session_inputs(tmp_path: Path, dify: DifyFake) -> None:
    dify.mode = "workflow"
    async with HostHarness.open(
        tmp_path,
        runner_id=RUNNER_ID,
        runner_config=_config(dify, **{"app-type": "workflow"}),
        environ={"DIFY_TEST_KEY": SENTINEL_KEY},
    ) as host:
        first = await host.send("one", stream=True)
        second = await host.send("two")
        dify.failure = "error_event"
        failed = await host.send("three")
    assert first.status == "completed", first.run
    assert first.text == "Hello there" and "".join(first.deltas) == "Hello there"
    session = first.state_updates[WORKFLOW_SESSION_KEY]
    assert session.startswith("dify_session_")
    inputs = [r.json()["inputs"] for r in dify.platform.requests_to("/v1/workflows/run")]
    assert inputs[0]["langbot_user_message_text"] == "one"
    assert inputs[0]["langbot_session_id"] == inputs[1]["langbot_session_id"] == session
    assert inputs[1]["langbot_conversation_id"].startswith("dify_conversation_")
    assert second.status == "completed" and second.state_updates == {}
    assert failed.code == "dify.api_error"
    assert [t["tool_name"] for t in first.of_type("tool.call.started")] == ["LLM"]  # start/end nodes skipped


async def test_a_legacy_dify_pipeline_migrates_starts_and_answers(tmp_path: Path, dify: DifyFake) -> None:
    legacy = {
        "ai": {
            "runner": {"runner": "dify-service-api", "expire-time": 0},
            "dify-service-api": {
                "base-url": dify.base_url,
                "api-key": SENTINEL_KEY,
                "app-type": "chat",
                "timeout": 30,
            },
        }
    }
    agent = migrate_legacy(legacy, MANIFEST)
    assert agent.runner_id == RUNNER_ID
    assert agent.runner_config["api-key"] == {"env": "DIFY_AGENT_API_KEY"}
    async with HostHarness.open(
        tmp_path, runner_id=agent.runner_id, runner_config=agent.runner_config, environ=agent.variables
    ) as host:
        reply = await host.send("hello from a legacy pipeline")
    assert reply.status == "completed", reply.run
    assert reply.text == "Hello there"
