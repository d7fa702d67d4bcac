"""What the host has configured (models, tools, knowledge bases, files) and how a runner's config form
selects from it.

Selector form types map to resource selections through a :class:`SelectorRegistry`; new selector types are
registered, never special-cased in the authorization code (HOST_SDK §4.5).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentrunner import (
    DynamicFormItemSchema,
    FileResource,
    KnowledgeBaseResource,
    ModelResource,
    ToolResource,
)

__all__ = [
    "NONE_SENTINELS",
    "ResourceCatalog",
    "ResourceSelection",
    "SelectorFunction",
    "SelectorRegistry",
    "default_selectors",
]

NONE_SENTINELS = frozenset({"", "__none__", "__none"})
"""Form values that mean "nothing selected"."""

ResourceKind = Literal["model", "knowledge_base", "tool", "file"]


@dataclass(frozen=True, slots=True)
class ResourceSelection:
    """One resource a config value selects."""

    kind: ResourceKind
    """Resource kind."""
    id: str
    """Resource id (model id, kb id, tool name, file id)."""
    role: str | None = None
    """Why: ``primary``, ``fallback``, ``rerank``, ``llm``..."""
    field: str | None = None
    """The config field it came from."""


SelectorFunction = Callable[[Any], list[tuple[str, str | None]]]
"""Maps a config value to ``(id, role)`` pairs."""


def _str_ids(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]  # pyright: ignore[reportUnknownVariableType]
    return []


def _fallback_selector(value: Any) -> list[tuple[str, str | None]]:
    if isinstance(value, str):
        return [(value, "primary")]
    if isinstance(value, Mapping):
        out: list[tuple[str, str | None]] = []
        primary = value.get("primary")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if isinstance(primary, str):
            out.append((primary, "primary"))
        out.extend((f, "fallback") for f in _str_ids(value.get("fallbacks")))  # pyright: ignore[reportUnknownMemberType]
        return out
    return []


class SelectorRegistry:
    """Form item type → (resource kind, value interpreter)."""

    def __init__(self) -> None:
        self._selectors: dict[str, tuple[ResourceKind, SelectorFunction]] = {}
        self._generation = 0

    @property
    def generation(self) -> int:
        """How many registrations this registry has had: it changes whenever a config can select differently."""
        return self._generation

    def register(self, form_type: str, kind: ResourceKind, function: SelectorFunction) -> None:
        """Register a selector type (replacing any previous one)."""
        self._selectors[form_type] = (kind, function)
        self._generation += 1

    def types(self) -> frozenset[str]:
        """Registered selector types."""
        return frozenset(self._selectors)

    def selections(
        self, schema: Sequence[DynamicFormItemSchema], config: Mapping[str, Any]
    ) -> list[ResourceSelection]:
        """Every resource the config (or the form's defaults) selects, deduplicated, in form order."""
        out: list[ResourceSelection] = []
        seen: set[tuple[str, str]] = set()
        for item in schema:
            entry = self._selectors.get(item.type)
            if entry is None:
                continue
            kind, function = entry
            value = config.get(item.name, item.default)
            for rid, role in function(value):
                if rid in NONE_SENTINELS or (kind, rid) in seen:
                    continue
                seen.add((kind, rid))
                out.append(ResourceSelection(kind=kind, id=rid, role=role, field=item.name))
        return out


def default_selectors() -> SelectorRegistry:
    """The selector types the host understands out of the box."""
    registry = SelectorRegistry()
    registry.register("model-fallback-selector", "model", _fallback_selector)
    registry.register("llm-model-selector", "model", lambda v: [(i, "llm") for i in _str_ids(v)])
    registry.register("rerank-model-selector", "model", lambda v: [(i, "rerank") for i in _str_ids(v)])
    registry.register(
        "knowledge-base-multi-selector", "knowledge_base", lambda v: [(i, None) for i in _str_ids(v)]
    )
    registry.register("knowledge-base-selector", "knowledge_base", lambda v: [(i, None) for i in _str_ids(v)])
    registry.register("tool-multi-selector", "tool", lambda v: [(i, None) for i in _str_ids(v)])
    return registry


class ResourceCatalog:
    """The host's configured resources, by id. Immutable once built; rebuild on configuration change."""

    def __init__(
        self,
        *,
        models: Iterable[ModelResource] = (),
        tools: Iterable[ToolResource] = (),
        knowledge_bases: Iterable[KnowledgeBaseResource] = (),
        files: Iterable[FileResource] = (),
        tool_risks: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        self.models: dict[str, ModelResource] = {m.model_id: m for m in models}
        self.tools: dict[str, ToolResource] = {t.tool_name: t for t in tools}
        # Classified by the tool provider (names, annotations, the operator's word); a tool missing here is safe.
        self.tool_risks: dict[str, tuple[str, ...]] = {
            name: tuple(sorted(risks)) for name, risks in (tool_risks or {}).items() if risks
        }
        self.knowledge_bases: dict[str, KnowledgeBaseResource] = {k.kb_id: k for k in knowledge_bases}
        self.files: dict[str, FileResource] = {f.file_id: f for f in files}
