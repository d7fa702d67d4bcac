"""The runner disable switch and the back-call audit query, on both engines."""

from __future__ import annotations

from agentrunner_host.access import ConversationKey
from agentrunner_host.stores import BACKCALL_EVENT, AuditFilter, EventEntry, HostStores, RunFinish

from .helpers import run_start, uid


async def test_a_runner_is_disabled_until_enabled_and_a_second_disable_replaces_the_reason(
    stores: HostStores,
) -> None:
    """One row per disabled runner; enable removes it and says whether there was one."""
    controls = stores.controls
    assert await controls.get("plugin:a/b/c") is None
    first = await controls.disable("plugin:a/b/c", reason="incident", by="cli")
    assert (first.reason, first.disabled_by) == ("incident", "cli")
    again = await controls.disable("plugin:a/b/c", reason="still broken", by="api")
    stored = await controls.get("plugin:a/b/c")
    assert stored == again
    assert stored is not None
    assert (stored.reason, stored.disabled_by) == ("still broken", "api")
    await controls.disable("plugin:a/b/d", reason="x")
    assert list(await controls.disabled()) == ["plugin:a/b/c", "plugin:a/b/d"]
    assert await controls.enable("plugin:a/b/c") is True
    assert await controls.enable("plugin:a/b/c") is False
    assert list(await controls.disabled()) == ["plugin:a/b/d"]


def _call(run_id: str, runner_id: str, action: str, decision: str, at: int) -> EventEntry:
    return EventEntry(
        event_id=uid("host"),
        event_type=BACKCALL_EVENT,
        source="host",
        kind="host",
        conversation_id="c1",
        run_id=run_id,
        runner_id=runner_id,
        data={
            "action": action,
            "resource": "k",
            "caller": "acme/echo",
            "scope": "c1",
            "decision": decision,
            "latency_ms": 0.5,
        },
        event_time=at,
    )


async def test_the_audit_query_filters_by_json_fields_and_pages_on_both_engines(stores: HostStores) -> None:
    """Action and decision are read out of the stored JSON by the engine (SQLite ``json_extract``,
    PostgreSQL ``jsonb``); plugin and binding come from the run; the cursor pages without repeats."""
    conversation = ConversationKey("c1", None)
    calls = {
        "r1": [("state.get", "allowed", 1_000), ("tools.call", "unauthorized", 1_001)],
        "r2": [("state.get", "allowed", 2_000), ("models.invoke", "rate_limited", 2_001)],
    }
    for run_id, made in calls.items():
        await stores.runs.start(
            run_start(run_id, conversation, plugin_id=f"acme/{run_id}", runner_id=f"plugin:acme/{run_id}/x")
        )
        await stores.runs.finish(
            RunFinish(
                run_id=run_id,
                status="completed",
                ended_at=9_000,
                events=[_call(run_id, f"plugin:acme/{run_id}/x", *c) for c in made],
            )
        )
    audit = stores.audit

    async def actions(**where: object) -> list[tuple[str | None, str, str]]:
        page = await audit.page(AuditFilter(**where), order="asc")  # pyright: ignore[reportArgumentType]
        return [(e.run_id, e.action, e.decision) for e in page.entries]

    assert await actions() == [
        ("r1", "state.get", "allowed"),
        ("r1", "tools.call", "unauthorized"),
        ("r2", "state.get", "allowed"),
        ("r2", "models.invoke", "rate_limited"),
    ]
    assert await actions(run_id="r2") == [
        ("r2", "state.get", "allowed"),
        ("r2", "models.invoke", "rate_limited"),
    ]
    assert await actions(action="state.get") == [
        ("r1", "state.get", "allowed"),
        ("r2", "state.get", "allowed"),
    ]
    assert await actions(outcome="denied") == [
        ("r1", "tools.call", "unauthorized"),
        ("r2", "models.invoke", "rate_limited"),
    ]
    assert await actions(outcome="rate_limited") == [("r2", "models.invoke", "rate_limited")]
    assert await actions(plugin_id="acme/r1", outcome="allowed") == [("r1", "state.get", "allowed")]
    assert await actions(runner_id="plugin:acme/r2/x", since=2_001) == [
        ("r2", "models.invoke", "rate_limited")
    ]
    assert await actions(since=1_001, until=2_001) == [
        ("r1", "tools.call", "unauthorized"),
        ("r2", "state.get", "allowed"),
    ]

    newest = await audit.page(limit=3)
    assert [e.at for e in newest.entries] == [2_001, 2_000, 1_001]
    assert newest.next_cursor is not None
    rest = await audit.page(cursor=newest.next_cursor, limit=3)
    assert [e.at for e in rest.entries] == [1_000]
    assert rest.next_cursor is None
    entry = rest.entries[0]
    assert (entry.plugin_id, entry.binding_id, entry.caller, entry.latency_ms) == (
        "acme/r1",
        "b1",
        "acme/echo",
        0.5,
    )
