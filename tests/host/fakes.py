"""Test runners and helpers for the host tests. Every class here is a fake, named as such."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerCapabilities,
    AgentRunnerManifest,
    AgentRunnerPermissions,
    AgentRunResult,
    APIError,
    DynamicFormItemSchema,
    I18nObject,
)
from agentrunner_host.definitions import (
    AgentBinding,
    AgentEventEnvelope,
    BindingScope,
    ResourcePolicy,
    RunPolicy,
    StatePolicy,
)

PLUGIN = "test/fake"

Script = Callable[[AgentRunContext, AgentRunAPI], AsyncIterator[Any]]


def manifest(
    name: str = "default",
    *,
    streaming: bool = True,
    tool_calling: bool = False,
    knowledge_retrieval: bool = False,
    multimodal_input: bool = False,
    platform_api: bool = False,
    permissions: AgentRunnerPermissions | None = None,
    config_schema: list[DynamicFormItemSchema] | None = None,
    plugin: str = PLUGIN,
) -> AgentRunnerManifest:
    """A manifest for a fake runner."""
    return AgentRunnerManifest(
        id=f"plugin:{plugin}/{name}",
        name=name,
        label=I18nObject(en_US=f"Fake {name}"),
        capabilities=AgentRunnerCapabilities(
            streaming=streaming,
            tool_calling=tool_calling,
            knowledge_retrieval=knowledge_retrieval,
            multimodal_input=multimodal_input,
            platform_api=platform_api,
            interrupt=True,
        ),
        permissions=permissions or AgentRunnerPermissions(),
        config_schema=config_schema or [],
    )


class FakeScriptedRunner(AgentRunner):
    """Runs whatever script the test hands it; the script is a class-level default replaced per instance."""

    manifest: ClassVar[AgentRunnerManifest] = manifest()

    def __init__(self, script: Script) -> None:
        self.script = script

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        async for item in self.script(ctx, api):
            yield item


def scripted(script: Script, **manifest_kwargs: Any) -> FakeScriptedRunner:
    """A fake runner instance with its own manifest class."""
    m = manifest(**manifest_kwargs)
    cls = type(f"FakeRunner_{m.name.replace('-', '_')}", (FakeScriptedRunner,), {"manifest": m})
    return cls(script)


async def echo_script(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
    """Streams the input back."""
    out = AgentRunner.emitter(ctx)
    text = ctx.input.text or ""
    yield out.delta(text[: len(text) // 2])
    yield out.delta(text[len(text) // 2 :])
    yield out.message(text)
    yield out.complete(usage={"output_tokens": 1})


async def hang_script(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
    """Says one thing and then waits forever."""
    out = AgentRunner.emitter(ctx)
    yield out.delta("thinking")
    await asyncio.sleep(3600)
    yield out.complete()


async def api_error_to_failure(ctx: AgentRunContext, call: Callable[[], Any]) -> AsyncIterator[Any]:
    """Calls *call*; turns an APIError into run.failed carrying its code."""
    out = AgentRunner.emitter(ctx)
    try:
        await call()
    except APIError as exc:
        yield out.fail(exc.code, exc.message)
        return
    yield out.message("ok")
    yield out.complete()


def event(
    text: str | None = "hello",
    *,
    event_id: str = "evt-1",
    event_type: str = "message.received",
    conversation_id: str | None = "conv-1",
    **kwargs: Any,
) -> AgentEventEnvelope:
    """A message event."""
    data: dict[str, Any] = {
        "event_id": event_id,
        "event_type": event_type,
        "conversation_id": conversation_id,
        "actor": {"actor_type": "user", "actor_id": "u-1", "actor_name": "Ada"},
        "input": {"text": text},
        "delivery": {"surface": "test", "supports_streaming": True},
    }
    data.update(kwargs)
    return AgentEventEnvelope.model_validate(data)


def binding(
    runner: str = "default",
    *,
    binding_id: str = "b-1",
    config: dict[str, Any] | None = None,
    resource_policy: ResourcePolicy | None = None,
    state_policy: StatePolicy | None = None,
    run_policy: RunPolicy | None = None,
    scope: BindingScope | None = None,
    event_types: list[str] | None = None,
    plugin: str = PLUGIN,
) -> AgentBinding:
    """A binding to a fake runner."""
    return AgentBinding(
        binding_id=binding_id,
        runner_id=f"plugin:{plugin}/{runner}",
        runner_config=config or {},
        resource_policy=resource_policy or ResourcePolicy(),
        state_policy=state_policy or StatePolicy(),
        run_policy=run_policy or RunPolicy(),
        scope=scope or BindingScope(),
        event_types=event_types or ["*"],
    )
