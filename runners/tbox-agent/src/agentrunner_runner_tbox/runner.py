"""``TboxRunner``: one event → one call of a Tbox chat application (``POST {base-url}/api/chat``).

One run: read the config (``config_invalid`` before any request) → upload every image and file of the input
(``POST /api/file/upload``; an input that cannot be read or uploaded fails ``input_error``, it is never
dropped) → the chat call with the stored ``conversationId``; ``"stream": true`` when the delivery streams (SSE,
``chunk`` frames become ``message.delta``), else one JSON body → one ``message.completed`` → the conversation id
into state → ``run.completed``.

Tbox authenticates with the raw token in ``Authorization`` (no ``Bearer``) and tags SDK calls with
``source: AGENT_SDK``; both are sent as its SDK sends them.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Final

from agentrunner import AgentRunAPI, AgentRunContext, AgentRunner, AgentRunResult, ResultEmitter
from agentrunner_http_kit import (
    ExternalIds,
    HttpSession,
    MediaInput,
    PlatformError,
    SecretRedactor,
    guarded,
    media_inputs,
    upload_media,
    user_tag,
)
from pydantic import JsonValue

from .config import TboxConfig
from .events import TboxReply, error_from_body
from .manifest import MANIFEST

__all__ = ["CONVERSATION_KEY", "TboxRunner", "request_body"]

CONVERSATION_KEY: Final = "external.conversation_id"
"""Conversation-state key holding Tbox's ``conversationId``."""

PLATFORM: Final = "Tbox"
_PREFIX: Final = "tbox"
_FILE_TYPES: Final = {"image": "IMAGE", "audio": "AUDIO", "video": "VIDEO", "document": "FILE"}


def request_body(
    config: TboxConfig,
    query: str,
    *,
    user: str,
    conversation_id: str | None,
    files: list[dict[str, JsonValue]],
    stream: bool,
) -> dict[str, JsonValue]:
    """The JSON body of one chat call."""
    body: dict[str, JsonValue] = {
        "appId": config.app_id,
        "query": query,
        "stream": stream,
        "userId": user,
        "searchEngine": False,
    }
    if conversation_id:
        body["conversationId"] = conversation_id
    if files:
        body["files"] = list[JsonValue](files)
    return body


def _headers(config: TboxConfig) -> dict[str, str]:
    return {"Authorization": config.api_key, "source": "AGENT_SDK"}


async def _upload(
    http: HttpSession, api: AgentRunAPI, config: TboxConfig, item: MediaInput
) -> dict[str, JsonValue]:
    if item.artifact is None:
        raise PlatformError(
            "input_error", "Tbox takes uploaded files only; an input given as a URL cannot be sent to it"
        )
    answer = await upload_media(
        http, api, item, f"{config.base_url}/api/file/upload", headers=_headers(config)
    )
    failure = error_from_body(answer)
    file_id = answer.get("data") if isinstance(answer, dict) else None
    if failure is not None or not isinstance(file_id, str) or not file_id:
        reason = failure.message if failure is not None else "Tbox returned no file id"
        raise PlatformError("input_error", f"uploading {item.name or 'a file'} failed: {reason}")
    return {"fileId": file_id, "type": _FILE_TYPES[item.kind]}


class TboxRunner(AgentRunner):
    """The official ``tbox-agent`` runner (``plugin:langbot/tbox-agent/default``)."""

    manifest = MANIFEST

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        """Answer one event (see the module docstring)."""
        out = self.emitter(ctx)
        redactor = SecretRedactor()
        async for result in guarded(
            self._answer(ctx, api, out, redactor), out, prefix=_PREFIX, platform=PLATFORM, redactor=redactor
        ):
            yield result

    async def _answer(
        self, ctx: AgentRunContext, api: AgentRunAPI, out: ResultEmitter, redactor: SecretRedactor
    ) -> AsyncGenerator[AgentRunResult]:
        config = TboxConfig.from_mapping(ctx.config)
        redactor.add(config.api_key)
        ids = ExternalIds(ctx)
        streaming = ctx.delivery.supports_streaming
        query = "\n".join(ctx.input.text_parts()).strip()
        media = media_inputs(ctx)
        if not query and not media:
            raise PlatformError("input_error", "the message has no text, image or file to send to Tbox")
        reply = TboxReply()
        headers = {**_headers(config), "Content-Type": "application/json"}
        if streaming:
            headers["Accept"] = "text/event-stream"
        async with HttpSession.open(
            ctx, platform=PLATFORM, timeout=config.timeout, redactor=redactor
        ) as http:
            files = [await _upload(http, api, config, item) for item in media]
            body = request_body(
                config,
                query,
                user=user_tag(ctx),
                conversation_id=ids.get(CONVERSATION_KEY),
                files=files,
                stream=streaming,
            )
            async with http.stream(
                "POST", f"{config.base_url}/api/chat", headers=headers, json=body
            ) as response:
                if streaming and response.is_event_stream:
                    async for event in response.events():
                        piece = reply.feed(event.event, event.data)
                        if piece:
                            yield out.delta(piece)
                        if reply.finished:
                            break
                else:
                    # A refused streaming call answers JSON ({"errorCode", "errorMsg"}), as does stream=false.
                    piece = reply.body(await response.read_json())
                    if piece and streaming:
                        yield out.delta(piece)
        rest = reply.finish()
        if rest and streaming:
            yield out.delta(rest)
        if not reply.chunks:
            raise PlatformError("empty_response", "Tbox answered without any text")
        yield out.message(reply.text)
        ids.set(CONVERSATION_KEY, reply.conversation_id or ids.get(CONVERSATION_KEY))
        for update in ids.updates(out):
            yield update
        completed = out.complete(finish_reason="stop")
        yield completed.model_copy(
            update={"metadata": {"runner": "tbox-agent", "chunks": reply.chunks, "files": len(files)}}
        )
