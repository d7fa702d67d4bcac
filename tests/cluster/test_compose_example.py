"""The compose-style example of docs/deployment.md, exercised without docker: its YAML and nginx blocks are
read from the document, and each host service's command runs as a process with the service's environment.

What is replaced, and why: the ``db`` service is the test's PostgreSQL (a fresh database), each host's data
volume a temporary directory, ``${AGENTRUNNER_API_TOKEN:?...}`` a generated token, ``pip install -q uv``
skipped (uv runs these tests), ``UV_PROJECT_ENVIRONMENT`` the test's own synced environment (nothing is
installed), and ``--host 0.0.0.0 --port 8420`` a loopback address and ``--port 0`` (three processes on
one machine; tests use loopback only: each binds a port the kernel picks and writes it to its data volume). The load balancer is not run: the test sends each
request to the host nginx could pick, and checks the nginx block says what SSE needs.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import subprocess
import sys
from collections.abc import Generator, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import yaml
from agentrunner_host.cli import HTTP_PORT_FILE
from httpx_sse import connect_sse
from pg_databases import temporary_pg_database_sync
from serve_ready import wait_until_ready
from sqlalchemy.engine import make_url

from .processes import sql

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "deployment.md"
HOSTS = ("host-a", "host-b", "host-c")


def _block(language: str, after: str) -> str:
    """The first fenced block of *language* after the heading *after* in docs/deployment.md."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(after)
    found = re.search(rf"```{language}\n(.*?)```", text[start:], re.DOTALL)
    assert found is not None, f"no {language} block after {after!r}"
    return found.group(1)


def _compose() -> dict[str, Any]:
    return cast(dict[str, Any], yaml.safe_load(_block("yaml", "## Example (compose-style)")))


def test_the_example_declares_one_database_three_distinct_hosts_and_a_balancer() -> None:
    """Every host shares the database URL and token, and has its own hostname and data volume."""
    services = _compose()["services"]
    assert set(services) == {"db", *HOSTS, "lb"}
    assert services["db"]["image"].startswith("postgres:")
    urls = {services[h]["environment"]["AGENTRUNNER_DATABASE_URL"] for h in HOSTS}
    assert len(urls) == 1 and make_url(urls.pop()).host == "db"
    assert len({services[h]["hostname"] for h in HOSTS}) == 3
    data = [next(v for v in services[h]["volumes"] if v.endswith(":/data")) for h in HOSTS]
    assert len(set(data)) == 3
    nginx = _block("nginx", "`nginx.conf`")
    upstream = re.search(r"upstream agentrunner \{(.*?)\}", nginx, re.DOTALL)
    assert upstream is not None
    assert re.findall(r"server ([\w-]+):8420;", upstream.group(1)) == list(HOSTS)
    assert "proxy_buffering off;" in nginx and "proxy_http_version 1.1;" in nginx


def _serve_args(command: str) -> list[str]:
    """The service's ``sh -c`` command without the ``pip install -q uv`` step, bound to a loopback port of
    its own (``--port 0``)."""
    argv = shlex.split(command)
    assert argv[:2] == ["sh", "-c"], argv
    steps = [step.strip() for step in argv[2].split("&&")]
    assert steps[0] == "pip install -q uv", steps
    serve = shlex.split(steps[1])
    assert serve[:4] == ["uv", "run", "--frozen", "agentrunner"] and serve[4] == "serve", serve
    options = serve[5:]
    assert options == ["--host", "0.0.0.0", "--port", "8420"], options
    return [*serve[:5], "--host", "127.0.0.1", "--port", "0"]


def _environment(declared: Mapping[str, str], *, database_url: str, token: str, data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTRUNNER_", "UV_"))}
    for name, value in declared.items():
        if name == "AGENTRUNNER_DATABASE_URL":
            value = database_url
        elif name == "AGENTRUNNER_API_TOKEN":
            assert value.startswith("${AGENTRUNNER_API_TOKEN:?"), value  # compose refuses to start without it
            value = token
        elif name == "AGENTRUNNER_DATA_DIR":
            assert value == "/data"
            value = str(data)
        elif name == "UV_PROJECT_ENVIRONMENT":
            assert value.startswith("/data/")
            value = sys.prefix
        env[name] = value
    return env


@contextmanager
def _hosts(tmp: Path, database_url: str, token: str) -> Generator[dict[str, str]]:
    """The three host processes, each ready; their base URLs by service name."""
    services = _compose()["services"]
    started: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    with ExitStack() as stack:
        for name in HOSTS:
            service = services[name]
            env = _environment(
                service["environment"], database_url=database_url, token=token, data=tmp / name
            )
            log = tmp / f"{name}.log"
            with log.open("ab") as out:
                process = subprocess.Popen(
                    _serve_args(service["command"]),
                    cwd=ROOT if service["working_dir"] == "/src" else None,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            stack.callback(_stop, process)
            started[name] = (process, log)
        auth = _auth(token)
        yield {
            name: wait_until_ready(process, tmp / name / HTTP_PORT_FILE, log, headers=auth, name=name)
            for name, (process, log) in started.items()
        }


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def compose_database() -> Iterator[str]:
    with temporary_pg_database_sync() as url:
        yield url


def test_the_example_hosts_run_as_processes_and_serve_any_run_from_any_host(
    tmp_path: Path, compose_database: str
) -> None:
    """The three host commands, with their environment, start on one database; requests without the token
    are refused; an event posted to host-a is followed to its end from host-c; all three are registered."""
    token = secrets.token_urlsafe(32)
    with _hosts(tmp_path, compose_database, token) as bases:
        a, c = bases["host-a"], bases["host-c"]
        assert httpx.post(f"{a}/v1/events", json={"text": "x"}, timeout=30).status_code == 401
        with httpx.Client(base_url=a, headers=_auth(token), timeout=60) as client:
            accepted = client.post("/v1/events", json={"text": "hello from the example"})
        assert accepted.status_code == 202, accepted.text
        run_id = accepted.json()["run_id"]
        with (
            httpx.Client(base_url=c, headers=_auth(token), timeout=60) as client,
            connect_sse(client, "GET", f"/v1/runs/{run_id}/results?stream=true") as source,
        ):
            kinds = [event.event for event in source.iter_sse()]
        assert kinds[-1] == "run.completed", kinds
        registered = sql(compose_database, "SELECT count(*) FROM hosts")
        assert registered == [(3,)]
