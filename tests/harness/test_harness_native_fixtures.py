"""Recorded native output → normalised events → results.

``claude_stream_tool_roundtrip.jsonl``, ``claude_json_max_turns.json`` and ``codex_exec_tool_roundtrip.jsonl``
were recorded from Claude Code 2.1.197 and Codex 0.171.0 against the loopback fakes of tests/mcp; the other
two are the same formats with unknown event types, an invalid line and the failures mixed in.
``codex_exec_file_change_web_search.jsonl`` is not recorded: it is written in the item shapes of ``codex exec
--json`` (``file_change`` with ``changes`` of ``path`` and ``kind``, and ``status``; ``web_search`` with ``query``),
since the loopback fake model cannot make the CLI search the web.
"""

from __future__ import annotations

from pathlib import Path

from agentrunner_harness import (
    NativeEvent,
    NativeParser,
    NativeResult,
    NativeSession,
    NativeText,
    NativeToolCompleted,
    NativeToolStarted,
    NativeUnknown,
)
from agentrunner_runner_claude_code import ClaudeParser
from agentrunner_runner_codex import CodexParser
from harness_helpers import FIXTURES


def _parse(parser: NativeParser, name: str) -> list[NativeEvent]:
    events: list[NativeEvent] = []
    for line in (FIXTURES / name).read_bytes().splitlines():
        events += parser.feed(line)
    return events + parser.finish()


def _result(events: list[NativeEvent]) -> NativeResult:
    results = [e for e in events if isinstance(e, NativeResult)]
    assert len(results) == 1
    return results[0]


def test_claude_stream_json_tool_round_trip() -> None:
    events = _parse(ClaudeParser("stream-json"), "claude_stream_tool_roundtrip.jsonl")
    assert isinstance(events[0], NativeSession)
    started = [e for e in events if isinstance(e, NativeToolStarted)]
    completed = [e for e in events if isinstance(e, NativeToolCompleted)]
    assert [e.name for e in started] == ["mcp__agentrunner__history_page"]
    assert completed[0].call_id == started[0].call_id and completed[0].error is None
    assert "cursor-from-host" in (completed[0].preview or "")
    texts = [e.text for e in events if isinstance(e, NativeText)]
    assert texts and "cursor-from-host" in texts[-1]
    result = _result(events)
    assert result.is_error is False
    assert result.metadata["num_turns"] == 2
    assert result.metadata["permission_denials"] == []
    assert result.usage["total_tokens"] == result.usage["input_tokens"] + result.usage["output_tokens"]  # type: ignore[operator]
    assert "cost_usd" in result.usage


def test_claude_is_error_with_subtype_success_is_a_failure_and_unknown_events_are_ignored() -> None:
    events = _parse(ClaudeParser("stream-json"), "claude_stream_unknown_and_error.jsonl")
    unknown = [e.kind for e in events if isinstance(e, NativeUnknown)]
    assert unknown == ["some_future_event", "invalid"]
    result = _result(events)
    assert result.is_error is True
    assert result.error_kind == "cli_error"
    assert "Unable to connect" in (result.error_message or "")
    assert result.metadata["subtype"] == "success"


def test_claude_json_max_turns() -> None:
    events = _parse(ClaudeParser("json"), "claude_json_max_turns.json")
    result = _result(events)
    assert result.is_error is True
    assert "max-turns" in (result.error_message or "")
    assert result.finish_reason == "length"
    assert any(isinstance(e, NativeSession) for e in events)


def test_claude_json_output_records_the_result_object_alone() -> None:
    # docs/security.md says exactly this of the default output format: the session, the reply's result and its
    # metadata, and no tool event (so no harness.tool record)
    events = _parse(ClaudeParser("json"), "claude_json_max_turns.json")
    assert not [e for e in events if isinstance(e, NativeToolStarted | NativeToolCompleted | NativeText)]
    assert [type(e) for e in events] == [NativeSession, type(_result(events))]
    assert set(_result(events).metadata) == {
        "subtype",
        "num_turns",
        "duration_ms",
        "cost_usd",
        "permission_denials",
    }


def test_claude_text_output_is_the_reply() -> None:
    parser = ClaudeParser("text")
    parser.feed(b"line one")
    parser.feed(b"line two")
    assert _result(parser.finish()).text == "line one\nline two"


def test_codex_jsonl_tool_round_trip() -> None:
    events = _parse(CodexParser(), "codex_exec_tool_roundtrip.jsonl")
    assert isinstance(events[0], NativeSession)
    started = [e for e in events if isinstance(e, NativeToolStarted)]
    completed = [e for e in events if isinstance(e, NativeToolCompleted)]
    assert [e.name for e in started] == ["mcp__agentrunner__history_page"]
    assert "cursor-from-host" in (completed[0].preview or "")
    result = _result(events)
    assert result.is_error is False
    assert result.text is not None and "cursor-from-host" in result.text
    assert result.usage["total_tokens"] == 20
    assert not [e for e in events if isinstance(e, NativeUnknown)]


def test_codex_turn_failed_unknown_events_and_command_items() -> None:
    events = _parse(CodexParser(), "codex_exec_turn_failed.jsonl")
    assert sorted(e.kind for e in events if isinstance(e, NativeUnknown)) == [
        "brand.new.event",
        "item.a_new_item_kind",
    ]
    tools = [e for e in events if isinstance(e, NativeToolCompleted)]
    assert [(t.name, t.preview, t.error) for t in tools] == [("command_execution", "a\nb\n", None)]
    result = _result(events)
    assert result.is_error and result.error_kind == "turn_failed"
    assert "disconnected" in (result.error_message or "")


def test_codex_item_updates_stream_only_the_new_text() -> None:
    parser = CodexParser()
    lines = [
        b'{"type":"item.started","item":{"id":"m","type":"agent_message","text":""}}',
        b'{"type":"item.updated","item":{"id":"m","type":"agent_message","text":"Hel"}}',
        b'{"type":"item.updated","item":{"id":"m","type":"agent_message","text":"Hello"}}',
        b'{"type":"item.completed","item":{"id":"m","type":"agent_message","text":"Hello!"}}',
        b'{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}',
    ]
    events = [e for line in lines for e in parser.feed(line)] + parser.finish()
    assert [e.text for e in events if isinstance(e, NativeText)] == ["Hel", "lo", "!"]
    assert _result(events).text == "Hello!"


def test_fixture_files_exist() -> None:
    assert all(
        Path(FIXTURES / n).is_file()
        for n in ("claude_stream_tool_roundtrip.jsonl", "codex_exec_tool_roundtrip.jsonl")
    )


def test_codex_file_changes_and_web_searches_are_tool_uses() -> None:
    # each becomes a harness.tool audit record on the host: the paths, or the query, are its detail
    events = _parse(CodexParser(), "codex_exec_file_change_web_search.jsonl")
    started = [e for e in events if isinstance(e, NativeToolStarted)]
    completed = [e for e in events if isinstance(e, NativeToolCompleted)]
    assert [(e.call_id, e.name) for e in started] == [
        ("item_0", "web_search"),
        ("item_1", "file_change"),
        ("item_2", "file_change"),
    ]
    assert started[0].parameters == {"query": "agentrunner protocol v1"}
    assert started[1].parameters == {
        "path": ["/work/notes.md", "/work/README.md"],
        "changes": [{"path": "/work/notes.md", "kind": "add"}, {"path": "/work/README.md", "kind": "update"}],
    }
    assert [(e.call_id, e.error) for e in completed] == [
        ("item_0", None),
        ("item_1", None),
        ("item_2", "the tool failed"),
    ]
    assert _result(events).text == "done"
