"""The fuller bridge with the real ``mcp`` client: typed tool content, artifacts as resources, progress, logging,
completion and precise input schemas."""

from __future__ import annotations

import asyncio
import base64
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
import pytest_asyncio
from agentrunner import AgentRunAPI
from agentrunner.actions import BackCallRequest
from agentrunner.context import AgentRunContext
from agentrunner.errors import NotFoundError, UnauthorizedError
from agentrunner_mcp import BridgeServer
from agentrunner_mcp.mcp_tools import ANY_JSON_SCHEMA
from mcp import ClientSession
from mcp.client.session import LoggingFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_bridge_fakes import make_context
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    LoggingMessageNotificationParams,
    ResourceLink,
    ResourceTemplateReference,
    TextContent,
    TextResourceContents,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
ARTIFACTS: dict[str, tuple[str, bytes]] = {
    "art-png": ("image/png", PNG),
    "art-wav": ("audio/wav", b"RIFF....WAVE"),
    "art-notes": ("text/markdown", b"# notes\nbody"),
    "art-secret": ("text/plain", b"not for this run"),
}
PAINT = {"tool_name": "paint", "description": "Paints.", "operations": ["call"], "parameters": {}}

Answer = Callable[[BackCallRequest], Awaitable[dict[str, Any]]]


class HostFake:
    """A fake host: ``tools.call`` answered by *tool*, artifacts served from :data:`ARTIFACTS` (refusing
    ``art-secret`` as the real dispatcher would refuse an artifact outside the run's snapshot)."""

    def __init__(self, tool: Answer | None = None) -> None:
        self.requests: list[BackCallRequest] = []
        self.tool = tool

    async def call(self, request: BackCallRequest, *, timeout: float | None) -> dict[str, Any]:
        self.requests.append(request)
        if request.action == "artifacts.read_range":
            artifact_id = str(request.params["artifact_id"])
            if artifact_id == "art-secret":
                raise UnauthorizedError("artifact outside this run")
            if artifact_id not in ARTIFACTS:
                raise NotFoundError(f"no artifact {artifact_id}")
            mime, data = ARTIFACTS[artifact_id]
            offset, length = int(request.params["offset"]), int(request.params["length"])
            piece = data[offset : offset + length]
            return {
                "artifact_id": artifact_id,
                "offset": offset,
                "length": len(piece),
                "size": len(data),
                "data_base64": base64.b64encode(piece).decode(),
                "has_more": offset + len(piece) < len(data),
                "mime_type": mime,
            }
        if request.action == "tools.call" and self.tool is not None:
            return await self.tool(request)
        raise NotFoundError(f"no fake answer for {request.action}")

    def stream(self, request: BackCallRequest, *, timeout: float | None) -> AsyncIterator[dict[str, Any]]:
        raise NotImplementedError("the bridge makes no streaming calls")


def answering(result: dict[str, Any]) -> Answer:
    async def answer(request: BackCallRequest) -> dict[str, Any]:
        return result

    return answer


def artifact_context(run_id: str, *, readable: bool = True) -> AgentRunContext:
    data = make_context(run_id, tools=[PAINT]).model_dump(mode="json")
    data["input"]["attachments"] = [
        {"artifact_id": "art-png", "name": "pixel.png", "mime_type": "image/png", "artifact_type": "image"},
        {"artifact_id": "art-notes", "name": "notes.md", "mime_type": "text/markdown"},
    ]
    data["context"]["available_apis"]["artifact_read"] = readable
    return AgentRunContext.model_validate(data)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server() -> AsyncGenerator[BridgeServer]:
    async with BridgeServer() as bridge:
        yield bridge


@asynccontextmanager
async def session(
    url: str,
    token: str,
    *,
    on_log: LoggingFnT | None = None,
) -> AsyncGenerator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, logging_callback=on_log) as client,
    ):
        await client.initialize()
        yield client


