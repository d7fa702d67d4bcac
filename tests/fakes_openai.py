"""A scriptable fake OpenAI-compatible API on loopback, for tests of model providers and runners.

Start it with ``async with FakeOpenAIServer() as server`` and point a model's ``base_url`` at
``server.base_url`` (``http://127.0.0.1:<port>/v1``). Queue what it answers next:

* ``server.reply("text")`` — a plain answer (streamed word by word when the request streams);
* ``server.reply(tool_calls=[FakeToolCall("search", {"q": "x"})])`` — tool calls (streamed in fragments);
* ``server.error(429, "slow down", headers={"retry-after": "2"})`` — an error answer;
* ``server.reply("late", delay=2.0)`` — answer after a delay (for timeouts); ``chunk_delay`` slows a stream;
* ``server.reply("cut off here", truncate_after=1)`` — a stream that ends early; ``ignore_stream=True`` answers a
  streaming request with plain JSON;
* ``server.rerank_scores = {...}`` or ``server.queue_rerank([...])`` — rerank answers.

With nothing queued, a chat request is answered ``echo: <last user text>``. Every request is recorded in
``server.requests`` (path, headers, JSON body) for assertions.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Self

from agentrunner import codec as json
from loopback_uvicorn import serve_app
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["FakeOpenAIServer", "FakeReply", "FakeRequest", "FakeToolCall"]


@dataclass(frozen=True)
class FakeToolCall:
    """A tool call the fake model asks for."""

    name: str
    """Function name."""
    arguments: dict[str, Any] = field(default_factory=dict[str, Any])
    """Arguments (sent as a JSON string, as OpenAI does)."""
    id: str | None = None
    """Call id; generated when ``None``."""


@dataclass
class FakeReply:
    """One scripted answer."""

    content: str | None = None
    """Assistant text."""
    tool_calls: list[FakeToolCall] = field(default_factory=list[FakeToolCall])
    """Tool calls."""
    finish_reason: str | None = None
    """Defaults to ``tool_calls`` when there are tool calls, else ``stop``."""
    usage: dict[str, int] | None = None
    """Usage block; defaults to word counts."""
    status: int = 200
    """HTTP status; >= 400 sends ``error`` as an OpenAI error body."""
    error: str = ""
    """Error message of an error answer."""
    headers: dict[str, str] = field(default_factory=dict[str, str])
    """Extra response headers."""
    delay: float = 0.0
    """Seconds to wait before answering."""
    chunk_delay: float = 0.0
    """Seconds between streamed chunks."""
    raw: Any = None
    """A raw JSON body sent as is (overrides everything else but ``status``)."""
    truncate_after: int | None = None
    """Streams only: end the response cleanly after this many text chunks, with no finish reason or ``[DONE]``."""
    ignore_stream: bool = False
    """Answer a streaming request with a plain JSON completion (as some compatible servers do)."""


@dataclass(frozen=True)
class FakeRequest:
    """One request the fake received."""

    path: str
    """URL path."""
    headers: dict[str, str]
    """Request headers (lower-cased names)."""
    body: Any
    """Decoded JSON body."""


class FakeOpenAIServer:
    """The fake API server (loopback only)."""

    def __init__(self) -> None:
        self.requests: list[FakeRequest] = []
        """Every request received, in order."""
        self.replies: deque[FakeReply] = deque()
        """Queued chat answers."""
        self.rerank_replies: deque[FakeReply] = deque()
        """Queued rerank answers (``raw`` bodies or errors); default: scored by word overlap."""
        self._ids = itertools.count(1)
        self._stopping = asyncio.Event()
        self._serving = contextlib.AsyncExitStack()
        self._port: int | None = None
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/rerank", self._rerank, methods=["POST"]),
            ]
        )

    # -- scripting -------------------------------------------------------------------------------------------

    def reply(
        self, content: str | None = None, *, tool_calls: list[FakeToolCall] | None = None, **kwargs: Any
    ) -> FakeReply:
        """Queue a chat answer."""
        answer = FakeReply(content=content, tool_calls=tool_calls or [], **kwargs)
        self.replies.append(answer)
        return answer

    def error(self, status: int, message: str = "error", **kwargs: Any) -> FakeReply:
        """Queue an error answer for the next chat request."""
        answer = FakeReply(status=status, error=message, **kwargs)
        self.replies.append(answer)
        return answer

    def queue_rerank(self, results: list[tuple[int, float]] | None = None, **kwargs: Any) -> FakeReply:
        """Queue a rerank answer: ``(index, relevance_score)`` pairs, or an error via ``status``."""
        raw = (
            None if results is None else {"results": [{"index": i, "relevance_score": s} for i, s in results]}
        )
        answer = FakeReply(raw=raw, **kwargs)
        self.rerank_replies.append(answer)
        return answer

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        if self._port is None:
            raise RuntimeError("the fake server is not started")
        return f"http://127.0.0.1:{self._port}/v1"

    # -- lifecycle -------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind 127.0.0.1 on a port the kernel picks and serve."""
        self._port = await self._serving.enter_async_context(serve_app(self.app, lifespan="off"))

    async def stop(self) -> None:
        """Stop serving (pending delays end at once)."""
        self._stopping.set()
        await self._serving.aclose()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # -- handlers --------------------------------------------------------------------------------------------

    async def _record(self, request: Request) -> Any:
        body = json.loads(await request.body())
        self.requests.append(
            FakeRequest(
                path=request.url.path, headers={k.lower(): v for k, v in request.headers.items()}, body=body
            )
        )
        return body

    async def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _chat(self, request: Request) -> Response:
        body = await self._record(request)
        answer = (
            self.replies.popleft() if self.replies else FakeReply(content=f"echo: {_last_user_text(body)}")
        )
        await self._sleep(answer.delay)
        if answer.status >= 400:
            return _error(answer)
        if answer.raw is not None:
            return JSONResponse(answer.raw, status_code=answer.status, headers=answer.headers)
        calls = [(c, c.id or f"call_{next(self._ids)}") for c in answer.tool_calls]
        finish = answer.finish_reason or ("tool_calls" if calls else "stop")
        usage = answer.usage or {
            "prompt_tokens": 3,
            "completion_tokens": len((answer.content or "").split()),
            "total_tokens": 3 + len((answer.content or "").split()),
        }
        if body.get("stream") and not answer.ignore_stream:
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(
                self._stream(answer, calls, finish, usage if include_usage else None),
                media_type="text/event-stream",
                headers=answer.headers,
            )
        message: dict[str, Any] = {"role": "assistant", "content": answer.content}
        if calls:
            message["tool_calls"] = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps_str(c.arguments)},
                }
                for c, cid in calls
            ]
        return JSONResponse(
            {
                "id": f"chatcmpl-{next(self._ids)}",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            },
            headers=answer.headers,
        )

    async def _stream(
        self,
        answer: FakeReply,
        calls: list[tuple[FakeToolCall, str]],
        finish: str,
        usage: dict[str, int] | None,
    ) -> AsyncIterator[bytes]:
        def event(payload: dict[str, Any]) -> bytes:
            return b"data: " + json.dumps(payload) + b"\n\n"

        def delta(d: dict[str, Any], finish_reason: str | None = None) -> bytes:
            return event(
                {
                    "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": d, "finish_reason": finish_reason}],
                }
            )

        yield delta({"role": "assistant", "content": ""})
        words = (answer.content or "").split(" ") if answer.content else []
        for i, word in enumerate(words):
            if answer.truncate_after is not None and i >= answer.truncate_after:
                return
            await self._sleep(answer.chunk_delay)
            yield delta({"content": word if i == 0 else " " + word})
        for index, (call, cid) in enumerate(calls):
            # OpenAI sends id and name first, then the arguments in pieces
            text = json.dumps_str(call.arguments)
            yield delta(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": cid,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                }
            )
            for start in range(0, len(text), 5):
                await self._sleep(answer.chunk_delay)
                yield delta(
                    {"tool_calls": [{"index": index, "function": {"arguments": text[start : start + 5]}}]}
                )
        yield delta({}, finish)
        if usage is not None:
            yield event({"object": "chat.completion.chunk", "choices": [], "usage": usage})
        yield b"data: [DONE]\n\n"

    async def _rerank(self, request: Request) -> Response:
        body = await self._record(request)
        answer = self.rerank_replies.popleft() if self.rerank_replies else None
        if answer is not None:
            await self._sleep(answer.delay)
            if answer.status >= 400:
                return _error(answer)
            return JSONResponse(answer.raw, headers=answer.headers)
        query_words = set(str(body.get("query", "")).lower().split())
        documents: list[str] = body.get("documents") or []
        scored = [
            {
                "index": i,
                "relevance_score": len(query_words & set(d.lower().split())) / (1 + len(query_words)),
            }
            for i, d in enumerate(documents)
        ]
        scored.sort(key=lambda r: r["relevance_score"], reverse=True)
        top_n = body.get("top_n")
        return JSONResponse({"results": scored[:top_n] if isinstance(top_n, int) else scored})


def _error(answer: FakeReply) -> Response:
    return JSONResponse(
        {"error": {"message": answer.error, "type": "fake_error", "code": answer.status}},
        status_code=answer.status,
        headers=answer.headers,
    )


def _last_user_text(body: Any) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return " ".join(p.get("text", "") for p in content or [] if p.get("type") == "text")
    return ""
