"""The back-call dispatcher: every call is checked against the run's frozen snapshot."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerPermissions,
    BackCallRequest,
    ChatMessage,
    DeadlineExceededError,
    DynamicFormItemSchema,
    I18nObject,
    InvalidArgumentError,
    KnowledgeBaseResource,
    KnowledgeRetrieveResult,
    ModelResource,
    ModelResponse,
    ModelStreamChunk,
    PayloadTooLargeError,
    RateLimitedError,
    RerankResult,
    ToolCallResult,
    ToolDetail,
    ToolResource,
    UnauthorizedError,
)
from agentrunner.actions import KnowledgeRetrieveParams, ModelInvokeParams, ModelRerankParams, ToolCallParams
from agentrunner_host.access import RunAccess
from agentrunner_host.catalog import ResourceCatalog
from agentrunner_host.definitions import ResourcePolicy, RunPolicy
from agentrunner_host.host import Host

from .fakes import PLUGIN, binding, event, scripted


class FakeModels:
    """Answers every model call with a fixed reply and records what it saw."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def invoke(
        self, model: ModelResource, params: ModelInvokeParams, *, access: RunAccess
    ) -> ModelResponse:
        self.calls.append(("invoke", model.model_id))
        return ModelResponse(model_id=model.model_id, message=ChatMessage(role="assistant", content="pong"))

    async def stream(
        self, model: ModelResource, params: ModelInvokeParams, *, access: RunAccess
    ) -> AsyncIterator[ModelStreamChunk]:
        self.calls.append(("stream", model.model_id))
        for piece in ("po", "ng"):
            yield ModelStreamChunk(delta=piece)

    async def rerank(
        self, model: ModelResource, params: ModelRerankParams, *, access: RunAccess
    ) -> RerankResult:
        self.calls.append(("rerank", model.model_id))
        return RerankResult()


class FakeTools:
    """A tool provider that echoes its parameters."""

    async def detail(self, tool: ToolResource, *, access: RunAccess) -> ToolDetail:
        return ToolDetail(name=tool.tool_name, description=tool.description)

    async def call(self, tool: ToolResource, params: ToolCallParams, *, access: RunAccess) -> ToolCallResult:
        return ToolCallResult(content={"echo": params.parameters})


class FakeKnowledge:
    """A knowledge provider with no passages."""

    async def retrieve(
        self, kb: KnowledgeBaseResource, params: KnowledgeRetrieveParams, *, access: RunAccess
    ) -> KnowledgeRetrieveResult:
        return KnowledgeRetrieveResult()


CATALOG = ResourceCatalog(
    models=[
        ModelResource(model_id="m-main", name="main", context_window=8192),
        ModelResource(model_id="m-other", name="other"),
        ModelResource(model_id="m-rerank", model_type="rerank"),
    ],
    tools=[ToolResource(tool_name="search", description="web search"), ToolResource(tool_name="shell")],
    knowledge_bases=[KnowledgeBaseResource(kb_id="kb-1"), KnowledgeBaseResource(kb_id="kb-2")],
)

SCHEMA = [
    DynamicFormItemSchema(name="model", label=I18nObject(en_US="Model"), type="model-fallback-selector"),
    DynamicFormItemSchema(name="rerank", label=I18nObject(en_US="Rerank"), type="rerank-model-selector"),
    DynamicFormItemSchema(name="kbs", label=I18nObject(en_US="KBs"), type="knowledge-base-multi-selector"),
]
FULL = AgentRunnerPermissions(
    models=["invoke", "stream", "rerank"],
    tools=["detail", "call"],
    knowledge_bases=["list", "retrieve"],
    history=["page"],
    storage=["plugin"],
)
CONFIG = {"model": {"primary": "m-main", "fallbacks": []}, "rerank": "m-rerank", "kbs": ["kb-1"]}


