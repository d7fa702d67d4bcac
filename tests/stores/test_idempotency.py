"""Idempotency keys: the first answer wins."""

from __future__ import annotations

import asyncio

from agentrunner_host.stores import HostStores


async def test_the_first_answer_is_kept_and_returned(stores: HostStores) -> None:
    """``put`` stores the first answer; later puts return it unchanged; ``get`` finds it."""
    scope = ("acme/echo", "run-1", "state.set")
    assert await stores.idempotency.get(scope, "k") is None
    assert await stores.idempotency.put(scope, "k", {"version": 1}) == {"version": 1}
    assert await stores.idempotency.put(scope, "k", {"version": 2}) == {"version": 1}
    assert await stores.idempotency.get(scope, "k") == {"version": 1}


async def test_scopes_are_structured_not_joined(stores: HostStores) -> None:
    """``("a:b",)`` and ``("a", "b")`` are different scopes."""
    await stores.idempotency.put(("a:b",), "k", {"n": 1})
    await stores.idempotency.put(("a", "b"), "k", {"n": 2})
    assert await stores.idempotency.get(("a:b",), "k") == {"n": 1}
    assert await stores.idempotency.get(("a", "b"), "k") == {"n": 2}


async def test_concurrent_puts_agree_on_one_answer(stores: HostStores) -> None:
    """Concurrent puts of one key all return the same stored answer."""
    answers = await asyncio.gather(*(stores.idempotency.put(("s",), "k", {"n": n}) for n in range(10)))
    assert len({str(a["n"]) for a in answers}) == 1


async def test_sweep_forgets_old_answers(stores: HostStores) -> None:
    """``sweep`` removes answers older than the cutoff."""
    await stores.idempotency.put(("s",), "old", {})
    assert await stores.idempotency.sweep(older_than=0) == 0
    assert await stores.idempotency.sweep(older_than=2**62) == 1
    assert await stores.idempotency.get(("s",), "old") is None
