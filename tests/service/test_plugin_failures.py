"""A plugin that fails to load is reported with its reason — by ``serve`` at start, by ``/v1/runners``, by
``/readyz`` and by ``agentrunner runners list`` — and the other plugins keep working."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
from agentrunner_host.cli import EXIT_OK, cli
from agentrunner_host.service import HostService

from .conftest import SettingsFactory, client_for

GOOD_PLUGINS = Path(__file__).resolve().parent.parent / "runtime" / "plugins"

BROKEN_MANIFEST = """\
apiVersion: agentrunner/v1
kind: AgentRunner
metadata: { author: tests, name: broken }
execution:
  python: { path: ./main.py, attr: Broken }
"""

BROKEN_MAIN = """\
import not_installed_anywhere_xyz  # the dependency the host does not have

from agentrunner import AgentRunner
"""

UNPARSABLE_MANIFEST = """\
apiVersion: agentrunner/v1
kind: AgentRunner
metadata: { author: tests, name: typo }
execution:
  python: { module: x, attr: Y }
spek: {}
"""


def _plugins(tmp_path: Path) -> Path:
    root = tmp_path / "plugins"
    (root / "broken").mkdir(parents=True)
    (root / "broken" / "manifest.yaml").write_text(BROKEN_MANIFEST, encoding="utf-8")
    (root / "broken" / "main.py").write_text(BROKEN_MAIN, encoding="utf-8")
    (root / "typo").mkdir()
    (root / "typo" / "manifest.yaml").write_text(UNPARSABLE_MANIFEST, encoding="utf-8")
    return root


def _toml(root: Path) -> str:
    return f"""
[runners]
plugin_dirs = ["{GOOD_PLUGINS}", "{root}"]

[[agents]]
agent_id = "good"
runner_id = "plugin:tests/echo/streamer"
runner_config = {{ count = 2 }}

[[agents]]
agent_id = "broken"
runner_id = "plugin:tests/broken/default"

[[bindings]]
binding_id = "good"
agent_id = "good"
scope = {{ type = "conversation", id = "good" }}

[[bindings]]
binding_id = "broken"
agent_id = "broken"
scope = {{ type = "conversation", id = "broken" }}
"""


async def test_a_failed_plugin_is_reported_everywhere_and_the_others_keep_working(
    make_settings: SettingsFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The import error is logged at start, listed by ``/v1/runners`` and ``/readyz``, and explains the 503 of
    an event for the broken runner; the good plugin next to it answers."""
    settings = make_settings(_toml(_plugins(tmp_path)))
    with caplog.at_level(logging.ERROR, logger="agentrunner.service"):
        async with HostService.open(settings) as service, client_for(service) as client:
            started = [r.getMessage() for r in caplog.records if r.name == "agentrunner.service"]
            listing = (await client.get("/v1/runners")).json()
            ready = await client.get("/readyz")
            good = (
                await client.post("/v1/events?wait=true", json={"text": "x", "conversation_id": "good"})
            ).json()
            broken = await client.post("/v1/events", json={"text": "x", "conversation_id": "broken"})

    assert any("tests/broken" in m and "not_installed_anywhere_xyz" in m for m in started), started
    assert any("tests/typo" in m and "spek" in m for m in started), started

    assert "plugin:tests/echo/streamer" in {r["runner_id"] for r in listing["runners"]}
    failed = {f["plugin_id"]: f for f in listing["failed"]}
    assert set(failed) == {"tests/broken", "tests/typo"}
    assert "No module named 'not_installed_anywhere_xyz'" in failed["tests/broken"]["reason"]
    assert failed["tests/broken"]["source"].endswith("broken/manifest.yaml")
    assert "spek" in failed["tests/typo"]["reason"]

    assert ready.status_code == 200
    body = ready.json()
    assert {f["plugin_id"] for f in body["failed_plugins"]} == {"tests/broken", "tests/typo"}
    assert "2 plugin(s) failed to load" in body["detail"] and "tests/broken" in body["detail"]

    assert good["run"]["status"] == "completed"
    assert broken.status_code == 503
    assert "not_installed_anywhere_xyz" in broken.json()["error"]["message"]


