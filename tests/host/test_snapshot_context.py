"""The authorization snapshot (manifest ∩ binding ∩ event) and the event-first context built from it."""

from __future__ import annotations

import hashlib

import pytest
from agentrunner import (
    AgentRunnerPermissions,
    ArtifactRef,
    DynamicFormItemSchema,
    FileResource,
    I18nObject,
    ImageContent,
    KnowledgeBaseResource,
    ModelResource,
    TextContent,
    ToolResource,
    codec,
)
from agentrunner_host.authorization import AuthorizationSnapshot, SnapshotBuilder
from agentrunner_host.catalog import ResourceCatalog
from agentrunner_host.context_builder import (
    ContextBuilder,
    HistoryHandles,
    filter_params,
    is_secret_name,
    session_key,
)
from agentrunner_host.definitions import (
    AgentBinding,
    AgentEventEnvelope,
    ResourcePolicy,
    RunPolicy,
    StatePolicy,
)
from agentrunner_host.registry import RunnerDescriptor
from pydantic import ValidationError

from .fakes import binding, event, manifest

CATALOG = ResourceCatalog(
    models=[
        ModelResource(model_id="m1"),
        ModelResource(model_id="m2"),
        ModelResource(model_id="r1", model_type="rerank"),
    ],
    tools=[ToolResource(tool_name="t1"), ToolResource(tool_name="t2")],
    knowledge_bases=[KnowledgeBaseResource(kb_id="k1"), KnowledgeBaseResource(kb_id="k2")],
    files=[FileResource(file_id="f1", kind="config", artifact=ArtifactRef(artifact_id="art-f1"))],
)
SCHEMA = [
    DynamicFormItemSchema(name="model", label=I18nObject(en_US="M"), type="model-fallback-selector"),
    DynamicFormItemSchema(
        name="rerank", label=I18nObject(en_US="R"), type="rerank-model-selector", default="r1"
    ),
    DynamicFormItemSchema(name="kbs", label=I18nObject(en_US="K"), type="knowledge-base-multi-selector"),
    DynamicFormItemSchema(name="api_key", label=I18nObject(en_US="Key"), type="string", secret=True),
]
ALL = AgentRunnerPermissions(
    models=["invoke", "stream", "rerank"],
    tools=["call"],
    knowledge_bases=["retrieve"],
    history=["page", "search"],
    events=["get"],
    artifacts=["metadata", "read"],
    storage=["plugin", "workspace", "binding"],
    files=["config"],
)
CONFIG = {
    "model": {"primary": "m1", "fallbacks": ["m2", "__none__", "missing"]},
    "kbs": ["k1"],
    "api_key": "sk-1",
}


def descriptor(**kw: bool) -> RunnerDescriptor:
    flags: dict[str, bool] = {"tool_calling": True, "knowledge_retrieval": True} | kw
    man = manifest(permissions=ALL, config_schema=SCHEMA, **flags)  # pyright: ignore[reportArgumentType]
    return RunnerDescriptor(runner_id=man.id, plugin_id="test/fake", manifest=man)


def build(
    *,
    policy: ResourcePolicy | None = None,
    state: StatePolicy | None = None,
    ev: AgentEventEnvelope | None = None,
    **kw: bool,
) -> AuthorizationSnapshot:
    b = binding(
        config=CONFIG,
        resource_policy=policy or ResourcePolicy(tools=["t1"], files=["f1"]),
        state_policy=state,
    )
    return SnapshotBuilder(CATALOG).build(
        run_id="run_1", descriptor=descriptor(**kw), binding=b, event=ev or event(workspace_id="ws")
    )


def test_models_come_from_the_config_selection_with_roles_and_operations_by_type() -> None:
    """Primary/fallbacks/rerank selected by the form (defaults included), unknown ids and sentinels skipped."""
    snap = build()
    got = {(m.model_id, m.role, tuple(m.operations)) for m in snap.resources.models}
    assert got == {
        ("m1", "primary", ("invoke", "stream")),
        ("m2", "fallback", ("invoke", "stream")),
        ("r1", "rerank", ("rerank",)),
    }


