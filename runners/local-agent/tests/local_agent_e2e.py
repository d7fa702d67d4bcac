"""End-to-end harness: the real host (stores on SQLite, OpenAI-compatible model provider) with the local agent
either in process or in its own plugin process, against the shared fake OpenAI server on loopback.

The shared fake server lives in the repository's ``tests/`` directory, outside this package's import roots; it
is loaded from its file at run time (typed ``Any`` here).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import shutil
import sys
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrunner import (
    AgentResources,
    AgentRunResult,
    BackCallRequest,
    KnowledgeBaseResource,
    KnowledgeHit,
    KnowledgeRetrieveResult,
    ToolCallResult,
    ToolDetail,
    ToolResource,
)
from agentrunner.actions import KnowledgeRetrieveParams, ToolCallParams
from agentrunner_host.access import RunAccess
from agentrunner_host.catalog import ResourceCatalog
from agentrunner_host.definitions import AgentBinding, AgentEventEnvelope, ResourcePolicy, RunPolicy
from agentrunner_host.dispatcher import BackCallDispatcher
from agentrunner_host.host import Host
from agentrunner_host.orchestrator import RunOutcome
from agentrunner_host.providers.llm import ModelConfig, OpenAICompatibleModels
from agentrunner_host.runtime import RuntimeOptions, SubprocessRunnerConnection, discover_plugins
from agentrunner_host.stores import HostStores
from agentrunner_host.stores.artifacts import ArtifactOwner
from agentrunner_host.stores.engine import DATABASE_FILE_NAME, create_engine, default_sqlite_url, upgrade
from agentrunner_runner_local_agent import RUNNER_ID, LocalAgentRunner

PLUGIN_DIR = Path(__file__).resolve().parents[1]
"""The local-agent plugin directory (its ``manifest.yaml``)."""
_REPO = Path(__file__).resolve().parents[3]
PLUGIN_ID = "langbot/local-agent"


_MIGRATED: list[Path] = []


async def migrated_database(data_dir: Path) -> None:
    """Put a migrated, empty host database in *data_dir* (migrated once per session, then copied: cheaper)."""
    if not _MIGRATED:
        template = Path(tempfile.mkdtemp(prefix="local-agent-db-"))
        engine = create_engine(default_sqlite_url(template))
        await upgrade(engine)
        await engine.dispose()
        _MIGRATED.append(template / DATABASE_FILE_NAME)
    shutil.copyfile(_MIGRATED[0], data_dir / DATABASE_FILE_NAME)


def load_fake_openai() -> Any:
    """The repository's shared ``fakes_openai`` module (the fake OpenAI-compatible server)."""
    loaded = sys.modules.get("fakes_openai")
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location("fakes_openai", _REPO / "tests" / "fakes_openai.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fakes_openai"] = module
    spec.loader.exec_module(module)
    return module


class SwitchingHandler:
    """The back-call handler of the shared plugin process: forwards to the current test's host dispatcher, so one
    warm plugin process serves every test of a module (as one serves many runs in production)."""

    def __init__(self) -> None:
        self.target: BackCallDispatcher | None = None

    def _dispatcher(self) -> BackCallDispatcher:
        assert self.target is not None, "no host is using the shared plugin process"
        return self.target

    async def handle(self, request: BackCallRequest) -> dict[str, Any]:
        return await self._dispatcher().handle(request)

    def handle_stream(self, request: BackCallRequest) -> AsyncIterator[dict[str, Any]]:
        return self._dispatcher().handle_stream(request)


@dataclass
class SharedPlugin:
    """The local-agent plugin running in its own process (started from ``manifest.yaml``)."""

    connection: SubprocessRunnerConnection
    handler: SwitchingHandler

    @classmethod
    def start(cls) -> SharedPlugin:
        """A connection whose process starts on first use."""
        found = discover_plugins([PLUGIN_DIR])
        assert found.warnings == []
        handler = SwitchingHandler()
        connection = SubprocessRunnerConnection(
            found.plugins[PLUGIN_ID], handler, options=RuntimeOptions(close_grace=2.0)
        )
        return cls(connection=connection, handler=handler)

    async def aclose(self) -> None:
        """Stop the process."""
        await self.connection.aclose()


