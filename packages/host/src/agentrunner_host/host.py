"""``Host``: the pieces wired together (registry, snapshots, dispatcher, orchestrator, stores)."""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping

from agentrunner import AgentRunner

from agentrunner_host.definitions import AgentBinding
from agentrunner_host.providers.protocols import KnowledgeProvider, ModelProvider, ToolProvider
from agentrunner_host.runtime.connection import RunnerConnection
from agentrunner_host.runtime.inprocess import InProcessConnection

from .authorization import SnapshotBuilder
from .bindings import BindingSet
from .catalog import ResourceCatalog, SelectorRegistry
from .context_builder import ContextBuilder
from .dispatcher import BackCallDispatcher
from .facts_api import PullAPI
from .harness import HarnessPolicy, HarnessSupport
from .orchestrator import Orchestrator
from .ports import FactsAPI, RunStores
from .registry import RunnerRegistry

__all__ = ["Host"]


class Host:
    """A host in one object. Build it with :meth:`create`; close it with :meth:`aclose`."""

    def __init__(
        self,
        *,
        registry: RunnerRegistry,
        dispatcher: BackCallDispatcher,
        orchestrator: Orchestrator,
        catalog: ResourceCatalog,
        stores: RunStores | None = None,
    ) -> None:
        self.registry = registry
        self.dispatcher = dispatcher
        self.orchestrator = orchestrator
        self.catalog = catalog
        self.stores = stores

    @classmethod
    def create(
        cls,
        *,
        bindings: Iterable[AgentBinding] = (),
        plugins: Mapping[str, Iterable[AgentRunner]] | None = None,
        connections: Iterable[RunnerConnection] = (),
        catalog: ResourceCatalog | None = None,
        selectors: SelectorRegistry | None = None,
        models: ModelProvider | None = None,
        tools: ToolProvider | None = None,
        knowledge: KnowledgeProvider | None = None,
        stores: RunStores | None = None,
        pull: FactsAPI | None = None,
        cursor_key: bytes | None = None,
        host_version: str | None = None,
        max_timeout_seconds: float = 3600.0,
        harness: HarnessPolicy | None = None,
    ) -> Host:
        """Wire a host. ``plugins`` maps plugin ids (``author/plugin``) to in-process runner instances.

        With ``stores`` and no ``pull``, the pull APIs are served from the stores; history cursors are signed
        with ``cursor_key`` (pass a persisted key so cursors survive a restart; a random one otherwise).
        """
        catalog = catalog or ResourceCatalog()
        if stores is not None and pull is None:
            pull = PullAPI(stores, cursor_key=cursor_key or secrets.token_bytes(32))
        dispatcher = BackCallDispatcher(
            pull=pull,
            models=models,
            tools=tools,
            knowledge=knowledge,
            idempotency=stores.idempotency if stores is not None else None,
        )
        registry = RunnerRegistry(connections)
        for plugin_id, runners in (plugins or {}).items():
            registry.add(InProcessConnection(plugin_id, runners, handler=dispatcher))
        orchestrator = Orchestrator(
            registry=registry,
            snapshots=SnapshotBuilder(catalog, selectors=selectors, max_timeout_seconds=max_timeout_seconds),
            dispatcher=dispatcher,
            contexts=ContextBuilder(host_version=host_version),
            bindings=BindingSet(bindings),
            stores=stores,
            pull=pull,
            harness=HarnessSupport(harness, dispatcher) if harness is not None else None,
        )
        return cls(
            registry=registry,
            dispatcher=dispatcher,
            orchestrator=orchestrator,
            catalog=catalog,
            stores=stores,
        )

    async def aclose(self) -> None:
        """Cancel live runs and close plugin connections."""
        await self.orchestrator.aclose()
        for conn in self.registry.connections():
            await conn.aclose()
        if self.orchestrator.harness is not None:
            await self.orchestrator.harness.aclose()
