"""DashScope frames → reply text: increments, thoughts, references across frame borders, usage, errors."""

from __future__ import annotations

from typing import Any

import pytest
from agentrunner import RunFailedResult
from agentrunner.testing import FakeHost
from agentrunner_http_kit import PlatformError
from agentrunner_http_kit.testing import run_context
from agentrunner_runner_dashscope import DashScopeRunner
from agentrunner_runner_dashscope.config import DEFAULT_BASE_URL, DashScopeConfig
from agentrunner_runner_dashscope.events import DashScopeReply, error_from_body


def _frame(text: str | None = None, *, finish: str = "null", **output: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"session_id": "sess-1", "finish_reason": finish, **output}
    if text is not None:
        out["text"] = text
    return {
        "output": out,
        "usage": {"models": [{"model_id": "qwen-plus", "input_tokens": 7, "output_tokens": 3}]},
        "request_id": "req-1",
    }


def _feed(reply: DashScopeReply, frames: list[dict[str, Any]]) -> list[str]:
    pieces = [reply.feed(f) for f in frames]
    pieces.append(reply.finish())
    return [p for p in pieces if p]


def test_agent_increments_are_sent_as_they_come_and_add_up_to_the_text() -> None:
    reply = DashScopeReply("agent")
    pieces = _feed(reply, [_frame("Hel"), _frame("lo "), _frame("world", finish="stop")])
    assert pieces == ["Hel", "lo ", "world"]
    assert reply.text == "Hello world"
    assert reply.finished
    assert reply.session_id == "sess-1"
    assert reply.request_id == "req-1"
    assert reply.usage() == {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}


def test_thoughts_become_one_think_block_before_the_answer() -> None:
    reply = DashScopeReply("agent")
    frames = [
        _frame(thoughts=[{"thought": "The user "}]),
        _frame(thoughts=[{"thought": "greets."}]),
        _frame("Hi!", thoughts=[{"thought": ""}], finish="stop"),
    ]
    pieces = _feed(reply, frames)
    assert reply.text == "<think>\nThe user greets.\n</think>\nHi!"
    assert "".join(pieces) == reply.text


def test_a_think_block_left_open_is_closed_at_the_end() -> None:
    reply = DashScopeReply("agent")
    _feed(reply, [_frame(thoughts=[{"thought": "hmm"}])])
    assert reply.text == "<think>\nhmm\n</think>\n"


def test_a_reference_cut_by_a_frame_border_is_rewritten_and_held_until_whole() -> None:
    reply = DashScopeReply("agent", references_quote="Source:")
    refs = [{"index_id": "1", "doc_name": "Manual.pdf", "title": "Manual"}]
    first = reply.feed(_frame("See <re"))
    second = reply.feed(_frame("f>[1]</r"))
    third = reply.feed(_frame("ef> for more.", doc_references=refs, finish="stop"))
    assert (first, second) == ("See ", "")
    assert third == "(Source: Manual.pdf) for more."
    assert reply.finish() == ""
    assert reply.text == "See (Source: Manual.pdf) for more."


def test_a_reference_before_its_document_list_waits_for_it() -> None:
    reply = DashScopeReply("workflow")
    message = {"node_id": "End", "message": {"role": "assistant", "content": "Yes<ref>[7]</ref>, indeed."}}
    held = reply.feed(_frame(workflow_message=message))
    assert held == "Yes"
    done = reply.feed(_frame(doc_references=[{"index_id": "7", "doc_name": "FAQ"}], finish="stop"))
    assert done == "(参考资料来自: FAQ), indeed."
    assert reply.text == "Yes(参考资料来自: FAQ), indeed."


def test_an_unknown_reference_is_kept_as_it_is_at_the_end() -> None:
    reply = DashScopeReply("agent")
    pieces = _feed(reply, [_frame("a<ref>[9]</ref>b", finish="stop")])
    assert "".join(pieces) == reply.text == "a<ref>[9]</ref>b"


def test_plain_angle_brackets_are_not_held_back() -> None:
    reply = DashScopeReply("agent")
    assert reply.feed(_frame("1 < 2 and <b>bold</b>")) == "1 < 2 and <b>bold</b>"


