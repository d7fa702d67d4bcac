"""Host tools behind ``tools.get_detail`` / ``tools.call``: MCP servers and Python entry-point tools.

* **MCP servers** (:class:`MCPServerConfig`) are reached with the ``mcp`` client over stdio or streamable
  HTTP. Each server gets one session, started on first use and kept; a session whose transport died is
  restarted by the next call. Its tool list is cached until :meth:`HostTools.refresh`. Tools are exposed as
  ``<server>__<tool>`` so two servers can never clash.
* **Python tools** are registered by installed distributions under the entry-point group
  ``agentrunner.tools``: the entry point names a :class:`PythonTool`, or a function taking one pydantic
  model (its arguments) whose docstring describes it.

A result whose JSON is larger than ``result_threshold`` (32 KiB by default) is stored as an artifact owned by
the run's conversation and run, and the runner gets a short preview plus the artifact ref. Binary blocks of
MCP results (images, audio) are always stored as artifacts: base64 never enters the protocol.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import logging
import os
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any, Final, Literal, cast

import anyio
import httpx2
import mcp_types
from agentrunner import (
    ArtifactRef,
    InvalidArgumentError,
    NotFoundError,
    PayloadTooLargeError,
    RuntimeAPIError,
    ToolCallResult,
    ToolDetail,
    ToolResource,
)
from agentrunner import codec as json
from agentrunner.actions import ToolCallParams
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentrunner_host.access import RunAccess
from agentrunner_host.stores.artifacts import ArtifactOwner, ArtifactStore
from agentrunner_host.tool_risk import ToolRisk, classify_tool

if TYPE_CHECKING:
    # The ``mcp`` client is imported where a session starts, not with this module: the configuration models
    # below are imported by every ``agentrunner`` command, and importing ``mcp`` costs about a second of CPU.
    from mcp import ClientSession

__all__ = [
    "DEFAULT_RESULT_THRESHOLD",
    "ENTRY_POINT_GROUP",
    "NAME_SEPARATOR",
    "HostTools",
    "MCPServerConfig",
    "PythonTool",
    "discover_python_tools",
]

log = logging.getLogger("agentrunner.host.tools")

ENTRY_POINT_GROUP: Final = "agentrunner.tools"
"""Entry-point group of Python tools."""

NAME_SEPARATOR: Final = "__"
"""Separates the server name from the tool name in an MCP tool's exposed name."""

DEFAULT_RESULT_THRESHOLD: Final = 32 * 1024
"""Tool results larger than this (JSON bytes) are returned as an artifact."""

PREVIEW_CHARS: Final = 1000
"""Characters of a large result shown inline."""

_NAME: Final = re.compile(r"[A-Za-z0-9_-]+")
_TOOL_NAME_MAX: Final = 64  # OpenAI function names are capped at 64 characters


class MCPServerConfig(BaseModel):
    """One MCP server the host connects to as a client."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: str = Field(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$")
    """Server name, the prefix of its tools' names (letters, digits, ``-`` and single ``_``)."""
    transport: Literal["stdio", "streamable_http"]
    """How to reach it."""
    command: str | None = None
    """Executable (stdio)."""
    args: list[str] = []
    """Arguments (stdio)."""
    env: dict[str, str] = {}
    """Extra non-secret environment variables of the server process (stdio)."""
    env_from: dict[str, str] = {}
    """Server variable → name of the host environment variable holding its (secret) value (stdio)."""
    cwd: str | None = None
    """Working directory (stdio)."""
    url: str | None = None
    """Endpoint, e.g. ``http://127.0.0.1:8765/mcp`` (streamable HTTP)."""
    headers: dict[str, str] = {}
    """Extra non-secret request headers (streamable HTTP)."""
    headers_from: dict[str, str] = {}
    """Header → name of the host environment variable holding its (secret) value (streamable HTTP)."""
    tools: list[str] | None = None
    """Only expose these tools of the server (``None`` = all)."""
    tool_risks: dict[str, list[ToolRisk]] = {}
    """The operator's classification of tools of this server (tool name → classes; ``[]`` = safe), which
    replaces the one read from their names and annotations (:mod:`agentrunner_host.tool_risk`)."""
    startup_timeout_seconds: float = Field(default=30.0, gt=0)
    """How long starting and initialising a session may take."""
    call_timeout_seconds: float = Field(default=120.0, gt=0)
    """How long one tool call may take."""

    @model_validator(mode="after")
    def _transport_fields(self) -> MCPServerConfig:
        if self.transport == "stdio" and not self.command:
            raise ValueError(f"MCP server {self.name!r}: stdio needs a command")
        if self.transport == "streamable_http" and not (
            self.url and self.url.startswith(("http://", "https://"))
        ):
            raise ValueError(f"MCP server {self.name!r}: streamable_http needs an http(s) url")
        return self