def test_a_policy_model_list_is_exact() -> None:
    """With an explicit model list the binding grants exactly those models."""
    snap = build(policy=ResourcePolicy(models=["m2"]))
    assert [m.model_id for m in snap.resources.models] == ["m2"]


def test_capabilities_gate_tools_and_knowledge_bases() -> None:
    """Without tool_calling / knowledge_retrieval the run gets no tools / knowledge bases."""
    snap = build(tool_calling=False, knowledge_retrieval=False)  # overrides
    assert snap.resources.tools == [] and snap.resources.knowledge_bases == []
    full = build()
    assert [t.tool_name for t in full.resources.tools] == ["t1"]
    assert [k.kb_id for k in full.resources.knowledge_bases] == ["k1"]


def test_files_and_storage_need_both_permission_and_policy_and_scope() -> None:
    """Files by grant; storage areas by permission ∩ policy, workspace storage only with a workspace."""
    snap = build(policy=ResourcePolicy(files=["f1"], storage=["plugin", "workspace"]))
    assert [f.file_id for f in snap.resources.files] == ["f1"]
    assert "art-f1" in snap.artifact_ids
    assert snap.storage_owners == {"plugin": "test/fake", "workspace": "ws"}
    no_ws = build(policy=ResourcePolicy(storage=["workspace"]), ev=event())
    assert no_ws.storage_owners == {} and not no_ws.available_apis.storage


def test_state_scopes_need_the_identity_they_are_keyed_by() -> None:
    """Conversation/actor/subject scopes appear only when the event has those identities; owners are tuples."""
    snap = build(state=StatePolicy(scopes=["conversation", "actor", "subject", "runner", "workspace"]))
    assert set(snap.state_owners) == {"conversation", "actor", "runner", "workspace"}
    assert snap.state_owners["conversation"] == ("plugin:test/fake/default", "b-1", "conv-1", "")
    off = build(state=StatePolicy(enabled=False))
    assert off.state_owners == {} and not off.available_apis.state


def test_history_apis_follow_permissions_policy_and_the_event_having_a_conversation() -> None:
    """No conversation → no history/event APIs; policy can switch history off."""
    assert build().available_apis.history_page
    assert not build(ev=event(conversation_id=None)).available_apis.history_page
    assert not build(policy=ResourcePolicy(history=False)).available_apis.event_get
    assert build().available_apis.prompt_get is False


def test_the_snapshot_is_frozen_and_its_hash_is_stable() -> None:
    """A snapshot cannot be changed after it is built, and equal inputs hash equally."""
    a, b = build(), build()
    with pytest.raises(ValidationError, match="Instance is frozen"):
        a.run_id = "other"
    assert (
        a.model_copy(update={"issued_at": 0, "deadline_at": 0}).digest()
        == b.model_copy(update={"issued_at": 0, "deadline_at": 0}).digest()
    )


def test_the_deadline_is_capped_by_the_host_maximum() -> None:
    """A binding cannot ask for more than the host allows."""
    b = binding(run_policy=RunPolicy(timeout_seconds=99999))
    snap = SnapshotBuilder(CATALOG, max_timeout_seconds=60).build(
        run_id="r", descriptor=descriptor(), binding=b, event=event(), now=1000.0
    )
    assert snap.deadline_at == 1060.0


