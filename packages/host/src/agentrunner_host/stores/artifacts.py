"""Artifacts: bytes on the filesystem, metadata in the database.

Files live under ``<data_dir>/artifacts/<2 hex>/<artifact id>``. The id is random and chosen by the host, so
no caller input ever becomes part of a path. Bytes are streamed to a temporary file while the host measures
their size and SHA-256, flushed to disk, then renamed into place and only then recorded; a put that fails or
goes over ``max_size`` leaves nothing behind. ``expires_at`` is checked on every read, and
:meth:`ArtifactStore.sweep_expired` deletes expired rows and then their files.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final, cast

from agentrunner import ArtifactMetadata
from sqlalchemy import RowMapping, Table, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from agentrunner_host.stores._connections import Database, now_ms
from agentrunner_host.stores.tables import ArtifactRow

from .errors import ArtifactUnavailableError, InvalidValueError, ValueTooLargeError

__all__ = [
    "DEFAULT_ARTIFACT_MAX_BYTES",
    "ArtifactOwner",
    "ArtifactRecord",
    "ArtifactStore",
]

DEFAULT_ARTIFACT_MAX_BYTES: Final = 64 * 1024 * 1024
"""Default cap of one artifact."""

ARTIFACTS: Final = cast(Table, ArtifactRow.__table__)
_ID_PATTERN: Final = re.compile(r"art_[0-9a-f]{32}")
_WRITE_BUFFER: Final = 1024 * 1024
_SWEEP_BATCH: Final = 500
_STALE_PART_MS: Final = 3_600_000


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactOwner:
    """Who an artifact belongs to (what the pull APIs check before serving it)."""

    conversation_id: str | None = None
    """Owning conversation."""
    run_id: str | None = None
    """Owning run."""
    binding_id: str | None = None
    """Owning binding."""
    workspace_id: str | None = None
    """Owning workspace."""


@dataclass(frozen=True, kw_only=True)
class ArtifactRecord:
    """A stored artifact's metadata (``storage_name`` is host-internal and relative)."""

    artifact_id: str
    """Id."""
    artifact_type: str
    """Coarse kind."""
    mime_type: str | None
    """MIME type."""
    name: str | None
    """Display name."""
    size: int
    """Bytes, as measured by the host."""
    sha256: str
    """Hex digest, as computed by the host."""
    source: str
    """Producer kind."""
    owner: ArtifactOwner
    """Owner scope."""
    summary: str | None = None
    """Short text summary."""
    created_at: int
    """Unix epoch milliseconds."""
    expires_at: int | None = None
    """Unix epoch milliseconds; ``None`` = never."""
    metadata: dict[str, Any] = field(default_factory=dict[str, Any])
    """Descriptive metadata."""
    storage_name: str
    """File name relative to the artifact directory."""

    def expired(self, now: int | None = None) -> bool:
        """True once ``expires_at`` has passed."""
        return self.expires_at is not None and (now_ms() if now is None else now) >= self.expires_at


def _display_name(name: str | None) -> str | None:
    if name is None:
        return None
    # a display name only: keep the last path segment, drop control characters
    base = re.split(r"[\\/]", name)[-1]
    cleaned = "".join(ch for ch in base if ch.isprintable())
    return cleaned[:255] or None


def _from_row(m: RowMapping) -> ArtifactRecord:
    return ArtifactRecord(
        artifact_id=m["artifact_id"],
        artifact_type=m["artifact_type"],
        mime_type=m["mime_type"],
        name=m["name"],
        size=m["size"],
        sha256=m["sha256"],
        source=m["source"],
        owner=ArtifactOwner(
            conversation_id=m["conversation_id"],
            run_id=m["run_id"],
            binding_id=m["binding_id"],
            workspace_id=m["workspace_id"],
        ),
        summary=m["summary"],
        created_at=m["created_at"],
        expires_at=m["expires_at"],
        metadata=m["metadata"],
        storage_name=m["storage_name"],
    )


