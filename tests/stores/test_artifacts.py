"""Artifacts: host-measured bytes on disk, host-chosen names, size limit, expiry and sweeping."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agentrunner_host.stores import ArtifactOwner, ArtifactUnavailableError, HostStores, ValueTooLargeError
from agentrunner_host.stores._connections import now_ms

OWNER = ArtifactOwner(conversation_id="c1", run_id="r1", binding_id="b1", workspace_id="w1")


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


async def test_put_measures_size_and_digest_and_reads_back(stores: HostStores) -> None:
    """The host computes size and sha256 while writing; ranges and streams return the same bytes."""
    data = os.urandom(300_000)
    record = await stores.artifacts.put(
        data, mime_type="image/png", name="cat.png", source="runner", owner=OWNER
    )
    assert (record.size, record.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    fetched = await stores.artifacts.get(record.artifact_id)
    assert fetched == record
    assert await stores.artifacts.read_range(record, 1000, 50) == data[1000:1050]
    assert await stores.artifacts.read_range(record, len(data) - 10, 100) == data[-10:]
    assert await stores.artifacts.read_range(record, len(data), 100) == b""
    streamed = b"".join([c async for c in stores.artifacts.stream(record, chunk_size=65536)])
    assert streamed == data


async def test_put_accepts_an_async_stream(stores: HostStores) -> None:
    """An async iterator of chunks is stored as their concatenation."""
    record = await stores.artifacts.put(
        _chunks(b"ab", b"", b"cd" * 1000), mime_type=None, name=None, source="tool", owner=OWNER
    )
    assert record.size == 2002
    assert await stores.artifacts.read_range(record, 0, 4) == b"abcd"


async def test_max_size_is_enforced_and_leaves_nothing_behind(stores: HostStores) -> None:
    """Going over ``max_size`` (bytes or stream) raises and leaves no file and no row."""
    with pytest.raises(ValueTooLargeError, match="artifact is 11 bytes; the limit is 10 bytes"):
        await stores.artifacts.put(
            b"x" * 11, mime_type=None, name=None, source="runner", owner=OWNER, max_size=10
        )
    with pytest.raises(ValueTooLargeError, match="artifact is 12 bytes; the limit is 10 bytes"):
        await stores.artifacts.put(
            _chunks(b"x" * 6, b"y" * 6), mime_type=None, name=None, source="runner", owner=OWNER, max_size=10
        )
    assert _files(stores.artifacts.root) == []
    ok = await stores.artifacts.put(
        b"x" * 10, mime_type=None, name=None, source="runner", owner=OWNER, max_size=10
    )
    assert ok.size == 10


@pytest.mark.parametrize(
    "name", ["../../etc/passwd", "/abs/path.txt", "..\\..\\win.ini", "a/../../b", "\x00evil\n"]
)
async def test_names_never_reach_the_filesystem(stores: HostStores, name: str) -> None:
    """Whatever the display name, the file lands under the artifact root with a host-chosen name."""
    record = await stores.artifacts.put(b"data", mime_type=None, name=name, source="platform", owner=OWNER)
    (path,) = _files(stores.artifacts.root)
    assert path.resolve().is_relative_to(stores.artifacts.root.resolve())
    assert path.name == record.artifact_id
    assert record.name is None or (
        "/" not in record.name and "\\" not in record.name and "\x00" not in record.name
    )


async def test_unknown_and_malformed_ids_are_not_found(stores: HostStores) -> None:
    """``get`` of an unknown id, or of a path-like id, returns None."""
    assert await stores.artifacts.get("art_" + "0" * 32) is None
    assert await stores.artifacts.get("../../etc/passwd") is None


async def test_expired_artifacts_are_not_found_and_are_swept(stores: HostStores) -> None:
    """Past ``expires_at`` an artifact is not found, cannot be read, and the sweep deletes row and file."""
    now = now_ms()
    expired = await stores.artifacts.put(
        b"old", mime_type=None, name=None, source="host", owner=OWNER, expires_at=now - 1
    )
    fresh = await stores.artifacts.put(
        b"new", mime_type=None, name=None, source="host", owner=OWNER, expires_at=now + 3_600_000
    )
    forever = await stores.artifacts.put(b"keep", mime_type=None, name=None, source="host", owner=OWNER)
    assert await stores.artifacts.get(expired.artifact_id) is None
    with pytest.raises(ArtifactUnavailableError, match="has expired"):
        await stores.artifacts.read_range(expired, 0, 3)
    with pytest.raises(ArtifactUnavailableError, match="has expired"):
        _ = [c async for c in stores.artifacts.stream(expired)]
    assert await stores.artifacts.get(fresh.artifact_id, now=now + 3_600_000) is None
    assert len(_files(stores.artifacts.root)) == 3
    assert await stores.artifacts.sweep_expired(now) == 1
    assert {p.name for p in _files(stores.artifacts.root)} == {fresh.artifact_id, forever.artifact_id}
    assert await stores.artifacts.sweep_expired(now + 3_600_000) == 1
    assert await stores.artifacts.get(forever.artifact_id) == forever


async def test_metadata_never_exposes_a_host_path(stores: HostStores) -> None:
    """``to_metadata`` carries the digest, size and owner but no file path."""
    record = await stores.artifacts.put(
        b"abc",
        mime_type="text/plain",
        name="a.txt",
        source="tool",
        owner=OWNER,
        metadata={"lang": "en"},
        summary="s",
    )
    meta = stores.artifacts.to_metadata(record)
    assert meta.digest == "sha256:" + hashlib.sha256(b"abc").hexdigest()
    assert (meta.size, meta.conversation_id, meta.run_id, meta.summary) == (3, "c1", "r1", "s")
    dumped = meta.model_dump_json()
    assert record.storage_name not in dumped
    assert str(stores.artifacts.root) not in dumped


async def test_missing_bytes_are_reported_as_unavailable(stores: HostStores) -> None:
    """If the file vanished, reads raise ``ArtifactUnavailableError`` instead of an OS error."""
    record = await stores.artifacts.put(b"abc", mime_type=None, name=None, source="tool", owner=OWNER)
    (stores.artifacts.root / record.storage_name).unlink()
    with pytest.raises(ArtifactUnavailableError, match="artifact bytes are missing"):
        await stores.artifacts.read_range(record, 0, 3)
    with pytest.raises(ArtifactUnavailableError, match="has no bytes"):
        _ = [c async for c in stores.artifacts.stream(record)]


async def test_the_sweep_removes_stale_partial_uploads(stores: HostStores) -> None:
    """Partial files older than an hour (an interrupted put) are removed; fresh ones are left alone."""
    tmp = stores.artifacts.root / ".tmp"
    stale, fresh = tmp / "art_stale.part", tmp / "art_fresh.part"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"y")
    hour_ago = time.time() - 3700
    os.utime(stale, (hour_ago, hour_ago))
    await stores.artifacts.sweep_expired()
    assert not stale.exists()
    assert fresh.exists()
