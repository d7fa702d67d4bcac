"""Workspace expiry: the host's sweep deletes per-session harness workspaces unused past their TTL, never one a
run holds, never a binding's own directory; the next turn starts a fresh workspace and native session.

Real files, real ``flock`` locks, the Claude Code runner driving the stub CLI (a fake) and the real service's
sweep configured from ``agentrunner.toml``.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from agentrunner_harness import (
    WORKSPACE_MARKER,
    WorkspaceLease,
    WorkspacePolicy,
    parse_skills,
    project_skills,
)
from agentrunner_host.config import load_settings
from agentrunner_host.service import HostService
from agentrunner_host.workspaces import WORKSPACE_MARKER as HOST_MARKER
from agentrunner_host.workspaces import sweep_workspaces
from agentrunner_runner_claude_code import ClaudeCodeRunner
from harness_helpers import collect, final_message, make_context, stub_command

DAY = 86400.0


def _age(workspace: Path, seconds: float) -> None:
    """Make *workspace*'s last use *seconds* ago."""
    past = time.time() - seconds
    marker = workspace / WORKSPACE_MARKER
    if marker.exists():
        os.utime(marker, (past, past))
    os.utime(workspace, (past, past))


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _workspace(root: Path, name: str, *, marker: bool = True) -> Path:
    path = root / "sessions" / name
    path.mkdir(parents=True)
    (path / "notes.txt").write_text("work")
    if marker:
        (path / WORKSPACE_MARKER).touch()
    return path


def test_the_host_and_the_harness_kit_agree_on_the_marker() -> None:
    assert HOST_MARKER == WORKSPACE_MARKER


def test_only_expired_unheld_session_workspaces_are_deleted(tmp_path: Path) -> None:
    """Old → deleted (read-only projected skills included); recent, held by a run, or a symlink out of the
    sessions directory → kept; a workspace without a marker is judged by its directory's time."""
    root = tmp_path / "harness"
    old = _workspace(root, "old")
    project_skills(parse_skills([{"name": "notes", "content": "# Notes"}]), old / ".claude" / "skills")
    recent = _workspace(root, "recent")
    held = _workspace(root, "held")
    unmarked = _workspace(root, "unmarked", marker=False)
    outside = tmp_path / "repo"
    outside.mkdir()
    _age(outside, 10 * DAY)
    (root / "sessions" / "link").symlink_to(outside)
    for workspace in (old, held, unmarked):
        _age(workspace, 10 * DAY)
    _age(recent, 1 * DAY)
    fd = os.open(held / WORKSPACE_MARKER, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # as a running harness holds it
        removed = sweep_workspaces(root, ttl_seconds=7 * DAY)
    finally:
        os.close(fd)
    assert removed == ["old", "unmarked"]
    assert not old.exists() and not unmarked.exists()
    assert recent.is_dir() and held.is_dir() and outside.is_dir()
    assert sweep_workspaces(root, ttl_seconds=0) == []  # 0 keeps everything
    assert sweep_workspaces(root, ttl_seconds=7 * DAY) == ["held"]  # once the run let go of it


async def test_a_run_holds_its_workspace_and_marks_its_use(tmp_path: Path) -> None:
    """While leased the workspace survives any age; releasing marks the use, so it is not expired at once."""
    policy = WorkspacePolicy(root=tmp_path / "harness")
    workdir = _real(_workspace(policy.root, "s1"))
    lease = await WorkspaceLease.acquire(policy, workdir)
    _age(workdir, 10 * DAY)
    assert sweep_workspaces(policy.root, ttl_seconds=7 * DAY) == []
    lease.release()
    assert sweep_workspaces(policy.root, ttl_seconds=7 * DAY) == []
    assert time.time() - (workdir / WORKSPACE_MARKER).stat().st_mtime < 7 * DAY
    configured = tmp_path / "repo"
    configured.mkdir()
    (await WorkspaceLease.acquire(policy, configured)).release()
    assert not (configured / WORKSPACE_MARKER).exists()  # a binding's own directory gets no marker


async def test_a_run_reaching_a_workspace_being_deleted_gets_a_fresh_one(tmp_path: Path) -> None:
    """The sweep holds the exclusive lock while it deletes; a run arriving meanwhile waits, then recreates the
    directory and holds the new marker."""
    policy = WorkspacePolicy(root=tmp_path / "harness")
    workdir = _real(_workspace(policy.root, "s2"))
    fd = os.open(workdir / WORKSPACE_MARKER, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    acquiring = asyncio.create_task(WorkspaceLease.acquire(policy, workdir))
    await asyncio.sleep(0)  # let it start (it waits for the lock, or finds the directory gone)
    shutil.rmtree(workdir)
    os.close(fd)
    lease = await asyncio.wait_for(acquiring, 60)
    try:
        assert (workdir / WORKSPACE_MARKER).is_file()
        assert not (workdir / "notes.txt").exists()
    finally:
        lease.release()


def _config(tmp_path: Path) -> dict[str, Any]:
    env = {"STUB_MODE": "claude-json", "STUB_RECORD": str(tmp_path / "record.json")}
    return {"cli-command": stub_command(tmp_path), "environment-json": env}


async def test_the_next_turn_after_expiry_starts_a_fresh_workspace_and_session(tmp_path: Path) -> None:
    """Turn 1 works in a session workspace; the service's sweep (TTL from the configuration) deletes it once
    unused past the TTL; turn 2, given the stored directory and session id, neither resumes the lost
    session nor fails: a fresh workspace, no ``--resume``, ``resume_fallback`` true."""
    data_dir = tmp_path / "data"
    root = data_dir / "harness"
    first = await collect(ClaudeCodeRunner(), make_context("run_e1", _config(tmp_path), root=root))
    _, meta = final_message(first)
    workdir = Path(meta["working_directory"])
    assert workdir.parent == _real(root / "sessions")
    assert (workdir / WORKSPACE_MARKER).is_file()
    _age(workdir, 2 * DAY)

    config = tmp_path / "agentrunner.toml"
    config.write_text("[security]\nharness_workspace_ttl_seconds = 86400\n")
    settings = load_settings(config, environ={"AGENTRUNNER_DATA_DIR": str(data_dir)}, cwd=tmp_path)
    async with HostService.open(settings) as service:
        assert await service.sweep_workspaces() == [workdir.name]
    assert not os.path.lexists(workdir)  # noqa: ASYNC240 - a test's check, nothing else runs

    state = {"external.session_id": meta["session_id"], "external.working_directory": str(workdir)}
    second = await collect(
        ClaudeCodeRunner(), make_context("run_e2", _config(tmp_path), root=root, conversation_state=state)
    )
    _, meta2 = final_message(second)
    assert meta2["resume_fallback"] is True
    assert os.path.isdir(meta2["working_directory"])  # noqa: ASYNC240 - a test's check
    runs = json.loads((tmp_path / "record.json").read_text())
    assert len(runs) == 2 and "--resume" not in runs[1]["argv"]
