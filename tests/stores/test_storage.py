"""Storage areas: byte values, size cap, listing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agentrunner_host.access import StorageOwner
from agentrunner_host.stores import (
    DEFAULT_STORAGE_MAX_BYTES,
    HostStores,
    InvalidValueError,
    ValueTooLargeError,
)
from sqlalchemy.ext.asyncio import AsyncEngine

PLUGIN = StorageOwner("plugin", "acme/echo")


async def test_bytes_round_trip_and_overwrite(stores: HostStores) -> None:
    """``set`` stores bytes exactly (including NUL and non-UTF-8), a second ``set`` replaces them."""
    await stores.storage.set(PLUGIN, "k", b"\x00\xff\xfe raw")
    fetched = await stores.storage.get(PLUGIN, "k")
    assert fetched is not None and fetched.value == b"\x00\xff\xfe raw"
    await stores.storage.set(PLUGIN, "k", b"new")
    again = await stores.storage.get(PLUGIN, "k")
    assert again is not None and again.value == b"new"
    assert again.created_at <= again.updated_at


async def test_areas_and_owners_are_separate(stores: HostStores) -> None:
    """The same key in another area or of another owner is another value."""
    await stores.storage.set(PLUGIN, "k", b"plugin")
    await stores.storage.set(StorageOwner("workspace", "acme/echo"), "k", b"workspace")
    await stores.storage.set(StorageOwner("plugin", "other/plugin"), "k", b"other")
    fetched = await stores.storage.get(PLUGIN, "k")
    assert fetched is not None and fetched.value == b"plugin"


async def test_values_over_the_cap_are_refused(stores: HostStores) -> None:
    """The default cap is 1 MiB: exactly 1 MiB is stored, one byte more raises."""
    await stores.storage.set(PLUGIN, "max", b"x" * DEFAULT_STORAGE_MAX_BYTES)
    with pytest.raises(
        ValueTooLargeError, match="storage value is 1048577 bytes; the limit is 1048576 bytes"
    ):
        await stores.storage.set(PLUGIN, "over", b"x" * (DEFAULT_STORAGE_MAX_BYTES + 1))
    assert await stores.storage.get(PLUGIN, "over") is None


async def test_the_cap_is_configurable(engine: AsyncEngine, tmp_path: Path) -> None:
    """``storage_max_value_bytes`` changes the cap."""
    small = await HostStores.open(engine, data_dir=tmp_path, storage_max_value_bytes=10)
    try:
        await small.storage.set(PLUGIN, "ok", b"0123456789")
        with pytest.raises(ValueTooLargeError, match="storage value is 11 bytes; the limit is 10 bytes"):
            await small.storage.set(PLUGIN, "no", b"0123456789a")
    finally:
        await small.aclose()


async def test_unknown_areas_and_bad_keys_are_refused(stores: HostStores) -> None:
    """Only plugin/workspace/binding areas and 1..200 character keys are accepted."""
    with pytest.raises(InvalidValueError, match="unknown storage area 'global'"):
        await stores.storage.set(StorageOwner("global", "x"), "k", b"")
    with pytest.raises(InvalidValueError, match="storage keys are 1 to 200 characters"):
        await stores.storage.set(PLUGIN, "k" * 201, b"")


async def test_delete_reports_whether_the_key_existed(stores: HostStores) -> None:
    """``delete`` is True once, then False."""
    await stores.storage.set(PLUGIN, "k", b"v")
    assert await stores.storage.delete(PLUGIN, "k") is True
    assert await stores.storage.delete(PLUGIN, "k") is False
    assert await stores.storage.get(PLUGIN, "k") is None


async def test_list_pages_by_literal_prefix(stores: HostStores) -> None:
    """Listing walks keys in order after a key, with a literal prefix."""
    for key in ("cache/1", "cache/2", "cache/3", "cache_x", "other"):
        await stores.storage.set(PLUGIN, key, key.encode())
    first, more = await stores.storage.list(PLUGIN, prefix="cache/", limit=2)
    assert ([k.key for k in first], more) == (["cache/1", "cache/2"], True)
    rest, more = await stores.storage.list(PLUGIN, prefix="cache/", after_key="cache/2", limit=2)
    assert ([k.key for k in rest], more) == (["cache/3"], False)
    assert rest[0].size == len(b"cache/3")


async def test_concurrent_writes_of_one_key_never_collide(stores: HostStores) -> None:
    """Concurrent upserts of one key all succeed; one of the values remains."""
    await asyncio.gather(*(stores.storage.set(PLUGIN, "hot", bytes([n])) for n in range(20)))
    fetched = await stores.storage.get(PLUGIN, "hot")
    assert fetched is not None and len(fetched.value) == 1
