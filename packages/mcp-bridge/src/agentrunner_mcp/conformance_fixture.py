"""TEST FIXTURE ONLY: the bridge with one fixed, token-less run, for the MCP conformance suite.

``@modelcontextprotocol/conformance`` drives a server through its own client, which sends no
``Authorization`` header and cannot be told to. This module starts a :class:`BridgeServer` on 127.0.0.1 and
binds one fixture run to token-less requests (:meth:`BridgeServer.open_anonymous_fixture_run`), so the suite
exercises the real bridge: the same transport, Host/Origin checks, session handling, tool listing and call
path as production. The run's host is an in-memory fake that grants the few host tools the suite's
scenarios name and answers them as the scenarios expect. Never run it for a real host.

Usage: ``python -m agentrunner_mcp.conformance_fixture [--port N] [--url-file PATH]``; it serves until
SIGINT/SIGTERM and writes the endpoint URL to ``--url-file`` once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import anyio
from agentrunner.actions import BackCallRequest
from agentrunner.api import AgentRunAPI
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
}


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
            "input": {"text": "conformance"},
            "delivery": {"surface": "mcp"},
            "resources": {"tools": tools},
            "context": {},
            "runtime": {"trace_id": "trace-conformance"},
        }
    )


class FixtureTransport:
    """In-memory host of the fixture run: answers ``tools.call`` for the granted fixture tools."""

    async def call(self, request: BackCallRequest, *, timeout: float | None) -> dict[str, Any]:
        tool = _TOOLS.get(str(request.params.get("tool_name")))
        if request.action != "tools.call" or tool is None:
            raise NotFoundError(f"the conformance fixture has no answer for {request.action}")
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
