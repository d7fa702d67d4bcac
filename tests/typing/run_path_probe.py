"""Typing probe of the run path: the host's wiring is typed end to end, so a misspelt store, facts or
idempotency method is a type error. Each misuse is marked with the one rule pyright must report on its line;
``test_run_path_probe.py`` checks that, and that the probe is otherwise clean."""

from __future__ import annotations

from agentrunner_host.access import RunAccess
from agentrunner_host.dispatcher import BackCallDispatcher
from agentrunner_host.orchestrator import Orchestrator
from agentrunner_host.ports import FactsAPI, IdempotencyKeys, RunStores
from agentrunner_host.stores import RunStart


async def through_the_orchestrator(orchestrator: Orchestrator, start: RunStart) -> None:
    stores = orchestrator.stores
    assert stores is not None
    await stores.runs.start(start)
    await stores.runs.strat(start)  # pyright: ignore[reportAttributeAccessIssue]


async def through_the_protocols(
    stores: RunStores, facts: FactsAPI, keys: IdempotencyKeys, access: RunAccess
) -> None:
    await stores.events.append_many([])
    await stores.evnets.append_many([])  # pyright: ignore[reportAttributeAccessIssue]
    await facts.history_handles(access)
    await facts.history_handels(access)  # pyright: ignore[reportAttributeAccessIssue]
    await keys.get(("plugin", "binding", "state.set"), "k")
    await keys.gte(("plugin", "binding", "state.set"), "k")  # pyright: ignore[reportAttributeAccessIssue]


async def through_the_dispatcher(dispatcher: BackCallDispatcher) -> None:
    keys, facts = dispatcher.idempotency, dispatcher.pull
    assert keys is not None and facts is not None
    await keys.put(("plugin", "binding", "state.set"), "k", {"ok": True})
    await keys.puts(("plugin", "binding", "state.set"), "k", {"ok": True})  # pyright: ignore[reportAttributeAccessIssue]
