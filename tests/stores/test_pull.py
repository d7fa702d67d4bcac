"""The pull APIs: data scoping, cursors, caps and error codes."""

from __future__ import annotations

import base64

import pytest
from agentrunner import (
    InvalidArgumentError,
    NotFoundError,
    PayloadTooLargeError,
    UnauthorizedError,
)
from agentrunner.actions import (
    ArtifactIdParams,
    ArtifactReadParams,
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
from agentrunner_host.access import ConversationKey, StateOwner, StorageOwner
from agentrunner_host.facts_api import MAX_READ_BYTES, CursorCodec, PullAPI
from agentrunner_host.stores import ArtifactOwner, HostStores
from agentrunner_host.stores._connections import now_ms

from .conftest import CURSOR_KEY
from .helpers import access, event, item

C1 = ConversationKey("c1")
RUN = access(C1)


async def _fill(stores: HostStores, conversation: ConversationKey, count: int, prefix: str = "m") -> None:
    await stores.transcript.append_many([item(conversation, f"{prefix}{n}") for n in range(1, count + 1)])


# -- history ------------------------------------------------------------------------------------------------


async def test_history_pages_backward_with_cursors_until_the_start(stores: HostStores, pull: PullAPI) -> None:
    """Following ``next_cursor`` backward visits every item once, each page oldest first."""
    await _fill(stores, C1, 25)
    seen: list[str | None] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await pull.history_page(RUN, HistoryPageParams(before_cursor=cursor, limit=10))
        pages += 1
        contents = [i.content for i in page.items]
        assert contents == sorted(contents, key=lambda c: int((c or "m0")[1:]))
        seen = contents + seen
        if page.next_cursor is None:
            assert not page.has_more
            break
        cursor = page.next_cursor
    assert pages == 3
    assert seen == [f"m{n}" for n in range(1, 26)]


async def test_history_pages_forward_and_prev_cursor_turns_around(stores: HostStores, pull: PullAPI) -> None:
    """Forward paging walks to newer items; ``prev_cursor`` pages back the other way."""
    await _fill(stores, C1, 6)
    first = await pull.history_page(RUN, HistoryPageParams(direction="forward", limit=2))
    assert [i.content for i in first.items] == ["m1", "m2"]
    assert first.has_more and first.next_cursor is not None
    second = await pull.history_page(
        RUN, HistoryPageParams(direction="forward", after_cursor=first.next_cursor, limit=2)
    )
    assert [i.content for i in second.items] == ["m3", "m4"]
    assert second.prev_cursor is not None
    back = await pull.history_page(RUN, HistoryPageParams(before_cursor=second.prev_cursor, limit=5))
    assert [i.content for i in back.items] == ["m1", "m2"]
    item_cursor = second.items[0].cursor
    newer = await pull.history_page(
        RUN, HistoryPageParams(direction="forward", after_cursor=item_cursor, limit=10)
    )
    assert [i.content for i in newer.items] == ["m4", "m5", "m6"]
    assert newer.next_cursor is None and not newer.has_more


async def test_history_handles_give_a_cursor_after_the_newest_item(stores: HostStores, pull: PullAPI) -> None:
    """``latest_cursor`` as before_cursor includes the newest item; as after_cursor it shows only newer ones."""
    await _fill(stores, C1, 3)
    handles = await pull.history_handles(RUN)
    assert handles.transcript_seq == 3 and handles.latest_cursor is not None
    await stores.transcript.append_many([item(C1, "during the run")])
    older = await pull.history_page(RUN, HistoryPageParams(before_cursor=handles.latest_cursor))
    newer = await pull.history_page(
        RUN, HistoryPageParams(after_cursor=handles.latest_cursor, direction="forward")
    )
    assert [i.content for i in older.items] == ["m1", "m2", "m3"]
    assert [i.content for i in newer.items] == ["during the run"]


async def test_history_limit_defaults_to_50_and_is_capped_at_100(stores: HostStores, pull: PullAPI) -> None:
    """Without a limit a page has 50 items; asking for 1000 gives 100."""
    await _fill(stores, C1, 120)
    assert len((await pull.history_page(RUN, HistoryPageParams())).items) == 50
    assert len((await pull.history_page(RUN, HistoryPageParams(limit=1000))).items) == 100


async def test_history_of_another_conversation_is_unauthorized(stores: HostStores, pull: PullAPI) -> None:
    """Naming a conversation the run was not granted is ``unauthorized``; a granted one is readable."""
    await _fill(stores, ConversationKey("secret"), 2, prefix="s")
    with pytest.raises(UnauthorizedError, match="this run may not read that conversation"):
        await pull.history_page(RUN, HistoryPageParams(conversation_id="secret"))
    granted = access(C1, readable=frozenset({"secret"}))
    page = await pull.history_page(granted, HistoryPageParams(conversation_id="secret"))
    assert [i.content for i in page.items] == ["s1", "s2"]


async def test_history_is_scoped_to_the_runs_thread(stores: HostStores, pull: PullAPI) -> None:
    """A run in a thread sees that thread only and may not name another thread of its conversation."""
    thread = ConversationKey("c1", "t1")
    await _fill(stores, C1, 2, prefix="main")
    await _fill(stores, thread, 2, prefix="thread")
    in_thread = access(thread)
    page = await pull.history_page(in_thread, HistoryPageParams())
    assert [i.content for i in page.items] == ["thread1", "thread2"]
    assert all(i.thread_id == "t1" for i in page.items)
    with pytest.raises(UnauthorizedError, match="this run may only read its own thread of the conversation"):
        await pull.history_page(in_thread, HistoryPageParams(thread_id="t2"))
    with pytest.raises(UnauthorizedError, match="this run may only read its own thread of the conversation"):
        await pull.history_page(RUN, HistoryPageParams(thread_id="t1"))


async def test_cursors_cannot_be_moved_or_forged(stores: HostStores, pull: PullAPI) -> None:
    """A cursor of another conversation, thread or API, an altered one or garbage is ``invalid_argument``."""
    await _fill(stores, C1, 3)
    await _fill(stores, ConversationKey("c2"), 3)
    await _fill(stores, ConversationKey("c1", "t"), 3)
    await stores.events.append(event("c1"))
    await stores.events.append(event("c1"))
    history_cursor = (await pull.history_page(RUN, HistoryPageParams(limit=1))).next_cursor
    assert history_cursor is not None
    other_conversation = (
        await pull.history_page(access(ConversationKey("c2")), HistoryPageParams(limit=1))
    ).next_cursor
    other_thread = (
        await pull.history_page(access(ConversationKey("c1", "t")), HistoryPageParams(limit=1))
    ).next_cursor
    events_cursor = (await pull.events_page(RUN, EventPageParams(limit=1))).next_cursor
    assert other_conversation and other_thread and events_cursor
    # flip a character in the position part and one in the MAC part (not the last one: unpadded base64
    # keeps unused bits there)
    tampered = [
        history_cursor[:i] + ("A" if history_cursor[i] != "A" else "B") + history_cursor[i + 1 :]
        for i in (2, len(history_cursor) - 3)
    ]
    foreign = PullAPI(stores, cursor_key=b"another-host-key-0123456789abcdef")
    foreign_cursor = (await foreign.history_page(RUN, HistoryPageParams(limit=1))).next_cursor
    assert foreign_cursor is not None
    bad = [
        other_conversation,
        other_thread,
        events_cursor,
        *tampered,
        history_cursor[:-4],
        history_cursor + "AAAA",
        foreign_cursor,
        "2",
        "",
        "...",
        "x" * 5000,
        "%%%.!!!",
    ]
    for cursor in bad:
        with pytest.raises(
            InvalidArgumentError,
            match="invalid cursor: it was not issued for this API, conversation or scope",
        ):
            await pull.history_page(RUN, HistoryPageParams(before_cursor=cursor))
    with pytest.raises(
        InvalidArgumentError, match="invalid cursor: it was not issued for this API, conversation or scope"
    ):
        await pull.events_page(RUN, EventPageParams(before_cursor=history_cursor))
    assert (
        PullAPI(stores, cursor_key=CURSOR_KEY).cursors.decode(history_cursor, "history", ("c1", "")) == 2 * 3
    )


async def test_a_run_without_a_conversation_must_name_a_granted_one(pull: PullAPI) -> None:
    """Without a conversation, history needs a granted ``conversation_id``."""
    lonely = access(None)
    with pytest.raises(
        InvalidArgumentError, match="this run has no conversation; name a granted conversation_id"
    ):
        await pull.history_page(lonely, HistoryPageParams())
    with pytest.raises(UnauthorizedError, match="this run may not read that conversation"):
        await pull.history_page(lonely, HistoryPageParams(conversation_id="c1"))


async def test_search_is_scoped_capped_and_validated(stores: HostStores, pull: PullAPI) -> None:
    """Search sees only the run's thread, returns at most 50 hits and refuses malformed filters."""
    await stores.transcript.append_many([item(C1, f"needle {n}") for n in range(60)])
    await stores.transcript.append_many([item(ConversationKey("secret"), "needle secret")])
    page = await pull.history_search(RUN, HistorySearchParams(query="needle", top_k=500))
    assert len(page.items) == 50
    assert all(i.conversation_id == "c1" for i in page.items)
    assert page.items[0].cursor
    with pytest.raises(UnauthorizedError, match="this run may not read that conversation"):
        await pull.history_search(
            RUN, HistorySearchParams(query="needle", filters={"conversation_id": "secret"})
        )
    with pytest.raises(InvalidArgumentError, match=r"filters\.roles must be a list of strings"):
        await pull.history_search(RUN, HistorySearchParams(query="needle", filters={"roles": "user"}))
    with pytest.raises(InvalidArgumentError, match="unknown search filters: sql"):
        await pull.history_search(RUN, HistorySearchParams(query="needle", filters={"sql": "1=1"}))
    hostile = await pull.history_search(RUN, HistorySearchParams(query='%" OR 1=1 --'))
    assert hostile.items == []


# -- events -------------------------------------------------------------------------------------------------


async def test_events_page_hides_host_records_and_pages_back(stores: HostStores, pull: PullAPI) -> None:
    """``events.page`` returns real events only, oldest first per page, and walks back with its cursor."""
    for n in range(5):
        await stores.events.append(event("c1", summary=f"e{n}"))
        await stores.events.append_many([event("c1", kind="host", event_type="run.started", source="host")])
    first = await pull.events_page(RUN, EventPageParams(limit=3))
    assert [e.summary for e in first.items] == ["e2", "e3", "e4"]
    assert first.has_more and first.next_cursor
    second = await pull.events_page(RUN, EventPageParams(limit=3, before_cursor=first.next_cursor))
    assert [e.summary for e in second.items] == ["e0", "e1"]
    assert not second.has_more and second.next_cursor is None


async def test_events_get_is_scoped_to_the_conversation(stores: HostStores, pull: PullAPI) -> None:
    """An event of another conversation, or a host record, is ``not_found``."""
    own = (await stores.events.append(event("c1"))).event
    other = (await stores.events.append(event("secret"))).event
    (host,) = await stores.events.append_many([event("c1", kind="host", source="host")])
    record = await pull.events_get(RUN, EventGetParams(event_id=own.event_id))
    assert record.event_id == own.event_id and record.cursor
    for event_id in (other.event_id, host.event.event_id, "missing"):
        with pytest.raises(NotFoundError, match="event not found"):
            await pull.events_get(RUN, EventGetParams(event_id=event_id))
    granted = access(C1, readable=frozenset({"secret"}))
    assert (
        await pull.events_get(granted, EventGetParams(event_id=other.event_id))
    ).event_id == other.event_id


# -- artifacts ----------------------------------------------------------------------------------------------


async def test_artifacts_are_readable_only_by_conversation_run_or_grant(
    stores: HostStores, pull: PullAPI
) -> None:
    """Own conversation, own run or a granted id can read; anything else is ``not_found``."""
    by_conversation = await stores.artifacts.put(
        b"c", mime_type=None, name=None, source="platform", owner=ArtifactOwner(conversation_id="c1")
    )
    by_run = await stores.artifacts.put(
        b"r", mime_type=None, name=None, source="runner", owner=ArtifactOwner(run_id="run-1")
    )
    foreign = await stores.artifacts.put(
        b"f",
        mime_type=None,
        name=None,
        source="platform",
        owner=ArtifactOwner(conversation_id="secret", run_id="run-9"),
    )
    for record in (by_conversation, by_run):
        meta = await pull.artifacts_metadata(RUN, ArtifactIdParams(artifact_id=record.artifact_id))
        assert meta.artifact_id == record.artifact_id
    with pytest.raises(NotFoundError, match="artifact not found"):
        await pull.artifacts_metadata(RUN, ArtifactIdParams(artifact_id=foreign.artifact_id))
    with pytest.raises(NotFoundError, match="artifact not found"):
        await pull.artifacts_read_range(RUN, ArtifactReadParams(artifact_id=foreign.artifact_id))
    with pytest.raises(NotFoundError, match="artifact not found"):
        _ = [
            c
            async for c in pull.artifacts_open_stream(RUN, ArtifactIdParams(artifact_id=foreign.artifact_id))
        ]
    granted = access(C1, artifact_ids=frozenset({foreign.artifact_id}))
    chunk = await pull.artifacts_read_range(granted, ArtifactReadParams(artifact_id=foreign.artifact_id))
    assert base64.b64decode(chunk.data_base64) == b"f"


async def test_expired_artifacts_are_not_found_through_the_api(stores: HostStores, pull: PullAPI) -> None:
    """An expired artifact of the run's own conversation is ``not_found``."""
    record = await stores.artifacts.put(
        b"x",
        mime_type=None,
        name=None,
        source="host",
        owner=ArtifactOwner(conversation_id="c1"),
        expires_at=now_ms() - 1,
    )
    with pytest.raises(NotFoundError, match="artifact not found"):
        await pull.artifacts_metadata(RUN, ArtifactIdParams(artifact_id=record.artifact_id))


async def test_read_range_is_capped_at_one_mib(stores: HostStores, pull: PullAPI) -> None:
    """A range read returns at most 1 MiB and says whether bytes remain; past the end is invalid."""
    data = bytes(range(256)) * (5 * 4096 + 1)
    record = await stores.artifacts.put(
        data,
        mime_type="application/octet-stream",
        name=None,
        source="tool",
        owner=ArtifactOwner(run_id="run-1"),
    )
    chunk = await pull.artifacts_read_range(
        RUN, ArtifactReadParams(artifact_id=record.artifact_id, offset=10, length=10 * MAX_READ_BYTES)
    )
    assert chunk.length == MAX_READ_BYTES and chunk.has_more and chunk.size == len(data)
    assert base64.b64decode(chunk.data_base64) == data[10 : 10 + MAX_READ_BYTES]
    tail = await pull.artifacts_read_range(
        RUN, ArtifactReadParams(artifact_id=record.artifact_id, offset=len(data) - 5, length=100)
    )
    assert (tail.length, tail.has_more) == (5, False)
    with pytest.raises(InvalidArgumentError, match=r"offset 5243137 is past the end \(5243136 bytes\)"):
        await pull.artifacts_read_range(
            RUN, ArtifactReadParams(artifact_id=record.artifact_id, offset=len(data) + 1)
        )


async def test_open_stream_returns_every_byte_in_order(stores: HostStores, pull: PullAPI) -> None:
    """The stream's chunks concatenate to the artifact, with offsets and ``has_more`` consistent."""
    data = bytes(range(256)) * 3000
    record = await stores.artifacts.put(
        data, mime_type=None, name=None, source="tool", owner=ArtifactOwner(run_id="run-1")
    )
    chunks = [
        c async for c in pull.artifacts_open_stream(RUN, ArtifactIdParams(artifact_id=record.artifact_id))
    ]
    assert b"".join(base64.b64decode(c.data_base64) for c in chunks) == data
    assert [c.has_more for c in chunks] == [True] * (len(chunks) - 1) + [False]
    assert chunks[1].offset == chunks[0].length


# -- state and storage --------------------------------------------------------------------------------------

CONV_OWNER = StateOwner("conversation", ("acme/echo:echo", "b1", "c1", ""))
STATEFUL = access(
    C1,
    state_owners={"conversation": CONV_OWNER},
    storage_owners={"plugin": StorageOwner("plugin", "acme/echo")},
)


async def test_state_round_trip_through_the_api(pull: PullAPI) -> None:
    """set, get, list and delete work on a granted scope, with versions."""
    written = await pull.state_set(STATEFUL, StateSetParams(scope="conversation", key="k", value={"a": 1}))
    assert (written.exists, written.version) == (True, 1)
    read = await pull.state_get(STATEFUL, StateGetParams(scope="conversation", key="k"))
    assert (read.value, read.version) == ({"a": 1}, 1)
    listed = await pull.state_list(STATEFUL, StateListParams(scope="conversation"))
    assert [e.key for e in listed.items] == ["k"]
    await pull.state_delete(STATEFUL, StateDeleteParams(scope="conversation", key="k"))
    gone = await pull.state_get(STATEFUL, StateGetParams(scope="conversation", key="k"))
    assert (gone.exists, gone.value, gone.version) == (False, None, 0)


async def test_state_of_an_ungranted_scope_is_unauthorized(pull: PullAPI) -> None:
    """Every state action on a scope the run was not granted is ``unauthorized``."""
    with pytest.raises(UnauthorizedError, match="state scope 'workspace' is not granted to this run"):
        await pull.state_get(STATEFUL, StateGetParams(scope="workspace", key="k"))
    with pytest.raises(UnauthorizedError, match="state scope 'actor' is not granted to this run"):
        await pull.state_set(STATEFUL, StateSetParams(scope="actor", key="k", value=1))
    with pytest.raises(UnauthorizedError, match="state scope 'runner' is not granted to this run"):
        await pull.state_list(STATEFUL, StateListParams(scope="runner"))
    with pytest.raises(UnauthorizedError, match="state scope 'binding' is not granted to this run"):
        await pull.state_delete(STATEFUL, StateDeleteParams(scope="binding", key="k"))


async def test_state_errors_map_to_protocol_codes(pull: PullAPI) -> None:
    """Too large is ``payload_too_large``; a version conflict and NaN are ``invalid_argument``."""
    with pytest.raises(PayloadTooLargeError, match="state value is 300002 bytes; the limit is 262144 bytes"):
        await pull.state_set(STATEFUL, StateSetParams(scope="conversation", key="k", value="x" * 300_000))
    await pull.state_set(STATEFUL, StateSetParams(scope="conversation", key="k", value=1))
    with pytest.raises(InvalidArgumentError, match="state key 'k' is at version 1, not 0") as conflict:
        await pull.state_set(
            STATEFUL, StateSetParams(scope="conversation", key="k", value=2, expected_version=0)
        )
    assert conflict.value.details["current_version"] == 1
    # The SDK's models refuse NaN themselves; a host must still refuse one that bypassed validation.
    nan = StateSetParams.model_construct(scope="conversation", key="n", value=float("nan"))
    with pytest.raises(
        InvalidArgumentError, match="state value contains NaN or Infinity, which JSON cannot hold"
    ):
        await pull.state_set(STATEFUL, nan)


async def test_state_list_cursor_is_bound_to_scope_and_prefix(stores: HostStores, pull: PullAPI) -> None:
    """The state.list cursor continues its listing and is refused with another prefix."""
    for n in range(5):
        await stores.state.set(CONV_OWNER, f"p/{n}", n, runner_id=None)
    first = await pull.state_list(STATEFUL, StateListParams(scope="conversation", prefix="p/", limit=3))
    assert [e.key for e in first.items] == ["p/0", "p/1", "p/2"] and first.next_cursor
    rest = await pull.state_list(
        STATEFUL, StateListParams(scope="conversation", prefix="p/", limit=3, cursor=first.next_cursor)
    )
    assert [e.key for e in rest.items] == ["p/3", "p/4"] and rest.next_cursor is None
    with pytest.raises(
        InvalidArgumentError, match="invalid cursor: it was not issued for this API, conversation or scope"
    ):
        await pull.state_list(
            STATEFUL, StateListParams(scope="conversation", prefix="q/", cursor=first.next_cursor)
        )


async def test_storage_round_trip_and_scoping(pull: PullAPI) -> None:
    """Storage works on a granted area, refuses others, bad base64 and oversized values."""
    value = base64.b64encode(b"\x00bytes").decode()
    written = await pull.storage_set(STATEFUL, StorageSetParams(area="plugin", key="k", value_base64=value))
    assert (written.exists, written.size) == (True, 6)
    read = await pull.storage_get(STATEFUL, StorageGetParams(area="plugin", key="k"))
    assert read.value_bytes() == b"\x00bytes"
    listed = await pull.storage_list(STATEFUL, StorageListParams(area="plugin"))
    assert [e.key for e in listed.items] == ["k"]
    await pull.storage_delete(STATEFUL, StorageDeleteParams(area="plugin", key="k"))
    assert not (await pull.storage_get(STATEFUL, StorageGetParams(area="plugin", key="k"))).exists
    with pytest.raises(UnauthorizedError, match="storage area 'workspace' is not granted to this run"):
        await pull.storage_get(STATEFUL, StorageGetParams(area="workspace", key="k"))
    with pytest.raises(InvalidArgumentError, match="value_base64 is not valid base64"):
        await pull.storage_set(STATEFUL, StorageSetParams(area="plugin", key="k", value_base64="not base64!"))
    big = base64.b64encode(b"x" * (1024 * 1024 + 1)).decode()
    with pytest.raises(
        PayloadTooLargeError, match="storage value is 1048577 bytes; the limit is 1048576 bytes"
    ):
        await pull.storage_set(STATEFUL, StorageSetParams(area="plugin", key="k", value_base64=big))


async def test_storage_list_pages_with_a_cursor(pull: PullAPI) -> None:
    """storage.list continues with its cursor and caps the page at 100."""
    for n in range(105):
        await pull.storage_set(
            STATEFUL,
            StorageSetParams(area="plugin", key=f"k{n:03d}", value_base64=base64.b64encode(b"v").decode()),
        )
    first = await pull.storage_list(STATEFUL, StorageListParams(area="plugin", limit=500))
    assert len(first.items) == 100 and first.has_more and first.next_cursor
    rest = await pull.storage_list(STATEFUL, StorageListParams(area="plugin", cursor=first.next_cursor))
    assert [e.key for e in rest.items] == ["k100", "k101", "k102", "k103", "k104"]


def test_cursor_codec_round_trips_positions_and_checks_its_binding() -> None:
    """Integer and text positions round-trip; another binding, API or key does not verify."""
    codec = CursorCodec(CURSOR_KEY)
    for position in (0, 7, -1, 2**54, "", "key/ü/%_", "k" * 200):
        token = codec.encode("state.list", ("owner", "prefix"), position)
        assert codec.decode(token, "state.list", ("owner", "prefix")) == position
        with pytest.raises(
            InvalidArgumentError,
            match="invalid cursor: it was not issued for this API, conversation or scope",
        ):
            codec.decode(token, "state.list", ("owner", "other"))
        with pytest.raises(
            InvalidArgumentError,
            match="invalid cursor: it was not issued for this API, conversation or scope",
        ):
            codec.decode(token, "storage.list", ("owner", "prefix"))
        with pytest.raises(
            InvalidArgumentError,
            match="invalid cursor: it was not issued for this API, conversation or scope",
        ):
            CursorCodec(b"x" * 100).decode(token, "state.list", ("owner", "prefix"))
    with pytest.raises(ValueError, match="16 bytes"):
        CursorCodec(b"short")


async def test_history_cursors_stay_stable_while_items_arrive(stores: HostStores, pull: PullAPI) -> None:
    """Paging back with cursors while new items are appended sees every older item exactly once."""
    await _fill(stores, C1, 45)
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = await pull.history_page(RUN, HistoryPageParams(before_cursor=cursor, limit=10))
        await stores.transcript.append_many([item(C1, "late")])
        seen = [i.item_id for i in page.items] + seen
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(seen) == len(set(seen)) == 45


async def test_events_page_limit_is_capped_at_100(stores: HostStores, pull: PullAPI) -> None:
    """``events.page`` defaults to 50 records and never returns more than 100."""
    await stores.events.append_many([event("c1") for _ in range(120)])
    assert len((await pull.events_page(RUN, EventPageParams())).items) == 50
    page = await pull.events_page(RUN, EventPageParams(limit=1000))
    assert len(page.items) == 100 and page.has_more
