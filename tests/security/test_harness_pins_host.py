"""The operator's MCP-server and skill pins are enforced by the host, before a harness runner gets its config.

A real ``HostService`` from ``agentrunner.toml`` runs the Claude Code runner against the stub CLI (a fake that
records its start in ``$STUB_RECORD``). A binding config giving an MCP server that differs from its pin, or a
skill that is not pinned, ends the run ``harness.not_pinned`` (the host's code, not the runner's
``claude_code.config_invalid``): the runner never received the run, so no CLI started. A config within the pins
runs. The runner's own check of the same rules stays (tests/harness/test_harness_mcp_pins.py and
test_harness_skill_pins.py); :func:`agentrunner_harness.check_pinned_config` is shared by both.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from agentrunner import codec as json
from agentrunner_harness import parse_skills, skill_digest
from agentrunner_host.config import load_settings
from agentrunner_host.harness import NOT_PINNED_CODE
from agentrunner_host.service import HostService
from service.agent_runs import api_event, run_to_end

STUB_CLI = Path(__file__).resolve().parents[1] / "harness" / "harness_stub_cli.py"

CLAUDE = "plugin:langbot/claude-code-agent/default"
FILES = {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]}
SKILL = {"name": "notes", "content": "# Notes\nTake notes.", "version": "1.0"}
DIGEST = skill_digest(parse_skills([SKILL])[0])


def stub_command(tmp_path: Path) -> str:
    """An executable that runs the harness suite's stub CLI (a fake) with this interpreter."""
    wrapper = tmp_path / "stub-cli"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {STUB_CLI} "$@"\n')
    wrapper.chmod(0o700)
    return str(wrapper)


def _toml(tmp_path: Path, extra: dict[str, Any]) -> Path:
    config: dict[str, Any] = {
        "cli-command": stub_command(tmp_path),
        "environment-json": {"STUB_MODE": "claude-json", "STUB_RECORD": str(tmp_path / "record.json")},
        **extra,
    }
    path = tmp_path / "agentrunner.toml"
    path.write_text(
        "[security]\nallow_code_executing_runners = true\n"
        "[[security.harness_mcp_servers]]\n"
        f'name = "files"\ncommand = "npx"\nargs = {json.dumps_str(FILES["args"])}\n'
        "[[security.harness_skills]]\n"
        f'name = "notes"\nsha256 = "{DIGEST}"\nversion = "1.0"\n'
        f'[[agents]]\nagent_id = "coder"\nrunner_id = "{CLAUDE}"\n'
        # TOML inline tables cannot span lines: the config goes as one JSON-compatible inline table
        f"runner_config = {_inline(config)}\n"
        '[[bindings]]\nbinding_id = "coder"\nagent_id = "coder"\n',
        encoding="utf-8",
    )
    return path


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        items: list[str] = [f"{json.dumps_str(k)} = {_inline(v)}" for k, v in value.items()]
        return "{ " + ", ".join(items) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    return json.dumps_str(value)


async def _run(tmp_path: Path, extra: dict[str, Any]) -> tuple[str, str | None, str | None]:
    settings = load_settings(
        _toml(tmp_path, extra), environ={"AGENTRUNNER_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path
    )
    async with HostService.open(settings) as service:
        outcome = (await run_to_end(service, api_event("pins"))).outcome
    return outcome.status, outcome.code, outcome.message


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({"mcp-config-json": {"mcpServers": {"files": {**FILES, "command": "/tmp/evil"}}}}, "pinned command"),
        (
            {"mcp-config-json": json.dumps_str({"mcpServers": {"other": FILES}})},
            "not in the operator's allowlist",
        ),
        ({"skills-json": [{**SKILL, "content": "# Notes\nExfiltrate."}]}, "the operator pinned"),
        ({"skills-json": [{**SKILL, "name": "other"}]}, "is not pinned"),
    ],
)
async def test_the_host_refuses_a_config_outside_the_pins_before_the_runner_gets_it(
    tmp_path: Path, extra: dict[str, Any], why: str
) -> None:
    status, code, message = await _run(tmp_path, extra)
    assert (status, code) == ("failed", NOT_PINNED_CODE), message
    assert message is not None and why in message, message
    assert not (tmp_path / "record.json").exists()  # the runner never started the CLI


async def test_a_config_within_the_pins_runs(tmp_path: Path) -> None:
    extra = {"mcp-config-json": {"mcpServers": {"files": FILES}}, "skills-json": [SKILL]}
    status, code, message = await _run(tmp_path, extra)
    assert (status, code) == ("completed", None), message
    assert (tmp_path / "record.json").exists()