def test_the_context_is_event_first_and_inlines_no_history() -> None:
    """Only the current event, handles and the snapshot's projection reach the runner."""
    snap = build()
    ctx = ContextBuilder().build(
        snapshot=snap,
        binding=binding(config=CONFIG),
        event=event("hi", bot_id="bot"),
        history=HistoryHandles(latest_cursor="c", transcript_seq=3, event_seq=7),
    )
    dumped = ctx.model_dump()
    assert "messages" not in dumped and "bootstrap" not in dumped
    assert ctx.trigger.type == "message.received" and ctx.trigger.source == "api"
    assert (
        ctx.context.inline_policy.mode == "current_event" and ctx.context.inline_policy.delivered_count == 0
    )
    assert ctx.context.latest_cursor == "c" and ctx.context.has_history_before and ctx.context.event_seq == 7
    assert ctx.context.available_apis == snap.available_apis
    assert ctx.resources == snap.resources
    assert ctx.config == CONFIG
    assert ctx.runtime.deadline_at == snap.deadline_at and ctx.runtime.protocol_version == "1"
    assert (
        ctx.runtime.metadata["session_key"]
        == ContextBuilder()
        .build(snapshot=snap, binding=binding(config=CONFIG), event=event("other text", bot_id="bot"))
        .runtime.metadata["session_key"]
    )
    assert set(ctx.runtime.static_refs) == {"system_policy", "tool_schemas", "resource_manifest"}


def test_static_refs_are_stable_and_exclude_secret_config() -> None:
    """The system-policy hash ignores secret-looking fields and stays equal across runs."""
    snap = build()
    one = ContextBuilder().build(snapshot=snap, binding=binding(config=CONFIG), event=event())
    other = ContextBuilder().build(
        snapshot=snap, binding=binding(config={**CONFIG, "api_key": "sk-2"}), event=event()
    )
    assert one.runtime.static_refs == other.runtime.static_refs


def test_resource_hashes_are_those_of_the_resources_own_dump() -> None:
    """The tool-schema and resource-manifest refs hash the canonical JSON of the granted resources as they
    dump themselves (they are taken from the snapshot's one dump, which must say the same), and the
    snapshot's digest is the hash of its whole dump."""
    snap = build()
    ctx = ContextBuilder().build(snapshot=snap, binding=binding(config=CONFIG), event=event())

    def sha(value: object) -> str:
        return "sha256:" + hashlib.sha256(codec.dumps_canonical(value)).hexdigest()

    refs = ctx.runtime.static_refs
    assert snap.resources.tools, "the fixture grants tools, so the tool hash covers some"
    assert refs["tool_schemas"].hash == sha([t.model_dump(mode="json") for t in snap.resources.tools])
    assert refs["resource_manifest"].hash == sha(snap.resources.model_dump(mode="json"))
    assert snap.digest() == sha(snap.model_dump(mode="json"))
    assert snap.model_copy(update={"run_id": "run_other"}).digest() != snap.digest()


def test_a_runner_without_multimodal_input_gets_text_parts_and_artifact_refs_only() -> None:
    """Images are dropped from contents for text-only runners; attachments stay."""
    ev = event(
        "look",
        input={
            "text": "look",
            "contents": [
                TextContent(text="look").model_dump(),
                ImageContent(url="https://x/y.png").model_dump(),
            ],
            "attachments": [ArtifactRef(artifact_id="att-1").model_dump()],
        },
    )
    text_only = ContextBuilder().build(snapshot=build(), binding=binding(), event=ev)
    assert [c.type for c in text_only.input.contents] == ["text"]
    assert [a.artifact_id for a in text_only.input.attachments] == ["att-1"]
    multi = ContextBuilder().build(snapshot=build(multimodal_input=True), binding=binding(), event=ev)
    assert [c.type for c in multi.input.contents] == ["text", "image"]


def test_large_event_data_is_not_inlined() -> None:
    """event.data over the cap is replaced by a marker (the host keeps the payload)."""
    ev = event(data={"blob": "x" * 50_000})
    builder = ContextBuilder(max_event_data_bytes=1024)
    data, too_big = builder.event_data(ev)
    assert too_big and data["truncated"] is True


def test_adapter_params_drop_internal_and_secret_looking_names_only() -> None:
    """Whole-word secret detection: api_key/token/password go; keyword/monkey stay."""
    params = {
        "_internal": 1,
        "api_key": "x",
        "apiKey": "x",
        "my_token_value": "x",
        "user_password_hash": "x",
        "keyword": "k",
        "monkey": "m",
        "launcher_type": "group",
        "sender_name": "Ada",
    }
    assert filter_params(params) == {
        "keyword": "k",
        "monkey": "m",
        "launcher_type": "group",
        "sender_name": "Ada",
    }
    assert is_secret_name("client_secret") and is_secret_name("accessKey")
    assert not is_secret_name("tokenizer_name") and not is_secret_name("primary_key_column")


