"""Default off: a code-executing runner is refused unless the operator enables it (at load and on events)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from agentrunner_harness import HOST_BRIDGE_METADATA_KEY as KIT_BRIDGE_KEY
from agentrunner_host.config import Settings, load_settings
from agentrunner_host.errors import CodeExecutionDisabledError
from agentrunner_host.harness import BRIDGE_METADATA_KEY, CODE_EXECUTION_SWITCH
from agentrunner_host.http import create_app
from agentrunner_host.service import HostService
from agentrunner_mcp import HOST_BRIDGE_METADATA_KEY

CLAUDE = "plugin:langbot/claude-code-agent/default"
CODEX = "plugin:langbot/codex-agent/default"
SWITCH = "allow_code_executing_runners"


def _settings(tmp_path: Path, toml: str) -> Settings:
    path = tmp_path / "agentrunner.toml"
    path.write_text(toml, encoding="utf-8")
    return load_settings(path, environ={"AGENTRUNNER_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)


def _agent(runner: str) -> str:
    return f"""
[[agents]]
agent_id = "coder"
runner_id = "{runner}"

[[bindings]]
binding_id = "coder"
agent_id = "coder"
"""


@pytest.mark.parametrize("runner", [CLAUDE, CODEX])
async def test_config_load_refuses_a_code_executing_runner_and_names_the_switch(
    tmp_path: Path, runner: str
) -> None:
    with pytest.raises(
        CodeExecutionDisabledError, match=r"unavailable: it executes code \(an external harness\)"
    ) as info:
        async with HostService.open(_settings(tmp_path, _agent(runner))):
            pass
    assert SWITCH in info.value.message and "[security]" in info.value.message
    assert info.value.runner_id == runner


async def test_with_the_switch_the_service_opens_and_starts_one_bridge(tmp_path: Path) -> None:
    toml = "[security]\nallow_code_executing_runners = true\n" + _agent(CLAUDE)
    async with HostService.open(_settings(tmp_path, toml)) as service:
        harness = service.host.orchestrator.harness
        assert harness is not None and harness.bridge is not None
        assert harness.bridge.url.startswith("http://127.0.0.1:")
        assert harness.policy.workspace_root == tmp_path / "data" / "harness"
    assert harness.bridge is None  # stopped with the service


async def test_an_event_for_a_code_executing_agent_is_refused_with_a_typed_error(tmp_path: Path) -> None:
    async with HostService.open(_settings(tmp_path, "")) as service:
        app = create_app(service, api_token=None)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8420"
        ) as client:
            created = await client.post("/v1/agents", json={"agent_id": "coder", "runner_id": CODEX})
            assert created.status_code == 201
            bound = await client.post(
                "/v1/bindings",
                json={"binding_id": "coder", "agent_id": "coder", "scope": {"type": "bot", "id": "b1"}},
            )
            assert bound.status_code == 201
            response = await client.post(
                "/v1/events", json={"text": "hi", "conversation_id": "c1", "bot_id": "b1"}
            )
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "code_execution_disabled"
    assert SWITCH in error["message"]


def test_the_switch_and_metadata_keys_are_one_truth() -> None:
    assert SWITCH in CODE_EXECUTION_SWITCH
    assert BRIDGE_METADATA_KEY == HOST_BRIDGE_METADATA_KEY == KIT_BRIDGE_KEY


async def test_a_run_gets_the_hosts_bridge_endpoint_and_token(tmp_path: Path) -> None:
    """The run is registered on the service's one bridge; the CLI is handed that endpoint (no bridge per run)."""
    import json

    from harness_helpers import stub_command

    record = tmp_path / "record.json"
    toml = (
        "[security]\nallow_code_executing_runners = true\n"
        + _agent(CLAUDE)
        + f'\n[agents.runner_config]\n"cli-command" = "{stub_command(tmp_path)}"\n'
        + f'"environment-json" = {{ STUB_MODE = "claude-json", STUB_RECORD = "{record}" }}\n'
    )
    async with HostService.open(_settings(tmp_path, toml)) as service:
        harness = service.host.orchestrator.harness
        assert harness is not None and harness.bridge is not None
        app = create_app(service, api_token=None)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8420"
        ) as client:
            response = await client.post("/v1/events?wait=true", json={"text": "hi", "conversation_id": "c1"})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["run"]["status"] == "completed", body
        argv = json.loads(record.read_text())[0]["argv"]
        config = json.loads(Path(argv[argv.index("--mcp-config") + 1]).read_text())  # noqa: ASYNC240
        server = config["mcpServers"]["agentrunner"]
        assert server["url"] == harness.bridge.url
        assert (
            server["headers"]["Authorization"] == "Bearer ${AGENTRUNNER_MCP_TOKEN}"
        )  # the token is not in the file
        assert "mcp__agentrunner__history_page" in argv[argv.index("--allowedTools") + 1]
        workdir = Path(json.loads(record.read_text())[0]["cwd"])
        assert workdir.is_relative_to((tmp_path / "data" / "harness").resolve())