async def test_a_plugin_that_recovers_is_no_longer_reported(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    """Failures are as of the last discovery: once the missing module exists, the next lookup finds the
    runner and the failure is gone."""
    root = _plugins(tmp_path)
    settings = make_settings(_toml(root))
    async with HostService.open(settings) as service, client_for(service) as client:
        assert "tests/broken" in {f.plugin_id for f in service.plugin_failures()}
        (root / "broken" / "main.py").write_text(
            BROKEN_MAIN.replace("import not_installed_anywhere_xyz", "import json")
            + "\nclass Broken(AgentRunner):\n"
            "    manifest = {'id': 'plugin:tests/broken/default', 'name': 'default', 'label': 'b'}\n\n"
            "    async def run(self, ctx, api):\n"
            "        out = self.emitter(ctx)\n"
            "        yield out.message('fixed')\n"
            "        yield out.complete()\n",
            encoding="utf-8",
        )
        answer = (
            await client.post("/v1/events?wait=true", json={"text": "x", "conversation_id": "broken"})
        ).json()
        assert answer["run"]["status"] == "completed", answer
        assert "tests/broken" not in {f.plugin_id for f in service.plugin_failures()}


def test_runners_list_shows_the_failed_plugin_with_its_error(
    make_settings: SettingsFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agentrunner runners list`` prints the available runners and one FAILED line per failed plugin."""
    monkeypatch.delenv("AGENTRUNNER_CONFIG", raising=False)
    config = tmp_path / "agentrunner.toml"
    config.write_text(_toml(_plugins(tmp_path)), encoding="utf-8")
    out = io.StringIO()
    code = cli(["runners", "list", "--config", str(config), "--data-dir", str(tmp_path / "data")], out=out)
    lines = out.getvalue().splitlines()
    assert code == EXIT_OK
    assert any(line.startswith("plugin:tests/echo/streamer\t") for line in lines), lines
    broken = next(line for line in lines if line.startswith("plugin:tests/broken/*\tFAILED\t"))
    assert "No module named 'not_installed_anywhere_xyz'" in broken


CLASS_CODE = """\
from agentrunner import AgentRunner, AgentRunnerCapabilities, AgentRunnerManifest


class Streaming(AgentRunner):
    manifest = AgentRunnerManifest(
        id="plugin:tests/{name}/default",
        name="default",
        label="s",
        capabilities=AgentRunnerCapabilities(streaming=True),
    )

    async def run(self, ctx, api):
        out = self.emitter(ctx)
        yield out.message("ok")
        yield out.complete()
"""


def _declared_plugin(root: Path, name: str, spec: str) -> None:
    plugin = root / name
    plugin.mkdir(parents=True)
    (plugin / "main.py").write_text(CLASS_CODE.format(name=name), encoding="utf-8")
    (plugin / "manifest.yaml").write_text(
        "apiVersion: agentrunner/v1\nkind: AgentRunner\n"
        f"metadata: {{ author: tests, name: {name} }}\n{spec}"
        "execution:\n  python: { path: ./main.py, attr: Streaming }\n",
        encoding="utf-8",
    )


async def test_the_class_is_the_declaration_and_a_differing_manifest_file_is_refused(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    """A manifest file without ``spec`` serves the class's declaration; one whose ``spec`` differs from the class
    is a failed plugin naming the field."""
    root = tmp_path / "declared"
    _declared_plugin(root, "bare", "")
    _declared_plugin(root, "stale", "spec:\n  capabilities: { streaming: false }\n")
    _declared_plugin(root, "same", "spec:\n  capabilities: { streaming: true }\n")
    settings = make_settings(f'[runners]\nplugin_dirs = ["{root}"]\n')
    async with HostService.open(settings) as service:
        runners = {d.runner_id: d for d in await service.runners()}
        failures = {f.plugin_id: f.reason for f in service.plugin_failures()}
    assert runners["plugin:tests/bare/default"].manifest.capabilities.streaming is True
    assert "plugin:tests/same/default" in runners
    assert "plugin:tests/stale/default" not in runners
    assert "manifest.yaml declares capabilities unlike the runner class" in failures["tests/stale"]
