"""``LocalAgentRunner``: an agent that lives entirely on host infrastructure, reached through the public API.

One run: read the binding config → build the user message (images kept, text files inlined) → retrieve from
the selected knowledge bases (optionally reranked) → pull recent history within a turn window and a token
budget, compacting older turns into a summary checkpoint in host state → call the model chain (primary, then
fallbacks) with the granted tools, looping over tool calls → stream or send the answer → ``run.completed``
with usage and monitoring metadata. Everything it touches is in ``ctx.resources``; nothing is kept on the
instance between runs.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Final

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunResult,
    APIError,
    ChatMessage,
    DeadlineExceededError,
    ModelToolCall,
    ResultEmitter,
    TextContent,
    UnauthorizedError,
)
from agentrunner import codec as json
from pydantic import JsonValue

from .config import LocalAgentConfig
from .deadline import Deadline
from .errors import RunFailure
from .history import HistoryWindow, load_history
from .inputs import UserInput, build_user_input
from .knowledge import Retrieval, granted_bases, granted_rerank_model, retrieve
from .manifest import MANIFEST
from .models import ModelChain, RoundOutput, granted_chain
from .tokens import estimate_messages, estimate_text
from .tools import Toolbox, preview, result_text

__all__ = ["LocalAgentRunner"]

_SUMMARY_INSTRUCTIONS: Final = (
    "You keep a running summary of a conversation between a user and an assistant. Merge the earlier summary "
    "(if any) with the new conversation into one concise summary that keeps names, facts, numbers, decisions, "
    "preferences and open questions. Write only the summary, in the conversation's language."
)
_DEFAULT_OUTPUT_RESERVE: Final = 1024


class LocalAgentRunner(AgentRunner):
    """The official ``local-agent`` runner (``plugin:langbot/local-agent/default``)."""

    manifest = MANIFEST

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        """Answer one event (see the module docstring)."""
        out = self.emitter(ctx)
        turn = _Turn(ctx, api, out)
        try:
            # aclosing: when the host stops consuming, the nested streams close now (and release their back-calls).
            async with aclosing(turn.run()) as results:
                async for result in results:
                    yield result
        except RunFailure as failure:
            yield out.fail(
                failure.code,
                failure.message,
                retryable=failure.retryable,
                details=turn.details(failure.details),
            )
        except UnauthorizedError as exc:
            yield out.fail(
                "unauthorized",
                f"the host refused a resource outside this run's grant: {exc.message}",
                details=turn.details({}),
            )
        except (DeadlineExceededError, TimeoutError):
            yield out.fail(
                "deadline_exceeded",
                "the run did not finish within its time limit",
                retryable=True,
                details=turn.details({}),
            )
        except APIError as exc:
            yield out.fail(exc.code, exc.message, retryable=exc.retryable, details=turn.details({}))


class _Turn:
    """Everything one run works with; created per run, so concurrent runs never share anything."""

    def __init__(self, ctx: AgentRunContext, api: AgentRunAPI, out: ResultEmitter) -> None:
        self.ctx, self.api, self.out = ctx, api, out
        self.config = LocalAgentConfig.from_mapping(ctx.config)
        """The binding's config, read once."""
        self.deadline = Deadline(
            host_deadline=ctx.runtime.deadline_at, timeout_seconds=self.config.timeout_seconds
        )
        """The earlier of the host's deadline and ``timeout-seconds``."""
        self.started = time.monotonic()
        """When the run started (for ``latency_ms``)."""
        self.chain: ModelChain | None = None
        """The granted models; ``None`` until the config is checked."""
        self.retrieval = Retrieval()
        """What knowledge retrieval found."""
        self.history = HistoryWindow()
        """The history sent to the model."""
        self.user = UserInput()
        """The user message's parts."""
        self.history_budget = 0
        """Tokens of history allowed this turn."""
        self.tool_rounds = 0
        """Model/tool round trips made."""
        self.tool_calls = 0
        """Tool calls the model asked for."""
        self.tool_errors = 0
        """Tool calls that failed or were refused."""

    # -- the run -----------------------------------------------------------------------------------------

    async def run(self) -> AsyncGenerator[AgentRunResult]:
        ctx, api, out, config = self.ctx, self.api, self.out, self.config
        if not config.model_chain:
            raise RunFailure("config.missing", "no model is configured: set the 'model' field of the binding")
        models = granted_chain(config.model_chain, ctx.resources)
        if not models:
            raise RunFailure(
                "config.missing",
                "none of the configured models is granted to this run",
                details={"configured": list(config.model_chain)},
            )

        self.user = await build_user_input(ctx, api, deadline=self.deadline)
        if not self.user.parts:
            raise RunFailure("input.empty", "the message has no text, image or file to answer")
        if self.user.images:
            # A model that lists its capabilities without "vision" cannot read the images; unknown is trusted.
            models = [m for m in models if not m.capabilities or "vision" in m.capabilities]
            if not models:
                raise RunFailure(
                    "input.unsupported",
                    "the message has images but none of the configured models accepts image input",
                )
        self.chain = chain = ModelChain(models, remove_think=config.remove_think)

        bases = granted_bases(config.knowledge_bases, ctx.resources)
        if bases:
            self.retrieval = await retrieve(
                api,
                self.user.query_text(),
                bases=bases,
                top_k=config.retrieval_top_k,
                rerank_model=granted_rerank_model(config.rerank_model, ctx.resources),
                rerank_top_k=config.rerank_top_k,
                deadline=self.deadline,
            )
            knowledge = self.retrieval.as_text()
            if knowledge is not None:
                # Retrieved text is one more text part, put first: the input's images and files stay as they are.
                self.user.parts.insert(0, TextContent(text=knowledge))

        toolbox = await self._toolbox()
        messages = [ChatMessage(role=m.role, content=m.content) for m in config.prompt]
        user_message = ChatMessage(role="user", content=self.user.content())
        self.history_budget = self._history_budget([*messages, user_message], toolbox)
        self.history = await load_history(
            ctx,
            api,
            turns=config.history_turns,
            budget=self.history_budget,
            deadline=self.deadline,
            summarize=self._summarize,
        )
        messages += [*self.history.messages, user_message]

        streaming = ctx.delivery.supports_streaming and MANIFEST.capabilities.streaming
        texts: list[str] = []
        finish_reason = "stop"
        while True:
            offer = toolbox.schemas() if toolbox and self.tool_rounds < config.max_tool_rounds else None
            if streaming:
                output = RoundOutput()
                separated = not any(texts)
                pieces = chain.stream(api, messages, output, deadline=self.deadline, tools=offer)
                async with aclosing(pieces):
                    async for piece in pieces:
                        if not separated:
                            separated = True
                            yield out.delta("\n\n")
                        yield out.delta(piece)
            else:
                output = await chain.invoke(api, messages, deadline=self.deadline, tools=offer)
            texts.append(output.text)
            finish_reason = output.finish_reason or "stop"
            calls = output.tool_calls if offer else []
            if not calls:
                break
            self.tool_rounds += 1
            calls = [
                c.model_copy(update={"id": c.id or f"call_{self.tool_rounds}_{i}"})
                for i, c in enumerate(calls)
            ]
            messages.append(ChatMessage(role="assistant", content=output.text or None, tool_calls=calls))
            for call in calls:
                async with aclosing(self._call_tool(toolbox, call, messages)) as tool_results:
                    async for result in tool_results:
                        yield result

        final = "\n\n".join(t for t in texts if t)
        if not final.strip():
            raise RunFailure(
                "model.empty_output",
                "the model finished without any text to send",
                details={"finish_reason": finish_reason},
            )
        yield out.message(final)
        completed = out.complete(
            finish_reason="stop" if finish_reason == "tool_calls" else finish_reason, usage=self._usage()
        )
        yield completed.model_copy(update={"metadata": self.details({})})

    # -- pieces ------------------------------------------------------------------------------------------

    async def _toolbox(self) -> Toolbox:
        toolbox = Toolbox.from_resources(self.ctx.resources)
        for tool in toolbox.needs_detail():
            try:
                async with self.deadline.scope():
                    detail = await self.api.tools.get_detail(tool.tool_name)
            except (UnauthorizedError, DeadlineExceededError):
                raise
            except APIError:
                continue  # the tool is still offered, with an open argument schema
            toolbox.update(
                tool.model_copy(
                    update={
                        "description": detail.description or tool.description,
                        "parameters": detail.parameters,
                    }
                )
            )
        return toolbox

    def _history_budget(self, fixed: list[ChatMessage], toolbox: Toolbox) -> int:
        """The configured history budget, cut to what the smallest context window of the chain leaves."""
        assert self.chain is not None
        budget = self.config.history_token_budget
        window, output_cap = self.chain.min_context_window()
        if window is None:
            return budget
        reserve = min(output_cap or _DEFAULT_OUTPUT_RESERVE, window // 4)
        used = estimate_messages(fixed) + (estimate_text(json.dumps_str(toolbox.schemas())) if toolbox else 0)
        return max(0, min(budget, window - reserve - used))

    async def _summarize(self, previous: str | None, transcript: str) -> str | None:
        assert self.chain is not None
        text = f"Earlier summary:\n{previous}\n\nNew conversation:\n{transcript}" if previous else transcript
        messages = [
            ChatMessage(role="system", content=_SUMMARY_INSTRUCTIONS),
            ChatMessage(role="user", content=text),
        ]
        try:
            answer = await self.chain.invoke(self.api, messages, deadline=self.deadline)
        except RunFailure:
            return None  # no checkpoint this turn; the recent turns that fit are still sent
        return answer.text or None

    async def _call_tool(
        self, toolbox: Toolbox, call: ModelToolCall, messages: list[ChatMessage]
    ) -> AsyncGenerator[AgentRunResult]:
        out = self.out
        tool = toolbox.resolve(call.name)
        name = tool.tool_name if tool is not None else call.name
        yield out.tool_started(call.id, name, call.arguments)
        self.tool_calls += 1
        if tool is None:
            # Never called: the model named a tool this run was not granted. It hears why and may recover.
            self.tool_errors += 1
            error = f"tool {call.name!r} is not available in this run"
            yield out.tool_completed(call.id, name, error_code="tool.not_granted", error_message=error)
            messages.append(
                ChatMessage(role="tool", tool_call_id=call.id, name=call.name, content=f"Error: {error}")
            )
            return
        try:
            async with self.deadline.scope():
                result = await self.api.tools.call(tool.tool_name, call.arguments)
        except UnauthorizedError as exc:
            self.tool_errors += 1
            yield out.tool_completed(call.id, name, error_code="unauthorized", error_message=exc.message)
            raise
        except (DeadlineExceededError, TimeoutError):
            self.tool_errors += 1
            yield out.tool_completed(
                call.id, name, error_code="deadline_exceeded", error_message="the tool did not answer in time"
            )
            raise
        except APIError as exc:
            self.tool_errors += 1
            yield out.tool_completed(call.id, name, error_code=exc.code, error_message=exc.message)
            messages.append(
                ChatMessage(
                    role="tool", tool_call_id=call.id, name=call.name, content=f"Error: {exc.message}"
                )
            )
            return
        if result.is_error:
            self.tool_errors += 1
        yield out.tool_completed(
            call.id,
            name,
            result_preview=preview(result),
            error_code="tool.error" if result.is_error else None,
            error_message="the tool reported an error" if result.is_error else None,
        )
        messages.append(
            ChatMessage(role="tool", tool_call_id=call.id, name=call.name, content=result_text(result))
        )

    # -- reporting ---------------------------------------------------------------------------------------

    def _usage(self) -> dict[str, JsonValue]:
        usage: dict[str, JsonValue] = {}
        if self.chain is not None:
            usage.update(self.chain.usage)
            usage["model_calls"] = self.chain.calls
        return usage

    def details(self, extra: dict[str, JsonValue]) -> dict[str, JsonValue]:
        """Monitoring metadata of the run so far (``run.completed.metadata`` / ``run.failed.details``)."""
        chain = self.chain
        data: dict[str, JsonValue] = {
            "runner": "local-agent",
            "latency_ms": int((time.monotonic() - self.started) * 1000),
            "tool_rounds": self.tool_rounds,
            "tool_calls": self.tool_calls,
            "tool_errors": self.tool_errors,
            "retrieval": {
                "hits": self.retrieval.hits,
                "kept": len(self.retrieval.passages),
                "reranked": self.retrieval.reranked,
                "errors": list(self.retrieval.errors),
            },
            "history": {
                "items": self.history.items,
                "pages": self.history.pages,
                "summary_used": self.history.summary_used,
                "compacted": self.history.compacted,
                "budget_tokens": self.history_budget,
                "error": self.history.error,
            },
            "input": {
                "images": self.user.images,
                "files_inlined": self.user.files_inlined,
                "notes": self.user.notes,
            },
            "usage": self._usage(),
        }
        if chain is not None:
            data.update(
                {
                    "model_id": chain.current.model_id,
                    "primary_model_id": chain.models[0].model_id,
                    "fallback_used": chain.fallback_used,
                    "model_failures": list(chain.failures),
                }
            )
        data.update(extra)
        return data
