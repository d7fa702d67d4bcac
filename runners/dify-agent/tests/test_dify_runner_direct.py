"""The Dify runner driven directly (a fake host from ``agentrunner.testing``) for what is awkward to set up
through the host: a stored id that is not Dify's, and ``remove-think`` on streamed deltas."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from agentrunner import AgentRunResult, MessageCompletedResult, MessageDeltaResult
from agentrunner.testing import FakeHost
from agentrunner_http_kit.testing import FakePlatform, run_context
from agentrunner_runner_dify import CONVERSATION_KEY, DifyRunner
from dify_fake import SENTINEL_KEY, DifyFake


@pytest.fixture
async def dify() -> AsyncIterator[DifyFake]:
    async with FakePlatform() as platform:
        yield DifyFake(platform)


async def _run(
    dify: DifyFake,
    *,
    config: dict[str, object] | None = None,
    streaming: bool = False,
    conversation_state: dict[str, object] | None = None,
) -> list[AgentRunResult]:
    full = {"base-url": dify.base_url, "api-key": SENTINEL_KEY, **(config or {})}
    ctx = run_context(config=full, streaming=streaming, conversation_state=conversation_state)
    return [r async for r in DifyRunner().run(ctx, FakeHost().api(ctx))]


async def test_a_stored_id_that_is_not_a_dify_uuid_is_not_sent(dify: DifyFake) -> None:
    results = await _run(dify, conversation_state={CONVERSATION_KEY: "host-conversation-7"})
    assert results[-1].type == "run.completed"
    assert dify.platform.requests_to("/v1/chat-messages")[0].json()["conversation_id"] == ""


async def test_remove_think_strips_thinking_from_deltas_and_the_message(dify: DifyFake) -> None:
    dify.pieces = ["<thi", "nk>pondering</th", "ink>Hel", "lo"]
    results = await _run(dify, streaming=True, config={"remove-think": True})
    deltas = [r.data.chunk.content for r in results if isinstance(r, MessageDeltaResult)]
    [message] = [r for r in results if isinstance(r, MessageCompletedResult)]
    assert "".join(d or "" for d in deltas) == "Hello"
    assert message.data.message.content == "Hello"
    kept = await _run(dify, streaming=True)
    [kept_message] = [r for r in kept if isinstance(r, MessageCompletedResult)]
    assert kept_message.data.message.content == "<think>pondering</think>Hello"


async def test_a_url_image_is_sent_as_remote_url(dify: DifyFake) -> None:
    ctx = run_context(
        config={"base-url": dify.base_url, "api-key": SENTINEL_KEY},
        text="what is it?",
        contents=[{"type": "image", "url": "https://images.example/cat.png"}],
    )
    results = [r async for r in DifyRunner().run(ctx, FakeHost().api(ctx))]
    assert results[-1].type == "run.completed"
    body = dify.platform.requests_to("/v1/chat-messages")[0].json()
    assert body["files"] == [
        {"type": "image", "transfer_method": "remote_url", "url": "https://images.example/cat.png"}
    ]
    assert dify.platform.requests_to("/v1/files/upload") == []
