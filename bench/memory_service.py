"""PF7 on the real service: memory of ``agentrunner serve`` per in-flight run, 1,000 runs streaming over SSE.

Run: ``uv run python -m bench.memory_service [--runs N]``. A standalone measure (memory is not a timing), like
``bench.memory_inflight``, which measures the orchestrator alone in one process with tracemalloc. Here:

* a real ``agentrunner serve`` child on SQLite (a fresh data directory), with the ``tests/slow`` plugin's
  dripper as an agent: each run streams one delta, then waits (``delay_ms`` far past the measurement) in the
  plugin's own process, as a runner waiting on a slow model does;
* N clients, each ``POST /v1/events?stream=true`` and reading its SSE stream until the first
  ``message.delta`` arrived — every run is then started, stored (the run row, its event, the user item, the
  delivered result committed before it was sent) and held open with its SSE feed;
* the measure is the growth of the ``serve`` process's resident memory (``VmRSS`` of ``/proc/<pid>/status``)
  from before the N runs (after a warm-up of runs that also ended) to when all N are live, divided by N;
  the plugin process's growth is printed too (the runner's side, not the host's). Afterwards every run is
  cancelled through ``POST /v1/runs/{id}/cancel``, each stream read to its terminal, and the memory still
  held is printed; then a second wave of N runs shows whether that memory is reused (RSS flat) or kept
  per run (RSS grows again).

RSS is what an operator sees; it includes allocator slack, so it is a harder measure than the heap growth
``bench.memory_inflight`` reports. Goal (issue 8 / 16, PF7): ≤ 64 KiB per in-flight run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson

__all__ = ["main", "measure", "warm_up", "write_config"]

PLUGINS = Path(__file__).resolve().parents[1] / "tests" / "service" / "plugins"
GOAL_BYTES = 64 * 1024
_START_TIMEOUT = 120.0
_BODY = {"text": "go", "bot_id": "wait"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found.extend(int(child) for child in text)
    return found


def _load() -> str:
    return " / ".join(f"{v:.2f}" for v in os.getloadavg())


class _Stream:
    """One client: posts the event, reads its SSE stream, reports the run id once the first delta arrived."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.run_id: str | None = None
        self.live = asyncio.Event()
        self.terminal: str | None = None

    async def follow(self) -> None:
        async with self.client.stream("POST", "/v1/events?stream=true", json=_BODY) as response:
            if response.status_code != 200:
                body = (await response.aread()).decode(errors="replace")
                raise RuntimeError(f"POST /v1/events answered {response.status_code}: {body}")
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = orjson.loads(line[5:])
                kind = data.get("type")
                self.run_id = self.run_id or data.get("run_id")
                if kind == "message.delta":
                    self.live.set()
                elif kind in ("run.completed", "run.failed"):
                    self.terminal = str(kind)
                    return


async def _wave(base: str, runs: int) -> tuple[list[_Stream], list[asyncio.Task[None]], httpx.AsyncClient]:
    limits = httpx.Limits(max_connections=runs + 10, max_keepalive_connections=runs + 10)
    client = httpx.AsyncClient(base_url=base, timeout=httpx.Timeout(600), limits=limits)
    streams = [_Stream(client) for _ in range(runs)]
    tasks: list[asyncio.Task[None]] = []

    async def until_live(stream: _Stream, task: asyncio.Task[None]) -> None:
        live = asyncio.create_task(stream.live.wait())
        await asyncio.wait([task, live], return_when=asyncio.FIRST_COMPLETED)
        if not stream.live.is_set():
            live.cancel()
            task.result()  # its error, if it failed
            raise RuntimeError("a stream ended before its first delta")

    # opened 100 at a time (each batch live before the next): the same runs in the end, without a burst of
    # a thousand simultaneous starts on two cores
    for start in range(0, runs, 100):
        batch = streams[start : start + 100]
        started = [asyncio.create_task(s.follow()) for s in batch]
        tasks.extend(started)
        await asyncio.gather(*(until_live(s, t) for s, t in zip(batch, started, strict=True)))
    return streams, tasks, client


async def _end(streams: list[_Stream], tasks: list[asyncio.Task[None]], client: httpx.AsyncClient) -> None:
    async def cancel(stream: _Stream) -> None:
        assert stream.run_id is not None
        answer = await client.post(f"/v1/runs/{stream.run_id}/cancel")
        if answer.status_code not in (200, 202):
            raise RuntimeError(f"cancel answered {answer.status_code}")

    for start in range(0, len(streams), 100):
        await asyncio.gather(*(cancel(s) for s in streams[start : start + 100]))
    await asyncio.gather(*tasks)
    await client.aclose()


