"""SubprocessRunnerConnection against real child processes running the fixture plugins."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from agentrunner import codec
from agentrunner_host.errors import RunnerTransportError
from agentrunner_host.runtime import (
    PluginSpec,
    RunnerEntry,
    RuntimeManager,
    RuntimeOptions,
    SubprocessRunnerConnection,
    discover_plugins,
)
from agentrunner_host.runtime.connection import RawResult, RunnerConnection

from .helpers import ECHO_DIR, PLUGINS, FakeBackCallHandler, make_request, pid_alive


def _echo_spec() -> PluginSpec:
    found = discover_plugins([ECHO_DIR])
    assert found.warnings == []
    return found.plugins["tests/echo"]


@pytest.fixture
def handler() -> FakeBackCallHandler:
    return FakeBackCallHandler()


@pytest.fixture
async def conn(handler: FakeBackCallHandler) -> AsyncIterator[SubprocessRunnerConnection]:
    connection = SubprocessRunnerConnection(
        _echo_spec(), handler, options=RuntimeOptions(restart_backoff=0.05, close_grace=2.0)
    )
    try:
        yield connection
    finally:
        await connection.aclose()


async def _collect(conn: RunnerConnection, runner: str, run_id: str, **config: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    async for result in conn.run(make_request(runner, run_id=run_id, config=config)):
        assert isinstance(result, dict)
        out.append(result)
    return out


def _message(result: RawResult) -> Any:
    assert isinstance(result, dict)
    raw: Any = result  # the test reads the wire shape it knows; the host narrows, the test need not
    return codec.loads(raw["data"]["message"]["content"])


async def _eventually(predicate: Callable[[], bool], *, within: float) -> bool:
    deadline = time.monotonic() + within
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.02)


async def _wait_dead(pid: int, *, within: float) -> bool:
    return await _eventually(lambda: not pid_alive(pid), within=within)


_HANG_GUARD = 60.0
"""Seconds a poll waits for a condition before failing: a hang guard for a loaded machine, not a timing claim."""


def _exists(path: str) -> bool:
    return Path(path).exists()


async def test_the_connection_satisfies_the_runner_connection_protocol(
    conn: SubprocessRunnerConnection,
) -> None:
    """The supervisor is a RunnerConnection, so the orchestrator can use it like the in-process one."""
    assert isinstance(conn, RunnerConnection)
    assert conn.plugin_id == "tests/echo"


async def test_list_runners_returns_every_runner_of_the_plugin(conn: SubprocessRunnerConnection) -> None:
    """list_runners answers with the manifests the runtime's runner classes declare."""
    manifests = await conn.list_runners()
    ids = sorted(m["id"] for m in manifests)
    assert ids == sorted(
        f"plugin:tests/echo/{n}"
        for n in ("streamer", "caller", "sleeper", "crasher", "envdump", "spawner", "bigger")
    )
    assert conn.starts == 1


async def test_a_run_streams_its_results_in_order_with_sequences(conn: SubprocessRunnerConnection) -> None:
    """52 results arrive in order, each with its 1-based sequence, the run id and the terminal result last."""
    results = await _collect(conn, "streamer", "run-seq", count=50)
    assert len(results) == 52
    assert [r["sequence"] for r in results] == list(range(1, 53))
    assert {r["run_id"] for r in results} == {"run-seq"}
    assert results[0]["data"]["chunk"]["content"] == "d0 "
    assert [r["type"] for r in results[-2:]] == ["message.completed", "run.completed"]


async def test_prints_to_stdout_by_a_runner_go_to_the_log_not_the_wire(
    conn: SubprocessRunnerConnection, caplog: pytest.LogCaptureFixture
) -> None:
    """print(), sys.stdout.write and os.write(1, ...) in a runner never corrupt frames; they reach the host log
    with secret-looking values masked."""
    caplog.set_level(logging.INFO, logger="agentrunner_host.runtime.stderr")
    results = await _collect(conn, "streamer", "run-print", count=2)
    assert results[-1]["type"] == "run.completed"
    await conn.aclose()  # stderr is drained when the child is reaped
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == "agentrunner_host.runtime.stderr")
    assert "echo plugin imported" in logged
    assert "raw stdout write" in logged
    assert "a write to fd 1" in logged
    assert "hello from print() token=***" in logged
    assert "supersecretvalue123" not in logged


