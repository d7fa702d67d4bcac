"""Waiting for an ``agentrunner serve`` child started with ``--port 0``: the kernel picks the port while
``serve`` binds it, and ``serve`` writes it to ``<data-dir>/http.port`` once it listens (written whole, then
renamed into place). No port is picked by the test and released for the child to race for."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

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
