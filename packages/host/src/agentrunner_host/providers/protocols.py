"""What the dispatcher calls for models, tools and knowledge: interfaces the service layer implements
(OpenAI-compatible models, MCP tool servers, the embedded knowledge index...)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from agentrunner import (
    KnowledgeBaseResource,
    KnowledgeRetrieveResult,
    ModelResource,
    ModelResponse,
    ModelStreamChunk,
    RerankResult,
    ToolCallResult,
    ToolDetail,
    ToolResource,
)
from agentrunner.actions import KnowledgeRetrieveParams, ModelInvokeParams, ModelRerankParams, ToolCallParams

from agentrunner_host.access import RunAccess

__all__ = ["KnowledgeProvider", "ModelProvider", "ToolProvider"]


class ModelProvider(Protocol):
    """Serves ``models.*`` for granted models. Raise :class:`agentrunner.APIError` subclasses on failure."""

    async def invoke(
        self, model: ModelResource, params: ModelInvokeParams, *, access: RunAccess
    ) -> ModelResponse:
        """One completion."""
        ...

    def stream(
        self, model: ModelResource, params: ModelInvokeParams, *, access: RunAccess
    ) -> AsyncIterator[ModelStreamChunk]:
        """A streamed completion."""
        ...

    async def rerank(
        self, model: ModelResource, params: ModelRerankParams, *, access: RunAccess
    ) -> RerankResult:
        """Rerank documents."""
        ...


class ToolProvider(Protocol):
    """Serves ``tools.*`` for granted tools."""

    async def detail(self, tool: ToolResource, *, access: RunAccess) -> ToolDetail:
        """Describe a tool."""
        ...

    async def call(self, tool: ToolResource, params: ToolCallParams, *, access: RunAccess) -> ToolCallResult:
        """Call a tool (large results come back as an artifact ref)."""
        ...


class KnowledgeProvider(Protocol):
    """Serves ``knowledge.retrieve`` for granted knowledge bases."""

    async def retrieve(
        self, kb: KnowledgeBaseResource, params: KnowledgeRetrieveParams, *, access: RunAccess
    ) -> KnowledgeRetrieveResult:
        """Retrieve passages."""
        ...
