"""The local agent against a scripted host (a fake ``APITransport``): one test per rule of the runner."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from agentrunner import (
    AgentRunAPI,
    MessageCompletedResult,
    MessageDeltaResult,
    RateLimitedError,
    RunCompletedResult,
    RunFailedResult,
    RuntimeAPIError,
    ToolCallCompletedResult,
    ToolCallStartedResult,
    UnauthorizedError,
)
from agentrunner_runner_local_agent import SUMMARY_KEY, LocalAgentRunner
from local_agent_fakes import FakeHost, FakeReply, call, drive, item, make_ctx, model, only


def _completed(results: list[Any]) -> RunCompletedResult:
    [done] = only(results, RunCompletedResult)
    assert results[-1] is done
    return done


def _failed(results: list[Any]) -> RunFailedResult:
    [failed] = only(results, RunFailedResult)
    assert results[-1] is failed
    return failed


def _text(results: list[Any]) -> str:
    [message] = only(results, MessageCompletedResult)
    return message.data.message.text()


# -- LA-01: the bound prompt -----------------------------------------------------------------------------------


async def test_the_bound_prompt_comes_from_config_never_from_adapter_extra() -> None:
    """LA-01: ctx.config.prompt leads the model's messages; a prompt in ctx.adapter.extra is ignored."""
    host = FakeHost()
    host.script("m1", "Ahoy!")
    ctx = make_ctx(
        "hi",
        models=[model("m1")],
        config={"prompt": [{"role": "system", "content": "You are a pirate."}]},
        adapter_extra={"prompt": [{"role": "system", "content": "ADAPTER PROMPT"}]},
    )
    results = await drive(host, ctx)
    [sent] = host.model_calls()
    assert sent["messages"][0] == {"role": "system", "content": "You are a pirate."}
    assert sent["messages"][-1] == {"role": "user", "content": "hi"}
    assert "ADAPTER PROMPT" not in str(sent)
    assert _text(results) == "Ahoy!"


# -- LA-02: history through the API ------------------------------------------------------------------------------


async def test_history_is_pulled_backward_from_the_latest_cursor_within_the_turn_window() -> None:
    """LA-02: history.page starts at ctx.context.latest_cursor and only the last N user turns are sent."""
    host = FakeHost()
    for n in range(4):
        host.history(item(2 * n, "user", f"question {n}"), item(2 * n + 1, "assistant", f"answer {n}"))
    host.script("m1", "ok")
    ctx = make_ctx("now", models=[model("m1")], latest_cursor=host.latest_cursor, config={"history-turns": 2})
    results = await drive(host, ctx)
    [page] = host.of("history.page")
    assert page["before_cursor"] == "c8"
    assert page["direction"] == "backward"
    [sent] = host.model_calls()
    assert [m["content"] for m in sent["messages"][1:]] == [
        "question 2",
        "answer 2",
        "question 3",
        "answer 3",
        "now",
    ]
    assert _completed(results).metadata["history"] == {
        "items": 4,
        "pages": 1,
        "summary_used": False,
        "compacted": False,
        "budget_tokens": 6000,
        "error": None,
    }


async def test_history_walks_back_page_by_page_with_the_cursors_it_is_given() -> None:
    """LA-02: a window larger than one page is read with the next_cursor of each page, oldest item last."""
    host = FakeHost()
    for n in range(60):
        host.history(item(2 * n, "user", f"q{n}"), item(2 * n + 1, "assistant", f"a{n}"))
    host.script("m1", "ok")
    ctx = make_ctx(
        "now", models=[model("m1")], latest_cursor=host.latest_cursor, config={"history-turns": 55}
    )
    await drive(host, ctx)
    pages = host.of("history.page")
    assert [p["before_cursor"] for p in pages] == ["c120", "c70", "c20"]
    [sent] = host.model_calls()
    contents = [m["content"] for m in sent["messages"] if m["role"] != "system"]
    assert contents[0] == "q5"
    assert contents[-2:] == ["a59", "now"]
    assert len(contents) == 111


async def test_no_history_is_read_without_the_history_api_or_a_cursor() -> None:
    """LA-02: the runner reads history only when the run grants history.page and the host says there is some."""
    host = FakeHost()
    host.history(item(0, "user", "old"))
    host.script("m1", "ok", "ok")
    await drive(host, make_ctx("a", models=[model("m1")], latest_cursor=host.latest_cursor, history=False))
    await drive(host, make_ctx("b", models=[model("m1")], latest_cursor=None))
    assert "history.page" not in host.actions()


