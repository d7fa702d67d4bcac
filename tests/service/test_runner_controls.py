"""The per-runner disable switch, the runner risk view and the back-call audit query, through the real
service, its HTTP app and the CLI (security gate item 9)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerManifest,
    AgentRunnerPermissions,
    AgentRunResult,
    DynamicFormItemSchema,
    I18nObject,
    UnauthorizedError,
)
from agentrunner import codec as json
from agentrunner_host.access import ConversationKey
from agentrunner_host.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, cli
from agentrunner_host.config import ECHO_RUNNER_ID
from agentrunner_host.errors import RunnerDisabledError
from agentrunner_host.service import HostService

from .agent_runs import api_event, put_agent, run_to_end
from .conftest import SettingsFactory, client_for
from .fakes import FAKE_PLUGIN, install_fakes

AUDITED_RUNNER_ID = f"plugin:{FAKE_PLUGIN}/audited"


class FakeAuditedRunner(AgentRunner):
    """Makes two allowed storage calls and one tool call its manifest does not ask for (refused)."""

    manifest: ClassVar[AgentRunnerManifest] = AgentRunnerManifest(
        id=AUDITED_RUNNER_ID,
        name="audited",
        label=I18nObject(en_US="Fake audited"),
        permissions=AgentRunnerPermissions(storage=["plugin"]),
        config_schema=[
            DynamicFormItemSchema(name="base-url", label=I18nObject(en_US="Base URL"), type="string"),
            DynamicFormItemSchema(
                name="api-key", label=I18nObject(en_US="API key"), type="string", secret=True
            ),
        ],
    )

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        await api.storage.set("plugin", "seen", b"1")
        await api.storage.get("plugin", "seen")
        with contextlib.suppress(UnauthorizedError):
            await api.tools.call("shell", {})
        out = self.emitter(ctx)
        yield out.message("audited")
        yield out.complete()


def _event(text: str = "hello") -> dict[str, Any]:
    return {"conversation_id": "c-" + uuid.uuid4().hex[:8], "input": {"text": text}}


async def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = await asyncio.to_thread(cli, list(argv), out=out)
    return code, out.getvalue()


async def test_a_disabled_runner_is_refused_with_the_reason_and_listed_until_enabled(
    client: httpx.AsyncClient, service: HostService
) -> None:
    """PUT …/disabled stores the switch; the next event bound to the runner gets 403 ``runner_disabled``
    naming the reason, the event is still stored with why it was not handled, and GET /v1/runners shows the
    switch; DELETE turns it off and the next event runs."""
    assert (await client.post("/v1/events?wait=true", json=_event())).status_code == 200
    put = await client.put(f"/v1/runners/{ECHO_RUNNER_ID}/disabled", json={"reason": "incident 42"})
    assert put.status_code == 200, put.text
    assert put.json()["runner_id"] == ECHO_RUNNER_ID
    assert put.json()["disabled_by"] == "api"

    listed = {r["runner_id"]: r for r in (await client.get("/v1/runners")).json()["runners"]}
    assert listed[ECHO_RUNNER_ID]["disabled"]["reason"] == "incident 42"

    event = {**_event(), "event_id": "evt-refused-1"}
    refused = await client.post("/v1/events", json=event)
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error["code"] == "runner_disabled"
    assert "incident 42" in error["message"]
    stored = await service.stores.events.get(
        "evt-refused-1", conversation=ConversationKey(event["conversation_id"], None)
    )
    assert stored is not None  # the refused event is in the log, as every unhandled event is

    # streaming and waiting clients get the same refusal, before any stream starts
    assert (await client.post("/v1/events?stream=true", json=_event())).status_code == 403
    assert (await client.post("/v1/events?wait=true", json=_event())).status_code == 403

    assert (await client.delete(f"/v1/runners/{ECHO_RUNNER_ID}/disabled")).status_code == 204
    listed = {r["runner_id"]: r for r in (await client.get("/v1/runners")).json()["runners"]}
    assert listed[ECHO_RUNNER_ID]["disabled"] is None
    assert (await client.post("/v1/events?wait=true", json=_event())).status_code == 200


async def test_the_switch_also_stops_events_sent_to_an_agent_directly(service: HostService) -> None:
    """An event addressed to an agent (``agentrunner chat --agent``) is refused the same way."""
    install_fakes(service, FakeAuditedRunner())
    await put_agent(service, "audited", AUDITED_RUNNER_ID)
    await service.disable_runner(AUDITED_RUNNER_ID, reason="maintenance")
    with pytest.raises(RunnerDisabledError, match="maintenance"):
        await service.submit(api_event("audit-conv"), agent_id="audited")


async def test_the_switch_routes_take_a_percent_encoded_runner_id_and_refuse_bad_ones(
    client: httpx.AsyncClient,
) -> None:
    """The runner id's slashes may be encoded; an unknown runner is 404, a malformed id or reason 422."""
    encoded = ECHO_RUNNER_ID.replace("/", "%2F")
    assert (await client.put(f"/v1/runners/{encoded}/disabled", json={"reason": "x"})).status_code == 200
    assert (await client.delete(f"/v1/runners/{encoded}/disabled")).status_code == 204
    unknown = await client.put("/v1/runners/plugin:nobody/none/default/disabled", json={"reason": "x"})
    assert unknown.status_code == 404
    assert (await client.put("/v1/runners/not-a-runner/disabled", json={"reason": "x"})).status_code == 422
    empty = await client.put(f"/v1/runners/{ECHO_RUNNER_ID}/disabled", json={"reason": ""})
    assert empty.status_code == 422
    # enabling a runner that is not disabled is not an error (the switch is idempotent)
    assert (await client.delete(f"/v1/runners/{ECHO_RUNNER_ID}/disabled")).status_code == 204


