"""Durable streams, end to end on a real ``agentrunner serve`` process: ``kill -9`` while 20 runs stream loses
nothing a client saw, every resuming client reaches a terminal, and a flooding run keeps host memory bounded.
Both engines (the PostgreSQL leg needs ``AGENTRUNNER_TEST_PG_URL``)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from agentrunner import codec as json
from httpx_sse import connect_sse
from pg_databases import temporary_pg_database_sync
from serve_ready import ServeChild, child_environ, serve_child

pytestmark = pytest.mark.slow

PLUGINS = Path(__file__).resolve().parent / "plugins"
_RUNS = 20
_SEEN_BEFORE_KILL = 5
"""Results every client has received before the host is killed."""


def _config(data_dir: Path, agent: str) -> Path:
    path = data_dir.parent / f"{data_dir.name}.toml"
    path.write_text(
        f"""
[runners]
plugin_dirs = ["{PLUGINS}"]

[[agents]]
agent_id = "drip"
runner_id = "plugin:tests/slow/dripper"
runner_config = {agent}

[[bindings]]
binding_id = "drip"
agent_id = "drip"
scope = {{ type = "bot", id = "drip" }}
"""
    )
    return path


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """``None`` (SQLite in the data directory) or the URL of a PostgreSQL database made for the test."""
    if request.param == "sqlite":
        yield None
        return
    with temporary_pg_database_sync() as url:
        yield url


@contextmanager
def _serve(data_dir: Path, config: Path, log: Path, database_url: str | None) -> Generator[ServeChild]:
    """``agentrunner serve --port 0`` as a child process (its URL from the port file it writes in the data
    directory); killed (not stopped) when the block ends."""
    extra = {} if database_url is None else {"AGENTRUNNER_DATABASE_URL": database_url}
    with serve_child(data_dir, log, config=config, env=child_environ(extra)) as child:
        yield child


@dataclass
class _Client:
    """One SSE client of one run: what it received, in order."""

    conversation: str
    run_id: str | None = None
    received: list[tuple[int, str, object]] = field(default_factory=list[tuple[int, str, object]])
    enough: threading.Event = field(default_factory=threading.Event)


def _stream(base: str, client: _Client) -> None:
    body = {"text": "go", "bot_id": "drip", "conversation_id": client.conversation}
    try:
        with (
            httpx.Client(base_url=base, timeout=httpx.Timeout(60, connect=10)) as http,
            connect_sse(http, "POST", "/v1/events?stream=true", json=body) as source,
        ):
            client.run_id = source.response.headers["X-Run-Id"]
            for sse in source.iter_sse():
                client.received.append((int(sse.id), sse.event, json.loads(sse.data)))
                if len(client.received) >= _SEEN_BEFORE_KILL:
                    client.enough.set()
    except (httpx.TransportError, httpx.RemoteProtocolError):
        pass  # the host was killed under us
    finally:
        client.enough.set()


def _stored(http: httpx.Client, run_id: str) -> dict[int, tuple[str, object]]:
    stored: dict[int, tuple[str, object]] = {}
    after = 0
    while True:
        page = http.get(f"/v1/runs/{run_id}/results", params={"after": after, "limit": 1000}).json()
        for r in page["results"]:
            stored[r["host_seq"]] = (r["type"], r["result"])
        if page["done"] or not page["results"]:
            return stored
        after = page["next_after"]


def test_kill_9_while_20_runs_stream_loses_nothing_a_client_saw(
    tmp_path: Path, database_url: str | None
) -> None:
    """Every result an SSE client received before ``kill -9`` is stored with the same host_seq and content;
    each client resuming from its last id reaches the ``host_restarted`` terminal, numbered after the last
    stored result; the state a run set before the kill is there after it."""
    data_dir = tmp_path / "data"
    log = tmp_path / "serve.log"
    config = _config(data_dir, "{ count = 100000, delay_ms = 20, state = true }")
    clients = [_Client(conversation=f"c{n}") for n in range(_RUNS)]
    with _serve(data_dir, config, log, database_url) as server:
        threads = [threading.Thread(target=_stream, args=(server.base, c), daemon=True) for c in clients]
        for thread in threads:
            thread.start()
        for c in clients:
            assert c.enough.wait(timeout=120), "a client received nothing"
        server.process.send_signal(signal.SIGKILL)
        assert server.process.wait(timeout=30) == -signal.SIGKILL
        for thread in threads:
            thread.join(timeout=60)
            assert not thread.is_alive()
    for c in clients:
        assert c.run_id is not None and len(c.received) >= _SEEN_BEFORE_KILL, c
        assert [seq for seq, _, _ in c.received] == list(range(1, len(c.received) + 1))
        assert c.received[0][1] == "state.updated"

    with (
        _serve(data_dir, config, log, database_url) as server,
        httpx.Client(base_url=server.base, timeout=60) as http,
    ):
        for c in clients:
            assert c.run_id is not None
            stored = _stored(http, c.run_id)
            for seq, kind, payload in c.received:
                assert stored.get(seq) == (kind, payload), f"{c.run_id}: result {seq} is not stored as sent"
            last_seen = c.received[-1][0]
            with connect_sse(
                http, "GET", f"/v1/runs/{c.run_id}/results", headers={"Last-Event-ID": str(last_seen)}
            ) as source:
                resumed = [(int(e.id), e.event, json.loads(e.data)) for e in source.iter_sse()]
            assert resumed, f"{c.run_id}: the resumed stream is empty"
            seq, kind, payload = resumed[-1]
            assert kind == "run.failed" and isinstance(payload, dict)
            assert payload["data"]["code"] == "host_restarted"
            assert seq == max(stored) and seq > last_seen
            assert [s for s, _, _ in resumed] == list(range(last_seen + 1, seq + 1))
            run = http.get(f"/v1/runs/{c.run_id}").json()
            assert (run["status"], run["code"]) == ("failed", "host_restarted")
        # the state the first run set before the kill is given to the next run of its conversation
        answer = http.post(
            "/v1/events?wait=true", json={"text": "report", "bot_id": "drip", "conversation_id": "c0"}
        ).json()
        message = next(r for r in answer["results"] if r["type"] == "message.completed")
        reported = json.loads(message["result"]["data"]["message"]["content"])
        assert reported["conversation"]["progress"] == {"run_id": clients[0].run_id}
    assert "Traceback" not in log.read_text()


def _rss_kib(pid: int, field_name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field_name} for {pid}")


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc peak-RSS reset")
def test_a_run_flooding_100_mib_keeps_host_memory_bounded_and_ends_at_the_cap(
    tmp_path: Path, database_url: str | None
) -> None:
    """200 deltas of 512 KiB: the run ends ``runner.output_too_large`` at the default cap, and the host's
    peak RSS during the run grows by less than 64 MiB while an SSE client reads it."""
    data_dir = tmp_path / "data"
    log = tmp_path / "serve.log"
    config = _config(data_dir, "{ count = 200, size = 524288 }")
    with (
        _serve(data_dir, config, log, database_url) as server,
        httpx.Client(base_url=server.base, timeout=120) as http,
    ):
        warm = http.post("/v1/events?wait=true", json={"text": "report", "bot_id": "drip"}).json()
        assert warm["run"]["status"] == "completed"
        pid = server.process.pid
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
        before = _rss_kib(pid, "VmRSS")
        body = {"text": "flood", "bot_id": "drip", "conversation_id": "flood"}
        last: tuple[str, object] | None = None
        count = 0
        with connect_sse(http, "POST", "/v1/events?stream=true", json=body) as source:
            for sse in source.iter_sse():
                count += 1
                last = (sse.event, json.loads(sse.data))
        peak = _rss_kib(pid, "VmHWM")
    assert last is not None and last[0] == "run.failed", last
    payload = last[1]
    assert isinstance(payload, dict) and payload["data"]["code"] == "runner.output_too_large"
    assert 10 < count < 200
    growth_mib = (peak - before) / 1024
    assert growth_mib < 64, f"host peak RSS grew by {growth_mib:.1f} MiB"
