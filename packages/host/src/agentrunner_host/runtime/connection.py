"""The two seams between the orchestrator and the places runners live.

* :class:`BackCallHandler` serves a runner's back-calls. The host's dispatcher implements it; every
  transport hands it the calls it receives, with ``request.caller`` set to the identity of the plugin the
  call came from (the connection, never a field the runner chose).
* :class:`RunnerConnection` is a live connection to one plugin's runners: in-process
  (:mod:`agentrunner_host.runtime.inprocess`) or a child process / WebSocket runtime (:mod:`agentrunner_host.runtime`).
  The orchestrator runs every runner through this interface, so both kinds pass the same tests.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Protocol, runtime_checkable

from agentrunner import AgentRunRequest, BackCallRequest, ParsedResult
from agentrunner.codec import JsonObject

__all__ = ["BackCallHandler", "RawResult", "RunnerConnection"]

RawResult = ParsedResult | JsonObject
"""What a connection yields: a parsed result (in-process) or an undecoded JSON object (from the wire)."""


@runtime_checkable
class BackCallHandler(Protocol):
    """Serves back-calls. Raises :class:`agentrunner.APIError` subclasses for §9 errors."""

    async def handle(self, request: BackCallRequest) -> JsonObject:
        """Serve one call and return its JSON result."""
        ...

    def handle_stream(self, request: BackCallRequest) -> AsyncIterator[JsonObject]:
        """Serve a streaming call (``models.stream``, ``artifacts.open_stream``) chunk by chunk."""
        ...


@runtime_checkable
class RunnerConnection(Protocol):
    """A connection to one plugin (``author/plugin``) and the runners it exposes."""

    @property
    def plugin_id(self) -> str:
        """Identity ``author/plugin``; stamped as ``caller`` on every back-call from this connection."""
        ...

    async def list_runners(self) -> list[JsonObject]:
        """The plugin's runner manifests, undecoded (the registry validates each one on its own)."""
        ...

    def run(self, request: AgentRunRequest) -> AsyncGenerator[RawResult, None]:
        """Start a run and yield its results in order.

        Ends when the runner's stream ends. Raises :class:`~agentrunner_host.errors.RunnerTransportError`
        when the runner raised or its runtime died; cancelling the consuming task cancels the run.
        """
        ...

    async def cancel(self, run_id: str) -> None:
        """Ask the runtime to cancel *run_id*; idempotent, a no-op for runs it does not know."""
        ...

    async def aclose(self) -> None:
        """Release the connection (stop a child process)."""
        ...
