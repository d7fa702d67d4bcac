"""The event log: ordering, per-conversation numbering, idempotent ingestion, scoping."""

from __future__ import annotations

import asyncio

from agentrunner_host.access import ConversationKey
from agentrunner_host.stores import MAX_SUMMARY_CHARS, HostStores

from .helpers import event, item, uid


async def test_events_are_numbered_per_conversation_from_one(stores: HostStores) -> None:
    """Each conversation has its own seq stream starting at 1, independent of the others."""
    a1 = await stores.events.append(event("a"))
    b1 = await stores.events.append(event("b"))
    a2 = await stores.events.append(event("a"))
    assert (a1.event.seq, b1.event.seq, a2.event.seq) == (1, 1, 2)
    assert not a1.duplicate


async def test_events_without_a_conversation_have_no_seq(stores: HostStores) -> None:
    """An event without a conversation is stored with seq None and found by id only when unscoped."""
    outcome = await stores.events.append(event(None))
    assert outcome.event.seq is None
    assert await stores.events.get(outcome.event.event_id, conversation=None) == outcome.event
    assert await stores.events.get(outcome.event.event_id, conversation=ConversationKey("c1")) is None


async def test_appending_the_same_event_id_twice_stores_one_event(stores: HostStores) -> None:
    """A re-delivered event is reported as a duplicate of the stored one and consumes no seq."""
    entry = event("c1")
    first = await stores.events.append(entry)
    again = await stores.events.append(entry)
    later = await stores.events.append(event("c1"))
    assert again.duplicate
    assert again.event == first.event
    assert later.event.seq == 2
    page = await stores.events.page(conversation=ConversationKey("c1"), before_seq=None, limit=10)
    assert [e.seq for e in page] == [2, 1]


async def test_concurrent_appends_get_gapless_unique_seqs(stores: HostStores) -> None:
    """Fifty concurrent appends to one conversation get exactly the seqs 1..50."""
    outcomes = await asyncio.gather(*(stores.events.append(event("busy")) for _ in range(50)))
    assert sorted(o.event.seq or 0 for o in outcomes) == list(range(1, 51))
    assert await stores.events.latest_seq(conversation=ConversationKey("busy")) == 50


async def test_concurrent_appends_of_one_event_id_store_it_once(stores: HostStores) -> None:
    """Twenty concurrent deliveries of one event yield one stored event and nineteen duplicates."""
    entry = event("race")
    outcomes = await asyncio.gather(*(stores.events.append(entry) for _ in range(20)))
    assert sum(not o.duplicate for o in outcomes) == 1
    assert {o.event.seq for o in outcomes} == {1}


async def test_page_returns_newest_first_and_respects_before_seq(stores: HostStores) -> None:
    """Pages walk back from the newest event, strictly before ``before_seq``."""
    for _ in range(7):
        await stores.events.append(event("c1"))
    conversation = ConversationKey("c1")
    first = await stores.events.page(conversation=conversation, before_seq=None, limit=3)
    second = await stores.events.page(conversation=conversation, before_seq=first[-1].seq, limit=3)
    assert [e.seq for e in first] == [7, 6, 5]
    assert [e.seq for e in second] == [4, 3, 2]


async def test_page_hides_host_records_unless_asked(stores: HostStores) -> None:
    """Host records share the seq stream but are only paged with ``include_host``."""
    await stores.events.append(event("c1"))
    await stores.events.append_many([event("c1", kind="host", event_type="run.started", source="host")])
    await stores.events.append(event("c1"))
    conversation = ConversationKey("c1")
    visible = await stores.events.page(conversation=conversation, before_seq=None, limit=10)
    everything = await stores.events.page(
        conversation=conversation, before_seq=None, limit=10, include_host=True
    )
    assert [e.seq for e in visible] == [3, 1]
    assert [e.seq for e in everything] == [3, 2, 1]
    assert await stores.events.latest_seq(conversation=conversation) == 3


