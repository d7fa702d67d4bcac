"""Operator agents and bindings live in the database: every host on it serves them, changes reach the other
hosts (PostgreSQL notification or SQLite version poll), concurrent changes never overwrite each other, and
an earlier version's ``agents.json`` is imported once."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentrunner import codec as json
from agentrunner_host.service import HostService
from agentrunner_host.service.agents import AGENTS_FILE_NAME, IMPORTED_SUFFIX

from .conftest import HostSettings, client_for

ECHO = "plugin:agentrunner/echo/default"
_WAIT = 60.0


async def _until_bound(service: HostService, binding_id: str) -> None:
    """Wait (generously) until *service* has loaded *binding_id* from the database."""
    async with asyncio.timeout(_WAIT), service.definitions_loaded:
        await service.definitions_loaded.wait_for(
            lambda: binding_id in {e.binding.binding_id for e in service.directory.bindings()}
        )


async def test_an_agent_added_on_one_host_is_used_by_an_event_on_another(
    shared_url: str, host_settings: HostSettings
) -> None:
    """Agent and binding added through host A's API; host B loads them and routes its next event there."""
    async with (
        HostService.open(host_settings("a", shared_url)) as a,
        HostService.open(host_settings("b", shared_url)) as b,
        client_for(a) as client_a,
        client_for(b) as client_b,
    ):
        agent = {"agent_id": "loud", "runner_id": ECHO, "runner_config": {"prefix": "B says: "}}
        assert (await client_a.post("/v1/agents", json=agent)).status_code == 201
        binding = {
            "binding_id": "loud-conv",
            "agent_id": "loud",
            "scope": {"type": "conversation", "id": "c1"},
        }
        assert (await client_a.post("/v1/bindings", json=binding)).status_code == 201
        await _until_bound(b, "loud-conv")
        answer = await client_b.post("/v1/events?wait=true", json={"text": "hi", "conversation_id": "c1"})
        assert answer.status_code == 200
        run = answer.json()["run"]
        assert run["binding_id"] == "loud-conv"
        texts = [r["result"]["data"] for r in answer.json()["results"] if r["type"] == "message.completed"]
        assert "B says: hi" in json.dumps_str(texts)
        shown = await client_b.get("/v1/agents/loud")
        assert shown.status_code == 200 and shown.json()["source"] == "api"


async def test_concurrent_changes_on_two_hosts_both_survive(
    shared_url: str, host_settings: HostSettings
) -> None:
    """Two hosts add different agents at the same time: the compare-and-set makes the later writer apply
    its change on top of the earlier one, so neither is lost."""
    async with (
        HostService.open(host_settings("a", shared_url)) as a,
        HostService.open(host_settings("b", shared_url)) as b,
    ):
        for round_ in range(3):
            await asyncio.gather(
                *(
                    host.directory.put_agent(
                        host.directory.agent("default").agent.model_copy(
                            update={"agent_id": f"{name}{round_}", "label": None}
                        ),
                        create=True,
                    )
                    for name, host in (("a", a), ("b", b))
                )
            )
        await a.directory.refresh()
        await b.directory.refresh()
        expected = {f"{n}{r}" for n in "ab" for r in range(3)}
        assert expected <= {e.agent.agent_id for e in a.directory.agents()}
        assert expected <= {e.agent.agent_id for e in b.directory.agents()}


async def test_an_agents_file_is_imported_once_and_renamed(
    tmp_path: Path, host_settings: HostSettings
) -> None:
    """An earlier version's agents.json is imported at start-up and renamed; a second file with the same ids
    changes nothing that is stored, and adds only its new ids."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"
    settings = host_settings("a", url)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    file = settings.data_dir / AGENTS_FILE_NAME
    legacy = {
        "version": 1,
        "agents": [{"agent_id": "old", "runner_id": ECHO, "runner_config": {"prefix": "old: "}}],
        "bindings": [{"binding_id": "old-b", "agent_id": "old", "scope": {"type": "bot", "id": "b1"}}],
    }
    file.write_bytes(json.dumps(legacy))
    async with HostService.open(settings) as service:
        assert service.directory.agent("old").source == "api"
        assert service.directory.binding("old-b").binding.agent_id == "old"
    assert not file.exists()
    assert file.with_name(AGENTS_FILE_NAME + IMPORTED_SUFFIX).exists()

    again = {
        "version": 1,
        "agents": [
            {"agent_id": "old", "runner_id": ECHO, "runner_config": {"prefix": "changed: "}},
            {"agent_id": "new", "runner_id": ECHO},
        ],
        "bindings": [],
    }
    file.write_bytes(json.dumps(again))
    async with HostService.open(settings) as service:
        assert service.directory.agent("old").agent.runner_config == {"prefix": "old: "}
        assert service.directory.agent("new").source == "api"
        assert service.directory.binding("old-b").source == "api"
    async with HostService.open(settings) as service:  # nothing left to import: same definitions
        assert {e.agent.agent_id for e in service.directory.agents() if e.source == "api"} == {"old", "new"}