async def test_several_runs_interleave_on_one_warm_process(conn: SubprocessRunnerConnection) -> None:
    """Concurrent runs share one child and each gets exactly its own results."""
    batches = await asyncio.gather(
        *(_collect(conn, "streamer", f"run-par-{i}", count=20 + i) for i in range(5))
    )
    for i, results in enumerate(batches):
        assert len(results) == 22 + i
        assert {r["run_id"] for r in results} == {f"run-par-{i}"}
    assert conn.starts == 1


async def test_back_calls_are_stamped_with_the_plugin_identity(
    conn: SubprocessRunnerConnection, handler: FakeBackCallHandler
) -> None:
    """A unary and a streaming back-call reach the handler with caller = the plugin id, whatever the runner sent."""
    results = await _collect(conn, "caller", "run-call", foreign_run_id="not-a-live-run")
    assert _message(results[0]) == {"state": {"caller": "tests/echo", "run_id": "run-call"}}
    assert _message(results[1]) == {"stream": ["c0", "c1", "c2"]}
    assert [r.action for r in handler.requests] == ["state.get", "models.stream"]
    assert {r.caller for r in handler.requests} == {"tests/echo"}
    assert handler.stream_closed == 1


async def test_a_back_call_for_a_foreign_run_is_unauthorized_without_reaching_the_handler(
    conn: SubprocessRunnerConnection, handler: FakeBackCallHandler
) -> None:
    """A call naming a run this child is not executing is answered unauthorized and never handled."""
    results = await _collect(conn, "caller", "run-foreign", foreign_run_id="some-other-run")
    assert _message(results[2]) == {"foreign": "unauthorized"}
    assert all(r.run_id == "run-foreign" for r in handler.requests)


async def test_a_back_call_whose_handler_waits_is_answered_later(conn: SubprocessRunnerConnection) -> None:
    """A handler that suspends (I/O) is served in its own task; the runner gets the answer when it is ready."""
    conn._handler = FakeBackCallHandler(delay=0.05)
    results = await _collect(conn, "caller", "run-slow-handler")
    assert _message(results[0]) == {"state": {"caller": "tests/echo", "run_id": "run-slow-handler"}}


async def test_cancelling_a_run_stops_its_back_calls_in_flight(conn: SubprocessRunnerConnection) -> None:
    """A run cancelled while the host serves one of its back-calls ends cancelled, and the handler is cancelled."""
    handler = FakeBackCallHandler(hang=True)
    conn._handler = handler
    stream = conn.run(make_request("caller", run_id="run-hang-call"))
    waiting = asyncio.create_task(anext(stream))
    await handler.received.wait()
    await conn.cancel("run-hang-call")
    with pytest.raises(RunnerTransportError, match="the run was cancelled by the host") as info:
        await waiting
    assert info.value.code == "cancelled"
    assert await _eventually(lambda: handler.cancelled == 1, within=_HANG_GUARD)


async def test_a_streaming_back_call_is_flow_controlled_by_credit(conn: SubprocessRunnerConnection) -> None:
    """A stream longer than the chunk window still arrives whole: the runtime grants credit as it consumes."""
    handler = FakeBackCallHandler(stream_chunks=100)
    conn._handler = handler
    results = await _collect(conn, "caller", "run-long-stream")
    assert _message(results[1]) == {"stream": [f"c{i}" for i in range(100)]}


async def test_a_stream_the_runner_leaves_early_is_closed_on_the_host(
    conn: SubprocessRunnerConnection,
) -> None:
    """Breaking out of a streaming back-call sends call_cancel: the host closes the handler's stream."""
    handler = FakeBackCallHandler(stream_chunks=10_000)
    conn._handler = handler
    results = await _collect(conn, "caller", "run-leave-stream", stream_take=2)
    assert _message(results[1]) == {"stream": ["c0", "c1"]}
    assert await _eventually(lambda: handler.stream_closed == 1, within=_HANG_GUARD)


