"""Runner state: small JSON values per owner and key, with a version per key for compare-and-set.

An owner is a :class:`~agentrunner_host.access.StateOwner`: a scope and a tuple of parts, stored as the
canonical JSON array ``[scope, *parts]`` (so ``("a:b",)`` and ``("a", "b")`` can never meet) plus its SHA-256
for the primary key. Writes are single statements (``INSERT ... ON CONFLICT DO UPDATE``, conditional
``UPDATE``), so concurrent writers never trip over a unique constraint.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

from agentrunner import MAX_STATE_VALUE_BYTES, codec
from sqlalchemy import (
    ColumnElement,
    RowMapping,
    Select,
    Table,
    and_,
    bindparam,
    case,
    delete,
    func,
    literal,
    not_,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from agentrunner_host.access import StateOwner
from agentrunner_host.stores._connections import Database, now_ms
from agentrunner_host.stores.tables import StateRow

from ._compiled import hot
from ._loop_reads import PointRead
from ._sql import canonical, digest, insert_for
from .errors import InvalidValueError, StateVersionConflict, ValueTooLargeError

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_STATE_KEY_CHARS",
    "SNAPSHOT_SIZE_ROWS",
    "SNAPSHOT_SIZE_ROWS_OF_ONE",
    "StateItem",
    "StateKey",
    "StateStore",
    "StateTTL",
    "StateWrite",
    "apply_state_writes",
    "encode_state_value",
    "owner_text",
    "snapshot_owners",
    "snapshot_values",
]

MAX_STATE_KEY_CHARS: Final = 200
"""Longest key."""
MAX_JSON_DEPTH: Final = 64
"""Deepest nesting a value may have."""

STATE: Final = cast(Table, StateRow.__table__)

# The snapshot's statements are built once with bound parameters: building a windowed select per run cost more
# CPU than executing it, and a prebuilt statement also hits SQLAlchemy's compiled cache by identity.
_RANKED: Final = (
    select(
        STATE.c.owner_hash,
        STATE.c.key,
        STATE.c.size,
        func.row_number().over(partition_by=STATE.c.owner_hash, order_by=STATE.c.key).label("rank"),
    )
    .where(STATE.c.owner_hash.in_(bindparam("owners", expanding=True)))
    .subquery()
)
SNAPSHOT_SIZE_ROWS: Final = select(_RANKED.c.owner_hash, _RANKED.c.key, _RANKED.c.size).where(
    _RANKED.c.rank <= bindparam("per_scope")
)
"""The snapshot's candidate keys (at most ``per_scope`` per owner, by key) and their sizes, unordered, with no
lifetime rule (parameters ``owners``, ``per_scope``): a run's start folds it into its one read."""
SNAPSHOT_SIZE_ROWS_OF_ONE: Final = (
    select(STATE.c.owner_hash, STATE.c.key, STATE.c.size)
    .where(STATE.c.owner_hash == bindparam("owner"))
    .order_by(STATE.c.key)
    .limit(bindparam("per_scope"))
)
""":data:`SNAPSHOT_SIZE_ROWS` of one owner (parameters ``owner``, ``per_scope``): its first keys straight from
the primary key's order, without the window over each owner's keys (the start's read with the window took
18.5 µs with cold caches, 15.2 µs without it, both written by hand)."""
SNAPSHOT_KEYS_PER_SCOPE: Final = 64
"""Keys a snapshot inlines per scope at most."""
SNAPSHOT_MAX_BYTES: Final = 64 * 1024
"""Bytes of values a snapshot inlines at most."""
_SNAPSHOT_SIZES: Final = hot(SNAPSHOT_SIZE_ROWS.order_by(_RANKED.c.owner_hash, _RANKED.c.key))


