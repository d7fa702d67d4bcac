"""``SubprocessRunnerConnection``: one plugin's runners in a warm child process, supervised.

The child starts on first use and stays up for every binding of the plugin. It runs in its own session (a new
process group), with an allowlisted environment and its own working directory; its stderr is logged line by line
with secrets masked. When it dies, its live runs end ``runtime.crashed`` at once and the next use starts a new
child, no sooner than an exponential backoff after the crash. ``aclose`` closes its stdin, waits a grace period,
then kills the whole process group, so nothing it spawned outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import deque
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from agentrunner import AgentRunRequest, InvalidRunnerIdError, RunnerId
from agentrunner.process_group import ProcessGroup
from agentrunner.wire import DEFAULT_RESULT_WINDOW, MAX_FRAME_BYTES, StreamFrameChannel

from agentrunner_host.errors import RunnerTransportError
from agentrunner_host.runtime.connection import BackCallHandler, RawResult

from .discovery import PluginSpec
from .environment import DEFAULT_ENV_ALLOWLIST, Redactor, build_child_env
from .sandbox import QUOTA_EXCEEDED, PluginUser, ProcessLimits, quota_breach
from .session import CLOSED, CRASHED, START_FAILED, WireSession

__all__ = ["RuntimeOptions", "SubprocessRunnerConnection", "default_command"]

_log = logging.getLogger("agentrunner_host.runtime")
_stderr_log = logging.getLogger("agentrunner_host.runtime.stderr")


def default_command() -> list[str]:
    """The host's own interpreter running the plugin runtime: ``sys.executable -m agentrunner.wire.plugin``."""
    return [sys.executable, "-m", "agentrunner.wire.plugin"]


@dataclass(frozen=True, kw_only=True)
class RuntimeOptions:
    """How plugin processes are started and supervised. Give a plugin its own with
    :class:`~agentrunner_host.runtime.RuntimeManager` ``overrides``."""

    command: Sequence[str] = field(default_factory=default_command)
    """Program that runs the plugin runtime; the plugin's arguments are appended. Point it at a plugin's own
    virtualenv (``/plugins/x/.venv/bin/python -m agentrunner.wire.plugin``) to isolate its dependencies."""
    env_allowlist: frozenset[str] = DEFAULT_ENV_ALLOWLIST
    """Host variables every child inherits (when set)."""
    granted_env: Sequence[str] = ()
    """More host variables this plugin may see (e.g. ``OPENAI_API_KEY``)."""
    env: Mapping[str, str] = field(default_factory=dict[str, str])
    """Explicit variables set in the child."""
    work_dir: Path | None = None
    """The child's working directory; default: a private temporary directory, removed by ``aclose``."""
    start_timeout: float = 30.0
    """Seconds for the child to start and answer the handshake."""
    close_grace: float = 3.0
    """Seconds a closing child gets to exit after its stdin closes, before its process group is killed."""
    max_frame_bytes: int = MAX_FRAME_BYTES
    """Largest frame either side sends; a larger one from the child is a protocol error."""
    result_window: int = DEFAULT_RESULT_WINDOW
    """Results buffered per run before the child must wait for the host to consume (backpressure)."""
    restart_backoff: float = 0.1
    """Delay before the first restart after a crash; doubles with each crash in a row."""
    restart_backoff_max: float = 10.0
    """Longest delay between restarts."""
    stable_after: float = 30.0
    """A child that ran this long before crashing resets the backoff."""
    stderr_tail: int = 20
    """Stderr lines kept to explain a crash."""
    ping_interval: float | None = 10.0
    """Seconds between liveness pings of a warm child; ``None`` turns them off."""
    ping_timeout: float = 10.0
    """A child that has not answered a ping within this many seconds is unresponsive (a blocked event loop): its
    process group is killed, its live runs end ``runtime.unresponsive``, and the next use restarts it."""
    cancel_grace: float | None = 5.0
    """Seconds a run the host left (cancelled, past its deadline) has to end in the child; a runner that keeps
    ignoring the cancellation gets the child restarted, ending the plugin's other live runs ``runtime.restarted``.
    ``None`` never restarts for that."""
    user: PluginUser | None = None
    """Run the child as this account (the host must be root); its private work directory is handed to it."""
    limits: ProcessLimits | None = None
    """Resource limits set on the child as it starts (see :mod:`~agentrunner_host.runtime.sandbox`)."""
    host_env: Mapping[str, str] | None = None
    """Where allowlisted and granted variables are read from (default ``os.environ``)."""


_EOF_EXIT_GRACE_SECONDS: Final = 2.0
"""How long a child whose stdout ended may take to exit before the host kills it."""
_REAP_TIMEOUT_SECONDS: Final = 60.0
"""How long the host waits for a killed child's exit status (only a stuck kernel takes this long)."""


