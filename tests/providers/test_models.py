"""OpenAI-compatible model provider against the fake API on loopback (real HTTP)."""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agentrunner import (
    APIError,
    ArtifactRef,
    ChatMessage,
    ContentElement,
    ImageContent,
    InvalidArgumentError,
    ModelAuthFailedError,
    ModelStreamChunk,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    RuntimeAPIError,
    TextContent,
)
from agentrunner.actions import ModelInvokeParams, ModelRerankParams
from agentrunner.api_types import ModelToolCall
from agentrunner_host.access import ConversationKey, RunAccess
from agentrunner_host.providers.llm import ModelConfig, OpenAICompatibleModels
from agentrunner_host.stores import ArtifactOwner, HostStores
from agentrunner_host.stores.engine import create_engine, default_sqlite_url, upgrade
from fakes_openai import FakeOpenAIServer, FakeToolCall
from pydantic import ValidationError

KEY = "sk-test-secret-0123456789"
ENV = {"FAKE_OPENAI_KEY": KEY}
ACCESS = RunAccess(
    run_id="run-1",
    runner_id="plugin:test/fake/default",
    plugin_id="test/fake",
    binding_id="b-1",
    event_id="evt-1",
    conversation=ConversationKey("conv-1"),
)


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as fake:
        yield fake


def _models(server: FakeOpenAIServer, **overrides: Any) -> list[ModelConfig]:
    llm: dict[str, Any] = {
        "id": "gpt",
        "base_url": server.base_url,
        "model": "gpt-fake",
        "api_key_env": "FAKE_OPENAI_KEY",
        "capabilities": ["vision", "tool_calling", "streaming"],
        "context_window": 128000,
        "max_output_tokens": 4096,
        "extra_args": {"temperature": 0.2, "top_p": 0.9},
        "timeout_seconds": 5.0,
    }
    llm.update(overrides)
    return [
        ModelConfig(**llm),
        ModelConfig(id="rr", base_url=server.base_url, model="rerank-fake", model_type="rerank"),
    ]


@pytest.fixture
async def models(server: FakeOpenAIServer) -> AsyncIterator[OpenAICompatibleModels]:
    provider = OpenAICompatibleModels(_models(server), environ=ENV)
    yield provider
    await provider.aclose()


def _params(text: str = "hi", *, model_id: str = "gpt", **kwargs: Any) -> ModelInvokeParams:
    return ModelInvokeParams(model_id=model_id, messages=[ChatMessage(role="user", content=text)], **kwargs)


async def _collect(stream: AsyncIterator[ModelStreamChunk], into: list[ModelStreamChunk]) -> None:
    async for chunk in stream:
        into.append(chunk)