async def call_in_run(
    call: Any,
    *,
    permissions: AgentRunnerPermissions = FULL,
    policy: ResourcePolicy | None = None,
    run_policy: RunPolicy | None = None,
    tool_calling: bool = True,
) -> tuple[Any, Host]:
    """Run a runner that makes one back-call; return what the call returned or raised."""
    box: list[Any] = []

    async def script(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        try:
            box.append(await call(api, ctx))
        except Exception as exc:
            box.append(exc)
        out = AgentRunner.emitter(ctx)
        yield out.message("done")
        yield out.complete()

    runner = scripted(
        script,
        permissions=permissions,
        config_schema=SCHEMA,
        tool_calling=tool_calling,
        knowledge_retrieval=True,
    )
    host = Host.create(
        plugins={PLUGIN: [runner]},
        catalog=CATALOG,
        models=FakeModels(),
        tools=FakeTools(),
        knowledge=FakeKnowledge(),
    )
    b = binding(
        config=CONFIG, resource_policy=policy or ResourcePolicy(tools=["search"]), run_policy=run_policy
    )
    _ = [r async for r in host.orchestrator.run(event(), b)]
    await host.aclose()
    return box[0], host


async def test_a_granted_model_answers() -> None:
    """The config-selected primary model is granted and reachable."""
    result, _ = await call_in_run(
        lambda api, ctx: api.models.invoke("m-main", [{"role": "user", "content": "ping"}])
    )
    assert isinstance(result, ModelResponse) and result.message.content == "pong"


async def test_a_model_outside_the_snapshot_is_unauthorized() -> None:
    """A model the host knows but the run was not granted is refused."""
    result, _ = await call_in_run(
        lambda api, ctx: api.models.invoke("m-other", [{"role": "user", "content": "x"}])
    )
    assert isinstance(result, UnauthorizedError)


async def test_a_rerank_model_cannot_be_invoked_as_a_chat_model() -> None:
    """Operations follow the model type: a rerank model is granted for rerank only."""
    result, _ = await call_in_run(
        lambda api, ctx: api.models.invoke("m-rerank", [{"role": "user", "content": "x"}])
    )
    assert isinstance(result, UnauthorizedError)
    ok, _ = await call_in_run(lambda api, ctx: api.models.rerank("m-rerank", "q", ["a", "b"]))
    assert isinstance(ok, RerankResult)


async def test_streaming_model_calls_pass_through_the_dispatcher() -> None:
    """models.stream yields the provider's chunks."""

    async def collect(api: AgentRunAPI, ctx: AgentRunContext) -> str:
        return "".join(
            [c.delta or "" async for c in api.models.stream("m-main", [{"role": "user", "content": "x"}])]
        )

    result, _ = await call_in_run(collect)
    assert result == "pong"


async def test_tools_need_the_capability_the_permission_and_a_binding_grant() -> None:
    """A granted tool works; an ungranted one and a runner without tool_calling are refused."""
    ok, _ = await call_in_run(lambda api, ctx: api.tools.call("search", {"q": "x"}))
    assert isinstance(ok, ToolCallResult) and ok.content == {"echo": {"q": "x"}}
    denied, _ = await call_in_run(lambda api, ctx: api.tools.call("shell", {}))
    assert isinstance(denied, UnauthorizedError)
    no_cap, _ = await call_in_run(lambda api, ctx: api.tools.call("search", {}), tool_calling=False)
    assert isinstance(no_cap, UnauthorizedError)


async def test_knowledge_bases_follow_the_config_selection() -> None:
    """Only the selected knowledge base is granted; knowledge.list shows exactly that."""
    ok, _ = await call_in_run(lambda api, ctx: api.knowledge.retrieve("kb-1", "q"))
    assert isinstance(ok, KnowledgeRetrieveResult)
    denied, _ = await call_in_run(lambda api, ctx: api.knowledge.retrieve("kb-2", "q"))
    assert isinstance(denied, UnauthorizedError)
    listed, _ = await call_in_run(lambda api, ctx: api.knowledge.list())
    assert [k.kb_id for k in listed.knowledge_bases] == ["kb-1"]


async def test_apis_the_manifest_does_not_ask_for_are_unauthorized() -> None:
    """No history permission → history.page is refused; no state scope granted → state refused."""
    perms = AgentRunnerPermissions(models=["invoke"])
    result, _ = await call_in_run(lambda api, ctx: api.history.page(), permissions=perms)
    assert isinstance(result, UnauthorizedError)
    result, _ = await call_in_run(lambda api, ctx: api.state.get("workspace", "k"), permissions=perms)
    assert isinstance(result, UnauthorizedError)
    result, _ = await call_in_run(
        lambda api, ctx: api.platform.request_action("message.edit", {}, idempotency_key="k")
    )
    assert isinstance(result, UnauthorizedError)


async def test_invalid_parameters_are_invalid_argument_naming_the_field() -> None:
    """Parameters are validated against the action's model."""
    result, _ = await call_in_run(
        lambda api, ctx: api.call_raw("knowledge.retrieve", {"kb_id": "kb-1", "query_text": ""})
    )
    assert isinstance(result, InvalidArgumentError) and "query_text" in result.message


async def test_an_oversized_request_is_payload_too_large() -> None:
    """Requests over the run's back-call size limit are refused before they reach a provider."""
    big = "x" * (2 * 1024 * 1024)
    result, _ = await call_in_run(
        lambda api, ctx: api.models.invoke("m-main", [{"role": "user", "content": big}])
    )
    assert isinstance(result, PayloadTooLargeError)


async def test_a_burst_beyond_the_rate_limit_is_rate_limited() -> None:
    """The per-run token bucket refuses calls past its burst."""

    async def burst(api: AgentRunAPI, ctx: AgentRunContext) -> Exception | None:
        for _ in range(20):
            try:
                await api.knowledge.list()
            except RateLimitedError as exc:
                return exc
        return None

    result, _ = await call_in_run(burst, run_policy=RunPolicy(backcall_rate=1.0, backcall_burst=5))
    assert isinstance(result, RateLimitedError) and result.retryable


async def test_the_default_rate_limit_lets_a_run_make_a_thousand_calls_back_to_back() -> None:
    """The default policy (burst 1,000, then 200/s) does not stop a run reading a few hundred things at its
    start: the old default (burst 200, 50/s) refused such a run's calls after the first ~200. The bucket
    refusing a runaway loop is tested above with a small burst."""

    async def many(api: AgentRunAPI, ctx: AgentRunContext) -> int:
        for _ in range(1000):
            await api.knowledge.list()
        return 1000

    made, _ = await call_in_run(many)
    assert made == 1000
    assert (RunPolicy().backcall_burst, RunPolicy().backcall_rate) == (1000, 200.0)


async def test_calls_without_identity_from_another_plugin_or_for_ended_runs_are_unauthorized() -> None:
    """Caller identity travels with every call; a finished run id is dead forever."""
    captured: list[AgentRunContext] = []

    async def script(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        captured.append(ctx)
        dispatcher = host.dispatcher
        base = {"run_id": ctx.run_id, "action": "knowledge.list", "params": {}}
        for caller, expected in ((None, "no caller identity"), ("evil/plugin", "does not belong")):
            try:
                await dispatcher.handle(BackCallRequest.model_validate({**base, "caller": caller}))
            except UnauthorizedError as exc:
                assert expected in exc.message
            else:  # pragma: no cover - the assertion below reports it
                raise AssertionError("the call was not refused")
        out = AgentRunner.emitter(ctx)
        yield out.message("done")
        yield out.complete()

    runner = scripted(script, permissions=FULL, knowledge_retrieval=True)
    host = Host.create(plugins={PLUGIN: [runner]}, catalog=CATALOG)
    results = [r async for r in host.orchestrator.run(event(), binding())]
    assert results[-1].type == "run.completed"
    with pytest.raises(UnauthorizedError, match="has ended"):
        await host.dispatcher.handle(
            BackCallRequest(run_id=captured[0].run_id, action="knowledge.list", caller=PLUGIN)
        )
    await host.aclose()


async def test_a_call_after_the_deadline_is_deadline_exceeded() -> None:
    """The run's deadline bounds every back-call, checked by the dispatcher itself."""
    runner = scripted(lambda ctx, api: _never(), permissions=FULL, knowledge_retrieval=True)
    host = Host.create(plugins={PLUGIN: [runner]}, catalog=CATALOG)
    descriptor = await host.registry.get(f"plugin:{PLUGIN}/default")
    snapshot = host.orchestrator.snapshots.build(
        run_id="run_late",
        descriptor=descriptor,
        binding=binding(run_policy=RunPolicy(timeout_seconds=1)),
        event=event(),
        now=time.time() - 10,
    )
    live = host.dispatcher.register(snapshot)
    with pytest.raises(DeadlineExceededError, match="the run's deadline has passed"):
        await host.dispatcher.handle(
            BackCallRequest(
                run_id="run_late", action="knowledge.list", caller=PLUGIN, call_token=live.call_token
            )
        )
    host.dispatcher.unregister("run_late")
    await host.aclose()


async def _never() -> AsyncIterator[Any]:
    return
    yield  # pragma: no cover


async def test_every_call_leaves_an_audit_record_with_its_decision() -> None:
    """Allowed and denied calls are both audited with action, resource and decision."""
    records: list[Any] = []

    async def two_calls(api: AgentRunAPI, ctx: AgentRunContext) -> None:
        await api.models.invoke("m-main", [{"role": "user", "content": "x"}])
        with contextlib.suppress(UnauthorizedError):
            await api.tools.call("shell", {})

    runner_host: list[Host] = []

    async def script(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        await two_calls(api, ctx)
        out = AgentRunner.emitter(ctx)
        yield out.message("done")
        yield out.complete()

    host = Host.create(
        plugins={PLUGIN: [scripted(script, permissions=FULL, config_schema=SCHEMA, tool_calling=True)]},
        catalog=CATALOG,
        models=FakeModels(),
        tools=FakeTools(),
    )
    host.dispatcher.on_audit = records.append
    runner_host.append(host)
    _ = [
        r
        async for r in host.orchestrator.run(
            event(), binding(config=CONFIG, resource_policy=ResourcePolicy(tools=["search"]))
        )
    ]
    decisions = [(r.action, r.resource, r.decision) for r in records]
    assert ("models.invoke", "m-main", "allowed") in decisions
    assert ("tools.call", "shell", "unauthorized") in decisions
    await host.aclose()
