"""The Coze runner: one run is one streamed ``POST /v3/chat`` (after uploading the input's files).

Frames are ``event:<name>`` / ``data:<json>`` (no space after the colon; httpx-sse reads both forms). A gateway
may answer HTTP 200 with a JSON body ``{"code": != 0, "msg"}`` instead of a stream: that is an error.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Final, cast

import orjson
from agentrunner import AgentRunAPI, AgentRunContext, AgentRunner, AgentRunResult, ResultEmitter
from agentrunner_http_kit import (
    ConfigReader,
    ExternalIds,
    HttpSession,
    MediaInput,
    PlatformError,
    ReplyText,
    SecretRedactor,
    ThinkFilter,
    adapter_params,
    guarded,
    media_inputs,
    upload_media,
    user_tag,
)
from pydantic import JsonValue

from .manifest import MANIFEST

__all__ = ["AUTH_ERROR_CODES", "CONVERSATION_KEY", "CozeConfig", "CozeRunner"]

CONVERSATION_KEY: Final = "external.conversation_id"
"""Conversation state key of Coze's conversation id."""

AUTH_ERROR_CODES: Final = frozenset({4100, 4101})
"""Coze codes meaning the token is missing, invalid or lacks permission (answered as ``auth_error``)."""

_THINK_OPEN: Final = "🤔\n"
_THINK_CLOSE: Final = "\n💬\n"

log = logging.getLogger("agentrunner_runner_coze")


@dataclass(frozen=True, slots=True)
class CozeConfig:
    """A binding's Coze settings."""

    api_key: str
    """Personal access token."""
    bot_id: str
    """The bot."""
    api_base: str
    """``https://api.coze.cn`` or ``https://api.coze.com`` (or a gateway)."""
    auto_save_history: bool
    """Let Coze keep the conversation."""
    timeout: float
    """Seconds."""
    remove_think: bool
    """Leave reasoning out."""

    @classmethod
    def read(cls, config: dict[str, Any]) -> CozeConfig:
        """Validate ``ctx.config`` (``config_invalid`` naming the field)."""
        reader = ConfigReader(config)
        return cls(
            api_key=reader.string("api-key", required=True),
            bot_id=reader.string("bot-id", required=True),
            api_base=reader.url("api-base", default="https://api.coze.cn"),
            auto_save_history=reader.boolean("auto-save-history", default=True),
            timeout=reader.number("timeout", default=120),
            remove_think=reader.boolean("remove-think", default=False),
        )

    @property
    def headers(self) -> dict[str, str]:
        """Auth header."""
        return {"Authorization": f"Bearer {self.api_key}"}


def _dict(value: object) -> dict[str, Any]:
    return cast("dict[str, Any]", value) if isinstance(value, dict) else {}


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def coze_error(code: object, message: str, *, what: str = "Coze") -> PlatformError:
    """The failure for a Coze ``{code, msg}``: token codes are ``auth_error``, the rest ``api_error``."""
    details: dict[str, JsonValue] = {"code": code if isinstance(code, (int, str)) else None}
    if isinstance(code, int) and code in AUTH_ERROR_CODES:
        return PlatformError(
            "auth_error", f"{what} refused the token ({code}): {message[:300]}", details=details
        )
    return PlatformError("api_error", f"{what} reported an error ({code}): {message[:300]}", details=details)


@dataclass(slots=True)
class _Turn:
    out: ResultEmitter
    streaming: bool
    remove_think: bool
    reply: ReplyText = field(default_factory=ReplyText)
    conversation_id: str | None = None
    usage: dict[str, JsonValue] = field(default_factory=dict[str, JsonValue])
    follow_ups: list[str] = field(default_factory=list[str])
    done: bool = False
    answered: bool = False
    _thinking: bool = False
    _think: ThinkFilter = field(default_factory=ThinkFilter)
    _tools: dict[str, str] = field(default_factory=dict[str, str])

    def _emit(self, piece: str) -> list[AgentRunResult]:
        self.reply.append(piece)
        return [self.out.delta(piece)] if self.streaming and piece else []

    def _answer(self, content: str, reasoning: str) -> list[AgentRunResult]:
        out: list[AgentRunResult] = []
        if reasoning and not self.remove_think:
            if not self._thinking and not self.reply:
                self._thinking = True
                out += self._emit(_THINK_OPEN)
            if self._thinking:
                out += self._emit(reasoning)
        if content:
            self.answered = True
            if self._thinking:
                self._thinking = False
                out += self._emit(_THINK_CLOSE)
            out += self._emit(self._think.feed(content) if self.remove_think else content)
        return out

    def handle(self, name: str, data: str) -> list[AgentRunResult]:
        if name == "done":
            self.done = True
            return []
        if name == "ping" or not data:
            return []
        try:
            frame = _dict(json.loads(data))
        except ValueError:
            raise PlatformError("response_invalid", f"Coze sent a {name} frame that is not JSON") from None
        conversation = frame.get("conversation_id")
        if isinstance(conversation, str) and conversation and name.startswith("conversation.chat."):
            self.conversation_id = conversation
        match name:
            case "conversation.message.delta":
                if frame.get("type", "answer") == "answer":
                    return self._answer(_str(frame.get("content")), _str(frame.get("reasoning_content")))
                return []
            case "conversation.message.completed":
                return self._completed(frame)
            case "conversation.chat.completed":
                usage = _dict(frame.get("usage"))
                for source, target in (
                    ("input_count", "input_tokens"),
                    ("output_count", "output_tokens"),
                    ("token_count", "total_tokens"),
                ):
                    if isinstance(usage.get(source), int):
                        self.usage[target] = usage[source]
                return []
            case "conversation.chat.failed":
                error = _dict(frame.get("last_error"))
                raise coze_error(error.get("code"), _str(error.get("msg")) or "the chat failed")
            case "conversation.chat.requires_action":
                raise PlatformError(
                    "requires_action",
                    "the Coze bot asked for a client-side tool result, which this runner does not support",
                )
            case "error":
                raise coze_error(frame.get("code"), _str(frame.get("msg")) or "error")
            case "conversation.chat.created" | "conversation.chat.in_progress":
                return []
            case _:
                log.debug("ignoring Coze stream event %r", name)
                return []

    def _completed(self, frame: dict[str, Any]) -> list[AgentRunResult]:
        kind = _str(frame.get("type"))
        content = _str(frame.get("content"))
        message_id = _str(frame.get("id")) or kind
        if kind == "answer" and not self.answered and content:
            # A bot that streamed no deltas for its answer: the completed message carries it whole.
            return self._answer(content, _str(frame.get("reasoning_content")))
        if kind == "function_call":
            name = _str(_dict(_loads(content)).get("name")) or "function"
            self._tools[message_id] = name
            return [self.out.tool_started(message_id, name, {"arguments": content[:1000]})]
        if kind == "tool_response":
            call_id = next(iter(self._tools), message_id)
            name = self._tools.pop(call_id, "function")
            if call_id == message_id:
                return [
                    self.out.tool_started(call_id, name, {}),
                    self.out.tool_completed(call_id, name, result_preview={"output": content[:1000]}),
                ]
            return [self.out.tool_completed(call_id, name, result_preview={"output": content[:1000]})]
        if kind == "follow_up" and content:
            self.follow_ups.append(content)
        return []

    def final_text(self) -> str:
        if self.remove_think:
            self.reply.append(self._think.flush())
        return self.reply.text


