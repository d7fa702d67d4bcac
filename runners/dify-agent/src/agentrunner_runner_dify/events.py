"""Reading Dify's stream: one turn's text, files, tool telemetry, ids and usage, event by event.

Event names and fields follow Dify's service API docs (chat-messages and workflows/run, streaming mode).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, cast

from agentrunner import AgentRunResult, ImageContent, ResultEmitter
from agentrunner_http_kit import PlatformError, ReplyText, ThinkFilter
from pydantic import JsonValue, ValidationError

__all__ = ["DifyTurn", "parse_frame"]

log = logging.getLogger("agentrunner_runner_dify")

_SKIPPED_NODES = frozenset({"start", "end"})


def parse_frame(data: str) -> dict[str, Any]:
    """One SSE ``data`` payload as a JSON object (``response_invalid`` otherwise)."""
    try:
        value = json.loads(data)
    except ValueError:
        raise PlatformError("response_invalid", "Dify sent a stream frame that is not JSON") from None
    if not isinstance(value, dict):
        raise PlatformError("response_invalid", "Dify sent a stream frame that is not a JSON object")
    return cast("dict[str, Any]", value)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: object) -> dict[str, Any]:
    return cast("dict[str, Any]", value) if isinstance(value, dict) else {}


@dataclass(slots=True)
class DifyTurn:
    """What one streamed answer has said so far."""

    out: ResultEmitter
    """The run's emitter (tool telemetry and deltas are made with it)."""
    streaming: bool
    """Whether deltas are delivered."""
    asset_base: str
    """Prefix for relative file URLs (``base-url`` without ``/v1``)."""
    remove_think: bool = False
    """Strip ``<think>`` blocks."""
    reply: ReplyText = field(default_factory=ReplyText)
    """The visible reply."""
    node_answers: list[str] = field(default_factory=list[str])
    """Answers of chatflow ``answer`` nodes (used when no message text came)."""
    images: list[ImageContent] = field(default_factory=list[ImageContent])
    """Images the app sent."""
    conversation_id: str | None = None
    """Dify's conversation id."""
    usage: dict[str, JsonValue] = field(default_factory=dict[str, JsonValue])
    """Normalised usage."""
    finished: bool = False
    """The terminal event arrived."""
    workflow_outputs: dict[str, Any] | None = None
    """A workflow's outputs."""
    _think: ThinkFilter = field(default_factory=ThinkFilter)
    _tools: set[str] = field(default_factory=set[str])

    def _text(self, piece: str) -> list[AgentRunResult]:
        visible = self._think.feed(piece) if self.remove_think else piece
        self.reply.append(visible)
        return [self.out.delta(visible)] if self.streaming and visible else []

    def handle(self, event: dict[str, Any]) -> list[AgentRunResult]:
        """The results one decoded frame produces (most produce none)."""
        name = _str(event.get("event"))
        conversation = event.get("conversation_id")
        if isinstance(conversation, str) and conversation:
            self.conversation_id = conversation
        data = _dict(event.get("data"))
        match name:
            case "message" | "agent_message":
                return self._text(_str(event.get("answer")))
            case "message_replace":
                self.reply.replace(_str(event.get("answer")))
                return []
            case "agent_thought":
                return self._thought(event)
            case "message_file":
                self._file(event)
                return []
            case "message_end":
                self.finished = True
                self._usage(_dict(_dict(event.get("metadata")).get("usage")))
                return []
            case "text_chunk":
                return self._text(_str(data.get("text")))
            case "node_started":
                return self._node_started(data)
            case "node_finished":
                return self._node_finished(data)
            case "workflow_finished":
                return self._workflow_finished(data)
            case "error":
                code = _str(event.get("code")) or "error"
                raise PlatformError(
                    "api_error",
                    f"Dify reported an error ({code}): {_str(event.get('message'))[:300]}",
                    details={
                        "code": code,
                        "status": event.get("status") if isinstance(event.get("status"), int) else None,
                    },
                )
            case "ping" | "workflow_started" | "message_start" | "tts_message" | "tts_message_end":
                return []
            case _:
                log.debug("ignoring Dify stream event %r", name)
                return []

    def _thought(self, event: dict[str, Any]) -> list[AgentRunResult]:
        tool = _str(event.get("tool"))
        if not tool:
            return []
        call_id = _str(event.get("id")) or tool
        out: list[AgentRunResult] = []
        if call_id not in self._tools:
            self._tools.add(call_id)
            out.append(self.out.tool_started(call_id, tool, {"input": _str(event.get("tool_input"))}))
        observation = _str(event.get("observation"))
        if observation:
            self._tools.discard(call_id)
            preview: dict[str, JsonValue] = {"observation": observation[:1000]}
            out.append(self.out.tool_completed(call_id, tool, result_preview=preview))
        return out

    def _file(self, event: dict[str, Any]) -> None:
        if _str(event.get("type")) != "image" or _str(event.get("belongs_to") or "assistant") != "assistant":
            return
        url = _str(event.get("url"))
        if url.startswith("/"):
            url = self.asset_base + url
        try:
            self.images.append(ImageContent(url=url))
        except ValidationError:
            log.debug("ignoring a Dify image with an unusable url")

    def _usage(self, usage: dict[str, Any]) -> None:
        names = {
            "prompt_tokens": "input_tokens",
            "completion_tokens": "output_tokens",
            "total_tokens": "total_tokens",
        }
        for source, target in names.items():
            value = usage.get(source)
            if isinstance(value, int):
                self.usage[target] = value

    def _node_started(self, data: dict[str, Any]) -> list[AgentRunResult]:
        node_type = _str(data.get("node_type"))
        node_id = _str(data.get("node_id")) or _str(data.get("id"))
        if not node_id or node_type in _SKIPPED_NODES or node_type == "answer":
            return []
        self._tools.add(node_id)
        name = _str(data.get("title")) or node_type or "node"
        return [self.out.tool_started(node_id, name, {"node_type": node_type})]

    def _node_finished(self, data: dict[str, Any]) -> list[AgentRunResult]:
        node_type = _str(data.get("node_type"))
        if node_type == "answer":
            answer = _str(_dict(data.get("outputs")).get("answer"))
            if answer:
                self.node_answers.append(answer)
        node_id = _str(data.get("node_id")) or _str(data.get("id"))
        if node_id not in self._tools:
            return []
        self._tools.discard(node_id)
        name = _str(data.get("title")) or node_type or "node"
        error = _str(data.get("error"))
        status = _str(data.get("status"))
        if error or status == "failed":
            return [
                self.out.tool_completed(node_id, name, error_code="node_failed", error_message=error[:500])
            ]
        return [self.out.tool_completed(node_id, name, result_preview={"status": status or "succeeded"})]

    def _workflow_finished(self, data: dict[str, Any]) -> list[AgentRunResult]:
        self.finished = True
        status = _str(data.get("status"))
        error = _str(data.get("error"))
        if error or status in ("failed", "stopped"):
            raise PlatformError(
                "api_error",
                f"the Dify workflow {status or 'failed'}: {error[:300]}",
                details={"status": status},
            )
        self.workflow_outputs = _dict(data.get("outputs"))
        usage = data.get("total_tokens")
        if isinstance(usage, int):
            self.usage["total_tokens"] = usage
        return []

    def final_text(self) -> str:
        """The reply: streamed text; else chatflow answer nodes; else a workflow's ``summary`` output (a JSON
        string with a ``content`` field yields that field)."""
        tail = self._think.flush() if self.remove_think else ""
        if tail:
            self.reply.append(tail)
        outputs = self.workflow_outputs
        if outputs is not None:
            summary = outputs.get("summary")
            if isinstance(summary, str) and summary:
                return _content_of(summary)
        if self.reply:
            return self.reply.text
        if self.node_answers:
            text = "\n".join(self.node_answers)
            return _strip_think(text) if self.remove_think else text
        if outputs:
            for value in outputs.values():
                if isinstance(value, str) and value:
                    return _content_of(value)
        return ""


def _content_of(value: str) -> str:
    if value.lstrip().startswith("{"):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
        content = _dict(decoded).get("content")
        if isinstance(content, str):
            return content
    return value


def _strip_think(text: str) -> str:
    think = ThinkFilter()
    return think.feed(text) + think.flush()