async def _exit_status_known(proc: asyncio.subprocess.Process, timeout: float) -> bool:
    """Wait up to *timeout* for *proc*'s exit status; whether it is known."""
    # Poll the exit status rather than await proc.wait(): on 3.11 that also waits for every pipe to close,
    # which a paused stdout (after a protocol error) or an inherited stderr can delay forever.
    deadline = time.monotonic() + timeout
    while proc.returncode is None:
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.01)
    return True


class _Child:
    """One incarnation of the plugin process and its session."""

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        session: WireSession,
        stderr_task: asyncio.Task[None],
        group: ProcessGroup,
    ) -> None:
        self.proc = proc
        self.group = group
        """Its process group, recorded at spawn; never signalled by number once the child is reaped."""
        self.session = session
        self.stderr_task = stderr_task
        self.started_at = time.monotonic()
        self._stopped = False
        self.watchdog: asyncio.Task[None] | None = None

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        self.group.signal(sig, returncode=self.proc.returncode)

    async def _exited(self, timeout: float) -> bool:
        return await _exit_status_known(self.proc, timeout)

    async def stop(self, *, grace: float) -> None:
        """Close stdin, wait up to *grace* for an exit, then kill the process group; reap everything."""
        if self._stopped:
            return
        self._stopped = True
        try:
            await self._stop(grace=grace)
        except BaseException:
            # This stop was cancelled part way (a check's loop shutting down, a caller giving up): kill the
            # group and close the pipes synchronously, so no child outlives its event loop with open pipe
            # transports (a ResourceWarning, and a pid the closed loop can no longer reap).
            self.kill_group()
            self._close_transport()
            raise
        finally:
            self.group.close()

    def _close_transport(self) -> None:
        transport: Any = getattr(self.proc, "_transport", None)
        if transport is not None:
            transport.close()  # closes the pipes, so the transport finishes and wait() returns

    async def _stop(self, *, grace: float) -> None:
        if self.watchdog is not None and self.watchdog is not asyncio.current_task():
            self.watchdog.cancel()
        plugin_id = self.session.plugin_id
        self.session.fail(CLOSED, f"plugin {plugin_id}: the host closed the connection")
        if grace <= 0:
            self.kill_group()
        stdin = self.proc.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        if grace > 0 and not await self._exited(grace):
            _log.warning(
                "plugin %s (pid %d) did not exit %.1fs after its stdin closed; killing its process group",
                plugin_id,
                self.proc.pid,
                grace,
            )
        # Also sweeps what the child spawned: the group outlives its leader while any member lives.
        self.kill_group()
        if not await self._exited(5.0):
            _log.error("plugin %s (pid %d) survived SIGKILL for 5s", plugin_id, self.proc.pid)
        await self.session.aclose()
        await _finish(self.stderr_task, timeout=1.0)
        self._close_transport()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2.0):  # never wait_for: it can swallow the caller's cancellation
                await self.proc.wait()


async def _finish(task: asyncio.Task[None], *, timeout: float) -> None:
    try:
        async with asyncio.timeout(timeout):
            await asyncio.shield(task)
    except (TimeoutError, asyncio.CancelledError):
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _pump_stderr(
    reader: asyncio.StreamReader, plugin_id: str, redact: Redactor, tail: deque[str]
) -> None:
    while True:
        try:
            raw = await reader.readline()
        except ValueError:
            raw = b"[a stderr line longer than the limit was dropped]\n"
        if not raw:
            return
        line = redact(raw.decode("utf-8", errors="replace").rstrip())
        tail.append(line)
        _stderr_log.info("[%s] %s", plugin_id, line, extra={"plugin_id": plugin_id})


