"""The pipeline compatibility entry (R11–R21 of the reference's requirements, adapted to our names), and a
migrated legacy pipeline run end to end through ``Host.create`` with real model, tool and knowledge providers."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerPermissions,
    ArtifactRef,
    ChatMessage,
    DynamicFormItemSchema,
    FileContent,
    I18nObject,
    ImageContent,
    TextContent,
    ToolResource,
)
from agentrunner import codec as json
from agentrunner_host import Host
from agentrunner_host.catalog import ResourceCatalog
from agentrunner_host.errors import DuplicateEventError
from agentrunner_host.legacy import (
    ExtensionPreferences,
    OutputSettings,
    PipelineMessage,
    RunnerNotBoundError,
    RunnerNotConfiguredError,
    filter_query_variables,
    migrate_pipeline_config,
    output_settings,
    pipeline_entry,
)
from agentrunner_host.legacy.pipeline import MCP_NAME_SEPARATOR, NO_TOOLS, is_json_safe
from agentrunner_host.providers.knowledge import EmbeddedKnowledge, KnowledgeBaseConfig, KnowledgeIndex
from agentrunner_host.providers.llm import ModelConfig, OpenAICompatibleModels
from agentrunner_host.providers.tools import NAME_SEPARATOR, HostTools, PythonTool
from agentrunner_host.stores import HostStores
from agentrunner_host.stores.engine import create_engine, default_sqlite_url, upgrade
from fakes_openai import FakeOpenAIServer
from host.fakes import echo_script, scripted
from providers.python_tools_sample import word_count

FIXTURES = Path(__file__).parent / "fixtures"
LOCAL = "plugin:langbot/local-agent/default"
CONFIG: dict[str, Any] = {
    "ai": {"runner": {"id": LOCAL, "expire-time": 3600}, "runner_config": {LOCAL: {"timeout": 30}}}
}


def _message(**overrides: Any) -> PipelineMessage:
    data: dict[str, Any] = {
        "pipeline_id": "pipe-1",
        "bot_id": "bot-1",
        "launcher_type": "person",
        "launcher_id": "launcher-123",
        "sender_id": "user_001",
        "sender_name": "Alice",
        "message_id": "msg_001",
        "time": 1700000000,
        "source_event_type": "FriendMessage",
        "contents": [TextContent(text="Hello"), TextContent(text=" world")],
    }
    data.update(overrides)
    return PipelineMessage(**data)


# -- R11–R17: the event -----------------------------------------------------------------------------------------


def test_a_pipeline_message_becomes_a_message_received_event() -> None:
    """R11: type, source, bot, a user actor and the concatenated text of the text parts."""
    event = pipeline_entry(CONFIG, _message()).event
    assert (event.event_type, event.source, event.bot_id) == ("message.received", "host_adapter", "bot-1")
    assert event.actor is not None and event.actor.actor_type == "user"
    assert event.input.text == "Hello world"


def test_event_ids_are_host_scoped_stable_and_never_the_platform_id() -> None:
    """R12: ``host:`` ids, never the raw id, different per launcher/sender scope, the same for a re-delivery."""
    first = pipeline_entry(CONFIG, _message(message_id=789)).event.event_id
    assert first.startswith("host:") and len(first) == len("host:") + 32
    assert first != "789" and "789" not in first
    assert pipeline_entry(CONFIG, _message(message_id=789)).event.event_id == first
    assert (
        pipeline_entry(CONFIG, _message(message_id=789, launcher_id="launcher-456")).event.event_id != first
    )
    assert pipeline_entry(CONFIG, _message(message_id=789, sender_id="user_002")).event.event_id != first
    assert pipeline_entry(CONFIG, _message(message_id=789, pipeline_id="pipe-2")).event.event_id != first


def test_messages_without_id_or_time_never_share_an_event_id() -> None:
    """With nothing stable to hash, two deliveries get distinct ids instead of colliding after a restart."""
    ids = {pipeline_entry(CONFIG, _message(message_id=-1, time=None)).event.event_id for _ in range(3)}
    assert len(ids) == 3


def test_ids_containing_the_separator_do_not_collide() -> None:
    """Parts are hashed as a JSON array, so ``a|b`` + ``c`` differs from ``a`` + ``b|c``."""
    one = pipeline_entry(CONFIG, _message(launcher_id="a|b", sender_id="c")).event.event_id
    two = pipeline_entry(CONFIG, _message(launcher_id="a", sender_id="b|c")).event.event_id
    assert one != two


def test_conversation_id_precedence() -> None:
    """R13: active conversation, then the ``conversation_id`` variable, then ``<launcher_type>_<launcher_id>``."""
    variables = {"conversation_id": "from-variable"}
    assert (
        pipeline_entry(
            CONFIG, _message(conversation_id="conv-uuid", query_variables=variables)
        ).event.conversation_id
        == "conv-uuid"
    )
    assert (
        pipeline_entry(CONFIG, _message(query_variables=variables)).event.conversation_id == "from-variable"
    )
    event = pipeline_entry(CONFIG, _message()).event
    assert event.conversation_id == "person_launcher-123"
    assert (event.launcher_type, event.launcher_id) == ("person", "launcher-123")


def test_a_very_long_launcher_id_gives_a_hashed_conversation_id() -> None:
    """A derived conversation id that would pass the envelope's cap is hashed, so distinct chats stay distinct."""
    one = pipeline_entry(CONFIG, _message(launcher_id="g" * 195 + "1")).event.conversation_id
    two = pipeline_entry(CONFIG, _message(launcher_id="g" * 195 + "2")).event.conversation_id
    assert one is not None and two is not None
    assert one != two and len(one) <= 200 and one.startswith("conv:")
    long_variable = {"conversation_id": "c" * 300}
    assert pipeline_entry(CONFIG, _message(query_variables=long_variable)).event.conversation_id != one


