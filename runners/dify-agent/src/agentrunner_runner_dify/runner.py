"""The Dify runner: one run is one streamed request to a Dify app (after uploading the input's files)."""

from __future__ import annotations

import re
import secrets as random_tokens
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any, Final, cast

from agentrunner import AgentRunAPI, AgentRunContext, AgentRunner, AgentRunResult, ResultEmitter
from agentrunner_http_kit import (
    ConfigReader,
    ExternalIds,
    HttpSession,
    MediaInput,
    PlatformError,
    SecretRedactor,
    adapter_params,
    guarded,
    media_inputs,
    upload_media,
    user_tag,
)
from pydantic import JsonValue

from .events import DifyTurn, parse_frame
from .manifest import APP_TYPES, DEFAULT_BASE_PROMPT, MANIFEST

__all__ = [
    "CONVERSATION_KEY",
    "WORKFLOW_CONVERSATION_KEY",
    "WORKFLOW_SESSION_KEY",
    "DifyConfig",
    "DifyRunner",
]

CONVERSATION_KEY: Final = "external.conversation_id"
"""Conversation state key of Dify's conversation id (chat, agent and chatflow apps)."""
WORKFLOW_SESSION_KEY: Final = "external.workflow_session_id"
"""Conversation state key of the session id a workflow app is given as ``langbot_session_id``."""
WORKFLOW_CONVERSATION_KEY: Final = "external.workflow_conversation_id"
"""Conversation state key of the id a workflow app is given as ``langbot_conversation_id``."""

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


@dataclass(frozen=True, slots=True)
class DifyConfig:
    """A binding's Dify settings."""

    base_url: str
    """``.../v1``."""
    api_key: str
    """The app's key."""
    app_type: str
    """``chat``, ``agent``, ``chatflow`` or ``workflow``."""
    base_prompt: str
    """Query for messages with files but no text."""
    timeout: float
    """Seconds."""
    remove_think: bool
    """Strip ``<think>`` blocks."""

    @classmethod
    def read(cls, config: dict[str, Any]) -> DifyConfig:
        """Validate ``ctx.config`` (``config_invalid`` naming the field)."""
        reader = ConfigReader(config)
        return cls(
            base_url=reader.url("base-url", default="https://api.dify.ai/v1"),
            api_key=reader.string("api-key", required=True),
            app_type=reader.choice("app-type", APP_TYPES, default="chat"),
            base_prompt=reader.string("base-prompt", default=DEFAULT_BASE_PROMPT),
            timeout=reader.number("timeout", default=30),
            remove_think=reader.boolean("remove-think", default=False),
        )

    @property
    def headers(self) -> dict[str, str]:
        """Request headers."""
        return {"Authorization": f"Bearer {self.api_key}"}

    @property
    def asset_base(self) -> str:
        """Where relative file URLs are rooted (the base URL without ``/v1``)."""
        return self.base_url.removesuffix("/v1")


class _UnknownConversation(Exception):
    """Dify no longer knows the stored conversation id."""


class DifyRunner(AgentRunner):
    """Answers with a Dify app. Chat, agent and chatflow apps keep Dify's conversation id in the host's
    conversation state; workflow apps get a stable session and conversation id of ours."""

    manifest = MANIFEST

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        redactor = SecretRedactor()
        body = self._run(ctx, api, out, redactor)
        async for result in guarded(body, out, prefix="dify", platform="Dify", redactor=redactor):
            yield result

    async def _run(
        self, ctx: AgentRunContext, api: AgentRunAPI, out: ResultEmitter, redactor: SecretRedactor
    ) -> AsyncGenerator[AgentRunResult]:
        config = DifyConfig.read(ctx.config)
        redactor.add(config.api_key)
        ids = ExternalIds(ctx)
        user = user_tag(ctx)
        text = (ctx.input.text or "").strip()
        media = media_inputs(ctx)
        turn = DifyTurn(
            out=out,
            streaming=ctx.delivery.supports_streaming,
            asset_base=config.asset_base,
            remove_think=config.remove_think,
        )
        async with HttpSession.open(ctx, platform="Dify", timeout=config.timeout, redactor=redactor) as http:
            files = [await _file_entry(http, api, config, item, user) for item in media]
            if config.app_type == "workflow":
                body = _workflow_body(ctx, ids, text, user, files)
                async for result in _stream(http, config, "/workflows/run", body, turn):
                    yield result
            else:
                stored = ids.get(CONVERSATION_KEY)
                conversation = stored if stored and _UUID.match(stored) else ""
                body: dict[str, JsonValue] = {
                    "inputs": adapter_params(ctx),
                    "query": text or config.base_prompt,
                    "user": user,
                    "response_mode": "streaming",
                    "conversation_id": conversation,
                    "files": cast("list[JsonValue]", files),
                }
                try:
                    async for result in _stream(http, config, "/chat-messages", body, turn):
                        yield result
                except _UnknownConversation:
                    # Dify dropped the conversation (deleted, or another app's id): start a new one, once.
                    ids.forget(CONVERSATION_KEY)
                    body["conversation_id"] = ""
                    async for result in _stream(http, config, "/chat-messages", body, turn):
                        yield result
                if turn.conversation_id:
                    ids.set(CONVERSATION_KEY, turn.conversation_id)
        reply = turn.final_text()
        if not reply and not turn.images:
            raise PlatformError("empty_response", "Dify finished without any answer")
        yield out.message(reply, contents=turn.images)
        for update in ids.updates(out):
            yield update
        yield out.complete(usage=_total(turn.usage))