async def test_history_over_budget_is_compacted_into_a_checkpoint_that_the_next_turn_reuses() -> None:
    """owns_compaction: overflowing turns are summarised by the model into conversation state, and the next run
    sends that summary and stops walking back at the item it covers."""
    host = FakeHost()
    for n in range(6):
        host.history(
            item(2 * n, "user", f"question {n} " + "x" * 200), item(2 * n + 1, "assistant", f"answer {n}")
        )
    host.script("m1", "SUMMARY-ONE", "first reply")
    config = {"history-token-budget": 200, "history-turns": 20}
    first = await drive(
        host, make_ctx("turn A", models=[model("m1")], latest_cursor=host.latest_cursor, config=config)
    )
    summarize, answer = host.model_calls()
    assert "keep a running summary" in summarize["messages"][0]["content"]
    assert "question 0" in summarize["messages"][1]["content"]
    checkpoint = host.state[SUMMARY_KEY]
    assert checkpoint["summary"] == "SUMMARY-ONE"
    assert checkpoint["item_id"].startswith("item-")
    assert [(p["scope"], p["expected_version"]) for p in host.of("state.set")] == [("conversation", 0)]
    assert answer["messages"][1] == {
        "role": "system",
        "content": "Summary of the earlier conversation:\nSUMMARY-ONE",
    }
    meta = _completed(first).metadata["history"]
    assert isinstance(meta, dict)
    assert meta["compacted"] is True
    assert meta["summary_used"] is True
    covered = int(checkpoint["item_id"].split("-")[1])
    assert all(f"question {n} " not in str(answer["messages"]) for n in range(covered // 2 + 1))

    host.history(item(12, "user", "turn A"), item(13, "assistant", "first reply"))
    host.requests.clear()
    host.script("m1", "second reply")
    second = await drive(
        host,
        make_ctx(
            "turn B", models=[model("m1")], latest_cursor=host.latest_cursor, config=config, run_id="run-2"
        ),
    )
    [answer2] = host.model_calls()  # no new summary: the checkpoint still covers the old turns
    assert answer2["messages"][1]["content"].endswith("SUMMARY-ONE")
    assert answer2["messages"][-3:] == [
        {"role": "user", "content": "turn A"},
        {"role": "assistant", "content": "first reply"},
        {"role": "user", "content": "turn B"},
    ]
    items_sent = _completed(second).metadata["history"]
    assert isinstance(items_sent, dict)
    assert items_sent["compacted"] is False
    assert items_sent["summary_used"] is True


async def test_the_history_budget_shrinks_to_what_the_model_context_window_leaves() -> None:
    """The token budget is computed against the smallest context window of the granted chain."""
    host = FakeHost()
    host.history(item(0, "user", "old question " * 40), item(1, "assistant", "old answer"))
    host.script("m1", "ok")
    ctx = make_ctx(
        "now",
        models=[model("m1", context_window=400, max_output_tokens=100)],
        latest_cursor=host.latest_cursor,
        config={"history-token-budget": 100_000},
    )
    results = await drive(host, ctx)
    history = _completed(results).metadata["history"]
    assert isinstance(history, dict)
    budget = history["budget_tokens"]
    assert isinstance(budget, int)
    assert 0 < budget <= 400 - 100
    [sent] = host.model_calls()
    assert sent["messages"][-2:] == [
        {"role": "assistant", "content": "old answer"},
        {"role": "user", "content": "now"},
    ]


async def test_non_message_history_events_are_sent_as_system_notes_not_as_user_text() -> None:
    """An ``event`` transcript item becomes a system note; tool traffic in the transcript is left out."""
    host = FakeHost()
    host.history(
        item(0, "user", "hello"),
        item(1, "event", "message recalled", item_type="event", event_type="message.recalled"),
        item(2, "tool", "raw tool output", item_type="tool_result"),
    )
    host.script("m1", "ok")
    await drive(host, make_ctx("now", models=[model("m1")], latest_cursor=host.latest_cursor))
    [sent] = host.model_calls()
    assert sent["messages"][1:] == [
        {"role": "user", "content": "hello"},
        {"role": "system", "content": "[earlier event message.recalled] message recalled"},
        {"role": "user", "content": "now"},
    ]


# -- LA-03: streaming and not ---------------------------------------------------------------------------------


async def test_a_streaming_surface_gets_deltas_then_one_message_with_the_same_text() -> None:
    """LA-03: models.stream feeds message.delta results whose concatenation is the final message."""
    host = FakeHost()
    host.script("m1", FakeReply(text="Hello streaming world", chunks=["Hello ", "streaming ", "world"]))
    results = await drive(host, make_ctx("hi", models=[model("m1")], streaming=True))
    deltas = [d.data.chunk.content for d in only(results, MessageDeltaResult)]
    assert deltas == ["Hello ", "streaming ", "world"]
    assert _text(results) == "Hello streaming world"
    assert host.actions() == ["models.stream"]
    assert [type(r).__name__ for r in results[-2:]] == ["MessageCompletedResult", "RunCompletedResult"]


async def test_a_non_streaming_surface_gets_only_the_final_message() -> None:
    """LA-03: without streaming support the runner invokes the model and sends no deltas."""
    host = FakeHost()
    host.script("m1", "Just the answer")
    results = await drive(host, make_ctx("hi", models=[model("m1")], streaming=False))
    assert not only(results, MessageDeltaResult)
    assert host.actions() == ["models.invoke"]
    assert _text(results) == "Just the answer"


async def test_think_blocks_are_removed_from_streamed_and_plain_answers_when_asked() -> None:
    """remove-think drops <think> blocks, also when the tags are cut across stream chunks."""
    host = FakeHost()
    host.script(
        "m1",
        FakeReply(text="", chunks=["<thi", "nk>secret pla", "n</thi", "nk>\n\nVisible", " answer"]),
        "<think>hidden</think>Plain answer",
    )
    config = {"remove-think": True}
    streamed = await drive(host, make_ctx("a", models=[model("m1")], streaming=True, config=config))
    assert "".join(d.data.chunk.content or "" for d in only(streamed, MessageDeltaResult)) == "Visible answer"
    assert _text(streamed) == "Visible answer"
    plain = await drive(host, make_ctx("b", models=[model("m1")], config=config))
    assert _text(plain) == "Plain answer"


async def test_think_blocks_are_kept_unless_asked() -> None:
    """Without remove-think the model's text is passed through untouched."""
    host = FakeHost()
    host.script("m1", "<think>x</think>y")
    assert _text(await drive(host, make_ctx("a", models=[model("m1")]))) == "<think>x</think>y"


# -- LA-04: tools ---------------------------------------------------------------------------------------------

_WEATHER = {"tool_name": "weather", "description": "Weather by city", "parameters": {"type": "object"}}


async def test_a_granted_tool_is_called_with_started_and_completed_results_and_fed_back() -> None:
    """LA-04: the model's tool call runs through api.tools, is reported, and its result reaches the model."""
    host = FakeHost()
    host.tools["weather"] = lambda args: {"content": {"city": args["city"], "sky": "sunny"}}
    host.script(
        "m1",
        FakeReply(tool_calls=[call("weather", {"city": "Oslo"}, call_id="w1")]),
        "It is sunny in Oslo.",
    )
    results = await drive(host, make_ctx("weather?", models=[model("m1")], tools=[_WEATHER]))
    [started] = only(results, ToolCallStartedResult)
    [completed] = only(results, ToolCallCompletedResult)
    assert (started.data.tool_call_id, started.data.tool_name, started.data.parameters) == (
        "w1",
        "weather",
        {"city": "Oslo"},
    )
    assert completed.data.tool_call_id == "w1"
    assert completed.data.error_code is None
    assert completed.data.result_preview == {"content": '{"city":"Oslo","sky":"sunny"}'}
    first, second = host.model_calls()
    assert first["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Weather by city",
                "parameters": {"type": "object"},
            },
        }
    ]
    assert second["messages"][-2]["tool_calls"] == [
        {"id": "w1", "name": "weather", "arguments": {"city": "Oslo"}}
    ]
    assert second["messages"][-1] == {
        "role": "tool",
        "content": '{"city":"Oslo","sky":"sunny"}',
        "tool_call_id": "w1",
        "name": "weather",
    }
    assert _text(results) == "It is sunny in Oslo."
    assert _completed(results).metadata["tool_calls"] == 1