def test_streaming_is_offered_only_when_surface_binding_and_runner_agree() -> None:
    """delivery.supports_streaming needs the surface, the binding's policy and the runner's capability."""
    snap = build()
    assert ContextBuilder().build(snapshot=snap, binding=binding(), event=event()).delivery.supports_streaming
    no_stream = build(streaming=False)
    assert (
        not ContextBuilder()
        .build(snapshot=no_stream, binding=binding(), event=event())
        .delivery.supports_streaming
    )


def test_the_digest_is_computed_once_and_a_changed_copy_gets_its_own() -> None:
    """The frozen snapshot's digest is cached; ``model_copy(update=...)`` never carries the old one over."""
    snap = build()
    first = snap.digest()
    assert snap.digest() == first
    changed = snap.model_copy(update={"deadline_at": snap.deadline_at + 1})
    assert changed.digest() != first
    assert changed.model_copy(update={"deadline_at": snap.deadline_at}).digest() == first


def test_the_access_view_is_made_once_and_a_changed_copy_gets_its_own() -> None:
    """``access()`` is cached on the frozen snapshot; ``model_copy(update=...)`` derives a fresh one."""
    snap = build(state=StatePolicy(enabled=True, scopes=["conversation", "binding"]))
    access = snap.access()
    assert snap.access() is access
    assert access.run_id == "run_1" and set(access.state_owners) == {"conversation", "binding"}
    assert access.conversation is not None and access.conversation.conversation_id == "conv-1"
    changed = snap.model_copy(update={"run_id": "run_2", "conversation_id": None})
    assert changed.access().run_id == "run_2" and changed.access().conversation is None
    assert snap.access().run_id == "run_1"


def test_the_system_policy_hash_follows_a_reloaded_binding_with_the_same_id() -> None:
    """The hash is kept per binding object: a new binding under the same id (a reload) is hashed afresh, and
    every answer is the hash of the config without its secret fields."""

    def sha(value: object) -> str:
        return "sha256:" + hashlib.sha256(codec.dumps_canonical(value)).hexdigest()

    snap = build()
    builder = ContextBuilder()
    first = binding(config=CONFIG)
    reloaded = binding(config={**CONFIG, "kbs": ["k2"]})
    hashes = [
        builder.build(snapshot=snap, binding=b, event=event()).runtime.static_refs["system_policy"].hash
        for b in (first, first, reloaded, first)
    ]
    public = {k: v for k, v in CONFIG.items() if k != "api_key"}
    assert hashes == [sha(public), sha(public), sha({**public, "kbs": ["k2"]}), sha(public)]


def test_the_resource_hashes_follow_each_snapshots_resources() -> None:
    """One builder keeps the resource hashes per snapshot resources JSON (by identity): runs whose snapshots
    share it (copied for a later run of the same scope) get its hashes, and a snapshot with other resources
    gets its own, before and after, never a stale answer."""

    def sha(value: object) -> str:
        return "sha256:" + hashlib.sha256(codec.dumps_canonical(value)).hexdigest()

    snapshots = SnapshotBuilder(CATALOG)
    b, desc = binding(config=CONFIG, resource_policy=ResourcePolicy(tools=["t1"], files=["f1"])), descriptor()
    one_tool = snapshots.build(run_id="run_1", descriptor=desc, binding=b, event=event())
    copied = snapshots.build(run_id="run_2", descriptor=desc, binding=b, event=event())
    assert copied.as_json()["resources"] is one_tool.as_json()["resources"], "a copy for a later run"
    two_tools = build(policy=ResourcePolicy(tools=["t1", "t2"], files=["f1"]))
    assert one_tool.resources != two_tools.resources
    builder = ContextBuilder()
    seen = [
        builder.build(snapshot=snap, binding=binding(config=CONFIG), event=event()).runtime.static_refs
        for snap in (one_tool, copied, two_tools, one_tool)
    ]
    for snap, refs in zip((one_tool, copied, two_tools, one_tool), seen, strict=True):
        assert refs["tool_schemas"].hash == sha([t.model_dump(mode="json") for t in snap.resources.tools])
        assert refs["resource_manifest"].hash == sha(snap.resources.model_dump(mode="json"))
    assert seen[2]["resource_manifest"].hash != seen[0]["resource_manifest"].hash


