"""Test helpers for HTTP-API runners (needs the ``testing`` extra: the host, uvicorn, starlette).

* :class:`FakePlatform` — a real HTTP server on 127.0.0.1 (random port) that answers with the bytes a test
  scripts (:class:`FakeResponse`: status, chunks, delays, a connection held open) and records every request
  (:class:`RecordedRequest`); it notices when a client closes a connection before the response ended.
* :class:`HostHarness` — the real host (``HostService`` + the HTTP API in process) with one agent on the
  runner under test, bound globally; :class:`RunReply` reads a finished run's results.

Fakes only: nothing here is used outside tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import socket
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qsl

import httpx
import uvicorn
from agentrunner import AgentRunContext, AgentRunnerManifest
from agentrunner_host import AgentConfig
from agentrunner_host.config import load_settings
from agentrunner_host.http import create_app
from agentrunner_host.legacy import externalize_secrets, migrate_pipeline_config, resolve_runner_config
from agentrunner_host.service import HostService
from agentrunner_host.stores.artifacts import ArtifactOwner
from httpx_sse import aconnect_sse
from starlette.requests import Request

__all__ = [
    "FakePlatform",
    "FakeResponse",
    "Handler",
    "fake_platform_in_thread",
    "HostHarness",
    "MigratedAgent",
    "migrate_legacy",
    "RecordedFile",
    "RecordedForm",
    "RecordedRequest",
    "RunReply",
    "run_context",
    "sse_frame",
]

_Scope = dict[str, Any]
_Receive = Callable[[], Awaitable[dict[str, Any]]]
_Send = Callable[[dict[str, Any]], Awaitable[None]]


def sse_frame(data: object, *, event: str | None = None, space: bool = True) -> str:
    """One SSE frame: ``event: <event>`` (when given) and ``data: <json>`` (strings are sent as they are),
    ended by a blank line. ``space=False`` writes ``event:x``/``data:{...}`` as Coze does."""
    sep = ": " if space else ":"
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)  # noqa: TID251 - test fake
    head = f"event{sep}{event}\n" if event is not None else ""
    return f"{head}data{sep}{payload}\n\n"


@dataclass(slots=True)
class RecordedRequest:
    """One request the fake received."""

    method: str
    """HTTP method."""
    path: str
    """Path (no query)."""
    query: dict[str, str]
    """Query parameters."""
    headers: dict[str, str]
    """Headers, names lower-case."""
    body: bytes
    """The raw body."""

    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.body)

    async def form(self) -> RecordedForm:
        """The body as a form (multipart or urlencoded), parsed by Starlette; files read into memory."""
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": self.body, "more_body": False}

        scope = {
            "type": "http",
            "method": self.method,
            "path": self.path,
            "headers": [(k.encode(), v.encode()) for k, v in self.headers.items()],
            "query_string": b"",
        }
        fields: dict[str, str] = {}
        files: dict[str, RecordedFile] = {}
        async with Request(scope, receive).form() as form:
            for name, value in form.multi_items():
                if isinstance(value, str):
                    fields[name] = value
                else:
                    data = await value.read()
                    files[name] = RecordedFile(value.filename or "", value.content_type or "", data)
        return RecordedForm(fields, files)


@dataclass(frozen=True, slots=True)
class RecordedFile:
    """A file of a multipart request."""

    filename: str
    """Its file name."""
    content_type: str
    """Its ``Content-Type``."""
    data: bytes
    """Its bytes."""


@dataclass(frozen=True, slots=True)
class RecordedForm:
    """A parsed form: text fields and files."""

    fields: dict[str, str]
    """Text fields."""
    files: dict[str, RecordedFile]
    """Files by field name."""


@dataclass(slots=True)
class FakeResponse:
    """What the fake answers: *chunks* written one by one (each after *delay* seconds), then, with *hold*,
    the connection kept open until the client closes it."""

    status: int = 200
    """HTTP status."""
    chunks: Sequence[bytes | str] = ()
    """Body pieces, each written (and flushed) separately."""
    content_type: str = "application/json"
    """``Content-Type``."""
    headers: dict[str, str] = field(default_factory=dict[str, str])
    """Extra headers."""
    delay: float = 0.0
    """Seconds to wait before each chunk (and before the headers when there are no chunks)."""
    hold: bool = False
    """Keep the connection open after the last chunk until the client goes away."""

    @classmethod
    def json(cls, value: object, *, status: int = 200, delay: float = 0.0) -> FakeResponse:
        """A JSON body."""
        body = json.dumps(value, ensure_ascii=False)  # noqa: TID251 - test fake
        return cls(status=status, chunks=[body], delay=delay)

    @classmethod
    def text(cls, body: str, *, status: int = 200, content_type: str = "text/plain") -> FakeResponse:
        """A plain-text body."""
        return cls(status=status, chunks=[body], content_type=content_type)

    @classmethod
    def sse(cls, frames: Sequence[str], *, delay: float = 0.0, hold: bool = False) -> FakeResponse:
        """A ``text/event-stream`` body, one frame per write."""
        return cls(chunks=list(frames), content_type="text/event-stream", delay=delay, hold=hold)


Handler = Callable[[RecordedRequest], "FakeResponse | Awaitable[FakeResponse]"]
"""Answers a recorded request."""


class FakePlatform:
    """A loopback HTTP server scripted per route. Use ``async with FakePlatform() as fake:``; register
    answers with :meth:`route` (a handler, or a fixed :class:`FakeResponse`)."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        """Every request received, in order."""
        self.disconnected = asyncio.Event()
        """Set when a client closed a connection while its response was still being written or held."""
        self.streaming = asyncio.Event()
        """Set when the first chunk of a response went out."""
        self.base_url = ""
        """``http://127.0.0.1:<port>`` once started."""
        self._routes: dict[tuple[str, str], Handler] = {}
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    def route(self, method: str, path: str, answer: Handler | FakeResponse) -> None:
        """Answer ``method path`` (replacing an earlier answer). Unrouted requests get 404."""
        if isinstance(answer, FakeResponse):
            fixed = answer

            def handler(_request: RecordedRequest) -> FakeResponse:
                return fixed

            self._routes[(method.upper(), path)] = handler
        else:
            self._routes[(method.upper(), path)] = answer

    def requests_to(self, path: str) -> list[RecordedRequest]:
        """The requests received on *path*."""
        return [r for r in self.requests if r.path == path]

    async def __aenter__(self) -> FakePlatform:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        sock.setblocking(False)
        self.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(
            self._app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            interface="asgi3",
            proxy_headers=False,
            ws="none",
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        # The socket already listens, so requests queue in its backlog until the server runs: no start race.
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task

    async def _app(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] != "http":
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        recorded = RecordedRequest(
            method=scope["method"],
            path=scope["path"],
            query=dict(parse_qsl(scope.get("query_string", b"").decode())),
            headers=headers,
            body=bytes(body),
        )
        self.requests.append(recorded)
        handler = self._routes.get((recorded.method, recorded.path))
        if handler is None:
            answer = FakeResponse.text("no such route", status=404)
        else:
            produced = handler(recorded)
            answer = await produced if inspect.isawaitable(produced) else produced
        await self._respond(answer, receive, send)

    async def _respond(self, answer: FakeResponse, receive: _Receive, send: _Send) -> None:
        async def wait_disconnect() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        gone = asyncio.ensure_future(wait_disconnect())
        try:
            if not answer.chunks and answer.delay and await self._gone_within(gone, answer.delay):
                return
            headers = [(b"content-type", answer.content_type.encode())]
            headers += [(k.lower().encode(), v.encode()) for k, v in answer.headers.items()]
            await send({"type": "http.response.start", "status": answer.status, "headers": headers})
            for chunk in answer.chunks:
                if answer.delay and await self._gone_within(gone, answer.delay):
                    return
                data = chunk.encode() if isinstance(chunk, str) else chunk
                await send({"type": "http.response.body", "body": data, "more_body": True})
                self.streaming.set()
            if answer.hold:
                await gone
                self.disconnected.set()
                return
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            self.disconnected.set()
        finally:
            gone.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await gone

    async def _gone_within(self, gone: asyncio.Future[None], seconds: float) -> bool:
        done, _ = await asyncio.wait({gone}, timeout=seconds)
        if done:
            self.disconnected.set()
            return True
        return False


@contextlib.contextmanager
def fake_platform_in_thread(setup: Callable[[FakePlatform], object]) -> Generator[FakePlatform]:
    """A :class:`FakePlatform` served from its own thread and event loop, for code that runs its own loop
    (``agentrunner_conformance.check_runner``). *setup* registers the routes (on the server's loop)."""
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        stop = asyncio.Event()
        async with FakePlatform() as platform:
            setup(platform)
            box["platform"], box["loop"], box["stop"] = platform, asyncio.get_running_loop(), stop
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=asyncio.run, args=(main(),), name="fake-platform", daemon=True)
    thread.start()
    ready.wait(60)
    try:
        yield cast(FakePlatform, box["platform"])
    finally:
        loop = cast(asyncio.AbstractEventLoop, box["loop"])
        loop.call_soon_threadsafe(cast(asyncio.Event, box["stop"]).set)
        thread.join(60)