async def test_multi_step_tool_calls_run_until_the_model_answers() -> None:
    """Several rounds of tool calls, each fed back, before the final answer."""
    host = FakeHost()
    host.tools["weather"] = lambda args: {"content": f"{args['city']}: rain"}
    host.script(
        "m1",
        FakeReply(tool_calls=[call("weather", {"city": "Oslo"}, call_id="a")]),
        FakeReply(
            tool_calls=[
                call("weather", {"city": "Rome"}, call_id="b"),
                call("weather", {"city": "Lima"}, call_id="c"),
            ]
        ),
        "Rain everywhere.",
    )
    results = await drive(host, make_ctx("compare", models=[model("m1")], tools=[_WEATHER]))
    assert [s.data.tool_call_id for s in only(results, ToolCallStartedResult)] == ["a", "b", "c"]
    assert [p["parameters"]["city"] for p in host.of("tools.call")] == ["Oslo", "Rome", "Lima"]
    last = host.model_calls()[-1]["messages"]
    assert [m["content"] for m in last if m["role"] == "tool"] == ["Oslo: rain", "Rome: rain", "Lima: rain"]
    assert _completed(results).metadata["tool_rounds"] == 2


async def test_tools_are_no_longer_offered_after_max_tool_rounds() -> None:
    """After max-tool-rounds rounds the model is called without tools and must answer."""
    host = FakeHost()
    host.tools["weather"] = lambda args: {"content": "sunny"}
    host.script("m1", FakeReply(tool_calls=[call("weather")]), "Done.")
    results = await drive(
        host, make_ctx("x", models=[model("m1")], tools=[_WEATHER], config={"max-tool-rounds": 1})
    )
    first, second = host.model_calls()
    assert first["tools"]
    assert "tools" not in second
    assert _text(results) == "Done."


