"""Host tools: a real tiny MCP server over stdio and over streamable HTTP on loopback, and Python tools
registered through a monkeypatched ``agentrunner.tools`` entry-point lookup."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from agentrunner import InvalidArgumentError, NotFoundError, RuntimeAPIError, ToolResource
from agentrunner import codec as json
from agentrunner.actions import ToolCallParams
from agentrunner_host.access import ConversationKey, RunAccess
from agentrunner_host.providers import tools as providers_tools
from agentrunner_host.providers.tools import HostTools, MCPServerConfig, PythonTool, discover_python_tools
from agentrunner_host.stores import HostStores
from agentrunner_host.stores.engine import create_engine, default_sqlite_url, upgrade
from loopback_uvicorn import serve_app
from pydantic import ValidationError

from . import mcp_tiny_server
from .mcp_tiny_server import PNG

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER_SCRIPT = str(Path(mcp_tiny_server.__file__))
ACCESS = RunAccess(
    run_id="run-1",
    runner_id="plugin:test/fake/default",
    plugin_id="test/fake",
    binding_id="b-1",
    event_id="evt-1",
    conversation=ConversationKey("conv-1"),
)


def _stdio(name: str = "tiny", **kwargs: Any) -> MCPServerConfig:
    return MCPServerConfig(
        name=name, transport="stdio", command=sys.executable, args=[SERVER_SCRIPT], **kwargs
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stores(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[HostStores]:
    data_dir = tmp_path_factory.mktemp("tools-data")
    engine = create_engine(default_sqlite_url(data_dir))
    await upgrade(engine)
    opened = await HostStores.open(engine, data_dir=data_dir)
    yield opened
    await opened.aclose()
    await engine.dispose()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stdio_tools(stores: HostStores) -> AsyncIterator[HostTools]:
    tools = HostTools(
        mcp_servers=[_stdio()], python_tools=[], artifacts=stores.artifacts, result_threshold=4096
    )
    await tools.refresh()
    yield tools
    await tools.aclose()


def _tool(tools: HostTools, name: str) -> ToolResource:
    return next(t for t in tools.resources() if t.tool_name == name)


async def _call(tools: HostTools, name: str, **parameters: Any) -> Any:
    return await tools.call(
        _tool(tools, name), ToolCallParams(tool_name=name, parameters=parameters), access=ACCESS
    )


async def test_stdio_server_tools_are_listed_namespaced_with_description_and_schema(
    stdio_tools: HostTools,
) -> None:
    """Each MCP tool becomes ``<server>__<tool>`` with its description and JSON schema."""
    names = sorted(t.tool_name for t in stdio_tools.resources())
    assert names == sorted(f"tiny__{n}" for n in ("echo_upper", "add", "big", "boom", "picture", "exit_now"))
    echo = _tool(stdio_tools, "tiny__echo_upper")
    assert echo.tool_type == "mcp"
    assert echo.description == "Return the text upper-cased, prefixed with ECHO:."
    assert echo.parameters["properties"]["text"]["type"] == "string"
    assert echo.parameters["required"] == ["text"]


async def test_a_stdio_tool_call_returns_the_structured_result(stdio_tools: HostTools) -> None:
    """A call reaches the server over stdio and returns its structured content."""
    result = await _call(stdio_tools, "tiny__echo_upper", text="hi")
    assert result.content == {"result": "ECHO:HI"}
    assert result.is_error is False and result.artifact is None
    detail = await stdio_tools.detail(_tool(stdio_tools, "tiny__add"), access=ACCESS)
    assert detail.name == "tiny__add" and set(detail.parameters["properties"]) == {"a", "b"}


async def test_a_tool_failure_is_reported_as_is_error_not_raised(stdio_tools: HostTools) -> None:
    """A tool that raises inside the server answers is_error with its message."""
    result = await _call(stdio_tools, "tiny__boom")
    assert result.is_error is True
    assert "kaput" in json.dumps_str(result.content)


async def test_a_large_result_is_stored_as_an_artifact_owned_by_the_run(
    stdio_tools: HostTools, stores: HostStores
) -> None:
    """A result over the threshold comes back as a preview plus an artifact of the run's conversation."""
    result = await _call(stdio_tools, "tiny__big", size=10_000)
    assert result.artifact is not None
    assert isinstance(result.content, str) and result.content == "x" * providers_tools.PREVIEW_CHARS
    record = await stores.artifacts.get(result.artifact.artifact_id)
    assert record is not None
    assert (record.owner.conversation_id, record.owner.run_id, record.source) == ("conv-1", "run-1", "tool")
    assert record.artifact_type == "tool_result" and record.mime_type == "text/plain"
    assert await stores.artifacts.read_range(record, 0, record.size) == b"x" * 10_000
    assert result.artifact.size == 10_000 and result.artifact.digest == f"sha256:{record.sha256}"


