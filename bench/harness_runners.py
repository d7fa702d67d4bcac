"""Harness runners suite: one claude-code / codex run next to spawning the same CLI bare, same fake model API.

Subject: ``ClaudeCodeRunner.run`` / ``CodexRunner.run`` in process — settings, workspace resolution under the
allowlist, ``agent-context.json`` + ``LANGBOT_CONTEXT.md``, environment, the CLI in its own process group with
concurrent capped reads, native parsing into results, the audit artifacts, tree clean-up.
Floor: ``asyncio.create_subprocess_exec`` of the same CLI with the same flags and environment, the same prompt
on stdin, stdout read to EOF. Both talk to the loopback model fakes of tests/mcp (plain text answers, no tool:
the bridge is measured by the ``mcp`` suite). Goal: ≤ 1.2x (issue 13).

The CLIs come from ``AGENTRUNNER_CLAUDE_BIN`` / ``AGENTRUNNER_CODEX_BIN`` (CI installs them with
.ci/harness-clis.sh); a CLI that is not configured has no row. Full mode only: each sample is a whole CLI run
(about two seconds), and ``--quick`` (CI) must stay at a few seconds for all suites together.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from agentrunner import AgentRunAPI, AgentRunContext, AgentRunner, BackCallRequest

from ._framework import Goal, Measure, SuiteContext

__all__ = ["measures"]

_GOAL = Goal.ratio(1.2, source="issue 13: per-run overhead of the runner around the CLI")
_PROMPT = "say hello"


class _NoBackCalls:
    async def call(self, request: BackCallRequest, *, timeout: float | None) -> dict[str, Any]:
        raise AssertionError(f"unexpected back-call {request.action}")

    def stream(self, request: BackCallRequest, *, timeout: float | None) -> Any:
        raise AssertionError("unexpected stream")


def _context(run_id: str, config: dict[str, Any], root: Path) -> AgentRunContext:
    return AgentRunContext.model_validate(
        {
            "run_id": run_id,
            "trigger": {"type": "message.received", "source": "api"},
            "event": {"event_id": f"evt-{run_id}", "event_type": "message.received", "source": "bench"},
            "conversation": {"conversation_id": "conv-bench"},
            "input": {"text": _PROMPT},
            "delivery": {"surface": "bench", "supports_streaming": True},
            "resources": {},
            "context": {"conversation_id": "conv-bench"},
            "runtime": {
                "trace_id": "trace-bench",
                "metadata": {"session_key": f"bench-{run_id}", "harness": {"workspace_root": str(root)}},
            },
            "config": config,
        }
    )


def _runner_run(runner: AgentRunner, config: dict[str, Any], root: Path) -> Callable[[], Awaitable[None]]:
    counter = itertools.count()

    async def run() -> None:
        # A fresh session per run (no resume), as the bare CLI starts one.
        ctx = _context(f"run_bench_{next(counter)}", config, root)
        last = None
        async for result in runner.run(ctx, AgentRunAPI(_NoBackCalls(), run_id=ctx.run_id)):
            last = result
        assert last is not None
        assert last.type == "run.completed", last

    return run


def _bare_run(
    root: Path, command: Callable[[Path], tuple[list[str], dict[str, str]]], stdin: bytes
) -> Callable[[], Awaitable[None]]:
    counter = itertools.count()

    async def run() -> None:
        # A fresh directory per run, as the runner's per-session workspace is: the CLIs keep per-directory
        # state (sessions, project settings) that would otherwise grow on one side only.
        cwd = root / f"bare-{next(counter)}"
        (cwd / "home").mkdir(parents=True)
        argv, env = command(cwd)
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, _ = await proc.communicate(stdin)
        assert proc.returncode == 0, out[-500:]

    return run


def _base_env(home: Path) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "TERM", "USER", "LOGNAME", "SHELL")
    return {**{k: v for k, v in os.environ.items() if k in keep}, "HOME": str(home)}


def measures(ctx: SuiteContext) -> list[Measure]:
    from agentrunner_runner_claude_code import ClaudeCodeRunner
    from agentrunner_runner_codex import CodexRunner

    # The model fakes live with the MCP tests; one copy of each fake serves both.
    sys.path.append(str(Path(__file__).resolve().parents[1] / "tests" / "mcp"))
    from mcp_fake_model_apis import serve_fake_anthropic, serve_fake_openai

    if ctx.quick:
        return []
    stack = ExitStack()
    ctx.add_cleanup(stack.close)
    root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="agentrunner-bench-harness-")))
    rows: list[Measure] = []
    claude = os.environ.get("AGENTRUNNER_CLAUDE_BIN")
    codex = os.environ.get("AGENTRUNNER_CODEX_BIN")
    if claude:
        url = stack.enter_context(serve_fake_anthropic(tool="none"))
        config = {
            "cli-command": claude,
            "api-base-url": url,
            "api-key": "sk-ant-bench",
            "output-format": "stream-json",
            "environment-json": {"CLAUDE_CODE_MAX_RETRIES": "0"},
        }

        def claude_command(
            cwd: Path, claude: str = claude, url: str = url
        ) -> tuple[list[str], dict[str, str]]:
            env = {
                **_base_env(cwd / "home"),
                "ANTHROPIC_BASE_URL": url,
                "ANTHROPIC_API_KEY": "sk-ant-bench",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
                "CLAUDE_CODE_MAX_RETRIES": "0",
            }
            argv = [claude, "-p", "--output-format", "stream-json", "--verbose", "--max-turns", "1"]
            return [*argv, "--permission-mode", "plan", "--disallowedTools", "AskUserQuestion"], env

        rows.append(
            Measure(
                "claude-code run (projection + spawn + parse)",
                _runner_run(ClaudeCodeRunner(), config, root),
                _bare_run(root / "claude", claude_command, _PROMPT.encode()),
                "`claude -p` spawned bare (same flags, env, fake API), stdout read to EOF",
                _GOAL,
                unit="µs/run",
            )
        )
    if codex:
        url = stack.enter_context(serve_fake_openai(namespace="none", tool="none"))
        config = {"cli-command": codex, "api-base-url": url, "api-key": "sk-bench", "model": "fake-model"}

        def codex_command(cwd: Path, codex: str = codex, url: str = url) -> tuple[list[str], dict[str, str]]:
            home = cwd / "home"
            env = {**_base_env(home), "CODEX_HOME": str(home), "AGENTRUNNER_CODEX_API_KEY": "sk-bench"}
            provider = "model_providers.agentrunner"
            argv = [
                codex,
                "exec",
                "--json",
                "--model",
                "fake-model",
                "--sandbox",
                "read-only",
                "--cd",
                str(cwd),
            ]
            argv += ["--skip-git-repo-check", "--config", 'approval_policy="never"']
            argv += ["--config", 'model_provider="agentrunner"', "--config", f'{provider}.name="agentrunner"']
            argv += [
                "--config",
                f'{provider}.base_url="{url}"',
                "--config",
                f'{provider}.wire_api="responses"',
            ]
            return [*argv, "--config", f'{provider}.env_key="AGENTRUNNER_CODEX_API_KEY"', "-"], env

        rows.append(
            Measure(
                "codex run (projection + spawn + parse)",
                _runner_run(CodexRunner(), config, root),
                _bare_run(root / "codex", codex_command, _PROMPT.encode()),
                "`codex exec --json` spawned bare (same flags, env, fake API), stdout read to EOF",
                _GOAL,
                unit="µs/run",
            )
        )
    return rows