@pytest.mark.parametrize("streaming", [True, False])
def test_delivery_follows_the_platform_and_the_output_settings(streaming: bool) -> None:
    """R14: surface ``platform``; streaming is what the output settings say (both on the event and the policy)."""
    output = OutputSettings(streaming=streaming, max_message_size=2000, quote_origin=True)
    entry = pipeline_entry(CONFIG, _message(output=output))
    delivery = entry.event.delivery
    assert delivery.surface == "platform"
    assert delivery.supports_streaming is streaming and entry.binding.delivery_policy.streaming is streaming
    assert delivery.max_message_size == 2000 and entry.binding.delivery_policy.max_message_size == 2000
    assert delivery.platform_capabilities["quote_origin"] is True
    assert delivery.reply_target == {"message_id": "msg_001"}


@pytest.mark.parametrize("platform_streaming", [True, False])
def test_output_settings_come_from_the_platform_and_the_pipeline(platform_streaming: bool) -> None:
    """Streaming is the platform adapter's ability; at-sender and quote-origin come from ``output.misc``."""
    template = json.loads((FIXTURES / "default-pipeline-config.json").read_bytes())
    settings = output_settings(template, platform_streaming=platform_streaming)
    assert settings == OutputSettings(streaming=platform_streaming, quote_origin=True, at_sender=True)
    assert output_settings({}, platform_streaming=False) == OutputSettings()


@pytest.mark.parametrize("message_id", [None, -1])
def test_a_message_without_platform_id_replies_to_nothing(message_id: object) -> None:
    """R14: ``reply_target == {'message_id': None}`` when the platform has no message id (``-1`` included)."""
    event = pipeline_entry(CONFIG, _message(message_id=message_id)).event
    assert event.delivery.reply_target == {"message_id": None}
    assert event.subject is not None and event.subject.subject_id is None


def test_source_event_data_drops_the_raw_platform_object() -> None:
    """R15: platform event type, time (as epoch milliseconds) and data without ``source_platform_object``."""
    platform_event = {
        "type": "FriendMessage",
        "sender": {"id": "user_001"},
        "source_platform_object": {"raw": 1},
        "odd": {1, 2},
    }
    event = pipeline_entry(CONFIG, _message(platform_event=platform_event)).event
    assert event.source_event_type == "FriendMessage"
    assert event.event_time == 1_700_000_000_000
    assert event.data == {"type": "FriendMessage", "sender": {"id": "user_001"}}


def test_actor_and_subject_identify_the_sender_and_the_message() -> None:
    """R16: actor id and name of the sender; the subject is the platform message."""
    event = pipeline_entry(CONFIG, _message()).event
    assert event.actor is not None and (event.actor.actor_id, event.actor.actor_name) == ("user_001", "Alice")
    assert event.subject is not None and (event.subject.subject_type, event.subject.subject_id) == (
        "message",
        "msg_001",
    )
    assert event.subject.data["launcher_id"] == "launcher-123"


