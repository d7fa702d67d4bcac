"""HTTP-API runners against their loopback fakes, next to a bare httpx client doing the same request.

Each row is one streamed run of an official runner (Dify, n8n, Coze, DashScope, Langflow, Tbox) driven directly
(``runner.run`` consumed to the end: 50 ``message.delta`` + ``message.completed`` + ``state.updated`` + ``run.completed``)
against the fake of its platform answering 50 chunks, each written separately. The floor is what a hand-written
client needs for the same answer: a fresh ``httpx.AsyncClient`` per request (a one-shot client, as the runner
opens one per run; both reuse one SSL context), the same POST, the stream read with httpx-sse (Langflow: blank-line separated JSON read with ``json.loads`` per object),
each frame's JSON decoded and its text collected. Both talk to the same fake on the same event loop, so the
ratio is the runner's own cost per run: config checks, the kit's deadline scopes and redaction, the mapping of
frames, and building and validating the protocol results.

Goal: ≤ 1.3× the bare client (issues 14 and 15: "per-run overhead of a runner against its fake next to a bare
httpx client doing the same request against the same fake in one run, streaming, 50 chunks").
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Awaitable, Callable
from typing import Any, Final

import httpx
from agentrunner import AgentRunner
from agentrunner.testing import FakeHost
from agentrunner_http_kit.testing import FakePlatform, FakeResponse, run_context
from httpx_sse import EventSource

from ._framework import Goal, Measure, SuiteContext

__all__ = ["CHUNKS", "measures"]

CHUNKS: Final = 50
"""Chunks per streamed answer."""

_KEY: Final = "bench-key-0123456789"
_GOAL: Final = Goal.ratio(1.3, source="issues 14/15: runner vs bare httpx client, same fake, 50 chunks")


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)  # noqa: TID251 - a fake's wire bytes


def _dashscope_frames() -> list[str]:
    frames: list[str] = []
    for i in range(CHUNKS):
        output = {
            "session_id": "sess-1",
            "finish_reason": "stop" if i == CHUNKS - 1 else "null",
            "text": "tok ",
        }
        usage = {"models": [{"model_id": "qwen-plus", "input_tokens": 5, "output_tokens": i + 1}]}
        data = _dumps({"output": output, "usage": usage, "request_id": "req-1"})
        frames.append(f"id:{i + 1}\nevent:result\n:HTTP_STATUS/200\ndata:{data}\n\n")
    return frames


def _langflow_frames() -> list[str]:
    frames = [
        _dumps({"event": "token", "data": {"chunk": "tok ", "id": "m1"}}) + "\n\n" for _ in range(CHUNKS)
    ]
    result = {
        "session_id": "s-1",
        "outputs": [{"outputs": [{"results": {"message": {"text": "tok " * CHUNKS}}}]}],
    }
    frames.append(_dumps({"event": "end", "data": {"result": result}}) + "\n\n")
    return frames


def _tbox_frames() -> list[str]:
    def frame(kind: str, payload: dict[str, Any]) -> str:
        return (
            "event: message\ndata: "
            + _dumps({"type": kind, "lane": "default", "payload": _dumps(payload)})
            + "\n\n"
        )

    chunk = {"conversationId": "c-1", "messageId": "m-1", "text": "tok "}
    return [
        frame("header", {"mediaType": "text"}),
        *(frame("chunk", chunk) for _ in range(CHUNKS)),
        frame("end", {}),
    ]


def _dify_frames() -> list[str]:
    ids = {"conversation_id": "0f5c7c1e-8a3e-4a7e-9a55-0d6c8a3a9b11", "message_id": "m-1", "task_id": "t-1"}
    frames = [f"data: {_dumps({'event': 'message', **ids, 'answer': 'tok '})}\n\n" for _ in range(CHUNKS)]
    usage = {"prompt_tokens": 5, "completion_tokens": CHUNKS, "total_tokens": CHUNKS + 5}
    frames.append(f"data: {_dumps({'event': 'message_end', **ids, 'metadata': {'usage': usage}})}\n\n")
    return frames


def _n8n_chunks() -> list[str]:
    meta = {"nodeId": "n-1", "nodeName": "Agent", "itemIndex": 0, "runIndex": 0}
    items = [{"type": "begin", "metadata": meta}]
    items += [{"type": "item", "content": "tok ", "metadata": meta} for _ in range(CHUNKS)]
    items.append({"type": "end", "metadata": meta})
    return [_dumps(item) + "\n" for item in items]


def _coze_frames() -> list[str]:
    chat = {"id": "chat-1", "conversation_id": "c-1", "bot_id": "bot-1"}
    delta = {**chat, "role": "assistant", "type": "answer", "content": "tok ", "content_type": "text"}
    usage = {"token_count": CHUNKS + 5, "output_count": CHUNKS, "input_count": 5}
    return [
        f"event:conversation.chat.created\ndata:{_dumps({**chat, 'status': 'created'})}\n\n",
        *(f"event:conversation.message.delta\ndata:{_dumps(delta)}\n\n" for _ in range(CHUNKS)),
        f"event:conversation.chat.completed\ndata:{_dumps({**chat, 'status': 'completed', 'usage': usage})}\n\n",
        'event:done\ndata:"[DONE]"\n\n',
    ]


def _sse_text(data: str) -> str:
    """The floor's parse of one SSE frame (Dify, Coze, DashScope, Tbox)."""
    frame = json.loads(data)
    if not isinstance(frame, dict):
        return ""  # Coze's done frame: the JSON string "[DONE]"
    if "answer" in frame:
        return frame["answer"]
    if frame.get("type") == "answer":
        return frame.get("content") or ""
    if "output" in frame:
        return frame["output"].get("text") or ""
    payload = json.loads(frame.get("payload") or "{}")
    return payload.get("text") or ""