def _snapshot_sizes(alive: ColumnElement[bool]) -> Select[str, str, int]:
    """:data:`_SNAPSHOT_SIZES` over the rows *alive* selects (the keys not expired)."""
    ranked = (
        select(
            STATE.c.owner_hash,
            STATE.c.key,
            STATE.c.size,
            func.row_number().over(partition_by=STATE.c.owner_hash, order_by=STATE.c.key).label("rank"),
        )
        .where(STATE.c.owner_hash.in_(bindparam("owners", expanding=True)), alive)
        .subquery()
    )
    return (
        select(ranked.c.owner_hash, ranked.c.key, ranked.c.size)
        .where(ranked.c.rank <= bindparam("per_scope"))
        .order_by(ranked.c.owner_hash, ranked.c.key)
    )


_GET_COLUMNS: Final = (
    STATE.c.key,
    STATE.c.value,
    STATE.c.version,
    STATE.c.runner_id,
    STATE.c.created_at,
    STATE.c.updated_at,
)
_GetRow = tuple[str, str, int, str | None, int, int]
"""A row of :data:`_GET_ON_LOOP`, in its column order."""
_GET_ON_LOOP: Final = PointRead.of(
    select(*_GET_COLUMNS).where(
        STATE.c.owner_hash == bindparam("owner_hash"), STATE.c.key == bindparam("key")
    )
)
"""``get``'s primary-key read on the loop (see :mod:`._loop_reads`); its lifetime rule is applied in Python."""

_SNAPSHOT_VALUES: Final = hot(
    select(STATE.c.key, STATE.c.value).where(
        STATE.c.owner_hash == bindparam("owner"), STATE.c.key.in_(bindparam("keys", expanding=True))
    )
)


@dataclass(frozen=True, kw_only=True)
class StateItem:
    """A stored state value."""

    owner: StateOwner
    """Owner."""
    key: str
    """Key."""
    value: Any
    """JSON value."""
    version: int
    """Version (1 after the first write)."""
    runner_id: str | None
    """Last writer."""
    created_at: int
    """First write, Unix epoch milliseconds."""
    updated_at: int
    """Last write, Unix epoch milliseconds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StateKey:
    """A key of a listing (values are not loaded)."""

    key: str
    """Key."""
    version: int
    """Version."""
    size: int
    """Encoded size in bytes."""
    updated_at: int
    """Last write, Unix epoch milliseconds."""


def owner_text(owner: StateOwner) -> str:
    """The canonical text of an owner."""
    return canonical([owner.scope, *owner.parts])


@functools.lru_cache(maxsize=4096)
def _owner_hash(owner: StateOwner) -> str:
    # a binding's runs ask for the same few owners at every start: a look-up instead of a dump and a hash
    return digest(owner_text(owner))


def snapshot_owners(owners: Mapping[str, StateOwner]) -> dict[str, str]:
    """The owner hash of each scope of a snapshot (hash → scope name), in the caller's order."""
    return {_owner_hash(owner): name for name, owner in owners.items()}


def _check_json(value: Any, depth: int = 0) -> None:
    if depth > MAX_JSON_DEPTH:
        raise InvalidValueError(f"state value is nested deeper than {MAX_JSON_DEPTH} levels")
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidValueError("state value contains NaN or Infinity, which JSON cannot hold")
        return
    if isinstance(value, list):
        for item in cast(list[Any], value):
            _check_json(item, depth + 1)
        return
    if isinstance(value, dict):
        for key, item in cast(dict[Any, Any], value).items():
            if not isinstance(key, str):
                raise InvalidValueError("state value has an object key that is not a string")
            _check_json(item, depth + 1)
        return
    raise InvalidValueError(f"state value contains a {type(value).__name__}, which is not JSON")


def encode_state_value(value: Any, *, limit: int = MAX_STATE_VALUE_BYTES) -> str:
    """The JSON text of *value*; raises :class:`InvalidValueError` (not JSON, NaN/Infinity) or
    :class:`ValueTooLargeError` (over *limit* bytes encoded)."""
    _check_json(value)
    encoded = codec.dumps(value)
    if len(encoded) > limit:
        raise ValueTooLargeError("state value", size=len(encoded), limit=limit)
    return encoded.decode()


