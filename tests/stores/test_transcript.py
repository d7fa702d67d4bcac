"""The transcript: per-thread numbering, keyset paging both ways, full-text search."""

from __future__ import annotations

import asyncio

import pytest
from agentrunner_host.access import ConversationKey
from agentrunner_host.stores import HostStores, InvalidValueError

from .helpers import item

C1 = ConversationKey("c1")


async def _fill(stores: HostStores, conversation: ConversationKey, count: int) -> None:
    await stores.transcript.append_many([item(conversation, f"message {n}") for n in range(1, count + 1)])


async def test_items_are_numbered_per_thread_from_one(stores: HostStores) -> None:
    """Each (conversation, thread) line numbers its items 1, 2, 3 independently."""
    stored = await stores.transcript.append_many(
        [item(C1), item(ConversationKey("c1", "t")), item(C1), item(ConversationKey("c2"))]
    )
    assert [s.seq for s in stored] == [1, 1, 2, 1]
    assert await stores.transcript.latest_seq(conversation=C1) == 2
    assert await stores.transcript.latest_seq(conversation=ConversationKey("empty")) is None


async def test_appending_an_item_id_again_stores_nothing(stores: HostStores) -> None:
    """A repeated item id is returned as stored and takes no new seq."""
    entry = item(C1)
    first = await stores.transcript.append_many([entry])
    again = await stores.transcript.append_many([entry, item(C1)])
    assert again[0] == first[0]
    assert again[1].seq == 2


async def test_backward_paging_walks_to_older_items_and_returns_them_oldest_first(stores: HostStores) -> None:
    """Backward pages take the newest items of the range and list them in conversation order."""
    await _fill(stores, C1, 10)
    items, more = await stores.transcript.page(conversation=C1, limit=4, direction="backward")
    assert ([i.seq for i in items], more) == ([7, 8, 9, 10], True)
    items, more = await stores.transcript.page(conversation=C1, before_seq=7, limit=4, direction="backward")
    assert ([i.seq for i in items], more) == ([3, 4, 5, 6], True)
    items, more = await stores.transcript.page(conversation=C1, before_seq=3, limit=4, direction="backward")
    assert ([i.seq for i in items], more) == ([1, 2], False)


async def test_forward_paging_walks_to_newer_items(stores: HostStores) -> None:
    """Forward pages start at the oldest item (or after ``after_seq``) and walk to newer ones."""
    await _fill(stores, C1, 5)
    items, more = await stores.transcript.page(conversation=C1, limit=2, direction="forward")
    assert ([i.seq for i in items], more) == ([1, 2], True)
    items, more = await stores.transcript.page(conversation=C1, after_seq=3, limit=2, direction="forward")
    assert ([i.seq for i in items], more) == ([4, 5], False)


async def test_paging_with_both_bounds_stays_inside_them(stores: HostStores) -> None:
    """``after_seq`` and ``before_seq`` together select the open range between them."""
    await _fill(stores, C1, 10)
    items, more = await stores.transcript.page(
        conversation=C1, after_seq=2, before_seq=6, limit=10, direction="forward"
    )
    assert ([i.seq for i in items], more) == ([3, 4, 5], False)


async def test_pages_stay_stable_while_new_items_arrive(stores: HostStores) -> None:
    """Walking backward while others append never repeats or skips an older item."""
    await _fill(stores, C1, 30)
    seen: list[int] = []
    before: int | None = None
    while True:
        items, more = await stores.transcript.page(
            conversation=C1, before_seq=before, limit=7, direction="backward"
        )
        await stores.transcript.append_many([item(C1, "late")])
        seen.extend(i.seq for i in items)
        if not more:
            break
        before = items[0].seq
    assert len(seen) == len(set(seen)) == 30
    assert sorted(seen) == list(range(1, 31))


async def test_concurrent_appends_keep_transcript_seqs_gapless(stores: HostStores) -> None:
    """Fifty concurrent single-item appends to one thread get exactly seqs 1..50."""
    stored = await asyncio.gather(*(stores.transcript.append_many([item(C1)]) for _ in range(50)))
    assert sorted(s[0].seq for s in stored) == list(range(1, 51))


async def test_item_fields_round_trip(stores: HostStores) -> None:
    """Contents, artifacts and metadata come back as stored JSON."""
    entry = item(
        ConversationKey("c1", "t", workspace_id="w"),
        "see attachment",
        role="assistant",
        item_type="message",
        run_id="r1",
        event_id="e1",
        contents=[{"type": "text", "text": "see attachment"}],
        artifacts=[{"artifact_id": "art_1", "artifact_type": "image"}],
        metadata={"k": [1, 2]},
        created_at=42,
    )
    (stored,) = await stores.transcript.append_many([entry])
    items, _ = await stores.transcript.page(conversation=ConversationKey("c1", "t"), limit=5)
    assert items == [stored]
    assert stored.created_at == 42
    assert stored.artifacts == [{"artifact_id": "art_1", "artifact_type": "image"}]
    assert stored.conversation.workspace_id == "w"