@dataclass(frozen=True, slots=True)
class PythonTool:
    """A tool implemented in Python: a function of one pydantic arguments model."""

    name: str
    """Exposed name (letters, digits, ``-``, ``_``; never ``__``)."""
    description: str
    """What it does (shown to models)."""
    args_model: type[BaseModel]
    """Arguments; validated before the call."""
    function: Callable[[Any], Any]
    """Called with a validated ``args_model`` instance; may be async. Its return value must be JSON."""

    @classmethod
    def from_callable(cls, name: str, function: Callable[..., Any]) -> PythonTool:
        """Build from a function whose single parameter is annotated with a pydantic model."""
        parameters = list(inspect.signature(function, eval_str=True).parameters.values())
        annotation = parameters[0].annotation if len(parameters) == 1 else None
        if not (inspect.isclass(annotation) and issubclass(annotation, BaseModel)):
            raise TypeError(f"Python tool {name!r} must take exactly one pydantic model argument")
        description = inspect.getdoc(function) or name
        return cls(name=name, description=description, args_model=annotation, function=function)

    def schema(self) -> dict[str, Any]:
        """JSON Schema of the arguments."""
        return self.args_model.model_json_schema()


def discover_python_tools(*, group: str = ENTRY_POINT_GROUP) -> list[PythonTool]:
    """Load every tool registered under *group*; a broken entry point is logged and skipped."""
    tools: list[PythonTool] = []
    for entry in entry_points(group=group):
        try:
            tools.append(_load_entry(entry))
        except Exception:
            log.exception("Python tool entry point %r could not be loaded; skipping it", entry.name)
    return tools


def _load_entry(entry: EntryPoint) -> PythonTool:
    target = entry.load()
    if isinstance(target, PythonTool):
        return target
    if callable(target):
        return PythonTool.from_callable(entry.name, cast(Callable[..., Any], target))
    raise TypeError(f"entry point {entry.name!r} is neither a PythonTool nor a function")


def _exposed_name(server: str, tool: str) -> str:
    # models accept [A-Za-z0-9_-]{1,64}; keep the server prefix intact and clip the tool part
    cleaned = "".join(ch if _NAME.fullmatch(ch) else "_" for ch in tool)
    return f"{server}{NAME_SEPARATOR}{cleaned}"[:_TOOL_NAME_MAX]