def _check_key(key: str) -> None:
    if not key or len(key) > MAX_STATE_KEY_CHARS:
        raise InvalidValueError(f"state keys are 1 to {MAX_STATE_KEY_CHARS} characters")


def prefix_filter(column: Any, prefix: str) -> list[Any]:
    """Conditions selecting keys that start with *prefix*, literally: a range bound the index can use and
    an exact ``substr`` comparison (no ``LIKE``, so ``%`` and ``_`` are ordinary characters)."""
    return [column >= prefix, func.substr(column, 1, len(prefix)) == prefix]


@dataclass(frozen=True, slots=True, kw_only=True)
class StateTTL:
    """How long state values live after their last write, per scope and per key (``[state]``).

    A key rule wins over a scope rule: an exact key first, then the longest ``prefix*``. ``0`` seconds means
    never expires (a key kept under an expiring scope). The lifetime is counted from the value's last write and
    applied when it is read, so a changed rule takes effect for stored values at once; an expired value is
    unreadable (``get``, ``list`` and the run context's snapshot skip it, a compare-and-set sees the key unset)
    and :meth:`StateStore.sweep_expired` deletes it."""

    scopes: Mapping[str, float] = field(default_factory=dict[str, float])
    """Scope (``conversation``, ``actor``, ...) → seconds."""
    keys: Mapping[str, float] = field(default_factory=dict[str, float])
    """Key, or key prefix ending in ``*`` → seconds."""

    def __bool__(self) -> bool:
        return bool(self.scopes or self.keys)

    def _key_rules(self) -> list[tuple[str, bool, float]]:
        """(key or prefix, is_prefix, seconds), most specific first: exact keys, then longer prefixes."""
        exact = [(k, False, t) for k, t in self.keys.items() if not k.endswith("*")]
        prefixes = [(k[:-1], True, t) for k, t in self.keys.items() if k.endswith("*")]
        prefixes.sort(key=lambda rule: len(rule[0]), reverse=True)
        return exact + prefixes

    def seconds(self, scope: str, key: str) -> float | None:
        """The lifetime of *key* in *scope* (``None``: forever)."""
        for rule, is_prefix, ttl in self._key_rules():
            if key.startswith(rule) if is_prefix else key == rule:
                return ttl or None
        ttl = self.scopes.get(scope)
        return ttl or None

    def alive(self, now: int) -> ColumnElement[bool] | None:
        """A condition true for rows not expired at *now* (epoch ms); ``None`` when nothing expires."""
        if not self:
            return None

        def cutoff(ttl: float) -> int:
            return now - int(ttl * 1000) if ttl else -1  # updated_at > -1: never expires

        whens: list[tuple[ColumnElement[bool], int]] = []
        for rule, is_prefix, ttl in self._key_rules():
            match = and_(*prefix_filter(STATE.c.key, rule)) if is_prefix else STATE.c.key == rule
            whens.append((match, cutoff(ttl)))
        whens += [(STATE.c.scope == scope, cutoff(ttl)) for scope, ttl in self.scopes.items()]
        return STATE.c.updated_at > case(*whens, else_=literal(-1))


@dataclass(frozen=True, slots=True)
class StateWrite:
    """A state update a run's result carries, committed with that result (see :mod:`.journal`)."""

    owner: StateOwner
    """Owner."""
    key: str
    """Key."""
    encoded: str | None
    """The value's JSON text (checked and encoded once); ``None`` deletes the key."""
    runner_id: str | None
    """Writer."""

    @classmethod
    def of(cls, owner: StateOwner, key: str, value: Any, *, runner_id: str | None) -> StateWrite:
        """Check and encode *value* (``None`` deletes); raises as :meth:`StateStore.set` does."""
        _check_key(key)
        return cls(owner, key, None if value is None else encode_state_value(value), runner_id)


