"""``serve``'s shutdown as docs/operators.md describes it: the first SIGINT stops listening and waits up to
``http.graceful_shutdown_seconds`` for open connections; a second SIGINT forces the exit."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from agentrunner_host.cli import HTTP_PORT_FILE
from serve_ready import read_port, wait_until_ready

pytestmark = pytest.mark.slow

_TIMEOUT = 120.0  # a hang guard on a loaded machine, far below the 600 s the server would otherwise wait


def _wait_for(condition: str, check: Callable[[], bool], log: Path, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + _TIMEOUT
    while not check():
        assert process.poll() is None, f"serve exited before {condition}:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"serve never reached {condition}:\n{log.read_text()}"
        time.sleep(0.1)


def test_a_second_sigint_forces_the_exit_while_a_connection_keeps_the_first_one_waiting(
    tmp_path: Path,
) -> None:
    config = tmp_path / "agentrunner.toml"
    # The server would wait 600 s for the request below (its body never completes, and may take 600 s to).
    config.write_text(
        "[http]\ngraceful_shutdown_seconds = 600\nbody_timeout_seconds = 600\n", encoding="utf-8"
    )
    log = tmp_path / "serve.log"
    port_file = tmp_path / "data" / HTTP_PORT_FILE
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRUNNER_")}
    command = [sys.executable, "-m", "agentrunner_host.cli", "serve", "--config", str(config)]
    command += ["--data-dir", str(tmp_path / "data"), "--port", "0"]  # the port is read from the port file
    with log.open("ab") as out:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env
        )
    try:
        wait_until_ready(process, port_file, log, timeout=_TIMEOUT)
        with socket.create_connection(("127.0.0.1", read_port(port_file))) as sock:
            # A complete request head and one byte of a 100-byte body: the request stays in flight.
            sock.sendall(
                b"POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100\r\n\r\n{"
            )
            process.send_signal(signal.SIGINT)
            _wait_for(
                "the graceful wait",
                lambda: "Waiting for connections to close" in log.read_text(),
                log,
                process,
            )
            assert process.poll() is None  # still waiting for the open request
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=_TIMEOUT) == 0, log.read_text()
        assert "Finished server process" in log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
