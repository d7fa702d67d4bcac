"""Runtime suite: runners out of process over the wire protocol, next to raw stdio floors measured in the same run.

* **back-call round trip**: a runner in a warm plugin process makes sequential ``state.get`` back-calls answered
  by a trivial handler, vs a raw asyncio child echoing orjson NDJSON lines (perf-floors rows E/F; the released
  LangBot runtime is 8.8x this floor, see the "Peer anchor");
* **whole run**: a ~5 KB context in, 52 results out (50 ``message.delta`` + ``message.completed`` +
  ``run.completed``), each result parsed by the host through the typed union, vs a typed stdio floor: the host
  dumps the same context with pydantic, a raw child answers 52 prebuilt result lines, the host parses each
  (row G, "typed host");
* **start**: a cold start (spawn, import, handshake, first answer) vs ``python -c 'import agentrunner.wire'``
  (row M), and the first result of a run on a warm process.

``uv run python -m bench.runtime_wire`` also prints latency percentiles (p50/p99) of the back-call as the runner
sees it and of the echo floor, which the shared table (medians of means) cannot show.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerManifest,
    AgentRunRequest,
    AgentRunResult,
    BackCallRequest,
    I18nObject,
    ResultEmitter,
    parse_result,
)
from pydantic import JsonValue

if TYPE_CHECKING:
    from agentrunner_host.runtime import SubprocessRunnerConnection

    from ._framework import Measure, SuiteContext

__all__ = ["BenchPinger", "BenchStreamer", "main", "measures"]

ROOT = Path(__file__).resolve().parent.parent
"""The repository root: the bench plugin's directory (``bench.runtime_wire`` is importable from it)."""

CALLS_PER_RUN = 100
"""Sequential back-calls per pinger run: the run's own overhead is spread over them."""

DELTAS = 50
"""Deltas per streamed run (52 results with the completed message and the terminal result)."""

_ECHO_CHILD = """
import asyncio, sys, orjson
async def main():
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 23)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    wt, wp = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
    writer = asyncio.StreamWriter(wt, wp, reader, loop)
    while line := await reader.readline():
        msg = orjson.loads(line)
        writer.write(orjson.dumps({"id": msg["id"], "result": {"value": msg["params"]}}) + b"\\n")
        await writer.drain()
asyncio.run(main())
"""

_RUN_CHILD = """
import asyncio, sys, orjson
async def main():
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 23)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    wt, wp = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
    writer = asyncio.StreamWriter(wt, wp, reader, loop)
    results = orjson.loads(sys.argv[1])
    while line := await reader.readline():
        run_id = orjson.loads(line)["context"]["run_id"]
        writer.write(b"".join(orjson.dumps({**r, "run_id": run_id}) + b"\\n" for r in results))
        await writer.drain()
asyncio.run(main())
"""


def _manifest(name: str) -> AgentRunnerManifest:
    return AgentRunnerManifest(
        id=f"plugin:bench/wire/{name}", name=name, label=I18nObject(en_US=f"bench {name}")
    )


class BenchStreamer(AgentRunner):
    """Streams ``DELTAS`` deltas, a completed message and ``run.completed``."""

    manifest = _manifest("streamer")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        for i in range(DELTAS):
            yield out.delta(f"token {i} ")
        yield out.message("the whole answer")
        yield out.complete()


class BenchPinger(AgentRunner):
    """Makes ``config.calls`` sequential ``state.get`` back-calls and reports each one's latency in µs."""

    manifest = _manifest("pinger")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        calls = int(ctx.config.get("calls", CALLS_PER_RUN))
        latencies: list[JsonValue] = []
        for _ in range(calls):
            started = time.perf_counter()
            await api.call_raw("state.get", {"scope": "conversation", "key": "k"})
            latencies.append((time.perf_counter() - started) * 1e6)
        yield self.emitter(ctx).complete(usage={"latencies_us": latencies})


