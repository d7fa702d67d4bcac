"""State: atomic upserts, compare-and-set, size and JSON limits, owner encoding, listing, snapshots."""

from __future__ import annotations

import asyncio

import pytest
from agentrunner import MAX_STATE_VALUE_BYTES
from agentrunner_host.access import StateOwner
from agentrunner_host.stores import HostStores, InvalidValueError, StateVersionConflict, ValueTooLargeError

OWNER = StateOwner("conversation", ("acme/echo:echo", "b1", "c1", ""))


async def test_set_then_get_returns_the_value_with_version_one(stores: HostStores) -> None:
    """A first write creates version 1; ``get`` returns the value."""
    stored = await stores.state.set(OWNER, "k", {"a": [1, 2]}, runner_id="r")
    assert (stored.version, stored.value) == (1, {"a": [1, 2]})
    fetched = await stores.state.get(OWNER, "k")
    assert fetched is not None
    assert (fetched.value, fetched.version, fetched.runner_id) == ({"a": [1, 2]}, 1, "r")
    assert await stores.state.get(OWNER, "missing") is None


async def test_every_write_bumps_the_version(stores: HostStores) -> None:
    """Overwriting a key increments its version and replaces the value."""
    await stores.state.set(OWNER, "k", 1, runner_id=None)
    second = await stores.state.set(OWNER, "k", 2, runner_id=None)
    assert (second.version, second.value) == (2, 2)


async def test_concurrent_upserts_of_one_key_never_collide(stores: HostStores) -> None:
    """Thirty concurrent first writes of one key all succeed and leave version 30."""
    results = await asyncio.gather(*(stores.state.set(OWNER, "hot", n, runner_id=None) for n in range(30)))
    assert sorted(r.version for r in results) == list(range(1, 31))
    final = await stores.state.get(OWNER, "hot")
    assert final is not None and final.version == 30


async def test_compare_and_set_writes_only_at_the_expected_version(stores: HostStores) -> None:
    """``expected_version`` 0 creates only, n updates only at n; a mismatch raises with the current version."""
    created = await stores.state.set(OWNER, "k", "a", expected_version=0, runner_id=None)
    assert created.version == 1
    with pytest.raises(StateVersionConflict, match="state key 'k' is at version 1, not 0") as conflict:
        await stores.state.set(OWNER, "k", "b", expected_version=0, runner_id=None)
    assert (conflict.value.expected, conflict.value.current) == (0, 1)
    updated = await stores.state.set(OWNER, "k", "b", expected_version=1, runner_id=None)
    assert updated.version == 2
    with pytest.raises(StateVersionConflict, match="state key 'k' is at version 2, not 1") as stale:
        await stores.state.set(OWNER, "k", "c", expected_version=1, runner_id=None)
    assert stale.value.current == 2
    with pytest.raises(StateVersionConflict, match="state key 'absent' is at version 0, not 3"):
        await stores.state.set(OWNER, "absent", "x", expected_version=3, runner_id=None)
    fetched = await stores.state.get(OWNER, "k")
    assert fetched is not None and fetched.value == "b"


async def test_concurrent_compare_and_set_lets_exactly_one_writer_win(stores: HostStores) -> None:
    """Ten concurrent writers expecting version 1 produce one success and nine conflicts."""
    await stores.state.set(OWNER, "k", 0, runner_id=None)
    outcomes = await asyncio.gather(
        *(stores.state.set(OWNER, "k", n, expected_version=1, runner_id=None) for n in range(10)),
        return_exceptions=True,
    )
    assert sum(not isinstance(o, BaseException) for o in outcomes) == 1
    assert all(isinstance(o, StateVersionConflict) for o in outcomes if isinstance(o, BaseException))


async def test_values_over_256_kib_are_refused(stores: HostStores) -> None:
    """A value whose JSON encoding exceeds 256 KiB raises; one exactly at the limit is stored."""
    at_limit = "x" * (MAX_STATE_VALUE_BYTES - 2)
    await stores.state.set(OWNER, "big", at_limit, runner_id=None)
    with pytest.raises(
        ValueTooLargeError, match="state value is 262145 bytes; the limit is 262144 bytes"
    ) as too_big:
        await stores.state.set(OWNER, "bigger", at_limit + "x", runner_id=None)
    assert too_big.value.limit == MAX_STATE_VALUE_BYTES
    assert await stores.state.get(OWNER, "bigger") is None


