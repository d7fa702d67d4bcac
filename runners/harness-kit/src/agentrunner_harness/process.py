"""The harness CLI as a child process, under the rules of runner-requirements §b.7.

* Its own process group (session), so the whole tree can be signalled at once.
* The prompt is written to stdin, then stdin is closed (Codex otherwise waits for more input).
* stdout is read line by line as it arrives (the native event stream), stderr concurrently into a bounded
  tail; stdout past its byte cap ends the run (the CLI is killed) instead of filling memory.
* Leaving the ``async with`` block for any reason (normal end, timeout, cancellation, an error) signals the
  group SIGTERM, then SIGKILL after a grace period, so no grandchild survives the run. The group is signalled
  by number only while the CLI is provably unreaped; after that each survivor is signalled through its own
  pidfd (:class:`agentrunner.process_group.ProcessGroup`), so a reused group number never hits a stranger.
* CPU time and address-space limits (``setrlimit``) apply to the CLI and everything it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from agentrunner.process_group import ProcessGroup

__all__ = [
    "DEFAULT_STDERR_TAIL",
    "DEFAULT_STDOUT_CAP",
    "HarnessProcess",
    "OutputTooLargeError",
    "ProcessLimits",
]

DEFAULT_STDOUT_CAP: Final = 8 * 1024 * 1024
"""Most bytes of native output read from one run."""
DEFAULT_STDERR_TAIL: Final = 64 * 1024
"""Bytes of stderr kept (the last ones)."""
_KILL_GRACE_SECONDS: Final = 2.0
_READ_CHUNK: Final = 64 * 1024


class OutputTooLargeError(Exception):
    """The CLI printed more than the stdout cap."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessLimits:
    """Resource limits of the CLI process tree (``None`` = unlimited)."""

    cpu_seconds: int | None = None
    """``RLIMIT_CPU``: CPU seconds before the kernel sends SIGXCPU/SIGKILL."""
    address_space_bytes: int | None = None
    """``RLIMIT_AS``: virtual memory of each process. Node-based CLIs reserve a lot of address space;
    leave room (several GiB) or the CLI cannot start."""
    stdout_cap: int = DEFAULT_STDOUT_CAP
    """Most stdout bytes read."""
    stderr_tail: int = DEFAULT_STDERR_TAIL
    """Stderr bytes kept."""
    kill_grace_seconds: float = _KILL_GRACE_SECONDS
    """Time between SIGTERM and SIGKILL."""

    def preexec(self) -> Callable[[], None] | None:
        """The function that applies the rlimits in the child (``None`` when there is nothing to set)."""
        limits: list[tuple[int, int]] = []
        if self.cpu_seconds is not None:
            limits.append((resource.RLIMIT_CPU, self.cpu_seconds))
        if self.address_space_bytes is not None:
            limits.append((resource.RLIMIT_AS, self.address_space_bytes))
        if not limits:
            return None

        def apply() -> None:  # runs in the child between fork and exec: no allocation-heavy work
            for which, value in limits:
                resource.setrlimit(which, (value, value))

        return apply


