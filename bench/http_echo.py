"""HTTP suite: ``POST /v1/events?stream=true`` to the echo runner, answered over SSE, on a real ``agentrunner
serve`` process (SQLite in a temporary data directory), next to a bare Starlette/uvicorn app serving the same
SSE bytes (``bench/_bare_sse.py``, same uvicorn protocol) measured in the same run, round-robin.

Rows (``python -m bench --only http``): serial request, and per-request time at 10 and 50 concurrent clients
(a per-request time at most 3× the bare one is the same as requests/s at least 1/3 of the bare server's), and
10 clients ÷ 1 for ``serve`` itself (below 1: ten clients get more than one).

``python -m bench.http_echo`` prints what the table cannot hold, from the same two servers: serial p50 / p99,
requests/s at 1, 10 and 50 clients, server CPU per request (the threads of each server process, ``/proc/<pid>/task/*/schedstat``), and
per echo request the SQL statements, commits and thread round trips, *counted* on an in-process service
(SQLAlchemy events; a counter on aiosqlite's queue plus one per transaction of the stores' SQLite writer
thread), not estimated.

Goals (issue 16): server CPU/request ≤ 3× bare, serial p50 ≤ 3×, requests/s at 10 and 50 clients ≥ 1/3 of
bare and higher at 10 clients than at 1.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from agentrunner_host.cli import HTTP_PORT_FILE

from ._bare_sse import KEEP_ALIVE_SECONDS
from ._framework import Goal, Measure, SuiteContext

__all__ = ["main", "measures", "serve_port"]

_BODY = {"text": "hello"}
_URL = "/v1/events?stream=true"
_START_TIMEOUT = 90.0


def serve_port(port_file: Path, process: subprocess.Popen[bytes], *, timeout: float = _START_TIMEOUT) -> int:
    """The port a ``serve --port 0`` child bound, once it answers ``/readyz`` there: ``serve`` writes it to
    *port_file* (``<data-dir>/http.port``) when it listens, so no port is picked here and released for the
    child to race for. *port_file* must not be left over from an earlier ``serve`` of that data directory."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"serve exited early ({process.returncode})")
        try:
            port = int(port_file.read_text(encoding="utf-8"))
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return port
        except (OSError, ValueError, httpx.TransportError):  # no port file yet: not listening yet
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"serve did not become ready in {timeout:g} s")
        time.sleep(0.05)


def _wait_ready(base: str, process: subprocess.Popen[bytes], path: str) -> None:
    deadline = time.monotonic() + _START_TIMEOUT
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early ({process.returncode})")
        try:
            httpx.get(base + path, timeout=1)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise RuntimeError("server did not become ready") from None
            time.sleep(0.05)


class Servers:
    """``serve`` and the bare app as child processes; ``close`` stops both."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="agentrunner-bench-http-"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRUNNER_")}
        args = [sys.executable, "-m", "agentrunner_host.cli", "serve", "--port", "0"]
        args += ["--data-dir", str(self.tmp / "data")]
        # Both servers keep idle connections for the whole suite (uvicorn's default is 5 s): between repeats,
        # other measures leave each client's connection idle for longer than that on a loaded machine, and a
        # request sent as the server closes its idle connection fails with ReadError (seen at 50 clients).
        config = self.tmp / "agentrunner.toml"
        config.write_text(f"[http]\nkeep_alive_seconds = {KEEP_ALIVE_SECONDS}\n")
        args += ["--config", str(config)]
        log = (self.tmp / "serve.log").open("wb")
        self.serve = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env
        )
        port = serve_port(self.tmp / "data" / HTTP_PORT_FILE, self.serve)
        self.serve_base = f"http://127.0.0.1:{port}"
        body = httpx.post(self.serve_base + _URL, json=_BODY, timeout=30).content
        (self.tmp / "body.sse").write_bytes(body)
        # The bare app serves a socket bound (to a port the kernel picks) and listening here, handed over as
        # an inherited descriptor: its port is known at once and nothing else can take it in between.
        with socket.create_server(("127.0.0.1", 0)) as listening:
            self.bare_base = f"http://127.0.0.1:{listening.getsockname()[1]}"
            fd = listening.fileno()
            bare_args = [sys.executable, "-m", "bench._bare_sse", str(fd), str(self.tmp / "body.sse")]
            self.bare = subprocess.Popen(
                bare_args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env, pass_fds=(fd,)
            )
        _wait_ready(self.bare_base, self.bare, "/")

    def close(self) -> None:
        for process in (self.serve, self.bare):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)


def _cpu_seconds(pid: int) -> float:
    """CPU time of the process *pid* so far, in nanoseconds' resolution: the sum of its threads' time on the
    CPU from ``/proc/<pid>/task/<tid>/schedstat``. ``/proc/<pid>/stat`` counts clock ticks (10 ms): over a
    round of the bare server (~250 ms of CPU) one tick moved its CPU per request by 4%, and the ratio with it.
    Both servers' threads live as long as they do (a thread ended between two readings would drop out)."""
    try:
        return (
            sum(
                int((task / "schedstat").read_text().split()[0])
                for task in Path(f"/proc/{pid}/task").iterdir()
            )
            / 1e9
        )
    except (OSError, ValueError, IndexError):  # no schedstat (a kernel without it): clock ticks
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _request(client: httpx.AsyncClient) -> None:
    async with client.stream("POST", _URL, json=_BODY) as response:
        async for _ in response.aiter_raw():
            pass
        if response.status_code != 200:
            raise RuntimeError(f"POST /v1/events answered {response.status_code}")