class _Handler:
    """A back-call handler that does no work, so the round trip is all transport."""

    async def handle(self, request: BackCallRequest) -> dict[str, Any]:
        return {"scope": "conversation", "key": "k", "value": 1, "exists": True, "version": 1}

    async def handle_stream(self, request: BackCallRequest) -> AsyncIterator[dict[str, Any]]:
        yield {}


def _request(runner: str, context: dict[str, Any], run_id: str, config: dict[str, Any]) -> AgentRunRequest:
    # The shared fixture context carries a fixed deadline long past; these runs have none.
    runtime = {**context["runtime"], "deadline_at": None}
    ctx = {**context, "run_id": run_id, "config": config, "runtime": runtime}
    return AgentRunRequest.model_validate(
        {"runner_id": f"plugin:bench/wire/{runner}", "runner_name": runner, "context": ctx}
    )


def _connection() -> SubprocessRunnerConnection:
    from agentrunner_host.runtime import PluginSpec, RunnerEntry, SubprocessRunnerConnection

    spec = PluginSpec(
        plugin_id="bench/wire",
        runners=(
            RunnerEntry(name="streamer", ref="bench.runtime_wire:BenchStreamer"),
            RunnerEntry(name="pinger", ref="bench.runtime_wire:BenchPinger"),
        ),
        plugin_dir=ROOT,
    )
    return SubprocessRunnerConnection(spec, _Handler())


class _RawChild:
    """A raw asyncio child speaking NDJSON with orjson: the floor of a stdio exchange."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        assert proc.stdin is not None
        assert proc.stdout is not None
        self.stdin = proc.stdin
        self.stdout = proc.stdout

    @classmethod
    async def start(cls, code: str, *args: str) -> _RawChild:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            code,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=1 << 23,
        )
        return cls(proc)

    async def aclose(self) -> None:
        self.stdin.close()
        await self.proc.wait()


def _counter() -> Callable[[], str]:
    state = {"n": 0}

    def next_id() -> str:
        state["n"] += 1
        return f"bench-run-{state['n']}"

    return next_id


def _prebuilt_results() -> list[dict[str, Any]]:
    out = ResultEmitter("r")
    results: list[Any] = [out.delta(f"token {i} ") for i in range(DELTAS)]
    results += [out.message("the whole answer"), out.complete()]
    return [r.model_dump(mode="json") for r in results]


def measures(ctx: SuiteContext) -> list[Measure]:
    """The runtime suite's rows (see the module docstring)."""
    from ._framework import Goal, Measure
    from .sdk_models import build_context

    context = build_context()
    calls = 20 if ctx.quick else CALLS_PER_RUN  # --quick must stay at a few seconds
    next_id = _counter()
    conn = _connection()
    ctx.add_cleanup(conn.aclose)
    ctx.run(conn.start())
    echo: _RawChild = ctx.run(_RawChild.start(_ECHO_CHILD))
    ctx.add_cleanup(echo.aclose)
    runner_floor: _RawChild = ctx.run(_RawChild.start(_RUN_CHILD, orjson.dumps(_prebuilt_results()).decode()))
    ctx.add_cleanup(runner_floor.aclose)
    echo_ids = iter(range(1, 1 << 62))

    async def back_calls() -> None:
        request = _request("pinger", context, next_id(), {"calls": calls})
        async for _ in conn.run(request):
            pass

    async def echo_round_trips() -> None:
        for _ in range(calls):
            payload = {
                "id": next(echo_ids),
                "action": "state.get",
                "params": {"scope": "conversation", "key": "k"},
            }
            echo.stdin.write(orjson.dumps(payload) + b"\n")
            await echo.stdin.drain()
            orjson.loads(await echo.stdout.readline())

    async def whole_run() -> None:
        request = _request("streamer", context, next_id(), {})
        async for raw in conn.run(request):
            assert isinstance(raw, dict)
            parse_result(raw)

    async def typed_stdio_run() -> None:
        request = _request("streamer", context, next_id(), {})
        runner_floor.stdin.write(request.model_dump_json().encode() + b"\n")
        await runner_floor.stdin.drain()
        for _ in range(DELTAS + 2):
            parse_result(await runner_floor.stdout.readline())

    async def warm_one_result_run() -> None:
        # A run of one result (the pinger with no calls): start to end on a process that is already up.
        async for _ in conn.run(_request("pinger", context, next_id(), {"calls": 0})):
            pass

    rows = [
        Measure(
            "runtime back-call round trip (state.get, sequential)",
            back_calls,
            floor=echo_round_trips,
            floor_name="raw asyncio child echoing orjson NDJSON lines (perf-floors E)",
            goal=Goal.ratio(1.5, source="perf-floors E/F and the peer anchor"),
            unit="µs/call",
            per=calls,
        ),
        Measure(
            "runtime whole run (5 KB context, 52 results, host parses each)",
            whole_run,
            floor=typed_stdio_run,
            floor_name="typed stdio floor: pydantic context dump, raw child answers 52 lines, host parses each (G)",
            goal=Goal.ratio(
                2.0, source="perf-floors G: host side of a child-process run ≤ 2x the typed floor"
            ),
            unit="µs/run",
        ),
        Measure(
            "runtime warm start: a one-result run on a warm process (5 KB context)",
            warm_one_result_run,
            goal=Goal.value(2000, source="perf-floors M: keep processes warm"),
            unit="µs/run",
        ),
    ]
    if not ctx.quick:
        rows.append(
            Measure(
                "runtime cold start: spawn + handshake + list_runners",
                _cold_start,
                floor=_bare_import,
                floor_name="python -c 'import agentrunner.wire' to exit (perf-floors M)",
                goal=Goal.ratio(1.5, source="perf-floors M: ~350 ms floor for pydantic + asyncio"),
                unit="ms/start",
                per=1000,  # the engine reports µs: dividing by 1000 shows milliseconds
            )
        )
    return rows