async def warm_up(base: str) -> None:
    """Runs that start, stream, wait and are cancelled, so first-use costs are not counted."""
    for _ in range(2):
        await _end(*await _wave(base, 50))


def write_config(home: Path) -> Path:
    """``serve``'s config in *home*: the dripper as agent ``wait`` (bound to bot ``wait``), each run streaming
    one delta, then waiting far past any measurement in its plugin process."""
    config = home / "serve.toml"
    config.write_text(
        # the default [http] max_connections (4096) serves 1,000 live SSE streams (the old 512 did not)
        f'[runners]\nplugin_dirs = ["{PLUGINS}"]\n\n'
        '[[agents]]\nagent_id = "wait"\nrunner_id = "plugin:tests/slow/dripper"\n'
        "runner_config = { count = 2, delay_ms = 100000000 }\n\n"
        '[[bindings]]\nbinding_id = "wait"\nagent_id = "wait"\nscope = { type = "bot", id = "wait" }\n'
    )
    return config


async def _measure_on(base: str, pid: int, runs: int) -> dict[str, float]:
    await warm_up(base)
    await asyncio.sleep(2)  # let the host settle (freed buffers, the warm-up's last writes)
    (plugin,) = _children(pid)
    before, plugin_before = _rss(pid), _rss(plugin)
    streams, tasks, client = await _wave(base, runs)
    await asyncio.sleep(2)
    during, plugin_during = _rss(pid), _rss(plugin)
    await _end(streams, tasks, client)
    if any(s.terminal != "run.failed" for s in streams):
        raise RuntimeError("a run did not end with its cancel")
    await asyncio.sleep(2)
    after = _rss(pid)
    # a second wave of as many runs: if what the first left held is reused, RSS barely moves (allocator
    # slack, not a leak); if it grows by as much again, something is kept per run
    streams, tasks, client = await _wave(base, runs)
    await asyncio.sleep(2)
    again = _rss(pid)
    await _end(streams, tasks, client)
    return {
        "before": before,
        "during": during,
        "after": after,
        "again": again,
        "per_run": (during - before) / runs,
        "plugin_per_run": (plugin_during - plugin_before) / runs,
    }


def measure(runs: int) -> dict[str, float]:
    """Start serve, measure, stop it; the figures in bytes (per run where named so)."""
    home = Path(tempfile.mkdtemp(prefix="agentrunner-pf7-"))
    config = write_config(home)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRUNNER_")}
    args = [sys.executable, "-m", "agentrunner_host.cli", "serve", "--port", str(port)]
    args += ["--data-dir", str(home / "data"), "--config", str(config)]
    log = (home / "serve.log").open("wb")
    serve = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + _START_TIMEOUT
        while True:
            if serve.poll() is not None:
                raise RuntimeError(f"serve exited early ({serve.returncode}); see {home / 'serve.log'}")
            try:
                httpx.get(base + "/readyz", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError("serve did not become ready") from None
                time.sleep(0.1)
        return asyncio.run(_measure_on(base, serve.pid, runs))
    finally:
        serve.terminate()
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    print(f"load average at start: {_load()}")
    figures = measure(args.runs)
    per_run = figures["per_run"]
    verdict = "meets" if per_run <= GOAL_BYTES else "misses"
    mib = 1024 * 1024
    print("| measure | value | goal | verdict |")
    print("|---|---:|---|---|")
    print(
        f"| `serve` RSS per in-flight run ({args.runs} runs streaming over SSE, waiting) "
        f"| {per_run / 1024:.1f} KiB | ≤ 64 KiB | {verdict} |"
    )
    print(
        f"| plugin process RSS per in-flight run (the runner's side) | {figures['plugin_per_run'] / 1024:.1f} KiB | - | - |"
    )
    print(
        f"| `serve` RSS before / with the runs / after they ended / with a second wave of as many | "
        f"{figures['before'] / mib:.0f} / {figures['during'] / mib:.0f} / {figures['after'] / mib:.0f} / "
        f"{figures['again'] / mib:.0f} MiB | - | - |"
    )
    print(f"load average at end: {_load()}")


if __name__ == "__main__":
    main()