def test_workflow_text_comes_from_message_format_nodes_only() -> None:
    reply = DashScopeReply("workflow")
    node = {"node_id": "LLM_1", "node_status": "executing", "message": {"role": "assistant", "content": "Wo"}}
    node2 = {**node, "message": {"role": "assistant", "content": "rk"}}
    pieces = _feed(reply, [_frame(workflow_message=node), _frame("ignored", workflow_message=node2)])
    assert pieces == ["Wo", "rk"]
    assert reply.text == "Work"


def test_a_workflow_without_message_nodes_falls_back_to_the_text_field() -> None:
    reply = DashScopeReply("workflow")
    pieces = _feed(reply, [_frame("final answer", finish="stop")])
    assert pieces == ["final answer"]


def test_an_error_body_raises_with_code_and_request_id() -> None:
    reply = DashScopeReply("agent")
    with pytest.raises(PlatformError, match="DashScope reported InternalError: boom") as caught:
        reply.feed({"code": "InternalError", "message": "boom", "request_id": "r-9"})
    assert caught.value.kind == "api_error"
    assert caught.value.details == {"platform_code": "InternalError", "request_id": "r-9"}
    auth = error_from_body({"code": "InvalidApiKey", "message": "Invalid API-key provided."}, status=401)
    assert auth is not None
    assert auth.kind == "auth_error"
    assert auth.details["status"] == 401
    busy = error_from_body({"code": "Throttling", "message": "slow down"}, status=429)
    assert busy is not None
    assert busy.kind == "http_error"
    assert busy.retryable
    assert error_from_body({"output": {"text": "x"}}) is None
    assert error_from_body("nope") is None


def test_frames_that_are_not_objects_are_ignored() -> None:
    reply = DashScopeReply("agent")
    assert reply.feed(["x"]) == ""
    assert reply.feed({"request_id": "r"}) == ""
    assert reply.usage() == {}


def test_config_reads_legacy_names_and_names_the_bad_field() -> None:
    config = DashScopeConfig.from_mapping({"api-key": "k", "app-id": "a"})
    assert (config.app_type, config.base_url, config.timeout) == ("agent", DEFAULT_BASE_URL, 120.0)
    both = DashScopeConfig.from_mapping(
        {"api-key": "k", "app-id": "a", "references-quote": "hy", "references_quote": "under"}
    )
    assert both.references_quote == "under"
    hyphen = DashScopeConfig.from_mapping({"api-key": "k", "app-id": "a", "references-quote": "Refs:"})
    assert hyphen.references_quote == "Refs:"
    intl = DashScopeConfig.from_mapping(
        {
            "api-key": "k",
            "app-id": "a",
            "base-url": "https://dashscope-intl.aliyuncs.com/api/v1/",
            "timeout": "5",
        }
    )
    assert intl.base_url.endswith("intl.aliyuncs.com/api/v1")
    assert intl.timeout == 5.0
    for bad, field in [
        ({"app-id": "a"}, "api-key"),
        ({"api-key": "k"}, "app-id"),
        ({"api-key": "k", "app-id": "a", "app-type": "chat"}, "app-type"),
        ({"api-key": "k", "app-id": "a", "timeout": 0}, "timeout"),
        ({"api-key": "k", "app-id": "a", "base-url": "ftp://x"}, "base-url"),
        ({"api-key": 5, "app-id": "a"}, "api-key"),
    ]:
        with pytest.raises(PlatformError, match=f"^config field '{field}' ") as caught:
            DashScopeConfig.from_mapping(bad)
        assert caught.value.kind == "config_invalid"
        assert caught.value.details == {"field": field}
        assert field in caught.value.message


async def test_a_message_without_text_fails_input_error_before_any_request() -> None:
    """The application API takes a text prompt; nothing is sent without one."""
    config = {"api-key": "sk-12345678", "app-id": "a", "base-url": "http://127.0.0.1:9/api/v1"}
    ctx = run_context(config=config, text="  ")
    [failed] = [r async for r in DashScopeRunner().run(ctx, FakeHost().api(ctx))]
    assert isinstance(failed, RunFailedResult)
    assert failed.data.code == "dashscope.input_error"