def test_contents_are_kept_in_order_and_each_artifact_is_attached_once() -> None:
    """R17 (adapted): contents verbatim; attachments are the artifact refs of the binary parts, without duplicates;
    file names are kept."""
    image = ArtifactRef(artifact_id="art_image", artifact_type="image", mime_type="image/png")
    file = ArtifactRef(artifact_id="art_file", name="hello.txt")
    contents = [
        TextContent(text="see"),
        ImageContent(artifact=image),
        FileContent(artifact=file, name="hello.txt"),
        ImageContent(url="https://example.com/a.png"),
        ImageContent(artifact=image),
    ]
    event = pipeline_entry(CONFIG, _message(contents=contents)).event
    assert event.input.contents == contents
    assert [a.artifact_id for a in event.input.attachments] == ["art_image", "art_file"]
    assert event.input.attachments[1].name == "hello.txt"
    assert event.input.text == "see"


def test_a_text_only_message_gets_one_text_content() -> None:
    """A message with text and no elements carries that text as its only content element."""
    event = pipeline_entry(CONFIG, _message(contents=[], text="plain")).event
    assert event.input.text == "plain" and event.input.contents == [TextContent(text="plain")]


# -- R18–R19: params -----------------------------------------------------------------------------------------------


def test_query_variables_are_filtered_into_params() -> None:
    """R18: ``_``-prefixed and secret-looking names are dropped; everything else is kept unchanged."""
    variables = {
        "_internal_var": 1,
        "_pipeline_bound_plugins": ["a/b"],
        "_fallback_model_uuids": ["m"],
        "api_key": "x",
        "API_KEY": "x",
        "token": "x",
        "secret": "x",
        "password": "x",
        "credential": "x",
        "user_api_key": "x",
        "user_secret_key": "x",
        "my_token_value": "x",
        "user_password_hash": "x",
        "api_token": "x",
        "secret_key": "x",
        "launcher_type": "person",
        "sender_name": "Alice",
        "msg_create_time": 1700000000,
        "keyword": "kept: whole-word matching",
        "monkey": "kept too",
        "another_param": 123,
    }
    params = pipeline_entry(CONFIG, _message(query_variables=variables)).event.params
    assert params == {
        "launcher_type": "person",
        "sender_name": "Alice",
        "msg_create_time": 1700000000,
        "keyword": "kept: whole-word matching",
        "monkey": "kept too",
        "another_param": 123,
    }
    assert filter_query_variables({}) == {}


@pytest.mark.parametrize(
    "value",
    [
        {1, 2},
        object(),
        len,
        ["a", object()],
        {"bad": object()},
        [1, {2, 3}],
        {"k": {1, 2}},
        {1: "int key"},
        float("nan"),
    ],
)
def test_values_that_are_not_plain_json_are_dropped(value: object) -> None:
    """R19: a value with a non-JSON item anywhere is dropped entirely."""
    assert not is_json_safe(value)
    assert filter_query_variables({"v": value}) == {}


def test_nested_json_values_are_kept() -> None:
    """R19: fully JSON-safe nested values (tuples as lists) are kept."""
    value = {"a": [1, 2.5, None, True, ("x", "y")], "b": {"c": "d"}}
    assert filter_query_variables({"v": value}) == {
        "v": {"a": [1, 2.5, None, True, ["x", "y"]], "b": {"c": "d"}}
    }


# -- R21 and grants: the binding -----------------------------------------------------------------------------------


def test_the_binding_carries_the_runner_its_config_and_the_pipeline_as_agent() -> None:
    """R21 (adapted): runner id and config from the migrated fields, agent id and binding id from the pipeline."""
    binding = pipeline_entry(CONFIG, _message()).binding
    assert binding.runner_id == LOCAL
    assert binding.runner_config == {"timeout": 30}
    assert binding.agent_id == "pipe-1" and binding.binding_id == "pipeline:pipe-1"
    assert (binding.scope.type, binding.scope.id) == ("bot", "bot-1")
    assert binding.resource_policy.models is None and binding.resource_policy.knowledge_bases is None


def test_expire_time_becomes_conversation_expiry_metadata() -> None:
    """``ai.runner['expire-time']`` is kept on the event as host metadata."""
    event = pipeline_entry(CONFIG, _message(query_id=1001)).event
    assert event.metadata["conversation_expire_seconds"] == 3600
    assert event.metadata["query_id"] == "1001" and event.metadata["pipeline_id"] == "pipe-1"


def test_a_legacy_configuration_must_be_migrated_first() -> None:
    """The entry reads only ``ai.runner.id``: a legacy pipeline raises a typed error naming the fix."""
    legacy = json.loads((FIXTURES / "default-pipeline-config.legacy.json").read_bytes())
    with pytest.raises(RunnerNotConfiguredError, match="migrate_pipeline_config"):
        pipeline_entry(legacy, _message())
    assert pipeline_entry(migrate_pipeline_config(legacy).config, _message()).binding.runner_id == LOCAL


