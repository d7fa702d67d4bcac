"""Three ``agentrunner serve`` processes on loopback ports against one PostgreSQL database: an agent added on
A serves an event on B; a run on A is streamed live and cancelled from C; the same event id posted to A, B
and C at once makes one run; ``kill -9`` of a fourth host D mid-run gets its run closed by B or C once D's
lease expired, never while it was live, and streamed to its terminal from C; no run of a live host is ever
closed. D is the kill test's own host, so A, B and C serve every test in any order (pytest-randomly)."""

from __future__ import annotations

import signal
import threading
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentrunner import codec as json
from httpx_sse import connect_sse
from pg_databases import temporary_pg_database_sync

from .processes import WAIT, ServeProcess, host_id, serve_process, sql, until_ready, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(600)]

PLUGINS = Path(__file__).resolve().parents[1] / "service" / "plugins"
DRIPPER = "plugin:tests/slow/dripper"
_LEASE_SECONDS = 8
"""Short enough for a test, long enough that a loaded machine renews in time (heartbeat every 0.5 s)."""


def _config(name: str) -> str:
    return f"""
[runners]
plugin_dirs = ["{PLUGINS}"]

[cluster]
host_name = "machine-{name}"
heartbeat_seconds = 0.5
lease_seconds = {_LEASE_SECONDS}
"""


@pytest.fixture(scope="module")
def database_url() -> Iterator[str]:
    with temporary_pg_database_sync() as url:
        yield url


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[dict[str, ServeProcess]]:
    """Hosts a, b and c on one database (started together, ready when the test starts)."""
    home = tmp_path_factory.mktemp("hosts")
    with ExitStack() as stack:
        started = {
            name: stack.enter_context(serve_process(home, name, database_url, _config(name)))
            for name in "abc"
        }
        for host in started.values():
            until_ready(host)
        yield started


def _add_drip_agent(host: ServeProcess, *, count: int, delay_ms: int, bot: str) -> None:
    with host.client() as client:
        agent = {
            "agent_id": f"drip-{bot}",
            "runner_id": DRIPPER,
            "runner_config": {"count": count, "delay_ms": delay_ms},
        }
        assert client.post("/v1/agents", json=agent).status_code == 201
        binding = {
            "binding_id": f"drip-{bot}",
            "agent_id": f"drip-{bot}",
            "scope": {"type": "bot", "id": bot},
        }
        assert client.post("/v1/bindings", json=binding).status_code == 201


def _knows_binding(host: ServeProcess, binding_id: str) -> bool:
    with host.client() as client:
        return client.get(f"/v1/bindings/{binding_id}").status_code == 200


@dataclass
class _Reader:
    """An SSE reader of one run on one host, in a thread: what it received, in order."""

    host: ServeProcess
    run_id: str
    received: list[tuple[int, str, dict[str, Any]]] = field(
        default_factory=list[tuple[int, str, dict[str, Any]]]
    )
    seen: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def start(self, *, enough: int) -> None:
        def read() -> None:
            try:
                with (
                    httpx.Client(base_url=self.host.base, timeout=120) as client,
                    connect_sse(client, "GET", f"/v1/runs/{self.run_id}/results?stream=true") as source,
                ):
                    for event in source.iter_sse():
                        self.received.append((int(event.id), event.event, json.loads(event.data)))
                        if len(self.received) >= enough:
                            self.seen.set()
            except BaseException as exc:
                self.error = exc
            finally:
                self.seen.set()

        self.thread = threading.Thread(target=read, daemon=True)
        self.thread.start()

    def join(self) -> list[tuple[int, str, dict[str, Any]]]:
        assert self.thread is not None
        self.thread.join(timeout=WAIT)
        assert not self.thread.is_alive(), "the stream did not end"
        assert self.error is None, self.error
        return self.received


def _post_event(host: ServeProcess, body: dict[str, Any]) -> httpx.Response:
    with host.client() as client:
        return client.post("/v1/events", json=body)


def _status(host: ServeProcess, run_id: str) -> dict[str, Any]:
    with host.client() as client:
        return client.get(f"/v1/runs/{run_id}").json()


