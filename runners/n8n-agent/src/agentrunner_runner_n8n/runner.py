"""The n8n runner: one run is one ``POST`` to a workflow's webhook. The same endpoint answers either with one
JSON (or text) body, or — with the Webhook node's "Streaming" response mode — a sequence of JSON items
(``begin`` / ``item`` / ``end`` / ``error``) that may be split or joined across chunks."""

from __future__ import annotations

import base64
import logging
import secrets as random_tokens
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any, Final, cast

import jwt
import orjson
from agentrunner import AgentRunAPI, AgentRunContext, AgentRunner, AgentRunResult, ResultEmitter
from agentrunner_http_kit import (
    ConfigReader,
    ExternalIds,
    HttpSession,
    HttpStream,
    JsonObjectStream,
    PlatformError,
    ReplyText,
    SecretRedactor,
    adapter_params,
    guarded,
    user_tag,
)
from pydantic import JsonValue

from .manifest import AUTH_TYPES, MANIFEST

__all__ = ["CONVERSATION_KEY", "SESSION_KEY", "N8nConfig", "N8nRunner", "reply_from_json"]

CONVERSATION_KEY: Final = "external.conversation_id"
"""Conversation state key of the conversation id sent to n8n (ours: n8n has none of its own)."""
SESSION_KEY: Final = "external.session_id"
"""Conversation state key of the session id sent as ``session_id`` / ``sessionId`` (what n8n memory nodes read)."""

_STREAM_TYPES: Final = frozenset({"begin", "item", "end", "error"})
_JWT_ALGORITHMS: Final = ("HS256", "HS384", "HS512")

log = logging.getLogger("agentrunner_runner_n8n")


@dataclass(frozen=True, slots=True)
class N8nConfig:
    """A binding's webhook settings."""

    webhook_url: str
    """The production webhook URL."""
    headers: dict[str, str]
    """Auth headers for the chosen ``auth-type``."""
    timeout: float
    """Seconds."""
    output_key: str
    """Field of a JSON answer holding the reply."""

    @classmethod
    def read(cls, config: dict[str, Any], redactor: SecretRedactor) -> N8nConfig:
        """Validate ``ctx.config`` (``config_invalid`` naming the field) and build the auth headers."""
        reader = ConfigReader(config)
        url = reader.url("webhook-url")
        auth = reader.choice("auth-type", AUTH_TYPES, default="none")
        headers: dict[str, str] = {}
        if auth == "basic":
            user = reader.string("basic-username", required=True)
            password = reader.string("basic-password", required=True)
            redactor.add_basic(user, password)
            pair = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            headers["Authorization"] = f"Basic {pair}"
        elif auth == "jwt":
            secret = reader.string("jwt-secret", required=True)
            redactor.add(secret)
            algorithm = reader.string("jwt-algorithm", default="HS256")
            if algorithm not in _JWT_ALGORITHMS:
                raise reader.invalid("jwt-algorithm", f"must be one of {', '.join(_JWT_ALGORITHMS)}")
            now = int(time.time())
            claims = {"iat": now, "exp": now + 3600, "sub": "n8n-webhook"}
            headers["Authorization"] = f"Bearer {jwt.encode(claims, secret, algorithm=algorithm)}"
        elif auth == "header":
            name = reader.string("header-name", required=True)
            value = reader.string("header-value", required=True)
            redactor.add(value)
            headers[name] = value
        redactor.add_headers(headers)
        return cls(
            webhook_url=url,
            headers=headers,
            timeout=reader.number("timeout", default=120),
            output_key=reader.string("output-key", default="response") or "response",
        )


def _as_text(value: object) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def reply_from_json(value: object, output_key: str) -> str:
    """The reply in a JSON answer: ``value[output_key]`` (a one-element list unwrapped first, as n8n's
    "respond with all items" sends), else the whole JSON as text."""
    answer: object = value
    if isinstance(answer, list):
        items = cast("list[object]", answer)
        if len(items) == 1:
            answer = items[0]
    if isinstance(answer, dict):
        field = cast("dict[str, object]", answer).get(output_key)
        if field is not None:
            return _as_text(field)
    return "" if answer is None else _as_text(answer)  # pyright: ignore[reportUnknownArgumentType]


