"""PF9: a back-call of our run-scoped API next to the released LangBot plugin runtime's ``__ping``, one run.

Run: ``uv run python -m bench.peer_langbot [--repeats N] [--calls N]`` (full mode only: it installs PyPI
``langbot-plugin==0.7.18`` into ``bench/out/venv-langbot`` on first use, ~35 s, and needs the registry).

Measured in one process, variants interleaved per repeat:

* **the subject, a real back-call**: a runner in an ``agentrunner-plugin`` child process (started by the
  host's runtime manager, as ``serve`` does) calls ``await api.state.get("conversation", key)`` — the typed
  run-scoped API — ``--calls`` times in one run and times each call; every call crosses the wire to the host,
  is checked by the host's back-call dispatcher against the run's frozen snapshot and answered from the
  SQLite state store (a migrated database, the key present), then crosses back. The figure is the mean per
  call as the runner sees it;
* ``lbp rt -s`` (the LangBot runtime in stdio control mode), ``{"seq_id": N, "action": "__ping", "data": {}}``
  sent by this process, sequentially: LangBot's cheapest round trip, which does no work;
* our runtime's own wire ``ping`` (after the ``hello`` handshake), for the transport alone;
* a raw asyncio child that echoes each line with orjson (the physical floor, perf-floors row E);
* the back-call's own database read alone: ``StateStore.get`` of the same key on the same store, called in
  this process (what the back-call spends in SQLAlchemy over aiosqlite, without wire or dispatcher).

The goal (issue 8, PF9) is the back-call round trip ≤ 0.2× LangBot's ``__ping``: ratios are per repeat, and
the table gives their median.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerManifest,
    AgentRunResult,
    I18nObject,
    RunCompletedResult,
)

ROOT = Path(__file__).resolve().parent.parent
"""The repository root: the bench plugin's directory (``bench.peer_langbot`` is importable from it)."""
VENV = Path(__file__).parent / "out" / "venv-langbot"
_KEY = "pf9.key"
_PLUGIN = "bench/pf9"
_ECHO_CHILD = (
    "import sys, orjson\n"
    "for line in sys.stdin.buffer:\n"
    "    sys.stdout.buffer.write(orjson.dumps(orjson.loads(line)) + b'\\n'); sys.stdout.buffer.flush()\n"
)


class BackCaller(AgentRunner):
    """Makes as many sequential ``state.get`` back-calls as the event's text says and reports the mean µs."""

    manifest = AgentRunnerManifest(
        id=f"plugin:{_PLUGIN}/default", name="default", label=I18nObject(en_US="PF9 back-caller")
    )

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        calls = int(ctx.input.text or "1")
        if calls == 0:  # the set-up run: store the key that the measured calls read
            yield out.state("conversation", _KEY, {"n": 1})
            yield out.message("stored")  # a run must say something
            yield out.complete()
            return
        total = 0.0
        for _ in range(calls):
            started = time.perf_counter()
            item = await api.state.get("conversation", _KEY)
            total += time.perf_counter() - started
            if item.value != {"n": 1}:  # the read must be a real one, not an empty answer
                yield out.fail("bench.state_missing", f"state.get answered {item.value!r}")
                return
        yield out.message(f"{calls} back-calls")
        yield out.complete(usage={"backcall_mean_us": total / calls * 1e6})


