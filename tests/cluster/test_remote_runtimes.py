"""Remote runtimes attach to any ``agentrunner serve``: two real hosts on one PostgreSQL database, both with a
``[runtime_server]`` endpoint for plugin ``tests/echo``, and a real ``agentrunner-plugin --connect`` process
attached to host B only. An event posted to host A for that plugin's runner is handed to B (a stored
``start`` request), runs on B's runtime, and is answered and followed through A; a cancel through A ends
it on B. A wrong token is refused by the host's endpoint."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from agentrunner.wire.websocket import TOKEN_ENV
from httpx_sse import connect_sse
from pg_databases import temporary_pg_database_sync

from .processes import ServeProcess, host_id, serve_process, sql, until_ready, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(600)]

ECHO_PLUGIN_DIR = Path(__file__).resolve().parents[1] / "runtime" / "plugins" / "echo"
TOKEN_VARIABLE = "TESTS_ECHO_RUNTIME_TOKEN"


@dataclass
class _Cluster:
    url: str
    hosts: dict[str, ServeProcess]
    token: str


def _config(name: str) -> str:
    # runtime_server.port = 0: each endpoint binds a port the kernel picks (serve writes it to its data
    # directory), so no port is picked here and released for another process to take
    return f"""
[cluster]
host_name = "machine-{name}"
heartbeat_seconds = 0.5
lease_seconds = 8

[runtime_server]
port = 0
connect_timeout_seconds = 30

[[runtime_server.plugins]]
plugin_id = "tests/echo"
token_env = "{TOKEN_VARIABLE}"
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Cluster]:
    token = secrets.token_hex(24)
    home = tmp_path_factory.mktemp("remote")
    with temporary_pg_database_sync() as url, ExitStack() as stack:
        hosts = {
            name: stack.enter_context(
                serve_process(home, name, url, _config(name), env={TOKEN_VARIABLE: token})
            )
            for name in "ab"
        }
        for host in hosts.values():
            until_ready(host)
        yield _Cluster(url, hosts, token)


def _runtime(port: int, token: str) -> subprocess.Popen[bytes]:
    """``agentrunner-plugin --connect`` serving the echo test plugin to the endpoint on *port*."""
    env = {"PATH": os.environ["PATH"], TOKEN_ENV: token}
    args = [sys.executable, "-m", "agentrunner.wire.plugin", "--plugin-dir", str(ECHO_PLUGIN_DIR)]
    args += ["--connect", f"ws://127.0.0.1:{port}"]
    return subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _bind(host: ServeProcess, agent_id: str, runner: str, config: dict[str, object]) -> None:
    with host.client() as client:
        agent = {"agent_id": agent_id, "runner_id": runner, "runner_config": config}
        answer = client.post("/v1/agents", json=agent)
        assert answer.status_code == 201, answer.text
        binding = {"binding_id": agent_id, "agent_id": agent_id, "scope": {"type": "bot", "id": agent_id}}
        assert client.post("/v1/bindings", json=binding).status_code == 201


def _knows_binding(host: ServeProcess, binding_id: str) -> bool:
    with host.client() as client:
        return client.get(f"/v1/bindings/{binding_id}").status_code == 200


def _status(host: ServeProcess, run_id: str) -> dict[str, object]:
    with host.client() as client:
        return client.get(f"/v1/runs/{run_id}").json()


def _evidence(cluster: _Cluster, run_id: str) -> str:
    """What a failure of the cancel hand-off needs to be explained: the run's row, the requests still stored,
    and the end of both hosts' logs."""
    row = sql(cluster.url, "SELECT owner_host, status, code, message FROM runs WHERE run_id = :r", r=run_id)
    requests = sql(cluster.url, "SELECT target_host, kind, run_id, claimed_at FROM host_requests")
    hosts = sql(cluster.url, "SELECT host_id, machine, lease_expires_at FROM hosts")
    logs = "".join(
        f"\n--- {name}.log ---\n" + "\n".join(host.log.read_text(errors="replace").splitlines()[-40:])
        for name, host in cluster.hosts.items()
    )
    return f"run {row}, requests {requests}, hosts {hosts}{logs}"


