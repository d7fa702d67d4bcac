"""What a run is authorized to use (PROTOCOL_V1 §6). Ids are opaque to runners."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, JsonValue

from ._base import ProtocolModel
from .common import ArtifactRef

__all__ = [
    "AgentResources",
    "FileResource",
    "KnowledgeBaseResource",
    "ModelResource",
    "StorageResource",
    "ToolResource",
]


class ModelResource(ProtocolModel):
    """A model this run may call through ``api.models``."""

    model_id: str
    """Opaque id to pass to ``api.models.*``."""
    model_type: str = "llm"
    """``llm``, ``rerank`` or ``embedding``."""
    role: str | None = None
    """Why it was granted, from the runner config: ``primary``, ``fallback``, ``rerank`` or ``None``."""
    provider: str | None = None
    """Provider name, for display."""
    name: str | None = None
    """Model name, for display."""
    capabilities: list[str] = Field(default_factory=list[str], json_schema_extra={"default": []})
    """E.g. ``vision``, ``tool_calling``, ``streaming``."""
    context_window: int | None = Field(default=None, ge=1)
    """Context window in tokens, for the runner's own budget."""
    max_output_tokens: int | None = Field(default=None, ge=1)
    """Output cap in tokens."""
    operations: list[Literal["invoke", "stream", "rerank"]] = Field(
        default_factory=list[Literal["invoke", "stream", "rerank"]], json_schema_extra={"default": []}
    )
    """Operations allowed on this model in this run."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Non-secret extra data."""


class ToolResource(ProtocolModel):
    """A host tool this run may call through ``api.tools``."""

    tool_name: str
    """Name to pass to ``api.tools.*``."""
    description: str | None = None
    """What the tool does."""
    parameters: dict[str, Any] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """JSON Schema of the tool's arguments."""
    tool_type: str | None = None
    """``mcp``, ``python``, ... (informational)."""
    operations: list[Literal["detail", "call"]] = Field(
        default_factory=list[Literal["detail", "call"]], json_schema_extra={"default": []}
    )
    """Operations allowed in this run."""


class KnowledgeBaseResource(ProtocolModel):
    """A knowledge base this run may query through ``api.knowledge``."""

    kb_id: str
    """Opaque id to pass to ``api.knowledge.retrieve``."""
    name: str | None = None
    """Display name."""
    description: str | None = None
    """What it holds."""
    kb_type: str | None = None
    """Backend kind (informational)."""
    operations: list[Literal["list", "retrieve"]] = Field(
        default_factory=list[Literal["list", "retrieve"]], json_schema_extra={"default": []}
    )
    """Operations allowed in this run."""


class FileResource(ProtocolModel):
    """A configured file this run may read through the artifact API."""

    file_id: str
    """Opaque id."""
    kind: Literal["config", "knowledge"]
    """Which ``files`` permission grants it."""
    name: str | None = None
    """File name."""
    artifact: ArtifactRef
    """Read it with ``api.artifacts.read_range(artifact.artifact_id, ...)``."""


class StorageResource(ProtocolModel):
    """Which storage areas this run may use through ``api.storage``."""

    plugin_storage: bool = False
    """The plugin's private area."""
    workspace_storage: bool = False
    """The workspace area."""
    binding_storage: bool = False
    """The binding's area."""


class AgentResources(ProtocolModel):
    """The run's authorized resources: a projection of the host's authorization snapshot."""

    models: list[ModelResource] = Field(
        default_factory=list[ModelResource], json_schema_extra={"default": []}
    )
    """Models."""
    tools: list[ToolResource] = Field(default_factory=list[ToolResource], json_schema_extra={"default": []})
    """Tools."""
    knowledge_bases: list[KnowledgeBaseResource] = Field(
        default_factory=list[KnowledgeBaseResource], json_schema_extra={"default": []}
    )
    """Knowledge bases."""
    files: list[FileResource] = Field(default_factory=list[FileResource], json_schema_extra={"default": []})
    """Files."""
    storage: StorageResource = Field(default_factory=StorageResource)
    """Storage areas."""
    platform_capabilities: dict[str, Any] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Platform abilities, informational."""

    def model(self, model_id: str) -> ModelResource | None:
        """The granted model with this id, if any."""
        return next((m for m in self.models if m.model_id == model_id), None)

    def tool(self, tool_name: str) -> ToolResource | None:
        """The granted tool with this name, if any."""
        return next((t for t in self.tools if t.tool_name == tool_name), None)

    def knowledge_base(self, kb_id: str) -> KnowledgeBaseResource | None:
        """The granted knowledge base with this id, if any."""
        return next((k for k in self.knowledge_bases if k.kb_id == kb_id), None)