async def test_the_switch_needs_the_token_and_refuses_a_foreign_origin(service: HostService) -> None:
    """The switch routes have the API's auth and Origin rules."""
    token = "switch-token-0123456789abcdef"
    async with client_for(service, token=token, send_token=False) as anonymous:
        put = await anonymous.put(f"/v1/runners/{ECHO_RUNNER_ID}/disabled", json={"reason": "x"})
        assert put.status_code == 401
    async with client_for(service, token=token) as authed:
        foreign = await authed.put(
            f"/v1/runners/{ECHO_RUNNER_ID}/disabled",
            json={"reason": "x"},
            headers={"Origin": "http://evil.example"},
        )
        assert foreign.status_code == 403
    assert await service.stores.controls.get(ECHO_RUNNER_ID) is None


async def test_a_switch_set_by_the_cli_counts_for_the_servers_next_event(
    make_settings: SettingsFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agentrunner runners disable`` writes the database the running service reads: no restart, no
    cache — the next event is refused; ``enable`` lets the one after run."""
    monkeypatch.delenv("AGENTRUNNER_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    data = str(tmp_path / "data")
    async with HostService.open(make_settings()) as service, client_for(service) as client:
        assert (await client.post("/v1/events?wait=true", json=_event())).status_code == 200
        code, out = await _cli(
            "runners", "disable", ECHO_RUNNER_ID, "--reason", "cli says no", "--data-dir", data
        )
        assert code == EXIT_OK, out
        assert "disabled" in out
        refused = await client.post("/v1/events", json=_event())
        assert refused.status_code == 403
        assert "cli says no" in refused.json()["error"]["message"]

        code, out = await _cli("runners", "list", "--data-dir", data)
        assert code == EXIT_OK
        assert f"{ECHO_RUNNER_ID}\t" in out
        assert "DISABLED: cli says no" in out

        code, out = await _cli("runners", "enable", ECHO_RUNNER_ID, "--data-dir", data)
        assert code == EXIT_OK
        assert "enabled" in out
        assert (await client.post("/v1/events?wait=true", json=_event())).status_code == 200


async def test_the_cli_refuses_to_disable_a_runner_it_does_not_know(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo must not look like a switch that worked."""
    monkeypatch.delenv("AGENTRUNNER_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    data = str(tmp_path / "data")
    code, _ = await _cli(
        "runners", "disable", "plugin:nobody/none/default", "--reason", "x", "--data-dir", data
    )
    assert code == EXIT_FAILURE
    assert "not installed" in capsys.readouterr().err
    code, _ = await _cli("runners", "disable", "not a runner", "--reason", "x", "--data-dir", data)
    assert code == EXIT_FAILURE


async def test_the_risk_view_names_what_a_runner_may_touch(
    client: httpx.AsyncClient, service: HostService
) -> None:
    """Computed from the manifest, the agents using the runner (their env references, never values) and how
    its plugin runs; echo touches nothing but runs in the host process."""
    install_fakes(service, FakeAuditedRunner())
    agent = {
        "agent_id": "risky",
        "runner_id": AUDITED_RUNNER_ID,
        "runner_config": {"base-url": "https://api.example", "api-key": {"env": "AUDITED_API_KEY"}},
    }
    assert (await client.post("/v1/agents", json=agent)).status_code == 201
    listed = {r["runner_id"]: r for r in (await client.get("/v1/runners")).json()["runners"]}
    risk = listed[AUDITED_RUNNER_ID]["risk"]
    assert risk["level"] == "medium"
    assert risk["executes_code"] is False
    assert risk["network"] == "external_service"
    assert risk["secrets"] == ["AUDITED_API_KEY"]
    assert risk["permissions"] == ["storage:plugin"]
    assert risk["agents"] == ["risky"]
    assert risk["runtime"] == "in_process"
    process = listed[AUDITED_RUNNER_ID]["process"]
    assert process == {
        "mode": "in_process",
        "warm": True,
        "pid": None,
        "starts": 0,
        "restarts": 0,
        "live_runs": 0,
    }
    echo = listed[ECHO_RUNNER_ID]
    assert echo["risk"]["network"] == "host_only"
    assert echo["risk"]["secrets"] == []
    assert echo["protocol_version"]
    assert "AUDITED_API_KEY" not in json.dumps_str(echo)


async def test_the_audit_query_returns_exactly_the_calls_made(
    client: httpx.AsyncClient, service: HostService
) -> None:
    """Each back-call of a run is one audit record with its decision, in call order; the filters (run,
    runner, plugin, action, outcome, time) and the cursor select and page them."""
    install_fakes(service, FakeAuditedRunner())
    await put_agent(service, "audited", AUDITED_RUNNER_ID)
    run_ids: list[str] = []
    for _ in range(2):
        ended = await run_to_end(service, api_event("audit-conv"), agent_id="audited")
        assert ended.types[-1] == "run.completed"
        run_ids.append(ended.run_id)
    # a run of another runner: its records are its own
    echo_run = (await client.post("/v1/events?wait=true", json=_event())).json()["run"]["run_id"]

    first = await client.get("/v1/audit", params={"run_id": run_ids[0], "order": "asc"})
    assert first.status_code == 200, first.text
    entries = first.json()["entries"]
    assert [(e["action"], e["resource"], e["decision"]) for e in entries] == [
        ("storage.set", "seen", "allowed"),
        ("storage.get", "seen", "allowed"),
        ("tools.call", "shell", "unauthorized"),
    ]
    assert {(e["run_id"], e["runner_id"], e["plugin_id"]) for e in entries} == {
        (run_ids[0], AUDITED_RUNNER_ID, FAKE_PLUGIN)
    }
    assert first.json()["next_cursor"] is None

    echo_calls = (await client.get("/v1/audit", params={"runner_id": ECHO_RUNNER_ID})).json()["entries"]
    assert {e["run_id"] for e in echo_calls} == {echo_run}
    mine = {"runner_id": AUDITED_RUNNER_ID}
    everything = (await client.get("/v1/audit", params=mine)).json()["entries"]
    assert len(everything) == 6
    assert [e["run_id"] for e in everything[:3]] == [run_ids[1]] * 3  # newest first
    denied = (await client.get("/v1/audit", params={**mine, "outcome": "denied"})).json()["entries"]
    assert [(e["run_id"], e["action"]) for e in denied] == [
        (run_ids[1], "tools.call"),
        (run_ids[0], "tools.call"),
    ]
    by_code = (await client.get("/v1/audit", params={**mine, "outcome": "unauthorized"})).json()["entries"]
    assert len(by_code) == 2
    allowed = (await client.get("/v1/audit", params={"outcome": "allowed", "action": "storage.get"})).json()
    assert len(allowed["entries"]) == 2
    assert len((await client.get("/v1/audit", params={"plugin_id": FAKE_PLUGIN})).json()["entries"]) == 6

    at = [e["at"] for e in everything]
    assert all(a > 0 for a in at)
    newest = max(at)
    assert len((await client.get("/v1/audit", params={**mine, "since": newest + 1})).json()["entries"]) == 0
    assert len((await client.get("/v1/audit", params={**mine, "until": newest + 1})).json()["entries"]) == 6
    oldest = min(at)
    assert len((await client.get("/v1/audit", params={**mine, "until": oldest})).json()["entries"]) == 0

    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params = {**mine, "limit": 4, **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/v1/audit", params=params)).json()
        pages.extend(page["entries"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert [e["seq"] for e in pages] == [e["seq"] for e in everything]

    for bad in ({"limit": 0}, {"order": "up"}, {"cursor": "x"}, {"since": "yesterday"}, {"runner_id": "x"}):
        assert (await client.get("/v1/audit", params=bad)).status_code == 422, bad


async def test_agentrunner_audit_prints_the_calls_with_filters(
    make_settings: SettingsFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agentrunner audit`` reads the same records from the database (JSON and lines, filters, paging)."""
    monkeypatch.delenv("AGENTRUNNER_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    data = str(tmp_path / "data")
    async with HostService.open(make_settings()) as service:
        install_fakes(service, FakeAuditedRunner())
        await put_agent(service, "audited", AUDITED_RUNNER_ID)
        run_id = (await run_to_end(service, api_event("audit-conv"), agent_id="audited")).run_id
    code, out = await _cli("audit", "--run", run_id, "--order", "asc", "--json", "--data-dir", data)
    assert code == EXIT_OK
    page = json.loads(out)
    assert [(e["action"], e["decision"]) for e in page["entries"]] == [
        ("storage.set", "allowed"),
        ("storage.get", "allowed"),
        ("tools.call", "unauthorized"),
    ]
    code, out = await _cli("audit", "--outcome", "denied", "--data-dir", data)
    assert code == EXIT_OK
    lines = out.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].split("\t")[1:] == [run_id, AUDITED_RUNNER_ID, "tools.call", "shell", "unauthorized"]
    code, out = await _cli("audit", "--limit", "2", "--json", "--data-dir", data)
    assert code == EXIT_OK
    first = json.loads(out)
    assert len(first["entries"]) == 2
    assert first["next_cursor"] is not None
    code, out = await _cli(
        "audit", "--limit", "2", "--cursor", first["next_cursor"], "--json", "--data-dir", data
    )
    assert [e["action"] for e in json.loads(out)["entries"]] == ["storage.set"]
    code, out = await _cli("audit", "--since", "2000-01-01T00:00:00Z", "--json", "--data-dir", data)
    assert len(json.loads(out)["entries"]) == 3
    # a time without a zone is ambiguous, and a malformed one is a usage error like any bad option
    for bad in ("2000-01-01T00:00:00", "yesterday"):
        code, _ = await _cli("audit", "--since", bad, "--data-dir", data)
        assert code == EXIT_USAGE, bad


async def test_a_binding_is_checked_before_it_is_saved(client: httpx.AsyncClient) -> None:
    """POST /v1/bindings/check names every binding the candidate conflicts with (the rule the save applies)
    and its place in the precedence order, and writes nothing; a saved binding with the same conflict is
    refused with 409."""
    agent = {"agent_id": "second", "runner_id": ECHO_RUNNER_ID}
    assert (await client.post("/v1/agents", json=agent)).status_code == 201
    scoped = {"binding_id": "conv-b", "agent_id": "second", "scope": {"type": "conversation", "id": "c9"}}
    assert (await client.post("/v1/bindings", json=scoped)).status_code == 201
    before = (await client.get("/v1/bindings")).json()

    clash = {"binding_id": "conv-c", "agent_id": "second", "scope": {"type": "conversation", "id": "c9"}}
    check = await client.post("/v1/bindings/check", json=clash)
    assert check.status_code == 200, check.text
    body = check.json()
    assert body["ok"] is False
    assert list(body["conflicts"]) == ["conv-b"]
    assert "same precedence" in body["conflicts"]["conv-b"]
    assert (await client.get("/v1/bindings")).json() == before  # nothing written
    assert (await client.post("/v1/bindings", json=clash)).status_code == 409

    higher = {**clash, "priority": 5}
    body = (await client.post("/v1/bindings/check", json=higher)).json()
    assert body["ok"] is True
    assert body["conflicts"] == {}
    assert body["order"].index("conv-c") < body["order"].index("conv-b")  # priority breaks the tie
    assert body["precedence"][3] == 5

    unknown = (await client.post("/v1/bindings/check", json={**clash, "agent_id": "nobody"})).json()
    assert unknown["ok"] is False
    assert unknown["problems"] == ["agent 'nobody' does not exist"]
    # the same id as an existing binding is checked as its replacement, not against itself
    assert (await client.post("/v1/bindings/check", json=scoped)).json()["ok"] is True
