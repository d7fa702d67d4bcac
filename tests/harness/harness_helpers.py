"""Helpers of the harness-runner tests: run contexts, a recording back-call transport, the stub CLI."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunResult,
    BackCallRequest,
    MessageCompletedResult,
)

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"


class RecordingTransport:
    """An ``APITransport`` that records every back-call and answers ``{}`` (a fake)."""

    def __init__(self) -> None:
        self.requests: list[BackCallRequest] = []

    async def call(self, request: BackCallRequest, *, timeout: float | None) -> dict[str, Any]:
        self.requests.append(request)
        return {}

    def stream(self, request: BackCallRequest, *, timeout: float | None) -> AsyncIterator[dict[str, Any]]:
        raise NotImplementedError


def make_context(
    run_id: str,
    config: dict[str, Any],
    *,
    root: Path,
    text: str = "hello harness",
    streaming: bool = False,
    conversation_state: dict[str, Any] | None = None,
    allowed_roots: list[str] | None = None,
    mcp_servers: dict[str, dict[str, Any]] | None = None,
) -> AgentRunContext:
    """A run context for a harness runner whose workspace policy keeps everything under *root*;
    *mcp_servers* are the operator's pins (name → ``{"url": ...}`` or ``{"command", "args", "env"}``)."""
    return AgentRunContext.model_validate(
        {
            "run_id": run_id,
            "trigger": {"type": "message.received", "source": "api"},
            "event": {"event_id": f"evt-{run_id}", "event_type": "message.received", "source": "test"},
            "conversation": {"conversation_id": "conv-1"},
            "actor": {"actor_type": "user", "actor_id": "u1"},
            "input": {"text": text},
            "delivery": {"surface": "test", "supports_streaming": streaming},
            "resources": {},
            "context": {"conversation_id": "conv-1"},
            "state": {"conversation": conversation_state or {}},
            "runtime": {
                "trace_id": f"trace-{run_id}",
                "metadata": {
                    "session_key": "sk-conv-1",
                    "harness": {
                        "workspace_root": str(root),
                        "allowed_roots": allowed_roots or [],
                        "mcp_server_allowlist": list(mcp_servers or {}),
                        "mcp_server_pins": mcp_servers or {},
                    },
                },
            },
            "config": config,
        }
    )


def stub_command(tmp_path: Path) -> str:
    """An executable that runs the stub CLI with this interpreter."""
    wrapper = tmp_path / "stub-cli"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {HERE / "harness_stub_cli.py"} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


async def collect(runner: AgentRunner, ctx: AgentRunContext) -> list[AgentRunResult]:
    """Every result of one run."""
    api = AgentRunAPI(RecordingTransport(), run_id=ctx.run_id)
    return [r async for r in runner.run(ctx, api)]


def pid_alive(pid: int) -> bool:
    """Whether *pid* is a live (non-zombie) process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def final_message(results: list[AgentRunResult]) -> tuple[str, dict[str, Any]]:
    """Text and metadata of the run's ``message.completed``."""
    for result in results:
        if isinstance(result, MessageCompletedResult):
            return result.data.message.text(), dict(result.data.message.metadata)
    raise AssertionError(f"no message.completed in {[r.type for r in results]}")


def stub_on_path(directory: Path, name: str) -> Path:
    """A directory holding the stub CLI under *name* (``claude`` / ``codex``), for ``PATH``."""
    directory.mkdir(parents=True, exist_ok=True)
    link = directory / name
    script = HERE / "harness_stub_cli.py"
    mode = "codex-jsonl" if name == "codex" else "claude-json"
    link.write_text(f'#!/bin/sh\nSTUB_MODE="${{STUB_MODE:-{mode}}}" exec {sys.executable} {script} "$@"\n')
    link.chmod(0o755)
    return directory
