"""Runners living in the host's own process (trusted code: tests, built-in reference runners).

Back-calls still go through the dispatcher with the plugin's identity stamped by this connection, so an
in-process runner is checked exactly like an out-of-process one. It shares the event loop, though: a runner
that blocks the loop (a synchronous sleep) blocks the host; untrusted runners belong out of process.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Iterable

from agentrunner import AgentRunAPI, AgentRunner, AgentRunRequest, BackCallRequest
from agentrunner.codec import JsonObject

from agentrunner_host.errors import RunnerTransportError
from agentrunner_host.runtime.connection import BackCallHandler, RawResult

__all__ = ["InProcessConnection", "InProcessTransport"]


class InProcessTransport:
    """An :class:`agentrunner.APITransport` that hands calls to the dispatcher with a fixed caller identity."""

    def __init__(self, handler: BackCallHandler, *, caller: str) -> None:
        self._handler = handler
        self._caller = caller

    def _stamp(self, request: BackCallRequest) -> BackCallRequest:
        # The identity comes from the connection, whatever the runner put in the request.
        return request.model_copy(update={"caller": self._caller})

    async def call(self, request: BackCallRequest, *, timeout: float | None) -> JsonObject:
        """Serve one call through the dispatcher."""
        return await self._handler.handle(self._stamp(request))

    def stream(self, request: BackCallRequest, *, timeout: float | None) -> AsyncIterator[JsonObject]:
        """Serve a streaming call through the dispatcher."""
        return self._handler.handle_stream(self._stamp(request))


class InProcessConnection:
    """A plugin whose runner instances live in this process (one instance per runner, shared by all runs)."""

    def __init__(self, plugin_id: str, runners: Iterable[AgentRunner], *, handler: BackCallHandler) -> None:
        self._plugin_id = plugin_id
        self._runners = {type(r).manifest.name: r for r in runners}
        self._transport = InProcessTransport(handler, caller=plugin_id)

    @property
    def plugin_id(self) -> str:
        """``author/plugin``."""
        return self._plugin_id

    async def list_runners(self) -> list[JsonObject]:
        """The manifests of the hosted runners."""
        return [type(r).manifest.model_dump(mode="json") for r in self._runners.values()]

    async def run(self, request: AgentRunRequest) -> AsyncGenerator[RawResult, None]:
        """Run one runner; its exceptions become :class:`RunnerTransportError` (``runner.error``)."""
        runner = self._runners.get(request.runner_name)
        if runner is None:
            raise RunnerTransportError("runner.not_found", f"runner {request.runner_id} is not hosted here")
        ctx = request.context
        api = AgentRunAPI(
            self._transport,
            run_id=ctx.run_id,
            deadline_at=ctx.runtime.deadline_at,
            call_token=request.call_token,
        )
        results = runner.run(ctx, api)
        try:
            async for result in results:
                yield result
        except RunnerTransportError:
            raise
        except Exception as exc:
            raise RunnerTransportError("runner.error", f"runner raised {type(exc).__name__}: {exc}") from exc
        finally:
            # Close the runner's generator so its own `finally` blocks run when the run ends early.
            closer = getattr(results, "aclose", None)
            if closer is not None:
                await closer()

    async def cancel(self, run_id: str) -> None:
        """Nothing to do: the orchestrator cancels the task iterating :meth:`run`."""

    async def aclose(self) -> None:
        """Nothing to release."""