class FakeToolProvider:
    """Host tools answered by Python callables; records every call the host forwards."""

    def __init__(self, tools: dict[str, Callable[[dict[str, Any]], Any]]) -> None:
        self.tools = tools
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def detail(self, tool: ToolResource, *, access: RunAccess) -> ToolDetail:
        return ToolDetail(name=tool.tool_name, description=tool.description, parameters=tool.parameters)

    async def call(self, tool: ToolResource, params: ToolCallParams, *, access: RunAccess) -> ToolCallResult:
        self.calls.append((tool.tool_name, dict(params.parameters)))
        return ToolCallResult(content=self.tools[tool.tool_name](dict(params.parameters)))


class FakeKnowledgeProvider:
    """Knowledge bases with fixed passages; records every query."""

    def __init__(self, passages: dict[str, list[str]]) -> None:
        self.passages = passages
        self.queries: list[tuple[str, str]] = []

    async def retrieve(
        self, kb: KnowledgeBaseResource, params: KnowledgeRetrieveParams, *, access: RunAccess
    ) -> KnowledgeRetrieveResult:
        self.queries.append((kb.kb_id, params.query_text))
        texts = self.passages.get(kb.kb_id, [])[: params.top_k]
        return KnowledgeRetrieveResult(
            hits=[KnowledgeHit(text=t, score=1.0 - i / 10, kb_id=kb.kb_id) for i, t in enumerate(texts)]
        )