async def apply_state_writes(
    conn: AsyncConnection, dialect: str, writes: Sequence[StateWrite], *, now: int
) -> None:
    """Apply *writes* in order inside the caller's transaction (upsert bumping the version, or delete)."""
    for write in writes:
        owner_hash = digest(owner_text(write.owner))
        if write.encoded is None:
            await conn.execute(
                delete(STATE).where(STATE.c.owner_hash == owner_hash, STATE.c.key == write.key)
            )
            continue
        size = len(write.encoded.encode())
        stmt = insert_for(dialect, STATE).values(
            owner_hash=owner_hash,
            key=write.key,
            scope=write.owner.scope,
            owner=owner_text(write.owner),
            value=write.encoded,
            size=size,
            version=1,
            runner_id=write.runner_id,
            created_at=now,
            updated_at=now,
        )
        await conn.execute(
            stmt.on_conflict_do_update(
                index_elements=["owner_hash", "key"],
                set_={
                    "value": write.encoded,
                    "size": size,
                    "version": STATE.c.version + 1,
                    "runner_id": write.runner_id,
                    "updated_at": now,
                },
            )
        )


class StateStore:
    """State values (``stores.state``).

    Reads first wait for state updates that live runs' results carry and the journal has not committed
    yet (*settled*), so a run reading a key after updating it sees its own update.
    """

    def __init__(
        self,
        db: Database,
        *,
        settled: Callable[[], Awaitable[None]] | None = None,
        ttl: StateTTL | None = None,
    ) -> None:
        self._db = db
        self._settled = settled
        self.ttl = ttl or StateTTL()
        """How long values live (set from ``[state]`` when the service opens)."""

    def _item(self, owner: StateOwner, m: RowMapping) -> StateItem:
        return StateItem(
            owner=owner,
            key=m["key"],
            value=codec.loads(m["value"]),
            version=m["version"],
            runner_id=m["runner_id"],
            created_at=m["created_at"],
            updated_at=m["updated_at"],
        )

    async def get(self, owner: StateOwner, key: str) -> StateItem | None:
        """The value, or ``None`` when the key is unset (or expired)."""
        if self._settled is not None:
            await self._settled()
        owner_hash = digest(owner_text(owner))
        reader = self._db.loop_reader
        rows = None if reader is None else reader.fetch(_GET_ON_LOOP, {"owner_hash": owner_hash, "key": key})
        if rows is not None:
            if not rows:
                return None
            found, value, version, runner_id, created_at, updated_at = cast(_GetRow, rows[0])
            ttl = self.ttl.seconds(owner.scope, key)
            # the same rule as StateTTL.alive's condition: expired once updated_at <= now - lifetime
            if ttl is not None and updated_at <= now_ms() - int(ttl * 1000):
                return None
            return StateItem(
                owner=owner,
                key=found,
                value=codec.loads(value),
                version=version,
                runner_id=runner_id,
                created_at=created_at,
                updated_at=updated_at,
            )
        stmt = select(STATE).where(STATE.c.owner_hash == owner_hash, STATE.c.key == key)
        alive = self.ttl.alive(now_ms())
        if alive is not None:
            stmt = stmt.where(alive)
        async with self._db.read() as conn:
            row = (await conn.execute(stmt)).mappings().first()
        return None if row is None else self._item(owner, row)

    async def set(
        self,
        owner: StateOwner,
        key: str,
        value: Any,
        *,
        expected_version: int | None = None,
        runner_id: str | None,
    ) -> StateItem:
        """Write the value and bump its version. With *expected_version*, write only if the key is at that
        version (``0``: only if unset), else raise :class:`StateVersionConflict`."""
        _check_key(key)
        encoded = encode_state_value(value)
        size = len(encoded.encode())
        text = owner_text(owner)
        owner_hash = digest(text)
        returning = (
            STATE.c.key,
            STATE.c.version,
            STATE.c.value,
            STATE.c.runner_id,
            STATE.c.created_at,
            STATE.c.updated_at,
        )

        expires = self.ttl.seconds(owner.scope, key) is not None

        async def work(conn: AsyncConnection) -> StateItem:
            now = now_ms()
            alive = self.ttl.alive(now) if expires else None
            if alive is not None:
                # An expired value is gone: the write starts the key afresh (version 1) and a compare-and-set
                # sees it unset, as a reader would.
                await conn.execute(
                    delete(STATE).where(STATE.c.owner_hash == owner_hash, STATE.c.key == key, not_(alive))
                )
            if expected_version is None or expected_version == 0:
                stmt = insert_for(self._db.dialect, STATE).values(
                    owner_hash=owner_hash,
                    key=key,
                    scope=owner.scope,
                    owner=text,
                    value=encoded,
                    size=size,
                    version=1,
                    runner_id=runner_id,
                    created_at=now,
                    updated_at=now,
                )
                if expected_version is None:
                    stmt = stmt.on_conflict_do_update(
                        index_elements=["owner_hash", "key"],
                        set_={
                            "value": encoded,
                            "size": size,
                            "version": STATE.c.version + 1,
                            "runner_id": runner_id,
                            "updated_at": now,
                        },
                    )
                else:
                    stmt = stmt.on_conflict_do_nothing(index_elements=["owner_hash", "key"])
            else:
                stmt = (
                    update(STATE)
                    .where(
                        STATE.c.owner_hash == owner_hash,
                        STATE.c.key == key,
                        STATE.c.version == expected_version,
                    )
                    .values(
                        value=encoded,
                        size=size,
                        version=STATE.c.version + 1,
                        runner_id=runner_id,
                        updated_at=now,
                    )
                )
            row = (await conn.execute(stmt.returning(*returning))).mappings().first()
            if row is None:
                current = (
                    await conn.execute(
                        select(STATE.c.version).where(STATE.c.owner_hash == owner_hash, STATE.c.key == key)
                    )
                ).scalar_one_or_none()
                raise StateVersionConflict(key, expected=expected_version or 0, current=current or 0)
            return self._item(owner, row)

        return await self._db.transact(work)

    async def delete(self, owner: StateOwner, key: str) -> bool:
        """Remove the key; ``True`` when it existed."""
        owner_hash = digest(owner_text(owner))

        async def work(conn: AsyncConnection) -> bool:
            result = await conn.execute(
                delete(STATE).where(STATE.c.owner_hash == owner_hash, STATE.c.key == key)
            )
            return result.rowcount > 0

        return await self._db.transact(work)

    async def list(
        self, owner: StateOwner, *, prefix: str | None = None, after_key: str | None = None, limit: int
    ) -> tuple[list[StateKey], bool]:
        """Up to *limit* keys after *after_key* in key order (code-point order on both engines), only those
        starting with *prefix* (taken literally), and whether more follow."""
        if self._settled is not None:
            await self._settled()
        stmt = select(STATE.c.key, STATE.c.version, STATE.c.size, STATE.c.updated_at).where(
            STATE.c.owner_hash == digest(owner_text(owner))
        )
        if prefix:
            stmt = stmt.where(*prefix_filter(STATE.c.key, prefix))
        alive = self.ttl.alive(now_ms())
        if alive is not None:
            stmt = stmt.where(alive)
        if after_key is not None:
            stmt = stmt.where(STATE.c.key > after_key)
        stmt = stmt.order_by(STATE.c.key).limit(max(0, limit) + 1)
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt)).all()
        keys = [StateKey(key=r[0], version=r[1], size=r[2], updated_at=r[3]) for r in rows[:limit]]
        return keys, len(rows) > limit

    async def snapshot(
        self,
        owners: Mapping[str, StateOwner],
        *,
        max_keys_per_scope: int = 64,
        max_bytes: int = 64 * 1024,
    ) -> dict[str, dict[str, Any]]:
        """Values to inline into a run context: per scope, the first *max_keys_per_scope* keys in key order
        whose values fit, and at most *max_bytes* of encoded values over all scopes. Sizes are read first
        and only the chosen values are loaded, so a huge scope costs one bounded index read."""
        if not owners or max_bytes <= 0:
            return {name: {} for name in owners}
        if self._settled is not None:
            await self._settled()
        async with self._db.read() as conn:
            return await self.read_snapshot(
                conn, owners, max_keys_per_scope=max_keys_per_scope, max_bytes=max_bytes
            )

    @property
    def expires(self) -> bool:
        """Some keys expire (a lifetime rule is set): the snapshot's reads depend on the time, so the prebuilt
        :data:`SNAPSHOT_SIZE_ROWS` does not serve."""
        return bool(self.ttl)

    async def read_snapshot(
        self,
        conn: AsyncConnection,
        owners: Mapping[str, StateOwner],
        *,
        max_keys_per_scope: int = SNAPSHOT_KEYS_PER_SCOPE,
        max_bytes: int = SNAPSHOT_MAX_BYTES,
    ) -> dict[str, dict[str, Any]]:
        """:meth:`snapshot` on *conn*, statements only (a run's start reads it inside its own transaction).
        State updates still queued with results are not waited for: the caller settles them first."""
        if not owners or max_bytes <= 0:
            return {name: {} for name in owners}
        by_hash = snapshot_owners(owners)
        condition = self.ttl.alive(now_ms())
        # Without a lifetime rule the prebuilt statement serves; with one the cutoffs depend on the time.
        sizes_stmt = _SNAPSHOT_SIZES if condition is None else _snapshot_sizes(condition)
        sized = (
            await conn.execute(sizes_stmt, {"owners": list(by_hash), "per_scope": max(0, max_keys_per_scope)})
        ).all()
        return await snapshot_values(conn, owners, by_hash, sized, max_bytes=max_bytes)

    async def sweep_expired(self, now: int | None = None) -> int:
        """Delete every value expired at *now* (epoch ms); returns how many."""
        alive = self.ttl.alive(now_ms() if now is None else now)
        if alive is None:
            return 0

        async def work(conn: AsyncConnection) -> int:
            return (await conn.execute(delete(STATE).where(not_(alive)))).rowcount

        return await self._db.transact(work)


