"""The run-scoped authorization snapshot (HOST_SDK §4.5, PROTOCOL_V1 §13).

Three layers are intersected once, when a run starts: the runner's manifest (capabilities and permissions:
the most it may ever touch), the binding's policies (what this deployment grants), and the event's scope
(which conversation, actor, subject, workspace exist). The result is frozen, hashed, written to the event
log, projected into ``ctx.resources`` / ``ctx.context.available_apis``, and used by the dispatcher for every
back-call of the run. Nothing recomputes authorization at call time.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from agentrunner import (
    AgentResources,
    AgentRunnerCapabilities,
    AgentRunnerPermissions,
    ContextAPICapabilities,
    FileResource,
    KnowledgeBaseResource,
    ModelResource,
    ToolResource,
)
from agentrunner import codec as json
from pydantic import BaseModel, ConfigDict, Field

from agentrunner_host.definitions import AgentBinding, AgentEventEnvelope, RunPolicy

from .access import ConversationKey, RunAccess, StateOwner, StorageOwner
from .catalog import ResourceCatalog, SelectorRegistry, default_selectors
from .registry import RunnerDescriptor
from .tool_risk import grants_dangerous_tool

__all__ = ["AuthorizationSnapshot", "SnapshotBuilder"]


class AuthorizationSnapshot(BaseModel):
    """Everything a run is allowed to do, frozen at run start."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    runner_id: str
    plugin_id: str
    binding_id: str
    event_id: str
    event_type: str
    workspace_id: str | None
    conversation_id: str | None
    thread_id: str | None
    capabilities: AgentRunnerCapabilities
    permissions: AgentRunnerPermissions
    resources: AgentResources
    available_apis: ContextAPICapabilities
    state_owners: dict[str, tuple[str, ...]]
    storage_owners: dict[str, str]
    readable_conversations: tuple[str, ...]
    platform_actions: tuple[str, ...]
    action_approval: str
    artifact_ids: tuple[str, ...]
    dangerous_tools: dict[str, tuple[str, ...]] = Field(
        default_factory=dict, json_schema_extra={"default": {}}
    )
    """Granted tools the host classifies dangerous, with their classes (their calls are audited with them)."""
    withheld_tools: dict[str, tuple[str, ...]] = Field(
        default_factory=dict, json_schema_extra={"default": {}}
    )
    """Dangerous tools the run would have had but the binding does not grant explicitly, with their classes."""
    run_policy: RunPolicy
    deadline_at: float
    issued_at: float

    # The digest, the JSON and the access view are made once per snapshot (it is frozen) and kept in the
    # instance's dict under these names (model_copy drops them), looked up by hand: functools.cached_property
    # took a lock at each first use, three per run start.

    def digest(self) -> str:
        """``sha256:<hex>`` of the canonical JSON of the snapshot."""
        cache = vars(self)
        found: str | None = cache.get("_digest")
        if found is None:
            # a run start asks for it three times: one dump and one hash
            found = cache["_digest"] = (
                "sha256:" + hashlib.sha256(json.dumps_canonical(self.as_json())).hexdigest()
            )
        return found

    def as_json(self) -> json.JsonObject:
        """``model_dump(mode="json")``, made once: read it, never change it (the digest is its hash)."""
        cache = vars(self)
        found: json.JsonObject | None = cache.get("_json")
        if found is not None:
            return found
        # for the digest, the event log's copy and the context's resource hashes; the serializer itself, as
        # model_dump calls it with its defaults
        dumped: json.JsonObject = self.__pydantic_serializer__.to_python(self, mode="json")
        cache["_json"] = dumped
        return dumped

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy (see pydantic); with *update* its digest and JSON are computed afresh, not copied."""
        copy = super().model_copy(update=update, deep=deep)
        vars(copy).pop("_digest", None)
        vars(copy).pop("_json", None)
        vars(copy).pop("_access", None)
        return copy

    def access(self) -> RunAccess:
        """The data-scoping view of this snapshot, made once: read it, never change it (the run's start, its
        dispatcher registration and its stores share it)."""
        cache = vars(self)
        found: RunAccess | None = cache.get("_access")
        if found is None:
            # a run start asks for it four times, each would build its sets, dicts and owner objects
            found = cache["_access"] = self._make_access()
        return found

    def _make_access(self) -> RunAccess:
        conversation = (
            ConversationKey(self.conversation_id, self.thread_id, self.workspace_id)
            if self.conversation_id
            else None
        )
        return RunAccess(
            run_id=self.run_id,
            runner_id=self.runner_id,
            plugin_id=self.plugin_id,
            binding_id=self.binding_id,
            event_id=self.event_id,
            conversation=conversation,
            readable_conversations=frozenset(self.readable_conversations),
            state_owners={s: StateOwner(s, parts) for s, parts in self.state_owners.items()},  # pyright: ignore[reportArgumentType]
            storage_owners={a: StorageOwner(a, o) for a, o in self.storage_owners.items()},
            artifact_ids=frozenset(self.artifact_ids),
        )

    def allows_model(self, model_id: str, operation: str) -> bool:
        """The model is granted for *operation* (``invoke``, ``stream``, ``rerank``)."""
        m = self.resources.model(model_id)
        return m is not None and operation in m.operations

    def allows_tool(self, tool_name: str, operation: str) -> bool:
        """The tool is granted for *operation* (``detail``, ``call``)."""
        t = self.resources.tool(tool_name)
        return t is not None and operation in t.operations

    def allows_knowledge_base(self, kb_id: str, operation: str) -> bool:
        """The knowledge base is granted for *operation* (``list``, ``retrieve``)."""
        k = self.resources.knowledge_base(kb_id)
        return k is not None and operation in k.operations


_TEMPLATES = 1024
"""Most snapshots :class:`SnapshotBuilder` keeps to copy for later runs (one per runner, binding and event
scope); all are dropped when it is full."""


@dataclass(frozen=True, slots=True)
class _Template:
    """A snapshot built in full, kept with what it was built from: the snapshot of a later run with the same
    inputs differs only in its run id, event id and times."""

    descriptor: RunnerDescriptor
    binding: AgentBinding
    catalog: ResourceCatalog
    selectors: int
    """The selector registry's generation when it was built."""
    snapshot: AuthorizationSnapshot