def _resolve_env(mapping: Mapping[str, str], environ: Mapping[str, str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for target, variable in mapping.items():
        value = environ.get(variable)
        if value is None:
            raise RuntimeAPIError(f"{what}: environment variable {variable} is not set")
        out[target] = value
    return out


def _is_disconnect(exc: BaseException) -> bool:
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, MCPError):
        return exc.error.code == mcp_types.CONNECTION_CLOSED
    return isinstance(
        exc,
        anyio.ClosedResourceError
        | anyio.BrokenResourceError
        | anyio.EndOfStream
        | OSError
        | httpx2.HTTPError,
    )


class _MCPConnection:
    """One kept session with one MCP server. Its transport lives in a task of its own, because the ``mcp``
    client's context managers must be entered and left in the same task."""

    def __init__(self, config: MCPServerConfig, environ: Mapping[str, str]) -> None:
        self.config = config
        self._environ = environ
        self._lock = asyncio.Lock()
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._ready: asyncio.Future[ClientSession] | None = None
        self.tools: list[mcp_types.Tool] | None = None
        """Cached tool list (``None`` until listed)."""

    async def session(self) -> ClientSession:
        async with self._lock:
            if self._session is not None and self._task is not None and not self._task.done():
                return self._session
            await self._shutdown()
            return await self._start()

    async def _start(self) -> ClientSession:
        ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._ready = ready
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._serve(ready, self._stop), name=f"mcp:{self.config.name}")
        try:
            async with asyncio.timeout(self.config.startup_timeout_seconds):
                session = await asyncio.shield(ready)
        except TimeoutError:
            await self._shutdown()
            _consume(ready)
            raise RuntimeAPIError(
                f"MCP server {self.config.name!r} did not start in time", retryable=True
            ) from None
        except RuntimeAPIError:
            await self._shutdown()
            raise
        except Exception as exc:
            await self._shutdown()
            log.warning("MCP server %s failed to start: %s", self.config.name, type(exc).__name__)
            raise RuntimeAPIError(
                f"MCP server {self.config.name!r} is unavailable ({type(exc).__name__})", retryable=True
            ) from None
        self._session = session
        return session

    async def _serve(self, ready: asyncio.Future[ClientSession], stop: asyncio.Event) -> None:
        from mcp import ClientSession, StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client

        config = self.config
        try:
            async with AsyncExitStack() as stack:
                if config.transport == "stdio":
                    assert config.command is not None
                    env = {
                        **_default_env(),
                        **config.env,
                        **_resolve_env(config.env_from, self._environ, config.name),
                    }
                    params = StdioServerParameters(
                        command=config.command, args=config.args, env=env, cwd=config.cwd
                    )
                    read, write = await stack.enter_async_context(stdio_client(params))
                else:
                    assert config.url is not None
                    headers = {
                        **config.headers,
                        **_resolve_env(config.headers_from, self._environ, config.name),
                    }
                    client = await stack.enter_async_context(
                        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
                    )
                    read, write = await stack.enter_async_context(
                        streamable_http_client(config.url, http_client=client)
                    )
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                if not ready.done():
                    ready.set_result(session)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError("cancelled"))
            if not isinstance(exc, Exception):
                raise
            log.warning("MCP server %s session ended: %s", config.name, type(exc).__name__)

    async def _shutdown(self) -> None:
        self._session = None
        task, self._task = self._task, None
        if task is None:
            return
        self._stop.set()
        ready = self._ready
        if ready is None or not ready.done() or ready.cancelled() or ready.exception() is not None:
            # still starting (or failed to): the transport task is not waiting on the stop event, so end it now
            task.cancel()
        # asyncio.wait never raises the task's own outcome, only our caller's cancellation
        done, _ = await asyncio.wait({task}, timeout=5.0)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=5.0)
        if task.done() and not task.cancelled():
            task.exception()  # already logged by _serve
        if ready is not None:
            _consume(ready)

    async def broken(self, session: ClientSession) -> None:
        """Drop *session* after a transport failure; the next call starts a new one. A session that was
        already replaced is left alone (another call may have restarted the server meanwhile)."""
        async with self._lock:
            if self._session is session:
                await self._shutdown()

    async def list_tools(self) -> list[mcp_types.Tool]:
        session = await self.session()
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        try:
            while True:
                params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
        except Exception as exc:
            if _is_disconnect(exc):
                await self.broken(session)
            raise
        allowed = self.config.tools
        self.tools = [t for t in tools if allowed is None or t.name in allowed]
        return self.tools

    async def aclose(self) -> None:
        async with self._lock:
            await self._shutdown()


