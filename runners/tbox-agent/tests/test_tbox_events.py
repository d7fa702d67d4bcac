"""Tbox frames and bodies → reply text: payloads as JSON strings, thinking, errors; the config's checks."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest
from agentrunner import RunFailedResult
from agentrunner.testing import FakeHost
from agentrunner_http_kit import PlatformError
from agentrunner_http_kit.testing import run_context
from agentrunner_runner_tbox import TboxConfig, TboxRunner
from agentrunner_runner_tbox.events import TboxReply, error_from_body
from agentrunner_runner_tbox.runner import request_body
from pydantic import JsonValue


def _message(kind: str, payload: Mapping[str, object]) -> str:
    return json.dumps({"type": kind, "lane": "default", "payload": json.dumps(payload)})  # noqa: TID251


def test_chunks_are_increments_and_the_first_names_the_conversation() -> None:
    reply = TboxReply()
    pieces = [
        reply.feed("message", _message("header", {"mediaType": "text"})),
        reply.feed("message", _message("chunk", {"conversationId": "c-1", "messageId": "m", "text": "Hel"})),
        reply.feed("message", _message("chunk", {"conversationId": "c-2", "messageId": "m", "text": "lo"})),
        reply.feed("message", _message("end", {})),
    ]
    assert pieces == ["", "Hel", "lo", ""]
    assert reply.text == "Hello"
    assert reply.conversation_id == "c-1"
    assert reply.finished


def test_thinking_frames_become_one_think_block_before_the_answer() -> None:
    reply = TboxReply()
    think = {"ext_data": {"text": "pondering"}, "event": "flow.node.llm.thinking"}
    pieces = [
        reply.feed("message", _message("thinking", think)),
        reply.feed("message", _message("thinking", {"ext_data": {"text": " more"}})),
        reply.feed("message", _message("chunk", {"conversationId": "c", "text": "Answer"})),
    ]
    assert reply.text == "<think>\npondering more\n</think>\nAnswer"
    assert "".join(pieces) == reply.text


def test_error_frames_and_events_fail_and_other_frames_are_ignored() -> None:
    reply = TboxReply()
    for kind in ("meta", "followup", "charge", "revoke", "unknown", "sparkle"):
        assert reply.feed("message", _message(kind, {})) == ""
    assert reply.feed("ping", "{}") == ""
    with pytest.raises(PlatformError, match="Tbox reported an error: quota exhausted") as event:
        reply.feed("error", json.dumps({"description": "quota exhausted"}))  # noqa: TID251
    assert event.value.kind == "api_error"
    assert "quota exhausted" in event.value.message
    with pytest.raises(PlatformError, match="Tbox reported an error: node failed") as frame:
        reply.feed("message", _message("error", {"errorCode": "E1", "errorMsg": "node failed"}))
    assert frame.value.details == {"platform_code": "E1"}
    with pytest.raises(PlatformError, match="Tbox sent a frame that is not JSON") as broken:
        reply.feed("message", "{not json")
    assert broken.value.kind == "response_invalid"


def test_the_non_streamed_body_gives_reasoning_then_the_answer() -> None:
    reply = TboxReply()
    body = {
        "errorCode": "0",
        "errorMsg": "success",
        "data": {
            "conversationId": "c-9",
            "result": [{"chunk": "Done"}],
            "reasoningContent": [{"text": "why"}],
        },
    }
    assert reply.body(body) == "<think>\nwhy\n</think>\nDone"
    assert reply.conversation_id == "c-9"
    failed = error_from_body({"errorCode": "APP_OFFLINE", "errorMsg": "app is offline", "traceId": "t"})
    assert failed is not None
    assert failed.details == {"platform_code": "APP_OFFLINE", "trace_id": "t"}
    assert error_from_body({"errorCode": "0", "data": {}}) is None
    with pytest.raises(PlatformError, match="Tbox reported an error: no"):
        TboxReply().body({"errorCode": "E", "errorMsg": "no"})


def test_config_and_request_body() -> None:
    config = TboxConfig.from_mapping({"api-key": "tok", "app-id": "a"})
    assert (config.base_url, config.timeout) == ("https://api.tbox.cn", 120.0)
    files: list[dict[str, JsonValue]] = [{"fileId": "f", "type": "IMAGE"}]
    assert request_body(config, "q", user="user_u", conversation_id="c", files=files, stream=True) == {
        "appId": "a",
        "query": "q",
        "stream": True,
        "userId": "user_u",
        "searchEngine": False,
        "conversationId": "c",
        "files": files,
    }
    for bad, name in [({"app-id": "a"}, "api-key"), ({"api-key": "t"}, "app-id")]:
        with pytest.raises(PlatformError, match=f"^config field '{name}' is required") as caught:
            TboxConfig.from_mapping(bad)
        assert caught.value.kind == "config_invalid"
        assert caught.value.details == {"field": name}


async def test_an_image_given_only_as_a_url_fails_input_error_before_the_chat_call() -> None:
    """Tbox takes uploaded files only: a URL input is refused, never dropped (no request is made)."""
    image = {"type": "image", "url": "https://example.com/cat.png", "mime_type": "image/png"}
    config = {"api-key": "tok-1234", "app-id": "a", "base-url": "http://127.0.0.1:9"}
    ctx = run_context(config=config, text="what is it?", contents=[image])
    results = [r async for r in TboxRunner().run(ctx, FakeHost().api(ctx))]
    [failed] = results
    assert isinstance(failed, RunFailedResult)
    assert failed.data.code == "tbox.input_error"
    assert "URL" in failed.data.message