async def test_search_finds_items_containing_every_word(stores: HostStores) -> None:
    """Search matches items holding all query words, within the thread only, in conversation order."""
    await stores.transcript.append_many(
        [
            item(C1, "the database password is in the vault"),
            item(C1, "lunch at noon"),
            item(C1, "database migration finished"),
            item(ConversationKey("c2"), "database elsewhere"),
            item(ConversationKey("c1", "t"), "database in a thread"),
        ]
    )
    hits = await stores.transcript.search(conversation=C1, query="database", top_k=10)
    assert [h.content for h in hits] == [
        "the database password is in the vault",
        "database migration finished",
    ]
    hits = await stores.transcript.search(conversation=C1, query="Database, vault!", top_k=10)
    assert [h.seq for h in hits] == [1]


async def test_search_filters_by_role_and_event_type(stores: HostStores) -> None:
    """``roles`` and ``event_types`` narrow the hits."""
    await stores.transcript.append_many(
        [
            item(C1, "deploy now", role="user"),
            item(C1, "deploy done", role="assistant"),
            item(C1, "deploy recalled", role="event", item_type="event", event_type="message.recalled"),
        ]
    )
    hits = await stores.transcript.search(conversation=C1, query="deploy", roles=["assistant"])
    assert [h.content for h in hits] == ["deploy done"]
    hits = await stores.transcript.search(conversation=C1, query="deploy", event_types=["message.recalled"])
    assert [h.content for h in hits] == ["deploy recalled"]
    assert await stores.transcript.search(conversation=C1, query="deploy", roles=[]) == []


@pytest.mark.parametrize(
    "query",
    [
        "%",
        "_",
        "%%%",
        "'; DROP TABLE transcript_items; --",
        '"',
        'NEAR("a" "b")',
        "a* OR b",
        "body : x",
        "scope : s",
        "-x",
        "^start",
        "(((",
        "\\",
        "!!! & | ~ <-> :*",
    ],
)
async def test_search_treats_hostile_input_as_plain_words(stores: HostStores, query: str) -> None:
    """Wildcards, quotes and FTS/tsquery operators never raise and never match everything."""
    await stores.transcript.append_many([item(C1, "alpha beta"), item(C1, "gamma 100%_done")])
    hits = await stores.transcript.search(conversation=C1, query=query, top_k=50)
    assert len(hits) < 2
    still_there, _ = await stores.transcript.page(conversation=C1, limit=10)
    assert len(still_there) == 2


async def test_search_matches_operator_words_literally(stores: HostStores) -> None:
    """Words such as OR and NEAR are searched for as words, not used as operators."""
    await stores.transcript.append_many([item(C1, "this OR that"), item(C1, "this only")])
    hits = await stores.transcript.search(conversation=C1, query="this OR that")
    assert [h.content for h in hits] == ["this OR that"]


async def test_search_is_capped_at_fifty_hits(stores: HostStores) -> None:
    """``top_k`` above 50 returns at most 50 items."""
    await stores.transcript.append_many([item(C1, f"needle {n}") for n in range(60)])
    hits = await stores.transcript.search(conversation=C1, query="needle", top_k=1000)
    assert len(hits) == 50


async def test_concurrent_readers_and_a_writer_all_succeed(stores: HostStores) -> None:
    """Twenty concurrent pages while items are appended all return full, ordered pages."""
    await _fill(stores, C1, 60)

    async def read() -> list[int]:
        items, _ = await stores.transcript.page(conversation=C1, before_seq=51, limit=50)
        return [i.seq for i in items]

    pages, _ = await asyncio.gather(
        asyncio.gather(*(read() for _ in range(20))),
        asyncio.gather(*(stores.transcript.append_many([item(C1, "more")]) for _ in range(10))),
    )
    assert all(page == list(range(1, 51)) for page in pages)


@pytest.mark.parametrize(
    "element",
    [
        {"type": "image", "url": "data:image/png;base64,iVBORw0KGgo="},
        {"type": "file", "name": "a.bin", "data_base64": "AAAA"},
        {"type": "audio", "content_base64": "AAAA"},
    ],
)
async def test_inline_binary_content_is_refused(stores: HostStores, element: dict[str, str]) -> None:
    """Content elements carrying base64 or a data: URL are refused; nothing is stored."""
    with pytest.raises(InvalidValueError, match="; store an artifact"):
        await stores.transcript.append_many([item(C1, "x", contents=[element])])
    assert await stores.transcript.latest_seq(conversation=C1) is None