def test_the_session_key_is_the_hash_of_its_parts_each_time() -> None:
    """Repeated and different parts give the documented key (the JSON list of the six parts, hashed)."""

    def expected(*parts: str) -> str:
        return "sess_" + hashlib.sha256(codec.dumps(list(parts))).hexdigest()[:32]

    for _ in range(2):
        for conversation in ("c1", "c2", None):
            key = session_key(
                workspace_id=None,
                bot_id="bot",
                binding_id="b-1",
                runner_id="r",
                conversation_id=conversation,
                thread_id=None,
            )
            assert key == expected("", "bot", "b-1", "r", conversation or "", "")


def test_an_empty_tool_grant_takes_the_tools_the_config_selects_and_a_list_is_exact() -> None:
    """``resource_policy.tools`` empty: the config's tool selector decides; set: only the listed tools, even
    when the config selects others (docs/operators.md, the policy table)."""
    schema = [DynamicFormItemSchema(name="tools", label=I18nObject(en_US="T"), type="tool-multi-selector")]
    man = manifest(permissions=ALL, config_schema=schema, tool_calling=True)
    desc = RunnerDescriptor(runner_id=man.id, plugin_id="test/fake", manifest=man)

    def granted(policy: ResourcePolicy) -> list[str]:
        b = binding(config={"tools": ["t2", "missing"]}, resource_policy=policy)
        snap = SnapshotBuilder(CATALOG).build(run_id="run_1", descriptor=desc, binding=b, event=event())
        return [t.tool_name for t in snap.resources.tools]

    assert granted(ResourcePolicy()) == ["t2"]  # an unknown selected tool is skipped
    assert granted(ResourcePolicy(tools=["t1"])) == ["t1"]


def _fresh(
    builder: SnapshotBuilder,
    snap: AuthorizationSnapshot,
    *,
    descriptor: RunnerDescriptor,
    binding: AgentBinding,
    event: AgentEventEnvelope,
) -> AuthorizationSnapshot:
    """The snapshot a builder with nothing kept makes from the same inputs, at the same time."""
    return SnapshotBuilder(builder.catalog, selectors=builder.selectors).build(
        run_id=snap.run_id, descriptor=descriptor, binding=binding, event=event, now=snap.issued_at
    )


def test_a_later_run_of_the_same_scope_gets_what_a_full_build_gives() -> None:
    """The second run of a runner, binding and event scope is copied from the first: its fields, its JSON and
    its digest are those of a full build with its own run id, event id and time."""
    builder = SnapshotBuilder(CATALOG)
    desc, b = descriptor(), binding(config=CONFIG, resource_policy=ResourcePolicy(tools=["t1"], files=["f1"]))
    state = StatePolicy(enabled=True, scopes=["conversation", "actor"])
    b = b.model_copy(update={"state_policy": state})
    first = builder.build(
        run_id="run_1", descriptor=desc, binding=b, event=event(event_id="evt-1"), now=100.0
    )
    second_event = event(event_id="evt-2")
    second = builder.build(run_id="run_2", descriptor=desc, binding=b, event=second_event, now=250.5)
    assert second.resources is first.resources  # copied, not rebuilt
    fresh = _fresh(builder, second, descriptor=desc, binding=b, event=second_event)
    assert second == fresh
    assert second.as_json() == fresh.as_json()
    assert second.digest() == fresh.digest() != first.digest()
    assert (second.run_id, second.event_id, second.issued_at) == ("run_2", "evt-2", 250.5)
    assert second.access().run_id == "run_2" and first.access().run_id == "run_1"
    assert first.as_json()["run_id"] == "run_1"  # the template's own JSON is untouched


