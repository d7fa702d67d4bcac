"""Resource quotas of plugin processes (``[isolation]``): each one is set in the real child, and a runaway
plugin ends its run with a typed code while the host keeps serving."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from agentrunner import MessageCompletedResult, RunFailedResult, codec, parse_result
from agentrunner_host.runtime.sandbox import QUOTA_EXCEEDED
from agentrunner_host.service import HostService

from .conftest import SettingsFactory, client_for
from .isolation import PROBE_SOURCE

# Real plugin processes on a shared machine: a CPU-second can take many wall seconds under load.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

_RUNNERS = ("snoop", "spin", "hog", "scribble")


def _config(limits: str) -> str:
    # No liveness pings: the spinning runner blocks its event loop, and only the CPU limit may end it (a
    # ping timeout would be a wall-clock bound, which a loaded machine can reach first).
    parts = [
        f"[runners]\nplugin_dirs = [{codec.dumps_str(str(PROBE_SOURCE.parent))}]\nping_interval_seconds = 0\n",
        f"[isolation]\n{limits}\n",
    ]
    for name in _RUNNERS:
        parts.append(
            f"[[agents]]\nagent_id = '{name}'\nrunner_id = 'plugin:security/probe/{name}'\n"
            # CPU seconds are not wall seconds on a loaded machine: the run deadline must not come first.
            "run_policy = { timeout_seconds = 1800 }\n"
            f"[[bindings]]\nbinding_id = '{name}'\nagent_id = '{name}'\n"
            f"scope = {{ type = 'conversation', id = '{name}' }}\n"
        )
    return "".join(parts)


_LIMITS = "memory_mb = 1024\nopen_files = 64\nfile_size_mb = 2\n"


@pytest.fixture
async def limited(make_settings: SettingsFactory) -> AsyncIterator[httpx.AsyncClient]:
    """A service whose plugin processes get the memory, open-files and file-size quotas (small enough for a
    test to reach); no CPU limit, so a loaded machine cannot turn another failure into a CPU kill."""
    async with HostService.open(make_settings(_config(_LIMITS))) as service, client_for(service) as client:
        yield client


@pytest.fixture
async def cpu_limited(make_settings: SettingsFactory) -> AsyncIterator[httpx.AsyncClient]:
    """A service whose plugin processes get a CPU limit too (4 s: the runtime starts in about half a
    CPU-second, and a loaded machine makes that more)."""
    settings = make_settings(_config(_LIMITS + "cpu_seconds = 4\n"))
    async with HostService.open(settings) as service, client_for(service) as client:
        yield client


async def _run(client: httpx.AsyncClient, conversation: str) -> list[object]:
    response = await client.post(
        "/v1/events?wait=true", json={"text": "go", "conversation_id": conversation}, timeout=1800
    )
    assert response.status_code == 200, response.text
    return [parse_result(item["result"]) for item in response.json()["results"]]


def _failure(results: list[object]) -> RunFailedResult:
    failed = [r for r in results if isinstance(r, RunFailedResult)]
    assert failed, results
    return failed[-1]


async def test_every_quota_is_set_in_the_plugin_process(cpu_limited: httpx.AsyncClient) -> None:
    """The child sees exactly the configured CPU, address-space, open-files and file-size limits."""
    results = await _run(cpu_limited, "snoop")
    message = next(r for r in results if isinstance(r, MessageCompletedResult))
    limits = codec.loads(message.data.message.text())["limits"]
    assert limits == {
        "RLIMIT_CPU": 4,
        "RLIMIT_AS": 1024 * 1024 * 1024,
        "RLIMIT_NOFILE": 64,
        "RLIMIT_FSIZE": 2 * 1024 * 1024,
    }


async def test_a_cpu_runaway_ends_with_quota_exceeded_and_the_host_serves_on(
    cpu_limited: httpx.AsyncClient,
) -> None:
    """A busy loop that never yields is stopped by its CPU limit (``SIGXCPU``, counted in CPU seconds, so a
    loaded machine only makes it later): the run ends ``runtime.quota_exceeded`` naming the limit, and the next
    run gets a fresh plugin process."""
    failure = _failure(await _run(cpu_limited, "spin"))
    assert failure.data.code == QUOTA_EXCEEDED, failure
    assert "CPU time limit" in failure.data.message and "SIGXCPU" in failure.data.message, failure
    after = await _run(cpu_limited, "snoop")
    assert any(isinstance(r, MessageCompletedResult) for r in after)


async def test_a_memory_runaway_fails_its_allocation_and_the_host_serves_on(
    limited: httpx.AsyncClient,
) -> None:
    """Allocations beyond the address-space limit fail inside the plugin (``MemoryError``); the run ends
    ``runner.error`` naming it, and the same plugin process answers the next run."""
    failure = _failure(await _run(limited, "hog"))
    assert failure.data.code == "runner.error" and "MemoryError" in failure.data.message, failure
    after = await _run(limited, "snoop")
    assert any(isinstance(r, MessageCompletedResult) for r in after)


async def test_a_file_beyond_the_size_limit_is_refused(limited: httpx.AsyncClient, tmp_path: Path) -> None:
    """Writing past the file-size limit fails (``EFBIG``: Python ignores ``SIGXFSZ``); the run fails typed."""
    failure = _failure(await _run(limited, "scribble"))
    assert failure.data.code == "runner.error" and "File too large" in failure.data.message, failure