async def test_a_tool_outside_the_resources_is_never_called_and_the_model_hears_why() -> None:
    """A tool the model invents is not called: a failed tool call is recorded and the error fed back."""
    host = FakeHost()
    host.script(
        "m1", FakeReply(tool_calls=[call("delete_everything", call_id="x1")]), "Sorry, I cannot do that."
    )
    results = await drive(host, make_ctx("wipe it", models=[model("m1")], tools=[_WEATHER]))
    assert "tools.call" not in host.actions()
    [completed] = only(results, ToolCallCompletedResult)
    assert completed.data.error_code == "tool.not_granted"
    assert completed.data.tool_call_id == "x1"
    tool_message = host.model_calls()[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert "not available" in tool_message["content"]
    assert _text(results) == "Sorry, I cannot do that."


async def test_a_host_refusing_a_tool_ends_the_run_as_unauthorized() -> None:
    """An ``unauthorized`` answer to tools.call is handled: the call is closed and the run fails in a controlled way."""
    host = FakeHost()
    host.errors["tools.call"] = UnauthorizedError("tool 'weather' is not granted for call in this run")
    host.script("m1", FakeReply(tool_calls=[call("weather", call_id="w")]))
    results = await drive(host, make_ctx("x", models=[model("m1")], tools=[_WEATHER]))
    [completed] = only(results, ToolCallCompletedResult)
    assert completed.data.error_code == "unauthorized"
    assert _failed(results).data.code == "unauthorized"


async def test_a_failing_tool_is_reported_and_the_model_continues() -> None:
    """A tool's runtime error is a failed tool call the model can recover from, not a failed run."""
    host = FakeHost()
    host.errors["tools.call"] = RuntimeAPIError("backend down")
    host.script("m1", FakeReply(tool_calls=[call("weather")]), "The weather service is down.")
    results = await drive(host, make_ctx("x", models=[model("m1")], tools=[_WEATHER]))
    [completed] = only(results, ToolCallCompletedResult)
    assert completed.data.error_code == "runtime_error"
    assert host.model_calls()[1]["messages"][-1]["content"] == "Error: backend down"
    assert _text(results) == "The weather service is down."


async def test_tool_names_function_calling_refuses_are_offered_under_aliases_and_mapped_back() -> None:
    """``acme/search`` is offered as ``acme_search``; the call goes to the host under its real name."""
    host = FakeHost()
    host.tool_details["acme/search"] = {
        "name": "acme/search",
        "description": "Search",
        "parameters": {"type": "object"},
    }
    host.tools["acme/search"] = lambda args: {"content": "found"}
    host.script("m1", FakeReply(tool_calls=[call("acme_search", {"q": "x"})]), "Found it.")
    results = await drive(host, make_ctx("x", models=[model("m1")], tools=[{"tool_name": "acme/search"}]))
    offered = host.model_calls()[0]["tools"]
    assert offered[0]["function"]["name"] == "acme_search"
    assert offered[0]["function"]["description"] == "Search"  # filled in by tools.get_detail
    assert host.of("tools.call") == [{"tool_name": "acme/search", "parameters": {"q": "x"}}]
    assert only(results, ToolCallStartedResult)[0].data.tool_name == "acme/search"


# -- LA-05: knowledge -----------------------------------------------------------------------------------------

_IMAGE = {
    "type": "image",
    "artifact": {"artifact_id": "img-1", "artifact_type": "image", "mime_type": "image/png"},
}


async def test_retrieved_passages_are_added_as_a_text_part_and_the_image_is_kept() -> None:
    """LA-05/LA-06: retrieval uses the user's text; passages go into one text part, the image stays as content."""
    host = FakeHost()
    host.hits["kb-1"] = [
        {"text": "The office opens at 9.", "score": 0.9, "kb_id": "kb-1"},
        {"text": "Parking is free.", "score": 0.2, "kb_id": "kb-1"},
    ]
    host.script("m1", "It opens at 9.")
    ctx = make_ctx(
        None,
        contents=[{"type": "text", "text": "When does it open?"}, _IMAGE],
        models=[model("m1")],
        knowledge_bases=["kb-1"],
        config={"knowledge-bases": ["kb-1"]},
    )
    results = await drive(host, ctx)
    assert host.of("knowledge.retrieve") == [
        {"kb_id": "kb-1", "query_text": "When does it open?", "top_k": 5}
    ]
    content = host.model_calls()[0]["messages"][-1]["content"]
    assert [part["type"] for part in content] == ["text", "text", "image"]
    assert "[1] The office opens at 9." in content[0]["text"]
    assert "[2] Parking is free." in content[0]["text"]
    assert content[1]["text"] == "When does it open?"
    assert content[2]["artifact"]["artifact_id"] == "img-1"
    retrieval = _completed(results).metadata["retrieval"]
    assert isinstance(retrieval, dict)
    assert retrieval["hits"] == 2
    assert retrieval["reranked"] is False


async def test_a_rerank_model_orders_the_passages_and_keeps_its_top_k() -> None:
    """With a granted rerank model the passages follow its order, cut to rerank-top-k."""
    host = FakeHost()
    host.hits["kb-1"] = [{"text": f"passage {n}", "score": 1 - n / 10, "kb_id": "kb-1"} for n in range(4)]
    host.rerank_order = [3, 1, 0, 2]
    host.script("m1", "ok")
    ctx = make_ctx(
        "question",
        models=[model("m1"), {"model_id": "rr", "model_type": "rerank", "operations": ["rerank"]}],
        knowledge_bases=["kb-1"],
        config={"knowledge-bases": ["kb-1"], "rerank-model": "rr", "rerank-top-k": 2},
    )
    results = await drive(host, ctx)
    [rerank] = host.of("models.rerank")
    assert rerank["model_id"] == "rr"
    assert rerank["top_k"] == 2
    assert rerank["query"] == "question"
    knowledge = host.model_calls()[0]["messages"][-1]["content"]
    assert "[1] passage 3" in knowledge
    assert "[2] passage 1" in knowledge
    assert "passage 0" not in knowledge
    retrieval = _completed(results).metadata["retrieval"]
    assert isinstance(retrieval, dict)
    assert retrieval["reranked"] is True
    assert retrieval["kept"] == 2


async def test_only_granted_knowledge_bases_are_searched_and_a_failing_one_is_skipped() -> None:
    """A configured base missing from ctx.resources is never queried; a base that errors does not fail the run."""
    host = FakeHost()
    host.hits["kb-ok"] = [{"text": "fact", "score": 0.5, "kb_id": "kb-ok"}]
    host.script("m1", "ok")
    original = host.call

    async def flaky(request: Any, *, timeout: float | None) -> dict[str, Any]:
        if request.action == "knowledge.retrieve" and request.params["kb_id"] == "kb-bad":
            host.requests.append(request)
            raise RuntimeAPIError("index offline")
        return await original(request, timeout=timeout)

    host.call = flaky
    ctx = make_ctx(
        "q",
        models=[model("m1")],
        knowledge_bases=["kb-ok", "kb-bad"],
        config={"knowledge-bases": ["kb-secret", "kb-bad", "kb-ok"]},
    )
    results = await drive(host, ctx)
    assert [p["kb_id"] for p in host.of("knowledge.retrieve")] == ["kb-bad", "kb-ok"]
    retrieval = _completed(results).metadata["retrieval"]
    assert isinstance(retrieval, dict)
    assert retrieval["errors"] == [{"kb_id": "kb-bad", "code": "runtime_error"}]
    assert "[1] fact" in host.model_calls()[0]["messages"][-1]["content"]


# -- LA-06: multimodal input ----------------------------------------------------------------------------------


async def test_images_for_models_without_vision_fail_in_a_controlled_way() -> None:
    """LA-06: when every granted model declares capabilities without vision, the run fails before calling one."""
    host = FakeHost()
    ctx = make_ctx(None, contents=[_IMAGE], models=[model("m1", capabilities=["tool_calling"])])
    results = await drive(host, ctx)
    assert _failed(results).data.code == "input.unsupported"
    assert host.model_calls() == []


async def test_an_image_only_message_is_sent_to_a_vision_model_as_image_content() -> None:
    """LA-06: an image attachment without text reaches a vision model as an image part."""
    host = FakeHost()
    host.script("m1", "A cat.")
    ctx = make_ctx(
        None,
        attachments=[{"artifact_id": "img-9", "artifact_type": "image", "mime_type": "image/jpeg"}],
        models=[model("m1", capabilities=["vision"])],
    )
    results = await drive(host, ctx)
    [part] = host.model_calls()[0]["messages"][-1]["content"]
    assert part["type"] == "image"
    assert part["artifact"]["artifact_id"] == "img-9"
    assert _text(results) == "A cat."


async def test_text_files_are_read_through_the_artifact_api_and_inlined_with_a_cap() -> None:
    """A text attachment is read with artifacts.read_range and inlined (truncated); a binary file is described."""
    host = FakeHost()
    host.artifacts["notes"] = b"line\n" * 20_000
    host.script("m1", "ok")
    ctx = make_ctx(
        "summarise",
        attachments=[
            {"artifact_id": "notes", "name": "notes.txt", "mime_type": "text/plain"},
            {"artifact_id": "blob", "name": "scan.pdf", "mime_type": "application/pdf", "size": 1234},
        ],
        models=[model("m1")],
    )
    results = await drive(host, ctx)
    assert [p["artifact_id"] for p in host.of("artifacts.read_range")] == ["notes"]
    content = host.model_calls()[0]["messages"][-1]["content"]
    assert isinstance(content, str)
    assert content.startswith("summarise\n\n[file notes.txt]\nline\n")
    assert "[truncated: the file has 100000 bytes]" in content
    assert "[file attached: scan.pdf (application/pdf, 1234 bytes)]" in content
    assert len(content) < 40_000
    inputs = _completed(results).metadata["input"]
    assert inputs == {"images": 0, "files_inlined": 1, "notes": 1}


# -- LA-07: fallback and errors -------------------------------------------------------------------------------


async def test_a_failing_primary_falls_back_and_the_tool_loop_stays_on_the_fallback() -> None:
    """LA-07: the primary's error moves the run to the fallback, which serves every later round too."""
    host = FakeHost()
    host.tools["weather"] = lambda args: {"content": "sunny"}
    host.script("m1", FakeReply(error=RuntimeAPIError("upstream 500")))
    host.script("m2", FakeReply(tool_calls=[call("weather")]), "Sunny.")
    ctx = make_ctx(
        "x",
        models=[model("m1"), model("m2")],
        tools=[_WEATHER],
        config={"model": {"primary": "m1", "fallbacks": ["m2"]}},
    )
    results = await drive(host, ctx)
    assert [c["model_id"] for c in host.model_calls()] == ["m1", "m2", "m2"]
    meta = _completed(results).metadata
    assert meta["model_id"] == "m2"
    assert meta["fallback_used"] is True
    assert meta["primary_model_id"] == "m1"
    assert meta["model_failures"] == [{"model_id": "m1", "code": "runtime_error", "message": "upstream 500"}]
    assert _text(results) == "Sunny."


async def test_a_streamed_primary_failing_before_any_text_falls_back() -> None:
    """LA-07: a stream that breaks before showing text is retried on the next model, without duplicate deltas."""
    host = FakeHost()
    host.script("m1", FakeReply(text="never", error=RuntimeAPIError("reset"), fail_after_chunks=0))
    host.script("m2", FakeReply(text="from fallback", chunks=["from ", "fallback"]))
    ctx = make_ctx(
        "x",
        models=[model("m1"), model("m2")],
        streaming=True,
        config={"model": {"primary": "m1", "fallbacks": ["m2"]}},
    )
    results = await drive(host, ctx)
    assert [d.data.chunk.content for d in only(results, MessageDeltaResult)] == ["from ", "fallback"]
    assert _text(results) == "from fallback"


async def test_a_stream_failing_after_text_was_shown_fails_the_run() -> None:
    """Once text reached the user a second model cannot take over: the run fails with model.error."""
    host = FakeHost()
    host.script(
        "m1",
        FakeReply(
            text="partial answer",
            chunks=["partial ", "answer"],
            error=RuntimeAPIError("cut"),
            fail_after_chunks=1,
        ),
    )
    host.script("m2", "unused")
    ctx = make_ctx(
        "x",
        models=[model("m1"), model("m2")],
        streaming=True,
        config={"model": {"primary": "m1", "fallbacks": ["m2"]}},
    )
    results = await drive(host, ctx)
    assert _failed(results).data.code == "model.error"
    assert [c["model_id"] for c in host.model_calls()] == ["m1"]


async def test_when_every_model_fails_the_run_fails_with_model_error() -> None:
    """LA-07: all models failing ends in run.failed model.error naming each failure."""
    host = FakeHost()
    host.script("m1", FakeReply(error=RuntimeAPIError("boom")))
    host.script("m2", FakeReply(error=RuntimeAPIError("bang")))
    ctx = make_ctx(
        "x", models=[model("m1"), model("m2")], config={"model": {"primary": "m1", "fallbacks": ["m2"]}}
    )
    failed = _failed(await drive(host, ctx))
    assert failed.data.code == "model.error"
    assert failed.data.retryable is True
    assert [f["model_id"] for f in failed.data.details["failures"]] == ["m1", "m2"]  # type: ignore[index,union-attr]


async def test_a_configured_model_missing_from_the_resources_is_never_called() -> None:
    """The chain is the config intersected with ctx.resources: an ungranted primary is skipped, never tried."""
    host = FakeHost()
    host.script("m2", "answer")
    ctx = make_ctx("x", models=[model("m2")], config={"model": {"primary": "m-secret", "fallbacks": ["m2"]}})
    results = await drive(host, ctx)
    assert [c["model_id"] for c in host.model_calls()] == ["m2"]
    assert _completed(results).metadata["fallback_used"] is False


@pytest.mark.parametrize(
    "config",
    [{"model": {"primary": "", "fallbacks": []}}, {"model": "m-secret"}],
    ids=["nothing configured", "nothing granted"],
)
async def test_no_usable_model_fails_with_config_missing(config: dict[str, Any]) -> None:
    """No model configured, or none of the configured ones granted, ends in run.failed config.missing."""
    host = FakeHost()
    results = await drive(host, make_ctx("x", models=[model("m1")], config=config))
    assert _failed(results).data.code == "config.missing"
    assert host.requests == []


async def test_a_model_refused_as_unauthorized_fails_the_run_without_falling_back() -> None:
    """An ``unauthorized`` refusal is not the model's fault: the run fails with that code."""
    host = FakeHost()
    host.script("m1", FakeReply(error=UnauthorizedError("model 'm1' is not granted")))
    host.script("m2", "unused")
    ctx = make_ctx(
        "x", models=[model("m1"), model("m2")], config={"model": {"primary": "m1", "fallbacks": ["m2"]}}
    )
    assert _failed(await drive(host, ctx)).data.code == "unauthorized"
    assert [c["model_id"] for c in host.model_calls()] == ["m1"]


# -- LA-08: no blank success ----------------------------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])
async def test_an_empty_model_answer_is_a_failure_not_a_blank_success(streaming: bool) -> None:
    """LA-08: a model that says nothing (or only thinks) ends the run with run.failed, never an empty message."""
    host = FakeHost()
    host.script("m1", FakeReply(text="<think>hmm</think>  ", chunks=["<think>hmm</think>", "  "]))
    results = await drive(
        host, make_ctx("x", models=[model("m1")], streaming=streaming, config={"remove-think": True})
    )
    assert _failed(results).data.code == "model.empty_output"
    assert not only(results, MessageCompletedResult)


async def test_an_event_without_any_input_is_refused() -> None:
    """A message with no text, image or file ends with input.empty before any model call."""
    host = FakeHost()
    assert _failed(await drive(host, make_ctx(None, models=[model("m1")]))).data.code == "input.empty"
    assert host.requests == []


# -- deadlines, cancellation, isolation, reporting --------------------------------------------------------------


async def test_a_run_past_its_deadline_fails_with_deadline_exceeded() -> None:
    """A model slower than the run's deadline ends the run with deadline_exceeded (retryable)."""
    host = FakeHost()
    host.script(
        "m1", FakeReply(text="late", delay=3600)
    )  # were it waited for, pytest-timeout would fail this
    results = await drive(host, make_ctx("x", models=[model("m1")], deadline_at=time.time() + 0.3))
    failed = _failed(results)
    assert failed.data.code == "deadline_exceeded"
    assert failed.data.retryable is True


async def test_cancelling_the_run_propagates_cancelled_error() -> None:
    """interrupt: cancelling the task iterating the run raises CancelledError out of it, promptly."""
    host = FakeHost()
    host.script("m1", FakeReply(text="slow", delay=30))
    ctx = make_ctx("x", models=[model("m1")])

    async def consume() -> list[Any]:
        api = AgentRunAPI(host, run_id=ctx.run_id)
        return [r async for r in LocalAgentRunner().run(ctx, api)]

    task = asyncio.create_task(consume())
    while not any(r.action.startswith("models.") for r in host.requests):
        assert not task.done(), task
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):  # noqa: PT011 - a cancellation has no message
        await task