async def test_typed_host_results_become_image_audio_and_embedded_resource_blocks(
    server: BridgeServer,
) -> None:
    """Protocol v1 content elements referring to artifacts arrive as MCP image / audio / resource blocks, their
    bytes read through the run's own artifacts.read_range back-calls."""
    host = HostFake(
        answering(
            {
                "content": [
                    {"type": "text", "text": "three things:"},
                    {"type": "image", "artifact": {"artifact_id": "art-png", "mime_type": "image/png"}},
                    {"type": "audio", "artifact": {"artifact_id": "art-wav", "mime_type": "audio/wav"}},
                    {"type": "file", "artifact": {"artifact_id": "art-notes", "mime_type": "text/markdown"}},
                ]
            }
        )
    )
    ctx = artifact_context("run-typed")
    with server.open_run(ctx, AgentRunAPI(host, run_id=ctx.run_id)) as reg:
        async with session(server.url, reg.token) as client:
            result = await client.call_tool("paint", {})
    text, image, audio, resource = result.content
    assert isinstance(text, TextContent) and text.text == "three things:"
    assert isinstance(image, ImageContent)
    assert (base64.b64decode(image.data), image.mime_type) == (PNG, "image/png")
    assert isinstance(audio, AudioContent) and audio.mime_type == "audio/wav"
    assert isinstance(resource, EmbeddedResource)
    assert isinstance(resource.resource, TextResourceContents)
    assert resource.resource.text == "# notes\nbody"
    reads = [r for r in host.requests if r.action == "artifacts.read_range"]
    assert {r.run_id for r in reads} == {"run-typed"}
    assert {r.params["artifact_id"] for r in reads} == {"art-png", "art-wav", "art-notes"}


async def test_an_unreadable_artifact_or_a_url_becomes_a_resource_link(server: BridgeServer) -> None:
    """What the host does not let the run read is named, never inlined; a URL is linked as it is."""
    host = HostFake(
        answering(
            {
                "content": [
                    {"type": "image", "artifact": {"artifact_id": "art-secret", "name": "secret.png"}},
                    {"type": "file", "url": "https://example.com/report.pdf", "name": "report.pdf"},
                ],
                "artifact": {"artifact_id": "art-full", "name": "full.json", "mime_type": "application/json"},
            }
        )
    )
    ctx = artifact_context("run-links")
    with server.open_run(ctx, AgentRunAPI(host, run_id=ctx.run_id)) as reg:
        async with session(server.url, reg.token) as client:
            result = await client.call_tool("paint", {})
    secret, report, full = result.content
    assert isinstance(secret, ResourceLink) and secret.uri == "agentrunner-artifact:///art-secret"
    assert isinstance(report, ResourceLink) and report.uri == "https://example.com/report.pdf"
    assert isinstance(full, ResourceLink) and full.name == "full.json"
    assert "not for this run" not in str(result.model_dump())


async def test_mcp_content_blocks_from_a_host_tool_pass_through(server: BridgeServer) -> None:
    data = base64.b64encode(PNG).decode()
    host = HostFake(answering({"content": [{"type": "image", "data": data, "mimeType": "image/png"}]}))
    ctx = artifact_context("run-mcp-blocks")
    with server.open_run(ctx, AgentRunAPI(host, run_id=ctx.run_id)) as reg:
        async with session(server.url, reg.token) as client:
            (block,) = (await client.call_tool("paint", {})).content
    assert isinstance(block, ImageContent) and block.data == data


async def test_the_runs_artifacts_are_resources_read_through_its_back_calls(server: BridgeServer) -> None:
    """resources/list shows the input's artifacts; reading one is artifacts.read_range of the run; the template
    reads any id the host allows; an artifact the host refuses is 'not found'."""
    host = HostFake()
    ctx = artifact_context("run-res")
    with server.open_run(ctx, AgentRunAPI(host, run_id=ctx.run_id)) as reg:
        async with session(server.url, reg.token) as client:
            listed = (await client.list_resources()).resources
            templates = (await client.list_resource_templates()).resource_templates
            png = (await client.read_resource("agentrunner-artifact:///art-png")).contents
            wav = (await client.read_resource("agentrunner-artifact:///art-wav")).contents
            with pytest.raises(
                MCPError, match=r"Resource not found: agentrunner-artifact:///art-secret \(unauthorized\)"
            ) as refused:
                await client.read_resource("agentrunner-artifact:///art-secret")
            completed = await client.complete(
                ResourceTemplateReference(uri=templates[0].uri_template),
                {"name": "artifact_id", "value": "art-n"},
            )
    assert [(r.uri, r.name) for r in listed] == [
        ("agentrunner-artifact:///art-png", "pixel.png"),
        ("agentrunner-artifact:///art-notes", "notes.md"),
    ]
    assert [t.uri_template for t in templates] == ["agentrunner-artifact:///{artifact_id}"]
    (blob,) = png
    assert isinstance(blob, BlobResourceContents) and base64.b64decode(blob.blob) == PNG
    assert isinstance(wav[0], BlobResourceContents)  # not listed, but the host let the run read it
    assert refused.value.error.code == -32002
    assert completed.completion.values == ["art-notes"]
    assert {r.run_id for r in host.requests} == {"run-res"}


