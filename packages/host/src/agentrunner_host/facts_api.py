"""The pull APIs: what a run reads (and writes) of the host-owned facts, scoped by its ``RunAccess``.

The dispatcher has already decided that the run may call the action at all; this module decides *what* it
sees. Rules enforced here:

* history and events: only the run's own conversation and thread, or a conversation listed in
  ``access.readable_conversations`` (anything else is ``unauthorized``);
* artifacts: readable when owned by the run's conversation or by the run itself, or granted by id; anything
  else, expired or not, is ``not_found`` so existence does not leak; a range read returns at most 1 MiB;
* state and storage: only the scopes/areas granted in ``access.state_owners`` / ``access.storage_owners``;
* page sizes default to 50 and are capped at 100; search returns at most 50 hits;
* cursors are opaque, MAC-signed tokens (keyed BLAKE2b) bound to the API, the conversation and thread (or the state
  owner / storage area and prefix) that issued them: a cursor used anywhere else, or altered, is
  ``invalid_argument``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Final, cast

from agentrunner import (
    ArtifactChunk,
    ArtifactMetadata,
    EventPage,
    EventRecord,
    HistoryPage,
    InvalidArgumentError,
    NotFoundError,
    PayloadTooLargeError,
    StateEntry,
    StateListPage,
    StateValue,
    StorageEntry,
    StorageListPage,
    StorageValue,
    UnauthorizedError,
    codec,
)
from agentrunner.actions import (
    ArtifactIdParams,
    ArtifactReadParams,
    EmptyResult,
    EventGetParams,
    EventPageParams,
    HistoryPageParams,
    HistorySearchParams,
    StateDeleteParams,
    StateGetParams,
    StateListParams,
    StateSetParams,
    StorageDeleteParams,
    StorageGetParams,
    StorageListParams,
    StorageSetParams,
)

from agentrunner_host.access import ConversationKey, RunAccess, StateOwner, StorageOwner
from agentrunner_host.context_builder import HistoryHandles
from agentrunner_host.ports import RunStores
from agentrunner_host.stores import (
    ArtifactRecord,
    ArtifactUnavailableError,
    InvalidValueError,
    StateVersionConflict,
    StoredEvent,
    ValueTooLargeError,
)
from agentrunner_host.stores.records import item_row
from agentrunner_host.stores.state import owner_text
from agentrunner_host.stores.transcript import MAX_SEARCH_TOP_K

__all__ = [
    "DEFAULT_PAGE_LIMIT",
    "MAX_CURSOR_CHARS",
    "MAX_PAGE_LIMIT",
    "MAX_READ_BYTES",
    "STREAM_CHUNK_BYTES",
    "CursorCodec",
    "PullAPI",
]

DEFAULT_PAGE_LIMIT: Final = 50
"""Page size when the caller does not say."""
MAX_PAGE_LIMIT: Final = 100
"""Hard cap of every page."""
MAX_READ_BYTES: Final = 1024 * 1024
"""Hard cap of one ``artifacts.read_range``."""
STREAM_CHUNK_BYTES: Final = 256 * 1024
"""Chunk size of ``artifacts.open_stream``."""
MAX_CURSOR_CHARS: Final = 2048
"""Longer cursors are refused before any decoding."""

_MAC_BYTES: Final = 16
_SEARCH_FILTERS: Final = frozenset({"conversation_id", "thread_id", "roles", "event_types"})


_URLSAFE: Final = bytes.maketrans(b"+/", b"-_")
_INT_KIND: Final = b"\x01"
_STR_KIND: Final = b"\x02"


class CursorCodec:
    """Opaque cursors: ``base64url(kind byte + position + mac)``.

    The position is a 56-bit integer (kind ``0x01``) or a UTF-8 key (kind ``0x02``). The MAC is a 128-bit
    keyed BLAKE2b over the issuing API, its binding (conversation and thread, or owner and prefix) and the
    payload. The binding is not in the token: ``decode`` recomputes the MAC for the API and binding of the
    request, so a cursor moved to another API, conversation, thread or scope, or altered in any way, does
    not verify. The position is not secret, but it cannot be forged.
    """

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("the cursor key needs at least 16 bytes")
        # BLAKE2b takes keys of up to 64 bytes; a longer secret is condensed first
        self._key = key if len(key) <= 64 else hashlib.blake2b(key).digest()

    def _context(self, api: str, binding: tuple[str, ...]) -> hashlib.blake2b:
        # keyed BLAKE2b is a MAC by design (no HMAC construction) and a C call; the context part of the
        # input is hashed once and copied for every cursor of a page
        return hashlib.blake2b(codec.dumps([api, list(binding)]), key=self._key, digest_size=_MAC_BYTES)

    def encoder(self, api: str, binding: tuple[str, ...]) -> Callable[[int | str], str]:
        """A function making cursors of *api* within *binding* (cheap per call: pages make one per item)."""
        context = self._context(api, binding)

        def encode(position: int | str) -> str:
            if isinstance(position, int):
                # 1 + 7 + 16 bytes: exactly 32 base64 characters, no padding to strip
                payload = _INT_KIND + position.to_bytes(7, "big", signed=True)
            else:
                payload = _STR_KIND + position.encode()
            mac = context.copy()
            mac.update(payload)
            token = binascii.b2a_base64(payload + mac.digest(), newline=False).translate(_URLSAFE)
            return (token if len(payload) == 8 else token.rstrip(b"=")).decode()

        return encode

    def encode(self, api: str, binding: tuple[str, ...], position: int | str) -> str:
        """A cursor for *position* on *api* within *binding*."""
        return self.encoder(api, binding)(position)

    def decode(self, token: str, api: str, binding: tuple[str, ...]) -> int | str:
        """The position of *token*; raises ``InvalidArgumentError`` when it was not issued by *api* within
        *binding* by this host, or was altered."""
        invalid = InvalidArgumentError(
            "invalid cursor: it was not issued for this API, conversation or scope"
        )
        if not 0 < len(token) <= MAX_CURSOR_CHARS:
            raise invalid
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError):
            raise invalid from None
        payload, mac = raw[:-_MAC_BYTES], raw[-_MAC_BYTES:]
        if not payload:
            raise invalid
        expected = self._context(api, binding)
        expected.update(payload)
        if not hmac.compare_digest(mac, expected.digest()):
            raise invalid
        kind, body = payload[:1], payload[1:]
        if kind == _INT_KIND and len(body) == 7:
            return int.from_bytes(body, "big", signed=True)
        if kind == _STR_KIND:
            try:
                return body.decode()
            except UnicodeDecodeError:
                raise invalid from None
        raise invalid


def _limit(requested: int) -> int:
    return max(1, min(requested, MAX_PAGE_LIMIT))


def _line(key: ConversationKey) -> tuple[str, str]:
    return (key.conversation_id, key.thread_id or "")


class PullAPI:
    """One async method per pull action: ``(access, params) -> result``; failures are ``APIError``\\ s."""

    def __init__(self, stores: RunStores, *, cursor_key: bytes) -> None:
        self._stores = stores
        self.cursors = CursorCodec(cursor_key)
        """The cursor codec (shared with whoever builds ``latest_cursor`` for a run context)."""

    # -- scoping ------------------------------------------------------------------------------------------

    def _conversation(
        self, access: RunAccess, conversation_id: str | None, thread_id: str | None
    ) -> ConversationKey:
        own = access.conversation
        if conversation_id is None or (own is not None and conversation_id == own.conversation_id):
            if own is None:
                raise InvalidArgumentError("this run has no conversation; name a granted conversation_id")
            if thread_id is not None and thread_id != (own.thread_id or ""):
                raise UnauthorizedError("this run may only read its own thread of the conversation")
            return own
        if conversation_id in access.readable_conversations:
            return ConversationKey(conversation_id, thread_id or None)
        raise UnauthorizedError("this run may not read that conversation")

    @staticmethod
    def _state_owner(access: RunAccess, scope: str) -> StateOwner:
        owner = access.state_owners.get(scope)
        if owner is None:
            raise UnauthorizedError(f"state scope {scope!r} is not granted to this run")
        return owner

    @staticmethod
    def _storage_owner(access: RunAccess, area: str) -> StorageOwner:
        owner = access.storage_owners.get(area)
        if owner is None:
            raise UnauthorizedError(f"storage area {area!r} is not granted to this run")
        return owner

    # -- history ------------------------------------------------------------------------------------------

    # A history cursor holds a position p between or on items: item n sits at 2n, the gap after item n at
    # 2n+1. ``before`` p keeps items with 2n < p, ``after`` p those with 2n > p, so an item's cursor excludes
    # the item itself both ways and the "after the newest item" cursor works as either bound.

    def history_cursor(self, conversation: ConversationKey, position: int) -> str:
        """A ``history.page`` cursor at *position* (``2 * seq`` for an item, ``2 * seq + 1`` after it)."""
        return self.cursors.encode("history", _line(conversation), position)

    def _history_position(self, token: str, conversation: ConversationKey) -> int:
        position = self.cursors.decode(token, "history", _line(conversation))
        if not isinstance(position, int) or isinstance(position, bool) or position < 0:
            raise InvalidArgumentError("invalid cursor")
        return position

    @staticmethod
    def _item_dict(item: Mapping[Any, Any], cursor: str, *, include_artifacts: bool) -> dict[str, object]:
        # from a stored row (or a stored item's fields) straight to the wire shape; the page validates all
        # items in one pydantic call
        return {
            "item_id": item["item_id"],
            "cursor": cursor,
            "conversation_id": item["conversation_id"],
            "thread_id": item["thread_id"] or None,
            "role": item["role"],
            "item_type": item["item_type"],
            "event_id": item["event_id"],
            "event_type": item["event_type"],
            "run_id": item["run_id"],
            "content": item["content"],
            "contents": item["contents"],
            "artifacts": item["artifacts"] if include_artifacts else [],
            "created_at": item["created_at"],
            "metadata": item["metadata"],
        }

    def _page(
        self,
        conversation: ConversationKey,
        rows: Sequence[Mapping[Any, Any]],
        *,
        include_artifacts: bool,
        next_index: int | None = None,
        prev_index: int | None = None,
    ) -> HistoryPage:
        encode = self.cursors.encoder("history", _line(conversation))
        cursors = [encode(2 * row["seq"]) for row in rows]
        return HistoryPage.model_validate(
            {
                "items": [
                    self._item_dict(row, cursor, include_artifacts=include_artifacts)
                    for row, cursor in zip(rows, cursors, strict=True)
                ],
                "next_cursor": None if next_index is None else cursors[next_index],
                "prev_cursor": None if prev_index is None else cursors[prev_index],
                "has_more": next_index is not None,
            }
        )

    async def history_handles(self, access: RunAccess) -> HistoryHandles:
        """Where the run's conversation stands now: the newest transcript seq, a cursor just after it, and the
        newest event seq (call it before the run's own user item is stored)."""
        conversation = access.conversation
        if conversation is None:
            return HistoryHandles()
        latest, event_seq = await self._stores.positions(conversation=conversation)
        return self.history_handles_at(access, latest, event_seq)

    def history_handles_at(
        self, access: RunAccess, transcript_seq: int | None, event_seq: int | None
    ) -> HistoryHandles:
        """The handles of the run's conversation at positions already read (a run's start reads them in its
        own transaction)."""
        conversation = access.conversation
        if conversation is None:
            return HistoryHandles()
        return HistoryHandles(
            latest_cursor=self.history_cursor(conversation, 2 * (transcript_seq or 0) + 1),
            transcript_seq=transcript_seq,
            event_seq=event_seq,
        )

    async def history_page(self, access: RunAccess, params: HistoryPageParams) -> HistoryPage:
        """``history.page``: a page of the transcript, oldest first, in either direction."""
        conversation = self._conversation(access, params.conversation_id, params.thread_id)
        before_seq = after_seq = None
        if params.before_cursor is not None:
            before_seq = (self._history_position(params.before_cursor, conversation) + 1) // 2
        if params.after_cursor is not None:
            after_seq = self._history_position(params.after_cursor, conversation) // 2
        rows, has_more = await self._stores.transcript.page_rows(
            conversation=conversation,
            before_seq=before_seq,
            after_seq=after_seq,
            limit=_limit(params.limit),
            direction=params.direction,
        )
        if not rows:
            return HistoryPage()
        # next continues in the paging direction (oldest item going backward, newest going forward)
        oldest, newest = 0, len(rows) - 1
        forward = params.direction == "forward"
        return self._page(
            conversation,
            rows,
            include_artifacts=params.include_artifacts,
            next_index=(newest if forward else oldest) if has_more else None,
            prev_index=oldest if forward else newest,
        )

    async def history_search(self, access: RunAccess, params: HistorySearchParams) -> HistoryPage:
        """``history.search``: full-text hits of the thread (at most 50), in conversation order."""
        filters = dict(params.filters or {})
        unknown = set(filters) - _SEARCH_FILTERS
        if unknown:
            raise InvalidArgumentError(f"unknown search filters: {', '.join(sorted(unknown))}")
        conversation_id = filters.get("conversation_id")
        thread_id = filters.get("thread_id")
        if conversation_id is not None and not isinstance(conversation_id, str):
            raise InvalidArgumentError("filters.conversation_id must be a string")
        if thread_id is not None and not isinstance(thread_id, str):
            raise InvalidArgumentError("filters.thread_id must be a string")
        conversation = self._conversation(access, conversation_id, thread_id)
        roles = _string_list(filters.get("roles"), "roles")
        event_types = _string_list(filters.get("event_types"), "event_types")
        hits = await self._stores.transcript.search(
            conversation=conversation,
            query=params.query,
            roles=roles,
            event_types=event_types,
            top_k=min(params.top_k, MAX_SEARCH_TOP_K),
        )
        rows = [item_row(hit, seq=hit.seq, now=hit.created_at) for hit in hits]
        return self._page(conversation, rows, include_artifacts=False)

    # -- events -------------------------------------------------------------------------------------------

    def _event_record(self, event: StoredEvent) -> EventRecord:
        cursor = ""
        if event.conversation_id is not None and event.seq is not None:
            cursor = self.cursors.encode("events", (event.conversation_id, event.thread_id or ""), event.seq)
        return EventRecord.model_validate(
            {
                "event_id": event.event_id,
                "event_type": event.event_type,
                "cursor": cursor,
                "source": event.source,
                "source_event_type": event.source_event_type,
                "conversation_id": event.conversation_id,
                "thread_id": event.thread_id,
                "actor_type": event.actor_type,
                "actor_id": event.actor_id,
                "subject_type": event.subject_type,
                "subject_id": event.subject_id,
                "run_id": event.run_id,
                "summary": event.summary,
                "data": event.data,
                "created_at": event.created_at,
            }
        )

    async def events_get(self, access: RunAccess, params: EventGetParams) -> EventRecord:
        """``events.get``: one event of the run's conversation and thread (or of a granted conversation)."""
        event = await self._stores.events.get(
            params.event_id, conversation=access.conversation, also_readable=access.readable_conversations
        )
        # events without a conversation are visible only to the run they started or belong to
        if (
            event is not None
            and event.conversation_id is None
            and access.event_id != event.event_id
            and access.run_id != event.run_id
        ):
            event = None
        if event is None or event.kind != "event":
            raise NotFoundError("event not found")
        return self._event_record(event)

    async def events_page(self, access: RunAccess, params: EventPageParams) -> EventPage:
        """``events.page``: the thread's events (no host records), oldest first, walking back in time."""
        conversation = access.conversation
        if conversation is None:
            return EventPage()
        binding = _line(conversation)
        before_seq = None
        if params.before_cursor is not None:
            before_seq = self.cursors.decode(params.before_cursor, "events", binding)
            if not isinstance(before_seq, int) or isinstance(before_seq, bool):
                raise InvalidArgumentError("invalid cursor")
        limit = _limit(params.limit)
        events = await self._stores.events.page(
            conversation=conversation, before_seq=before_seq, limit=limit + 1, event_types=params.event_types
        )
        has_more = len(events) > limit
        events = events[:limit]
        events.reverse()
        next_cursor = None
        if has_more and events and events[0].seq is not None:
            next_cursor = self.cursors.encode("events", binding, events[0].seq)
        return EventPage(
            items=[self._event_record(e) for e in events], next_cursor=next_cursor, has_more=has_more
        )

    # -- artifacts ----------------------------------------------------------------------------------------

    @staticmethod
    def _may_read(access: RunAccess, record: ArtifactRecord) -> bool:
        if record.artifact_id in access.artifact_ids:
            return True
        if record.owner.run_id is not None and record.owner.run_id == access.run_id:
            return True
        own = access.conversation
        return own is not None and record.owner.conversation_id == own.conversation_id

    async def _artifact(self, access: RunAccess, artifact_id: str) -> ArtifactRecord:
        record = await self._stores.artifacts.get(artifact_id)
        if record is None or not self._may_read(access, record):
            raise NotFoundError("artifact not found")
        return record

    async def artifacts_metadata(self, access: RunAccess, params: ArtifactIdParams) -> ArtifactMetadata:
        """``artifacts.metadata``."""
        return self._stores.artifacts.to_metadata(await self._artifact(access, params.artifact_id))

    async def artifacts_read_range(self, access: RunAccess, params: ArtifactReadParams) -> ArtifactChunk:
        """``artifacts.read_range``: at most 1 MiB from ``offset``."""
        record = await self._artifact(access, params.artifact_id)
        if params.offset > record.size:
            raise InvalidArgumentError(f"offset {params.offset} is past the end ({record.size} bytes)")
        try:
            data = await self._stores.artifacts.read_range(
                record, params.offset, min(params.length, MAX_READ_BYTES)
            )
        except ArtifactUnavailableError:
            raise NotFoundError("artifact not found") from None
        return ArtifactChunk(
            artifact_id=record.artifact_id,
            offset=params.offset,
            length=len(data),
            size=record.size,
            data_base64=base64.b64encode(data).decode(),
            has_more=params.offset + len(data) < record.size,
            mime_type=record.mime_type,
        )

    async def artifacts_open_stream(
        self, access: RunAccess, params: ArtifactIdParams
    ) -> AsyncIterator[ArtifactChunk]:
        """``artifacts.open_stream``: the whole artifact in 256 KiB chunks (checks run before the first)."""
        record = await self._artifact(access, params.artifact_id)
        offset = 0
        try:
            async for data in self._stores.artifacts.stream(record, chunk_size=STREAM_CHUNK_BYTES):
                yield ArtifactChunk(
                    artifact_id=record.artifact_id,
                    offset=offset,
                    length=len(data),
                    size=record.size,
                    data_base64=base64.b64encode(data).decode(),
                    has_more=offset + len(data) < record.size,
                    mime_type=record.mime_type,
                )
                offset += len(data)
        except ArtifactUnavailableError:
            raise NotFoundError("artifact not found") from None

    # -- state --------------------------------------------------------------------------------------------

    async def state_get(self, access: RunAccess, params: StateGetParams) -> StateValue:
        """``state.get``."""
        item = await self._stores.state.get(self._state_owner(access, params.scope), params.key)
        if item is None:
            return StateValue(scope=params.scope, key=params.key)
        return StateValue(
            scope=params.scope, key=params.key, value=item.value, exists=True, version=item.version
        )

    async def state_set(self, access: RunAccess, params: StateSetParams) -> StateValue:
        """``state.set`` (compare-and-set with ``expected_version``)."""
        owner = self._state_owner(access, params.scope)
        try:
            item = await self._stores.state.set(
                owner,
                params.key,
                params.value,
                expected_version=params.expected_version,
                runner_id=access.runner_id,
            )
        except ValueTooLargeError as exc:
            raise PayloadTooLargeError(exc.message, details={"size": exc.size, "limit": exc.limit}) from None
        except StateVersionConflict as exc:
            raise InvalidArgumentError(
                exc.message,
                details={
                    "reason": "version_conflict",
                    "expected_version": exc.expected,
                    "current_version": exc.current,
                },
            ) from None
        except InvalidValueError as exc:
            raise InvalidArgumentError(exc.message) from None
        return StateValue(
            scope=params.scope, key=params.key, value=item.value, exists=True, version=item.version
        )

    async def state_delete(self, access: RunAccess, params: StateDeleteParams) -> EmptyResult:
        """``state.delete`` (deleting an unset key is not an error)."""
        await self._stores.state.delete(self._state_owner(access, params.scope), params.key)
        return EmptyResult()

    def _key_cursor(self, cursor: str | None, action: str, binding: tuple[str, ...]) -> str | None:
        """The key a ``state.list`` / ``storage.list`` page starts after (``None`` for the first page)."""
        if cursor is None:
            return None
        after_key = self.cursors.decode(cursor, action, binding)
        if not isinstance(after_key, str):
            raise InvalidArgumentError("invalid cursor")
        return after_key

    async def state_list(self, access: RunAccess, params: StateListParams) -> StateListPage:
        """``state.list``: keys in order, optionally by literal prefix, with a cursor."""
        owner = self._state_owner(access, params.scope)
        binding = (owner_text(owner), params.prefix or "")
        after_key = self._key_cursor(params.cursor, "state.list", binding)
        keys, has_more = await self._stores.state.list(
            owner, prefix=params.prefix, after_key=after_key, limit=_limit(params.limit)
        )
        return StateListPage(
            items=[StateEntry(key=k.key, version=k.version, updated_at=k.updated_at) for k in keys],
            next_cursor=self.cursors.encode("state.list", binding, keys[-1].key)
            if has_more and keys
            else None,
            has_more=has_more,
        )

    # -- storage ------------------------------------------------------------------------------------------

    async def storage_get(self, access: RunAccess, params: StorageGetParams) -> StorageValue:
        """``storage.get``."""
        item = await self._stores.storage.get(self._storage_owner(access, params.area), params.key)
        if item is None:
            return StorageValue(area=params.area, key=params.key)
        return StorageValue(
            area=params.area,
            key=params.key,
            value_base64=base64.b64encode(item.value).decode(),
            exists=True,
            size=len(item.value),
        )

    async def storage_set(self, access: RunAccess, params: StorageSetParams) -> StorageValue:
        """``storage.set``: at most the store's cap (1 MiB by default) of bytes."""
        owner = self._storage_owner(access, params.area)
        cap = self._stores.storage.max_value_bytes
        if len(params.value_base64) > 4 * (cap // 3 + 1):
            raise PayloadTooLargeError(f"storage values are limited to {cap} bytes")
        try:
            value = base64.b64decode(params.value_base64, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgumentError("value_base64 is not valid base64") from None
        try:
            item = await self._stores.storage.set(owner, params.key, value)
        except ValueTooLargeError as exc:
            raise PayloadTooLargeError(exc.message, details={"size": exc.size, "limit": exc.limit}) from None
        except InvalidValueError as exc:
            raise InvalidArgumentError(exc.message) from None
        return StorageValue(
            area=params.area,
            key=params.key,
            value_base64=params.value_base64,
            exists=True,
            size=len(item.value),
        )

    async def storage_delete(self, access: RunAccess, params: StorageDeleteParams) -> EmptyResult:
        """``storage.delete``."""
        await self._stores.storage.delete(self._storage_owner(access, params.area), params.key)
        return EmptyResult()

    async def storage_list(self, access: RunAccess, params: StorageListParams) -> StorageListPage:
        """``storage.list``: keys in order, optionally by literal prefix, with a cursor."""
        owner = self._storage_owner(access, params.area)
        binding = (owner.area, owner.owner_id, params.prefix or "")
        after_key = self._key_cursor(params.cursor, "storage.list", binding)
        keys, has_more = await self._stores.storage.list(
            owner, prefix=params.prefix, after_key=after_key, limit=_limit(params.limit)
        )
        return StorageListPage(
            items=[StorageEntry(key=k.key, size=k.size, updated_at=k.updated_at) for k in keys],
            next_cursor=self.cursors.encode("storage.list", binding, keys[-1].key)
            if has_more and keys
            else None,
            has_more=has_more,
        )


def _string_list(value: object, name: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidArgumentError(f"filters.{name} must be a list of strings")
    strings = [v for v in cast("list[object]", value) if isinstance(v, str)]
    if len(strings) != len(cast("list[object]", value)):
        raise InvalidArgumentError(f"filters.{name} must be a list of strings")
    return strings