def _consume(future: asyncio.Future[Any]) -> None:
    # mark a late failure as seen, so asyncio does not report it as never retrieved
    if future.done() and not future.cancelled():
        future.exception()


def _default_env() -> dict[str, str]:
    # Like mcp's own default: a server process inherits only harmless variables, never the host's secrets.
    keep = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
    return {k: os.environ[k] for k in keep if k in os.environ}


@dataclass(frozen=True, slots=True)
class _Entry:
    resource: ToolResource
    risks: frozenset[ToolRisk]
    server: _MCPConnection | None = None
    remote_name: str | None = None
    python: PythonTool | None = None


class HostTools:
    """A :class:`~agentrunner_host.providers.protocols.ToolProvider` over MCP servers and Python tools.

    Call :meth:`refresh` once before building the catalog (it connects and lists every server) and
    :meth:`aclose` on shutdown (it ends every session and server process).
    """

    def __init__(
        self,
        *,
        mcp_servers: Iterable[MCPServerConfig] = (),
        python_tools: Iterable[PythonTool] | None = None,
        artifacts: ArtifactStore | None = None,
        result_threshold: int = DEFAULT_RESULT_THRESHOLD,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """``python_tools=None`` discovers the ``agentrunner.tools`` entry points; pass ``[]`` for none."""
        environ = os.environ if environ is None else environ
        self._servers: dict[str, _MCPConnection] = {}
        for config in mcp_servers:
            if config.name in self._servers:
                raise ValueError(f"MCP server name {config.name!r} is configured twice")
            self._servers[config.name] = _MCPConnection(config, environ)
        tools = discover_python_tools() if python_tools is None else list(python_tools)
        self._python: dict[str, PythonTool] = {}
        for tool in tools:
            if (
                not _NAME.fullmatch(tool.name)
                or NAME_SEPARATOR in tool.name
                or len(tool.name) > _TOOL_NAME_MAX
            ):
                raise ValueError(f"Python tool name {tool.name!r} must be [A-Za-z0-9_-]{{1,64}} without '__'")
            if tool.name in self._python:
                raise ValueError(f"Python tool {tool.name!r} is registered twice")
            self._python[tool.name] = tool
        self._artifacts = artifacts
        self._threshold = result_threshold
        self._entries: dict[str, _Entry] = {}
        self._rebuild()

    # -- catalog ---------------------------------------------------------------------------------------------

    def _rebuild(self) -> None:
        entries: dict[str, _Entry] = {}
        for tool in self._python.values():
            resource = ToolResource(
                tool_name=tool.name,
                description=tool.description,
                parameters=tool.schema(),
                tool_type="python",
            )
            entries[tool.name] = _Entry(resource=resource, risks=classify_tool(tool.name), python=tool)
        for server in self._servers.values():
            for tool in server.tools or []:
                name = _exposed_name(server.config.name, tool.name)
                if name in entries:
                    log.warning(
                        "MCP tool %s of %s collides with another tool; skipping",
                        tool.name,
                        server.config.name,
                    )
                    continue
                resource = ToolResource(
                    tool_name=name,
                    description=tool.description or tool.title or tool.name,
                    parameters=dict(tool.input_schema),
                    tool_type="mcp",
                )
                hints = tool.annotations
                risks = classify_tool(
                    tool.name,
                    declared=server.config.tool_risks.get(tool.name),
                    destructive_hint=None if hints is None else hints.destructive_hint,
                    open_world_hint=None if hints is None else hints.open_world_hint,
                )
                entries[name] = _Entry(resource=resource, risks=risks, server=server, remote_name=tool.name)
        self._entries = entries

    async def refresh(self, *, server: str | None = None) -> list[ToolResource]:
        """(Re)list the tools of every MCP server (or one); a server that fails is logged and keeps its
        previous list. Returns the catalog entries."""
        targets = [self._servers[server]] if server is not None else list(self._servers.values())
        # servers start in parallel: a host with several stdio servers pays one cold start, not the sum
        outcomes = await asyncio.gather(*(c.list_tools() for c in targets), return_exceptions=True)
        for connection, outcome in zip(targets, outcomes, strict=True):
            if isinstance(outcome, asyncio.CancelledError):
                raise outcome
            if isinstance(outcome, BaseException):
                log.warning("listing the tools of MCP server %s failed: %s", connection.config.name, outcome)
        self._rebuild()
        return self.resources()

    def resources(self) -> list[ToolResource]:
        """Catalog entries for :class:`~agentrunner_host.catalog.ResourceCatalog`."""
        return [e.resource for e in self._entries.values()]

    def risks(self) -> dict[str, frozenset[ToolRisk]]:
        """The dangerous classes of every catalog entry that has any (see :mod:`agentrunner_host.tool_risk`)."""
        return {name: e.risks for name, e in self._entries.items() if e.risks}

    async def aclose(self) -> None:
        """End every MCP session (and stdio server process)."""
        for connection in self._servers.values():
            await connection.aclose()

    # -- ToolProvider ----------------------------------------------------------------------------------------

    async def detail(self, tool: ToolResource, *, access: RunAccess) -> ToolDetail:
        """The tool's description and argument schema."""
        entry = await self._entry(tool.tool_name)
        r = entry.resource
        return ToolDetail(name=r.tool_name, description=r.description, parameters=r.parameters)

    async def call(self, tool: ToolResource, params: ToolCallParams, *, access: RunAccess) -> ToolCallResult:
        """Run the tool; large results come back as an artifact."""
        entry = await self._entry(tool.tool_name)
        if entry.python is not None:
            content, is_error = await self._call_python(entry.python, params.parameters)
        else:
            assert entry.server is not None
            assert entry.remote_name is not None
            content, is_error = await self._call_mcp(
                entry.server, entry.remote_name, params.parameters, access
            )
        return await self._result(tool.tool_name, content, is_error, access)

    async def _entry(self, name: str) -> _Entry:
        entry = self._entries.get(name)
        if entry is None and NAME_SEPARATOR in name:
            # the catalog may predate a server's newest tools: list that server again once
            server = name.split(NAME_SEPARATOR, 1)[0]
            if server in self._servers:
                await self.refresh(server=server)
                entry = self._entries.get(name)
        if entry is None:
            raise NotFoundError(f"tool {name!r} is not available on this host")
        return entry

    async def _call_python(self, tool: PythonTool, parameters: dict[str, Any]) -> tuple[Any, bool]:
        try:
            args = tool.args_model.model_validate(parameters)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "parameters"
            raise InvalidArgumentError(f"tool {tool.name!r}: {loc}: {first['msg']}") from None
        try:
            if inspect.iscoroutinefunction(tool.function):
                value = await cast(Callable[[Any], Awaitable[Any]], tool.function)(args)
            else:
                value = await asyncio.to_thread(tool.function, args)
        except Exception as exc:  # the tool's own failure, reported to the model like an MCP tool error
            log.info("Python tool %s raised %s", tool.name, type(exc).__name__)
            return f"{type(exc).__name__}: {exc}", True
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json")
        try:
            json.dumps(value)
        except TypeError:
            raise RuntimeAPIError(f"tool {tool.name!r} returned a value that is not JSON") from None
        return value, False

    async def _call_mcp(
        self, server: _MCPConnection, name: str, parameters: dict[str, Any], access: RunAccess
    ) -> tuple[Any, bool]:
        from mcp.shared.exceptions import MCPError

        config = server.config
        session = await server.session()
        try:
            async with asyncio.timeout(config.call_timeout_seconds):
                result = await session.call_tool(name, parameters)
        except TimeoutError:
            raise RuntimeAPIError(
                f"tool {name!r} of MCP server {config.name!r} timed out", retryable=True
            ) from None
        except MCPError as exc:
            if _is_disconnect(exc):
                await server.broken(session)
                raise RuntimeAPIError(f"MCP server {config.name!r} disconnected", retryable=True) from None
            if exc.error.code == mcp_types.INVALID_PARAMS:
                raise InvalidArgumentError(f"tool {name!r}: {exc.error.message}") from None
            raise RuntimeAPIError(
                f"tool {name!r} of MCP server {config.name!r} failed: {exc.error.message}"
            ) from None
        except Exception as exc:
            if _is_disconnect(exc):
                await server.broken(session)
                raise RuntimeAPIError(f"MCP server {config.name!r} disconnected", retryable=True) from None
            raise
        return await self._mcp_content(result, access), result.is_error

    async def _mcp_content(self, result: mcp_types.CallToolResult, access: RunAccess) -> Any:
        if result.structured_content is not None and not result.is_error:
            return result.structured_content
        parts: list[Any] = []
        for block in result.content:
            if isinstance(block, mcp_types.TextContent):
                parts.append({"type": "text", "text": block.text})
            elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
                ref = await self._store(
                    base64.b64decode(block.data),
                    block.mime_type,
                    block.type,
                    access,
                    summary=f"{block.type} from a tool",
                )
                parts.append(
                    {"type": block.type, "artifact": ref.model_dump(mode="json", exclude_defaults=True)}
                )
            elif isinstance(block, mcp_types.ResourceLink):
                parts.append({"type": "resource_link", "uri": str(block.uri), "name": block.name})
            else:
                resource = block.resource
                if isinstance(resource, mcp_types.TextResourceContents):
                    parts.append({"type": "text", "text": resource.text, "uri": str(resource.uri)})
                else:
                    ref = await self._store(
                        base64.b64decode(resource.blob),
                        resource.mime_type,
                        "file",
                        access,
                        summary=str(resource.uri),
                    )
                    parts.append(
                        {"type": "file", "artifact": ref.model_dump(mode="json", exclude_defaults=True)}
                    )
        if len(parts) == 1 and parts[0].get("type") == "text" and set(parts[0]) == {"type", "text"}:
            return parts[0]["text"]
        return parts

    async def _store(
        self, data: bytes, mime_type: str | None, artifact_type: str, access: RunAccess, *, summary: str
    ) -> ArtifactRef:
        if self._artifacts is None:
            raise PayloadTooLargeError("this host has no artifact store for binary or large tool results")
        owner = ArtifactOwner(
            conversation_id=access.conversation.conversation_id if access.conversation else None,
            run_id=access.run_id,
            binding_id=access.binding_id,
            workspace_id=access.conversation.workspace_id if access.conversation else None,
        )
        record = await self._artifacts.put(
            data,
            mime_type=mime_type,
            name=None,
            artifact_type=artifact_type,
            source="tool",
            owner=owner,
            summary=summary[:200],
        )
        meta = self._artifacts.to_metadata(record)
        return ArtifactRef.model_validate(meta.model_dump(include=set(ArtifactRef.model_fields)))

    async def _result(self, name: str, content: Any, is_error: bool, access: RunAccess) -> ToolCallResult:
        encoded = json.dumps(content)
        if len(encoded) <= self._threshold:
            return ToolCallResult(content=content, is_error=is_error)
        text = content if isinstance(content, str) else encoded.decode()
        mime = "text/plain" if isinstance(content, str) else "application/json"
        data = text.encode() if isinstance(content, str) else encoded
        preview = text[:PREVIEW_CHARS]
        ref = await self._store(
            data, mime, "tool_result", access, summary=f"result of {name} ({len(data)} bytes)"
        )
        return ToolCallResult(content=preview, is_error=is_error, artifact=ref)