async def test_closing_the_run_early_closes_the_model_stream_at_once() -> None:
    """When the host stops consuming mid-stream, the runner's back-call stream is closed before aclose returns."""
    host = FakeHost()
    host.script("m1", FakeReply(text="a b c d", chunks=["a ", "b ", "c ", "d"]))
    ctx = make_ctx("x", models=[model("m1")], streaming=True)
    run = LocalAgentRunner().run(ctx, AgentRunAPI(host, run_id=ctx.run_id))
    first = await anext(run)
    assert isinstance(first, MessageDeltaResult)
    assert host.streams_closed == 0
    await run.aclose()  # type: ignore[attr-defined]
    assert host.streams_closed == 1


async def test_one_instance_serves_concurrent_runs_without_sharing_state() -> None:
    """Two concurrent runs on one instance each see their own config and answer; the instance stays empty."""
    runner = LocalAgentRunner()
    host_a, host_b = FakeHost(), FakeHost()
    host_a.script("m1", FakeReply(text="answer A", delay=0.05))
    host_b.script("m1", "answer B")
    a, b = await asyncio.gather(
        drive(
            host_a,
            make_ctx("a", models=[model("m1")], config={"prompt": [{"role": "system", "content": "A"}]}),
            runner,
        ),
        drive(
            host_b,
            make_ctx("b", models=[model("m1")], config={"prompt": [{"role": "system", "content": "B"}]}),
            runner,
        ),
    )
    assert (_text(a), _text(b)) == ("answer A", "answer B")
    assert host_a.model_calls()[0]["messages"][0]["content"] == "A"
    assert host_b.model_calls()[0]["messages"][0]["content"] == "B"
    assert vars(runner) == {}