def test_an_agent_added_on_a_serves_an_event_on_b(hosts: dict[str, ServeProcess]) -> None:
    """The agent and binding are created through A's API; B loads them from the database and runs B's event."""
    a, b = hosts["a"], hosts["b"]
    _add_drip_agent(a, count=3, delay_ms=0, bot="quick")
    wait_for("b to load the binding", lambda: _knows_binding(b, "drip-quick"))
    with b.client() as client:
        answer = client.post("/v1/events?wait=true", json={"text": "go", "bot_id": "quick"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["run"]["binding_id"] == "drip-quick"
    assert answer.json()["run"]["status"] == "completed"


def test_a_run_on_a_is_streamed_live_and_cancelled_from_c(
    hosts: dict[str, ServeProcess], database_url: str
) -> None:
    """C streams A's run while A is still executing it (live, not a replay), then cancels it through C: the
    run ends cancelled on A and C's stream reaches that terminal."""
    a, c = hosts["a"], hosts["c"]
    _add_drip_agent(a, count=5000, delay_ms=20, bot="long")
    wait_for("c to load the binding", lambda: _knows_binding(c, "drip-long"))
    accepted = _post_event(a, {"text": "go", "bot_id": "long", "conversation_id": "cancel-me"})
    assert accepted.status_code == 202, accepted.text
    run_id = accepted.json()["run_id"]
    reader = _Reader(c, run_id)
    reader.start(enough=5)
    assert reader.seen.wait(WAIT) and reader.error is None
    assert len(reader.received) >= 5
    on_a = _status(a, run_id)
    assert on_a["status"] == "running" and on_a["live"] is True  # executing on A while C reads it
    assert _status(c, run_id)["live"] is False
    owner = sql(database_url, "SELECT owner_host FROM runs WHERE run_id = :r", r=run_id)[0][0]
    assert owner == host_id(database_url, "machine-a")

    with c.client() as client:
        cancel = client.post(f"/v1/runs/{run_id}/cancel")
    assert cancel.status_code in (200, 202), cancel.text
    assert cancel.json()["cancelled"] is True
    received = reader.join()
    assert [seq for seq, _, _ in received] == list(range(1, len(received) + 1))
    assert received[-1][1] == "run.failed" and received[-1][2]["data"]["code"] == "cancelled"
    assert len(received) < 5000
    final = wait_for("the run to end", lambda: (s := _status(a, run_id))["status"] != "running" and s)
    assert final["status"] == "failed" and final["code"] == "cancelled"


def test_the_same_event_id_posted_to_three_hosts_at_once_makes_one_run(
    hosts: dict[str, ServeProcess], database_url: str
) -> None:
    """Three concurrent posts of one event id, one per host: one run; the others answer with its id."""
    event_id = "evt-everywhere-" + uuid.uuid4().hex[:8]
    barrier = threading.Barrier(3)
    answers: dict[str, httpx.Response] = {}

    def post(host: ServeProcess) -> None:
        with host.client() as client:
            barrier.wait()
            answers[host.name] = client.post("/v1/events", json={"text": "once", "event_id": event_id})

    threads = [threading.Thread(target=post, args=(h,)) for h in hosts.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=WAIT)
    codes = sorted(r.status_code for r in answers.values())
    assert codes == [202, 409, 409], {k: r.text for k, r in answers.items()}
    run_id = next(r.json()["run_id"] for r in answers.values() if r.status_code == 202)
    assert {r.json()["error"]["run_id"] for r in answers.values() if r.status_code == 409} == {run_id}
    assert sql(database_url, "SELECT run_id FROM runs WHERE event_id = :e", e=event_id) == [(run_id,)]


def test_kill_9_of_a_mid_run_gets_its_runs_closed_after_the_lease_and_never_before(
    hosts: dict[str, ServeProcess], database_url: str, tmp_path: Path
) -> None:
    """D (a host of this test alone: the module's A, B and C must outlive it) dies with a run in progress:
    while D's lease is live the run stays running (checked in the same statement that reads the lease); once
    it expired, B or C closes it as host_restarted and C's stream of it reaches that terminal. Runs of B and C
    are never closed."""
    b, c = hosts["b"], hosts["c"]
    with serve_process(tmp_path, "d", database_url, _config("d")) as d:
        until_ready(d)
        _add_drip_agent(b, count=5000, delay_ms=20, bot="doomed")
        wait_for("d to load the binding", lambda: _knows_binding(d, "drip-doomed"))
        wait_for("c to load the binding", lambda: _knows_binding(c, "drip-doomed"))
        d_id = host_id(database_url, "machine-d")
        doomed = _post_event(d, {"text": "go", "bot_id": "doomed", "conversation_id": "doomed"}).json()[
            "run_id"
        ]
        survivor = _post_event(b, {"text": "go", "bot_id": "doomed", "conversation_id": "survivor"}).json()[
            "run_id"
        ]
        reader = _Reader(c, doomed)
        reader.start(enough=3)
        assert reader.seen.wait(WAIT) and reader.error is None

        d.process.send_signal(signal.SIGKILL)
        d.process.wait(timeout=30)
    observations: list[tuple[str, bool]] = []

    def closed() -> bool:
        rows = sql(
            database_url,
            "SELECT r.status, h.lease_expires_at > CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
            " FROM runs r LEFT JOIN hosts h ON h.host_id = r.owner_host WHERE r.run_id = :r",
            r=doomed,
        )
        status, lease_live = rows[0][0], bool(rows[0][1])
        observations.append((status, lease_live))
        assert not (status != "running" and lease_live), "a run of a host with a live lease was closed"
        return status != "running"

    wait_for("b or c to close the dead host's run", closed)
    record = _status(b, doomed)
    assert record["status"] == "failed" and record["code"] == "host_restarted"
    received = reader.join()
    assert received[-1][1] == "run.failed" and received[-1][2]["data"]["code"] == "host_restarted"
    assert [seq for seq, _, _ in received] == list(range(1, len(received) + 1))

    assert _status(c, survivor)["status"] == "running"  # B is alive: its run goes on
    with b.client() as client:
        assert client.post(f"/v1/runs/{survivor}/cancel").status_code in (200, 202)
    restarted = sql(database_url, "SELECT owner_host FROM runs WHERE code = 'host_restarted'")
    assert restarted and {owner for (owner,) in restarted} == {d_id}