async def test_a_runner_exception_ends_only_its_run(conn: SubprocessRunnerConnection) -> None:
    """The runner raised: its run ends with runner.error after the results it made; the process keeps serving."""
    seen: list[RawResult] = []
    stream = conn.run(make_request("crasher", run_id="run-crash"))
    seen.append(await anext(stream))
    with pytest.raises(RunnerTransportError, match="boom") as info:
        await anext(stream)
    assert info.value.code == "runner.error"
    assert len(seen) == 1
    pid = conn.pid
    assert (await _collect(conn, "streamer", "run-after-crash", count=1))[-1]["type"] == "run.completed"
    assert conn.pid == pid
    assert conn.starts == 1


async def test_cancel_reaches_the_runner_and_ends_the_run(
    conn: SubprocessRunnerConnection, tmp_path: Path
) -> None:
    """cancel() cancels the runner's task (it observes CancelledError) and the run ends with code cancelled."""
    marker = tmp_path / "marker"
    stream = conn.run(make_request("sleeper", run_id="run-cancel", config={"marker": str(marker)}))
    first = await anext(stream)
    assert isinstance(first, dict)
    assert first["type"] == "message.delta"
    await conn.cancel("run-cancel")
    with pytest.raises(RunnerTransportError, match="the run was cancelled by the host") as info:
        await anext(stream)
    assert info.value.code == "cancelled"
    assert marker.read_text() == "cancelled"
    await conn.cancel("run-cancel")  # idempotent: the run is over


async def test_leaving_a_run_early_cancels_it_in_the_runtime(
    conn: SubprocessRunnerConnection, tmp_path: Path
) -> None:
    """Closing the result iterator (the consumer went away) cancels the run in the child."""
    marker = tmp_path / "marker"
    stream = conn.run(make_request("sleeper", run_id="run-leave", config={"marker": str(marker)}))
    await anext(stream)
    await stream.aclose()
    # write_text creates the file before writing it: wait for the content, not the name.
    assert await _eventually(
        lambda: marker.exists() and marker.read_text() == "cancelled", within=_HANG_GUARD
    )


async def test_a_child_killed_mid_run_ends_its_runs_as_crashed(conn: SubprocessRunnerConnection) -> None:
    """SIGKILL of the child ends every live run with runtime.crashed (the sleeping runs would otherwise never
    end: pytest-timeout guards that); the next run restarts the child."""
    streams = [conn.run(make_request("sleeper", run_id=f"run-kill-{i}")) for i in range(2)]
    for stream in streams:
        await anext(stream)
    pid = conn.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    for stream in streams:
        with pytest.raises(RunnerTransportError, match="was killed by signal SIGKILL") as info:
            await anext(stream)
        assert info.value.code == "runtime.crashed"
    assert await _wait_dead(pid, within=_HANG_GUARD)
    results = await _collect(conn, "streamer", "run-after-kill", count=1)
    assert results[-1]["type"] == "run.completed"
    assert conn.starts == 2
    assert conn.pid not in (None, pid)


async def test_a_hung_child_is_killed_with_its_whole_process_group(handler: FakeBackCallHandler) -> None:
    """A child that ignores shutdown is killed after the grace period, together with what it spawned; no orphans."""
    conn = SubprocessRunnerConnection(_echo_spec(), handler, options=RuntimeOptions(close_grace=0.3))
    try:
        stream = conn.run(make_request("spawner", run_id="run-hang"))
        first = await anext(stream)
        grandchild = _message(first)["grandchild"]
        child = conn.pid
        assert child is not None
        assert pid_alive(grandchild)
    finally:
        await conn.aclose()
    assert not pid_alive(child)
    assert await _wait_dead(grandchild, within=_HANG_GUARD)
    with pytest.raises(
        RunnerTransportError, match="plugin tests/echo: the host closed the connection"
    ) as info:
        await anext(stream)
    assert info.value.code in {"runtime.closed", "runtime.crashed"}


