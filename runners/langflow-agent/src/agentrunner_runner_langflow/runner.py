"""``LangflowRunner``: one event → one run of a Langflow flow through ``POST /api/v1/run/{flow_id}``.

One run: read the config (``config_invalid`` before any request) → the session id from conversation state (a
new UUID on the first turn: Langflow starts a session for an id it does not know) → ``?stream=true`` when the
delivery streams (``token`` events become ``message.delta``), else ``?stream=false`` and one JSON body → one
``message.completed`` → the session id Langflow reports into state → ``run.completed``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Final
from urllib.parse import quote

from agentrunner import AgentRunAPI, AgentRunContext, AgentRunner, AgentRunResult, ResultEmitter
from agentrunner_http_kit import ExternalIds, HttpSession, PlatformError, SecretRedactor, guarded
from pydantic import JsonValue

from .config import LangflowConfig
from .events import LangflowReply
from .manifest import MANIFEST

__all__ = ["SESSION_KEY", "LangflowRunner", "request_body"]

SESSION_KEY: Final = "external.session_id"
"""Conversation-state key holding the Langflow session id."""

PLATFORM: Final = "Langflow"
_PREFIX: Final = "langflow"


def request_body(config: LangflowConfig, text: str, *, session_id: str) -> dict[str, JsonValue]:
    """The JSON body of one run."""
    body: dict[str, JsonValue] = {
        "input_value": text,
        "input_type": config.input_type,
        "output_type": config.output_type,
        "session_id": session_id,
    }
    if config.tweaks:
        body["tweaks"] = config.tweaks
    return body


class LangflowRunner(AgentRunner):
    """The official ``langflow-agent`` runner (``plugin:langbot/langflow-agent/default``)."""

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
        config = LangflowConfig.from_mapping(ctx.config)
        redactor.add(config.api_key)
        ids = ExternalIds(ctx)
        session_id = ids.get(SESSION_KEY) or str(uuid.uuid4())
        streaming = ctx.delivery.supports_streaming
        text = "\n".join(ctx.input.text_parts())
        url = f"{config.base_url}/api/v1/run/{quote(config.flow_id, safe='')}"
        headers = {
            "x-api-key": config.api_key,
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        params = {"stream": "true" if streaming else "false"}
        reply = LangflowReply(session_id=session_id)
        async with (
            HttpSession.open(ctx, platform=PLATFORM, timeout=config.timeout, redactor=redactor) as http,
            http.stream(
                "POST",
                url,
                headers=headers,
                params=params,
                json=request_body(config, text, session_id=session_id),
                check_status=False,
            ) as response,
        ):
            if not response.response.is_success:
                hint = "flow not found: check flow-id" if response.status_code == 404 else None
                raise http.status_error(response.status_code, await response.read_text(), hint=hint)
            if streaming:
                async for event in response.json_objects():
                    piece = reply.feed(event)
                    if piece:
                        yield out.delta(piece)
                    if reply.finished:
                        break
            else:
                reply.body(await response.read_json())
        if not reply.text.strip():
            raise PlatformError(
                "empty_response", "the flow finished without any text", details={"tokens": reply.tokens}
            )
        yield out.message(reply.text)
        ids.set(SESSION_KEY, reply.session_id)
        for update in ids.updates(out):
            yield update
        completed = out.complete(finish_reason="stop")
        yield completed.model_copy(update={"metadata": {"runner": "langflow-agent", "tokens": reply.tokens}})