class SubprocessRunnerConnection:
    """A :class:`~agentrunner_host.runtime.connection.RunnerConnection` to one plugin's runtime process.

    >>> conn = SubprocessRunnerConnection(spec, handler)         # doctest: +SKIP
    >>> async for result in conn.run(request): ...              # doctest: +SKIP  (starts the child)
    >>> await conn.aclose()                                      # doctest: +SKIP
    """

    def __init__(
        self, spec: PluginSpec, handler: BackCallHandler, *, options: RuntimeOptions | None = None
    ) -> None:
        self.spec = spec
        self.options = options or RuntimeOptions()
        self._handler = handler
        self._child: _Child | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._crashes = 0
        self._next_start = 0.0
        self._reapers: set[asyncio.Task[None]] = set()
        self._own_work_dir: Path | None = None
        self._stderr_tail: deque[str] = deque(maxlen=self.options.stderr_tail)
        self.starts = 0
        """Child processes started so far (a restart after a crash counts)."""

    # -- RunnerConnection --------------------------------------------------------------------------------------

    @property
    def plugin_id(self) -> str:
        """``author/plugin``; stamped as ``caller`` on every back-call from this child."""
        return self.spec.plugin_id

    @property
    def pid(self) -> int | None:
        """Process id of the live child (also its process group id), if any."""
        child = self._child
        if child is None or not child.session.alive:
            return None
        return child.proc.pid

    @property
    def live_runs(self) -> list[str]:
        """Ids of the runs live on the current child (empty when none is running)."""
        child = self._child
        return [] if child is None or not child.session.alive else child.session.live_runs

    async def list_runners(self) -> list[dict[str, Any]]:
        """The runner manifests the runtime reports, keeping only those whose id belongs to this plugin."""
        session = await self._session()
        manifests = await session.list_runners(timeout=self.options.start_timeout)
        kept: list[dict[str, Any]] = []
        for manifest in manifests:
            runner_id = manifest.get("id")
            try:
                owner = RunnerId.parse(runner_id).plugin_id if isinstance(runner_id, str) else None
            except InvalidRunnerIdError:
                owner = None
            if owner != self.plugin_id:
                _log.warning(
                    "plugin %s reported runner %r, which is not its own; ignored", self.plugin_id, runner_id
                )
                continue
            kept.append(manifest)
        return kept

    def run(self, request: AgentRunRequest) -> AsyncGenerator[RawResult, None]:
        """Run *request* in the child (started or restarted as needed); see :meth:`WireSession.run`."""
        child = self._child
        if child is not None and child.session.alive:
            return child.session.run(request)  # warm: no wrapping generator on the per-result path
        return self._run(request)

    async def _run(self, request: AgentRunRequest) -> AsyncGenerator[RawResult, None]:
        session = await self._session()
        stream = session.run(request)
        try:
            async for result in stream:
                yield result
        finally:
            await stream.aclose()

    async def cancel(self, run_id: str) -> None:
        """Ask the child to cancel *run_id*; a no-op when it is not running it."""
        child = self._child
        if child is not None and child.session.alive:
            await child.session.cancel(run_id)

    async def ping(self) -> float:
        """Seconds of one ``ping`` round trip (starting the child if needed)."""
        session = await self._session()
        started = time.perf_counter()
        await session.ping()
        return time.perf_counter() - started

    async def start(self) -> None:
        """Start the child now instead of on first use."""
        await self._session()

    async def kill(self) -> None:
        """Kill the child's whole process group at once; its runs end ``runtime.closed``. The next use restarts it."""
        async with self._lock:
            child, self._child = self._child, None
        if child is not None:
            child.kill_group()
            await child.stop(grace=0)

    async def aclose(self) -> None:
        """Stop the child (stdin closed, grace period, then the process group is killed) and release everything."""
        self._closed = True
        async with self._lock:
            child, self._child = self._child, None
        if child is not None:
            # A child whose session already failed (crash, protocol error) gets no grace period.
            await child.stop(grace=self.options.close_grace if child.session.alive else 0)
        if self._reapers:
            await asyncio.gather(*self._reapers, return_exceptions=True)
        if self._own_work_dir is not None:
            shutil.rmtree(self._own_work_dir, ignore_errors=True)
            self._own_work_dir = None

    async def __aenter__(self) -> SubprocessRunnerConnection:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- supervision -----------------------------------------------------------------------------------------

    async def _session(self) -> WireSession:
        child = self._child
        if child is not None and child.session.alive:
            return child.session
        async with self._lock:
            if self._closed:
                raise RunnerTransportError(CLOSED, f"plugin {self.plugin_id}: the connection is closed")
            child = self._child
            if child is not None and child.session.alive:
                return child.session
            delay = self._next_start - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            self._child = await self._spawn()
            return self._child.session

    def _work_dir(self) -> Path:
        if self.options.work_dir is not None:
            self.options.work_dir.mkdir(parents=True, exist_ok=True)
            return self.options.work_dir
        if self._own_work_dir is None:
            prefix = "agentrunner-" + self.plugin_id.replace("/", "-") + "-"
            self._own_work_dir = Path(tempfile.mkdtemp(prefix=prefix))
            user = self.options.user
            if user is not None:
                os.chown(self._own_work_dir, user.uid, user.gid)  # 0700, so only the plugin's account
        return self._own_work_dir

    async def _spawn(self) -> _Child:
        options = self.options
        host_env = os.environ if options.host_env is None else options.host_env
        work_dir = self._work_dir()
        extra = {**options.env, "AGENTRUNNER_PLUGIN_ID": self.plugin_id}
        user = options.user
        if user is not None:
            extra = {"HOME": str(work_dir), "USER": user.name, "LOGNAME": user.name, **extra}
        env = build_child_env(
            allowlist=options.env_allowlist, granted=options.granted_env, extra=extra, host_env=host_env
        )
        redact = Redactor.for_environment(host_env, env)
        command = [*options.command, *self.spec.runtime_args()]
        self.starts += 1
        try:
            proc = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                cwd=work_dir,
                start_new_session=True,
                limit=options.max_frame_bytes,
                user=None if user is None else user.uid,
                group=None if user is None else user.gid,
                extra_groups=None if user is None else [],
                preexec_fn=None if options.limits is None else options.limits.preexec(),
            )
        except OSError as exc:
            self._record_crash(0.0)
            raise RunnerTransportError(
                START_FAILED, f"plugin {self.plugin_id}: cannot start {command[0]}: {exc}"
            ) from exc
        group = ProcessGroup(proc.pid)  # recorded at once; ProcessGroup copes with a child already reaped
        assert proc.stdin is not None
        assert proc.stdout is not None
        assert proc.stderr is not None
        self._stderr_tail.clear()
        stderr_task = asyncio.create_task(
            _pump_stderr(proc.stderr, self.plugin_id, redact, self._stderr_tail),
            name=f"agentrunner-stderr-{self.plugin_id}",
        )
        channel = StreamFrameChannel(proc.stdout, proc.stdin, max_frame_bytes=options.max_frame_bytes)
        child: _Child | None = None

        async def describe_eof() -> tuple[str, str]:
            # The exit status tells a quota kill (SIGXCPU, SIGXFSZ) from a crash, so wait until it is known
            # instead of guessing after a fixed delay: a loaded machine reaps a dead child late, and a short
            # bound turned CPU-limit kills into "crashed". A process that closed stdout but lives on is
            # killed; SIGKILL does not change the status of one that is already dying of another signal.
            if not await _exit_status_known(proc, _EOF_EXIT_GRACE_SECONDS):
                group.signal(signal.SIGKILL, returncode=proc.returncode)
                await _exit_status_known(proc, _REAP_TIMEOUT_SECONDS)
            message = self._exit_message(proc.returncode)
            breach = quota_breach(proc.returncode)
            if breach is not None:
                return QUOTA_EXCEEDED, f"{message} (stopped by {breach})"
            return CRASHED, message

        def on_failure(error: RunnerTransportError) -> None:
            if error.code == CLOSED or child is None:
                return
            self._record_crash(time.monotonic() - child.started_at)
            # Reap the dead (or misbehaving) child now, not at the next use, so no zombie lingers.
            reaper = asyncio.create_task(child.stop(grace=0), name=f"agentrunner-reap-{self.plugin_id}")
            self._reapers.add(reaper)
            reaper.add_done_callback(self._reapers.discard)

        session = WireSession(
            channel,
            plugin_id=self.plugin_id,
            handler=self._handler,
            result_window=options.result_window,
            max_frame_bytes=options.max_frame_bytes,
            describe_eof=describe_eof,
            on_failure=on_failure,
            cancel_grace=options.cancel_grace,
        )
        started = _Child(proc, session, stderr_task, group)
        try:
            await session.handshake(timeout=options.start_timeout)
        except BaseException as exc:
            await started.stop(grace=0)
            self._record_crash(0.0)
            if isinstance(exc, RunnerTransportError):
                tail = "; ".join(self._stderr_tail)
                message = exc.message if not tail else f"{exc.message}; stderr: {tail}"
                if proc.returncode is not None:
                    message = f"{message} (exit code {proc.returncode})"
                raise RunnerTransportError(START_FAILED, message) from None
            raise
        child = started
        if options.ping_interval is not None:
            child.watchdog = asyncio.create_task(
                session.keepalive(
                    interval=options.ping_interval,
                    timeout=options.ping_timeout,
                    then="killing its process group",
                ),
                name=f"agentrunner-ping-{self.plugin_id}",
            )
        _log.info("plugin %s started (pid %d)", self.plugin_id, proc.pid)
        return child

    def _exit_message(self, returncode: int | None) -> str:
        if returncode is None:
            how = "closed its stream"
        elif returncode < 0:
            how = f"was killed by signal {signal.Signals(-returncode).name}"
        else:
            how = f"exited with code {returncode}"
        tail = " | ".join(list(self._stderr_tail)[-3:])
        return f"plugin {self.plugin_id}: the runtime {how}" + (f"; last stderr: {tail}" if tail else "")

    def _record_crash(self, uptime: float) -> None:
        options = self.options
        self._crashes = 1 if uptime >= options.stable_after else self._crashes + 1
        delay = min(options.restart_backoff_max, options.restart_backoff * 2 ** (self._crashes - 1))
        self._next_start = time.monotonic() + delay