async def test_a_small_result_stays_inline(stdio_tools: HostTools) -> None:
    """A result under the threshold is returned inline without an artifact."""
    result = await _call(stdio_tools, "tiny__big", size=100)
    assert result.content == "x" * 100 and result.artifact is None


async def test_image_blocks_become_artifacts_never_base64(stdio_tools: HostTools, stores: HostStores) -> None:
    """An image block of an MCP result is stored as an artifact and referenced, with no base64 inline."""
    result = await _call(stdio_tools, "tiny__picture")
    text = json.dumps_str(result.content)
    assert "iVBOR" not in text  # base64 of the PNG signature
    part = result.content[0]
    assert part["type"] == "image"
    record = await stores.artifacts.get(part["artifact"]["artifact_id"])
    assert record is not None and record.mime_type == "image/png"
    assert await stores.artifacts.read_range(record, 0, record.size) == PNG


async def test_an_unknown_tool_is_not_found(stdio_tools: HostTools) -> None:
    """A name the host does not know (even after listing its server again) is not_found."""
    ghost = ToolResource(tool_name="tiny__ghost")
    with pytest.raises(NotFoundError, match="tool 'tiny__ghost' is not available on this host"):
        await stdio_tools.call(ghost, ToolCallParams(tool_name="tiny__ghost"), access=ACCESS)


async def test_a_dead_server_fails_the_call_retryably_and_the_next_call_restarts_it() -> None:
    """When the server process dies the call fails retryable; the next call starts a fresh session."""
    tools = HostTools(mcp_servers=[_stdio()], python_tools=[])
    try:
        await tools.refresh()
        with pytest.raises(RuntimeAPIError, match="MCP server 'tiny' disconnected") as caught:
            await _call(tools, "tiny__exit_now")
        assert caught.value.retryable
        result = await _call(tools, "tiny__add", a=2, b=3)
    finally:
        await tools.aclose()
    assert result.content == {"result": 5}


async def test_the_allow_list_limits_the_exposed_tools() -> None:
    """``tools`` in the server config exposes only the listed tools."""
    tools = HostTools(mcp_servers=[_stdio(tools=["add"])], python_tools=[])
    try:
        resources = await tools.refresh()
    finally:
        await tools.aclose()
    assert [t.tool_name for t in resources] == ["tiny__add"]


async def test_a_server_that_cannot_start_is_skipped_and_its_calls_fail_retryably() -> None:
    """A broken server does not block the others: it lists nothing and calls fail with runtime_error."""
    broken = MCPServerConfig(
        name="broken",
        transport="stdio",
        command=sys.executable,
        args=["-c", "import sys; sys.exit(1)"],
        startup_timeout_seconds=10,
    )
    tools = HostTools(mcp_servers=[broken], python_tools=[])
    try:
        assert await tools.refresh() == []
        with pytest.raises(NotFoundError, match="tool 'broken__x' is not available on this host"):
            await tools.call(
                ToolResource(tool_name="broken__x"), ToolCallParams(tool_name="broken__x"), access=ACCESS
            )
    finally:
        await tools.aclose()


async def test_streamable_http_server_tools_are_listed_and_called_over_loopback() -> None:
    """The same server mounted over streamable HTTP on 127.0.0.1 serves list and call."""
    app = mcp_tiny_server.server.streamable_http_app()
    async with serve_app(app) as port:
        config = MCPServerConfig(name="web", transport="streamable_http", url=f"http://127.0.0.1:{port}/mcp")
        tools = HostTools(mcp_servers=[config], python_tools=[])
        try:
            resources = await tools.refresh()
            result = await _call(tools, "web__add", a=40, b=2)
        finally:
            await tools.aclose()
    assert "web__echo_upper" in {r.tool_name for r in resources}
    assert result.content == {"result": 42}


