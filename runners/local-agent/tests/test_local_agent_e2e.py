"""QA scenarios LA-01..LA-08 end to end: the real host (SQLite stores, OpenAI-compatible model provider) drives
the local agent in process and in its own plugin process, against the fake OpenAI server on loopback."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from agentrunner import (
    MessageCompletedResult,
    MessageDeltaResult,
    RunCompletedResult,
    RunFailedResult,
    ToolCallCompletedResult,
    ToolCallStartedResult,
)
from local_agent_e2e import SharedPlugin, Stack, StackOptions, load_fake_openai, open_stack

# One event loop for the module, so one plugin process serves every out-of-process test.
pytestmark = pytest.mark.asyncio(loop_scope="module")

FAKE = load_fake_openai()
MakeStack = Callable[..., Awaitable[Stack]]
_PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


@pytest.fixture(params=["in-process", "subprocess"])
def mode(request: pytest.FixtureRequest) -> str:
    """Where the runner runs: in the host's process, or in a plugin process speaking the wire protocol."""
    chosen: str = request.param
    return chosen


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def plugin_process() -> AsyncIterator[SharedPlugin]:
    """The local-agent plugin in its own process, shared by the module's out-of-process tests."""
    plugin = SharedPlugin.start()
    try:
        yield plugin
    finally:
        await plugin.aclose()


@pytest_asyncio.fixture(loop_scope="module")
async def server() -> AsyncIterator[Any]:
    """The shared fake OpenAI-compatible server on 127.0.0.1."""
    async with FAKE.FakeOpenAIServer() as fake:
        yield fake


@pytest_asyncio.fixture(loop_scope="module")
async def make_stack(
    tmp_path: Path, server: Any, mode: str, plugin_process: SharedPlugin
) -> AsyncIterator[MakeStack]:
    """Builds a host + runner stack with scenario options; closes it after the test."""
    async with contextlib.AsyncExitStack() as exits:

        async def make(
            *, tools: list[str] | None = None, timeout_seconds: float = 30.0, **config: Any
        ) -> Stack:
            options = StackOptions(config=config, timeout_seconds=timeout_seconds)
            if tools is not None:
                options.tools = tools
            plugin = plugin_process if mode == "subprocess" else None
            opened = open_stack(tmp_path, server, plugin=plugin, options=options)
            return await exits.enter_async_context(opened)

        yield make


def _final(results: list[Any]) -> str:
    [message] = [r for r in results if isinstance(r, MessageCompletedResult)]
    return message.data.message.text()


def _completed(results: list[Any]) -> RunCompletedResult:
    assert isinstance(results[-1], RunCompletedResult), results[-1]
    return results[-1]


def _failed(results: list[Any]) -> RunFailedResult:
    assert isinstance(results[-1], RunFailedResult), results[-1]
    return results[-1]


def _user_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in content if p["type"] == "text")


async def test_la01_the_reply_uses_the_bound_prompt_not_the_adapter_params(make_stack: MakeStack) -> None:
    """LA-01: the system prompt the model receives is the binding's prompt; an adapter 'prompt' param is ignored."""
    stack = await make_stack(
        prompt=[{"role": "system", "content": "You are Marvin. Sign every reply MARVIN."}]
    )
    stack.server.reply("Life. Don't talk to me about life. MARVIN")
    results, outcome = await stack.send("hello", params={"prompt": "ADAPTER PROMPT"})
    assert outcome.status == "completed"
    [body] = stack.requests()
    assert body["messages"][0] == {"role": "system", "content": "You are Marvin. Sign every reply MARVIN."}
    assert "ADAPTER PROMPT" not in str(body)
    assert _final(results).endswith("MARVIN")


async def test_la02_the_second_turn_reads_the_first_through_the_history_api(make_stack: MakeStack) -> None:
    """LA-02: turn two's model request carries turn one, pulled with history.page from the host's transcript."""
    stack = await make_stack()
    stack.server.reply("Noted the marker.")
    stack.server.reply("The marker was MARKER-42.")
    await stack.send("Remember MARKER-42 please.")
    results, outcome = await stack.send("Which marker did I give you?")
    assert outcome.status == "completed"
    second = stack.requests()[1]
    assert second["messages"][1:] == [
        {"role": "user", "content": "Remember MARKER-42 please."},
        {"role": "assistant", "content": "Noted the marker."},
        {"role": "user", "content": "Which marker did I give you?"},
    ]
    history = _completed(results).metadata["history"]
    assert isinstance(history, dict)
    assert history["items"] == 2