async def test_run_completed_reports_usage_and_monitoring_metadata() -> None:
    """Usage sums every model call; metadata names the model, tool and retrieval counts and the latency."""
    host = FakeHost()
    host.tools["weather"] = lambda args: {"content": "sunny"}
    host.script(
        "m1",
        FakeReply(tool_calls=[call("weather")], usage=(100, 10)),
        FakeReply(text="Sunny.", usage=(150, 20)),
    )
    results = await drive(host, make_ctx("x", models=[model("m1")], tools=[_WEATHER]))
    done = _completed(results)
    assert done.data.usage == {
        "input_tokens": 250,
        "output_tokens": 30,
        "total_tokens": 280,
        "model_calls": 2,
    }
    meta = done.metadata
    assert meta["model_id"] == "m1"
    assert meta["fallback_used"] is False
    assert meta["tool_calls"] == 1
    assert meta["usage"] == done.data.usage
    latency = meta["latency_ms"]
    assert isinstance(latency, int)
    assert latency >= 0
    sequences = [r.sequence for r in results]
    assert sequences == list(range(1, len(results) + 1))


# -- degraded paths ----------------------------------------------------------------------------------------------


async def test_tools_are_not_sent_to_a_model_that_lists_no_tool_calling() -> None:
    """A model whose capabilities omit tool_calling gets no tools (providers refuse them) and simply answers."""
    host = FakeHost()
    host.script("m1", "plain answer")
    ctx = make_ctx("x", models=[model("m1", capabilities=["streaming"])], tools=[_WEATHER])
    results = await drive(host, ctx)
    [sent] = host.model_calls()
    assert "tools" not in sent
    assert _text(results) == "plain answer"