def _clients(base: str, n: int) -> list[httpx.AsyncClient]:
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    return [httpx.AsyncClient(base_url=base, timeout=60, limits=limits) for _ in range(n)]


def _concurrent(clients: list[httpx.AsyncClient]) -> Callable[[], Awaitable[None]]:
    async def many() -> None:
        await asyncio.gather(*(_request(c) for c in clients))

    return many


def _one_after_another(client: httpx.AsyncClient, n: int) -> Callable[[], Awaitable[None]]:
    async def serial() -> None:
        for _ in range(n):
            await _request(client)

    return serial


def measures(ctx: SuiteContext) -> list[Measure]:
    servers = Servers()
    ctx.add_cleanup(servers.close)
    serve = {n: _clients(servers.serve_base, n) for n in (1, 10, 50)}
    bare = {n: _clients(servers.bare_base, n) for n in (1, 10, 50)}

    async def close_clients() -> None:
        for group in (*serve.values(), *bare.values()):
            for client in group:
                await client.aclose()

    ctx.add_cleanup(close_clients)
    floor = "bare Starlette/uvicorn app streaming the same SSE bytes (same protocol), same run"
    return [
        Measure(
            "HTTP echo over SSE, serial request (serve, SQLite)",
            _concurrent(serve[1]),
            floor=_concurrent(bare[1]),
            floor_name=floor,
            goal=Goal.ratio(3, source="issue 16: serial p50 ≤ 3× bare"),
            unit="µs/request",
        ),
        Measure(
            "HTTP echo over SSE, 10 concurrent clients, per request",
            _concurrent(serve[10]),
            floor=_concurrent(bare[10]),
            floor_name=floor,
            goal=Goal.ratio(3, source="issue 16: req/s at 10 clients ≥ 1/3 bare"),
            unit="µs/request",
            per=10,
        ),
        Measure(
            "HTTP echo over SSE, 50 concurrent clients, per request",
            _concurrent(serve[50]),
            floor=_concurrent(bare[50]),
            floor_name=floor,
            goal=Goal.ratio(3, source="issue 16: req/s at 50 clients ≥ 1/3 bare"),
            unit="µs/request",
            per=50,
        ),
        Measure(
            "HTTP echo over SSE, serve: 10 clients ÷ 1 client, per request",
            _concurrent(serve[10]),
            # the same ten requests from one client, one after another: ratio < 1 means ten clients are served
            # faster than one client sending the same requests (each side's time is divided by ten)
            floor=_one_after_another(serve[1][0], 10),
            floor_name="serve, the same 10 requests from one client one after another (ratio < 1: ten clients get more than one)",
            goal=Goal.ratio(1, source="issue 16: req/s higher at 10 clients than at 1"),
            unit="µs/request",
            per=10,
        ),
    ]


# -- the standalone report ---------------------------------------------------------------------------------------


async def _latencies(client: httpx.AsyncClient, n: int) -> list[float]:
    out: list[float] = []
    for _ in range(n):
        start = time.perf_counter()
        await _request(client)
        out.append(time.perf_counter() - start)
    return out


async def _throughput(clients: list[httpx.AsyncClient], per_client: int) -> float:
    async def loop(client: httpx.AsyncClient) -> None:
        for _ in range(per_client):
            await _request(client)

    start = time.perf_counter()
    await asyncio.gather(*(loop(c) for c in clients))
    return len(clients) * per_client / (time.perf_counter() - start)


