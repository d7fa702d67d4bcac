"""Check a runner in its own process, through the wire protocol (needs the ``agentrunner-host`` package).

:class:`OutOfProcessTarget` starts a plugin directory's runtime as a child process with the host's supervised
connection (``agentrunner_host.runtime``) and exposes its runner as a local proxy class. Every run the kit drives
becomes a ``RUN_AGENT`` frame; the child's back-calls come back over the wire and are served by the simulated
host that opened the run. Everything else (probes, invariants, report) is unchanged.

What cannot be judged from outside the process: a cancel ends the local proxy at once whatever the child does,
so ``cancel.*`` only sees what the child sent before it; a back-call error escaping the child's runner surfaces
as a runner crash (``run.no-unhandled-exception``); and "fresh" instances share the one child, so
``isolation.no-instance-state`` rests on comparing outputs only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerManifest,
    AgentRunRequest,
    AgentRunResult,
    APITransport,
    BackCallRequest,
    UnauthorizedError,
)

from .errors import TargetError

if TYPE_CHECKING:
    from agentrunner_host.runtime.process import SubprocessRunnerConnection

__all__ = ["OutOfProcessTarget"]


class _Router:
    """The child's back-call handler: each call goes to the simulated host that opened its run."""

    def __init__(self) -> None:
        self.hosts: dict[str, APITransport] = {}

    async def handle(self, request: BackCallRequest) -> dict[str, Any]:
        host = self.hosts.get(request.run_id)
        if host is None:
            raise UnauthorizedError(f"no run {request.run_id!r}")
        return await host.call(request, timeout=None)

    def handle_stream(self, request: BackCallRequest) -> AsyncIterator[dict[str, Any]]:
        host = self.hosts.get(request.run_id)
        if host is None:
            raise UnauthorizedError(f"no run {request.run_id!r}")
        return host.stream(request, timeout=None)


class OutOfProcessTarget:
    """A plugin directory's runner, run in a child process; use :attr:`runner_class` as the check target.

    Call :meth:`aclose` on the check's event loop when done (``check_runner(..., close=target.aclose)``).
    """

    manifest: AgentRunnerManifest
    """The runner's declaration, from ``manifest.yaml``."""
    runner_class: type[AgentRunner]
    """A proxy :class:`~agentrunner.AgentRunner` forwarding every run to the child."""

    def __init__(self, plugin_dir: Path, *, runner_name: str | None = None) -> None:
        try:
            from agentrunner_host.runtime.discovery import load_plugin_dir
        except ImportError as exc:
            raise TargetError(f"checking out of process needs the agentrunner-host package: {exc}") from exc
        spec, reasons = load_plugin_dir(plugin_dir)
        if spec is None:
            raise TargetError(f"{plugin_dir}: {'; '.join(reasons)}")
        entries = [r for r in spec.runners if runner_name is None or r.name == runner_name]
        if len(entries) != 1 or entries[0].manifest is None:
            raise TargetError(
                f"{plugin_dir}: name one runner with DIR#name (found {[r.name for r in entries]})"
            )
        self.manifest = entries[0].manifest
        self._spec = spec
        self._router = _Router()
        self._connection: SubprocessRunnerConnection | None = None
        self._lock: asyncio.Lock | None = None
        target = self

        class OutOfProcessRunner(AgentRunner):
            """Forwards each run to the plugin's child process."""

            manifest = self.manifest

            def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
                return target.forward(ctx, api)

        self.runner_class = OutOfProcessRunner

    async def _connect(self) -> SubprocessRunnerConnection:
        from agentrunner_host.runtime.process import SubprocessRunnerConnection

        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._connection is None:
                connection = SubprocessRunnerConnection(self._spec, self._router)
                await connection.start()
                self._connection = connection
            return self._connection

    async def forward(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        """Run *ctx* in the child; its back-calls are served by *api*'s transport."""
        connection = await self._connect()
        # Kept after the run ends, so late calls reach the simulated host and are recorded as late.
        self._router.hosts[ctx.run_id] = api.transport
        request = AgentRunRequest(runner_id=self.manifest.id, runner_name=self.manifest.name, context=ctx)
        stream = connection.run(request)
        try:
            async for result in stream:
                yield result
        finally:
            await stream.aclose()

    async def aclose(self) -> None:
        """Stop the child process."""
        if self._connection is not None:
            await self._connection.aclose()
            self._connection = None
