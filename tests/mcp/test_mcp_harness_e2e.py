"""Opt-in end-to-end checks with the real harness CLIs driving the projected configurations.

They need the CLIs from npm, so they run only when pointed at them:
``AGENTRUNNER_CLAUDE_BIN=.../node_modules/.bin/claude`` (``@anthropic-ai/claude-code``) and
``AGENTRUNNER_CODEX_BIN=.../node_modules/.bin/codex`` (``@openai/codex``). Each harness talks to a scripted fake
model API on loopback whose model calls ``history_page``; the test checks the harness ran the tool through the
bridge and that the call reached the run's host as ``history.page``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncGenerator, Generator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import pytest_asyncio
from agentrunner import codec
from agentrunner_mcp import BridgeServer, HarnessTransport, create_external_mcp_bridge
from mcp_bridge_fakes import FakeTransport, make_api, make_context
from mcp_fake_model_apis import serve_fake_anthropic, serve_fake_openai

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]

CLAUDE = os.environ.get("AGENTRUNNER_CLAUDE_BIN")
CODEX = os.environ.get("AGENTRUNNER_CODEX_BIN")
if os.environ.get("AGENTRUNNER_REQUIRE_HARNESS") == "1" and (CLAUDE is None or CODEX is None):
    # CI installs both CLIs (.ci/harness-clis.sh): a missing one is a failure there, not a skip.
    raise RuntimeError(
        "AGENTRUNNER_REQUIRE_HARNESS=1 but AGENTRUNNER_CLAUDE_BIN / AGENTRUNNER_CODEX_BIN is unset"
    )
PAGE = {"items": [], "next_cursor": "cursor-from-host", "has_more": True}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server() -> AsyncGenerator[BridgeServer]:
    async with BridgeServer() as bridge:
        yield bridge


def _jsonl(stdout: bytes) -> list[dict[str, Any]]:
    return [codec.loads(line) for line in stdout.splitlines() if line.strip().startswith(b"{")]


@contextmanager
def busy_cpus(count: int) -> Generator[None]:
    """*count* processes spinning on the CPU for the duration: the start-up race of `claude -p` with a stdio
    server that is slow to list its tools shows on a loaded machine, so the test loads it on purpose."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        for _ in range(count)
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


@pytest.mark.skipif(CLAUDE is None, reason="set AGENTRUNNER_CLAUDE_BIN to a Claude Code CLI to run")
# By default `claude -p` starts its first turn without a stdio server that has not listed its tools yet; the
# projection's `claude_env` (MCP_CONNECTION_NONBLOCKING=0) makes it wait, and the proxy is ready in a few
# hundred ms anyway (standard library only). "loaded": two spinners keep both CPUs of the CI machine busy.
@pytest.mark.parametrize(("transport", "loaded"), [("http", False), ("stdio", False), ("stdio", True)])
async def test_claude_code_calls_a_run_tool_through_the_bridge(
    server: BridgeServer, tmp_path: Path, transport: HarnessTransport, loaded: bool
) -> None:
    """``claude -p`` with the projected ``--mcp-config``/``--allowedTools`` runs ``history_page`` unprompted."""
    assert CLAUDE is not None
    host = FakeTransport({"history.page": lambda r: PAGE})
    ctx = make_context(f"run-claude-{transport}{'-loaded' if loaded else ''}", history=True)
    (tmp_path / "home").mkdir()
    async with create_external_mcp_bridge(ctx, make_api(ctx, host), server=server) as bridge:
        args = bridge.claude_cli_args(tmp_path, transport=transport)
        with serve_fake_anthropic(tool="mcp__agentrunner__history_page") as api_url:
            env = {
                **os.environ,
                "HOME": str(tmp_path / "home"),
                "ANTHROPIC_BASE_URL": api_url,
                "ANTHROPIC_API_KEY": "sk-ant-fake",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "CLAUDE_CODE_MAX_RETRIES": "0",
                **bridge.claude_env,
            }
            command = [CLAUDE, "-p", "read the history", "--output-format", "stream-json", "--verbose", *args]
            with anyio.fail_after(180), busy_cpus(2 if loaded else 0):
                done = await anyio.run_process(
                    command, env=env, cwd=tmp_path, check=False, stdin=subprocess.DEVNULL
                )
    events = _jsonl(done.stdout)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    init = next(e for e in events if e.get("type") == "system")
    assert init["mcp_servers"] == [{"name": "agentrunner", "status": "connected"}]
    result = events[-1]
    assert result["is_error"] is False
    assert result["permission_denials"] == []
    assert "cursor-from-host" in result["result"]
    assert [(r.run_id, r.action) for r in host.requests] == [(ctx.run_id, "history.page")]


@pytest.mark.skipif(CODEX is None, reason="set AGENTRUNNER_CODEX_BIN to a Codex CLI to run")
@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_codex_calls_a_run_tool_through_the_bridge(
    server: BridgeServer, tmp_path: Path, transport: HarnessTransport
) -> None:
    """``codex exec`` with the projected ``[mcp_servers.agentrunner]`` table runs ``history_page`` unprompted."""
    assert CODEX is not None
    host = FakeTransport({"history.page": lambda r: PAGE})
    ctx = make_context(f"run-codex-{transport}", history=True)
    async with create_external_mcp_bridge(ctx, make_api(ctx, host), server=server) as bridge:
        config = bridge.write_codex_config(tmp_path, transport=transport)
        with serve_fake_openai(namespace="mcp__agentrunner", tool="history_page") as api_url:
            provider = (
                'model = "fake-model"\nmodel_provider = "fake"\n[model_providers.fake]\nname = "fake"\n'
                f'base_url = "{api_url}"\nenv_key = "FAKE_OPENAI_KEY"\nwire_api = "responses"\n\n'
            )
            config.write_text(provider + config.read_text())
            env = {**os.environ, "CODEX_HOME": str(tmp_path), "FAKE_OPENAI_KEY": "sk-fake", **bridge.env}
            command = [CODEX, "exec", "--json", "--skip-git-repo-check", "read the history"]
            with anyio.fail_after(90):
                done = await anyio.run_process(
                    command, env=env, cwd=tmp_path, check=False, stdin=subprocess.DEVNULL
                )
    events = _jsonl(done.stdout)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    calls = [
        e["item"]
        for e in events
        if e.get("type") == "item.completed" and e["item"]["type"] == "mcp_tool_call"
    ]
    assert [(c["server"], c["tool"], c["status"]) for c in calls] == [
        ("agentrunner", "history_page", "completed")
    ]
    assert calls[0]["result"]["structured_content"] == PAGE
    assert [(r.run_id, r.action) for r in host.requests] == [(ctx.run_id, "history.page")]
