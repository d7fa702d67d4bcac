"""Scripted fakes of the Anthropic Messages and OpenAI Responses APIs, so real harness CLIs run offline.

Each fake answers the first turn by calling one tool (an MCP tool, or one of the harness's own such as
``Bash``, when the harness offers it) and the second turn by echoing the tool's result as text. They speak just enough of each streaming format for Claude Code and Codex.
"""

from __future__ import annotations

import threading
from collections.abc import Generator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentrunner import codec

__all__ = ["serve_fake_anthropic", "serve_fake_openai"]


def _sse(handler: BaseHTTPRequestHandler, events: list[tuple[str, dict[str, Any]]]) -> None:
    handler.send_response(200)
    handler.send_header("content-type", "text/event-stream")
    handler.end_headers()
    for name, data in events:
        handler.wfile.write(f"event: {name}\ndata: {codec.dumps_str(data)}\n\n".encode())
    handler.wfile.flush()


def _body(handler: BaseHTTPRequestHandler, seen: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    raw = handler.rfile.read(int(handler.headers.get("content-length", "0") or 0))
    body = codec.loads(raw) if raw else {}
    if seen is not None:
        # What the fake received, for tests that check what the harness sent (session ids, tool results).
        seen.append(
            {
                "path": handler.path,
                "headers": {k.lower(): v for k, v in handler.headers.items()},
                "body": body,
            }
        )
    return body


def _anthropic_events(block: dict[str, Any], stop: str) -> list[tuple[str, dict[str, Any]]]:
    message = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": "fake",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    if block["type"] == "text":
        start = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    else:
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        delta = {"type": "input_json_delta", "partial_json": codec.dumps_str(block["input"])}
    return [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


def _anthropic_handler(
    tool: str, seen: list[dict[str, Any]] | None = None, tool_input: dict[str, Any] | None = None
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.end_headers()

        def do_POST(self) -> None:
            body = _body(self, seen)
            messages: list[dict[str, Any]] = body.get("messages", [])
            last: Any = messages[-1].get("content") if messages else None
            results = [c for c in last if c.get("type") == "tool_result"] if isinstance(last, list) else []
            offered = [t.get("name") for t in body.get("tools", [])]
            if results:
                block = {"type": "text", "text": "Tool said: " + codec.dumps_str(results[-1].get("content"))}
                _sse(self, _anthropic_events(block, "end_turn"))
            elif tool in offered:
                block = {"type": "tool_use", "id": "toolu_fake", "name": tool, "input": tool_input or {}}
                _sse(self, _anthropic_events(block, "tool_use"))
            else:
                _sse(self, _anthropic_events({"type": "text", "text": "no tool offered"}, "end_turn"))

    return Handler


_USAGE = {
    "input_tokens": 5,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 5,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 10,
}


def _openai_handler(
    namespace: str | None,
    tool: str,
    seen: list[dict[str, Any]] | None = None,
    arguments: dict[str, Any] | None = None,
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            body = _body(self, seen)
            items: list[Any] = body.get("input", [])
            outputs = [i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
            item: dict[str, Any]
            if outputs:
                text = "Tool said: " + codec.dumps_str(outputs[-1].get("output"))
                content = [{"type": "output_text", "text": text, "annotations": []}]
                item = {
                    "type": "message",
                    "id": "msg_2",
                    "role": "assistant",
                    "status": "completed",
                    "content": content,
                }
            elif (namespace or tool) in codec.dumps_str(body.get("tools", [])):
                item = {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "name": tool,
                    **({"namespace": namespace} if namespace is not None else {}),
                    "arguments": codec.dumps_str(arguments or {}),
                    "status": "completed",
                }
            else:
                content = [{"type": "output_text", "text": "no tool offered", "annotations": []}]
                item = {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": content,
                }
            response = {
                "id": "resp_1",
                "object": "response",
                "status": "in_progress",
                "output": [],
                "model": "fake",
            }
            done = {**response, "status": "completed", "output": [item], "usage": _USAGE}
            _sse(
                self,
                [
                    ("response.created", {"type": "response.created", "response": response}),
                    (
                        "response.output_item.added",
                        {
                            "type": "response.output_item.added",
                            "output_index": 0,
                            "item": {**item, "status": "in_progress"},
                        },
                    ),
                    (
                        "response.output_item.done",
                        {"type": "response.output_item.done", "output_index": 0, "item": item},
                    ),
                    ("response.completed", {"type": "response.completed", "response": done}),
                ],
            )

    return Handler


@contextmanager
def _serve(handler: type[BaseHTTPRequestHandler]) -> Generator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="fake-model-api", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def serve_fake_anthropic(
    *, tool: str, seen: list[dict[str, Any]] | None = None, tool_input: dict[str, Any] | None = None
) -> Generator[str]:
    """A fake Messages API whose model calls *tool* (a ``mcp__<server>__<tool>`` name, or one of Claude
    Code's own such as ``Bash``) with *tool_input*; yields its base URL. Every request is appended to *seen*
    (path, lower-cased headers, body) when given."""
    with _serve(_anthropic_handler(tool, seen, tool_input)) as url:
        yield url


@contextmanager
def serve_fake_openai(
    *,
    namespace: str | None,
    tool: str,
    seen: list[dict[str, Any]] | None = None,
    arguments: dict[str, Any] | None = None,
) -> Generator[str]:
    """A fake Responses API whose model calls *tool* of MCP *namespace* (``mcp__<server>``), or with
    ``namespace=None`` one of Codex's own tools (``exec_command``), with *arguments*; yields ``.../v1``.
    Every request is appended to *seen* when given."""
    with _serve(_openai_handler(namespace, tool, seen, arguments)) as url:
        yield url + "/v1"