def _total(usage: dict[str, JsonValue]) -> dict[str, JsonValue]:
    inputs, outputs = usage.get("input_tokens"), usage.get("output_tokens")
    if "total_tokens" not in usage and isinstance(inputs, int) and isinstance(outputs, int):
        return {**usage, "total_tokens": inputs + outputs}
    return usage


def _workflow_body(
    ctx: AgentRunContext, ids: ExternalIds, text: str, user: str, files: list[dict[str, JsonValue]]
) -> dict[str, JsonValue]:
    session = ids.get(WORKFLOW_SESSION_KEY)
    if session is None:
        session = f"dify_session_{random_tokens.token_hex(8)}"
        ids.set(WORKFLOW_SESSION_KEY, session)
    conversation = ids.get(WORKFLOW_CONVERSATION_KEY)
    if conversation is None:
        conversation = f"dify_conversation_{random_tokens.token_hex(8)}"
        ids.set(WORKFLOW_CONVERSATION_KEY, conversation)
    params = adapter_params(ctx)
    inputs: dict[str, JsonValue] = {
        **params,
        "langbot_user_message_text": text,
        "langbot_session_id": session,
        "langbot_conversation_id": conversation,
    }
    if "msg_create_time" in params:
        inputs["langbot_msg_create_time"] = params["msg_create_time"]
    return {
        "inputs": inputs,
        "user": user,
        "response_mode": "streaming",
        "files": cast("list[JsonValue]", files),
    }


async def _file_entry(
    http: HttpSession, api: AgentRunAPI, config: DifyConfig, item: MediaInput, user: str
) -> dict[str, JsonValue]:
    """A ``files`` entry: a remote URL as it is, an artifact uploaded first (``/files/upload``, 201)."""
    if item.artifact is None:
        return {"type": item.kind, "transfer_method": "remote_url", "url": item.url or ""}
    answer = await upload_media(
        http, api, item, f"{config.base_url}/files/upload", headers=config.headers, data={"user": user}
    )
    file_id = answer.get("id") if isinstance(answer, dict) else None
    if not isinstance(file_id, str) or not file_id:
        raise PlatformError("input_error", "Dify accepted the upload but returned no file id")
    return {"type": item.kind, "transfer_method": "local_file", "upload_file_id": file_id}


async def _stream(
    http: HttpSession, config: DifyConfig, path: str, body: dict[str, JsonValue], turn: DifyTurn
) -> AsyncGenerator[AgentRunResult]:
    async with http.stream(
        "POST", config.base_url + path, headers=config.headers, json=body, check_status=False
    ) as response:
        if not response.response.is_success:
            text = await response.read_text(limit=64 * 1024)
            if response.status_code == 404 and body.get("conversation_id") and _is_not_found(text):
                raise _UnknownConversation
            hint = "is the base URL right?" if response.status_code == 404 else None
            raise http.status_error(response.status_code, text, hint=hint)
        async for event in response.events():
            if not event.data:
                continue
            for result in turn.handle(parse_frame(event.data)):
                yield result
            if turn.finished:
                break


def _is_not_found(body: str) -> bool:
    try:
        value = parse_frame(body)
    except PlatformError:
        return False
    return value.get("code") == "not_found"