def _bare_client(
    verify: ssl.SSLContext,
    url: str,
    *,
    headers: dict[str, str],
    body: dict[str, Any],
    params: dict[str, str] | None,
    sse: bool,
    separator: str = "\n\n",
) -> Callable[[], Awaitable[str]]:
    async def run() -> str:
        pieces: list[str] = []
        async with (
            httpx.AsyncClient(verify=verify, timeout=30) as client,
            client.stream("POST", url, headers=headers, json=body, params=params) as response,
        ):
            response.raise_for_status()
            if sse:
                async for event in EventSource(response).aiter_sse():
                    pieces.append(_sse_text(event.data))
            else:
                buffer = ""
                async for chunk in response.aiter_text():
                    buffer += chunk
                    *whole, buffer = buffer.split(separator)
                    for item in whole:
                        if item.strip():
                            frame = json.loads(item)
                            if frame.get("event") == "token":
                                pieces.append(frame["data"]["chunk"])
                            elif frame.get("type") == "item":
                                pieces.append(frame["content"])
        text = "".join(pieces)
        assert text == "tok " * CHUNKS, text[:80]
        return text

    return run


def _runner_run(
    runner: AgentRunner, config: dict[str, Any], *, state_updates: int = 1
) -> Callable[[], Awaitable[None]]:
    fake_host = FakeHost()

    async def run() -> None:
        ctx = run_context(config=config, text="hello", streaming=True)
        results = [result async for result in runner.run(ctx, fake_host.api(ctx))]
        assert results[-1].type == "run.completed", results[-1]
        assert len(results) == CHUNKS + 2 + state_updates, len(results)

    return run


