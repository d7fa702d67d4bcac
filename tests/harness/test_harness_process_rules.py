"""The process rules of the harness runners, against a stub CLI: typed failures, no orphans, env, stdin."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from agentrunner import AgentRunner, RunCompletedResult, RunFailedResult, StateUpdatedResult
from agentrunner_harness import HarnessProcess
from agentrunner_runner_claude_code import ClaudeCodeRunner
from agentrunner_runner_codex import CodexRunner
from harness_helpers import collect, final_message, make_context, pid_alive, stub_command

pytestmark = pytest.mark.asyncio


def _config(tmp_path: Path, mode: str, **extra: Any) -> dict[str, Any]:
    env = {
        "STUB_MODE": mode,
        "STUB_RECORD": str(tmp_path / "record.json"),
        "STUB_GRANDCHILD": str(tmp_path / "gc.pid"),
    }
    return {"cli-command": stub_command(tmp_path), "environment-json": env, **extra}


def _failed(results: list[Any]) -> RunFailedResult:
    last = results[-1]
    assert isinstance(last, RunFailedResult), [r.type for r in results]
    return last


def _record(tmp_path: Path) -> list[dict[str, Any]]:
    return json.loads((tmp_path / "record.json").read_text())


async def test_a_json_result_completes_with_state_and_metadata(tmp_path: Path) -> None:
    ctx = make_context(
        "run_ok", _config(tmp_path, "claude-json", **{"api-key": "sk-ant-secret-value"}), root=tmp_path / "ws"
    )
    results = await collect(ClaudeCodeRunner(), ctx)
    assert [r.type for r in results] == [
        "artifact.created",
        "message.completed",
        "state.updated",
        "state.updated",
        "run.completed",
    ]
    text, meta = final_message(results)
    assert text == "stub reply"
    assert meta["session_id"] == "stub-session-1"
    assert meta["num_turns"] == 1
    state = results[2]
    assert isinstance(state, StateUpdatedResult)
    assert (state.data.key, state.data.value) == ("external.session_id", "stub-session-1")
    done = results[-1]
    assert isinstance(done, RunCompletedResult)
    assert done.data.usage["total_tokens"] == 5
    assert done.data.usage["cost_usd"] == 0.001
    run = _record(tmp_path)[0]
    # stdin: the lines naming the context files, then the user's text; stdin was closed (the stub read EOF)
    assert run["stdin"].endswith("hello harness")
    assert "agent-context.json" in run["stdin"]
    assert run["argv"][:3] == ["-p", "--output-format", "json"]
    assert "--permission-mode" in run["argv"] and "plan" in run["argv"]
    assert run["env"]["ANTHROPIC_API_KEY"] == "sk-ant-secret-value"
    assert run["env"]["HOME"].endswith("/home")


async def test_the_cli_sees_no_host_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTRUNNER_API_TOKEN", "host-token-never-leaks")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-key-never-leaks")
    monkeypatch.setenv("LANG", "C.UTF-8")
    ctx = make_context("run_env", _config(tmp_path, "claude-json"), root=tmp_path / "ws")
    await collect(ClaudeCodeRunner(), ctx)
    env = _record(tmp_path)[0]["env"]
    assert "AGENTRUNNER_API_TOKEN" not in env and "OPENAI_API_KEY" not in env
    assert env["LANG"] == "C.UTF-8"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"


async def test_environment_json_refuses_credentials(tmp_path: Path) -> None:
    config = _config(tmp_path, "claude-json")
    config["environment-json"] = {**config["environment-json"], "GITHUB_TOKEN": "ghp_abcdefghijklmnop"}
    failed = _failed(
        await collect(ClaudeCodeRunner(), make_context("run_envsecret", config, root=tmp_path / "ws"))
    )
    assert failed.data.code == "claude_code.config_invalid"
    assert "GITHUB_TOKEN" in failed.data.message and "ghp_" not in failed.data.message


@pytest.mark.parametrize("runner", [ClaudeCodeRunner(), CodexRunner()], ids=["claude", "codex"])
async def test_nonzero_exit_is_cli_error_with_redacted_stderr(tmp_path: Path, runner: AgentRunner) -> None:
    results = await collect(
        runner, make_context("run_exit", _config(tmp_path, "exit3"), root=tmp_path / "ws")
    )
    failed = _failed(results)
    prefix = "claude_code" if isinstance(runner, ClaudeCodeRunner) else "codex"
    assert failed.data.code == f"{prefix}.cli_error"
    assert "could not reach the API" in failed.data.message
    assert "sk-stub-secret" not in failed.data.message
    assert failed.data.details["exit_code"] == 3
    stderr = [
        r
        for r in results
        if r.type == "artifact.created" and r.data.artifact.metadata["kind"] == "stderr-tail"
    ]
    assert len(stderr) == 1


@pytest.mark.parametrize("runner", [ClaudeCodeRunner(), CodexRunner()], ids=["claude", "codex"])
async def test_empty_output_is_empty_response(tmp_path: Path, runner: AgentRunner) -> None:
    failed = _failed(
        await collect(runner, make_context("run_empty", _config(tmp_path, "empty"), root=tmp_path / "ws"))
    )
    assert failed.data.code.endswith(".empty_response")


async def test_bad_json_is_a_cli_error_for_json_output(tmp_path: Path) -> None:
    failed = _failed(
        await collect(
            ClaudeCodeRunner(), make_context("run_bad", _config(tmp_path, "badjson"), root=tmp_path / "ws")
        )
    )
    assert failed.data.code == "claude_code.cli_error"
    assert "not JSON" in failed.data.message


async def test_bad_json_lines_are_ignored_in_jsonl(tmp_path: Path) -> None:
    failed = _failed(
        await collect(
            CodexRunner(), make_context("run_badl", _config(tmp_path, "badjson"), root=tmp_path / "ws")
        )
    )
    assert failed.data.code == "codex.empty_response"


@pytest.mark.parametrize("runner", [ClaudeCodeRunner(), CodexRunner()], ids=["claude", "codex"])
async def test_missing_binary_is_command_not_found(tmp_path: Path, runner: AgentRunner) -> None:
    config = {"cli-command": str(tmp_path / "no-such-cli")}
    failed = _failed(await collect(runner, make_context("run_missing", config, root=tmp_path / "ws")))
    assert failed.data.code.endswith(".command_not_found")


async def test_sleep_past_timeout_is_timeout_and_the_tree_is_gone(tmp_path: Path) -> None:
    config = _config(tmp_path, "grandchild-sleep", timeout=3)
    failed = _failed(
        await collect(ClaudeCodeRunner(), make_context("run_slow", config, root=tmp_path / "ws"))
    )
    assert failed.data.code == "claude_code.timeout"
    assert failed.data.retryable is True
    grandchild = int((tmp_path / "gc.pid").read_text())
    assert not pid_alive(grandchild)


async def test_a_grandchild_left_behind_is_gone_after_the_run(tmp_path: Path) -> None:
    results = await collect(
        ClaudeCodeRunner(), make_context("run_gc", _config(tmp_path, "grandchild"), root=tmp_path / "ws")
    )
    assert isinstance(results[-1], RunCompletedResult)
    assert not pid_alive(int((tmp_path / "gc.pid").read_text()))


async def test_cancel_kills_the_tree(tmp_path: Path) -> None:
    import asyncio

    ctx = make_context("run_cancel", _config(tmp_path, "grandchild-sleep"), root=tmp_path / "ws")
    task = asyncio.create_task(collect(ClaudeCodeRunner(), ctx))
    gc = tmp_path / "gc.pid"
    async with asyncio.timeout(60):
        while not gc.exists() or not gc.read_text():  # noqa: ASYNC110 - the stub's grandchild writes this file
            await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):  # noqa: PT011 - a cancellation has no message
        await task
    assert not pid_alive(int(gc.read_text()))


async def test_resume_passes_the_stored_session_and_falls_back_when_it_is_gone(tmp_path: Path) -> None:
    state = {"external.session_id": "old-session"}
    ctx = make_context(
        "run_resume", _config(tmp_path, "session-gone"), root=tmp_path / "ws", conversation_state=state
    )
    results = await collect(ClaudeCodeRunner(), ctx)
    assert isinstance(results[-1], RunCompletedResult)
    runs = _record(tmp_path)
    assert runs[0]["argv"][-2:] == ["--resume", "old-session"]
    assert "--resume" not in runs[1]["argv"]
    _, meta = final_message(results)
    assert meta["resume_fallback"] is True
    assert meta["session_id"] == "stub-session-fresh"


async def test_codex_command_line_and_resume(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        "codex-jsonl",
        **{"api-base-url": "http://127.0.0.1:9/v1", "api-key": "sk-codex-secret", "model": "fake-model"},
    )
    results = await collect(CodexRunner(), make_context("run_cx1", config, root=tmp_path / "ws"))
    assert isinstance(results[-1], RunCompletedResult)
    first = _record(tmp_path)[0]
    argv = first["argv"]
    assert argv[:2] == ["exec", "--json"] and argv[-1] == "-"
    assert "--sandbox" in argv and argv[argv.index("--sandbox") + 1] == "read-only"
    assert 'approval_policy="never"' in argv
    assert "sk-codex-secret" not in " ".join(argv)
    assert first["env"]["AGENTRUNNER_CODEX_API_KEY"] == "sk-codex-secret"
    assert first["env"]["CODEX_HOME"].endswith("codex-home")
    state = {"external.session_id": "stub-thread-1", "external.working_directory": first["cwd"]}
    results = await collect(
        CodexRunner(), make_context("run_cx2", config, root=tmp_path / "ws", conversation_state=state)
    )
    assert isinstance(results[-1], RunCompletedResult)
    second = _record(tmp_path)[1]
    assert second["argv"][:3] == ["exec", "resume", "stub-thread-1"]
    assert "--sandbox" not in second["argv"]
    assert second["cwd"] == first["cwd"]


async def test_rlimits_apply_to_the_cli(tmp_path: Path) -> None:
    config = _config(tmp_path, "claude-json", **{"cpu-time-limit": 120, "memory-limit-mb": 4096})
    results = await collect(ClaudeCodeRunner(), make_context("run_rl", config, root=tmp_path / "ws"))
    assert isinstance(results[-1], RunCompletedResult)
    assert (tmp_path / "record.json").is_file()


async def _enter_with_a_blocked_prompt(
    tmp_path: Path, then: str
) -> tuple[HarnessProcess, asyncio.Task[None], int]:
    """Start a CLI that writes its pid and then runs *then* (Python), with a prompt larger than a pipe buffer,
    inside ``async with`` entry; return once the write is blocked in it."""
    pid_file = tmp_path / "cli.pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n{then}"
    process = HarnessProcess(
        [sys.executable, "-c", script], cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, stdin=b"x" * (4 << 20)
    )

    async def enter() -> None:
        async with process:
            pytest.fail("the prompt cannot have been written")

    task = asyncio.create_task(enter())
    # Both: the CLI says it started, and create_subprocess_exec has returned (the child runs before asyncio
    # has connected its pipes; a cancel there is asyncio's to clean up, and these tests are about the write).
    # With the process object set, nothing awaits before the blocked write, so a cancel lands in it.
    while process._proc is None or not pid_file.exists() or not pid_file.read_text():  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    return process, task, int(pid_file.read_text())


async def _cancel_and_expect_reaped(process: HarnessProcess, task: asyncio.Task[None], pid: int) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):  # noqa: PT011 - a cancellation has no message
        await task
    assert process.returncode is not None, "the CLI was reaped before the cancellation went on"
    assert not pid_alive(pid)
    gc.collect()  # a transport of a live process would warn here (filterwarnings=error)


async def _kill_if_left(process: HarnessProcess, pid: int) -> None:
    if pid_alive(pid):  # only when the assertions failed: do not leave it for the loop's close
        os.kill(pid, signal.SIGKILL)
        await asyncio.wait_for(process.wait(), 60)


async def test_a_run_cancelled_while_the_prompt_is_written_leaves_no_cli_behind(tmp_path: Path) -> None:
    """Cancelled inside ``async with`` entry (the CLI is not reading its prompt yet): the CLI is killed and
    reaped there. Before, the body never ran, so nothing ended the process, and its transport was later
    collected with the CLI still running, which asyncio reports as a ResourceWarning."""
    # The CLI never reads stdin: writing the prompt blocks.
    process, task, pid = await _enter_with_a_blocked_prompt(tmp_path, "time.sleep(600)")
    try:
        await _cancel_and_expect_reaped(process, task, pid)
    finally:
        await _kill_if_left(process, pid)


async def test_a_cancel_as_the_cli_closes_its_stdin_mid_prompt_stays_a_cancellation(tmp_path: Path) -> None:
    """The CLI closes its stdin while the prompt is blocked on a full pipe, and the run is cancelled in the
    same turn of the loop: the run ends cancelled and the CLI is reaped. Before, the write's cleanup aborted the
    already-closed pipe, and asyncio's AttributeError (``'NoneType' object has no attribute '_remove_reader'``)
    replaced the cancellation (seen in the codex conformance check under load)."""
    close_now = tmp_path / "close-now"
    process, task, pid = await _enter_with_a_blocked_prompt(
        tmp_path,
        f"while not os.path.exists({str(close_now)!r}): time.sleep(0.01)\nos.close(0); time.sleep(600)",
    )
    try:
        assert process._proc is not None
        stdin = process._proc.stdin
        assert stdin is not None
        close_now.touch()
        # One loop turn at a time: the cancel lands in the turn the transport starts closing, before the
        # blocked drain hears of it.
        while not stdin.transport.is_closing():  # noqa: ASYNC110 - nothing signals it; poll turn by turn
            await asyncio.sleep(0)
        await _cancel_and_expect_reaped(process, task, pid)
    finally:
        await _kill_if_left(process, pid)
