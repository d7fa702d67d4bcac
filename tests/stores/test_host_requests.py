"""Requests between hosts (``stores.requests``): taken once by their target, answered, withdrawn only while
untaken, and pruned with the host they were addressed to; runtime attachments count only live hosts."""

from __future__ import annotations

import asyncio
import time

from agentrunner_host.stores import HostStores

LEASE_MS = 60_000


async def test_a_request_is_taken_once_even_by_two_takers_at_the_same_time(stores: HostStores) -> None:
    await stores.hosts.register("host_b", machine="m-b", pid=2, lease_ms=LEASE_MS)
    requests = stores.requests
    await requests.ask("host_b", "cancel", run_id="run_1")
    start = await requests.ask("host_b", "start", body={"event": {"event_id": "e"}, "agent_id": None})
    assert await requests.has_pending("host_b") and not await requests.has_pending("host_c")
    first, second = await asyncio.gather(requests.take("host_b"), requests.take("host_b"))
    taken = first + second
    assert sorted((r.kind, r.run_id) for r in taken) == [("cancel", "run_1"), ("start", None)]
    assert not await requests.has_pending("host_b")
    assert await requests.answer_of(start) == (True, None)
    assert not await requests.withdraw(start)  # taken: its target acts on it
    await requests.answer(start, {"run_id": "run_2"})
    assert await requests.answer_of(start) == (True, {"run_id": "run_2"})
    await requests.drop(start)
    assert await requests.answer_of(start) == (False, None)


async def test_an_untaken_request_is_withdrawn_and_requests_of_gone_hosts_are_pruned(
    stores: HostStores,
) -> None:
    await stores.hosts.register("host_b", machine="m-b", pid=2, lease_ms=LEASE_MS)
    requests = stores.requests
    start = await requests.ask("host_b", "start", body={"event": {}})
    assert await requests.withdraw(start)
    await requests.ask("host_gone", "cancel", run_id="run_1")
    await requests.ask("host_b", "cancel", run_id="run_2")
    await requests.attach("tests/echo", "host_gone")
    await requests.attach("tests/echo", "host_b")
    assert await requests.attached("tests/echo") == ["host_b"]  # only hosts with a live lease
    assert await requests.prune() == 1
    assert not await requests.has_pending("host_gone") and await requests.has_pending("host_b")
    await requests.detach("tests/echo", "host_b")
    assert await requests.attached("tests/echo") == []


async def test_start_requests_older_than_the_cutoff_expire_taken_or_not_and_cancels_stay(
    stores: HostStores,
) -> None:
    """A start whose sender died after its target took (and answered) it is deleted by age, like an untaken
    one; a newer start and every cancel are kept."""
    await stores.hosts.register("host_b", machine="m-b", pid=2, lease_ms=LEASE_MS)
    requests = stores.requests
    answered = await requests.ask("host_b", "start", body={"event": {}})
    await requests.take("host_b")
    await requests.answer(answered, {"run_id": "run_1"})  # the sender is gone: nobody drops it
    untaken = await requests.ask("host_b", "start", body={"event": {}})
    await requests.ask("host_b", "cancel", run_id="run_2")
    now = int(time.time() * 1000)
    assert await requests.expire_starts(created_before=now - 60_000) == 0  # none is that old
    assert await requests.expire_starts(created_before=now + 1_000) == 2
    assert await requests.answer_of(answered) == (False, None)
    assert await requests.answer_of(untaken) == (False, None)
    assert [r.kind for r in await requests.take("host_b")] == ["cancel"]