@dataclass(slots=True)
class RunReply:
    """A finished run as the HTTP API reports it."""

    run: dict[str, Any]
    """``GET /v1/runs/{id}``."""
    results: list[dict[str, Any]]
    """Every result (``{"type", "result"}``), in order."""

    @property
    def status(self) -> str:
        """``completed`` or ``failed``."""
        return str(self.run["status"])

    @property
    def code(self) -> str | None:
        """The failure code."""
        return self.run.get("code")

    def of_type(self, type_: str) -> list[dict[str, Any]]:
        """The ``data`` of every result of *type_*."""
        return [r["result"]["data"] for r in self.results if r["type"] == type_]

    @property
    def failure(self) -> dict[str, Any] | None:
        """``run.failed`` data (code, message, retryable, details)."""
        failed = self.of_type("run.failed")
        return failed[0] if failed else None

    @property
    def text(self) -> str | None:
        """The final message's text (``message.completed``, else ``run.completed.message``)."""
        messages = self.of_type("message.completed")
        if messages:
            return messages[-1]["message"].get("content")
        done = self.of_type("run.completed")
        message = done[0].get("message") if done else None
        return message.get("content") if message else None

    @property
    def deltas(self) -> list[str]:
        """The text of every ``message.delta``."""
        return [d["chunk"].get("content") or "" for d in self.of_type("message.delta")]

    @property
    def state_updates(self) -> dict[str, Any]:
        """``state.updated`` as ``{key: value}`` (last one wins)."""
        return {d["key"]: d["value"] for d in self.of_type("state.updated")}

    def dump(self) -> str:
        """Everything the client saw, as text (for "the secret appears nowhere" checks)."""
        return json.dumps({"run": self.run, "results": self.results})  # noqa: TID251 - test helper


