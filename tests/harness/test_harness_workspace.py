"""Workspace rules: allowlist after realpath, relative context directories, skills read-only with digests."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from agentrunner import RunCompletedResult, RunFailedResult
from agentrunner_harness import (
    CONTEXT_SCHEMA,
    HarnessFailure,
    WorkspacePolicy,
    context_directory,
    parse_skills,
    project_skills,
    resolve_working_directory,
)
from agentrunner_runner_claude_code import ClaudeCodeRunner
from harness_helpers import collect, final_message, make_context, stub_command

pytestmark = pytest.mark.asyncio


def _policy(tmp_path: Path, *allowed: Path) -> WorkspacePolicy:
    return WorkspacePolicy(root=tmp_path / "ws", allowed_roots=allowed)


def _kind(call: object) -> str:
    with pytest.raises(HarnessFailure) as info:  # noqa: PT011 - the failure's kind is the contract: callers check it
        call()  # type: ignore[operator]
    return info.value.kind


async def test_dotdot_out_of_the_allowlist_is_path_denied(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    policy = _policy(tmp_path)
    assert (
        _kind(
            lambda: resolve_working_directory(
                policy, configured=str(tmp_path / "ws" / ".." / "outside"), stored=None, session_key="k"
            )
        )
        == "path_denied"
    )
    assert (
        _kind(
            lambda: resolve_working_directory(policy, configured="../outside", stored=None, session_key="k")
        )
        == "path_denied"
    )


async def test_a_symlink_out_of_the_allowlist_is_path_denied(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "secret").mkdir()
    os.symlink(tmp_path / "secret", tmp_path / "ws" / "link")
    policy = _policy(tmp_path)
    assert (
        _kind(
            lambda: resolve_working_directory(
                policy, configured=str(tmp_path / "ws" / "link"), stored=None, session_key="k"
            )
        )
        == "path_denied"
    )


async def test_an_allowed_root_is_accepted_and_a_missing_one_is_not_found(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    policy = _policy(tmp_path, tmp_path / "project")
    assert (
        resolve_working_directory(policy, configured=str(project), stored=None, session_key="k")
        == project.resolve()
    )
    kind = _kind(
        lambda: resolve_working_directory(
            policy, configured=str(project / "nope"), stored=None, session_key="k"
        )
    )
    assert kind == "working_directory_not_found"


async def test_context_directory_must_be_relative_and_stay_inside(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", work / "escape")
    assert _kind(lambda: context_directory(work, "/etc/langbot")) == "path_denied"
    assert _kind(lambda: context_directory(work, "a/../../x")) == "path_denied"
    assert _kind(lambda: context_directory(work, "escape/ctx")) == "path_denied"
    assert context_directory(work, ".langbot/agent-runner") == work / ".langbot" / "agent-runner"


async def test_runner_reports_path_codes(tmp_path: Path) -> None:
    config = {"cli-command": stub_command(tmp_path), "working-directory": "/etc"}
    failed = (await collect(ClaudeCodeRunner(), make_context("run_p1", config, root=tmp_path / "ws")))[-1]
    assert isinstance(failed, RunFailedResult) and failed.data.code == "claude_code.path_denied"
    config = {"cli-command": stub_command(tmp_path), "context-directory": "/tmp/abs"}
    failed = (await collect(ClaudeCodeRunner(), make_context("run_p2", config, root=tmp_path / "ws")))[-1]
    assert isinstance(failed, RunFailedResult) and failed.data.code == "claude_code.path_denied"


async def test_skills_are_projected_read_only_with_digests(tmp_path: Path) -> None:
    target = tmp_path / "skills"
    target.mkdir()
    skills = parse_skills(
        [
            {
                "name": "Greeting Skill",
                "content": "# Greet\nSay hi.",
                "files": [{"path": "ref/a.txt", "content": "A"}],
            }
        ]
    )
    projected = project_skills(skills, target)
    assert projected[0].directory == "Greeting-Skill"
    skill_md = target / "Greeting-Skill" / "SKILL.md"
    assert skill_md.read_text() == "# Greet\nSay hi."
    assert not os.access(skill_md, os.W_OK) or os.geteuid() == 0
    assert skill_md.stat().st_mode & 0o222 == 0
    assert dict(projected[0].files)["SKILL.md"] == hashlib.sha256(b"# Greet\nSay hi.").hexdigest()
    # a second projection replaces the read-only one
    assert project_skills(skills, target)[0].files == projected[0].files
    bad = parse_skills([{"name": "x", "content": "c", "files": [{"path": "../evil", "content": "e"}]}])
    assert _kind(lambda: project_skills(bad, target)) == "context_injection_error"


async def test_run_metadata_names_the_skills_and_the_context_is_projected(tmp_path: Path) -> None:
    config = {
        "cli-command": stub_command(tmp_path),
        "environment-json": {"STUB_MODE": "claude-json"},
        "skills-json": {"skills": [{"title": "notes", "markdown": "# Notes"}]},
    }
    results = await collect(ClaudeCodeRunner(), make_context("run_sk", config, root=tmp_path / "ws"))
    assert isinstance(results[-1], RunCompletedResult)
    _, meta = final_message(results)
    skills = meta["skills"]
    assert skills[0]["name"] == "notes"
    assert skills[0]["files"][0]["sha256"] == hashlib.sha256(b"# Notes").hexdigest()
    workdir = Path(meta["working_directory"])
    assert (workdir / ".claude" / "skills" / "notes" / "SKILL.md").is_file()
    run_dir = workdir / ".langbot" / "agent-runner" / "run_sk"
    import json

    doc = json.loads((run_dir / "agent-context.json").read_text())
    assert doc["schema"] == CONTEXT_SCHEMA
    for key in ("event", "input", "delivery", "resources", "context", "state", "runtime"):
        assert key in doc
    assert "config" not in doc and "skills-json" not in (run_dir / "agent-context.json").read_text()
    assert (run_dir / "LANGBOT_CONTEXT.md").read_text().startswith("# LangBot Run Context")


async def test_extra_mcp_servers_need_the_operator_allowlist(tmp_path: Path) -> None:
    servers = {"mcpServers": {"docs": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}}
    config = {
        "cli-command": stub_command(tmp_path),
        "environment-json": {"STUB_MODE": "claude-json"},
        "mcp-config-json": servers,
    }
    failed = (await collect(ClaudeCodeRunner(), make_context("run_m1", config, root=tmp_path / "ws")))[-1]
    assert isinstance(failed, RunFailedResult) and failed.data.code == "claude_code.config_invalid"
    assert "harness_mcp_servers" in failed.data.message
    done = (
        await collect(
            ClaudeCodeRunner(),
            make_context(
                "run_m2",
                config,
                root=tmp_path / "ws",
                mcp_servers={"docs": {"url": "http://127.0.0.1:1/mcp"}},
            ),
        )
    )[-1]
    assert isinstance(done, RunCompletedResult)
