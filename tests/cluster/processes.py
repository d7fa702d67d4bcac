"""Real ``agentrunner serve`` processes for the multi-host tests: started with ``--port 0`` (the kernel picks
a free loopback port while binding it, and ``serve`` writes it to its data directory: no port is picked here
and released for the child to race for), with their own data directory and configuration, on one database,
and killed when the test is done."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
from agentrunner_host.cli import HTTP_PORT_FILE, RUNTIME_PORT_FILE
from agentrunner_host.stores.engine import create_engine
from serve_ready import wait_until_ready
from sqlalchemy import text

T = TypeVar("T")

START_TIMEOUT = 120.0
"""Seconds a host may take to become ready on a loaded machine."""
WAIT = 120.0
"""Generous deadline of every wait for a condition."""


@dataclass
class ServeProcess:
    """One ``agentrunner serve`` child."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    port_file: Path
    """Where ``serve`` writes the port it bound (``--port 0``)."""

    @property
    def port(self) -> int:
        """The HTTP port the child listens on (it has written it: call :func:`until_ready` first)."""
        return int(self.port_file.read_text(encoding="utf-8"))

    @property
    def runtime_port(self) -> int:
        """The port of its ``[runtime_server]`` endpoint (configured with ``port = 0``: the kernel picked it);
        written before the HTTP port, so readable once :func:`until_ready` returned."""
        return int((self.port_file.parent / RUNTIME_PORT_FILE).read_text(encoding="utf-8"))

    @property
    def base(self) -> str:
        """The child's API URL."""
        return f"http://127.0.0.1:{self.port}"

    def client(self) -> httpx.Client:
        """An HTTP client of its API."""
        return httpx.Client(base_url=self.base, timeout=60)


@contextmanager
def serve_process(
    home: Path, name: str, database_url: str, config: str, *, env: Mapping[str, str] | None = None
) -> Generator[ServeProcess]:
    """``agentrunner serve`` with the TOML *config* as a child process on a loopback port it binds itself."""
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRUNNER_")}
    child_env.update(env or {})
    child_env["AGENTRUNNER_DATABASE_URL"] = database_url
    config_path = home / f"{name}.toml"
    config_path.write_text(config, encoding="utf-8")
    args = [sys.executable, "-m", "agentrunner_host.cli", "serve", "--port", "0"]
    args += ["--data-dir", str(home / name), "--config", str(config_path)]
    log = home / f"{name}.log"
    with log.open("ab") as log_file:
        process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT, env=child_env
        )
    try:
        yield ServeProcess(name, process, log, home / name / HTTP_PORT_FILE)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


def until_ready(host: ServeProcess) -> None:
    """Wait until *host* answers ``/readyz`` with 200 (fails early when it exited)."""
    wait_until_ready(host.process, host.port_file, host.log, name=f"serve {host.name}", timeout=START_TIMEOUT)


def wait_for(what: str, check: Callable[[], T | None]) -> T:
    """Poll *check* (a loopback HTTP or SQL read) until it returns something truthy; generous deadline."""
    deadline = time.monotonic() + WAIT
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def sql(url: str, statement: str, **params: Any) -> list[tuple[Any, ...]]:
    """Rows of one statement on the database at *url* (its own short-lived engine)."""

    async def run() -> list[tuple[Any, ...]]:
        engine = create_engine(url)
        try:
            async with engine.connect() as conn:
                return [tuple(row) for row in (await conn.execute(text(statement), params)).all()]
        finally:
            await engine.dispose()

    return asyncio.run(run())


def host_id(url: str, machine: str) -> str:
    """The registered incarnation id of the host on *machine*."""
    rows = sql(url, "SELECT host_id FROM hosts WHERE machine = :m", m=machine)
    assert len(rows) == 1, rows
    return str(rows[0][0])
