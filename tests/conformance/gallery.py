"""A gallery of deliberately broken runners, each breaking exactly one requirement of Protocol v1.

``BROKEN`` maps each runner to the one requirement id the conformance check must fail it on.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any, ClassVar, Final

from agentrunner import (
    MAX_STATE_VALUE_BYTES,
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerCapabilities,
    AgentRunnerManifest,
    AgentRunResult,
    APIError,
    DeadlineExceededError,
    I18nObject,
    ImageContent,
    UnauthorizedError,
)

__all__ = ["BROKEN"]


def _manifest(name: str, **capabilities: bool) -> AgentRunnerManifest:
    return AgentRunnerManifest(
        id=f"plugin:gallery/broken/{name}",
        name=name,
        label=I18nObject(en_US=name),
        capabilities=AgentRunnerCapabilities(**capabilities),
    )


def _text(ctx: AgentRunContext) -> str:
    return "".join(ctx.input.text_parts()) or ctx.event.event_type


def _state_reachable(ctx: AgentRunContext) -> bool:
    return (
        ctx.context.available_apis.state
        and ctx.conversation is not None
        and ctx.conversation.conversation_id is not None
    )


class NoTerminal(AgentRunner):
    """Forgets to end the run."""

    manifest = _manifest("no-terminal")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        yield self.emitter(ctx).message(_text(ctx))


class TwoTerminals(AgentRunner):
    """Completes the run twice."""

    manifest = _manifest("two-terminals")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.complete(_text(ctx))
        yield out.complete(_text(ctx))


class OutputAfterTerminal(AgentRunner):
    """Sends a message after completing."""

    manifest = _manifest("output-after-terminal")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.complete(_text(ctx))
        yield out.message("one more thing")


class BadSequence(AgentRunner):
    """Repeats a sequence number."""

    manifest = _manifest("bad-sequence")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.message(_text(ctx))
        yield out.complete().model_copy(update={"sequence": 1})


class UnpairedToolCall(AgentRunner):
    """Reports a tool call that never completes."""

    manifest = _manifest("unpaired-tool-call")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.tool_started("call-1", "search", {"q": _text(ctx)})
        yield out.complete(_text(ctx))


class UnauthorizedBackCall(AgentRunner):
    """Calls a model it was never granted (and handles the refusal)."""

    manifest = _manifest("unauthorized-back-call")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        try:
            answer = await api.models.invoke("gpt-4o", [{"role": "user", "content": _text(ctx)}])
            text = answer.message.content if isinstance(answer.message.content, str) else _text(ctx)
        except APIError:
            text = _text(ctx)
        yield out.complete(text)


class CrashesOnImages(AgentRunner):
    """Declares multimodal input but raises on the first image."""

    manifest = _manifest("crashes-on-images", multimodal_input=True)

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        if any(isinstance(c, ImageContent) for c in ctx.input.contents):
            raise ValueError("cannot decode image")
        yield self.emitter(ctx).complete(_text(ctx))


class IgnoresCancel(AgentRunner):
    """Declares interrupt but swallows the first cancel and carries on."""

    manifest = _manifest("ignores-cancel", interrupt=True)

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        try:
            await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            await asyncio.sleep(5)  # a second cancel ends this
        yield self.emitter(ctx).complete(_text(ctx))


class IgnoresEveryCancel(AgentRunner):
    """Declares interrupt, but answers a cancel with a long clean-up that swallows every further cancel."""

    manifest = _manifest("ignores-every-cancel", interrupt=True)

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        try:
            await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            ends = time.monotonic() + 30
            while (left := ends - time.monotonic()) > 0:
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.sleep(left)
        yield self.emitter(ctx).complete(_text(ctx))


class EmptySuccessOnUnauthorized(AgentRunner):
    """Reads state and, when the host refuses, reports success with an empty message."""

    manifest = _manifest("empty-success-on-unauthorized")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        if _state_reachable(ctx):
            try:
                await api.state.get("conversation", "topic")
            except UnauthorizedError:
                yield out.complete("")
                return
            except APIError:
                pass
        yield out.complete(_text(ctx))


class LeaksStateAcrossRuns(AgentRunner):
    """Counts turns on the instance instead of in host state."""

    manifest = _manifest("leaks-state-across-runs")

    def __init__(self) -> None:
        self.turns = 0

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        self.turns += 1
        yield self.emitter(ctx).complete(f"turn {self.turns}: {_text(ctx)}")


class LiesAboutStreaming(AgentRunner):
    """Streams deltas without declaring streaming."""

    manifest = _manifest("lies-about-streaming")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.delta(_text(ctx))
        yield out.complete(_text(ctx))


class OversizeState(AgentRunner):
    """Asks the host to store a state value over 256 KiB."""

    manifest = _manifest("oversize-state")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.state("conversation", "transcript.copy", "x" * (MAX_STATE_VALUE_BYTES + 1))
        yield out.complete(_text(ctx))


class SwallowsDeadline(AgentRunner):
    """Catches DeadlineExceededError and retries forever."""

    manifest = _manifest("swallows-deadline")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        deadline = ctx.runtime.deadline_at
        while deadline is not None:
            try:
                if _state_reachable(ctx):
                    await api.state.get("conversation", "topic")
                elif time.time() >= deadline:
                    raise DeadlineExceededError("deadline passed")
                break
            except DeadlineExceededError:
                await asyncio.sleep(0.01)
            except APIError:
                break
        yield self.emitter(ctx).complete(_text(ctx))


class CrashesOnEvents(AgentRunner):
    """Raises on any event that is not a message."""

    manifest = _manifest("crashes-on-events")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        if ctx.event.event_type not in {"message.received", "api.invoked"}:
            raise KeyError(ctx.event.event_type)
        yield self.emitter(ctx).complete(_text(ctx))


class LetsAPIErrorsEscape(AgentRunner):
    """Reads state without handling back-call errors."""

    manifest = _manifest("lets-api-errors-escape")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        if _state_reachable(ctx):
            await api.state.get("conversation", "topic")
        yield self.emitter(ctx).complete(_text(ctx))


class EmptySuccess(AgentRunner):
    """Completes without ever saying anything."""

    manifest = _manifest("empty-success")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        yield self.emitter(ctx).complete()


class WrongRunId(AgentRunner):
    """Stamps its results with a run id of its own."""

    manifest = _manifest("wrong-run-id")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        yield self.emitter(ctx.model_copy(update={"run_id": "my-run"})).complete(_text(ctx))


class UndeclaredPlatformAction(AgentRunner):
    """Requests a platform action without declaring platform_api."""

    manifest = _manifest("undeclared-platform-action")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.action(
            "message.react",
            {"message_id": "m1"},
            payload={"emoji": "+1"},
            idempotency_key=f"{ctx.run_id}:react",
        )
        yield out.complete(_text(ctx))


class LateBackCall(AgentRunner):
    """Leaves a background task that calls the host after the run ended."""

    manifest = _manifest("late-back-call")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        async def later() -> Any:
            await asyncio.sleep(0)
            try:
                return await api.events.get(ctx.event.event_id)
            except APIError:
                return None

        _background.add(asyncio.create_task(later()))
        yield self.emitter(ctx).complete(_text(ctx))


_background: set[asyncio.Task[Any]] = set()


class Crosstalk(AgentRunner):
    """Keeps the events of runs in flight in a class-level list, and mentions another one in its reply."""

    manifest = _manifest("crosstalk")
    in_flight: ClassVar[list[str]] = []

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        mine = ctx.event.event_id
        Crosstalk.in_flight.append(mine)
        try:
            await asyncio.sleep(0.005)
            others = [event for event in Crosstalk.in_flight if event != mine]
        finally:
            Crosstalk.in_flight.remove(mine)
        reply = _text(ctx) + (f" (also serving {others[0]})" if others else "")
        yield self.emitter(ctx).complete(reply)


class CompletesWhenCancelled(AgentRunner):
    """Declares interrupt, but answers a cancel with a successful completion."""

    manifest = _manifest("completes-when-cancelled", interrupt=True)

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        try:
            await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            yield out.complete("done anyway")
            return
        yield out.complete(_text(ctx))


class MismatchedDeltas(AgentRunner):
    """Streams one text and completes with another."""

    manifest = _manifest("mismatched-deltas", streaming=True)

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.delta("draft: ")
        yield out.complete(_text(ctx))


class InventsResultTypes(AgentRunner):
    """Sends a result type Protocol v1 does not have."""

    manifest = _manifest("invents-result-types")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        yield {"type": "thought.delta", "run_id": ctx.run_id, "data": {"text": "hmm"}}
        yield self.emitter(ctx).complete(_text(ctx))


class InvalidResultData(AgentRunner):
    """Sends a state.updated with a scope that does not exist."""

    manifest = _manifest("invalid-result-data")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        yield {
            "type": "state.updated",
            "run_id": ctx.run_id,
            "data": {"scope": "galaxy", "key": "k", "value": 1},
        }
        yield self.emitter(ctx).complete(_text(ctx))


class InvalidBackCallParams(AgentRunner):
    """Reads state without naming the key (and handles the refusal)."""

    manifest = _manifest("invalid-back-call-params")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        with contextlib.suppress(APIError):
            await api.call_raw("state.get", {"scope": "conversation"})
        yield self.emitter(ctx).complete(_text(ctx))


class ActionWithoutKey(AgentRunner):
    """Declares platform_api but requests an action without an idempotency key."""

    manifest = _manifest("action-without-key", platform_api=True)

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        action = out.action("message.react", {"message_id": "m1"}, idempotency_key="k")
        yield action.model_copy(update={"data": action.data.model_copy(update={"idempotency_key": None})})
        yield out.complete(_text(ctx))


class UndeclaredToolCalls(AgentRunner):
    """Calls the tools it was granted without declaring tool_calling."""

    manifest = _manifest("undeclared-tool-calls")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        for tool in ctx.resources.tools:
            if "call" in tool.operations:
                with contextlib.suppress(APIError):
                    await api.tools.call(tool.tool_name, {"q": _text(ctx)})
        yield self.emitter(ctx).complete(_text(ctx))


BROKEN: Final[dict[type[AgentRunner], str]] = {
    NoTerminal: "result.terminal.exactly-one",
    TwoTerminals: "result.terminal.exactly-one",
    OutputAfterTerminal: "result.terminal.last",
    BadSequence: "result.sequence.strictly-increasing",
    UnpairedToolCall: "result.tool-calls.paired",
    UnauthorizedBackCall: "backcall.authorized",
    CrashesOnImages: "capability.multimodal-input.no-crash",
    IgnoresCancel: "cancel.stops-within-grace",
    IgnoresEveryCancel: "cancel.stops-within-grace",
    EmptySuccessOnUnauthorized: "backcall.errors-reported",
    LeaksStateAcrossRuns: "isolation.no-instance-state",
    LiesAboutStreaming: "capability.streaming.undeclared-deltas",
    OversizeState: "result.state-updated.valid",
    SwallowsDeadline: "deadline.run-ends",
    CrashesOnEvents: "run.no-unhandled-exception",
    LetsAPIErrorsEscape: "backcall.errors-handled",
    EmptySuccess: "result.output.present",
    WrongRunId: "result.run-id.matches",
    UndeclaredPlatformAction: "capability.platform-api.undeclared-actions",
    LateBackCall: "backcall.only-while-live",
    Crosstalk: "isolation.concurrent-runs",
    CompletesWhenCancelled: "cancel.reports-cancelled",
    MismatchedDeltas: "capability.streaming.deltas-match-message",
    InventsResultTypes: "result.type.known",
    InvalidResultData: "result.schema.valid",
    InvalidBackCallParams: "backcall.params-valid",
    ActionWithoutKey: "result.action.idempotency-key",
    UndeclaredToolCalls: "capability.tool-calling.undeclared-calls",
}
"""Each broken runner and the one requirement it breaks."""

OUT_OF_PROCESS: Final[tuple[type[AgentRunner], ...]] = (
    UnpairedToolCall,
    LiesAboutStreaming,
    LeaksStateAcrossRuns,
    IgnoresEveryCancel,
    EmptySuccessOnUnauthorized,
)
"""The patterns also checked in a child process through the wire (tests/conformance/test_gallery.py)."""