async def counted_echo_request(requests: int = 20) -> dict[str, float]:
    """SQL statements, commits and aiosqlite thread round trips per echo request on an in-process service."""
    import aiosqlite.core
    from agentrunner_host.config import load_settings
    from agentrunner_host.http import create_app
    from agentrunner_host.service import HostService
    from sqlalchemy import event

    tmp = Path(tempfile.mkdtemp(prefix="agentrunner-bench-count-"))
    settings = load_settings(None, environ={"AGENTRUNNER_DATA_DIR": str(tmp / "data")}, cwd=tmp)
    counts = {"statements": 0, "commits": 0, "hops": 0}
    original = aiosqlite.core.Connection._execute

    async def counting(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        counts["hops"] += 1
        return await original(self, fn, *args, **kwargs)

    def on_statement(*_: Any) -> None:
        counts["statements"] += 1

    def on_commit(*_: Any) -> None:
        counts["commits"] += 1
        if threading.current_thread().name.startswith("agentrunner-sqlite-batch"):
            counts["hops"] += 1  # a whole transaction on the stores' SQLite writer thread is one hop

    async with HostService.open(settings) as service:
        app = create_app(service, api_token=None)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8420") as client:
            await _request(client)  # warm: caches, prepared statements, the first run's reads
            engine = service.engine.sync_engine
            event.listen(engine, "before_cursor_execute", on_statement)
            event.listen(engine, "commit", on_commit)
            aiosqlite.core.Connection._execute = counting
            try:
                for _ in range(requests):
                    # the stream ends only after the run's end is committed: the count is the whole request
                    await _request(client)
            finally:
                aiosqlite.core.Connection._execute = original
                event.remove(engine, "before_cursor_execute", on_statement)
                event.remove(engine, "commit", on_commit)
    return {k: v / requests for k, v in counts.items()}


async def report(*, requests: int = 200, rounds: int = 3) -> str:
    """The standalone measures as Markdown (both servers measured alternately, *rounds* times)."""
    servers = Servers()
    try:
        lat: dict[str, list[float]] = {"serve": [], "bare": []}
        rps: dict[tuple[str, int], list[float]] = {}
        cpu: dict[str, list[float]] = {"serve": [], "bare": []}
        bases = {"serve": servers.serve_base, "bare": servers.bare_base}
        pids = {"serve": servers.serve.pid, "bare": servers.bare.pid}
        for _ in range(rounds):
            for name, base in bases.items():
                clients = {n: _clients(base, n) for n in (1, 10, 50)}
                try:
                    cpu_start = _cpu_seconds(pids[name])
                    done = 0
                    lat[name] += await _latencies(clients[1][0], requests)
                    done += requests
                    for n, group in clients.items():
                        per_client = max(1, requests // n)
                        rps.setdefault((name, n), []).append(await _throughput(group, per_client))
                        done += per_client * n
                    cpu[name].append((_cpu_seconds(pids[name]) - cpu_start) / done)
                finally:
                    for group in clients.values():
                        for client in group:
                            await client.aclose()
    finally:
        servers.close()
    counted = await counted_echo_request()

    def pct(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    lines = [
        f"load average at start: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}",
        "",
        "| measure | serve (echo, SQLite) | bare Starlette/uvicorn | ratio | goal |",
        "|---|---:|---:|---:|---|",
    ]
    s50, b50 = pct(lat["serve"], 0.5) * 1e6, pct(lat["bare"], 0.5) * 1e6
    s99, b99 = pct(lat["serve"], 0.99) * 1e6, pct(lat["bare"], 0.99) * 1e6
    lines.append(f"| serial p50 | {s50:,.0f} µs | {b50:,.0f} µs | {s50 / b50:.2f}× | ≤ 3× |")
    lines.append(f"| serial p99 | {s99:,.0f} µs | {b99:,.0f} µs | {s99 / b99:.2f}× | - |")
    for n in (1, 10, 50):
        s, b = statistics.median(rps[("serve", n)]), statistics.median(rps[("bare", n)])
        goal = "-" if n == 1 else "≥ 1/3 of bare"
        lines.append(f"| requests/s, {n} client(s) | {s:,.0f} | {b:,.0f} | {s / b:.2f}× | {goal} |")
    sc, bc = statistics.median(cpu["serve"]) * 1e6, statistics.median(cpu["bare"]) * 1e6
    lines.append(f"| server CPU per request | {sc:,.0f} µs | {bc:,.0f} µs | {sc / bc:.2f}× | ≤ 3× |")
    s1, s10 = statistics.median(rps[("serve", 1)]), statistics.median(rps[("serve", 10)])
    lines.append(f"| serve: requests/s at 10 clients ÷ at 1 | {s10 / s1:.2f}× | | | > 1 |")
    lines += [
        "",
        "Per echo request, counted on an in-process service (SQLite):",
        "",
        "| SQL statements | commits | thread round trips (aiosqlite + writer thread) |",
        "|---:|---:|---:|",
        f"| {counted['statements']:.1f} | {counted['commits']:.1f} | {counted['hops']:.1f} |",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Print the standalone report."""
    print(asyncio.run(report()), end="")


if __name__ == "__main__":
    main()
