"""Cluster suite: several hosts on one PostgreSQL (issue 20), three real ``agentrunner serve`` processes on
one fresh database (``AGENTRUNNER_TEST_PG_URL``; without it the suite has no rows; with ``--quick`` it has
rows only when ``AGENTRUNNER_BENCH_CLUSTER=1``, because starting the hosts takes most of quick mode's budget).

Rows (``python -m bench --only cluster``), each subject next to its floor in the same run, round-robin:

* **3 hosts vs 1**: a batch of concurrent clients, each posting ``POST /v1/events?wait=true`` (echo runner),
  spread round-robin over the 3 hosts, next to the same batch all on host A. Per completed run; a ratio below
  1 means 3 hosts complete runs faster than 1 (1 / ratio is the throughput gain). Goal: ≤ 1x — on a 2-core
  machine shared with the load generator the hosts cannot scale linearly, they must not be slower.
* **B-side latency of A's results**: a run posted to A (the ``tests/slow`` dripper, 10 results, no delay)
  read to its terminal over SSE by a client of **B**, next to the same read by a client of A: what following a
  run from another host costs (store replay plus ``NOTIFY`` wake-ups). Goal: ≤ 2x.

``python -m bench.cluster`` prints what the table cannot hold, from the same kind of three hosts: runs/s of
1, 3, then 1 host again for a fixed time, and per result the time a client on B got it minus the time a
client on A got it (p50 / p95 / max), with the core count and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Generator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
from agentrunner_host.cli import HTTP_PORT_FILE
from agentrunner_host.stores.engine import create_engine
from httpx_sse import aconnect_sse, connect_sse
from sqlalchemy import text
from sqlalchemy.engine import make_url

from ._framework import Goal, Measure, SuiteContext
from .http_echo import serve_port

__all__ = ["main", "measures"]

PLUGINS = Path(__file__).resolve().parents[1] / "tests" / "service" / "plugins"


async def _admin(base_url: str, sql: str) -> None:
    engine = create_engine(base_url)
    try:
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text(sql))
    finally:
        await engine.dispose()


@contextmanager
def _database(base_url: str) -> Generator[str]:
    name = f"bench_{uuid.uuid4().hex[:10]}"
    asyncio.run(_admin(base_url, f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(base_url).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_admin(base_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@contextmanager
def _serve(home: Path, names: str, url: str) -> Generator[list[str]]:
    """One ``serve`` per name on *url*, started together (they migrate one after the other under the
    advisory lock); yields their base URLs once all are ready."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRUNNER_")}
    env["AGENTRUNNER_DATABASE_URL"] = url
    started: list[tuple[Path, subprocess.Popen[bytes]]] = []
    with ExitStack() as logs:
        try:
            for name in names:
                config = home / f"{name}.toml"
                config.write_text(_CONFIG.format(plugins=PLUGINS, name=name))
                # --port 0: each binds a port the kernel picks and writes it to <data-dir>/http.port
                args = [sys.executable, "-m", "agentrunner_host.cli", "serve", "--port", "0"]
                args += ["--data-dir", str(home / name), "--config", str(config)]
                log = logs.enter_context((home / f"{name}.log").open("ab"))
                process = subprocess.Popen(
                    args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env
                )
                started.append((home / name / HTTP_PORT_FILE, process))
            ports = [serve_port(port_file, process, timeout=_START_TIMEOUT) for port_file, process in started]
            yield [f"http://127.0.0.1:{port}" for port in ports]
        finally:
            for _, process in started:
                process.terminate()
            for _, process in started:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


_START_TIMEOUT = 300.0
"""Seconds three hosts may take to start together on a loaded machine (they migrate one after the other)."""


_CONFIG = """
[runners]
plugin_dirs = ["{plugins}"]

[cluster]
host_name = "bench-{name}"

[[agents]]
agent_id = "drip"
runner_id = "plugin:tests/slow/dripper"
runner_config = {{ count = 50, delay_ms = 20 }}

[[bindings]]
binding_id = "drip"
agent_id = "drip"
scope = {{ type = "bot", id = "drip" }}

[[agents]]
agent_id = "drip10"
runner_id = "plugin:tests/slow/dripper"
runner_config = {{ count = 10, delay_ms = 0 }}

[[bindings]]
binding_id = "drip10"
agent_id = "drip10"
scope = {{ type = "bot", id = "drip10" }}
"""


async def _throughput(bases: list[str], *, clients: int, seconds: float) -> float:
    done = 0
    stop = time.perf_counter() + seconds

    async def client(index: int) -> None:
        nonlocal done
        base = bases[index % len(bases)]
        async with httpx.AsyncClient(base_url=base, timeout=60) as http:
            while time.perf_counter() < stop:
                answer = await http.post("/v1/events?wait=true", json={"text": "hello"})
                if answer.status_code == 200 and answer.json()["run"]["status"] == "completed":
                    done += 1

    started = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    return done / (time.perf_counter() - started)


def _read_arrivals(base: str, run_id: str, arrivals: dict[int, float]) -> None:
    """Follow one run over SSE, noting when each result arrived."""
    with (
        httpx.Client(base_url=base, timeout=60) as http,
        connect_sse(http, "GET", f"/v1/runs/{run_id}/results?stream=true") as source,
    ):
        for event in source.iter_sse():
            arrivals[int(event.id)] = time.perf_counter()