def _loads(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None


class CozeRunner(AgentRunner):
    """Chats with a Coze bot; Coze's conversation id is kept in the host's conversation state."""

    manifest = MANIFEST

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        redactor = SecretRedactor()
        body = self._run(ctx, api, out, redactor)
        async for result in guarded(body, out, prefix="coze", platform="Coze", redactor=redactor):
            yield result

    async def _run(
        self, ctx: AgentRunContext, api: AgentRunAPI, out: ResultEmitter, redactor: SecretRedactor
    ) -> AsyncGenerator[AgentRunResult]:
        config = CozeConfig.read(ctx.config)
        redactor.add(config.api_key)
        ids = ExternalIds(ctx)
        user = user_tag(ctx)
        media = media_inputs(ctx)
        turn = _Turn(out=out, streaming=ctx.delivery.supports_streaming, remove_think=config.remove_think)
        async with HttpSession.open(ctx, platform="Coze", timeout=config.timeout, redactor=redactor) as http:
            parts = [await _part(http, api, config, item) for item in media]
            body: dict[str, JsonValue] = {
                "bot_id": config.bot_id,
                "user_id": user,
                "stream": True,
                "auto_save_history": config.auto_save_history,
                "additional_messages": [_message(ctx.input.text or "", parts)],
            }
            params = adapter_params(ctx)
            if params:
                body["custom_variables"] = {
                    k: v if isinstance(v, str) else orjson.dumps(v).decode() for k, v in params.items()
                }
            conversation = ids.get(CONVERSATION_KEY)
            query = {"conversation_id": conversation} if conversation else None
            headers = {**config.headers, "Accept": "text/event-stream"}
            async with http.stream(
                "POST", f"{config.api_base}/v3/chat", headers=headers, json=body, params=query
            ) as response:
                if not response.is_event_stream:
                    answer = _dict(await response.read_json())
                    raise coze_error(answer.get("code"), _str(answer.get("msg")) or "no event stream")
                async for event in response.events():
                    for result in turn.handle(event.event, event.data):
                        yield result
                    if turn.done:
                        break
        if turn.conversation_id:
            ids.set(CONVERSATION_KEY, turn.conversation_id)
        reply = turn.final_text()
        if not reply:
            raise PlatformError("empty_response", "the Coze bot finished without an answer")
        metadata: dict[str, JsonValue] | None = (
            {"follow_up": cast("list[JsonValue]", turn.follow_ups)} if turn.follow_ups else None
        )
        yield out.message(reply, metadata=metadata)
        for update in ids.updates(out):
            yield update
        yield out.complete(usage=turn.usage)


def _message(text: str, parts: list[dict[str, JsonValue]]) -> dict[str, JsonValue]:
    """The user message: plain text, or an ``object_string`` of text, image and file parts."""
    if not parts:
        return {"role": "user", "content": text, "content_type": "text"}
    items: list[JsonValue] = [{"type": "text", "text": text}] if text else []
    items += cast("list[JsonValue]", parts)
    return {"role": "user", "content": orjson.dumps(items).decode(), "content_type": "object_string"}


async def _part(
    http: HttpSession, api: AgentRunAPI, config: CozeConfig, item: MediaInput
) -> dict[str, JsonValue]:
    kind = "image" if item.kind == "image" else "file"
    if item.artifact is None:
        return {"type": kind, "file_url": item.url or ""}
    answer = _dict(
        await upload_media(http, api, item, f"{config.api_base}/v1/files/upload", headers=config.headers)
    )
    if answer.get("code") != 0:
        raise coze_error(
            answer.get("code"), _str(answer.get("msg")) or "upload refused", what="Coze's file upload"
        )
    file_id = _dict(answer.get("data")).get("id")
    if not isinstance(file_id, str) or not file_id:
        raise PlatformError("input_error", "Coze accepted the upload but returned no file id")
    return {"type": kind, "file_id": file_id}