async def test_a_failed_summary_still_answers_with_the_recent_turns_that_fit() -> None:
    """When every model fails the compaction call, no checkpoint is written and the answer still comes."""
    host = FakeHost()
    for n in range(4):
        host.history(
            item(2 * n, "user", f"question {n} " + "x" * 200), item(2 * n + 1, "assistant", f"answer {n}")
        )
    host.script("m1", FakeReply(error=RuntimeAPIError("summary failed")))
    host.script("m2", FakeReply(error=RuntimeAPIError("summary failed too")), "the answer")
    ctx = make_ctx(
        "now",
        models=[model("m1"), model("m2")],
        latest_cursor=host.latest_cursor,
        config={"model": {"primary": "m1", "fallbacks": ["m2"]}, "history-token-budget": 200},
    )
    results = await drive(host, ctx)
    assert SUMMARY_KEY not in host.state
    assert _text(results) == "the answer"
    answer = host.model_calls()[-1]["messages"]
    assert answer[-2:] == [{"role": "assistant", "content": "answer 3"}, {"role": "user", "content": "now"}]


async def test_a_failing_history_page_is_survived_and_reported() -> None:
    """A history.page error other than unauthorized or the deadline leaves the turn without history, not failed."""
    host = FakeHost()
    host.history(item(0, "user", "old"))
    host.errors["history.page"] = RateLimitedError("slow down")
    host.script("m1", "ok")
    results = await drive(host, make_ctx("now", models=[model("m1")], latest_cursor=host.latest_cursor))
    history = _completed(results).metadata["history"]
    assert isinstance(history, dict)
    assert history["error"] == "rate_limited"
    assert host.model_calls()[0]["messages"][1:] == [{"role": "user", "content": "now"}]


async def test_a_model_granted_only_for_invoke_answers_a_streaming_surface_in_one_piece() -> None:
    """Without the stream operation the runner invokes the model and sends its answer as a single delta."""
    host = FakeHost()
    host.script("m1", "whole answer")
    ctx = make_ctx("x", models=[{"model_id": "m1", "operations": ["invoke"]}], streaming=True)
    results = await drive(host, ctx)
    assert host.actions() == ["models.invoke"]
    assert [d.data.chunk.content for d in only(results, MessageDeltaResult)] == ["whole answer"]
    assert _text(results) == "whole answer"


