"""Extra MCP servers of a harness binding are pinned by the operator: command and args, or URL, not a name.

The host's ``[[security.harness_mcp_servers]]`` becomes ``runtime.metadata['harness']`` through the host's own
``HarnessPolicy.metadata()``; the Claude Code runner (with the stub CLI, a fake) then accepts a binding's
``mcp-config-json`` entry only when it matches its pin, and the CLI never starts otherwise.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from agentrunner import AgentRunContext, RunCompletedResult, RunFailedResult
from agentrunner_host.config import ConfigFileError, HarnessMCPServer, parse_config
from agentrunner_host.harness import HarnessPolicy
from agentrunner_runner_claude_code import ClaudeCodeRunner
from harness_helpers import collect, make_context, stub_command

FILES = HarnessMCPServer(
    name="files",
    command="npx",
    args=["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"],
    env=["FS_READONLY"],
)
SEARCH = HarnessMCPServer(name="search", url="https://mcp.example/search")
FILES_ENTRY: dict[str, Any] = {
    "command": "npx",
    "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"],
}


def _context(tmp_path: Path, run_id: str, servers: dict[str, Any], *, pins: bool = True) -> AgentRunContext:
    config = {
        "cli-command": stub_command(tmp_path),
        "environment-json": {"STUB_MODE": "claude-json", "STUB_RECORD": str(tmp_path / f"{run_id}.json")},
        "mcp-config-json": {"mcpServers": servers},
    }
    ctx = make_context(run_id, config, root=tmp_path / "ws")
    policy = HarnessPolicy(workspace_root=tmp_path / "ws", mcp_servers=(FILES, SEARCH) if pins else ())
    metadata: dict[str, Any] = dict(ctx.runtime.metadata)
    metadata["harness"] = policy.metadata()
    if not pins:  # a host that sends the allowed names only, without what they must run
        metadata["harness"] = {**policy.metadata(), "mcp_server_allowlist": ["files", "search"]}
    runtime = ctx.runtime.model_copy(update={"metadata": metadata})
    return ctx.model_copy(update={"runtime": runtime})


def _mcp_config_seen_by_the_cli(tmp_path: Path, run_id: str) -> dict[str, Any]:
    [run] = json.loads((tmp_path / f"{run_id}.json").read_text())
    argv: list[str] = run["argv"]
    return json.loads(Path(argv[argv.index("--mcp-config") + 1]).read_text())


async def test_servers_matching_their_pins_reach_the_cli_as_given(tmp_path: Path) -> None:
    """The exact pinned command and args (with an allowed variable), and the pinned URL with headers."""
    servers = {
        "files": {**FILES_ENTRY, "env": {"FS_READONLY": "1"}},
        "search": {"type": "http", "url": "https://mcp.example/search", "headers": {"X-Key": "k"}},
    }
    done = (await collect(ClaudeCodeRunner(), _context(tmp_path, "run_ok", servers)))[-1]
    assert isinstance(done, RunCompletedResult), done
    assert _mcp_config_seen_by_the_cli(tmp_path, "run_ok") == {"mcpServers": servers}


@pytest.mark.parametrize(
    ("servers", "why"),
    [
        ({"other": FILES_ENTRY}, "'other' is not in the operator's allowlist"),
        ({"files": {**FILES_ENTRY, "command": "/tmp/evil"}}, "must run the pinned command 'npx'"),
        ({"files": {**FILES_ENTRY, "args": [*FILES_ENTRY["args"], "/"]}}, "exactly the pinned arguments"),
        (
            {"files": {**FILES_ENTRY, "args": list(reversed(FILES_ENTRY["args"]))}},
            "exactly the pinned arguments",
        ),
        ({"files": {**FILES_ENTRY, "env": {"NODE_OPTIONS": "--require /tmp/x.js"}}}, "NODE_OPTIONS"),
        ({"files": {**FILES_ENTRY, "cwd": "/"}}, "sets cwd"),
        ({"files": {"type": "http", "url": "https://mcp.example/search"}}, "sets url"),
        ({"search": {"type": "http", "url": "https://evil.example/search"}}, "must reach the pinned URL"),
        ({"search": {**FILES_ENTRY}}, "sets args, command"),
    ],
)
async def test_a_server_that_differs_from_its_pin_is_refused_before_the_cli_starts(
    tmp_path: Path, servers: dict[str, Any], why: str
) -> None:
    """Another program, other or reordered arguments, an unpinned variable or key, another URL, or another
    transport under a pinned name: ``config_invalid`` naming what differs, and no CLI process."""
    failed = (await collect(ClaudeCodeRunner(), _context(tmp_path, "run_bad", servers)))[-1]
    assert isinstance(failed, RunFailedResult) and failed.data.code == "claude_code.config_invalid"
    assert why in failed.data.message and "harness_mcp_servers" in failed.data.message
    assert not (tmp_path / "run_bad.json").exists()


async def test_names_without_pins_allow_nothing(tmp_path: Path) -> None:
    """A policy that lists names but no pins (an older host) lets no extra server through."""
    failed = (
        await collect(ClaudeCodeRunner(), _context(tmp_path, "run_np", {"files": FILES_ENTRY}, pins=False))
    )[-1]
    assert isinstance(failed, RunFailedResult) and "not in the operator's allowlist" in failed.data.message


def test_the_configuration_refuses_bare_names_and_ambiguous_pins() -> None:
    """``harness_mcp_servers = ["docs"]`` names no program: refused with the form to write instead; a pin
    has exactly one of command and url; names are unique."""
    for toml, message in [
        ('[security]\nharness_mcp_servers = ["docs"]\n', 'is a bare name: pin what it runs, { name = "docs"'),
        (
            '[[security.harness_mcp_servers]]\nname = "d"\ncommand = "x"\nurl = "https://a.example"\n',
            "needs exactly one of command or url",
        ),
        ('[[security.harness_mcp_servers]]\nname = "d"\n', "needs exactly one of command or url"),
        (
            '[[security.harness_mcp_servers]]\nname = "d"\nurl = "https://a.example"\nargs = ["x"]\n',
            "args and env belong to a command",
        ),
        (
            '[[security.harness_mcp_servers]]\nname = "d"\nurl = "https://a.example"\n'
            '[[security.harness_mcp_servers]]\nname = "d"\nurl = "https://b.example"\n',
            "duplicate id 'd'",
        ),
    ]:
        with pytest.raises(ConfigFileError, match="harness") as info:
            parse_config(tomllib.loads(toml), source="agentrunner.toml")
        assert message in str(info.value), (toml, str(info.value))
    config = parse_config(
        tomllib.loads(
            '[[security.harness_mcp_servers]]\nname = "files"\ncommand = "npx"\nargs = ["-y", "pkg"]\n'
            '[[security.harness_mcp_servers]]\nname = "search"\nurl = "https://mcp.example/search"\n'
        ),
        source="agentrunner.toml",
    )
    assert [s.pin() for s in config.security.harness_mcp_servers] == [
        {"command": "npx", "args": ["-y", "pkg"], "env": []},
        {"url": "https://mcp.example/search"},
    ]