async def test_an_aclose_cancelled_during_the_grace_period_still_kills_the_group(
    handler: FakeBackCallHandler,
) -> None:
    """The caller gives up on aclose while the child is still in its grace period (a check's loop shutting down
    cancels every task): the process group is killed and the pipes closed anyway, so nothing outlives the loop
    with open pipe transports (CI saw that ResourceWarning in the harness conformance out of process)."""
    conn = SubprocessRunnerConnection(_echo_spec(), handler, options=RuntimeOptions(close_grace=_HANG_GUARD))
    stream = conn.run(make_request("spawner", run_id="run-cancelled-close"))
    grandchild = _message(await anext(stream))["grandchild"]
    child = conn.pid
    assert child is not None
    closing = asyncio.create_task(conn.aclose())
    # aclose is now waiting out the grace period (the spawner's child ignores its stdin closing).
    assert not await _eventually(lambda: not pid_alive(child), within=0.5)
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):  # noqa: PT011 - a cancellation has no message
        await closing
    assert await _wait_dead(child, within=_HANG_GUARD)
    assert await _wait_dead(grandchild, within=_HANG_GUARD)
    with pytest.raises(RunnerTransportError, match="plugin tests/echo: the host closed the connection"):
        await anext(stream)


async def test_what_a_dead_child_spawned_is_swept_after_the_child_is_reaped(
    handler: FakeBackCallHandler,
) -> None:
    """The child dies on its own (reaped by asyncio) while its grandchild lives on in its process group: the
    host still sweeps the grandchild, through a pidfd of each member it finds, not by the freed group number."""
    conn = SubprocessRunnerConnection(_echo_spec(), handler, options=RuntimeOptions(close_grace=0.3))
    try:
        stream = conn.run(make_request("spawner", run_id="run-orphan"))
        grandchild = _message(await anext(stream))["grandchild"]
        child = conn.pid
        assert child is not None and pid_alive(grandchild)
        os.kill(child, signal.SIGKILL)  # only the leader: the grandchild stays in the group
        with pytest.raises(RunnerTransportError, match="SIGKILL") as info:
            await anext(stream)
        assert info.value.code == "runtime.crashed"
        assert await _wait_dead(grandchild, within=_HANG_GUARD)
    finally:
        await conn.aclose()