WEATHER = ToolResource(
    tool_name="weather",
    description="Current weather of a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@dataclass
class Stack:
    """One running host with its fakes."""

    host: Host
    stores: HostStores
    server: Any
    models: OpenAICompatibleModels
    tools: FakeToolProvider
    knowledge: FakeKnowledgeProvider
    binding: AgentBinding
    events: int = 0
    runtime_connection: SubprocessRunnerConnection | None = None
    seen_resources: list[AgentResources] = field(default_factory=list[AgentResources])

    def requests(self) -> list[dict[str, Any]]:
        """Bodies of every chat completion request the fake server received."""
        return [r.body for r in self.server.requests if r.path.endswith("/chat/completions")]

    async def send(
        self,
        text: str | None = None,
        *,
        streaming: bool = True,
        contents: list[dict[str, Any]] | None = None,
        params: dict[str, Any] | None = None,
    ) -> tuple[list[AgentRunResult], RunOutcome]:
        """Deliver one message event; every result the host delivered and the run's outcome."""
        self.events += 1
        envelope: dict[str, Any] = {
            "event_id": f"evt-{self.events}",
            "event_type": "message.received",
            "conversation_id": "conv-1",
            "actor": {"actor_type": "user", "actor_id": "u-1"},
            "input": {"text": text, "contents": contents or []},
            "delivery": {"surface": "test", "supports_streaming": streaming},
            "params": params or {},
        }
        handle = await self.host.orchestrator.submit(AgentEventEnvelope.model_validate(envelope))
        results = [delivered.result async for delivered in handle.results()]
        return results, await handle.outcome()

    async def submit(self, text: str) -> Any:
        """Deliver a message event without waiting: the run's handle."""
        self.events += 1
        envelope = {
            "event_id": f"evt-{self.events}",
            "event_type": "message.received",
            "conversation_id": "conv-1",
            "input": {"text": text},
            "delivery": {"surface": "test", "supports_streaming": True},
        }
        return await self.host.orchestrator.submit(AgentEventEnvelope.model_validate(envelope))

    async def store_file(self, data: bytes, *, name: str, mime_type: str) -> dict[str, Any]:
        """Store a file in the conversation and return a file content element referring to it."""
        record = await self.stores.artifacts.put(
            data,
            mime_type=mime_type,
            name=name,
            source="platform",
            owner=ArtifactOwner(conversation_id="conv-1"),
        )
        ref = self.stores.artifacts.to_metadata(record).model_dump(mode="json")
        return {"type": "file", "artifact": ref, "name": name, "mime_type": mime_type}

    async def store_image(self, data: bytes) -> dict[str, Any]:
        """Store an image in the conversation and return an image content element referring to it."""
        record = await self.stores.artifacts.put(
            data,
            mime_type="image/png",
            name="photo.png",
            artifact_type="image",
            source="platform",
            owner=ArtifactOwner(conversation_id="conv-1"),
        )
        ref = self.stores.artifacts.to_metadata(record).model_dump(mode="json")
        return {"type": "image", "artifact": ref, "mime_type": "image/png"}


def _model(server: Any, model_id: str, *, capabilities: list[str], **extra: Any) -> ModelConfig:
    return ModelConfig(
        id=model_id,
        base_url=server.base_url,
        model=f"fake-{model_id}",
        capabilities=capabilities,  # pyright: ignore[reportArgumentType]
        timeout_seconds=10,
        **extra,
    )


@dataclass
class StackOptions:
    """What differs between scenarios."""

    config: dict[str, Any] = field(default_factory=dict[str, Any])
    tools: list[str] = field(default_factory=lambda: ["weather"])
    timeout_seconds: float = 30.0


@contextlib.asynccontextmanager
async def open_stack(
    tmp_path: Path, server: Any, *, plugin: SharedPlugin | None, options: StackOptions
) -> AsyncGenerator[Stack]:
    """The stack, closed (host, provider, stores) on exit; an out-of-process plugin is only lent to it."""
    await migrated_database(tmp_path)
    engine = create_engine(default_sqlite_url(tmp_path))
    stores = await HostStores.open(engine, data_dir=tmp_path)
    models = OpenAICompatibleModels(
        [
            _model(
                server, "primary", capabilities=["vision", "tool_calling", "streaming"], context_window=32_000
            ),
            _model(
                server, "backup", capabilities=["vision", "tool_calling", "streaming"], context_window=32_000
            ),
            _model(server, "text-only", capabilities=["tool_calling", "streaming"]),
            ModelConfig(id="reranker", base_url=server.base_url, model="fake-rerank", model_type="rerank"),
        ],
        artifacts=stores.artifacts,
    )
    tools = FakeToolProvider(
        {
            "weather": lambda args: {"city": args.get("city"), "sky": "sunny", "celsius": 21},
            "secret_admin": lambda args: {"deleted": True},
        }
    )
    knowledge = FakeKnowledgeProvider(
        {"kb-docs": ["The office opens at 9:00 and closes at 17:00.", "Parking is in the basement."]}
    )
    catalog = ResourceCatalog(
        models=models.resources(),
        tools=[WEATHER, ToolResource(tool_name="secret_admin", description="Deletes everything")],
        knowledge_bases=[KnowledgeBaseResource(kb_id="kb-docs", name="Docs")],
    )
    config: dict[str, Any] = {
        "model": {"primary": "primary", "fallbacks": ["backup"]},
        "prompt": [{"role": "system", "content": "You are the e2e assistant."}],
        **options.config,
    }
    binding = AgentBinding(
        binding_id="b-local",
        runner_id=RUNNER_ID,
        runner_config=config,
        resource_policy=ResourcePolicy(tools=options.tools),
        run_policy=RunPolicy(timeout_seconds=options.timeout_seconds),
        event_types=["message.received"],
    )
    in_process = plugin is None
    host = Host.create(
        bindings=[binding],
        plugins={PLUGIN_ID: [LocalAgentRunner()]} if in_process else None,
        catalog=catalog,
        models=models,
        tools=tools,
        knowledge=knowledge,
        stores=stores,
    )
    connection: SubprocessRunnerConnection | None = None
    if plugin is not None:
        plugin.handler.target = host.dispatcher
        connection = plugin.connection
        host.registry.add(connection)
    stack = Stack(
        host=host,
        stores=stores,
        server=server,
        models=models,
        tools=tools,
        knowledge=knowledge,
        binding=binding,
        runtime_connection=connection,
    )
    try:
        yield stack
    finally:
        if plugin is not None:
            host.registry.remove(PLUGIN_ID)  # the process outlives this host; the module fixture stops it
        await host.aclose()
        await models.aclose()
        await stores.aclose()
        await engine.dispose()
