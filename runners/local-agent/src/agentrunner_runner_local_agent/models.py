"""The model chain: the configured primary and fallbacks that the run may use, called with fallback.

A model that fails with a back-call error is left for the next one; once a model answered, later calls of the
run stay on it (the tool loop does not hop back to a model that already failed). A model refused as
``unauthorized`` or a passed deadline ends the run instead: those are not the model's fault.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from agentrunner import (
    AgentResources,
    AgentRunAPI,
    APIError,
    ChatMessage,
    DeadlineExceededError,
    ModelResource,
    ModelResponse,
    ModelToolCall,
    ModelUsage,
    UnauthorizedError,
)
from pydantic import JsonValue

from .deadline import Deadline
from .errors import RunFailure
from .think import ThinkFilter

__all__ = ["ModelChain", "RoundOutput", "granted_chain"]


def granted_chain(wanted: Sequence[str], resources: AgentResources) -> list[ModelResource]:
    """The configured chat models, in order, that ``ctx.resources`` grants for ``invoke`` or ``stream``."""
    chain: list[ModelResource] = []
    for model_id in wanted:
        model = resources.model(model_id)
        if model is None or model.model_type not in ("llm", "chat"):
            continue
        if {"invoke", "stream"} & set(model.operations):
            chain.append(model)
    return chain


def _tools_for(model: ModelResource, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """*tools*, unless the model lists its capabilities without ``tool_calling`` (providers refuse those)."""
    if tools and model.capabilities and "tool_calling" not in model.capabilities:
        return None
    return tools


@dataclass(slots=True)
class RoundOutput:
    """What one model call produced."""

    model_id: str = ""
    """The model that answered."""
    text: str = ""
    """Visible text (after ``<think>`` removal when enabled)."""
    tool_calls: list[ModelToolCall] = field(default_factory=list[ModelToolCall])
    """Tool calls the model asked for."""
    finish_reason: str | None = None
    """Why it stopped."""


def _usage_json(usage: ModelUsage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens or usage.input_tokens + usage.output_tokens,
    }


class ModelChain:
    """The models of one run with the failures seen so far; one instance per run, never shared."""

    def __init__(self, models: Sequence[ModelResource], *, remove_think: bool = False) -> None:
        if not models:
            raise ValueError("a model chain needs at least one model")
        self.models = list(models)
        """Primary first, then fallbacks."""
        self.index = 0
        """Position of the model in use."""
        self.remove_think = remove_think
        """Strip ``<think>`` blocks from answers."""
        self.failures: list[dict[str, JsonValue]] = []
        """One entry per failed model call (model id, error code, message)."""
        self.calls = 0
        """Successful model calls."""
        self.usage: dict[str, int] = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        """Summed token usage of the successful calls."""

    @property
    def current(self) -> ModelResource:
        """The model in use."""
        return self.models[self.index]

    @property
    def fallback_used(self) -> bool:
        """Whether a model after the primary is in use."""
        return self.index > 0

    def min_context_window(self) -> tuple[int | None, int | None]:
        """The smallest known context window of the chain and the output cap of that model."""
        known = [m for m in self.models if m.context_window]
        if not known:
            return None, None
        smallest = min(known, key=lambda m: m.context_window or 0)
        return smallest.context_window, smallest.max_output_tokens

    def _failed(self, model: ModelResource, exc: APIError) -> None:
        if isinstance(exc, (UnauthorizedError, DeadlineExceededError)):
            raise exc
        self.failures.append({"model_id": model.model_id, "code": exc.code, "message": exc.message[:300]})
        if self.index + 1 >= len(self.models):
            raise RunFailure(
                "model.error",
                f"every configured model failed; last error from {model.model_id}: {exc.code}: {exc.message}",
                retryable=exc.retryable or exc.code in ("rate_limited", "runtime_error"),
                details={"failures": list(self.failures)},
            )
        self.index += 1

    def _account(self, usage: ModelUsage | None) -> None:
        self.calls += 1
        if usage is None:
            return
        for key, value in _usage_json(usage).items():
            self.usage[key] += value

    def _visible(self, text: str | None) -> str:
        if not text:
            return ""
        if not self.remove_think:
            return text
        think = ThinkFilter()
        return think.feed(text) + think.flush()

    async def invoke(
        self,
        api: AgentRunAPI,
        messages: Sequence[ChatMessage],
        *,
        deadline: Deadline,
        tools: list[dict[str, Any]] | None = None,
    ) -> RoundOutput:
        """One completion, falling back along the chain."""
        while True:
            model = self.current
            if "invoke" not in model.operations:
                # Granted for streaming only: stream it and keep the text instead of showing it piece by piece.
                output = RoundOutput()
                async with aclosing(
                    self.stream(api, messages, output, deadline=deadline, tools=tools)
                ) as pieces:
                    async for _ in pieces:
                        pass
                return output
            try:
                async with deadline.scope():
                    response: ModelResponse = await api.models.invoke(
                        model.model_id, messages, tools=_tools_for(model, tools)
                    )
            except APIError as exc:
                self._failed(model, exc)
                continue
            self._account(response.usage)
            content = response.message.content
            text = content if isinstance(content, str) else None
            if isinstance(content, list):
                text = "".join(getattr(part, "text", "") for part in content)
            return RoundOutput(
                model_id=model.model_id,
                text=self._visible(text),
                tool_calls=list(response.message.tool_calls),
                finish_reason=response.finish_reason,
            )

    async def stream(
        self,
        api: AgentRunAPI,
        messages: Sequence[ChatMessage],
        output: RoundOutput,
        *,
        deadline: Deadline,
        tools: list[dict[str, Any]] | None = None,
    ) -> AsyncGenerator[str]:
        """A streamed completion: yields visible text pieces and fills *output*.

        A model that fails before any text was shown is left for the next one; once text reached the user a
        failure ends the run (a second model cannot take back what the first one said).
        """
        while True:
            model = self.current
            if "stream" not in model.operations:
                answer = await self.invoke(api, messages, deadline=deadline, tools=tools)
                output.model_id, output.tool_calls = answer.model_id, answer.tool_calls
                output.finish_reason = answer.finish_reason
                if answer.text:
                    output.text += answer.text
                    yield answer.text
                return
            think = ThinkFilter() if self.remove_think else None
            shown = False
            usage: ModelUsage | None = None
            chunks = aiter(api.models.stream(model.model_id, messages, tools=_tools_for(model, tools)))
            try:
                while True:
                    try:
                        async with deadline.scope():
                            chunk = await anext(chunks)
                    except StopAsyncIteration:
                        break
                    if chunk.tool_calls:
                        output.tool_calls.extend(chunk.tool_calls)
                    if chunk.finish_reason:
                        output.finish_reason = chunk.finish_reason
                    if chunk.usage is not None:
                        usage = chunk.usage
                    piece = chunk.delta or ""
                    if think is not None:
                        piece = think.feed(piece)
                    if piece:
                        shown = True
                        output.text += piece
                        yield piece
            except APIError as exc:
                if shown:
                    if isinstance(exc, (UnauthorizedError, DeadlineExceededError)):
                        raise
                    self.failures.append(
                        {"model_id": model.model_id, "code": exc.code, "message": exc.message}
                    )
                    raise RunFailure(
                        "model.error",
                        f"{model.model_id} failed in the middle of its answer: {exc.code}: {exc.message}",
                        retryable=True,
                        details={"failures": list(self.failures)},
                    ) from exc
                output.tool_calls.clear()
                output.finish_reason = None
                self._failed(model, exc)
                continue
            finally:
                closer = getattr(chunks, "aclose", None)
                if closer is not None:
                    await closer()
            if think is not None:
                rest = think.flush()
                if rest:
                    output.text += rest
                    yield rest
            output.model_id = model.model_id
            self._account(usage)
            return