class HarnessProcess:
    """One CLI run: ``async with HarnessProcess(argv, ...) as proc: async for line in proc.lines(): ...``.

    Raises :class:`FileNotFoundError` from ``__aenter__`` when the command does not exist.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        stdin: bytes,
        limits: ProcessLimits | None = None,
    ) -> None:
        self.argv = list(argv)
        self.cwd = cwd
        self.env = dict(env)
        self._stdin = stdin
        self.limits = limits or ProcessLimits()
        self._proc: asyncio.subprocess.Process | None = None
        self._group: ProcessGroup | None = None
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self._stderr_task: asyncio.Task[None] | None = None
        self._reaper: asyncio.Task[None] | None = None
        self.stdout_bytes = 0
        """Bytes of stdout read so far."""

    @property
    def pid(self) -> int:
        """The CLI's pid (also its process group id)."""
        assert self._proc is not None
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        """Exit status once it ended (negative: killed by that signal)."""
        return None if self._proc is None else self._proc.returncode

    async def __aenter__(self) -> Self:
        self._proc = await asyncio.create_subprocess_exec(
            *self.argv,
            cwd=self.cwd,
            env=self.env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            preexec_fn=self.limits.preexec(),
            limit=_READ_CHUNK,
        )
        # Recorded now, while the CLI cannot have been reaped and its number handed to someone else.
        self._group = ProcessGroup(self._proc.pid)
        self._stderr_task = asyncio.create_task(self._read_stderr(), name=f"harness-stderr-{self._proc.pid}")
        self._reaper = asyncio.create_task(self._reap_on_exit(), name=f"harness-reaper-{self._proc.pid}")
        try:
            await self._write_prompt()
        except BaseException:
            # Raising from __aenter__ means __aexit__ never runs: take the tree down here, or a cancel that
            # lands while the prompt is written leaves the CLI running with nobody to reap it.
            await asyncio.shield(self._terminate())
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Shielded: a cancelled run must still take its process tree down before it ends.
        await asyncio.shield(self._terminate())

    async def _write_prompt(self) -> None:
        proc = self._proc
        assert proc is not None
        assert proc.stdin is not None
        try:
            proc.stdin.write(self._stdin)
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the CLI exited before reading its prompt; its exit status tells why
        except BaseException:
            # Cancelled mid-write: drop the unwritten rest, or closing the pipe waits for the CLI to read it.
            # Not when the pipe is already closing (the CLI closed its end as the cancel came): asyncio's abort()
            # of a pipe transport whose connection_lost already ran raises AttributeError, replacing the cancel.
            if not proc.stdin.transport.is_closing():
                proc.stdin.transport.abort()
            raise
        finally:
            proc.stdin.close()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                await proc.stdin.wait_closed()

    async def _read_stderr(self) -> None:
        proc = self._proc
        assert proc is not None
        assert proc.stderr is not None
        keep = self.limits.stderr_tail
        while chunk := await proc.stderr.read(_READ_CHUNK):
            self._stderr.append(chunk)
            self._stderr_size += len(chunk)
            while self._stderr and self._stderr_size - len(self._stderr[0]) >= keep:
                self._stderr_size -= len(self._stderr.popleft())

    def stderr_tail(self, limit: int | None = None) -> bytes:
        """The last stderr bytes (at most *limit*, default the configured tail)."""
        data = b"".join(self._stderr)
        keep = self.limits.stderr_tail if limit is None else limit
        return data[-keep:] if keep else b""

    async def lines(self) -> AsyncIterator[bytes]:
        """stdout, one line at a time as the CLI prints it (without the newline); ends at EOF.

        Raises :class:`OutputTooLargeError` once more than the stdout cap was read.
        """
        proc = self._proc
        assert proc is not None
        assert proc.stdout is not None
        pending = b""
        cap = self.limits.stdout_cap
        while chunk := await proc.stdout.read(_READ_CHUNK):
            self.stdout_bytes += len(chunk)
            if self.stdout_bytes > cap:
                raise OutputTooLargeError(f"the CLI printed more than {cap} bytes")
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for line in complete:
                yield line
        if pending:
            yield pending

    async def read_all(self) -> bytes:
        """All of stdout (within the cap)."""
        return b"\n".join([line async for line in self.lines()])

    async def wait(self) -> int:
        """Wait for the CLI to exit and for its stderr to be read; its exit status."""
        proc = self._proc
        assert proc is not None
        code = await proc.wait()
        if self._stderr_task is not None:
            await self._stderr_task
        return code

    async def _reap_on_exit(self) -> None:
        # When the CLI itself exits, whatever it left in its group (an MCP server, a shell it spawned) goes
        # too; those would otherwise hold stdout open and the run would wait for its timeout.
        proc = self._proc
        assert proc is not None
        await _exited(proc)
        await self._kill_group()

    async def _kill_group(self) -> None:
        proc, group = self._proc, self._group
        assert proc is not None
        assert group is not None

        def alive() -> bool:
            return group.alive(returncode=proc.returncode)

        if not alive():
            return
        group.signal(signal.SIGTERM, returncode=proc.returncode)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.limits.kill_grace_seconds):
                while alive():  # noqa: ASYNC110 - nothing signals a group's end; poll it
                    await asyncio.sleep(0.05)
        if alive():
            group.signal(signal.SIGKILL, returncode=proc.returncode)

    async def _terminate(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if self._reaper is not None and not self._reaper.done():
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        # The group outlives its leader when a grandchild is still in it: signal the group either way.
        await self._kill_group()
        await _exited(proc)
        # asyncio's wait() also waits for the pipes to close, and a reader paused on a full buffer never sees
        # the close: drain what is left so the transport can finish.
        if proc.stdout is not None:
            with contextlib.suppress(Exception):
                while await proc.stdout.read(_READ_CHUNK):
                    pass
        await proc.wait()
        if self._stderr_task is not None:
            # Once the group is dead every writer of the stderr pipe is gone, so this ends.
            with contextlib.suppress(Exception):
                await self._stderr_task
        if self._group is not None:
            self._group.close()


async def _exited(proc: asyncio.subprocess.Process) -> None:
    """Wait for the process itself to end. Not ``proc.wait()``: that also waits until every writer of its
    pipes is gone, and a grandchild holding stdout would keep it waiting."""
    if proc.returncode is not None:
        return
    loop = asyncio.get_running_loop()
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        fd = None
    if fd is None:
        while proc.returncode is None:  # noqa: ASYNC110 - no pidfd on this platform
            await asyncio.sleep(0.01)
        return
    try:
        ready = loop.create_future()
        loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
        try:
            if proc.returncode is None:
                await ready
        finally:
            loop.remove_reader(fd)
    finally:
        os.close(fd)
    # The child watcher sets returncode right after the exit; give it the moment it needs.
    while proc.returncode is None:  # noqa: ASYNC110 - the watcher has no event to wait on
        await asyncio.sleep(0.001)
