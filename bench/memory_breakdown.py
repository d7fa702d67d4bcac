"""PF7's breakdown: where the service's memory per live run goes (Python heap by source line and by package).

Run: ``uv run python -m bench.memory_breakdown [--runs N] [--top K]``. The same set-up as ``bench.memory_service``
(SQLite stores, the ``tests/slow`` dripper as the agent, each run streaming one delta then waiting in its
plugin process, every run's SSE stream held open by its client), except that the service runs **in this
process** under ``tracemalloc``, served by uvicorn exactly as ``serve`` configures it, and the N clients run
in a child process (so their allocations are not counted). The heap growth from before the N runs to when all
are live is grouped by the allocating source line and by package, each divided by N; the difference between
the total and ``bench.memory_service``'s RSS figure is what ``tracemalloc`` cannot see (C buffers of the
transports, SQLite's page cache, allocator slack).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import tracemalloc
from collections import Counter
from pathlib import Path

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]

_CLIENT = """
import asyncio, sys
from bench.memory_service import _end, _wave, warm_up

async def main() -> None:
    base, runs = sys.argv[1], int(sys.argv[2])
    await warm_up(base)
    print("warm", flush=True)
    sys.stdin.readline()
    held = await _wave(base, runs)
    print("live", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    await _end(*held)
    print("ended", flush=True)

asyncio.run(main())
"""


def _package(filename: str) -> str:
    """The package (or stdlib module) an allocation's file belongs to."""
    parts = Path(filename).parts
    for marker in ("site-packages", "src"):
        if marker in parts:
            rest = parts[parts.index(marker) + 1 :]
            if rest:
                return rest[0] if len(rest) == 1 or rest[0] != "agentrunner_host" else "/".join(rest[:2])
    return "stdlib:" + Path(filename).stem


async def _measure(runs: int, top: int, frames: int) -> None:
    import uvicorn
    from agentrunner_host.config import load_settings
    from agentrunner_host.http import create_app
    from agentrunner_host.http.server import raise_open_files_limit, server_config
    from agentrunner_host.service import HostService

    from .memory_service import write_config

    home = Path(tempfile.mkdtemp(prefix="agentrunner-pf7b-"))
    config = write_config(home)
    settings = load_settings(config, data_dir=home / "data")
    raise_open_files_limit(settings.config.http.max_connections)
    async with HostService.open(settings) as service:
        app = create_app(service, api_token=None)
        server = uvicorn.Server(server_config(app, host="127.0.0.1", port=0, http=settings.config.http))
        serving = asyncio.create_task(server.serve())
        while not server.started:  # noqa: ASYNC110 - uvicorn's started is a plain flag, not an event
            await asyncio.sleep(0.05)
        port = int(server.servers[0].sockets[0].getsockname()[1])
        client = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _CLIENT,
            f"http://127.0.0.1:{port}",
            str(runs),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=ROOT,
        )
        assert client.stdin is not None
        assert client.stdout is not None
        try:
            assert (await client.stdout.readline()).strip() == b"warm"
            await asyncio.sleep(2)
            gc.collect()
            before = tracemalloc.take_snapshot()
            client.stdin.write(b"go\n")
            await client.stdin.drain()
            assert (await client.stdout.readline()).strip() == b"live"
            await asyncio.sleep(2)
            gc.collect()
            during = tracemalloc.take_snapshot()
            # the runs end with the service (shutdown cancels them); the clients' own ending is not measured
            client.stdin.write(b"end\n")
            await client.stdin.drain()
            await client.stdout.readline()
        finally:
            if client.returncode is None:
                client.kill()
            await client.wait()
            server.should_exit = True
            await serving
    diff = during.compare_to(before, "lineno")
    total = sum(d.size_diff for d in diff)
    print(f"load average: {' / '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"Python heap growth per live run: {total / runs / 1024:.1f} KiB ({runs} runs)\n")
    by_package: Counter[str] = Counter()
    for d in diff:
        by_package[_package(d.traceback[0].filename)] += d.size_diff
    print("| package | KiB per run |\n|---|---:|")
    for name, size in by_package.most_common(top):
        print(f"| {name} | {size / runs / 1024:.2f} |")
    print("\n| allocating line | KiB per run | blocks per run |\n|---|---:|---:|")
    for d in diff[:top]:
        frame = d.traceback[0]
        where = f"{_package(frame.filename)}:{Path(frame.filename).name}:{frame.lineno}"
        print(f"| {where} | {d.size_diff / runs / 1024:.2f} | {d.count_diff / runs:.1f} |")
    if frames > 1:
        print("\nThe largest growths by whole traceback (innermost frame last):")
        for d in during.compare_to(before, "traceback")[: min(top, 12)]:
            print(f"\n{d.size_diff / runs / 1024:.2f} KiB per run:")
            for frame in d.traceback:
                print(f"    {_package(frame.filename)}:{Path(frame.filename).name}:{frame.lineno}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--frames", type=int, default=1, help="traceback depth (>1 also groups by traceback)")
    args = parser.parse_args()
    tracemalloc.start(args.frames)
    asyncio.run(_measure(args.runs, args.top, args.frames))


if __name__ == "__main__":
    main()
