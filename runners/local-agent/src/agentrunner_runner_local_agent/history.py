"""Working history: recent turns pulled with ``history.page``, bounded by a turn window and a token budget,
with older turns folded into a summary checkpoint kept in host state (the runner owns compaction).

The checkpoint lives in the conversation scope under :data:`SUMMARY_KEY`: the summary text and the id and
cursor of the newest transcript item it covers. Walking back stops at that item, so a summarised stretch is
never read again. A new checkpoint is written only when the unsummarised history outgrows the budget, and
then only half the budget of recent turns is kept verbatim, so the next turns do not compact again at once.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    APIError,
    ChatMessage,
    DeadlineExceededError,
    TextContent,
    TranscriptItem,
    UnauthorizedError,
)
from pydantic import JsonValue

from .deadline import Deadline
from .tokens import estimate_message, estimate_text

__all__ = [
    "MAX_PAGES",
    "PAGE_SIZE",
    "SUMMARY_KEY",
    "Checkpoint",
    "HistoryWindow",
    "Summarizer",
    "load_history",
    "render_item",
]

SUMMARY_KEY: Final = "local_agent.summary"
"""Conversation-scoped state key of the summary checkpoint."""
PAGE_SIZE: Final = 50
"""Items asked for per ``history.page`` call."""
MAX_PAGES: Final = 10
"""Most pages read back in one run."""
_ITEM_CHARS: Final = 4_000
_SOURCE_CHARS: Final = 24_000

Summarizer = Callable[[str | None, str], Awaitable[str | None]]
"""``(previous summary, transcript text) -> new summary`` (``None`` when it could not be made)."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A summary of the conversation up to and including one transcript item."""

    summary: str
    """The summary text."""
    item_id: str
    """Newest transcript item it covers."""
    cursor: str | None = None
    """That item's cursor (informational: cursors may be re-signed, ids are stable)."""
    updated_at: int = 0
    """Unix epoch milliseconds of the compaction."""

    def to_json(self) -> dict[str, JsonValue]:
        """The state value."""
        return {
            "summary": self.summary,
            "item_id": self.item_id,
            "cursor": self.cursor,
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_json(cls, value: JsonValue) -> Checkpoint | None:
        """A checkpoint from a state value, or ``None`` when the value is not one."""
        if not isinstance(value, dict):
            return None
        summary, item_id, cursor = value.get("summary"), value.get("item_id"), value.get("cursor")
        updated = value.get("updated_at")
        if not isinstance(summary, str) or not summary.strip() or not isinstance(item_id, str):
            return None
        return cls(
            summary=summary,
            item_id=item_id,
            cursor=cursor if isinstance(cursor, str) else None,
            updated_at=updated if isinstance(updated, int) and not isinstance(updated, bool) else 0,
        )

    def message(self) -> ChatMessage:
        """The summary as a system message."""
        return ChatMessage(role="system", content=f"Summary of the earlier conversation:\n{self.summary}")


@dataclass(slots=True)
class HistoryWindow:
    """What history the model gets this turn, and how it was chosen."""

    messages: list[ChatMessage] = field(default_factory=list[ChatMessage])
    """Summary (if any) then recent items, oldest first."""
    items: int = 0
    """Transcript items sent verbatim."""
    pages: int = 0
    """``history.page`` calls made."""
    summary_used: bool = False
    """A summary checkpoint was sent."""
    compacted: bool = False
    """A new checkpoint was written this turn."""
    error: str | None = None
    """Code of a ``history.page`` failure that cut the walk short (the turn goes on with what was read)."""


def render_item(item: TranscriptItem) -> ChatMessage | None:
    """A transcript item as a chat message; ``None`` for items a model should not see (tool traffic, empty)."""
    if item.item_type in ("tool_call", "tool_result") or item.role == "tool":
        return None
    pieces: list[str] = []
    if item.content:
        pieces.append(item.content)
    elif item.contents:
        pieces.extend(c.text for c in item.contents if isinstance(c, TextContent))
    for c in item.contents:
        if not isinstance(c, TextContent):
            pieces.append(f"[{c.type}]")
    text = "\n".join(p for p in pieces if p)[:_ITEM_CHARS]
    if not text.strip():
        return None
    if item.role == "event" or item.item_type == "event":
        # Non-message events are context, never something the user or the assistant said.
        return ChatMessage(role="system", content=f"[earlier event {item.event_type or 'unknown'}] {text}")
    if item.role == "system":
        return ChatMessage(role="system", content=text)
    return ChatMessage(role="user" if item.role == "user" else "assistant", content=text)


def _transcript(items: Sequence[tuple[TranscriptItem, ChatMessage]]) -> str:
    lines: list[str] = []
    for _, message in items:
        who = {"user": "User", "assistant": "Assistant"}.get(message.role, "Note")
        lines.append(f"{who}: {message.content if isinstance(message.content, str) else ''}")
    text = "\n".join(lines)
    if len(text) > _SOURCE_CHARS:
        text = "…\n" + text[-_SOURCE_CHARS:]
    return text


def _fit(costs: Sequence[int], budget: int) -> int:
    """How many of the newest items fit in *budget*."""
    used = kept = 0
    for cost in reversed(costs):
        if used + cost > budget:
            break
        used += cost
        kept += 1
    return kept


async def _read_checkpoint(api: AgentRunAPI, deadline: Deadline) -> tuple[Checkpoint | None, int | None]:
    """The stored checkpoint and its state version (``None`` when conversation state is out of reach)."""
    try:
        async with deadline.scope():
            value = await api.state.get("conversation", SUMMARY_KEY)
    except DeadlineExceededError:
        raise
    except APIError:
        # No conversation state for this binding: history still works, compaction just is not kept.
        return None, None
    return (Checkpoint.from_json(value.value) if value.exists else None), value.version


async def _write_checkpoint(
    api: AgentRunAPI, checkpoint: Checkpoint, version: int, deadline: Deadline
) -> bool:
    try:
        async with deadline.scope():
            # Compare-and-set: a concurrent run of the same conversation that compacted first keeps its checkpoint.
            await api.state.set("conversation", SUMMARY_KEY, checkpoint.to_json(), expected_version=version)
    except DeadlineExceededError:
        raise
    except APIError:
        return False
    return True


async def load_history(
    ctx: AgentRunContext,
    api: AgentRunAPI,
    *,
    turns: int,
    budget: int,
    deadline: Deadline,
    summarize: Summarizer | None = None,
) -> HistoryWindow:
    """Read back up to *turns* user turns newer than the checkpoint, keep what fits *budget* tokens, and
    compact the rest into a new checkpoint when *summarize* is given and state is writable."""
    window = HistoryWindow()
    access = ctx.context
    if turns <= 0 or budget <= 0 or not access.available_apis.history_page:
        return window
    if access.latest_cursor is None and not access.has_history_before:
        return window
    checkpoint, version = None, None
    if access.available_apis.state and ctx.conversation is not None and ctx.conversation.conversation_id:
        checkpoint, version = await _read_checkpoint(api, deadline)

    newest_first: list[tuple[TranscriptItem, ChatMessage]] = []
    cursor, user_turns, done = access.latest_cursor, 0, False
    while not done and window.pages < MAX_PAGES:
        try:
            async with deadline.scope():
                page = await api.history.page(
                    conversation_id=access.conversation_id,
                    thread_id=access.thread_id,
                    before_cursor=cursor,
                    limit=PAGE_SIZE,
                    direction="backward",
                )
        except (UnauthorizedError, DeadlineExceededError):
            raise
        except APIError as exc:
            # Answering without (some) history beats not answering; the metadata says what happened.
            window.error = exc.code
            break
        window.pages += 1
        for item in reversed(page.items):
            if checkpoint is not None and item.item_id == checkpoint.item_id:
                done = True
                break
            if item.event_id is not None and item.event_id == ctx.event.event_id:
                continue  # the current message itself, when a host already recorded it
            message = render_item(item)
            if message is None:
                continue
            newest_first.append((item, message))
            if item.role == "user":
                user_turns += 1
                if user_turns >= turns:
                    done = True
                    break
        if not page.has_more or page.next_cursor is None:
            break
        cursor = page.next_cursor

    items = list(reversed(newest_first))
    costs = [estimate_message(m) for _, m in items]
    summary_cost = estimate_message(checkpoint.message()) if checkpoint else 0
    kept = _fit(costs, max(0, budget - summary_cost))
    if kept < len(items) and summarize is not None and version is not None:
        keep_verbatim = _fit(costs, budget // 2)
        folded = items[: len(items) - keep_verbatim]
        summary = await summarize(checkpoint.summary if checkpoint else None, _transcript(folded))
        if summary and summary.strip():
            summary = _clip_tokens(summary.strip(), max(1, budget // 2))
            newest = folded[-1][0]
            checkpoint = Checkpoint(
                summary=summary,
                item_id=newest.item_id,
                cursor=newest.cursor,
                updated_at=time.time_ns() // 1_000_000,
            )
            window.compacted = await _write_checkpoint(api, checkpoint, version, deadline)
            summary_cost = estimate_message(checkpoint.message())
            kept = min(keep_verbatim, _fit(costs, max(0, budget - summary_cost)))
    if checkpoint is not None and summary_cost <= budget:
        window.messages.append(checkpoint.message())
        window.summary_used = True
    recent = items[len(items) - kept :] if kept else []
    window.messages.extend(m for _, m in recent)
    window.items = len(recent)
    return window


def _clip_tokens(text: str, tokens: int) -> str:
    while estimate_text(text) > tokens and len(text) > 16:
        text = text[: int(len(text) * 0.8)]
    return text