def test_a_snapshot_is_not_copied_across_scopes_bindings_catalogs_or_selector_registrations() -> None:
    """Each input the intersection reads makes a different snapshot: another conversation, actor, workspace or
    platform capability (True is not 1), a reloaded binding, a replaced catalog or a new selector type."""
    builder = SnapshotBuilder(CATALOG)
    desc = descriptor()
    policy = ResourcePolicy(tools=["t1"], files=["f1"], storage=["workspace"], history=True)
    b = binding(
        config=CONFIG, resource_policy=policy, state_policy=StatePolicy(scopes=["conversation", "actor"])
    )
    base = event(workspace_id="ws", delivery={"surface": "test", "platform_capabilities": {"edit": True}})
    builder.build(run_id="run_0", descriptor=desc, binding=b, event=base)
    variants = [
        (b, event(conversation_id="conv-2", workspace_id="ws", delivery=base.delivery)),
        (b, event(workspace_id="ws-2", delivery=base.delivery)),
        (b, base.model_copy(update={"actor": None})),
        (b, event(workspace_id="ws", delivery={"surface": "test", "platform_capabilities": {"edit": 1}})),
        (b, event(workspace_id="ws", delivery={"surface": "test", "platform_capabilities": {"f": [1]}})),
        (b.model_copy(update={"resource_policy": ResourcePolicy(tools=["t2"])}), base),
    ]
    for index, (bound, ev) in enumerate(variants):
        snap = builder.build(run_id=f"run_{index + 1}", descriptor=desc, binding=bound, event=ev)
        fresh = _fresh(builder, snap, descriptor=desc, binding=bound, event=ev)
        # as JSON: True == 1 in Python, not in the document
        assert codec.dumps_canonical(snap.as_json()) == codec.dumps_canonical(fresh.as_json()), index
    assert builder.build(run_id="run_m", descriptor=desc, binding=b, event=base).resources.models
    builder.selectors.register("model-fallback-selector", "model", lambda _value: [])
    snap = builder.build(run_id="run_s", descriptor=desc, binding=b, event=base)
    assert [m.model_id for m in snap.resources.models] == ["r1"]  # the rerank selector's default only
    builder.catalog = ResourceCatalog(tools=[ToolResource(tool_name="t1", description="new")])
    snap = builder.build(run_id="run_c", descriptor=desc, binding=b, event=base)
    assert snap.resources.tools[0].description == "new"


def test_a_runner_changing_its_context_changes_no_other_run_of_the_scope() -> None:
    """Runs of one scope share their snapshot's models (copied from the first): each context gets its own
    resources and APIs, so an in-process runner that changes them changes neither the snapshot the host
    authorizes with nor the next run's context."""
    builder, contexts = SnapshotBuilder(CATALOG), ContextBuilder()
    desc, b = descriptor(), binding(config=CONFIG, resource_policy=ResourcePolicy(tools=["t1"]))
    first = builder.build(run_id="run_1", descriptor=desc, binding=b, event=event(event_id="evt-1"))
    ctx = contexts.build(snapshot=first, binding=b, event=event(event_id="evt-1"))
    ctx.resources.tools.append(ToolResource(tool_name="t2"))
    ctx.resources.models.clear()
    ctx.context.available_apis.prompt_get = True
    second = builder.build(run_id="run_2", descriptor=desc, binding=b, event=event(event_id="evt-2"))
    for snap in (first, second):
        assert [t.tool_name for t in snap.resources.tools] == ["t1"] and snap.resources.models
        assert not snap.available_apis.prompt_get
    again = contexts.build(snapshot=second, binding=b, event=event(event_id="evt-2"))
    assert [t.tool_name for t in again.resources.tools] == ["t1"] and again.resources.models
    assert not again.context.available_apis.prompt_get