async def test_page_filters_by_event_type(stores: HostStores) -> None:
    """``event_types`` keeps only the named types."""
    await stores.events.append(event("c1", event_type="message.received"))
    await stores.events.append(event("c1", event_type="message.recalled"))
    page = await stores.events.page(
        conversation=ConversationKey("c1"), before_seq=None, limit=10, event_types=["message.recalled"]
    )
    assert [e.event_type for e in page] == ["message.recalled"]


async def test_threads_are_paged_separately(stores: HostStores) -> None:
    """A thread's page holds only that thread's events; the main line holds only its own."""
    await stores.events.append(event("c1"))
    await stores.events.append(event("c1", thread_id="t1"))
    main = await stores.events.page(conversation=ConversationKey("c1"), before_seq=None, limit=10)
    thread = await stores.events.page(conversation=ConversationKey("c1", "t1"), before_seq=None, limit=10)
    assert [e.seq for e in main] == [1]
    assert [(e.seq, e.thread_id) for e in thread] == [(2, "t1")]


async def test_get_refuses_an_event_of_another_conversation(stores: HostStores) -> None:
    """``get`` returns None for an event of another conversation or thread unless it is granted."""
    stored = (await stores.events.append(event("secret"))).event
    assert await stores.events.get(stored.event_id, conversation=ConversationKey("mine")) is None
    assert await stores.events.get(stored.event_id, conversation=ConversationKey("secret", "t9")) is None
    assert await stores.events.get(stored.event_id, conversation=ConversationKey("secret")) == stored
    granted = await stores.events.get(
        stored.event_id, conversation=ConversationKey("mine"), also_readable={"secret"}
    )
    assert granted == stored


async def test_long_summaries_are_cut_to_the_limit(stores: HostStores) -> None:
    """A summary longer than 1000 characters is stored cut to 1000, ending with an ellipsis."""
    stored = (await stores.events.append(event("c1", summary="x" * 5000))).event
    assert stored.summary is not None
    assert len(stored.summary) == MAX_SUMMARY_CHARS
    assert stored.summary.endswith("…")
    fetched = await stores.events.get(stored.event_id, conversation=ConversationKey("c1"))
    assert fetched is not None and fetched.summary == stored.summary


async def test_event_fields_round_trip(stores: HostStores) -> None:
    """Every field of an entry comes back unchanged, JSON data included."""
    entry = event(
        "c1",
        thread_id="t",
        workspace_id="w",
        bot_id="bot",
        actor_type="user",
        actor_id="u1",
        subject_type="message",
        subject_id="m1",
        source_event_type="FriendMessage",
        run_id="r",
        runner_id="acme/x:y",
        data={"nested": {"list": [1, 2.5, None, "ü"]}},
        event_time=123,
    )
    stored = (await stores.events.append(entry)).event
    fetched = await stores.events.get(entry.event_id, conversation=ConversationKey("c1", "t"))
    assert fetched is not None and fetched == stored
    assert fetched.data == {"nested": {"list": [1, 2.5, None, "ü"]}}
    assert (fetched.actor_id, fetched.event_time, fetched.runner_id) == ("u1", 123, "acme/x:y")


async def test_a_batch_naming_one_id_twice_stores_it_once(stores: HostStores) -> None:
    """``append_many`` with a repeated id stores the first copy and reports the second as duplicate."""
    entry = event("c1", event_id=uid("dup"))
    outcomes = await stores.events.append_many([entry, entry, event("c1")])
    assert [o.duplicate for o in outcomes] == [False, True, False]
    assert [o.event.seq for o in outcomes] == [1, 1, 2]


async def test_positions_reads_both_newest_seqs(stores: HostStores) -> None:
    """``positions`` returns the newest transcript seq and the newest real event seq of the thread."""
    conversation = ConversationKey("c1")
    assert await stores.positions(conversation=conversation) == (None, None)
    await stores.events.append(event("c1"))
    await stores.events.append_many([event("c1", kind="host", source="host")])
    await stores.transcript.append_many(
        [item(conversation), item(conversation), item(ConversationKey("c1", "t"))]
    )
    assert await stores.positions(conversation=conversation) == (2, 1)
