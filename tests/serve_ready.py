"""``agentrunner serve`` children of the tests, started with ``--port 0``: the kernel picks the port while
``serve`` binds it, and ``serve`` writes it to ``<data-dir>/http.port`` once it listens (written whole, then
renamed into place). No port is picked by the test and released for the child to race for.
:func:`serve_child` starts one and waits for it; :func:`wait_until_ready` is the wait alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Generator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from agentrunner_host.cli import HTTP_PORT_FILE

START_TIMEOUT = 120.0
"""Seconds a ``serve`` child may take to answer ``/readyz`` on a loaded machine (a hang guard, not a timing)."""


def read_port(port_file: Path) -> int:
    """The port in *port_file* (``OSError`` while it is absent)."""
    return int(port_file.read_text(encoding="utf-8"))


def wait_until_ready(
    process: subprocess.Popen[bytes],
    port_file: Path,
    log: Path,
    *,
    headers: Mapping[str, str] | None = None,
    name: str = "serve",
    timeout: float = START_TIMEOUT,
) -> str:
    """Wait until *process* has written its port to *port_file* and answers ``/readyz`` there with 200; its
    base URL ``http://127.0.0.1:<port>``. Fails at once, with its *log*, when it exits first.

    *port_file* must not hold a previous ``serve``'s port when the child starts (``serve`` removes a stale one
    itself, but the test could read it first): a killed ``serve`` leaves its file behind, so callers that
    restart one in the same data directory remove the file before starting the child."""
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, f"{name} exited early:\n{log.read_text(errors='replace')}"
        try:
            base = f"http://127.0.0.1:{read_port(port_file)}"
            if httpx.get(f"{base}/readyz", headers=headers, timeout=2).status_code == 200:
                return base
        except (OSError, ValueError, httpx.TransportError):  # no port file yet: not listening yet
            pass
        assert time.monotonic() < deadline, f"{name} did not become ready:\n{log.read_text(errors='replace')}"
        time.sleep(0.1)


def child_environ(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without its ``AGENTRUNNER_*`` variables (a child ``serve`` takes its settings
    from the test alone), plus *extra*."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRUNNER_")}
    environ.update(extra or {})
    return environ


@dataclass(frozen=True)
class ServeChild:
    """A ready ``agentrunner serve`` child."""

    process: subprocess.Popen[bytes]
    base: str
    """``http://127.0.0.1:<port>``."""
    port_file: Path
    log: Path

    def stop(self, *, timeout: float = 30.0) -> None:
        """SIGTERM: it must exit 0 and take its port file with it (no port left to be mistaken for a live one)."""
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout=timeout) == 0, self.log.read_text(errors="replace")
        assert not self.port_file.exists()


@contextmanager
def serve_child(
    data_dir: Path,
    log: Path,
    *,
    config: Path | None = None,
    env: Mapping[str, str] | None = None,
    program: Sequence[str] = (sys.executable, "-m", "agentrunner_host.cli"),
    cwd: Path | None = None,
    headers: Mapping[str, str] | None = None,
) -> Generator[ServeChild]:
    """``<program> serve --port 0 --data-dir <data_dir> [--config <config>]`` with the environment *env*
    (default :func:`child_environ`), its output appended to *log*; yields it once ready. Stop it gracefully
    with :meth:`ServeChild.stop`; one still running when the block ends is killed (no orphan even when the test
    fails)."""
    port_file = data_dir / HTTP_PORT_FILE
    port_file.unlink(missing_ok=True)  # a killed serve leaves its port behind: never read it as this one's
    args = [*program, "serve", "--port", "0", "--data-dir", str(data_dir)]
    if config is not None:
        args += ["--config", str(config)]
    with log.open("ab") as out:
        process = subprocess.Popen(
            args,
            cwd=cwd,
            env=child_environ() if env is None else dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield ServeChild(process, wait_until_ready(process, port_file, log, headers=headers), port_file, log)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