class _BackCalls:
    """A host with SQLite stores and the back-caller in a plugin process; :meth:`run` is one measured run."""

    opened = False
    """Whether :meth:`open` got as far as the plugin's runtime (what :meth:`close` then stops)."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        """Back-calls per measured run."""

    async def open(self) -> None:
        from agentrunner_host.definitions import AgentBinding, RunPolicy
        from agentrunner_host.host import Host
        from agentrunner_host.runtime import PluginSpec, RunnerEntry, RuntimeManager
        from agentrunner_host.stores import HostStores
        from agentrunner_host.stores.engine import create_engine, default_sqlite_url, upgrade

        directory = Path(tempfile.mkdtemp(prefix="agentrunner-pf9-"))
        self.engine = create_engine(default_sqlite_url(directory))
        await upgrade(self.engine)
        self.stores = await HostStores.open(self.engine, data_dir=directory)
        # The default run policy: its back-call burst (1,000) covers a run of up to 1,000 back-to-back calls
        # (the token bucket is checked on every call); more calls per run need a larger burst.
        policy = (
            RunPolicy() if self.calls <= RunPolicy().backcall_burst else RunPolicy(backcall_burst=self.calls)
        )
        binding = AgentBinding(
            binding_id="pf9", runner_id=f"plugin:{_PLUGIN}/default", event_types=["*"], run_policy=policy
        )
        self.host = Host.create(bindings=[binding], stores=self.stores)
        spec = PluginSpec(
            plugin_id=_PLUGIN,
            runners=(RunnerEntry(name="default", ref="bench.peer_langbot:BackCaller"),),
            plugin_dir=ROOT,
        )
        self.runtime = RuntimeManager(self.host.dispatcher, plugins=[spec])
        self.host.registry.add(self.runtime.connection(_PLUGIN))
        self.opened = True
        self.events = itertools.count()
        await self.run(0)
        # the owner the set-up run's state.updated was stored under, for the store-only variant
        from agentrunner import codec
        from agentrunner_host.access import StateOwner
        from sqlalchemy import text

        async with self.engine.connect() as conn:
            owner = (await conn.execute(text("SELECT owner FROM state_entries"))).scalar_one()
        scope, *parts = codec.loads(owner)
        self.owner = StateOwner(scope, tuple(parts))

    async def store_get(self) -> None:
        """The same read on the state store alone, in this process (no wire, no dispatcher)."""
        item = await self.stores.state.get(self.owner, _KEY)
        if item is None:
            raise RuntimeError("the state key is missing")

    async def run(self, calls: int) -> float:
        """One run making *calls* back-calls; the mean µs per call the runner measured."""
        from agentrunner_host.definitions import AgentEventEnvelope

        event = AgentEventEnvelope.model_validate(
            {
                "event_id": f"pf9-{next(self.events)}",
                "event_type": "message.received",
                "conversation_id": "pf9",
                "input": {"text": str(calls)},
                "delivery": {"surface": "bench"},
            }
        )
        handle = await self.host.orchestrator.submit(event)
        last: AgentRunResult | None = None
        async for delivered in handle.results():
            last = delivered.result
        if not isinstance(last, RunCompletedResult):
            raise RuntimeError(f"the back-call run did not complete: {last!r}")
        mean = last.data.usage.get("backcall_mean_us", 0.0)
        return float(mean) if isinstance(mean, int | float) else 0.0

    async def close(self) -> None:
        await self.host.aclose()
        await self.runtime.aclose()
        await self.stores.aclose()
        await self.engine.dispose()


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


BACK_CALL = "agentrunner back-call: api.state.get through the runtime, dispatcher and SQLite store"
STORE_ONLY = "part of it: the same state.get on the SQLite store alone (in process)"


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

    back_calls = _BackCalls(calls)
    try:
        await ours.call({"kind": "hello", "id": 0}, "kind", "welcome")
        await back_calls.open()
        variants = {
            "langbot __ping": lang_ping,
            "agentrunner ping": our_ping,
            "raw echo child (floor)": floor_echo,
        }
        variants[STORE_ONLY] = back_calls.store_get
        samples: dict[str, list[float]] = {BACK_CALL: [], **{name: [] for name in variants}}
        for op in variants.values():  # warm up
            for _ in range(50):
                await op()
        await back_calls.run(50)
        for _ in range(repeats):
            samples[BACK_CALL].append(await back_calls.run(calls))
            for name, op in variants.items():
                started = time.perf_counter()
                for _ in range(calls):
                    await op()
                samples[name].append((time.perf_counter() - started) / calls * 1e6)
    finally:  # a failed measurement must not leave the children running
        for client in (lang, ours, floor):
            await client.close()
        if back_calls.opened:
            await back_calls.close()
    return samples


def _load() -> str:
    return " / ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description="PF9: our runtime vs the released LangBot runtime")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    load = _load()
    samples = asyncio.run(measure(args.repeats, args.calls))
    lang = samples["langbot __ping"]
    print(f"load average at start: {load}")
    print("| measure | median µs/call (min–max) | ÷ langbot __ping, median (min–max) |")
    print("|---|---:|---:|")
    for name, values in samples.items():
        ratios = [v / lv for v, lv in zip(values, lang, strict=True)]
        verdict = ""
        if name == BACK_CALL:
            verdict = " (goal ≤ 0.2×: " + ("meets" if statistics.median(ratios) <= 0.2 else "misses") + ")"
        print(
            f"| {name} | {statistics.median(values):.0f} ({min(values):.0f}–{max(values):.0f}) "
            f"| {statistics.median(ratios):.3f}x ({min(ratios):.3f}–{max(ratios):.3f}x){verdict} |"
        )
    print(f"load average at end: {_load()}")


if __name__ == "__main__":
    main()
