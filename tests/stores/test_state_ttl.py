"""State lifetime (``[state]``): per-scope and per-key TTLs counted from the last write, on both engines.
Values are aged by moving their last-write time back in the database, so nothing waits on the clock."""

from __future__ import annotations

import pytest
from agentrunner_host.access import StateOwner
from agentrunner_host.stores import HostStores, StateTTL, StateVersionConflict
from sqlalchemy import text

CONVERSATION = StateOwner("conversation", ("acme/echo:echo", "b1", "c1", ""))
ACTOR = StateOwner("actor", ("acme/echo:echo", "b1", "u1"))
HOUR_MS = 3_600_000


async def _age(stores: HostStores, ms: int) -> None:
    """Pretend every stored value was last written *ms* earlier."""
    async with stores.engine.begin() as conn:
        await conn.execute(text("UPDATE state_entries SET updated_at = updated_at - :ms"), {"ms": ms})


async def _rows(stores: HostStores) -> int:
    async with stores.engine.connect() as conn:
        return int((await conn.execute(text("SELECT count(*) FROM state_entries"))).scalar_one())


async def test_a_scope_ttl_makes_old_values_unreadable_everywhere(stores: HostStores) -> None:
    """Past the conversation scope's TTL a value is gone from ``get``, ``list`` and the run snapshot; a scope
    without a rule keeps its values."""
    stores.state.ttl = StateTTL(scopes={"conversation": 3600})
    await stores.state.set(CONVERSATION, "k", "old", runner_id=None)
    await stores.state.set(ACTOR, "k", "kept", runner_id=None)
    await _age(stores, HOUR_MS - 60_000)
    assert (await stores.state.get(CONVERSATION, "k")) is not None
    await _age(stores, 120_000)
    assert await stores.state.get(CONVERSATION, "k") is None
    keys, more = await stores.state.list(CONVERSATION, limit=10)
    assert (keys, more) == ([], False)
    snapshot = await stores.state.snapshot({"conversation": CONVERSATION, "actor": ACTOR})
    assert snapshot == {"conversation": {}, "actor": {"k": "kept"}}
    actor = await stores.state.get(ACTOR, "k")
    assert actor is not None and actor.value == "kept"


async def test_key_rules_win_over_the_scope_exact_key_first_then_longest_prefix(stores: HostStores) -> None:
    """``external.session_id`` lives a minute, ``cache.*`` ten seconds, ``cache.long*`` a day, ``pinned``
    forever (0), other keys the scope's hour."""
    stores.state.ttl = StateTTL(
        scopes={"conversation": 3600},
        keys={"external.session_id": 60, "cache.*": 10, "cache.long*": 86400, "pinned": 0},
    )
    for key in ("external.session_id", "cache.a", "cache.long.b", "pinned", "other"):
        await stores.state.set(CONVERSATION, key, key, runner_id=None)
    await _age(stores, 30_000)
    alive = [k.key for k in (await stores.state.list(CONVERSATION, limit=10))[0]]
    assert alive == ["cache.long.b", "external.session_id", "other", "pinned"]
    await _age(stores, 60_000)
    alive = [k.key for k in (await stores.state.list(CONVERSATION, limit=10))[0]]
    assert alive == ["cache.long.b", "other", "pinned"]
    await _age(stores, 2 * HOUR_MS)
    alive = [k.key for k in (await stores.state.list(CONVERSATION, limit=10))[0]]
    assert alive == ["cache.long.b", "pinned"]
    assert stores.state.ttl.seconds("conversation", "pinned") is None
    assert stores.state.ttl.seconds("actor", "cache.x") == 10
    assert stores.state.ttl.seconds("actor", "other") is None


async def test_an_expired_key_counts_as_unset_for_compare_and_set(stores: HostStores) -> None:
    """A write after expiry starts the key afresh at version 1; ``expected_version=0`` (only if unset)
    succeeds, and the old version no longer matches."""
    stores.state.ttl = StateTTL(scopes={"conversation": 60})
    await stores.state.set(CONVERSATION, "k", 1, runner_id=None)
    await stores.state.set(CONVERSATION, "k", 2, runner_id=None)
    await _age(stores, 120_000)
    with pytest.raises(StateVersionConflict, match="state key 'k' is at version 0, not 2"):
        await stores.state.set(CONVERSATION, "k", 3, expected_version=2, runner_id=None)
    fresh = await stores.state.set(CONVERSATION, "k", 4, expected_version=0, runner_id=None)
    assert (fresh.version, fresh.value) == (1, 4)
    await _age(stores, 120_000)
    again = await stores.state.set(CONVERSATION, "k", 5, runner_id=None)
    assert again.version == 1


async def test_the_sweep_deletes_exactly_the_expired_values(stores: HostStores) -> None:
    """``sweep_expired`` removes the expired rows and nothing else; with no rule it removes nothing."""
    await stores.state.set(CONVERSATION, "a", 1, runner_id=None)
    await stores.state.set(CONVERSATION, "pinned", 1, runner_id=None)
    await stores.state.set(ACTOR, "b", 1, runner_id=None)
    await _age(stores, 2 * HOUR_MS)
    assert await stores.state.sweep_expired() == 0
    stores.state.ttl = StateTTL(scopes={"conversation": 3600}, keys={"pinned": 0})
    assert await stores.state.sweep_expired() == 1
    assert await _rows(stores) == 2
    assert await stores.state.get(CONVERSATION, "pinned") is not None
    assert await stores.state.sweep_expired() == 0
