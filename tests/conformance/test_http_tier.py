"""The HTTP-API tier against small sample runners and a loopback fake platform (an SSE chat endpoint)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import ClassVar

import httpx
import pytest
import pytest_asyncio
from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerCapabilities,
    AgentRunnerManifest,
    AgentRunResult,
    I18nObject,
    codec,
)
from agentrunner_conformance.http_tier import HTTP_TIER_REQUIREMENTS, check_http_api_runner

from .support import make_context

pytestmark = pytest.mark.asyncio(loop_scope="module")


class FakeChatPlatform:
    """A loopback fake of an SSE chat API (``POST /chat`` → ``data: {"text": ...}`` frames, then ``[DONE]``),
    scripted by the tier through the PlatformScript methods. Records whether a held stream was closed."""

    def __init__(self) -> None:
        self.mode: str | int = "ok"
        self.closed = asyncio.Event()
        self.requests = 0
        self._server: asyncio.Server | None = None
        self.url = ""

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/chat"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def answer_normally(self) -> None:
        self.mode = "ok"

    def answer_with_status(self, status: int) -> None:
        self.mode = status

    def hold_stream_open(self) -> None:
        self.mode = "hold"
        self.closed = asyncio.Event()

    async def stream_closed(self, *, timeout: float) -> bool:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.closed.wait()
        return self.closed.is_set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ),
                0,
            )
            await reader.readexactly(length)
            self.requests += 1
            mode = self.mode
            if isinstance(mode, int):
                body = codec.dumps({"error": {"code": mode, "message": "scripted failure"}})
                writer.write(
                    f"HTTP/1.1 {mode} Error\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                    "Connection: close\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
                return
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
            writer.write(b'data: {"text": "hello "}\n\n')
            await writer.drain()
            if mode == "hold":
                await reader.read()  # returns b"" once the client closes the connection
                self.closed.set()
                return
            writer.write(b'data: {"text": "world"}\n\ndata: [DONE]\n\n')
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            self.closed.set()
        finally:
            writer.close()


def _manifest(name: str) -> AgentRunnerManifest:
    return AgentRunnerManifest(
        id=f"plugin:tier/sample/{name}",
        name=name,
        label=I18nObject(en_US=name),
        capabilities=AgentRunnerCapabilities(streaming=True, interrupt=True),
    )


_CODES = {401: "platform.auth_failed", 403: "platform.auth_failed", 429: "platform.rate_limited"}


class SampleChatRunner(AgentRunner):
    """A small, correct HTTP-API runner: streams the platform's SSE frames as deltas."""

    manifest = _manifest("chat")
    url: ClassVar[str] = ""

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        text = ""
        try:
            async with (
                httpx.AsyncClient(timeout=30) as http,
                http.stream("POST", self.url, json={"query": ctx.input.text}) as response,
            ):
                if response.status_code >= 400:
                    status = response.status_code
                    code = _CODES.get(
                        status, "platform.unavailable" if status >= 500 else "platform.bad_request"
                    )
                    yield out.fail(
                        code, f"the platform answered HTTP {status}", retryable=status in (429, 502, 503)
                    )
                    return
                async for line in response.aiter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    chunk = str(codec.loads(line[6:])["text"])
                    text += chunk
                    yield out.delta(chunk)
        except httpx.HTTPError as exc:
            yield out.fail("platform.unreachable", str(exc), retryable=True)
            return
        yield out.complete(text)


class SwallowsErrors(SampleChatRunner):
    """Treats any answer as a success: an HTTP error becomes an empty completion."""

    manifest = _manifest("swallows-errors")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(self.url, json={"query": ctx.input.text})
        text = "".join(
            str(codec.loads(line[6:])["text"])
            for line in response.text.splitlines()
            if line.startswith("data: ") and line != "data: [DONE]"
        )
        yield out.complete(text if response.status_code < 400 else "")


class KeepsStreaming(SampleChatRunner):
    """Reads the platform's stream in a background task that a cancel of the run does not reach."""

    manifest = _manifest("keeps-streaming")
    background: ClassVar[set[asyncio.Task[None]]] = set()

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        chunks: asyncio.Queue[str | None] = asyncio.Queue()
        url = self.url

        async def pump() -> None:
            async with httpx.AsyncClient(timeout=30) as http, http.stream("POST", url, json={}) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        chunks.put_nowait(str(codec.loads(line[6:])["text"]))
            chunks.put_nowait(None)

        task = asyncio.create_task(pump())
        KeepsStreaming.background.add(task)
        task.add_done_callback(KeepsStreaming.background.discard)
        text = ""
        while (chunk := await chunks.get()) is not None:
            text += chunk
            yield out.delta(chunk)
        yield out.complete(text)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def platform() -> AsyncGenerator[FakeChatPlatform]:
    fake = FakeChatPlatform()
    await fake.start()
    try:
        yield fake
    finally:
        for task in list(KeepsStreaming.background):
            task.cancel()
        await fake.stop()


def _factory(runner: type[SampleChatRunner], url: str) -> type[SampleChatRunner]:
    return type(runner.__name__, (runner,), {"url": url})


async def test_a_correct_http_runner_passes_every_tier_requirement(platform: FakeChatPlatform) -> None:
    report = await check_http_api_runner(
        _factory(SampleChatRunner, platform.url), platform, context=lambda run_id: make_context(run_id=run_id)
    )
    assert report.ok, report.summary()
    assert set(report.results) == set(HTTP_TIER_REQUIREMENTS)
    assert platform.requests >= 10


async def test_a_runner_that_swallows_http_errors_fails_error_mapping(platform: FakeChatPlatform) -> None:
    report = await check_http_api_runner(
        _factory(SwallowsErrors, platform.url), platform, context=lambda run_id: make_context(run_id=run_id)
    )
    assert "http.errors.mapped" in report.failed_ids, report.summary()
    assert "http.answer.completes" not in report.failed_ids


async def test_a_runner_whose_stream_outlives_the_cancel_fails_the_cancel_rule(
    platform: FakeChatPlatform,
) -> None:
    report = await check_http_api_runner(
        _factory(KeepsStreaming, platform.url),
        platform,
        context=lambda run_id: make_context(run_id=run_id),
        statuses=(),
        closed_within=1.0,
    )
    assert report.failed_ids == {"http.cancel.closes-stream"}, report.summary()