async def test_la03_streaming_sends_deltas_and_non_streaming_only_the_final_message(
    make_stack: MakeStack,
) -> None:
    """LA-03: a streaming surface gets deltas adding up to the message; a plain one gets the message alone."""
    stack = await make_stack()
    stack.server.reply("one two three four")
    stack.server.reply("five six")
    streamed, _ = await stack.send("stream please", streaming=True)
    plain, _ = await stack.send("no stream", streaming=False)
    deltas = "".join(r.data.chunk.content or "" for r in streamed if isinstance(r, MessageDeltaResult))
    assert deltas == _final(streamed) == "one two three four"
    assert not [r for r in plain if isinstance(r, MessageDeltaResult)]
    assert _final(plain) == "five six"
    first, second = stack.requests()
    assert first.get("stream") is True
    assert "stream" not in second


async def test_la04_a_tool_call_is_reported_and_its_result_reaches_the_answer(make_stack: MakeStack) -> None:
    """LA-04: only granted tools are offered; the call is started/completed and its result fed back."""
    stack = await make_stack()
    stack.server.reply(tool_calls=[FAKE.FakeToolCall("weather", {"city": "Oslo"}, id="call-w")])
    stack.server.reply("It is sunny and 21 degrees in Oslo.")
    results, outcome = await stack.send("Weather in Oslo?")
    assert outcome.status == "completed"
    first, second = stack.requests()
    assert [t["function"]["name"] for t in first["tools"]] == ["weather"]
    assert stack.tools.calls == [("weather", {"city": "Oslo"})]
    [started] = [r for r in results if isinstance(r, ToolCallStartedResult)]
    [completed] = [r for r in results if isinstance(r, ToolCallCompletedResult)]
    assert started.data.tool_call_id == completed.data.tool_call_id == "call-w"
    assert completed.data.error_code is None
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["tool_call_id"] == "call-w"
    assert '"sky":"sunny"' in tool_message["content"]
    assert "sunny" in _final(results)


async def test_multi_step_tool_calls_loop_until_the_model_answers(make_stack: MakeStack) -> None:
    """Two rounds of tool calls (one, then two in parallel) before the answer, each fed back."""
    stack = await make_stack()
    stack.server.reply(tool_calls=[FAKE.FakeToolCall("weather", {"city": "Oslo"})])
    stack.server.reply(
        tool_calls=[
            FAKE.FakeToolCall("weather", {"city": "Rome"}),
            FAKE.FakeToolCall("weather", {"city": "Lima"}),
        ]
    )
    stack.server.reply("Sunny in all three.")
    results, outcome = await stack.send("Compare Oslo, Rome and Lima.")
    assert outcome.status == "completed"
    assert [c[1]["city"] for c in stack.tools.calls] == ["Oslo", "Rome", "Lima"]
    assert len([r for r in results if isinstance(r, ToolCallCompletedResult)]) == 3
    last = stack.requests()[-1]["messages"]
    assert len([m for m in last if m["role"] == "tool"]) == 3
    assert _completed(results).metadata["tool_rounds"] == 2


async def test_a_tool_outside_the_run_grant_is_never_called(make_stack: MakeStack) -> None:
    """A tool the model asks for that the binding did not grant is not called: a failed tool call, then an answer."""
    stack = await make_stack(tools=["weather"])
    stack.server.reply(tool_calls=[FAKE.FakeToolCall("secret_admin", {})])
    stack.server.reply("I cannot do that.")
    results, outcome = await stack.send("Delete everything.")
    assert outcome.status == "completed"
    assert stack.tools.calls == []
    [completed] = [r for r in results if isinstance(r, ToolCallCompletedResult)]
    assert completed.data.error_code == "tool.not_granted"
    assert [t["function"]["name"] for t in stack.requests()[0]["tools"]] == ["weather"]
    assert "not available" in stack.requests()[1]["messages"][-1]["content"]


async def test_la05_knowledge_passages_reach_the_model(make_stack: MakeStack) -> None:
    """LA-05: the selected base is searched through the API and its passages are in the model's input."""
    stack = await make_stack(**{"knowledge-bases": ["kb-docs"]})
    stack.server.reply("It opens at 9:00.")
    results, outcome = await stack.send("When does the office open?")
    assert outcome.status == "completed"
    assert stack.knowledge.queries == [("kb-docs", "When does the office open?")]
    text = _user_text(stack.requests()[0])
    assert "[1] The office opens at 9:00" in text
    assert text.endswith("When does the office open?")
    retrieval = _completed(results).metadata["retrieval"]
    assert isinstance(retrieval, dict)
    assert retrieval["hits"] == 2


