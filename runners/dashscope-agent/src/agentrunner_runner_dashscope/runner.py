"""``DashScopeRunner``: one event → one call of a DashScope (Model Studio) application over plain httpx.

The vendor SDK is not used: it blocks a thread for the whole answer and cannot be cancelled, while an httpx
stream is closed as soon as the host cancels the run (the platform sees the connection go away).

One run: read the config (``config_invalid`` before any request) → ``POST {base-url}/apps/{app-id}/completion``
with the stored ``session_id`` → when the delivery streams, read Server-Sent Events (``X-DashScope-SSE: enable``,
``incremental_output``) and send each new piece as a ``message.delta``; otherwise read the JSON answer → one
``message.completed`` → the new session id into conversation state → ``run.completed`` with usage.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Final
from urllib.parse import quote

from agentrunner import AgentRunAPI, AgentRunContext, AgentRunner, AgentRunResult, ResultEmitter
from agentrunner import codec as json
from agentrunner_http_kit import (
    ExternalIds,
    HttpSession,
    HttpStream,
    PlatformError,
    SecretRedactor,
    adapter_params,
    guarded,
)
from pydantic import JsonValue

from .config import DashScopeConfig
from .events import DashScopeReply, error_from_body
from .manifest import MANIFEST

__all__ = ["SESSION_KEY", "DashScopeRunner", "request_body"]

SESSION_KEY: Final = "external.conversation_id"
"""Conversation-state key holding DashScope's ``session_id`` (the name the reference runner used)."""

PLATFORM: Final = "DashScope"
_PREFIX: Final = "dashscope"
log = logging.getLogger("agentrunner_runner_dashscope")


def request_body(
    config: DashScopeConfig,
    prompt: str,
    *,
    session_id: str | None,
    params: dict[str, JsonValue],
    stream: bool,
) -> dict[str, JsonValue]:
    """The JSON body of one application call."""
    app_input: dict[str, JsonValue] = {"prompt": prompt}
    if session_id:
        app_input["session_id"] = session_id
    if params:
        app_input["biz_params"] = params
    parameters: dict[str, JsonValue] = {}
    if stream:
        # Without it every frame repeats the text so far; with it each frame has the new part only.
        parameters["incremental_output"] = True
    if config.app_type == "agent":
        parameters["has_thoughts"] = True
    elif stream:
        parameters["flow_stream_mode"] = "message_format"
    return {"input": app_input, "parameters": parameters, "debug": {}}


def _error_payload(text: str) -> object:
    """An error body as JSON: plain JSON, or the ``data:`` line of an SSE error event (DashScope answers a
    refused streaming request with ``event:error`` and the HTTP status of the failure)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        if line.startswith("data:"):
            try:
                return json.loads(line[5:].strip())
            except ValueError:
                return None
    return None


class DashScopeRunner(AgentRunner):
    """The official ``dashscope-agent`` runner (``plugin:langbot/dashscope-agent/default``)."""

    manifest = MANIFEST

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        """Answer one event (see the module docstring)."""
        out = self.emitter(ctx)
        redactor = SecretRedactor()
        async for result in guarded(
            self._answer(ctx, out, redactor), out, prefix=_PREFIX, platform=PLATFORM, redactor=redactor
        ):
            yield result

    async def _answer(
        self, ctx: AgentRunContext, out: ResultEmitter, redactor: SecretRedactor
    ) -> AsyncGenerator[AgentRunResult]:
        config = DashScopeConfig.from_mapping(ctx.config)
        redactor.add(config.api_key)
        prompt = "\n".join(ctx.input.text_parts()).strip()
        if not prompt:
            raise PlatformError(
                "input_error", "DashScope applications need a text prompt; the message has none"
            )
        ids = ExternalIds(ctx)
        streaming = ctx.delivery.supports_streaming
        headers = {"Authorization": f"Bearer {config.api_key}", "Content-Type": "application/json"}
        if streaming:
            headers["X-DashScope-SSE"] = "enable"
            headers["Accept"] = "text/event-stream"
        body = request_body(
            config, prompt, session_id=ids.get(SESSION_KEY), params=adapter_params(ctx), stream=streaming
        )
        url = f"{config.base_url}/apps/{quote(config.app_id, safe='')}/completion"
        reply = DashScopeReply(config.app_type, references_quote=config.references_quote)
        async with (
            HttpSession.open(ctx, platform=PLATFORM, timeout=config.timeout, redactor=redactor) as http,
            http.stream("POST", url, headers=headers, json=body, check_status=False) as response,
        ):
            if not response.response.is_success:
                text = await response.read_text(limit=64 * 1024)
                raise error_from_body(_error_payload(text), status=response.status_code) or http.status_error(
                    response.status_code, text
                )
            if streaming and response.is_event_stream:
                async for piece in _stream_pieces(response, reply):
                    yield out.delta(piece)
            else:
                reply.feed(await response.read_json())
        rest = reply.finish()
        if rest and streaming:
            yield out.delta(rest)
        if not reply.text.strip():
            raise PlatformError(
                "empty_response", "DashScope answered without any text", details=_facts(reply)
            )
        yield out.message(reply.text)
        ids.set(SESSION_KEY, reply.session_id or ids.get(SESSION_KEY))
        for update in ids.updates(out):
            yield update
        completed = out.complete(finish_reason="stop", usage=reply.usage())
        yield completed.model_copy(update={"metadata": _facts(reply)})


async def _stream_pieces(response: HttpStream, reply: DashScopeReply) -> AsyncIterator[str]:
    """The new text of each SSE frame (``event:result``); an ``event:error`` frame raises."""
    async for event in response.events():
        if not event.data:
            continue
        try:
            frame = json.loads(event.data)
        except ValueError:
            raise PlatformError("response_invalid", "DashScope sent a frame that is not JSON") from None
        if event.event == "error":
            raise error_from_body(frame) or PlatformError("api_error", "DashScope reported an error")
        if event.event not in ("result", "message", ""):
            log.debug("DashScope event %r ignored", event.event)
            continue
        piece = reply.feed(frame)
        if piece:
            yield piece
        if reply.finished:
            return


def _facts(reply: DashScopeReply) -> dict[str, JsonValue]:
    facts: dict[str, JsonValue] = {"runner": "dashscope-agent", "frames": reply.frames}
    if reply.request_id:
        facts["request_id"] = reply.request_id
    return facts