def _scope_key(event: AgentEventEnvelope, extra_artifact_ids: tuple[str, ...]) -> tuple[object, ...] | None:
    """Everything of *event* (and the extra artifact ids) a snapshot is built from, but its id: ``None`` when
    the platform capabilities hold a value that cannot be a key (a list or an object)."""
    typed: tuple[tuple[str, type[object], object], ...] = ()
    if event.delivery.platform_capabilities:
        # with their types: True == 1 and 1 == 1.0 as keys, but JSON tells them apart
        items: list[tuple[str, type[object], object]] = []
        for name, value in event.delivery.platform_capabilities.items():
            known: object = value
            items.append((name, type(known), known))
        typed = tuple(items)
        try:
            hash(typed)
        except TypeError:
            return None
    actor, subject = event.actor, event.subject
    return (
        event.event_type,
        event.conversation_id,
        event.thread_id,
        event.workspace_id,
        None if actor is None else (actor.actor_type, actor.actor_id),
        None if subject is None else (subject.subject_type, subject.subject_id),
        typed,
        extra_artifact_ids,
    )


class SnapshotBuilder:
    """Builds snapshots from the catalog, a runner's descriptor, a binding and an event.

    A snapshot built in full is kept, with what it was built from, and copied for the next run with the same
    runner descriptor, binding (both compared by identity: a reloaded one is a new object), catalog, selector
    registry and event scope: the intersection and its validation cost most of a run start's snapshot, and
    give the same result for the same inputs."""

    def __init__(
        self,
        catalog: ResourceCatalog,
        *,
        selectors: SelectorRegistry | None = None,
        max_timeout_seconds: float = 3600.0,
    ) -> None:
        self.catalog = catalog
        self.selectors = selectors or default_selectors()
        self.max_timeout_seconds = max_timeout_seconds
        self._templates: dict[tuple[str, str, tuple[object, ...]], _Template] = {}

    def build(
        self,
        *,
        run_id: str,
        descriptor: RunnerDescriptor,
        binding: AgentBinding,
        event: AgentEventEnvelope,
        extra_artifact_ids: tuple[str, ...] = (),
        now: float | None = None,
    ) -> AuthorizationSnapshot:
        """Intersect manifest ∩ binding policy ∩ event scope."""
        now = time.time() if now is None else now
        scope = _scope_key(event, extra_artifact_ids)
        if scope is None:
            return self._build(run_id, descriptor, binding, event, extra_artifact_ids, now)
        key = (descriptor.runner_id, binding.binding_id, scope)
        template = self._templates.get(key)
        if (
            template is not None
            and template.descriptor is descriptor
            and template.binding is binding
            and template.catalog is self.catalog
            and template.selectors == self.selectors.generation
        ):
            return _copy(
                template, run_id=run_id, event_id=event.event_id, now=now, timeout=self._timeout(binding)
            )
        snapshot = self._build(run_id, descriptor, binding, event, extra_artifact_ids, now)
        if len(self._templates) >= _TEMPLATES:
            self._templates.clear()  # scopes seen once (ad-hoc runs, many conversations) must not grow it forever
        self._templates[key] = _Template(
            descriptor=descriptor,
            binding=binding,
            catalog=self.catalog,
            selectors=self.selectors.generation,
            snapshot=snapshot,
        )
        return snapshot

    def _timeout(self, binding: AgentBinding) -> float:
        return min(binding.run_policy.timeout_seconds, self.max_timeout_seconds)

    def _build(
        self,
        run_id: str,
        descriptor: RunnerDescriptor,
        binding: AgentBinding,
        event: AgentEventEnvelope,
        extra_artifact_ids: tuple[str, ...],
        now: float,
    ) -> AuthorizationSnapshot:
        manifest = descriptor.manifest
        caps, perms = manifest.capabilities, manifest.permissions
        policy = binding.resource_policy
        selections = self.selectors.selections(manifest.config_schema, binding.runner_config)

        # Models: selected by the config (or exactly the policy's list), known to the host, permitted by the manifest.
        llm_ops = [op for op in perms.models if op in ("invoke", "stream")]
        rerank_ops = [op for op in perms.models if op == "rerank"]
        model_roles: dict[str, str | None] = {}
        if policy.models is None:
            for s in selections:
                if s.kind == "model":
                    model_roles.setdefault(s.id, s.role)
        else:
            roles = {s.id: s.role for s in selections if s.kind == "model"}
            for mid in policy.models:
                model_roles.setdefault(mid, roles.get(mid))
        models: list[ModelResource] = []
        for mid, role in model_roles.items():
            known = self.catalog.models.get(mid)
            if known is None:
                continue
            ops = rerank_ops if known.model_type == "rerank" else llm_ops
            if ops:
                models.append(known.model_copy(update={"role": role, "operations": list(ops)}))

        # Tools: need the capability, a manifest permission and a binding grant.
        # A dangerous one (shell, file writes, network, destructive) also needs the binding to name it or its
        # classes in ``dangerous_tools``: selecting it in the runner config is not enough.
        tools: list[ToolResource] = []
        dangerous: dict[str, tuple[str, ...]] = {}
        withheld: dict[str, tuple[str, ...]] = {}
        if caps.tool_calling and perms.tools:
            wanted = list(dict.fromkeys([*policy.tools, *(s.id for s in selections if s.kind == "tool")]))
            for name in wanted:
                known_tool = self.catalog.tools.get(name)
                if known_tool is not None and (name in policy.tools or not policy.tools):
                    risks = self.catalog.tool_risks.get(name, ())
                    if not grants_dangerous_tool(name, risks, policy.dangerous_tools):
                        withheld[name] = risks
                        continue
                    if risks:
                        dangerous[name] = risks
                    tools.append(known_tool.model_copy(update={"operations": list(perms.tools)}))

        # Knowledge bases: capability + permission; selected by config or exactly the policy's list.
        kbs: list[KnowledgeBaseResource] = []
        if caps.knowledge_retrieval and perms.knowledge_bases:
            if policy.knowledge_bases is None:
                kb_ids = [s.id for s in selections if s.kind == "knowledge_base"]
            else:
                kb_ids = list(policy.knowledge_bases)
            for kid in dict.fromkeys(kb_ids):
                known_kb = self.catalog.knowledge_bases.get(kid)
                if known_kb is not None:
                    kbs.append(known_kb.model_copy(update={"operations": list(perms.knowledge_bases)}))

        # Files: a manifest `files` permission of the file's kind plus a binding grant.
        files: list[FileResource] = []
        for fid in policy.files:
            known_file = self.catalog.files.get(fid)
            if known_file is not None and known_file.kind in perms.files:
                files.append(known_file)

        conversation_id = event.conversation_id
        history_ok = policy.history and conversation_id is not None

        # State: each granted scope needs the identity it is keyed by.
        state_owners: dict[str, tuple[str, ...]] = {}
        if binding.state_policy.enabled:
            for scope in binding.state_policy.scopes:
                owner = _state_owner(scope, descriptor.runner_id, binding.binding_id, event)
                if owner is not None:
                    state_owners[scope] = owner

        storage_owners: dict[str, str] = {}
        for area in perms.storage:
            if area not in policy.storage:
                continue
            if area == "plugin":
                storage_owners[area] = descriptor.plugin_id
            elif area == "binding":
                storage_owners[area] = binding.binding_id
            elif event.workspace_id:
                storage_owners[area] = event.workspace_id

        readable: tuple[str, ...] = ()
        if perms.cross_conversation_history and history_ok:
            readable = tuple(c for c in policy.readable_conversations if c != conversation_id)

        platform_actions: tuple[str, ...] = ()
        if caps.platform_api:
            platform_actions = tuple(a for a in perms.platform_api if a in policy.platform_actions)

        apis: dict[str, object] = {
            "history_page": history_ok and "page" in perms.history,
            "history_search": history_ok and "search" in perms.history,
            "event_get": history_ok and "get" in perms.events,
            "event_page": history_ok and "page" in perms.events,
            "artifact_metadata": "metadata" in perms.artifacts,
            "artifact_read": "read" in perms.artifacts,
            "state": bool(state_owners),
            "state_scopes": [s for s in dict.fromkeys(binding.state_policy.scopes) if s in state_owners],
            "storage": bool(storage_owners),
            "prompt_get": False,
        }
        resources: dict[str, object] = {
            "models": models,
            "tools": tools,
            "knowledge_bases": kbs,
            "files": files,
            "storage": {
                "plugin_storage": "plugin" in storage_owners,
                "workspace_storage": "workspace" in storage_owners,
                "binding_storage": "binding" in storage_owners,
            },
            "platform_capabilities": dict(event.delivery.platform_capabilities),
        }
        timeout = self._timeout(binding)
        artifact_ids = tuple(dict.fromkeys([*(f.artifact.artifact_id for f in files), *extra_artifact_ids]))
        # One validation of the nested document: a constructor per part (the APIs, the storage, the resources,
        # the snapshot) cost a Python __init__ and a validator call each.
        return AuthorizationSnapshot.model_validate(
            {
                "run_id": run_id,
                "runner_id": descriptor.runner_id,
                "plugin_id": descriptor.plugin_id,
                "binding_id": binding.binding_id,
                "event_id": event.event_id,
                "event_type": event.event_type,
                "workspace_id": event.workspace_id,
                "conversation_id": conversation_id,
                "thread_id": event.thread_id,
                "capabilities": caps,
                "permissions": perms,
                "resources": resources,
                "available_apis": apis,
                "state_owners": state_owners,
                "storage_owners": storage_owners,
                "readable_conversations": readable,
                "platform_actions": platform_actions,
                "action_approval": policy.action_approval,
                "artifact_ids": artifact_ids,
                "dangerous_tools": dangerous,
                "withheld_tools": withheld,
                "run_policy": binding.run_policy,
                "deadline_at": now + timeout,
                "issued_at": now,
            }
        )


