"""Gate item 1 for runners that are not harnesses: nothing a plugin process is given or can ask for is a host
path, and what it writes through the host cannot leave the store.

The ``security/probe`` plugin's ``wander`` runner runs in its own plugin process (a real child) under a real
``HostService``. It reports its working directory and the context it received, asks for artifacts by
path-like ids, and emits an artifact whose id and name try to climb out of the artifact store.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from agentrunner import MessageCompletedResult, codec, parse_result
from agentrunner_host.service import HostService

from .conftest import SettingsFactory, client_for

PROBE_DIR = Path(__file__).parent / "plugins" / "probe"


def _report(answer: dict[str, Any]) -> dict[str, Any]:
    for item in answer["results"]:
        result = parse_result(item["result"])
        if isinstance(result, MessageCompletedResult):
            return codec.loads(result.data.message.text())
    raise AssertionError(f"no message in {answer}")


def _on_disk(cwd: Path, tmp_path: Path, data_dir: Path) -> None:
    assert not cwd.exists()  # removed with its process
    found = list(tmp_path.rglob("escape*"))
    assert found == [], found
    stored = [p for p in (data_dir / "artifacts").rglob("*") if p.is_file()]
    assert len(stored) == 1 and stat.S_IMODE(os.stat(stored[0]).st_mode) == 0o600, stored


async def test_a_plugin_process_sees_no_host_path_and_cannot_write_outside_the_store(
    tmp_path: Path, make_settings: SettingsFactory
) -> None:
    """Its working directory is a private (0700) empty directory of its own, neither the host's working
    directory nor inside the data directory, removed when the host stops; its context names no host path
    (data directory, database, configuration file); artifact reads by path-like ids answer ``not_found``; its
    artifact is stored under a host-made id and the last segment of its name, and no file of that name
    appears anywhere."""
    data_dir = tmp_path / "data"
    toml = (
        f"[runners]\nplugin_dirs = [{codec.dumps_str(str(PROBE_DIR))}]\n"
        "[[agents]]\nagent_id = 'wander'\nrunner_id = 'plugin:security/probe/wander'\n"
        "[[bindings]]\nbinding_id = 'wander'\nagent_id = 'wander'\n"
    )
    settings = make_settings(toml)
    async with HostService.open(settings) as service, client_for(service) as client:
        done = await client.post("/v1/events?wait=true", json={"text": "go", "conversation_id": "wander"})
        assert done.status_code == 200, done.text
        answer = done.json()
        assert answer["run"]["status"] == "completed", answer
        run_id = answer["run"]["run_id"]
        results = (await client.get(f"/v1/runs/{run_id}/results")).json()
        report = _report(results)
        [created] = [
            r["result"]["data"]["artifact"] for r in results["results"] if r["type"] == "artifact.created"
        ]
    cwd = Path(report["cwd"])
    assert report["cwd_mode"] == 0o700 and report["cwd_entries"] == [], report
    assert cwd != Path.cwd() and not cwd.is_relative_to(data_dir) and not cwd.is_relative_to(tmp_path)
    for host_path in (str(data_dir), str(tmp_path), str(settings.config_path)):
        assert host_path not in report["context"], host_path
    assert report["reads"] == dict.fromkeys(report["reads"], "not_found"), report["reads"]
    assert created["artifact_id"].startswith("art_") and created["name"] == "escape.txt", created
    assert ".." not in codec.dumps_str(created)
    _on_disk(cwd, tmp_path, data_dir)