def test_a_runner_outside_the_bound_plugins_cannot_run() -> None:
    """Bound plugins and extension preferences decide which runner plugins a pipeline may use."""
    with pytest.raises(
        RunnerNotBoundError,
        match="runner plugin:langbot/local-agent/default belongs to plugin langbot/local-agent, which is",
    ) as caught:
        pipeline_entry(CONFIG, _message(bound_plugins=["langbot/dify-agent"]))
    assert caught.value.plugin_id == "langbot/local-agent"
    prefs = ExtensionPreferences(enable_all_plugins=False, plugins=["someone/else"])
    with pytest.raises(
        RunnerNotBoundError,
        match="runner plugin:langbot/local-agent/default belongs to plugin langbot/local-agent, which is",
    ):
        pipeline_entry(CONFIG, _message(extension_preferences=prefs))
    allowed = ExtensionPreferences(enable_all_plugins=False, plugins=["langbot/local-agent"])
    assert pipeline_entry(
        CONFIG, _message(extension_preferences=allowed, bound_plugins=["langbot/local-agent"])
    )


def test_tools_follow_the_mcp_server_preferences() -> None:
    """Only tools of the pipeline's MCP servers are granted; host Python tools follow the pipeline."""
    tools = ["word_count", "search__web", "files__read", "files__write"]
    assert pipeline_entry(CONFIG, _message(), tool_names=tools).binding.resource_policy.tools == tools
    prefs = ExtensionPreferences(enable_all_mcp_servers=False, mcp_servers=["files"])
    granted = pipeline_entry(
        CONFIG, _message(extension_preferences=prefs), tool_names=tools
    ).binding.resource_policy.tools
    assert granted == ["word_count", "files__read", "files__write"]
    assert MCP_NAME_SEPARATOR == NAME_SEPARATOR