class N8nRunner(AgentRunner):
    """Calls an n8n workflow's webhook with the message and stable conversation/session ids of ours."""

    manifest = MANIFEST

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        redactor = SecretRedactor()
        body = self._run(ctx, out, redactor)
        async for result in guarded(body, out, prefix="n8n", platform="n8n", redactor=redactor):
            yield result

    async def _run(
        self, ctx: AgentRunContext, out: ResultEmitter, redactor: SecretRedactor
    ) -> AsyncGenerator[AgentRunResult]:
        config = N8nConfig.read(ctx.config, redactor)
        ids = ExternalIds(ctx)
        conversation = ids.get(CONVERSATION_KEY) or f"n8n_conversation_{random_tokens.token_hex(8)}"
        session = ids.get(SESSION_KEY) or f"n8n_session_{random_tokens.token_hex(8)}"
        ids.set(CONVERSATION_KEY, conversation)
        ids.set(SESSION_KEY, session)
        text = ctx.input.text or ""
        params = adapter_params(ctx)
        payload: dict[str, JsonValue] = {
            **params,
            "chatInput": text,
            "message": text,
            "user_message_text": text,
            "conversation_id": conversation,
            "session_id": session,
            "sessionId": session,
            "user_id": user_tag(ctx),
        }
        if "msg_create_time" in params:
            payload["msg_create_time"] = params["msg_create_time"]
        reply = ReplyText()
        streaming = ctx.delivery.supports_streaming
        async with (
            HttpSession.open(ctx, platform="n8n", timeout=config.timeout, redactor=redactor) as http,
            http.stream(
                "POST", config.webhook_url, headers=config.headers, json=payload, check_status=False
            ) as response,
        ):
            if not response.response.is_success:
                status = response.status_code
                hint = "the webhook is not registered: is the workflow active?" if status == 404 else None
                raise http.status_error(status, await response.read_text(limit=64 * 1024), hint=hint)
            async for piece in _answer(response, config.output_key, reply):
                if streaming and piece:
                    yield out.delta(piece)
        if not reply:
            raise PlatformError("empty_response", "n8n answered without any text")
        yield out.message(reply.text)
        for update in ids.updates(out):
            yield update
        yield out.complete()


async def _answer(response: HttpStream, output_key: str, reply: ReplyText) -> AsyncGenerator[str]:
    """Pieces of the reply as they arrive (streamed items), or the whole reply once (JSON or text body)."""
    decoder = JsonObjectStream()
    raw: list[str] = []
    values: list[object] = []
    mode: str | None = None  # "stream", "json" or "text", decided by the first value
    async for chunk in response.text_chunks():
        if mode != "stream":
            raw.append(chunk)
        if mode == "text":
            continue
        try:
            decoded: list[object] = list(decoder.feed(chunk))
        except ValueError:
            if mode == "stream":
                raise PlatformError("response_invalid", "n8n sent a stream item that is not JSON") from None
            mode = "text"
            continue
        for value in decoded:
            if mode is None:
                mode = "stream" if _item_type(value) in _STREAM_TYPES else "json"
            if mode == "stream":
                yield reply.append(_stream_item(value))
            else:
                values.append(value)
    if mode == "stream":
        if decoder.rest():
            raise PlatformError("response_invalid", "n8n's stream ended inside an item")
        return
    if mode == "text" or decoder.rest():
        yield reply.append("".join(raw).strip())
        return
    yield reply.append(
        reply_from_json(values[0] if len(values) == 1 else values, output_key) if values else ""
    )


def _item_type(value: object) -> object:
    return cast("dict[str, object]", value).get("type") if isinstance(value, dict) else None


def _stream_item(value: object) -> str:
    kind = _item_type(value)
    content = cast("dict[str, object]", value).get("content") if isinstance(value, dict) else None
    if kind == "item":
        return content if isinstance(content, str) else ("" if content is None else _as_text(content))
    if kind == "error":
        message = content if isinstance(content, str) else _as_text(content)
        raise PlatformError("api_error", f"the n8n workflow reported an error: {message[:300]}")
    if kind not in ("begin", "end"):
        log.debug("ignoring n8n stream item of type %r", kind)
    return ""