def _copy(
    template: _Template, *, run_id: str, event_id: str, now: float, timeout: float
) -> AuthorizationSnapshot:
    """The snapshot of *template* for another run: its own run id, event id and times, everything else (and
    the JSON of everything else) shared with the template's. The host only reads those parts; a runner is
    given copies of the ones it sees (``ContextBuilder.build`` validates its context's resources and APIs from
    the snapshot's JSON)."""
    issued_at = float(now)
    fields = {
        "run_id": run_id,
        "event_id": event_id,
        "deadline_at": issued_at + timeout,
        "issued_at": issued_at,
    }
    base = template.snapshot
    snapshot = base.model_copy(update=fields)
    dumped = dict(base.as_json())
    dumped.update(fields)
    vars(snapshot)["_json"] = dumped
    return snapshot


def _state_owner(
    scope: str, runner_id: str, binding_id: str, event: AgentEventEnvelope
) -> tuple[str, ...] | None:
    match scope:
        case "conversation":
            if event.conversation_id is None:
                return None
            return (runner_id, binding_id, event.conversation_id, event.thread_id or "")
        case "actor":
            if event.actor is None or event.actor.actor_id is None:
                return None
            return (runner_id, binding_id, event.actor.actor_type, event.actor.actor_id)
        case "subject":
            if event.subject is None or event.subject.subject_id is None:
                return None
            return (runner_id, binding_id, event.subject.subject_type, event.subject.subject_id)
        case "runner":
            return (runner_id, binding_id)
        case "binding":
            return (binding_id,)
        case "workspace":
            return (event.workspace_id,) if event.workspace_id else None
        case _:
            return None


def snapshot_json(snapshot: AuthorizationSnapshot) -> json.JsonObject:
    """The snapshot as JSON for the event log: the snapshot's own dump, made once (read it, never change
    it: the digest was computed from it)."""
    return snapshot.as_json()
