"""SQLite point reads on the event loop (``stores._loop_reads``): ``state.get`` and the two reads an idle host
polls (requests waiting for it, the definitions' version) answer without a thread hop,
sees every commit at once (this process's and another's), and never waits for a lock: when SQLite would make
it wait, the read goes through the async path instead."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import aiosqlite.core
import pytest
from agentrunner_host.access import StateOwner
from agentrunner_host.stores import HostStores
from agentrunner_host.stores.state import owner_text

# SQLite only: PostgreSQL has no loop reads (its reads are network round trips through asyncpg)
pytestmark = pytest.mark.parametrize("engine", ["sqlite"], indirect=True)

OWNER = StateOwner("conversation", ("acme/echo:echo", "b1", "c1", ""))
OWNER_HASH = hashlib.sha256(owner_text(OWNER).encode()).hexdigest()
"""The owner's key column (the stores' SHA-256 of its canonical text)."""


def _sqlite_file(stores: HostStores) -> Path:
    assert stores.engine.dialect.name == "sqlite"
    database = stores.engine.url.database
    assert database is not None
    return Path(database)


async def test_state_get_on_sqlite_takes_no_aiosqlite_round_trip(
    stores: HostStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Values, versions and missing keys come from the loop's own connection: aiosqlite is not called."""
    _sqlite_file(stores)
    await stores.state.set(OWNER, "k", {"a": [1, 2]}, runner_id="r")
    await stores.state.set(OWNER, "k", {"a": [3]}, runner_id="r2")
    hops = 0
    original = aiosqlite.core.Connection._execute

    async def counting(self: aiosqlite.core.Connection, fn: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal hops
        hops += 1
        return await original(self, fn, *args, **kwargs)

    monkeypatch.setattr(aiosqlite.core.Connection, "_execute", counting)
    before = stores.loop_reads
    found = await stores.state.get(OWNER, "k")
    assert found is not None
    assert (found.key, found.value, found.version, found.runner_id) == ("k", {"a": [3]}, 2, "r2")
    assert found.created_at <= found.updated_at
    assert await stores.state.get(OWNER, "missing") is None
    assert hops == 0
    assert stores.loop_reads == before + 2


async def test_the_polls_of_an_idle_host_take_no_aiosqlite_round_trip(
    stores: HostStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``requests.has_pending`` and ``agents.version`` (polled four times and once a second on SQLite) are
    answered on the loop, and see what was committed before them."""
    _sqlite_file(stores)
    assert await stores.agents.version() == 0
    await stores.agents.replace(agents=[], bindings=[], expected_version=0)
    await stores.requests.ask("host_b", "cancel", run_id="run_1")
    hops = 0
    original = aiosqlite.core.Connection._execute

    async def counting(self: aiosqlite.core.Connection, fn: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal hops
        hops += 1
        return await original(self, fn, *args, **kwargs)

    monkeypatch.setattr(aiosqlite.core.Connection, "_execute", counting)
    before = stores.loop_reads
    assert await stores.agents.version() == 1
    assert await stores.requests.has_pending("host_b")
    assert not await stores.requests.has_pending("host_c")
    assert hops == 0
    assert stores.loop_reads == before + 3


async def test_a_loop_read_sees_another_connections_commit_at_once(stores: HostStores) -> None:
    """A value another process commits (here a plain sqlite3 connection) is read by the next ``get``."""
    path = _sqlite_file(stores)
    await stores.state.set(OWNER, "k", 1, runner_id=None)
    assert (await stores.state.get(OWNER, "k")) is not None
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute(
            "UPDATE state_entries SET value = '2', version = version + 1 WHERE owner_hash = ? AND key = ?",
            (OWNER_HASH, "k"),
        )
    finally:
        other.close()
    found = await stores.state.get(OWNER, "k")
    assert found is not None and (found.value, found.version) == (2, 2)


async def test_a_locked_database_is_read_through_the_async_path_not_waited_for_on_the_loop(
    stores: HostStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While another connection holds the database exclusively, the loop's read answers at once that it
    cannot (it has no busy timeout), and ``get`` reads through aiosqlite, which waits for the lock on its
    own thread and returns the value committed meanwhile."""
    path = _sqlite_file(stores)
    # before the stores open any connection: exclusive locking in WAL mode needs the file to itself
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute(
        "INSERT INTO state_entries (owner_hash, key, scope, owner, value, size, version, runner_id,"
        " created_at, updated_at) VALUES (?, 'k', 'conversation', ?, '\"after\"', 7, 1, NULL, 1, 1)",
        (OWNER_HASH, owner_text(OWNER)),
    )
    before = stores.loop_reads
    try:
        hopped = asyncio.Event()
        original = aiosqlite.core.Connection._execute

        async def signalling(self: aiosqlite.core.Connection, fn: Any, *args: Any, **kwargs: Any) -> Any:
            hopped.set()
            return await original(self, fn, *args, **kwargs)

        monkeypatch.setattr(aiosqlite.core.Connection, "_execute", signalling)
        reading = asyncio.create_task(stores.state.get(OWNER, "k"))
        await asyncio.wait_for(hopped.wait(), 60)
        holder.execute("COMMIT")
    finally:
        holder.close()  # an exclusive-mode connection holds its lock until it closes
    found = await asyncio.wait_for(reading, 60)
    assert found is not None and found.value == "after"
    assert stores.loop_reads == before  # the loop's read gave way: it answered nothing
    assert (await stores.state.get(OWNER, "k")) is not None and stores.loop_reads == before + 1