async def test_a_rerank_model_reorders_the_passages(make_stack: MakeStack) -> None:
    """The rerank model's order decides which passage comes first, and rerank-top-k how many are kept."""
    stack = await make_stack(
        **{"knowledge-bases": ["kb-docs"], "rerank-model": "reranker", "rerank-top-k": 1}
    )
    stack.server.queue_rerank([(1, 0.95), (0, 0.10)])
    stack.server.reply("Basement.")
    results, outcome = await stack.send("Where do I park?")
    assert outcome.status == "completed"
    [rerank] = [r.body for r in stack.server.requests if r.path.endswith("/rerank")]
    assert rerank["query"] == "Where do I park?"
    text = _user_text(stack.requests()[0])
    assert "[1] Parking is in the basement." in text
    assert "office opens" not in text
    retrieval = _completed(results).metadata["retrieval"]
    assert isinstance(retrieval, dict)
    assert retrieval["reranked"] is True


async def test_la06_an_image_input_reaches_a_vision_model_with_the_text(make_stack: MakeStack) -> None:
    """LA-06: the image stays in the input (as an artifact ref, sent by the host as image content)."""
    stack = await make_stack(**{"knowledge-bases": ["kb-docs"]})
    image = await stack.store_image(_PNG)
    stack.server.reply("A black square.")
    results, outcome = await stack.send(contents=[{"type": "text", "text": "What is this?"}, image])
    assert outcome.status == "completed"
    content = stack.requests()[0]["messages"][-1]["content"]
    assert [p["type"] for p in content] == ["text", "text", "image_url"]
    assert content[1]["text"] == "What is this?"
    assert content[2]["image_url"]["url"].startswith("data:image/png;base64,")
    assert _final(results) == "A black square."


async def test_la06_an_image_for_text_only_models_fails_in_a_controlled_way(make_stack: MakeStack) -> None:
    """LA-06: with no vision model configured the run fails with input.unsupported, and the next text works."""
    stack = await make_stack(model={"primary": "text-only", "fallbacks": []})
    image = await stack.store_image(_PNG)
    results, outcome = await stack.send(contents=[image])
    assert outcome.status == "failed"
    assert _failed(results).data.code == "input.unsupported"
    stack.server.reply("fine")
    _, after = await stack.send("just text")
    assert after.status == "completed"


async def test_la07_a_failing_primary_falls_back_and_the_next_request_works(make_stack: MakeStack) -> None:
    """LA-07: a 500 from the primary moves the run to the fallback; the next run starts on the primary again."""
    stack = await make_stack()
    stack.server.error(500, "primary exploded")
    stack.server.reply("answer from backup")
    results, outcome = await stack.send("hi", streaming=False)
    assert outcome.status == "completed"
    assert [b["model"] for b in stack.requests()] == ["fake-primary", "fake-backup"]
    meta = _completed(results).metadata
    assert meta["fallback_used"] is True
    assert meta["model_id"] == "backup"
    stack.server.reply("primary is back")
    again, after = await stack.send("hi again", streaming=False)
    assert after.status == "completed"
    assert stack.requests()[-1]["model"] == "fake-primary"
    assert _final(again) == "primary is back"


async def test_la07_when_every_model_fails_the_run_fails_and_the_next_one_works(
    make_stack: MakeStack,
) -> None:
    """LA-07: primary and fallback failing end in run.failed model.error; the conversation goes on afterwards."""
    stack = await make_stack()
    stack.server.error(500, "down")
    stack.server.error(503, "also down")
    results, outcome = await stack.send("hi")
    assert outcome.status == "failed"
    assert _failed(results).data.code == "model.error"
    stack.server.reply("recovered")
    again, after = await stack.send("hi again")
    assert after.status == "completed"
    assert _final(again) == "recovered"