async def test_a_pipeline_without_mcp_servers_grants_no_tool_even_one_its_config_selects() -> None:
    """With every MCP server disabled, a tool the runner config selects is still not granted."""
    config = {"ai": {"runner": {"id": LOCAL}, "runner_config": {LOCAL: {"tools": ["files__write"]}}}}
    prefs = ExtensionPreferences(enable_all_mcp_servers=False)
    entry = pipeline_entry(config, _message(extension_preferences=prefs), tool_names=["files__write"])
    assert entry.binding.resource_policy.tools == [NO_TOOLS]
    seen: list[list[str]] = []

    async def script(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        seen.append([t.tool_name for t in ctx.resources.tools])
        out = AgentRunner.emitter(ctx)
        yield out.message("ok")
        yield out.complete()

    schema = [
        DynamicFormItemSchema(name="tools", label=I18nObject(en_US="Tools"), type="tool-multi-selector")
    ]
    runner = scripted(
        script,
        plugin="langbot/local-agent",
        tool_calling=True,
        permissions=AgentRunnerPermissions(tools=["call"]),
        config_schema=schema,
    )
    catalog = ResourceCatalog(tools=[ToolResource(tool_name="files__write", tool_type="mcp")])
    host = Host.create(plugins={"langbot/local-agent": [runner]}, catalog=catalog)
    try:
        _ = [r async for r in host.orchestrator.run(entry.event, entry.binding)]
        enabled = pipeline_entry(config, _message(), tool_names=["files__write"])
        _ = [
            r
            async for r in host.orchestrator.run(
                enabled.event.model_copy(update={"event_id": "host:other"}), enabled.binding
            )
        ]
    finally:
        await host.aclose()
    assert seen == [[], ["files__write"]]  # disabled, then enabled MCP servers


# -- end to end ----------------------------------------------------------------------------------------------------


def _local_agent_schema() -> list[DynamicFormItemSchema]:
    return [
        DynamicFormItemSchema(name="model", label=I18nObject(en_US="Model"), type="model-fallback-selector"),
        DynamicFormItemSchema(
            name="knowledge-bases", label=I18nObject(en_US="KBs"), type="knowledge-base-multi-selector"
        ),
    ]


async def test_a_migrated_legacy_pipeline_runs_end_to_end_with_real_providers(tmp_path: Path) -> None:
    """Legacy template → migration → pipeline entry → Host → fake runner calling models, tools and knowledge."""
    legacy = json.loads((FIXTURES / "default-pipeline-config.legacy.json").read_bytes())
    user_pipeline = copy.deepcopy(legacy)
    user_pipeline["ai"]["local-agent"]["model"] = {"primary": "gpt", "fallbacks": []}
    user_pipeline["ai"]["local-agent"]["knowledge-bases"] = ["kb-docs"]
    migrated = migrate_pipeline_config(user_pipeline).config

    seen: dict[str, Any] = {}

    async def script(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        seen["config"] = ctx.config
        seen["params"] = ctx.adapter.extra if ctx.adapter else None
        seen["streaming"] = ctx.delivery.supports_streaming
        seen["conversation"] = ctx.conversation
        seen["models"] = [m.model_id for m in ctx.resources.models]
        passages = await api.knowledge.retrieve("kb-docs", "refund policy")
        counted = await api.tools.call("word_count", {"text": ctx.input.text or ""})
        answer = await api.models.invoke(
            "gpt",
            [
                ChatMessage(role="system", content=passages.hits[0].text),
                ChatMessage(role="user", content=ctx.input.text),
            ],
        )
        yield out.message(f"{answer.message.content} ({counted.content})")
        yield out.complete()

    runner = scripted(
        script,
        plugin="langbot/local-agent",
        tool_calling=True,
        knowledge_retrieval=True,
        permissions=AgentRunnerPermissions(
            models=["invoke"], tools=["call", "detail"], knowledge_bases=["retrieve"]
        ),
        config_schema=_local_agent_schema(),
    )
    host_engine = create_engine(default_sqlite_url(tmp_path))
    index = await KnowledgeIndex.open(host_engine, data_dir=tmp_path)
    async with FakeOpenAIServer() as server:
        models = OpenAICompatibleModels([ModelConfig(id="gpt", base_url=server.base_url, model="gpt-fake")])
        tools = HostTools(python_tools=[PythonTool.from_callable("word_count", word_count)])
        knowledge = EmbeddedKnowledge(index, [KnowledgeBaseConfig(id="kb-docs", name="Docs")])
        await knowledge.ingest_text(
            "kb-docs", "policy.md", "# Refunds\n\nOur refund policy lasts thirty days."
        )
        catalog = ResourceCatalog(
            models=models.resources(), tools=tools.resources(), knowledge_bases=knowledge.resources()
        )
        host = Host.create(
            plugins={"langbot/local-agent": [runner]},
            catalog=catalog,
            models=models,
            tools=tools,
            knowledge=knowledge,
        )
        try:
            await knowledge.ingest_text(
                "kb-docs", "policy.md", "# Refunds\n\nOur refund policy lasts thirty days."
            )
            entry = pipeline_entry(
                migrated,
                _message(
                    query_variables={"user_lang": "en", "api_key": "nope"},
                    output=OutputSettings(streaming=False),
                ),
                tool_names=[t.tool_name for t in tools.resources()],
            )
            server.reply("Refunds last thirty days.")
            results = [r async for r in host.orchestrator.run(entry.event, entry.binding)]
        finally:
            await host.aclose()
            await tools.aclose()
            await models.aclose()
            await index.aclose()
            await host_engine.dispose()
    assert [r.type for r in results] == ["message.completed", "run.completed"], results
    message: Any = results[0]
    assert message.data.message.content == "Refunds last thirty days. ({'words': 2})"
    assert seen["config"] == migrated["ai"]["runner_config"][LOCAL]
    assert seen["params"] == {"params": {"user_lang": "en"}}
    assert seen["streaming"] is False
    assert (
        seen["conversation"].launcher_type == "person"
        and seen["conversation"].conversation_id == "person_launcher-123"
    )
    assert seen["models"] == ["gpt"]
    sent = server.requests[-1].body["messages"]
    assert sent[0] == {"role": "system", "content": "Our refund policy lasts thirty days."}
    assert sent[1] == {"role": "user", "content": "Hello world"}


async def test_a_redelivered_platform_message_is_one_event_not_a_crash(tmp_path: Path) -> None:
    """The same platform message delivered twice maps to one event id; the host refuses the repeat as a
    duplicate instead of failing the run (the reference crashed on its unique index)."""
    engine = create_engine(default_sqlite_url(tmp_path))
    await upgrade(engine)
    stores = await HostStores.open(engine, data_dir=tmp_path)
    runner = scripted(echo_script, plugin="langbot/local-agent")
    first = pipeline_entry(CONFIG, _message(message_id=789))
    again = pipeline_entry(CONFIG, _message(message_id=789))
    host = Host.create(plugins={"langbot/local-agent": [runner]}, stores=stores, bindings=[first.binding])
    try:
        handle = await host.orchestrator.submit(first.event)
        results = [i async for i in handle.results()]
        with pytest.raises(DuplicateEventError, match="was already accepted"):
            await host.orchestrator.submit(again.event)
    finally:
        await host.aclose()
        await stores.aclose()
        await engine.dispose()
    assert again.event.event_id == first.event.event_id
    assert results[-1].result.type == "run.completed"