class ArtifactStore:
    """Artifact bytes and metadata (``stores.artifacts``)."""

    def __init__(self, db: Database, *, root: Path) -> None:
        self._db = db
        self.root = root
        """Directory holding the files (``<data_dir>/artifacts``)."""
        self._tmp = root / ".tmp"

    async def prepare(self) -> None:
        """Create the directories."""
        await asyncio.to_thread(self._tmp.mkdir, parents=True, exist_ok=True)

    def _path(self, storage_name: str) -> Path:
        # storage names are written by this class only; refuse anything else as a second line of defence
        if not re.fullmatch(r"[0-9a-f]{2}/art_[0-9a-f]{32}", storage_name):
            raise ArtifactUnavailableError("artifact storage name is malformed")
        return self.root / storage_name

    async def put(
        self,
        data: bytes | AsyncIterator[bytes],
        *,
        mime_type: str | None,
        name: str | None,
        artifact_type: str = "file",
        source: str,
        owner: ArtifactOwner,
        expires_at: int | None = None,
        metadata: dict[str, Any] | None = None,
        max_size: int = DEFAULT_ARTIFACT_MAX_BYTES,
        summary: str | None = None,
    ) -> ArtifactRecord:
        """Store bytes and return the record; raises :class:`ValueTooLargeError` past *max_size* (nothing is
        kept) and :class:`InvalidValueError` for metadata that is not JSON."""
        if metadata is not None and not isinstance(metadata, dict):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise InvalidValueError("artifact metadata must be a JSON object")
        artifact_id = "art_" + secrets.token_hex(16)
        storage_name = f"{artifact_id[4:6]}/{artifact_id}"
        final = self._path(storage_name)
        tmp = self._tmp / f"{artifact_id}.part"
        await asyncio.to_thread(self._tmp.mkdir, parents=True, exist_ok=True)
        hasher = hashlib.sha256()
        size = 0
        handle: BinaryIO = await asyncio.to_thread(_open_exclusive, tmp)
        try:
            if isinstance(data, bytes | bytearray | memoryview):
                size = len(data)
                if size > max_size:
                    raise ValueTooLargeError("artifact", size=size, limit=max_size)
                hasher.update(data)
                await asyncio.to_thread(handle.write, data)
            else:
                buffer = bytearray()
                async for chunk in data:
                    size += len(chunk)
                    if size > max_size:
                        raise ValueTooLargeError("artifact", size=size, limit=max_size)
                    hasher.update(chunk)
                    buffer += chunk
                    if len(buffer) >= _WRITE_BUFFER:
                        await asyncio.to_thread(handle.write, bytes(buffer))
                        buffer.clear()
                if buffer:
                    await asyncio.to_thread(handle.write, bytes(buffer))
            await asyncio.to_thread(_seal, handle)
            await asyncio.to_thread(_move, tmp, final)
        except BaseException:
            await asyncio.to_thread(_discard, handle, tmp)
            raise
        now = now_ms()
        record = ArtifactRecord(
            artifact_id=artifact_id,
            artifact_type=artifact_type,
            mime_type=mime_type,
            name=_display_name(name),
            size=size,
            sha256=hasher.hexdigest(),
            source=source,
            owner=owner,
            summary=summary,
            created_at=now,
            expires_at=expires_at,
            metadata=dict(metadata or {}),
            storage_name=storage_name,
        )

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(
                insert(ARTIFACTS).values(
                    artifact_id=record.artifact_id,
                    storage_name=record.storage_name,
                    artifact_type=record.artifact_type,
                    mime_type=record.mime_type,
                    name=record.name,
                    size=record.size,
                    sha256=record.sha256,
                    source=record.source,
                    summary=record.summary,
                    conversation_id=owner.conversation_id,
                    run_id=owner.run_id,
                    binding_id=owner.binding_id,
                    workspace_id=owner.workspace_id,
                    metadata=record.metadata,
                    created_at=record.created_at,
                    expires_at=record.expires_at,
                )
            )

        try:
            await self._db.transact(work)
        except BaseException:
            await asyncio.to_thread(final.unlink, missing_ok=True)
            raise
        return record

    async def get(self, artifact_id: str, *, now: int | None = None) -> ArtifactRecord | None:
        """The artifact, or ``None`` when it is unknown or expired."""
        if not _ID_PATTERN.fullmatch(artifact_id):
            return None
        async with self._db.read() as conn:
            row = (
                (await conn.execute(select(ARTIFACTS).where(ARTIFACTS.c.artifact_id == artifact_id)))
                .mappings()
                .first()
            )
        if row is None:
            return None
        record = _from_row(row)
        return None if record.expired(now) else record

    async def read_range(self, record: ArtifactRecord, offset: int, length: int) -> bytes:
        """Up to *length* bytes from *offset* (fewer at the end; empty past it). The caller caps *length*.

        Raises :class:`ArtifactUnavailableError` when the artifact has expired or its file is gone.
        """
        if offset < 0 or length < 0:
            raise InvalidValueError("offset and length must not be negative")
        if record.expired():
            raise ArtifactUnavailableError(f"artifact {record.artifact_id} has expired")
        if length == 0 or offset >= record.size:
            return b""
        path = self._path(record.storage_name)
        return await asyncio.to_thread(_read_at, path, offset, min(length, record.size - offset))

    async def stream(self, record: ArtifactRecord, *, chunk_size: int = 256 * 1024) -> AsyncIterator[bytes]:
        """The bytes in chunks of *chunk_size* (expiry is checked before the first chunk)."""
        if chunk_size <= 0:
            raise InvalidValueError("chunk_size must be positive")
        if record.expired():
            raise ArtifactUnavailableError(f"artifact {record.artifact_id} has expired")
        path = self._path(record.storage_name)
        try:
            handle: BinaryIO = await asyncio.to_thread(path.open, "rb")
        except FileNotFoundError as exc:
            raise ArtifactUnavailableError(f"artifact {record.artifact_id} has no bytes") from exc
        try:
            while True:
                chunk = await asyncio.to_thread(handle.read, chunk_size)
                if not chunk:
                    return
                yield chunk
        finally:
            await asyncio.to_thread(handle.close)

    def to_metadata(self, record: ArtifactRecord) -> ArtifactMetadata:
        """What a run may be told about the artifact (never a host path)."""
        return ArtifactMetadata(
            artifact_id=record.artifact_id,
            artifact_type=record.artifact_type,
            mime_type=record.mime_type,
            name=record.name,
            size=record.size,
            digest=f"sha256:{record.sha256}",
            summary=record.summary,
            expires_at=record.expires_at,
            metadata=record.metadata,
            source=record.source,
            conversation_id=record.owner.conversation_id,
            run_id=record.owner.run_id,
            created_at=record.created_at,
        )

    async def sweep_expired(self, now: int | None = None) -> int:
        """Delete every artifact expired at *now* (rows first, then files); returns how many. Also removes
        partial uploads an interrupted host left in the temporary directory for over an hour."""
        cutoff = now_ms() if now is None else now
        await asyncio.to_thread(_remove_stale_parts, self._tmp, cutoff - _STALE_PART_MS)
        removed = 0
        while True:

            async def work(conn: AsyncConnection) -> list[str]:
                rows = (
                    await conn.execute(
                        select(ARTIFACTS.c.artifact_id, ARTIFACTS.c.storage_name)
                        .where(ARTIFACTS.c.expires_at.is_not(None), ARTIFACTS.c.expires_at <= cutoff)
                        .limit(_SWEEP_BATCH)
                    )
                ).all()
                if rows:
                    await conn.execute(
                        delete(ARTIFACTS).where(ARTIFACTS.c.artifact_id.in_([r[0] for r in rows]))
                    )
                return [r[1] for r in rows]

            names = await self._db.transact(work)
            for storage_name in names:
                await asyncio.to_thread(self._path(storage_name).unlink, missing_ok=True)
            removed += len(names)
            if len(names) < _SWEEP_BATCH:
                return removed


def _open_exclusive(path: Path) -> BinaryIO:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    return os.fdopen(fd, "wb")


def _seal(handle: BinaryIO) -> None:
    handle.flush()
    os.fsync(handle.fileno())
    handle.close()


def _move(tmp: Path, final: Path) -> None:
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, final)


def _discard(handle: BinaryIO, tmp: Path) -> None:
    handle.close()
    tmp.unlink(missing_ok=True)


def _remove_stale_parts(directory: Path, older_than_ms: int) -> None:
    if not directory.is_dir():
        return
    for part in directory.glob("*.part"):
        try:
            if part.stat().st_mtime * 1000 < older_than_ms:
                part.unlink(missing_ok=True)
        except FileNotFoundError:
            continue


def _read_at(path: Path, offset: int, length: int) -> bytes:
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            return handle.read(length)
    except FileNotFoundError as exc:
        raise ArtifactUnavailableError("artifact bytes are missing") from exc