async def snapshot_values(
    conn: AsyncConnection,
    owners: Mapping[str, StateOwner],
    by_hash: Mapping[str, str],
    sized: Sequence[tuple[str, str, int]],
    *,
    max_bytes: int = SNAPSHOT_MAX_BYTES,
) -> dict[str, codec.JsonObject]:
    """The snapshot of *owners* by scope name, from their candidate keys *sized* (owner hash, key, size; each
    owner's in key order; *by_hash* is :func:`snapshot_owners` of them): the values that fit *max_bytes*, read
    on *conn*."""
    out: dict[str, codec.JsonObject] = {name: {} for name in owners}
    if not sized:
        return out
    rows_by_owner: dict[str, list[tuple[str, int]]] = {}
    for owner_hash, key, size in sized:
        rows_by_owner.setdefault(owner_hash, []).append((key, size))
    budget = max_bytes
    chosen: dict[str, list[str]] = {}
    # scopes are filled in the caller's order, so the byte budget favours the first ones
    for owner_hash in by_hash:
        for key, size in rows_by_owner.get(owner_hash, []):
            if size <= budget:
                chosen.setdefault(owner_hash, []).append(key)
                budget -= size
    for owner_hash, keys in chosen.items():
        rows = await conn.execute(_SNAPSHOT_VALUES, {"owner": owner_hash, "keys": keys})
        values = {key: codec.loads(value) for key, value in rows}
        out[by_hash[owner_hash]] = {key: values[key] for key in keys if key in values}
    return out