def _write_config(data_dir: Path, toml: str | None) -> Path | None:
    data_dir.mkdir(parents=True, exist_ok=True)
    if toml is None:
        return None
    path = data_dir / "agentrunner.toml"
    path.write_text(toml, encoding="utf-8")
    return path


class HostHarness:
    """The real host with the HTTP API (in process, over ``httpx.ASGITransport``) and one agent ``under-test``
    on *runner_id*, bound to every ``message.received`` event above the default binding."""

    def __init__(self, service: HostService, client: httpx.AsyncClient) -> None:
        self.service = service
        """The host service."""
        self.client = client
        """An HTTP client of its API."""
        self._events = 0

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        data_dir: Path,
        *,
        runner_id: str,
        runner_config: Mapping[str, Any],
        environ: Mapping[str, str] | None = None,
        toml: str | None = None,
        admitted: bool = True,
    ) -> AsyncGenerator[HostHarness]:
        """Start the host on *data_dir* (secrets in *runner_config* as ``{"env": "VAR"}`` with the variables
        in *environ*) and create the agent and its binding through the API (``admitted=False``: see
        :meth:`put_agent`)."""
        path = _write_config(data_dir, toml)
        env = {"AGENTRUNNER_DATA_DIR": str(data_dir / "data"), **(environ or {})}
        settings = load_settings(path, environ=env, cwd=data_dir)
        async with HostService.open(settings) as service:
            app = create_app(service, api_token=None)
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8420", timeout=60
            ) as client:
                harness = cls(service, client)
                await harness.put_agent(runner_id, runner_config, admitted=admitted)
                yield harness

    async def put_agent(
        self, runner_id: str, runner_config: Mapping[str, Any], *, admitted: bool = True
    ) -> None:
        """Create (or replace) the agent under test and its global binding.

        ``admitted=False`` stores the agent in the host's agent set directly, past the API's admission
        against the runner's form: how an agent an older host stored reaches the runner, which must still
        refuse a config that does not fit (see :meth:`refused_agent` for the API's answer)."""
        agent = {"agent_id": "under-test", "runner_id": runner_id, "runner_config": dict(runner_config)}
        existing = await self.client.get("/v1/agents/under-test")
        if not admitted:
            bindings = await self.service.directory.put_agent(
                AgentConfig.model_validate(agent), create=existing.status_code != 200
            )
            self.service.apply_bindings(bindings)
        elif existing.status_code == 200:
            response = await self.client.put("/v1/agents/under-test", json=agent)
            assert response.status_code == 200, response.text
        else:
            response = await self.client.post("/v1/agents", json=agent)
            assert response.status_code == 201, response.text
        binding = {"binding_id": "under-test", "agent_id": "under-test", "priority": 100}
        if (await self.client.get("/v1/bindings/under-test")).status_code != 200:
            created = await self.client.post("/v1/bindings", json=binding)
            assert created.status_code == 201, created.text

    async def refused_agent(self, runner_id: str, runner_config: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /v1/agents`` of an agent that admission must refuse: asserts the 422 and that nothing was
        stored, and returns the error (``code``, ``message`` naming each ``runner_config.<field>``)."""
        agent = {"agent_id": "refused", "runner_id": runner_id, "runner_config": dict(runner_config)}
        response = await self.client.post("/v1/agents", json=agent)
        assert response.status_code == 422, response.text
        assert (await self.client.get("/v1/agents/refused")).status_code == 404
        return cast(dict[str, Any], response.json()["error"])

    def _event(
        self,
        text: str | None,
        contents: Sequence[Mapping[str, Any]],
        conversation_id: str,
        params: Mapping[str, Any],
    ) -> dict[str, Any]:
        self._events += 1
        body: dict[str, Any] = {"event_id": f"evt-{self._events}", "conversation_id": conversation_id}
        if contents:
            body["input"] = {"text": text, "contents": list(contents)}
        else:
            body["text"] = text
        if params:
            body["params"] = dict(params)
        return body

    async def send(
        self,
        text: str | None = "hello",
        *,
        contents: Sequence[Mapping[str, Any]] = (),
        conversation_id: str = "conv-1",
        stream: bool = False,
        params: Mapping[str, Any] | None = None,
    ) -> RunReply:
        """Submit a message and wait for its run; *stream* asks for a streaming delivery (SSE)."""
        body = self._event(text, contents, conversation_id, params or {})
        if not stream:
            response = await self.client.post("/v1/events", params={"wait": "true"}, json=body)
            assert response.status_code == 200, response.text
            run_id = response.json()["run"]["run_id"]
            return await self.reply(run_id)
        async with aconnect_sse(self.client, "POST", "/v1/events?stream=true", json=body) as source:
            run_id = source.response.headers["x-run-id"]
            async for _ in source.aiter_sse():
                pass
        return await self.reply(run_id)

    async def submit(self, text: str | None = "hello", *, conversation_id: str = "conv-1") -> str:
        """Submit a message without waiting; its run id."""
        body = self._event(text, (), conversation_id, {})
        response = await self.client.post("/v1/events", json=body)
        assert response.status_code == 202, response.text
        return str(response.json()["run_id"])

    async def cancel(self, run_id: str) -> None:
        """Cancel a run through the API."""
        response = await self.client.post(f"/v1/runs/{run_id}/cancel")
        assert response.status_code == 200, response.text

    async def reply(self, run_id: str) -> RunReply:
        """The run once it ended, with all its results."""
        feed = self.service.feed(run_id)
        if feed is not None:
            await feed.outcome()
        run = (await self.client.get(f"/v1/runs/{run_id}")).json()
        page = (await self.client.get(f"/v1/runs/{run_id}/results", params={"limit": 1000})).json()
        return RunReply(run=run, results=page["results"])

    async def transcript(self, conversation_id: str = "conv-1") -> str:
        """The conversation's transcript as the API returns it (text)."""
        return (await self.client.get(f"/v1/conversations/{conversation_id}/transcript")).text

    async def store_image(
        self,
        data: bytes,
        *,
        conversation_id: str = "conv-1",
        mime_type: str = "image/png",
        name: str = "photo.png",
    ) -> dict[str, Any]:
        """Store an image as a platform artifact of the conversation; an image content element for it."""
        artifacts = self.service.stores.artifacts
        record = await artifacts.put(
            data,
            mime_type=mime_type,
            name=name,
            artifact_type="image",
            source="platform",
            owner=ArtifactOwner(conversation_id=conversation_id),
        )
        ref = artifacts.to_metadata(record).model_dump(mode="json")
        return {"type": "image", "artifact": ref, "mime_type": mime_type}


@dataclass(frozen=True, slots=True)
class MigratedAgent:
    """What ``agentrunner migrate-config`` makes of a legacy pipeline, ready for :meth:`HostHarness.open`."""

    runner_id: str
    """The runner id the pipeline names after migration."""
    runner_config: dict[str, Any]
    """Its runner config, credentials as ``{"env": "VAR"}``."""
    variables: dict[str, str]
    """The environment the host needs: variable → the value the legacy file held."""


def migrate_legacy(legacy: Mapping[str, Any], manifest: AgentRunnerManifest) -> MigratedAgent:
    """Migrate a legacy pipeline configuration as the CLI does (the runner's schema decides what is secret)."""
    result = externalize_secrets(
        legacy,
        migrate_pipeline_config(legacy),
        is_secret=lambda runner_id, name: runner_id == manifest.id and name in manifest.secret_fields(),
    )
    assert result.runner_id is not None, result.warnings
    values: dict[str, str] = {}
    source_ai = cast(dict[str, Any], legacy.get("ai", {}))
    for reference in result.env:
        node: Any = {"ai": source_ai}
        for key in reference.source:
            node = node[key]
        values[reference.variable] = str(node)
    return MigratedAgent(
        runner_id=result.runner_id,
        runner_config=resolve_runner_config(result.config, result.runner_id),
        variables=values,
    )


def run_context(
    *,
    config: Mapping[str, Any] | None = None,
    text: str | None = "hello",
    contents: Sequence[Mapping[str, Any]] = (),
    streaming: bool = False,
    deadline_at: float | None = None,
    conversation_state: Mapping[str, Any] | None = None,
    run_id: str = "run-1",
    actor_id: str | None = "u1",
) -> AgentRunContext:
    """A minimal valid run context for driving a runner directly (unit tests, benches)."""
    return AgentRunContext.model_validate(
        {
            "run_id": run_id,
            "trigger": {"type": "message.received", "source": "api"},
            "event": {"event_id": f"evt-{run_id}", "event_type": "message.received", "source": "api"},
            "conversation": {"conversation_id": "conv-1"},
            "actor": {"actor_type": "user", "actor_id": actor_id} if actor_id else None,
            "input": {"text": text, "contents": list(contents)},
            "delivery": {"surface": "api", "supports_streaming": streaming},
            "resources": {},
            "context": {
                "conversation_id": "conv-1",
                "available_apis": {"artifact_metadata": True, "artifact_read": True, "state": True},
            },
            "state": {"conversation": dict(conversation_state or {})},
            "runtime": {"trace_id": f"trace-{run_id}", "deadline_at": deadline_at},
            "config": dict(config or {}),
        }
    )
