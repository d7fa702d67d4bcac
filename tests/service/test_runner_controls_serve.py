"""The disable switch across processes: ``agentrunner runners disable`` in one process, a real
``agentrunner serve`` in another, sharing the data directory (and so the database)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from agentrunner_host.config import ECHO_RUNNER_ID

from .test_serve_process import serving

pytestmark = pytest.mark.slow


def _agentrunner(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRUNNER_")}
    return subprocess.run(
        [sys.executable, "-m", "agentrunner_host.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def _event(n: int) -> dict[str, object]:
    return {"conversation_id": f"switch-{n}", "input": {"text": "hello"}}


def test_a_switch_set_by_another_process_refuses_the_servers_next_event(tmp_path: Path) -> None:
    """Disable from the CLI process → the serving process answers the next event 403 ``runner_disabled``
    with the reason, and lists the switch; enable → the next event runs again."""
    data_dir = tmp_path / "data"
    with serving(data_dir, tmp_path / "serve.log") as base, httpx.Client(base_url=base, timeout=60) as client:
        assert client.post("/v1/events?wait=true", json=_event(1)).status_code == 200

        done = _agentrunner(
            "runners", "disable", ECHO_RUNNER_ID, "--reason", "paused by ops", "--data-dir", str(data_dir)
        )
        assert done.returncode == 0, done.stderr
        refused = client.post("/v1/events", json=_event(2))
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["code"] == "runner_disabled"
        assert "paused by ops" in refused.json()["error"]["message"]
        runners = {r["runner_id"]: r for r in client.get("/v1/runners").json()["runners"]}
        assert runners[ECHO_RUNNER_ID]["disabled"]["disabled_by"] == "cli"

        done = _agentrunner("runners", "enable", ECHO_RUNNER_ID, "--data-dir", str(data_dir))
        assert done.returncode == 0, done.stderr
        assert client.post("/v1/events?wait=true", json=_event(3)).status_code == 200

        # and the other way round: the server's switch is what the CLI lists
        put = client.put(f"/v1/runners/{ECHO_RUNNER_ID}/disabled", json={"reason": "from the API"})
        assert put.status_code == 200
        listed = _agentrunner("runners", "list", "--data-dir", str(data_dir))
        assert "DISABLED: from the API" in listed.stdout, listed.stderr