def _cross_host_latency(a: str, b: str, *, runs: int) -> list[float]:
    """Per result, B's arrival minus A's arrival (seconds)."""
    gaps: list[float] = []
    for _ in range(runs):
        with httpx.Client(base_url=a, timeout=60) as http:
            run_id = http.post("/v1/events", json={"text": "go", "bot_id": "drip"}).json()["run_id"]
        on_a: dict[int, float] = {}
        on_b: dict[int, float] = {}
        threads = [
            threading.Thread(target=_read_arrivals, args=(base, run_id, arrivals))
            for base, arrivals in ((a, on_a), (b, on_b))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # results stored before both readers attached arrive as a replay on both: skip the first few
        common = sorted(set(on_a) & set(on_b))[5:]
        gaps.extend(on_b[s] - on_a[s] for s in common)
    return gaps


def measures(ctx: SuiteContext) -> list[Measure]:
    base_url = os.environ.get("AGENTRUNNER_TEST_PG_URL")
    if not base_url:
        return []  # needs PostgreSQL; said in the module docstring and bench/README.md
    if ctx.quick and os.environ.get("AGENTRUNNER_BENCH_CLUSTER") != "1":
        # Starting three hosts took 100 s of --quick's 120 s suite budget at load 15; CI's quick run must not
        # depend on the machine's load, so quick mode measures the cluster only when asked to.
        return []
    stack = ExitStack()
    ctx.add_cleanup(stack.close)
    home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="agentrunner-bench-cluster-")))
    url = stack.enter_context(_database(base_url))
    bases = stack.enter_context(_serve(home, "abc", url))
    clients = 6 if ctx.quick else 12
    pools = [httpx.AsyncClient(base_url=base, timeout=120) for base in bases]

    async def close_pools() -> None:
        await asyncio.gather(*(pool.aclose() for pool in pools))

    ctx.add_cleanup(close_pools)

    async def post_wait(pool: httpx.AsyncClient) -> None:
        answer = await pool.post("/v1/events?wait=true", json={"text": "hello"})
        if answer.status_code != 200 or answer.json()["run"]["status"] != "completed":
            raise RuntimeError(f"an echo run did not complete: {answer.status_code} {answer.text[:200]}")

    async def three_hosts() -> None:
        await asyncio.gather(*(post_wait(pools[i % 3]) for i in range(clients)))

    async def one_host() -> None:
        await asyncio.gather(*(post_wait(pools[0]) for _ in range(clients)))

    async def follow_to_end(reader: httpx.AsyncClient) -> None:
        accepted = await pools[0].post("/v1/events", json={"text": "go", "bot_id": "drip10"})
        run_id = accepted.json()["run_id"]
        async with aconnect_sse(reader, "GET", f"/v1/runs/{run_id}/results?stream=true") as source:
            last = [event.event async for event in source.aiter_sse()][-1]
        if last != "run.completed":
            raise RuntimeError(f"run {run_id} ended {last}")

    async def read_on_b() -> None:
        await follow_to_end(pools[1])

    async def read_on_a() -> None:
        await follow_to_end(pools[0])

    return [
        Measure(
            f"3 hosts on one PostgreSQL, {clients} concurrent echo runs (wait=true), round-robin",
            three_hosts,
            floor=one_host,
            floor_name=f"the same {clients} concurrent runs, all on one of the three hosts",
            goal=Goal.ratio(1.0, source="issue 20: 3 hosts vs 1 on one PostgreSQL (2 cores: not linear)"),
            unit="µs/run",
            per=clients,
        ),
        Measure(
            "a 10-result run posted to host A, read to its end over SSE on host B",
            read_on_b,
            floor=read_on_a,
            floor_name="the same run posted to and read on host A, which executes it",
            goal=Goal.ratio(2.0, source="issue 20: B-side latency of A's results"),
            unit="µs/run",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cluster")
    parser.add_argument("--database-url", default=os.environ.get("AGENTRUNNER_TEST_PG_URL"))
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--latency-runs", type=int, default=5)
    args = parser.parse_args(argv)
    if not args.database_url:
        parser.error("give --database-url or set AGENTRUNNER_TEST_PG_URL (a postgresql+asyncpg:// URL)")
    print(f"cores: {os.cpu_count()}, load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp, _database(args.database_url) as url, ExitStack() as stack:
        home = Path(tmp)
        bases = stack.enter_context(_serve(home, "abc", url))
        asyncio.run(_throughput(bases[:1], clients=args.clients, seconds=2))  # warm-up
        one_a = asyncio.run(_throughput(bases[:1], clients=args.clients, seconds=args.seconds))
        three = asyncio.run(_throughput(bases, clients=args.clients, seconds=args.seconds))
        one_b = asyncio.run(_throughput(bases[:1], clients=args.clients, seconds=args.seconds))
        one = (one_a + one_b) / 2
        print(f"throughput, {args.clients} clients, echo, wait=true:")
        print(f"  1 host: {one_a:.1f} and {one_b:.1f} runs/s (before and after), mean {one:.1f}")
        print(f"  3 hosts: {three:.1f} runs/s; 3 hosts / 1 host = {three / one:.2f}")
        gaps = sorted(_cross_host_latency(bases[0], bases[1], runs=args.latency_runs))
        ms = [g * 1000 for g in gaps]
        p95 = ms[int(0.95 * (len(ms) - 1))]
        print(
            f"cross-host latency (client on B minus client on A, {len(ms)} results): "
            f"p50 {statistics.median(ms):.1f} ms, p95 {p95:.1f} ms, max {ms[-1]:.1f} ms"
        )
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
