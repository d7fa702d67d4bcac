"""Shared pieces of the runtime tests: run requests, a fake back-call handler, process checks."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agentrunner import AgentRunRequest, BackCallRequest, NotFoundError

PLUGINS = Path(__file__).parent / "plugins"
"""Fixture plugin directories."""

ECHO_DIR = PLUGINS / "echo"
"""The ``tests/echo`` plugin."""


def make_request(
    runner: str,
    *,
    run_id: str,
    config: dict[str, Any] | None = None,
    plugin: str = "tests/echo",
    **context: Any,
) -> AgentRunRequest:
    """A minimal valid run request for ``plugin:<plugin>/<runner>``; *context* overrides context fields."""
    return AgentRunRequest.model_validate(
        {
            "runner_id": f"plugin:{plugin}/{runner}",
            "runner_name": runner,
            "context": {
                "run_id": run_id,
                "trigger": {"type": "message.received", "source": "api"},
                "event": {"event_id": f"ev-{run_id}", "event_type": "message.received", "source": "test"},
                "input": {"text": "hello"},
                "delivery": {"surface": "cli"},
                "resources": {},
                "context": {},
                "runtime": {"trace_id": run_id},
                "config": config or {},
                **context,
            },
        }
    )


class FakeBackCallHandler:
    """Answers ``state.get`` with the caller it saw and ``models.stream`` with three chunks; records every call."""

    def __init__(self, *, stream_chunks: int = 3, delay: float = 0.0, hang: bool = False) -> None:
        self.requests: list[BackCallRequest] = []
        self.stream_chunks = stream_chunks
        self.stream_closed = 0
        self.delay = delay
        self.hang = hang
        self.received = asyncio.Event()
        self.cancelled = 0

    async def handle(self, request: BackCallRequest) -> dict[str, Any]:
        self.requests.append(request)
        self.received.set()
        try:
            if self.hang:
                await asyncio.Event().wait()
            if self.delay:
                await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if request.action == "state.get":
            return {
                "scope": request.params["scope"],
                "key": request.params["key"],
                "value": {"caller": request.caller, "run_id": request.run_id},
                "exists": True,
                "version": 1,
            }
        raise NotFoundError(f"no fake for {request.action}")

    async def handle_stream(self, request: BackCallRequest) -> AsyncIterator[dict[str, Any]]:
        self.requests.append(request)
        try:
            for i in range(self.stream_chunks):
                yield {"delta": f"c{i}"}
        finally:
            self.stream_closed += 1


def pid_alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if sys.platform.startswith("linux"):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return True
