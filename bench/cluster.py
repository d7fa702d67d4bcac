"""Several hosts on one PostgreSQL (issue 20): throughput of 3 ``agentrunner serve`` processes vs 1, and the
latency a client on host B sees for results produced on host A.

``python -m bench.cluster`` (needs ``AGENTRUNNER_TEST_PG_URL`` or ``--database-url``; a fresh database is
created and dropped). Not a registered suite: it needs PostgreSQL, which ``python -m bench --quick`` in CI
does not assume.

* **Throughput**: 1 host, then 3 hosts, then 1 host again (same database, same run), each with the same
  number of concurrent clients posting ``POST /v1/events?wait=true`` (echo runner) for a fixed time, spread
  round-robin over the hosts running. Reported: completed runs per second, and 3 hosts ÷ 1 host.
* **Cross-host latency**: a run on A (the ``tests/slow`` dripper: 50 results 20 ms apart) read over SSE at
  the same time by a client of A and a client of B; per result, the time B's client got it minus the time
  A's client got it (both clocks are one ``perf_counter`` of this process), p50 / p95 / max.

The machine's core count and load average are printed with the figures: on 2 cores shared with the load
generator, 3 hosts cannot scale linearly (see bench/RESULTS.md for what limits it).
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
from agentrunner_host.stores.engine import create_engine
from httpx_sse import connect_sse
from sqlalchemy import text
from sqlalchemy.engine import make_url

from .http_echo import _free_port, _wait_ready

__all__ = ["main"]

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
def _serve(home: Path, name: str, url: str) -> Generator[str]:
    port = _free_port()
    config = home / f"{name}.toml"
    config.write_text(
        f'[runners]\nplugin_dirs = ["{PLUGINS}"]\n\n[cluster]\nhost_name = "bench-{name}"\n'
        '\n[[agents]]\nagent_id = "drip"\nrunner_id = "plugin:tests/slow/dripper"\n'
        "runner_config = { count = 50, delay_ms = 20 }\n"
        '\n[[bindings]]\nbinding_id = "drip"\nagent_id = "drip"\nscope = { type = "bot", id = "drip" }\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRUNNER_")}
    env["AGENTRUNNER_DATABASE_URL"] = url
    args = [sys.executable, "-m", "agentrunner_host.cli", "serve", "--port", str(port)]
    args += ["--data-dir", str(home / name), "--config", str(config)]
    log = (home / f"{name}.log").open("ab")
    process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, process, "/readyz")
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


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
        bases = [stack.enter_context(_serve(home, name, url)) for name in "abc"]
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
