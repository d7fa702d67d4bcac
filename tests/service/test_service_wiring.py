"""How the service is assembled from the configuration: providers, catalog, default runner, plugin runtime."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentrunner_host.config import ECHO_RUNNER_ID, LOCAL_AGENT_RUNNER_ID, ConfigFileError
from agentrunner_host.runtime import SubprocessRunnerConnection
from agentrunner_host.service import HostService
from agentrunner_host.service.host_service import default_runner_for

from .conftest import SettingsFactory, client_for
from .fakes import SECRET_RUNNER_ID, FakeSecretiveRunner

MODEL = """
[[models]]
id = "small"
base_url = "http://127.0.0.1:9/v1"
model = "small-1"
api_key_env = "SMALL_KEY"
"""


async def test_configured_models_and_knowledge_bases_reach_the_catalog(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    """Provider sections are built into providers, and their resources are what runs can be granted."""
    kb_dir = tmp_path / "kb"
    kb_dir.mkdir()
    (kb_dir / "faq.md").write_text("# Opening hours\n\nWe open at nine.\n", encoding="utf-8")
    toml = MODEL + '\n[[knowledge_bases]]\nid = "faq"\nname = "FAQ"\npaths = ["kb"]\n'
    settings = make_settings(toml, environ={"SMALL_KEY": "k"})
    async with HostService.open(settings) as service:
        catalog = service.host.catalog
        assert set(catalog.models) == {"small"} and catalog.models["small"].name == "small-1"
        assert set(catalog.knowledge_bases) == {"faq"}
        assert service.host.dispatcher is not None
    assert (settings.data_dir / "knowledge.db").exists()


def test_the_default_runner_is_local_agent_once_a_model_is_configured(make_settings: SettingsFactory) -> None:
    """Echo without models; local-agent on the first LLM with one (if installed); the file's choice first."""
    bare = make_settings()
    assert default_runner_for(bare, {ECHO_RUNNER_ID, LOCAL_AGENT_RUNNER_ID}) == (ECHO_RUNNER_ID, {})
    with_model = make_settings(MODEL)
    assert default_runner_for(with_model, {ECHO_RUNNER_ID, LOCAL_AGENT_RUNNER_ID}) == (
        LOCAL_AGENT_RUNNER_ID,
        {"model": "small"},
    )
    assert default_runner_for(with_model, {ECHO_RUNNER_ID}) == (ECHO_RUNNER_ID, {})
    assert default_runner_for(with_model, set()) == (None, {})
    chosen = make_settings('[defaults]\nrunner_id = "plugin:x/y/z"\nrunner_config = { a = 1 }\n')
    assert default_runner_for(chosen, set()) == ("plugin:x/y/z", {"a": 1})


PLUGINS = Path(__file__).resolve().parent.parent / "runtime" / "plugins"


async def test_a_runner_from_a_plugin_directory_runs_out_of_process(make_settings: SettingsFactory) -> None:
    """A plugin directory becomes a supervised child process; an agent bound to its runner answers over HTTP."""
    toml = f"""
[runners]
plugin_dirs = ["{PLUGINS}"]

[[agents]]
agent_id = "outside"
runner_id = "plugin:tests/echo/streamer"
runner_config = {{ count = 3 }}

[[bindings]]
binding_id = "outside"
agent_id = "outside"
scope = {{ type = "conversation", id = "out" }}
"""
    async with HostService.open(make_settings(toml)) as service, client_for(service) as client:
        assert "tests/echo" in {c.plugin_id for c in service.host.registry.connections()}
        answer = (
            await client.post("/v1/events?wait=true", json={"text": "x", "conversation_id": "out"})
        ).json()
    assert (
        answer["run"]["status"] == "completed" and answer["run"]["runner_id"] == "plugin:tests/echo/streamer"
    )
    completed = next(r for r in answer["results"] if r["type"] == "message.completed")
    assert completed["result"]["data"]["message"]["content"] == "done"


async def test_a_literal_value_for_a_field_the_runner_marks_secret_is_refused_at_start(
    make_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The manifest knows what the loader cannot: ``access_code`` is secret, so the file may only reference it."""
    monkeypatch.setattr(
        "agentrunner_host.service.host_service._in_process_runners",
        lambda failures=None: {"test/fake": [FakeSecretiveRunner()]},
    )
    toml = f'[[agents]]\nagent_id = "s"\nrunner_id = "{SECRET_RUNNER_ID}"\nrunner_config = {{ access_code = "1234" }}\n'
    with pytest.raises(ConfigFileError, match=r"agents\[0\]\.runner_config\.access_code: marked secret"):
        async with HostService.open(make_settings(toml)):
            pass
    ref = f'[[agents]]\nagent_id = "s"\nrunner_id = "{SECRET_RUNNER_ID}"\nrunner_config = {{ access_code = {{ env = "C" }} }}\n'
    async with HostService.open(make_settings(ref)) as service:
        assert service.directory.agent("s").source == "config"


async def test_the_fault_settings_reach_the_orchestrator_and_the_plugin_processes(
    make_settings: SettingsFactory,
) -> None:
    """``[runners]`` cancel grace and liveness pings configure the host and every plugin process (0 = no pings)."""
    toml = f"""
[runners]
plugin_dirs = ["{PLUGINS}"]
cancel_grace_seconds = 2.5
ping_interval_seconds = 0
ping_timeout_seconds = 4
"""
    async with HostService.open(make_settings(toml)) as service:
        assert service.host.orchestrator.force_end_grace_seconds == 2.5
        conn = next(c for c in service.host.registry.connections() if c.plugin_id == "tests/echo")
        assert isinstance(conn, SubprocessRunnerConnection)
        options = conn.options
        assert (options.cancel_grace, options.ping_interval, options.ping_timeout) == (2.5, None, 4.0)