async def _cold_start() -> None:
    conn = _connection()
    try:
        await conn.list_runners()
    finally:
        await conn.aclose()


async def _bare_import() -> None:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "import agentrunner.wire")
    await proc.wait()


def _percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered):7.1f} µs   p99 {p99:7.1f} µs   (n={len(ordered)})"


async def _latency_report(rounds: int) -> None:
    from .sdk_models import build_context

    context = build_context()
    conn = _connection()
    echo = await _RawChild.start(_ECHO_CHILD)
    try:
        await conn.start()
        runtime: list[float] = []
        for i in range(rounds):
            async for raw in conn.run(_request("pinger", context, f"lat-{i}", {"calls": CALLS_PER_RUN})):
                assert isinstance(raw, dict)
                data: Any = raw["data"]  # the pinger's own usage report
                runtime += data["usage"]["latencies_us"]
        floor: list[float] = []
        for i in range(rounds * CALLS_PER_RUN):
            started = time.perf_counter()
            echo.stdin.write(orjson.dumps({"id": i, "params": {"scope": "conversation", "key": "k"}}) + b"\n")
            await echo.stdin.drain()
            orjson.loads(await echo.stdout.readline())
            floor.append((time.perf_counter() - started) * 1e6)
        started = time.perf_counter()
        cold = _connection()
        try:
            await cold.list_runners()
            cold_ms = (time.perf_counter() - started) * 1e3
        finally:
            await cold.aclose()
    finally:
        await conn.aclose()
        await echo.aclose()
    print("back-call round trip as the runner sees it: ", _percentiles(runtime[CALLS_PER_RUN:]))
    print("floor: raw asyncio child orjson echo:        ", _percentiles(floor[CALLS_PER_RUN:]))
    print(f"cold start to the first answer: {cold_ms:.0f} ms")


def main(argv: list[str] | None = None) -> int:
    """Print back-call latency percentiles next to the echo floor (``--rounds N`` runs of 100 calls)."""
    args = sys.argv[1:] if argv is None else argv
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 20
    runner: Callable[[], Coroutine[Any, Any, None]] = lambda: _latency_report(rounds)  # noqa: E731
    asyncio.run(runner())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