async def test_secret_headers_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``headers_from`` reads header values from named environment variables; a missing one is named."""
    config = MCPServerConfig(
        name="web",
        transport="streamable_http",
        url="http://127.0.0.1:9/mcp",
        headers_from={"Authorization": "TINY_TOKEN"},
    )
    tools = HostTools(mcp_servers=[config], python_tools=[], environ={})
    try:
        connection = tools._servers["web"]
        with pytest.raises(RuntimeAPIError, match="TINY_TOKEN"):
            await connection.session()
    finally:
        await tools.aclose()


async def test_server_configs_are_validated() -> None:
    """A stdio server needs a command, an HTTP server an http(s) URL, and names cannot contain ``__``."""
    with pytest.raises(ValidationError, match="Value error, MCP server 'a': stdio needs a command"):
        MCPServerConfig(name="a", transport="stdio")
    with pytest.raises(
        ValidationError, match=r"Value error, MCP server 'a': streamable_http needs an http\(s\) url"
    ):
        MCPServerConfig(name="a", transport="streamable_http", url="file:///x")
    with pytest.raises(
        ValidationError, match=r"String should match pattern '\^\[A-Za-z0-9-\]\+\(_\[A-Za-z0-9-\]\+\)\*\$'"
    ):
        MCPServerConfig(name="a__b", transport="stdio", command="x")


# -- Python tools ----------------------------------------------------------------------------------------------


def _entry(name: str, target: str) -> EntryPoint:
    return EntryPoint(
        name=name, value=f"providers.python_tools_sample:{target}", group=providers_tools.ENTRY_POINT_GROUP
    )


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    entries = [_entry("word_count", "word_count"), _entry("repeat", "repeat"), _entry("explode", "explode")]

    def fake_entry_points(*, group: str) -> list[EntryPoint]:
        return entries if group == providers_tools.ENTRY_POINT_GROUP else []

    monkeypatch.setattr(providers_tools, "entry_points", fake_entry_points)


@pytest.mark.usefixtures("registered")
async def test_entry_point_python_tools_are_discovered_with_docstring_and_schema() -> None:
    """Functions of one pydantic model registered under ``agentrunner.tools`` become tools."""
    tools = HostTools()
    word_count = _tool(tools, "word_count")
    assert word_count.tool_type == "python"
    assert word_count.description == "Count the words of a text."
    assert word_count.parameters["properties"]["text"]["type"] == "string"
    assert {t.tool_name for t in tools.resources()} == {"word_count", "repeat", "explode"}


@pytest.mark.usefixtures("registered")
async def test_python_tools_are_called_sync_and_async_with_validated_arguments() -> None:
    """Sync tools run off the event loop, async ones are awaited; arguments are validated first."""
    tools = HostTools()
    assert (await _call(tools, "word_count", text="one two three")).content == {"words": 3}
    assert (await _call(tools, "repeat", word="ha", times=3)).content == "ha ha ha"
    with pytest.raises(InvalidArgumentError, match="times"):
        await _call(tools, "repeat", word="ha", times=-1)


@pytest.mark.usefixtures("registered")
async def test_a_python_tool_that_raises_reports_is_error() -> None:
    """An exception inside a Python tool is the tool's failure (is_error), not a host error."""
    result = await _call(HostTools(), "explode", word="x", times=1)
    assert result.is_error is True and "cannot repeat x" in str(result.content)


async def test_a_broken_entry_point_is_skipped(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An entry point that is not a one-model function is logged and skipped; the others load."""
    entries = [_entry("bad", "not_a_tool"), _entry("word_count", "word_count")]
    monkeypatch.setattr(providers_tools, "entry_points", lambda *, group: entries)
    assert [t.name for t in discover_python_tools()] == ["word_count"]
    assert "bad" in caplog.text


async def test_python_tool_names_must_not_look_like_mcp_names() -> None:
    """A Python tool named with ``__`` could shadow an MCP tool, so it is refused."""
    from .python_tools_sample import word_count

    with pytest.raises(ValueError, match="__"):
        HostTools(python_tools=[PythonTool.from_callable("srv__x", word_count)])


async def test_one_session_serves_concurrent_calls(stdio_tools: HostTools) -> None:
    """Concurrent calls share the server's single session and each gets its own answer."""
    results = await asyncio.gather(*(_call(stdio_tools, "tiny__add", a=i, b=1) for i in range(8)))
    assert [r.content for r in results] == [{"result": i + 1} for i in range(8)]


async def test_several_servers_are_listed_together_and_a_broken_one_does_not_hide_the_others() -> None:
    """Servers start in parallel; each keeps its own namespace and a failing one only loses its own tools."""
    broken = MCPServerConfig(
        name="broken", transport="stdio", command=sys.executable, args=["-c", "raise SystemExit(1)"]
    )
    tools = HostTools(
        mcp_servers=[_stdio("one", tools=["add"]), _stdio("two", tools=["add"]), broken], python_tools=[]
    )
    try:
        names = sorted(t.tool_name for t in await tools.refresh())
        result = await _call(tools, "two__add", a=1, b=1)
    finally:
        await tools.aclose()
    assert names == ["one__add", "two__add"]
    assert result.content == {"result": 2}


async def test_a_server_that_never_answers_times_out_at_start_and_is_cleaned_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A process that never speaks MCP fails its start-up within the timeout and is ended (and reaped)."""
    mute = MCPServerConfig(
        name="mute",
        transport="stdio",
        command=sys.executable,
        args=["-c", "import time; time.sleep(60)"],
        startup_timeout_seconds=0.5,
    )
    tools = HostTools(mcp_servers=[mute], python_tools=[])
    try:
        assert await tools.refresh() == []
    finally:
        await tools.aclose()
    assert "did not start in time" in caplog.text
