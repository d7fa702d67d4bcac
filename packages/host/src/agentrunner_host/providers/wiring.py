"""The model, tool and knowledge providers of a service, built from the configuration's provider sections."""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass

from agentrunner import KnowledgeBaseResource, ToolResource
from sqlalchemy.ext.asyncio import AsyncEngine

from agentrunner_host.catalog import ResourceCatalog
from agentrunner_host.config import Settings
from agentrunner_host.providers.protocols import KnowledgeProvider, ModelProvider, ToolProvider
from agentrunner_host.stores import HostStores
from agentrunner_host.tool_risk import ToolRisk

__all__ = ["Providers", "open_providers"]

log = logging.getLogger("agentrunner.service")


@dataclass(frozen=True, slots=True)
class Providers:
    """What the dispatcher serves ``models.*``, ``tools.*`` and ``knowledge.*`` with, and the catalog."""

    models: ModelProvider | None
    tools: ToolProvider | None
    knowledge: KnowledgeProvider | None
    catalog: ResourceCatalog


async def open_providers(
    settings: Settings, *, engine: AsyncEngine, stores: HostStores, stack: AsyncExitStack
) -> Providers:
    """Build the configured providers (closed by *stack*); unconfigured ones stay ``None``."""
    config = settings.config
    models: ModelProvider | None = None
    tools: ToolProvider | None = None
    knowledge: KnowledgeProvider | None = None
    model_resources = [m.resource() for m in config.models]
    if config.models:
        from agentrunner_host.providers.llm import OpenAICompatibleModels

        openai = OpenAICompatibleModels(config.models, artifacts=stores.artifacts, environ=settings.environ)
        stack.push_async_callback(openai.aclose)
        models = openai
    tool_resources: list[ToolResource] = []
    tool_risks: dict[str, frozenset[ToolRisk]] = {}
    if config.mcp_servers or config.python_tools:
        from agentrunner_host.providers.tools import HostTools

        host_tools = HostTools(
            mcp_servers=config.mcp_servers,
            python_tools=None if config.python_tools else [],
            artifacts=stores.artifacts,
            environ=settings.environ,
        )
        stack.push_async_callback(host_tools.aclose)
        if config.mcp_servers:
            await host_tools.refresh()
        tool_resources = host_tools.resources()
        tool_risks = host_tools.risks()
        tools = host_tools
    kb_resources: list[KnowledgeBaseResource] = []
    if config.knowledge_bases:
        from agentrunner_host.providers.knowledge import EmbeddedKnowledge, KnowledgeIndex

        index = await KnowledgeIndex.open(engine, data_dir=settings.data_dir)
        stack.push_async_callback(index.aclose)
        embedded = EmbeddedKnowledge(
            index, config.knowledge_bases, models=models, model_resources=model_resources
        )
        written = await embedded.sync()
        log.info("knowledge bases indexed: %s", written)
        kb_resources = embedded.resources()
        knowledge = embedded
    catalog = ResourceCatalog(
        models=model_resources, tools=tool_resources, knowledge_bases=kb_resources, tool_risks=tool_risks
    )
    return Providers(models=models, tools=tools, knowledge=knowledge, catalog=catalog)
