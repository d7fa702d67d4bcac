"""Langflow bodies and stream events → reply text; the config's legacy names and its checks."""

from __future__ import annotations

import pytest
from agentrunner_http_kit import PlatformError
from agentrunner_runner_langflow import LangflowConfig
from agentrunner_runner_langflow.events import LangflowReply, message_text
from agentrunner_runner_langflow.runner import request_body
from langflow_fake import run_body


def test_the_text_is_found_in_each_documented_place() -> None:
    body = run_body("answer", "s-1", "question")
    assert message_text(body) == "answer"
    inner = body["outputs"][0]["outputs"][0]
    del inner["results"]
    assert message_text(body) == "answer"
    del inner["outputs"]
    assert message_text(body) == "answer"
    del inner["messages"]
    assert message_text(body) is None
    assert message_text({"outputs": []}) is None
    assert message_text("text") is None


def test_tokens_are_increments_and_the_end_result_does_not_repeat_them() -> None:
    reply = LangflowReply(session_id="mine")
    pieces = [
        reply.feed({"event": "add_message", "data": {"text": "question"}}),
        reply.feed({"event": "token", "data": {"chunk": "Hel"}}),
        reply.feed({"event": "token", "data": {"chunk": "lo"}}),
        reply.feed({"event": "token", "data": {"chunk": ""}}),
        reply.feed({"event": "end", "data": {"result": run_body("Hello", "theirs", "q")}}),
    ]
    assert pieces == ["", "Hel", "lo", "", ""]
    assert reply.text == "Hello"
    assert reply.finished
    assert reply.session_id == "theirs"
    assert reply.tokens == 2


def test_a_flow_without_tokens_answers_with_the_end_result() -> None:
    reply = LangflowReply()
    assert reply.feed({"event": "end", "data": {"result": run_body("whole", "s", "q")}}) == "whole"
    assert reply.text == "whole"


def test_error_events_fail_and_unknown_events_are_ignored() -> None:
    reply = LangflowReply()
    assert reply.feed({"event": "vertices_sorted", "data": {}}) == ""
    with pytest.raises(PlatformError, match="Langflow reported an error: Component OpenAI failed") as caught:
        reply.feed({"event": "error", "data": {"error": "Component OpenAI failed"}})
    assert caught.value.kind == "api_error"
    assert "Component OpenAI failed" in caught.value.message
    with pytest.raises(PlatformError, match="Langflow streamed something that is not a JSON object") as bad:
        reply.feed(["not", "an", "object"])
    assert bad.value.kind == "response_invalid"


def test_config_reads_legacy_names_and_refuses_bad_tweaks() -> None:
    config = LangflowConfig.from_mapping({"api-key": "k", "flow-id": "f", "tweaks": '{"Chat-1": {"x": 1}}'})
    assert config.base_url == "http://localhost:7860"
    assert config.tweaks == {"Chat-1": {"x": 1}}
    assert (config.input_type, config.output_type, config.timeout) == ("chat", "chat", 120.0)
    assert LangflowConfig.from_mapping({"api-key": "k", "flow-id": "f", "tweaks": {"a": {}}}).tweaks == {
        "a": {}
    }
    assert LangflowConfig.from_mapping({"api-key": "k", "flow-id": "f", "tweaks": " "}).tweaks == {}
    body = request_body(config, "hi", session_id="s")
    assert body == {
        "input_value": "hi",
        "input_type": "chat",
        "output_type": "chat",
        "session_id": "s",
        "tweaks": {"Chat-1": {"x": 1}},
    }
    for bad, field in [
        ({"flow-id": "f"}, "api-key"),
        ({"api-key": "k"}, "flow-id"),
        ({"api-key": "k", "flow-id": "f", "tweaks": "{nope"}, "tweaks"),
        ({"api-key": "k", "flow-id": "f", "tweaks": "[1]"}, "tweaks"),
        ({"api-key": "k", "flow-id": "f", "base-url": "localhost"}, "base-url"),
    ]:
        with pytest.raises(PlatformError, match=f"^config field '{field}' ") as caught:
            LangflowConfig.from_mapping(bad)
        assert caught.value.kind == "config_invalid"
        assert caught.value.details == {"field": field}
