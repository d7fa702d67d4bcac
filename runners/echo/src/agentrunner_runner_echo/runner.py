"""The echo runner: the smallest complete Protocol v1 runner.

It streams the input text back (deltas when the delivery surface streams, one message otherwise), keeps a
per-conversation turn counter in host state, and ends with exactly one terminal result. It is the reference
system the conformance kit runs against, and the subject of ``docs/tutorial-first-runner.md``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerCapabilities,
    AgentRunnerContextPolicy,
    AgentRunnerManifest,
    AgentRunResult,
    APIError,
    DynamicFormItemSchema,
    I18nObject,
)

__all__ = ["TURN_KEY", "EchoRunner"]

TURN_KEY: Final = "echo.turns"
"""Conversation-scoped state key holding how many turns the runner answered in a conversation.

The count is read with ``state.get`` and written back with a ``state.updated`` result, last writer wins:
runs of one conversation that overlap read the same count and count once (2,000 messages over 20
conversations, 200 at a time, through ``serve`` left each conversation's count at 45-61 of its 100 turns). It
is a demonstration, not a ledger; the tutorial's runner
writes with compare-and-set instead (``api.state.set(..., expected_version=...)``), which refuses the second
write rather than losing it."""

_MESSAGE_EVENTS: Final = frozenset({"message.received", "api.invoked"})
_CHUNK: Final = 16


class EchoRunner(AgentRunner):
    """Echoes the user's text back; answers other events with a short note naming the event."""

    manifest = AgentRunnerManifest(
        id="plugin:agentrunner/echo/default",
        name="default",
        label=I18nObject(en_US="Echo", zh_Hans="回声"),
        description=I18nObject(
            en_US="Streams your message back and counts the turns of the conversation.",
            zh_Hans="原样回显消息，并记录会话轮数。",
        ),
        capabilities=AgentRunnerCapabilities(streaming=True, interrupt=True),
        context=AgentRunnerContextPolicy(
            supports_history_pull=False,
            supports_artifact_pull=False,
            owns_compaction=False,
            wants_static_context_refs=False,
        ),
        config_schema=[
            DynamicFormItemSchema(
                name="prefix",
                label=I18nObject(en_US="Reply prefix", zh_Hans="回复前缀"),
                type="string",
                default="",
                description=I18nObject(en_US="Text put before every echoed reply."),
            )
        ],
    )

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        """Echo the input (see the module docstring)."""
        out = self.emitter(ctx)
        reply = _reply(ctx)
        if reply is None:
            yield out.fail("input.empty", "there is nothing to echo: the message has no text or attachments")
            return

        turn = await _previous_turns(ctx, api)
        if turn is not None:
            yield out.state("conversation", TURN_KEY, turn + 1)

        if ctx.delivery.supports_streaming:
            for start in range(0, len(reply), _CHUNK):
                yield out.delta(reply[start : start + _CHUNK])
        yield out.message(reply)
        yield out.complete(
            usage={"input_chars": len(reply), "output_chars": len(reply), "turn": (turn or 0) + 1}
        )


def _reply(ctx: AgentRunContext) -> str | None:
    """The reply text, or ``None`` when a message carries nothing to echo."""
    if ctx.event.event_type not in _MESSAGE_EVENTS:
        # A non-message event is never passed off as something the user said: name it instead.
        return f"[event {ctx.event.event_type}]"
    text = "".join(ctx.input.text_parts())
    attachments = len(ctx.input.attachments) + sum(1 for c in ctx.input.contents if c.type != "text")
    if not text and not attachments:
        return None
    prefix = ctx.config.get("prefix")
    reply = f"{prefix if isinstance(prefix, str) else ''}{text}"
    if attachments:
        reply += f" [{attachments} attachment{'s' if attachments != 1 else ''}]"
    return reply


async def _previous_turns(ctx: AgentRunContext, api: AgentRunAPI) -> int | None:
    """Turns answered so far in this conversation, or ``None`` when host state is out of reach."""
    if (
        not ctx.context.available_apis.state
        or ctx.conversation is None
        or ctx.conversation.conversation_id is None
    ):
        return None
    try:
        value = await api.state.get("conversation", TURN_KEY)
    except APIError:
        # State is a nicety: an unauthorized, slow or failing host must not cost the user the reply.
        return None
    count = value.value
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        return count
    return 0
