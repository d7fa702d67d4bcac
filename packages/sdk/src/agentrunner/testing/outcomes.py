"""``collect``: run a runner on one context against a :class:`FakeHost` and keep what it produced."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agentrunner.context import AgentRunContext
from agentrunner.results import (
    TERMINAL_RESULT_TYPES,
    AgentRunResult,
    MessageCompletedResult,
    MessageDeltaResult,
    RunCompletedResult,
    RunFailedResult,
    StateUpdatedResult,
)
from agentrunner.runner import AgentRunner

from .fake_host import FakeCall, FakeHost

__all__ = ["RunOutcome", "StreamRuleError", "collect", "stream_problems"]


class StreamRuleError(AssertionError):
    """A runner's result stream broke a rule of the protocol (one terminal result, last; sequences...)."""


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What one run produced."""

    results: list[AgentRunResult]
    """Every result, in order."""
    calls: list[FakeCall] = field(default_factory=list[FakeCall])
    """The back-calls the run made, in order."""

    @property
    def terminal(self) -> RunCompletedResult | RunFailedResult | None:
        """The terminal result (``None`` when the stream has none)."""
        last = self.results[-1] if self.results else None
        return last if isinstance(last, RunCompletedResult | RunFailedResult) else None

    @property
    def completed(self) -> bool:
        """The run ended with ``run.completed``."""
        return isinstance(self.terminal, RunCompletedResult)

    @property
    def failure(self) -> RunFailedResult | None:
        """The ``run.failed`` result, if the run failed."""
        terminal = self.terminal
        return terminal if isinstance(terminal, RunFailedResult) else None

    @property
    def text(self) -> str:
        """The reply: the text of every ``message.completed`` (then the final message of ``run.completed``)."""
        parts = [r.data.message.text() for r in self.results if isinstance(r, MessageCompletedResult)]
        terminal = self.terminal
        if isinstance(terminal, RunCompletedResult) and terminal.data.message is not None:
            parts.append(terminal.data.message.text())
        return "".join(parts)

    @property
    def streamed(self) -> str:
        """The concatenated ``message.delta`` chunks."""
        return "".join(r.data.chunk.content or "" for r in self.results if isinstance(r, MessageDeltaResult))

    @property
    def state_updates(self) -> list[StateUpdatedResult]:
        """The ``state.updated`` results (requests to write host state, visible to the operator API)."""
        return [r for r in self.results if isinstance(r, StateUpdatedResult)]

    def types(self) -> list[str]:
        """The type of every result, in order."""
        return [r.type for r in self.results]


def stream_problems(results: Sequence[AgentRunResult], *, run_id: str) -> list[str]:
    """What is wrong with a result stream: its terminal result (exactly one, last), ``run_id`` on every
    result, strictly increasing sequences. Empty when the stream is well formed."""
    problems: list[str] = []
    terminals = [i for i, r in enumerate(results) if r.type in TERMINAL_RESULT_TYPES]
    if not terminals:
        problems.append("the stream has no terminal result (run.completed or run.failed)")
    elif len(terminals) > 1:
        problems.append(f"the stream has {len(terminals)} terminal results; exactly one is allowed")
    elif terminals[0] != len(results) - 1:
        problems.append(f"results follow the terminal result (at index {terminals[0]})")
    previous = 0
    for index, result in enumerate(results):
        if result.run_id != run_id:
            problems.append(f"result #{index} carries run_id {result.run_id!r}, not {run_id!r}")
        if result.sequence is not None:
            if result.sequence <= previous:
                problems.append(f"result #{index} has sequence {result.sequence} after {previous}")
            previous = result.sequence
    return problems


async def collect(
    runner: AgentRunner, ctx: AgentRunContext, *, host: FakeHost | None = None, check: bool = True
) -> RunOutcome:
    """Run *runner* on *ctx* against *host* (a fresh :class:`FakeHost` by default) and return its outcome.

    As the host does, each ``state.updated`` result is applied to the host's state when it arrives, and the
    run is closed after its last result (later calls are refused). With *check*, a stream that breaks the
    protocol's rules raises :class:`StreamRuleError` (see :func:`stream_problems`).
    """
    fake = host if host is not None else FakeHost()
    first_call = len(fake.calls)
    api = fake.api(ctx)
    results: list[AgentRunResult] = []
    stream = runner.run(ctx, api)
    try:
        async for result in stream:
            results.append(result)
            if isinstance(result, StateUpdatedResult):
                fake.apply(ctx.run_id, result)
    finally:
        closer = getattr(stream, "aclose", None)  # run() is an async generator, typed as an iterator
        if closer is not None:
            await closer()
        fake.close(ctx.run_id)
    if check:
        problems = stream_problems(results, run_id=ctx.run_id)
        if problems:
            raise StreamRuleError("; ".join(problems))
    return RunOutcome(results=results, calls=fake.calls[first_call:])