async def test_the_process_group_is_never_signalled_by_number_after_its_leader_is_reaped(
    handler: FakeBackCallHandler, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child that exits when its stdin closes is reaped; its group number may then be handed to a stranger
    (pid_max is 32768), so ``killpg`` must only ever be called while the leader is still unreaped."""
    real_killpg = os.killpg
    after_reap: list[int] = []

    def killpg(pgid: int, sig: int) -> None:
        try:
            os.waitid(os.P_PID, pgid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            after_reap.append(pgid)  # no child of ours holds that number any more
        real_killpg(pgid, sig)

    monkeypatch.setattr(os, "killpg", killpg)
    conn = SubprocessRunnerConnection(_echo_spec(), handler, options=RuntimeOptions(close_grace=30.0))
    await _collect(conn, "streamer", "run-reap", count=1)
    pid = conn.pid
    assert pid is not None
    await conn.aclose()  # stdin closes, the child exits on its own and is reaped, then the group is swept
    assert not pid_alive(pid)
    assert after_reap == []
    await conn.kill()  # nothing left to kill: still no signal by number


async def test_kill_stops_the_child_at_once_and_the_next_use_restarts_it(
    conn: SubprocessRunnerConnection,
) -> None:
    """kill() ends the process group without a grace period; a later run starts a fresh child."""
    await conn.start()
    first_pid = conn.pid
    assert first_pid is not None
    await conn.kill()
    assert not pid_alive(first_pid)
    assert (await _collect(conn, "streamer", "run-after-kill", count=1))[-1]["type"] == "run.completed"
    assert conn.pid not in (None, first_pid)


async def test_no_process_outlives_aclose(handler: FakeBackCallHandler) -> None:
    """After aclose the child is reaped and its pid is gone."""
    conn = SubprocessRunnerConnection(_echo_spec(), handler)
    await _collect(conn, "streamer", "run-close", count=1)
    pid = conn.pid
    assert pid is not None
    await conn.aclose()
    assert not pid_alive(pid)
    with pytest.raises(RunnerTransportError, match="plugin tests/echo: the connection is closed") as info:
        await conn.list_runners()
    assert info.value.code == "runtime.closed"


async def test_the_child_sees_only_allowlisted_and_granted_variables(
    handler: FakeBackCallHandler, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host secret is invisible to the child unless granted; the child runs in its own working directory."""
    monkeypatch.setenv("AGENTRUNNER_TEST_SECRET", "s3cr3t-value")
    monkeypatch.setenv("AGENTRUNNER_TEST_GRANTED", "granted-value")
    names = ["AGENTRUNNER_TEST_SECRET", "AGENTRUNNER_TEST_GRANTED", "PATH", "AGENTRUNNER_PLUGIN_ID"]
    options = RuntimeOptions(granted_env=["AGENTRUNNER_TEST_GRANTED"])
    async with SubprocessRunnerConnection(_echo_spec(), handler, options=options) as conn:
        report = _message((await _collect(conn, "envdump", "run-env", names=names))[0])
    assert report["env"]["AGENTRUNNER_TEST_SECRET"] is None
    assert report["env"]["AGENTRUNNER_TEST_GRANTED"] == "granted-value"
    assert report["env"]["PATH"] == os.environ["PATH"]
    assert report["env"]["AGENTRUNNER_PLUGIN_ID"] == "tests/echo"
    assert report["cwd"] != os.getcwd()
    assert "agentrunner-tests-echo-" in report["cwd"]
    assert not _exists(report["cwd"])  # the private work dir is removed by aclose


async def test_a_granted_secret_is_visible_to_its_plugin(
    handler: FakeBackCallHandler, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Granting the secret's name passes it through to that plugin's child."""
    monkeypatch.setenv("AGENTRUNNER_TEST_SECRET", "s3cr3t-value")
    options = RuntimeOptions(granted_env=["AGENTRUNNER_TEST_SECRET"])
    async with SubprocessRunnerConnection(_echo_spec(), handler, options=options) as conn:
        report = _message((await _collect(conn, "envdump", "run-env2", names=["AGENTRUNNER_TEST_SECRET"]))[0])
    assert report["env"]["AGENTRUNNER_TEST_SECRET"] == "s3cr3t-value"


async def test_result_backpressure_is_bounded_while_back_calls_keep_flowing(
    handler: FakeBackCallHandler,
) -> None:
    """A runner streaming faster than the host consumes is held to the credit window; another run's back-calls are
    still answered meanwhile."""
    options = RuntimeOptions(result_window=8)
    async with SubprocessRunnerConnection(_echo_spec(), handler, options=options) as conn:
        flood = conn.run(make_request("streamer", run_id="run-flood", config={"count": 5000}))
        await anext(flood)
        child = conn._child
        assert child is not None
        queue = child.session._runs["run-flood"].queue
        # The runner fills the whole window (8 granted, 1 consumed), then must wait for credit: a result beyond
        # it would be a protocol error that ends the session.
        assert await _eventually(lambda: len(queue) == 7, within=_HANG_GUARD)
        calls = await _collect(conn, "caller", "run-while-flooding")
        assert _message(calls[0])["state"]["caller"] == "tests/echo"
        assert len(queue) <= 8 and child.session.alive
        count = 1
        async for _ in flood:
            count += 1
        assert count == 5002


async def test_garbage_on_stdout_is_a_protocol_error_for_that_child_only(
    handler: FakeBackCallHandler,
) -> None:
    """A line that is not a frame ends the child's runs with runtime.protocol_error; the host carries on."""
    spec = PluginSpec(plugin_id="tests/raw", runners=(RunnerEntry(name="x", ref="unused:X"),))
    options = RuntimeOptions(
        command=[sys.executable, str(PLUGINS / "raw_runtime.py")], env={"RAW_MODE": "garbage"}
    )
    async with SubprocessRunnerConnection(spec, handler, options=options) as conn:
        with pytest.raises(RunnerTransportError, match=r"not\ valid\ JSON") as info:
            await _collect(conn, "streamer", "run-garbage")
        assert info.value.code == "runtime.protocol_error"
        pid = conn.pid
    assert pid is None or not pid_alive(pid)


async def test_an_oversized_frame_is_a_protocol_error_not_an_unbounded_read(
    handler: FakeBackCallHandler,
) -> None:
    """A line longer than max_frame_bytes ends the child's runs with runtime.protocol_error."""
    spec = PluginSpec(plugin_id="tests/raw", runners=(RunnerEntry(name="x", ref="unused:X"),))
    options = RuntimeOptions(
        command=[sys.executable, str(PLUGINS / "raw_runtime.py")],
        env={"RAW_MODE": "oversized", "RAW_SIZE": str(300_000)},
        max_frame_bytes=64 * 1024,
    )
    async with SubprocessRunnerConnection(spec, handler, options=options) as conn:
        with pytest.raises(RunnerTransportError, match=r"larger\ than\ 65536\ bytes") as info:
            await _collect(conn, "streamer", "run-big")
        assert info.value.code == "runtime.protocol_error"


async def test_results_beyond_the_granted_credit_are_a_protocol_error(handler: FakeBackCallHandler) -> None:
    """A runtime that ignores flow control cannot make the host buffer without bound."""
    spec = PluginSpec(plugin_id="tests/raw", runners=(RunnerEntry(name="x", ref="unused:X"),))
    options = RuntimeOptions(
        command=[sys.executable, str(PLUGINS / "raw_runtime.py")],
        env={"RAW_MODE": "overrun"},
        result_window=4,
    )
    async with SubprocessRunnerConnection(spec, handler, options=options) as conn:
        with pytest.raises(RunnerTransportError, match="credit") as info:
            await _collect(conn, "streamer", "run-overrun")
        assert info.value.code == "runtime.protocol_error"


async def test_a_plugin_that_cannot_start_fails_with_its_stderr(handler: FakeBackCallHandler) -> None:
    """A runner reference that does not import fails the start with runtime.start_failed and the reason."""
    spec = PluginSpec(
        plugin_id="tests/broken", runners=(RunnerEntry(name="x", ref="no_such_module_xyz:Runner"),)
    )
    async with SubprocessRunnerConnection(
        spec, handler, options=RuntimeOptions(restart_backoff=0.01)
    ) as conn:
        with pytest.raises(RunnerTransportError, match="no_such_module_xyz") as info:
            await conn.list_runners()
    assert info.value.code == "runtime.start_failed"


async def test_the_manager_starts_plugins_lazily_and_closes_them_all(handler: FakeBackCallHandler) -> None:
    """RuntimeManager maps runner ids to one connection per plugin, started on first use, stopped by aclose."""
    async with RuntimeManager.from_directories([PLUGINS], handler) as manager:
        assert list(manager.plugins) == ["tests/echo"]
        conn = manager.connection_for_runner("plugin:tests/echo/streamer")
        assert conn is manager.connection("tests/echo")
        assert conn.pid is None
        listed = await manager.list_runners()
        assert len(listed["tests/echo"]) == 7
        pid = conn.pid
        assert pid is not None
    assert not pid_alive(pid)


async def test_a_result_over_the_frame_limit_fails_only_its_run(handler: FakeBackCallHandler) -> None:
    """The runtime refuses to send a frame the host would reject: the run ends runtime.payload_too_large and the
    process keeps serving."""
    options = RuntimeOptions(max_frame_bytes=64 * 1024)
    async with SubprocessRunnerConnection(_echo_spec(), handler, options=options) as conn:
        with pytest.raises(RunnerTransportError, match="exceeds the host's 65536-byte frame limit") as info:
            await _collect(conn, "bigger", "run-big-result", size=100_000)
        assert info.value.code == "runtime.payload_too_large"
        pid = conn.pid
        small = await _collect(conn, "bigger", "run-small-result", size=1000)
        assert small[-1]["type"] == "run.completed"
        assert conn.pid == pid