async def test_a_run_that_may_not_read_artifacts_offers_no_resources(server: BridgeServer) -> None:
    host = HostFake()
    ctx = artifact_context("run-no-res", readable=False)
    with server.open_run(ctx, AgentRunAPI(host, run_id=ctx.run_id)) as reg:
        async with session(server.url, reg.token) as client:
            assert (await client.list_resources()).resources == []
            assert (await client.list_resource_templates()).resource_templates == []
            with pytest.raises(
                MCPError,
                match=r"Resource not found: agentrunner-artifact:///art-png \(this run reads no artifacts\)",
            ):
                await client.read_resource("agentrunner-artifact:///art-png")
    assert host.requests == []


async def test_a_slow_back_call_reports_increasing_progress(server: BridgeServer) -> None:
    """With a progress token, the bridge reports the start, every interval while the host works, and the end."""
    seen: list[float] = []
    two_waits = asyncio.Event()
    host_done = asyncio.Event()

    async def slow(request: BackCallRequest) -> dict[str, Any]:
        await two_waits.wait()  # the host answers only once the client saw the bridge waiting twice
        host_done.set()
        return {"content": "painted"}

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)
        if message is not None and "waiting" in message and sum(1 for _ in seen) >= 3:
            two_waits.set()

    ctx = artifact_context("run-progress")
    with server.open_run(ctx, AgentRunAPI(HostFake(slow), run_id=ctx.run_id)) as reg:
        async with session(server.url, reg.token) as client:
            result = await client.call_tool("paint", {}, progress_callback=on_progress)
    assert host_done.is_set()
    assert isinstance(result.content[0], TextContent)
    assert len(seen) >= 4
    assert seen == sorted(seen)


async def test_log_messages_follow_the_level_the_session_set(server: BridgeServer) -> None:
    """No log messages until logging/setLevel; at debug, the call's steps; at error, none for a good call."""
    logs: list[LoggingMessageNotificationParams] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append(params)

    ctx = artifact_context("run-logs")
    host = HostFake(answering({"content": "ok"}))
    with server.open_run(ctx, AgentRunAPI(host, run_id=ctx.run_id)) as reg:
        async with session(server.url, reg.token, on_log=on_log) as client:
            await client.call_tool("paint", {})
            quiet = len(logs)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)  # deprecated only from 2026-07-28 on
                await client.set_logging_level("debug")  # pyright: ignore[reportDeprecated]
            await client.call_tool("paint", {})
            await client.call_tool("current_event", {})
            chatty = len(logs)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.set_logging_level("error")  # pyright: ignore[reportDeprecated]
            await client.call_tool("paint", {})
    assert quiet == 0
    assert chatty >= 3
    assert len(logs) == chatty
    assert all(entry.logger == "agentrunner.bridge" for entry in logs)
    assert any("answered" in str(entry.data) for entry in logs)


def _empty_schemas(schema: dict[str, Any], path: str = "$") -> list[str]:
    """Paths of sub-schemas that are ``{}`` (maps of named schemas are walked, not judged themselves)."""
    if not schema and path != "$":
        return [path]
    found: list[str] = []
    for key, value in schema.items():
        if key in ("properties", "$defs", "patternProperties") and isinstance(value, dict):
            for name, sub in value.items():
                found += _empty_schemas(sub, f"{path}.{key}.{name}")
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            found += _empty_schemas(value, f"{path}.{key}")
        elif key in ("anyOf", "oneOf", "allOf") and isinstance(value, list):
            for i, sub in enumerate(value):
                found += _empty_schemas(sub, f"{path}.{key}[{i}]")
    return found


async def test_no_input_schema_has_an_empty_sub_schema(server: BridgeServer) -> None:
    """JsonValue fields (state_set.value, call_tool.parameters) say 'any JSON value' explicitly, never {}."""
    ctx = make_context("run-schemas", history=True, state=True, tools=[PAINT])
    with server.open_run(ctx, AgentRunAPI(HostFake(), run_id=ctx.run_id)) as reg:
        async with session(server.url, reg.token) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
    for tool in tools.values():
        assert _empty_schemas(tool.input_schema) == [], tool.name
    value = tools["state_set"].input_schema["$defs"]["JsonValue"]
    assert value["type"] == ANY_JSON_SCHEMA["type"]
