"""``agentrunner plugins install/list/remove`` with the host of this workspace: a plugin with a dependency the
host lacks gets its own environment, is served from it, upgraded in place (the old process drained) and
removed; a plugin that does not load is refused with its error; the host's environment is never touched."""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path

import httpx
import pytest
from agentrunner import codec as json
from agentrunner_host.cli import EXIT_FAILURE, EXIT_OK, cli
from agentrunner_host.config import load_settings
from agentrunner_host.http import create_app
from agentrunner_host.service import HostService

from .support import CONFIG, PLUGIN_ID, build_tinydep, freeze, write_plugin

pytestmark = pytest.mark.slow


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return cli(list(argv), out=out), out.getvalue()


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("AGENTRUNNER_CONFIG", "AGENTRUNNER_DATA_DIR", "AGENTRUNNER_PLUGIN_DIRS"):
        monkeypatch.delenv(name, raising=False)
    # Pick up an upgrade at the next event instead of at most once a second.
    monkeypatch.setattr("agentrunner_host.service.installed._CHECK_EVERY", 0.0)
    (tmp_path / "agentrunner.toml").write_text(CONFIG, encoding="utf-8")
    return tmp_path


async def _turn(client: httpx.AsyncClient, text: str) -> str:
    answer = (await client.post("/v1/events?wait=true", json={"text": text, "conversation_id": "c1"})).json()
    assert answer.get("run", {}).get("status") == "completed", answer
    return next(
        r["result"]["data"]["message"]["content"]
        for r in answer["results"]
        if r["type"] == "message.completed"
    )


async def test_install_serve_upgrade_and_remove(workdir: Path) -> None:
    """Two turns share memory through the state API; an upgrade serves the next turn from the new
    generation and closes the old process; a removal makes the runner unavailable."""
    wheels = build_tinydep(workdir)
    plugin = write_plugin(workdir / "acme-shouter")
    data = workdir / "data"
    common = ["--config", str(workdir / "agentrunner.toml"), "--data-dir", str(data)]
    before = freeze()

    code, out = await asyncio.to_thread(
        _cli, "plugins", "install", str(plugin), "--find-links", str(wheels), *common
    )
    assert code == EXIT_OK, out
    assert "installed acme/shouter 0.1.0 (generation 1)" in out
    record = json.loads((data / "plugins" / "acme--shouter" / "plugin.json").read_bytes())
    assert "tinydep-agentrunner-test==1.2.3" in record["requirements"]

    settings = load_settings(
        workdir / "agentrunner.toml", environ={"AGENTRUNNER_DATA_DIR": str(data)}, cwd=workdir
    )
    async with HostService.open(settings) as service:
        app = create_app(service, api_token=None)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8420"
        ) as client:
            assert await _turn(client, "one") == "ONE!"
            assert await _turn(client, "two") == "TWO! (before: one)"
            old = service.host.registry.connection(PLUGIN_ID)
            old_pid = getattr(old, "pid", None)
            assert old_pid is not None

            write_plugin(plugin, version="0.2.0", prefix="v2: ")
            code, out = await asyncio.to_thread(
                _cli, "plugins", "install", str(plugin), "--find-links", str(wheels), *common
            )
            assert code == EXIT_OK and "(generation 2)" in out, out
            assert await _turn(client, "three") == "v2: THREE! (before: two)"
            assert service.host.registry.connection(PLUGIN_ID) is not old
            installed = service._installed
            assert installed is not None
            await installed.aclose()  # the old process was drained and closed
            with pytest.raises(ProcessLookupError, match="No such process"):
                os.kill(old_pid, 0)

            code, listing = await asyncio.to_thread(_cli, "plugins", "list", "--json", *common)
            row = json.loads(listing)[0]
            assert (row["plugin_id"], row["version"], row["status"], row["generation"]) == (
                PLUGIN_ID,
                "0.2.0",
                "ok",
                2,
            )
            assert row["environment"].endswith("acme--shouter/g2/env") and row["last_error"] is None

            code, out = await asyncio.to_thread(_cli, "plugins", "remove", PLUGIN_ID, *common)
            assert code == EXIT_OK
            gone = await client.post("/v1/events", json={"text": "four", "conversation_id": "c1"})
            assert gone.status_code in {404, 503}, gone.text
    assert not (data / "plugins" / "acme--shouter").exists()
    assert freeze() == before, "the host's environment changed"


def test_a_plugin_that_does_not_load_is_refused_with_its_error(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The runtime is started once before the record is written: an import error aborts the install."""
    wheels = build_tinydep(workdir)
    plugin = write_plugin(workdir / "acme-shouter", broken=True)
    data = workdir / "data"
    code, _ = _cli("plugins", "install", str(plugin), "--find-links", str(wheels), "--data-dir", str(data))
    assert code == EXIT_FAILURE
    assert "No module named 'a_module_nobody_installed'" in capsys.readouterr().err
    assert _cli("plugins", "list", "--json", "--data-dir", str(data)) == (EXIT_OK, "[]\n")


def test_a_missing_dependency_is_reported_by_uv(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without the wheel of its dependency (and no index that has it), the install fails and says why."""
    plugin = write_plugin(workdir / "acme-shouter")
    empty = workdir / "empty"
    empty.mkdir()
    code, _ = _cli(
        "plugins",
        "install",
        str(plugin),
        "--find-links",
        str(empty),
        "--index-url",
        empty.as_uri(),
        "--data-dir",
        str(workdir / "data"),
    )
    assert code == EXIT_FAILURE
    assert "tinydep-agentrunner-test" in capsys.readouterr().err