async def test_invoke_sends_the_configured_model_key_and_merged_args_and_maps_the_answer(
    server: FakeOpenAIServer, models: OpenAICompatibleModels
) -> None:
    """An invoke posts the provider's model name, the bearer key and extra args with per-call overrides winning."""
    server.reply("Hello there", usage={"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9})
    model = models.resources()[0]
    response = await models.invoke(model, _params(extra_args={"temperature": 0.9}), access=ACCESS)
    assert response.model_id == "gpt"
    assert response.message.role == "assistant" and response.message.content == "Hello there"
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (
        7,
        2,
        9,
    )
    request = server.requests[-1]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == "gpt-fake"
    assert request.body["temperature"] == 0.9 and request.body["top_p"] == 0.9
    assert request.body["messages"] == [{"role": "user", "content": "hi"}]
    assert "stream" not in request.body


async def test_the_catalog_entries_describe_each_model(models: OpenAICompatibleModels) -> None:
    """Resources carry the id, type, display name, capabilities and limits of each configured model."""
    gpt, rr = models.resources()
    assert (gpt.model_id, gpt.model_type, gpt.name, gpt.context_window, gpt.max_output_tokens) == (
        "gpt",
        "llm",
        "gpt-fake",
        128000,
        4096,
    )
    assert gpt.capabilities == ["vision", "tool_calling", "streaming"]
    assert (rr.model_id, rr.model_type) == ("rr", "rerank")


async def test_tool_calls_are_returned_with_parsed_arguments(
    server: FakeOpenAIServer, models: OpenAICompatibleModels
) -> None:
    """Tools go out as function schemas (bare schemas wrapped) and tool calls come back parsed."""
    server.reply(tool_calls=[FakeToolCall("search", {"q": "weather", "n": 3}, id="call_9")])
    tools = [{"name": "search", "description": "Search", "parameters": {"type": "object"}}]
    response = await models.invoke(models.resources()[0], _params(tools=tools), access=ACCESS)
    assert response.finish_reason == "tool_calls"
    assert response.message.tool_calls == [
        ModelToolCall(id="call_9", name="search", arguments={"q": "weather", "n": 3})
    ]
    assert server.requests[-1].body["tools"] == [{"type": "function", "function": tools[0]}]


async def test_assistant_tool_calls_and_tool_answers_are_sent_in_openai_shape(
    server: FakeOpenAIServer, models: OpenAICompatibleModels
) -> None:
    """A conversation with a tool round trip is sent with JSON-string arguments and tool_call_id."""
    server.reply("done")
    messages = [
        ChatMessage(role="user", content="q"),
        ChatMessage(
            role="assistant", tool_calls=[ModelToolCall(id="c1", name="search", arguments={"q": "x"})]
        ),
        ChatMessage(role="tool", tool_call_id="c1", name="search", content="result"),
    ]
    await models.invoke(
        models.resources()[0], ModelInvokeParams(model_id="gpt", messages=messages), access=ACCESS
    )
    sent = server.requests[-1].body["messages"]
    assert sent[1]["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q":"x"}'}}
    ]
    assert sent[2] == {"role": "tool", "content": "result", "tool_call_id": "c1", "name": "search"}


async def test_a_stream_yields_text_deltas_then_assembled_tool_calls_finish_and_usage(
    server: FakeOpenAIServer, models: OpenAICompatibleModels
) -> None:
    """Streamed text arrives in deltas; tool-call fragments are assembled and arrive whole in the last chunk."""
    server.reply(
        "let me look",
        tool_calls=[FakeToolCall("search", {"query": "a long query text"}), FakeToolCall("clock", {})],
    )
    chunks: list[ModelStreamChunk] = [
        c async for c in models.stream(models.resources()[0], _params(), access=ACCESS)
    ]
    assert "".join(c.delta or "" for c in chunks) == "let me look"
    assert len([c for c in chunks if c.delta]) == 3
    assert all(not c.tool_calls for c in chunks[:-1])
    last = chunks[-1]
    assert [(t.name, t.arguments) for t in last.tool_calls] == [
        ("search", {"query": "a long query text"}),
        ("clock", {}),
    ]
    assert all(t.id.startswith("call_") for t in last.tool_calls)
    assert last.finish_reason == "tool_calls"
    assert last.usage is not None and last.usage.output_tokens == 3
    body = server.requests[-1].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_a_model_without_streaming_is_streamed_as_one_chunk(server: FakeOpenAIServer) -> None:
    """A model configured without the streaming capability answers a stream with one complete chunk."""
    provider = OpenAICompatibleModels(_models(server, capabilities=[]), environ=ENV)
    try:
        server.reply("whole answer")
        chunks = [c async for c in provider.stream(provider.resources()[0], _params(), access=ACCESS)]
    finally:
        await provider.aclose()
    assert [(c.delta, c.finish_reason) for c in chunks] == [("whole answer", "stop")]
    assert "stream" not in server.requests[-1].body


STATUS_ERRORS: list[tuple[int, type[APIError], bool]] = [
    (400, InvalidArgumentError, False),
    (401, ModelAuthFailedError, False),
    (403, ModelAuthFailedError, False),
    (404, NotFoundError, False),
    (408, RuntimeAPIError, True),
    (409, RuntimeAPIError, True),
    (413, PayloadTooLargeError, False),
    (422, InvalidArgumentError, False),
    (429, RateLimitedError, True),
    (500, RuntimeAPIError, True),
    (503, RuntimeAPIError, True),
]


def test_the_providers_doc_table_is_the_mapping_tested_here() -> None:
    """docs/providers.md's "upstream failure | error code" table names, per status, the code tested below."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "providers.md").read_text(encoding="utf-8")
    table = doc[doc.index("| upstream failure | error code |") :].split("\n\n", 1)[0]
    documented: dict[int, str] = {}
    for row in table.splitlines()[2:]:
        failure, code = (cell.strip() for cell in row.strip().strip("|").split("|")[:2])
        name = re.search(r"`([a-z_.]+)`", code)
        assert name is not None, row
        for status in re.findall(r"\b(\d{3}|5xx)\b", failure):
            for number in (500, 503) if status == "5xx" else (int(status),):
                documented[number] = name.group(1)
    assert documented == {status: error("x").code for status, error, _ in STATUS_ERRORS}


@pytest.mark.parametrize(("status", "error", "retryable"), STATUS_ERRORS)
async def test_provider_errors_map_to_protocol_codes(
    server: FakeOpenAIServer,
    models: OpenAICompatibleModels,
    status: int,
    error: type[APIError],
    retryable: bool,
) -> None:
    """Upstream HTTP statuses become the protocol's error classes, retryable where a retry can help."""
    server.error(status, "upstream said no", headers={"retry-after": "2"})
    with pytest.raises(error, match=f"provider answered {status}: upstream said no") as caught:
        await models.invoke(models.resources()[0], _params(), access=ACCESS)
    exc: Any = caught.value
    assert exc.retryable is retryable
    assert "upstream said no" in exc.message and str(status) in exc.message
    assert exc.details["status"] == status and exc.details["retry_after"] == 2.0


async def test_errors_in_a_stream_map_to_protocol_codes(
    server: FakeOpenAIServer, models: OpenAICompatibleModels
) -> None:
    """A streamed call answered 429 raises rate_limited before any chunk."""
    server.error(429, "too many")
    seen: list[ModelStreamChunk] = []
    with pytest.raises(RateLimitedError, match="model 'gpt': provider answered 429: too many"):
        await _collect(models.stream(models.resources()[0], _params(), access=ACCESS), seen)
    assert seen == []


async def test_the_api_key_never_appears_in_errors_or_logs(
    server: FakeOpenAIServer, models: OpenAICompatibleModels, caplog: pytest.LogCaptureFixture
) -> None:
    """An upstream message echoing the key is scrubbed before it reaches the runner or the log."""
    caplog.set_level(logging.DEBUG)
    server.error(401, f"Incorrect API key provided: {KEY}")
    with pytest.raises(
        ModelAuthFailedError, match=r"model 'gpt': provider answered 401: Incorrect API key provided: \*\*\*"
    ) as caught:
        await models.invoke(models.resources()[0], _params(), access=ACCESS)
    assert KEY not in caught.value.message and "***" in caught.value.message
    assert KEY not in caplog.text


async def test_a_slow_provider_times_out_as_a_retryable_runtime_error(server: FakeOpenAIServer) -> None:
    """A provider slower than the configured timeout fails with a retryable runtime_error."""
    provider = OpenAICompatibleModels(_models(server, timeout_seconds=0.2), environ=ENV)
    server.reply("late", delay=3.0)
    try:
        with pytest.raises(RuntimeAPIError, match="model 'gpt' timed out") as caught:
            await provider.invoke(provider.resources()[0], _params(), access=ACCESS)
    finally:
        await provider.aclose()
    assert caught.value.retryable and "timed out" in caught.value.message


async def test_a_stalled_stream_times_out_between_chunks(server: FakeOpenAIServer) -> None:
    """The timeout applies to each read of a stream, so a stalled stream fails after the first chunks."""
    provider = OpenAICompatibleModels(_models(server, timeout_seconds=0.3), environ=ENV)
    server.reply("one two three", chunk_delay=2.0)
    seen: list[ModelStreamChunk] = []
    try:
        with pytest.raises(RuntimeAPIError, match="model 'gpt' timed out") as caught:
            await _collect(provider.stream(provider.resources()[0], _params(), access=ACCESS), seen)
    finally:
        await provider.aclose()
    assert caught.value.retryable
    assert [c.delta for c in seen] == []


async def test_an_unreachable_provider_is_a_retryable_runtime_error() -> None:
    """A refused connection is a retryable runtime_error naming the model, not a crash."""
    provider = OpenAICompatibleModels(
        [ModelConfig(id="gone", base_url="http://127.0.0.1:9/v1", model="m", timeout_seconds=2)]
    )
    try:
        with pytest.raises(RuntimeAPIError, match=r"model 'gone' is unreachable \(ConnectError\)") as caught:
            await provider.invoke(provider.resources()[0], _params(model_id="gone"), access=ACCESS)
    finally:
        await provider.aclose()
    assert caught.value.retryable and "'gone'" in caught.value.message


async def test_a_missing_api_key_variable_is_named_without_a_request(server: FakeOpenAIServer) -> None:
    """When the key's environment variable is unset the call fails naming the variable; nothing is sent."""
    provider = OpenAICompatibleModels(_models(server), environ={})
    try:
        with pytest.raises(RuntimeAPIError, match="FAKE_OPENAI_KEY"):
            await provider.invoke(provider.resources()[0], _params(), access=ACCESS)
    finally:
        await provider.aclose()
    assert server.requests == []


async def test_reserved_request_keys_cannot_be_overridden(
    server: FakeOpenAIServer, models: OpenAICompatibleModels
) -> None:
    """A runner's extra_args may not switch the configured model; the config may not either."""
    with pytest.raises(InvalidArgumentError, match="model"):
        await models.invoke(
            models.resources()[0], _params(extra_args={"model": "gpt-expensive"}), access=ACCESS
        )
    with pytest.raises(ValidationError, match="Value error, extra_args may not set stream"):
        ModelConfig(id="x", base_url=server.base_url, model="m", extra_args={"stream": True})
    assert server.requests == []


async def test_capabilities_gate_images_and_tools(server: FakeOpenAIServer) -> None:
    """Images need the vision capability and tools need tool_calling: otherwise invalid_argument."""
    provider = OpenAICompatibleModels(_models(server, capabilities=["streaming"]), environ=ENV)
    image = ChatMessage(role="user", content=[ImageContent(url="https://example.com/cat.png")])
    try:
        with pytest.raises(InvalidArgumentError, match="images"):
            await provider.invoke(
                provider.resources()[0], ModelInvokeParams(model_id="gpt", messages=[image]), access=ACCESS
            )
        with pytest.raises(InvalidArgumentError, match="tool calling"):
            await provider.invoke(provider.resources()[0], _params(tools=[{"name": "t"}]), access=ACCESS)
    finally:
        await provider.aclose()
    assert server.requests == []


async def test_a_rerank_model_cannot_chat_and_a_chat_model_cannot_rerank(
    models: OpenAICompatibleModels,
) -> None:
    """Operations are checked against the configured model type."""
    gpt, rr = models.resources()
    with pytest.raises(InvalidArgumentError, match="rerank model"):
        await models.invoke(rr, _params(model_id="rr"), access=ACCESS)
    with pytest.raises(InvalidArgumentError, match="chat model"):
        await models.rerank(gpt, ModelRerankParams(model_id="gpt", query="q", documents=["a"]), access=ACCESS)


async def test_url_images_pass_through_and_artifact_images_become_data_urls_on_the_wire(
    server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """An http(s) image is sent as is; an artifact image the run may read is sent as a base64 data URL."""
    engine = create_engine(default_sqlite_url(tmp_path))
    await upgrade(engine)
    stores = await HostStores.open(engine, data_dir=tmp_path)
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
    own = await stores.artifacts.put(
        png,
        mime_type="image/png",
        name="a.png",
        artifact_type="image",
        source="platform",
        owner=ArtifactOwner(conversation_id="conv-1"),
    )
    foreign = await stores.artifacts.put(
        png,
        mime_type="image/png",
        name="b.png",
        artifact_type="image",
        source="platform",
        owner=ArtifactOwner(conversation_id="conv-2"),
    )
    provider = OpenAICompatibleModels(_models(server), environ=ENV, artifacts=stores.artifacts)
    try:
        server.reply("a cat")
        content: list[ContentElement] = [
            TextContent(text="what is this?"),
            ImageContent(url="https://example.com/cat.png"),
            ImageContent(artifact=ArtifactRef(artifact_id=own.artifact_id)),
        ]
        message = ChatMessage(role="user", content=content)
        await provider.invoke(
            provider.resources()[0], ModelInvokeParams(model_id="gpt", messages=[message]), access=ACCESS
        )
        other = ChatMessage(
            role="user", content=[ImageContent(artifact=ArtifactRef(artifact_id=foreign.artifact_id))]
        )
        with pytest.raises(NotFoundError, match="artifact not found"):
            await provider.invoke(
                provider.resources()[0], ModelInvokeParams(model_id="gpt", messages=[other]), access=ACCESS
            )
    finally:
        await provider.aclose()
        await stores.aclose()
        await engine.dispose()
    parts = server.requests[0].body["messages"][0]["content"]
    assert parts[0] == {"type": "text", "text": "what is this?"}
    assert parts[1] == {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    assert parts[2]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(png).decode()
    assert len(server.requests) == 1


async def test_rerank_posts_the_jina_shape_and_returns_documents_best_first(
    server: FakeOpenAIServer, models: OpenAICompatibleModels
) -> None:
    """Rerank sends model/query/documents/top_n and maps index + relevance_score back to the documents."""
    server.queue_rerank([(2, 0.1), (0, 0.9)])
    rr = models.resources()[1]
    result = await models.rerank(
        rr,
        ModelRerankParams(model_id="rr", query="cats", documents=["cats", "dogs", "birds"], top_k=2),
        access=ACCESS,
    )
    assert [(r.index, r.score, r.document) for r in result.results] == [(0, 0.9, "cats"), (2, 0.1, "birds")]
    assert server.requests[-1].path == "/v1/rerank"
    assert server.requests[-1].body == {
        "model": "rerank-fake",
        "query": "cats",
        "documents": ["cats", "dogs", "birds"],
        "top_n": 2,
    }
    assert "authorization" not in server.requests[-1].headers


async def test_rerank_rejects_an_out_of_range_index_from_the_provider(
    server: FakeOpenAIServer, models: OpenAICompatibleModels
) -> None:
    """A provider answer pointing outside the documents is a runtime_error, not an IndexError."""
    server.queue_rerank([(5, 0.5)])
    with pytest.raises(RuntimeAPIError, match="index"):
        await models.rerank(
            models.resources()[1], ModelRerankParams(model_id="rr", query="q", documents=["a"]), access=ACCESS
        )


async def test_malformed_tool_call_arguments_are_a_retryable_runtime_error(
    server: FakeOpenAIServer, models: OpenAICompatibleModels
) -> None:
    """Arguments that are not a JSON object are refused rather than passed on half-parsed."""
    server.reply(
        raw={
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{not json"}}],
                    },
                    "finish_reason": "tool_calls",
                }
            ]
        }
    )
    with pytest.raises(
        RuntimeAPIError, match="model 'gpt' returned tool-call arguments that are not a JSON object"
    ) as caught:
        await models.invoke(models.resources()[0], _params(), access=ACCESS)
    assert caught.value.retryable


async def test_a_stream_cut_off_before_its_end_is_a_retryable_error(
    server: FakeOpenAIServer, models: OpenAICompatibleModels
) -> None:
    """A stream that ends with neither a finish reason nor ``[DONE]`` is not passed off as a complete answer."""
    server.reply("one two three", truncate_after=2)
    seen: list[ModelStreamChunk] = []
    with pytest.raises(RuntimeAPIError, match="before the answer was complete") as caught:
        await _collect(models.stream(models.resources()[0], _params(), access=ACCESS), seen)
    assert caught.value.retryable
    assert [c.delta for c in seen] == ["one", " two"]


async def test_a_server_ignoring_stream_is_answered_as_one_chunk(
    server: FakeOpenAIServer, models: OpenAICompatibleModels
) -> None:
    """A plain JSON answer to a streaming request becomes one complete chunk, tool calls included."""
    server.reply("whole", tool_calls=[FakeToolCall("clock", {}, id="c1")], ignore_stream=True)
    chunks: list[ModelStreamChunk] = []
    await _collect(models.stream(models.resources()[0], _params(), access=ACCESS), chunks)
    assert len(chunks) == 1
    assert chunks[0].delta == "whole" and chunks[0].finish_reason == "tool_calls"
    assert chunks[0].tool_calls == [ModelToolCall(id="c1", name="clock", arguments={})]


async def test_model_configs_are_validated(server: FakeOpenAIServer) -> None:
    """Base URLs must be http(s) (a trailing slash is dropped) and model ids unique."""
    with pytest.raises(ValidationError, match=r"Value error, base_url must be an http\(s\) URL"):
        ModelConfig(id="x", base_url="file:///etc/passwd", model="m")
    assert ModelConfig(id="x", base_url=server.base_url + "/", model="m").base_url == server.base_url
    twice = [ModelConfig(id="x", base_url=server.base_url, model="m")] * 2
    with pytest.raises(ValueError, match="twice"):
        OpenAICompatibleModels(twice)


async def test_the_key_header_can_be_configured_for_azure_style_apis(server: FakeOpenAIServer) -> None:
    """``api_key_header`` / ``api_key_prefix`` send the key as e.g. ``api-key: <key>`` instead of a bearer token."""
    provider = OpenAICompatibleModels(
        _models(server, api_key_header="api-key", api_key_prefix=""), environ=ENV
    )
    try:
        await provider.invoke(provider.resources()[0], _params(), access=ACCESS)
    finally:
        await provider.aclose()
    headers = server.requests[-1].headers
    assert headers["api-key"] == KEY and "authorization" not in headers
