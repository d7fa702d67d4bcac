"""End to end: ``agentrunner serve`` as a real process, over real HTTP, across a restart."""

from __future__ import annotations

import io
import secrets
from collections.abc import Generator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from agentrunner import codec as json
from agentrunner_host.cli import EXIT_OK, HTTP_PORT_FILE, RUNTIME_PORT_FILE, cli
from httpx_sse import connect_sse
from serve_ready import child_environ, serve_child

pytestmark = pytest.mark.slow


@contextmanager
def serving(
    data_dir: Path, log: Path, *, config: Path | None = None, env: Mapping[str, str] | None = None
) -> Generator[str]:
    """Start ``python -m agentrunner_host.cli serve --port 0`` (with the file *config* and the variables *env*,
    when given) and yield its base URL (the port it bound, read from the port file it writes in its data
    directory); stop it with SIGTERM and check it exits 0 and removed the port file (no orphan is left even
    when the test fails)."""
    with serve_child(data_dir, log, config=config, env=child_environ(env)) as child:
        yield child.base
        child.stop(timeout=20)


def test_serve_streams_results_keeps_the_transcript_and_survives_a_restart(tmp_path: Path) -> None:
    """Send an event over HTTP, read its SSE stream and transcript; restart; the transcript is still there."""
    data_dir = tmp_path / "data"
    log = tmp_path / "serve.log"
    with serving(data_dir, log) as base, httpx.Client(base_url=base, timeout=10) as client:
        body = {"text": "hello over the wire", "conversation_id": "e2e", "event_id": "evt-e2e-1"}
        with connect_sse(client, "POST", "/v1/events", json=body) as source:
            events = [e for e in source.iter_sse()]
        assert [int(e.id) for e in events] == list(range(1, len(events) + 1))
        assert events[-1].event == "run.completed"
        run_id = json.loads(events[-1].data)["run_id"]
        transcript = client.get("/v1/conversations/e2e/transcript").json()
        assert [(i["role"], i["content"]) for i in transcript["items"]] == [
            ("user", "hello over the wire"),
            ("assistant", "hello over the wire"),
        ]
        out = io.StringIO()
        assert cli(["runs", "show", run_id, "--url", base], out=out) == EXIT_OK
        assert json.loads(out.getvalue())["status"] == "completed"

    with serving(data_dir, log) as base, httpx.Client(base_url=base, timeout=10) as client:
        again = client.get("/v1/conversations/e2e/transcript").json()
        assert again["items"] == transcript["items"]
        duplicate = client.post("/v1/events", json=body)
        assert duplicate.status_code == 409 and duplicate.json()["error"]["run_id"] == run_id
        replay = client.get(f"/v1/runs/{run_id}/results").json()
        assert [r["type"] for r in replay["results"]] == [e.event for e in events]
    assert "Traceback" not in log.read_text()


def test_serve_with_port_0_binds_a_port_of_its_own_and_reports_it(tmp_path: Path) -> None:
    """``--port 0``: the kernel picks the port while ``serve`` binds it (nothing to race for), and ``serve``
    says which on stdout and in ``<data-dir>/http.port``; both name the port that answers."""
    data_dir = tmp_path / "data"
    log = tmp_path / "serve.log"
    with serving(data_dir, log) as base:
        port = int((data_dir / HTTP_PORT_FILE).read_text(encoding="utf-8"))
        assert port != 0 and base == f"http://127.0.0.1:{port}"
        assert f"agentrunner serve: listening on http://127.0.0.1:{port}\n" in log.read_text()
        assert httpx.get(f"{base}/healthz", timeout=30).status_code == 200
        # no [[runtime_server.plugins]]: no remote-runtime endpoint, so no port of it to report
        assert not (data_dir / RUNTIME_PORT_FILE).exists()


def test_serve_writes_the_port_its_runtime_endpoint_bound_with_port_0_and_removes_it_on_exit(
    tmp_path: Path,
) -> None:
    """``runtime_server.port = 0``: the remote-runtime endpoint binds a port the kernel picks, ``serve`` writes
    it to ``<data-dir>/runtime.port`` before it listens on HTTP, the endpoint answers there (401 without the
    plugin's token), and the file is gone once ``serve`` stopped."""
    config = tmp_path / "agentrunner.toml"
    config.write_text(
        """
[runtime_server]
port = 0

[[runtime_server.plugins]]
plugin_id = "tests/echo"
token_env = "TESTS_RUNTIME_TOKEN"
""",
        encoding="utf-8",
    )
    data_dir = tmp_path / "data"
    runtime_port_file = data_dir / RUNTIME_PORT_FILE
    env = {"TESTS_RUNTIME_TOKEN": secrets.token_urlsafe(32)}
    with serving(data_dir, tmp_path / "serve.log", config=config, env=env) as base:
        port = int(runtime_port_file.read_text(encoding="utf-8"))
        assert port != 0 and f"127.0.0.1:{port}" != base.removeprefix("http://")
        refused = httpx.get(f"http://127.0.0.1:{port}/", timeout=30)
        assert refused.status_code == 401 and "runtime token" in refused.text
    assert not runtime_port_file.exists()