def measures(ctx: SuiteContext) -> list[Measure]:
    from agentrunner_runner_coze import CozeRunner
    from agentrunner_runner_dashscope import DashScopeRunner
    from agentrunner_runner_dify import DifyRunner
    from agentrunner_runner_langflow import LangflowRunner
    from agentrunner_runner_n8n import N8nRunner
    from agentrunner_runner_tbox import TboxRunner

    fake = FakePlatform()
    ctx.run(fake.__aenter__())
    ctx.add_cleanup(lambda: fake.__aexit__(None, None, None))
    base = fake.base_url
    # Building a default SSL context loads the CA bundle (tens of ms); the kit builds one per process, and so
    # does the floor, or the floor would mostly measure certificate loading.
    verify = ssl.create_default_context()
    fake.route("POST", "/api/v1/apps/app-1/completion", FakeResponse.sse(_dashscope_frames()))
    fake.route("POST", "/api/v1/run/flow-1", FakeResponse.sse(_langflow_frames()))
    fake.route("POST", "/api/chat", FakeResponse.sse(_tbox_frames()))
    fake.route("POST", "/v1/chat-messages", FakeResponse.sse(_dify_frames()))
    fake.route("POST", "/webhook/bench", FakeResponse(chunks=_n8n_chunks(), content_type="application/json"))
    fake.route("POST", "/v3/chat", FakeResponse.sse(_coze_frames()))

    dashscope_config = {"api-key": _KEY, "app-id": "app-1", "base-url": f"{base}/api/v1"}
    langflow_config = {"api-key": _KEY, "flow-id": "flow-1", "base-url": base}
    tbox_config = {"api-key": _KEY, "app-id": "app-1", "base-url": base}
    dify_config = {"api-key": _KEY, "base-url": f"{base}/v1"}
    n8n_config = {
        "webhook-url": f"{base}/webhook/bench",
        "auth-type": "header",
        "header-name": "X-Key",
        "header-value": _KEY,
    }
    coze_config = {"api-key": _KEY, "bot-id": "bot-1", "api-base": base}
    cases = [
        (
            "Dify",
            _runner_run(DifyRunner(), dify_config),
            _bare_client(
                verify,
                f"{base}/v1/chat-messages",
                headers={"Authorization": f"Bearer {_KEY}"},
                body={
                    "inputs": {},
                    "query": "hello",
                    "user": "u",
                    "response_mode": "streaming",
                    "conversation_id": "",
                    "files": [],
                },
                params=None,
                sse=True,
            ),
        ),
        (
            "n8n",
            _runner_run(N8nRunner(), n8n_config, state_updates=2),
            _bare_client(
                verify,
                f"{base}/webhook/bench",
                headers={"X-Key": _KEY},
                body={"chatInput": "hello", "sessionId": "s"},
                params=None,
                sse=False,
                separator="\n",
            ),
        ),
        (
            "Coze",
            _runner_run(CozeRunner(), coze_config),
            _bare_client(
                verify,
                f"{base}/v3/chat",
                headers={"Authorization": f"Bearer {_KEY}", "Accept": "text/event-stream"},
                body={
                    "bot_id": "bot-1",
                    "user_id": "u",
                    "stream": True,
                    "additional_messages": [{"role": "user", "content": "hello", "content_type": "text"}],
                },
                params=None,
                sse=True,
            ),
        ),
        (
            "DashScope",
            _runner_run(DashScopeRunner(), dashscope_config),
            _bare_client(
                verify,
                f"{base}/api/v1/apps/app-1/completion",
                headers={"Authorization": f"Bearer {_KEY}", "X-DashScope-SSE": "enable"},
                body={"input": {"prompt": "hello"}, "parameters": {"incremental_output": True}},
                params=None,
                sse=True,
            ),
        ),
        (
            "Langflow",
            _runner_run(LangflowRunner(), langflow_config),
            _bare_client(
                verify,
                f"{base}/api/v1/run/flow-1",
                headers={"x-api-key": _KEY},
                body={"input_value": "hello", "input_type": "chat", "output_type": "chat", "session_id": "s"},
                params={"stream": "true"},
                sse=False,
            ),
        ),
        (
            "Tbox",
            _runner_run(TboxRunner(), tbox_config),
            _bare_client(
                verify,
                f"{base}/api/chat",
                headers={"Authorization": _KEY, "source": "AGENT_SDK"},
                body={"appId": "app-1", "query": "hello", "stream": True, "userId": "u"},
                params=None,
                sse=True,
            ),
        ),
    ]
    return [
        Measure(
            name=f"{platform} runner, streamed run ({CHUNKS} chunks)",
            subject=subject,
            floor=floor,
            floor_name=f"bare httpx client: same {platform} request and parse against the same fake",
            goal=_GOAL,
            unit="µs/run",
        )
        for platform, subject, floor in cases
    ]
