"""TEST FIXTURE ONLY: the bridge with one fixed, token-less run, for the MCP conformance suite.

``@modelcontextprotocol/conformance`` drives a server through its own client, which sends no
``Authorization`` header and cannot be told to. This module starts a :class:`BridgeServer` on 127.0.0.1 and
binds one fixture run to token-less requests (:meth:`BridgeServer.open_anonymous_fixture_run`), so the suite
exercises the real bridge: the same transport, Host/Origin checks, session handling, tool listing and call
path as production. The run's host is an in-memory fake that grants the host tools the suite's scenarios name
(their typed results refer to artifacts of the run, which the bridge reads back like any host's) and the
artifacts the resource scenarios read. Never run it for a real host.

Usage: ``python -m agentrunner_mcp.conformance_fixture [--port N] [--url-file PATH]``; it serves until
SIGINT/SIGTERM and writes the endpoint URL to ``--url-file`` once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import re
import signal
import wave
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import anyio
from agentrunner import AgentRunAPI
from agentrunner.actions import BackCallRequest
from agentrunner.context import AgentRunContext
from agentrunner.errors import NotFoundError

from .server import BridgeServer

__all__ = ["FIXTURE_RUN_ID", "FixtureTransport", "fixture_context", "main", "serve_fixture"]

FIXTURE_RUN_ID: Final = "conformance-fixture-run"
"""Run id of the fixture run."""

_JSON_SCHEMA_2020_12: Final[dict[str, Any]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}

# Host tools granted to the fixture run, named as the suite's scenarios expect, with the answer the fake
# host gives for each (a ToolCallResult).
_TOOLS: Final[dict[str, tuple[str, dict[str, Any], dict[str, Any]]]] = {
    "test_simple_text": (
        "Returns a fixed text.",
        {"type": "object", "properties": {}},
        {"content": "This is a simple text response for testing."},
    ),
    "test_error_handling": (
        "Always fails.",
        {"type": "object", "properties": {}},
        {"content": "This tool intentionally returns an error for testing", "is_error": True},
    ),
    "json_schema_2020_12_tool": (
        "Tool with JSON Schema 2020-12 features",
        _JSON_SCHEMA_2020_12,
        {"content": "ok"},
    ),
    # Typed results: Protocol v1 content elements whose bytes are artifacts of the run (read by the bridge).
    "test_image_content": (
        "Returns an image (an artifact of the run).",
        {"type": "object", "properties": {}},
        {
            "content": [
                {"type": "image", "artifact": {"artifact_id": "fixture-red-pixel", "mime_type": "image/png"}}
            ]
        },
    ),
    "test_audio_content": (
        "Returns audio (an artifact of the run).",
        {"type": "object", "properties": {}},
        {
            "content": [
                {"type": "audio", "artifact": {"artifact_id": "fixture-tone", "mime_type": "audio/wav"}}
            ]
        },
    ),
    "test_embedded_resource": (
        "Returns a text file (an artifact of the run) as an embedded resource.",
        {"type": "object", "properties": {}},
        {
            "content": [
                {
                    "type": "file",
                    "artifact": {"artifact_id": "test://embedded-resource", "mime_type": "text/plain"},
                }
            ]
        },
    ),
    "test_multiple_content_types": (
        "Returns text, an image and a file.",
        {"type": "object", "properties": {}},
        {
            "content": [
                {"type": "text", "text": "Multiple content types test:"},
                {"type": "image", "artifact": {"artifact_id": "fixture-red-pixel", "mime_type": "image/png"}},
                {
                    "type": "file",
                    "artifact": {
                        "artifact_id": "test://mixed-content-resource",
                        "mime_type": "application/json",
                    },
                },
            ]
        },
    ),
    "test_tool_with_logging": (
        "Returns text; the bridge logs the call's steps.",
        {"type": "object", "properties": {}},
        {"content": "Tool with logging executed successfully"},
    ),
    "test_tool_with_progress": (
        "A slow host tool: the bridge reports progress while the host works.",
        {"type": "object", "properties": {}},
        {"content": "Tool with progress executed successfully"},
    ),
}

_SLOW_TOOL: Final = "test_tool_with_progress"
_SLOW_SECONDS: Final = 0.8
"""How long the fake host takes for the slow tool (the bridge sends progress every 0.2 s meanwhile)."""

# A 1x1 red PNG and a 0.01 s silent WAV: the bytes of the fixture's image and audio artifacts.
_RED_PIXEL: Final = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


def _silent_wav() -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(8000)
        wav.writeframes(bytes(160))
    return out.getvalue()


_TONE: Final = _silent_wav()

_ARTIFACTS: Final[dict[str, tuple[str, bytes]]] = {
    "fixture-red-pixel": ("image/png", _RED_PIXEL),
    "fixture-tone": ("audio/wav", _TONE),
    "test://embedded-resource": ("text/plain", b"This is an embedded resource content."),
    "test://mixed-content-resource": ("application/json", b'{"test": "data", "value": 123}'),
    "test://static-text": ("text/plain", b"This is the content of the static text resource."),
    "test://static-binary": ("image/png", _RED_PIXEL),
    "test://watched-resource": ("text/plain", b"Watched resource content"),
}
_TEMPLATE: Final = re.compile(r"^test://template/([^/]+)/data$")


def fixture_context() -> AgentRunContext:
    """The fixture run's context: a message event, and the suite's host tools granted for calling."""
    tools = [
        {"tool_name": name, "description": description, "parameters": schema, "operations": ["call"]}
        for name, (description, schema, _answer) in _TOOLS.items()
    ]
    return AgentRunContext.model_validate(
        {
            "run_id": FIXTURE_RUN_ID,
            "trigger": {"type": "message.received", "source": "api"},
            "event": {
                "event_id": "evt-conformance",
                "event_type": "message.received",
                "source": "conformance",
            },
            "delivery": {"surface": "mcp"},
            "input": {
                "text": "conformance",
                "attachments": [
                    {"artifact_id": "test://static-text", "name": "static-text", "mime_type": "text/plain"},
                    {
                        "artifact_id": "test://static-binary",
                        "name": "static-binary",
                        "mime_type": "image/png",
                    },
                    {"artifact_id": "test://watched-resource", "name": "watched", "mime_type": "text/plain"},
                ],
            },
            "resources": {"tools": tools},
            "context": {"available_apis": {"artifact_read": True, "artifact_metadata": True}},
            "runtime": {"trace_id": "trace-conformance"},
        }
    )


def _artifact(artifact_id: str) -> tuple[str, bytes]:
    match = _TEMPLATE.match(artifact_id)
    if match is not None:  # any id of the template's shape exists, like a host that computes the bytes
        return "application/json", f'{{"id": "{match.group(1)}", "templateTest": true}}'.encode()
    found = _ARTIFACTS.get(artifact_id)
    if found is None:
        raise NotFoundError(f"no artifact {artifact_id!r}")
    return found


class FixtureTransport:
    """In-memory host of the fixture run: answers ``tools.call`` for the granted fixture tools and
    ``artifacts.read_range`` / ``artifacts.metadata`` for its artifacts."""

    async def call(self, request: BackCallRequest, *, timeout: float | None) -> dict[str, Any]:
        if request.action == "artifacts.read_range":
            artifact_id = str(request.params.get("artifact_id"))
            mime, data = _artifact(artifact_id)
            offset = int(request.params.get("offset", 0))
            length = int(request.params.get("length", 65536))
            piece = data[offset : offset + length]
            return {
                "artifact_id": artifact_id,
                "offset": offset,
                "length": len(piece),
                "size": len(data),
                "data_base64": base64.b64encode(piece).decode(),
                "has_more": offset + len(piece) < len(data),
                "mime_type": mime,
            }
        if request.action == "artifacts.metadata":
            artifact_id = str(request.params.get("artifact_id"))
            mime, data = _artifact(artifact_id)
            return {"artifact_id": artifact_id, "mime_type": mime, "size": len(data)}
        name = str(request.params.get("tool_name"))
        tool = _TOOLS.get(name)
        if request.action != "tools.call" or tool is None:
            raise NotFoundError(f"the conformance fixture has no answer for {request.action}")
        if name == _SLOW_TOOL:
            await asyncio.sleep(_SLOW_SECONDS)
        return dict(tool[2])

    def stream(self, request: BackCallRequest, *, timeout: float | None) -> AsyncIterator[dict[str, Any]]:
        raise NotFoundError("the conformance fixture streams nothing")


async def serve_fixture(*, port: int = 0, url_file: Path | None = None) -> None:
    """Serve the fixture run on 127.0.0.1 until SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    ctx = fixture_context()
    async with BridgeServer(port=port) as server:
        server.open_anonymous_fixture_run(ctx, AgentRunAPI(FixtureTransport(), run_id=ctx.run_id))
        if url_file is not None:
            await anyio.Path(url_file).write_text(server.url + "\n")
        print(f"conformance fixture serving {server.url}", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m agentrunner_mcp.conformance_fixture", description=__doc__
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--url-file", type=Path, default=None, help="write the endpoint URL here when ready")
    args = parser.parse_args(argv)
    asyncio.run(serve_fixture(port=args.port, url_file=args.url_file))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
