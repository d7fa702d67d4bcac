"""PF9: our plugin runtime next to the released LangBot plugin runtime, driven by the same client.

Run: ``uv run python -m bench.peer_langbot [--repeats N] [--calls N]`` (full mode only: it installs PyPI
``langbot-plugin==0.7.18`` into ``bench/out/venv-langbot`` on first use, ~35 s, and needs the registry).

One asyncio client writes a newline-terminated JSON request to a child's stdin and waits for the answer line
on its stdout, sequentially, against:

* ``lbp rt -s`` (the LangBot runtime in stdio control mode): ``{"seq_id": N, "action": "__ping", "data": {}}``;
* ``agentrunner-plugin`` hosting the echo runner: a ``ping`` frame (after the ``hello`` handshake);
* a raw asyncio child that echoes each line with orjson (the physical floor, perf-floors row E).

Variants are interleaved per repeat; the table gives medians of per-repeat means and the ratios. The goal
(issue 8, PF9) is our back-call round trip ≤ 0.2× LangBot's ``__ping``; ``bench/RESULTS.md`` has our back-call
figure from the ``runtime`` suite next to these.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import orjson

VENV = Path(__file__).parent / "out" / "venv-langbot"
_ECHO_CHILD = (
    "import sys, orjson\n"
    "for line in sys.stdin.buffer:\n"
    "    sys.stdout.buffer.write(orjson.dumps(orjson.loads(line)) + b'\\n'); sys.stdout.buffer.flush()\n"
)


def _ensure_langbot() -> Path:
    lbp = VENV / "bin" / "lbp"
    if not lbp.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "langbot-plugin==0.7.18"], check=True)
    return lbp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LineClient:
    """Sends one JSON line, waits for the first answer line that matches."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        assert proc.stdin is not None
        assert proc.stdout is not None
        self.stdin = proc.stdin
        self.stdout = proc.stdout

    async def call(self, request: dict[str, object], match: str, value: object) -> dict[str, object]:
        self.stdin.write(orjson.dumps(request) + b"\n")
        await self.stdin.drain()
        while True:
            line = await self.stdout.readline()
            if not line:
                raise RuntimeError("child closed its stdout")
            try:
                answer = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(answer, dict) and answer.get(match) == value:
                return answer

    async def close(self) -> None:
        self.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 3)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


async def _spawn(*argv: str, env: dict[str, str] | None = None) -> LineClient:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
        limit=16 * 1024 * 1024,
    )
    return LineClient(proc)


async def measure(repeats: int, calls: int) -> dict[str, list[float]]:
    lbp = _ensure_langbot()
    port = _free_port()
    lang = await _spawn(
        str(lbp),
        "rt",
        "-s",
        "--ws-control-port",
        str(_free_port()),
        "--ws-debug-port",
        str(port),
        env={**os.environ, "PATH": f"{VENV / 'bin'}:{os.environ.get('PATH', '')}"},
    )
    ours = await _spawn(
        sys.executable, "-m", "agentrunner.wire.plugin", "--runner", "agentrunner_runner_echo:EchoRunner"
    )
    floor = await _spawn(sys.executable, "-c", _ECHO_CHILD)
    seq = 0

    async def lang_ping() -> None:
        nonlocal seq
        seq += 1
        await lang.call({"seq_id": seq, "action": "__ping", "data": {}}, "seq_id", seq)

    async def our_ping() -> None:
        nonlocal seq
        seq += 1
        await ours.call({"kind": "ping", "id": seq}, "id", seq)

    async def floor_echo() -> None:
        nonlocal seq
        seq += 1
        await floor.call({"id": seq, "action": "__ping"}, "id", seq)

    await ours.call({"kind": "hello", "id": 0}, "kind", "welcome")
    variants = {
        "langbot __ping": lang_ping,
        "agentrunner ping": our_ping,
        "raw echo child (floor)": floor_echo,
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for op in variants.values():  # warm up
        for _ in range(50):
            await op()
    for _ in range(repeats):
        for name, op in variants.items():
            started = time.perf_counter()
            for _ in range(calls):
                await op()
            samples[name].append((time.perf_counter() - started) / calls * 1e6)
    for client in (lang, ours, floor):
        await client.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description="PF9: our runtime vs the released LangBot runtime")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    samples = asyncio.run(measure(args.repeats, args.calls))
    lang = samples["langbot __ping"]
    print("| measure | median µs/call (min–max) | ÷ langbot __ping |")
    print("|---|---:|---:|")
    for name, values in samples.items():
        ratios = [v / lv for v, lv in zip(values, lang, strict=True)]
        print(
            f"| {name} | {statistics.median(values):.0f} ({min(values):.0f}–{max(values):.0f}) "
            f"| {statistics.median(ratios):.3f}x |"
        )


if __name__ == "__main__":
    main()