async def test_la08_an_empty_answer_is_a_controlled_failure_not_a_blank_reply(make_stack: MakeStack) -> None:
    """LA-08: a model that returns nothing gives run.failed, no message, and no assistant turn in the transcript."""
    stack = await make_stack()
    stack.server.reply("")
    results, outcome = await stack.send("say nothing")
    assert outcome.status == "failed"
    assert _failed(results).data.code == "model.empty_output"
    assert not [r for r in results if isinstance(r, MessageCompletedResult)]
    stack.server.reply("Now I speak.")
    _, after = await stack.send("say something")
    assert after.status == "completed"
    # the failed turn left no assistant text behind: turn three sees the user message and nothing else for it
    assert stack.requests()[-1]["messages"][1:3] == [
        {"role": "user", "content": "say nothing"},
        {"role": "user", "content": "say something"},
    ]


async def test_long_history_is_compacted_into_a_summary_the_next_turn_reuses(make_stack: MakeStack) -> None:
    """Over the history budget the runner asks the model for a summary, keeps it in conversation state and sends
    it again on the next turn instead of the old turns."""
    stack = await make_stack(**{"history-token-budget": 120})
    long = "word " * 80
    stack.server.reply("first answer")
    await stack.send(f"first question {long}")
    stack.server.reply("second answer")
    await stack.send(f"second question {long}")
    stack.server.reply("SUMMARY: the user asked two long questions.")  # the compaction call
    stack.server.reply("third answer")
    results, outcome = await stack.send("third question")
    assert outcome.status == "completed"
    summarize, answer = stack.requests()[2:4]
    assert "running summary" in summarize["messages"][0]["content"]
    assert any("SUMMARY: the user asked" in str(m["content"]) for m in answer["messages"])
    history = _completed(results).metadata["history"]
    assert isinstance(history, dict)
    assert history["compacted"] is True
    stack.server.reply("fourth answer")
    await stack.send("fourth question")
    fourth = stack.requests()[-1]
    assert len(stack.requests()) == 5  # no second compaction
    assert any("SUMMARY: the user asked" in str(m["content"]) for m in fourth["messages"])
    assert "first question" not in str(fourth["messages"])


async def test_a_text_file_is_read_through_the_host_artifact_api_and_inlined(make_stack: MakeStack) -> None:
    """A text attachment's bytes come from the host's artifact store via artifacts.read_range into the prompt."""
    stack = await make_stack()
    notes = await stack.store_file(b"launch code: ORANGE-7\n", name="notes.txt", mime_type="text/plain")
    stack.server.reply("The code is ORANGE-7.")
    results, outcome = await stack.send(contents=[{"type": "text", "text": "What is the code?"}, notes])
    assert outcome.status == "completed"
    text = _user_text(stack.requests()[0])
    assert text == "What is the code?\n\n[file notes.txt]\nlaunch code: ORANGE-7\n"
    inputs = _completed(results).metadata["input"]
    assert inputs == {"images": 0, "files_inlined": 1, "notes": 0}


async def test_the_timeout_setting_ends_a_slow_run_and_the_next_request_works(make_stack: MakeStack) -> None:
    """timeout-seconds bounds the run: a model slower than that ends it with deadline_exceeded, promptly."""
    stack = await make_stack(**{"timeout-seconds": 1})
    # The model would answer after 60 s, and then the run would complete: failing deadline_exceeded shows that
    # the 1 s setting, not the model, ended it (no wall-clock bound: CI machines are busy).
    stack.server.reply("too late", delay=60)
    results, outcome = await stack.send("slow please", streaming=False)
    assert outcome.status == "failed"
    failed = _failed(results)
    assert failed.data.code == "deadline_exceeded"
    assert failed.data.retryable is True
    stack.server.reply("quick")
    again, after = await stack.send("fast please", streaming=False)
    assert after.status == "completed"
    assert _final(again) == "quick"


async def test_cancelling_a_run_in_flight_ends_it_as_cancelled(make_stack: MakeStack) -> None:
    """interrupt: the host cancels a run while the model is answering; it ends as cancelled, the next run works."""
    stack = await make_stack()
    stack.server.reply("never delivered", delay=10)
    handle = await stack.submit("long task")
    while not stack.requests():  # noqa: ASYNC110 - the fake model records the request; pytest-timeout guards
        await asyncio.sleep(0.01)
    assert await stack.host.orchestrator.cancel(handle.run_id)
    outcome = await handle.outcome()
    assert outcome.status == "failed"
    assert outcome.code == "cancelled"
    stack.server.reply("back to normal")
    again, after = await stack.send("next")
    assert after.status == "completed"
    assert _final(again) == "back to normal"