@pytest.mark.parametrize(
    "value", [float("nan"), [float("inf")], {"x": -float("inf")}, {1: "int key"}, b"bytes"]
)
async def test_values_json_cannot_hold_are_refused(stores: HostStores, value: object) -> None:
    """NaN, Infinity, non-string keys and non-JSON types are refused instead of silently altered."""
    with pytest.raises(InvalidValueError, match=r"^state value (contains|has an object key)"):
        await stores.state.set(OWNER, "k", value, runner_id=None)


async def test_bad_keys_are_refused(stores: HostStores) -> None:
    """Empty keys and keys longer than 200 characters are refused."""
    for key in ("", "k" * 201):
        with pytest.raises(InvalidValueError, match="state keys are 1 to 200 characters"):
            await stores.state.set(OWNER, key, 1, runner_id=None)


async def test_owners_whose_joined_parts_look_alike_never_share_keys(stores: HostStores) -> None:
    """``("a:b",)`` and ``("a", "b")`` (and other joins) are distinct owners."""
    owners = [
        StateOwner("actor", ("a:b",)),
        StateOwner("actor", ("a", "b")),
        StateOwner("actor", ("a", "b", "")),
        StateOwner("actor", ('a","b',)),
        StateOwner("subject", ("a", "b")),
    ]
    for n, owner in enumerate(owners):
        await stores.state.set(owner, "k", n, runner_id=None)
    for n, owner in enumerate(owners):
        fetched = await stores.state.get(owner, "k")
        assert fetched is not None and (fetched.value, fetched.version) == (n, 1)


async def test_delete_removes_a_key_and_reports_whether_it_existed(stores: HostStores) -> None:
    """``delete`` is True once, then False; the key is gone and a new write starts at version 1."""
    await stores.state.set(OWNER, "k", 1, runner_id=None)
    assert await stores.state.delete(OWNER, "k") is True
    assert await stores.state.delete(OWNER, "k") is False
    assert await stores.state.get(OWNER, "k") is None
    again = await stores.state.set(OWNER, "k", 1, runner_id=None)
    assert again.version == 1


async def test_list_pages_keys_in_code_point_order(stores: HostStores) -> None:
    """Keys come in code-point order, ``after_key`` continues, ``has_more`` tells when to stop."""
    keys = ["b", "a", "B", "ä", "a/b", "Z", "aa"]
    for key in keys:
        await stores.state.set(OWNER, key, key, runner_id=None)
    first, more = await stores.state.list(OWNER, limit=4)
    assert ([k.key for k in first], more) == (sorted(keys)[:4], True)
    rest, more = await stores.state.list(OWNER, after_key=first[-1].key, limit=4)
    assert ([k.key for k in rest], more) == (sorted(keys)[4:], False)


async def test_list_matches_prefixes_literally(stores: HostStores) -> None:
    """``%`` and ``_`` in a prefix are ordinary characters and matching is case-sensitive."""
    for key in ("a%b", "a%c", "axb", "a_b", "aXb", "A%b"):
        await stores.state.set(OWNER, key, 1, runner_id=None)
    percent, _ = await stores.state.list(OWNER, prefix="a%", limit=10)
    underscore, _ = await stores.state.list(OWNER, prefix="a_", limit=10)
    lower, _ = await stores.state.list(OWNER, prefix="ax", limit=10)
    assert [k.key for k in percent] == ["a%b", "a%c"]
    assert [k.key for k in underscore] == ["a_b"]
    assert [k.key for k in lower] == ["axb"]


async def test_snapshot_is_bounded_by_keys_and_bytes(stores: HostStores) -> None:
    """The snapshot keeps at most ``max_keys_per_scope`` keys per scope and ``max_bytes`` of values overall."""
    other = StateOwner("runner", ("acme/echo:echo", "b1"))
    for n in range(10):
        await stores.state.set(OWNER, f"k{n}", "v" * 100, runner_id=None)
    await stores.state.set(other, "huge", "x" * 5000, runner_id=None)
    await stores.state.set(other, "small", 1, runner_id=None)
    snap = await stores.state.snapshot(
        {"conversation": OWNER, "runner": other}, max_keys_per_scope=4, max_bytes=1000
    )
    assert list(snap["conversation"]) == ["k0", "k1", "k2", "k3"]
    assert snap["runner"] == {"small": 1}
    empty = await stores.state.snapshot({"workspace": StateOwner("workspace", ("w",))})
    assert empty == {"workspace": {}}