async def test_a_non_message_event_is_described_as_an_event_not_as_user_text() -> None:
    """An event without input (e.g. a schedule) reaches the model labelled with its type and data."""
    host = FakeHost()
    host.script("m1", "Good morning!")
    ctx = make_ctx(None, models=[model("m1")], event_type="schedule.triggered")
    results = await drive(host, ctx)
    assert host.model_calls()[0]["messages"][-1]["content"] == "[event schedule.triggered] {}"
    assert _text(results) == "Good morning!"


async def test_a_tool_whose_detail_fails_is_still_offered_with_an_open_schema() -> None:
    """tools.get_detail failing is not fatal: the tool is offered with an empty object schema."""
    host = FakeHost()
    host.errors["tools.get_detail"] = RuntimeAPIError("no detail")
    host.script("m1", "ok")
    await drive(host, make_ctx("x", models=[model("m1")], tools=[{"tool_name": "lookup"}]))
    [tool] = host.model_calls()[0]["tools"]
    assert tool["function"] == {
        "name": "lookup",
        "description": "lookup",
        "parameters": {"type": "object", "properties": {}},
    }


async def test_a_model_granted_only_for_stream_answers_a_plain_surface_in_one_message() -> None:
    """Without the invoke operation the runner streams the model and sends one message, no deltas."""
    host = FakeHost()
    host.script("m1", "streamed but whole")
    ctx = make_ctx("x", models=[{"model_id": "m1", "operations": ["stream"]}], streaming=False)
    results = await drive(host, ctx)
    assert host.actions() == ["models.stream"]
    assert not only(results, MessageDeltaResult)
    assert _text(results) == "streamed but whole"


async def test_a_knowledge_base_refused_as_unauthorized_fails_the_run() -> None:
    """The host refusing a granted knowledge base is not skipped like an outage: the run fails unauthorized."""
    host = FakeHost()
    host.errors["knowledge.retrieve"] = UnauthorizedError("knowledge base 'kb-1' is not granted in this run")
    ctx = make_ctx("q", models=[model("m1")], knowledge_bases=["kb-1"], config={"knowledge-bases": ["kb-1"]})
    results = await drive(host, ctx)
    assert _failed(results).data.code == "unauthorized"
    assert host.model_calls() == []


async def test_a_failing_rerank_keeps_the_retrieval_order() -> None:
    """A rerank error is reported in the metadata and the passages keep their score order."""
    host = FakeHost()
    host.hits["kb-1"] = [
        {"text": "low", "score": 0.1, "kb_id": "kb-1"},
        {"text": "high", "score": 0.9, "kb_id": "kb-1"},
    ]
    host.errors["models.rerank"] = RuntimeAPIError("reranker down")
    host.script("m1", "ok")
    ctx = make_ctx(
        "q",
        models=[model("m1"), {"model_id": "rr", "model_type": "rerank", "operations": ["rerank"]}],
        knowledge_bases=["kb-1"],
        config={"knowledge-bases": ["kb-1"], "rerank-model": "rr"},
    )
    results = await drive(host, ctx)
    knowledge = host.model_calls()[0]["messages"][-1]["content"]
    assert knowledge.index("[1] high") < knowledge.index("[2] low")
    retrieval = _completed(results).metadata["retrieval"]
    assert isinstance(retrieval, dict)
    assert retrieval["reranked"] is False
    assert retrieval["errors"] == [{"rerank_model": "rr", "code": "runtime_error"}]


async def test_a_checkpoint_written_meanwhile_by_another_run_is_not_overwritten() -> None:
    """The checkpoint is written with compare-and-set: losing the race keeps the other run's summary in state,
    while this turn still answers with its own."""
    host = FakeHost()
    for n in range(6):
        host.history(
            item(2 * n, "user", f"question {n} " + "x" * 200), item(2 * n + 1, "assistant", f"answer {n}")
        )
    original = host.call

    async def racing(request: Any, *, timeout: float | None) -> dict[str, Any]:
        if request.action == "state.set":
            host.state[SUMMARY_KEY] = {"summary": "OTHER RUN", "item_id": "item-3"}
            host.state_versions[SUMMARY_KEY] = 1
        return await original(request, timeout=timeout)

    host.call = racing
    host.script("m1", "MY SUMMARY", "reply")
    ctx = make_ctx(
        "now", models=[model("m1")], latest_cursor=host.latest_cursor, config={"history-token-budget": 200}
    )
    results = await drive(host, ctx)
    assert host.state[SUMMARY_KEY]["summary"] == "OTHER RUN"
    history = _completed(results).metadata["history"]
    assert isinstance(history, dict)
    assert history["compacted"] is False
    assert host.model_calls()[-1]["messages"][1]["content"].endswith("MY SUMMARY")
    assert _text(results) == "reply"


async def test_text_given_beside_media_only_contents_is_kept_in_front_of_the_image() -> None:
    """input.text plus an image-only contents list: the model gets the text first, then the image."""
    host = FakeHost()
    host.script("m1", "A cat.")
    ctx = make_ctx("What is this?", contents=[_IMAGE], models=[model("m1")])
    await drive(host, ctx)
    content = host.model_calls()[0]["messages"][-1]["content"]
    assert [p["type"] for p in content] == ["text", "image"]
    assert content[0]["text"] == "What is this?"