def test_a_runtime_attached_to_b_serves_an_event_posted_to_a_and_is_cancelled_through_a(
    cluster: _Cluster,
) -> None:
    """A has no runtime of tests/echo; B has one. A hands the event to B (it would otherwise wait for a
    runtime of its own and fail runtime.unavailable), answers with B's run and streams it; a cancel through
    A reaches B as a stored request and ends the run on B's runtime."""
    a, b = cluster.hosts["a"], cluster.hosts["b"]
    b_id = host_id(cluster.url, "machine-b")
    runtime = _runtime(b.runtime_port, cluster.token)
    try:
        attached = "SELECT host_id FROM runtime_attachments WHERE plugin_id = 'tests/echo'"
        wait_for("the runtime to attach to b", lambda: sql(cluster.url, attached) == [(b_id,)])
        _bind(b, "remote-streamer", "plugin:tests/echo/streamer", {"count": 5})
        _bind(b, "remote-sleeper", "plugin:tests/echo/sleeper", {})
        wait_for("a to load the bindings", lambda: _knows_binding(a, "remote-sleeper"))

        with a.client() as client:
            answer = client.post("/v1/events?wait=true", json={"text": "go", "bot_id": "remote-streamer"})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["run"]["status"] == "completed", body
        run_id = body["run"]["run_id"]
        kinds = [r["type"] for r in body["results"]]
        assert kinds == ["message.delta"] * 5 + ["message.completed", "run.completed"]
        owner = sql(cluster.url, "SELECT owner_host FROM runs WHERE run_id = :r", r=run_id)
        assert owner == [(b_id,)]  # executed on B, where the runtime is
        assert _status(a, run_id)["live"] is False and _status(b, run_id)["status"] == "completed"

        with a.client() as client:
            accepted = client.post("/v1/events", json={"text": "zz", "bot_id": "remote-sleeper"})
        assert accepted.status_code == 202, accepted.text
        sleeper = accepted.json()["run_id"]
        running = "SELECT owner_host, status FROM runs WHERE run_id = :r"
        wait_for("b to start the run", lambda: sql(cluster.url, running, r=sleeper) == [(b_id, "running")])
        with a.client() as control:
            cancel = control.post(f"/v1/runs/{sleeper}/cancel")
        assert cancel.status_code in (200, 202), cancel.text
        assert cancel.json()["cancelled"] is True
        with (
            httpx.Client(base_url=a.base, timeout=120) as client,
            connect_sse(client, "GET", f"/v1/runs/{sleeper}/results?stream=true") as source,
        ):
            last = [(e.event, e.data) for e in source.iter_sse()][-1]
        assert last[0] == "run.failed" and '"cancelled"' in last[1], _evidence(cluster, sleeper)
        final = _status(a, sleeper)  # the stream ended with the terminal: the run's end is committed
        assert final["status"] == "failed" and final["code"] == "cancelled", (
            final,
            _evidence(cluster, sleeper),
        )
    finally:
        runtime.kill()
        runtime.wait(timeout=30)


def test_a_runtime_with_a_wrong_token_is_refused_by_serve(cluster: _Cluster) -> None:
    """The endpoint ``serve`` starts answers 401 to a runtime without the plugin's token, and it exits."""
    runtime = _runtime(cluster.hosts["a"].runtime_port, "not-the-token-" + secrets.token_hex(8))
    try:
        assert runtime.wait(timeout=120) != 0
    finally:
        if runtime.poll() is None:
            runtime.kill()
            runtime.wait(timeout=30)
    a_id = host_id(cluster.url, "machine-a")
    assert sql(cluster.url, "SELECT count(*) FROM runtime_attachments WHERE host_id = :h", h=a_id) == [(0,)]
