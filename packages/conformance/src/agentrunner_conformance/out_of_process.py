"""Check a runner in its own process, through the wire protocol (needs the ``agentrunner-host`` package).

:class:`OutOfProcessTarget` starts a plugin directory's runtime as a child process with the host's supervised
connection (``agentrunner_host.runtime``) and exposes its runner as a local proxy class. Every run the kit drives
becomes a ``RUN_AGENT`` frame; the child's back-calls come back over the wire and are served by the simulated
host that opened the run. Everything else (probes, invariants, report) is unchanged.

Each attempt gets a fresh run id on the wire (``<run_id>~<n>``; results and back-calls are mapped back), so a
replayed example never collides with a run the child is still busy with. A cancel is forwarded to the child and
the proxy waits until the child ends the run, so ``cancel.stops-within-grace`` judges when the child stops; a
second cancel (the kit giving up after the grace period) abandons the child's run.

What cannot be judged from outside the process: what the child sends after a cancel (it may have been sent
before the child saw the cancel), so ``cancel.reports-cancelled`` sees nothing after it; a back-call error
escaping the child's runner surfaces as a runner crash (``run.no-unhandled-exception``); and "fresh" instances share the one child, so
``isolation.no-instance-state`` rests on comparing outputs only.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

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
from pydantic import BaseModel

from .errors import TargetError

if TYPE_CHECKING:
    from agentrunner_host.runtime.process import SubprocessRunnerConnection

__all__ = ["OutOfProcessTarget"]


class _Router:
    """The child's back-call handler: each call goes to the simulated host that opened its run, under the run
    id the kit gave it (the wire id is this attempt's own)."""

    def __init__(self) -> None:
        self.hosts: dict[str, tuple[str, APITransport]] = {}

    def _route(self, request: BackCallRequest) -> tuple[BackCallRequest, APITransport]:
        entry = self.hosts.get(request.run_id)
        if entry is None:
            raise UnauthorizedError(f"no run {request.run_id!r}")
        run_id, host = entry
        return request.model_copy(update={"run_id": run_id}), host

    async def handle(self, request: BackCallRequest) -> dict[str, Any]:
        routed, host = self._route(request)
        return await host.call(routed, timeout=None)

    def handle_stream(self, request: BackCallRequest) -> AsyncIterator[dict[str, Any]]:
        routed, host = self._route(request)
        return host.stream(routed, timeout=None)


class _Ended:
    """The child's run is over (its stream ended, or raised *error*)."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


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
        self._attempts = itertools.count(1)
        target = self

        class OutOfProcessRunner(AgentRunner):
            """Forwards each run to the plugin's child process."""

            manifest = self.manifest

            def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
                return target.forward(ctx, api)

        self.runner_class = OutOfProcessRunner

    async def _connect(self) -> SubprocessRunnerConnection:
        from agentrunner_host.runtime.process import RuntimeOptions, SubprocessRunnerConnection

        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._connection is None:
                # The kit judges how the runner handles cancellation itself: the host's own escalation (a
                # restart of a child whose cancelled run never ends) would end later checks' runs under them.
                options = RuntimeOptions(cancel_grace=None)
                connection = SubprocessRunnerConnection(self._spec, self._router, options=options)
                await connection.start()
                self._connection = connection
            return self._connection

    async def forward(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        """Run *ctx* in the child under a fresh wire run id; its back-calls are served by *api*'s transport."""
        connection = await self._connect()
        wire_id = f"{ctx.run_id}~{next(self._attempts)}"
        # Kept after the run ends, so late calls reach the simulated host and are recorded as late.
        self._router.hosts[wire_id] = (ctx.run_id, api.transport)
        wire_ctx = ctx.model_copy(update={"run_id": wire_id})
        request = AgentRunRequest(
            runner_id=self.manifest.id, runner_name=self.manifest.name, context=wire_ctx
        )
        queue: asyncio.Queue[object] = asyncio.Queue()

        async def pump() -> None:
            try:
                async for result in connection.run(request):
                    queue.put_nowait(result)
            except Exception as exc:  # the run's end as the host saw it, re-raised to the kit below
                queue.put_nowait(_Ended(exc))
            else:
                queue.put_nowait(_Ended())

        pumping = asyncio.create_task(pump(), name=f"child run {wire_id}")
        cancelled = False
        try:
            while True:
                try:
                    item = await queue.get()
                except asyncio.CancelledError:
                    if cancelled:
                        raise  # the kit gave up on the run: abandon it (the finally cancels the child's run)
                    # Forward the cancel and keep relaying: what the child does now is what the kit judges.
                    cancelled = True
                    await connection.cancel(wire_id)
                    continue
                if isinstance(item, _Ended):
                    if cancelled:
                        raise asyncio.CancelledError  # the child ended the run: it stopped
                    if item.error is not None:
                        raise item.error
                    return
                if cancelled:
                    # Sent before or after the child saw the cancel? The wire cannot tell, so what follows a
                    # cancel is not judged (cancel.reports-cancelled), only when the child stops.
                    continue
                yield _restore_run_id(item, wire_id, ctx.run_id)
        finally:
            if not pumping.done():
                pumping.cancel()
                await asyncio.gather(pumping, return_exceptions=True)

    async def aclose(self) -> None:
        """Stop the child process."""
        if self._connection is not None:
            await self._connection.aclose()
            self._connection = None


def _restore_run_id(item: object, wire_id: str, run_id: str) -> object:
    """The result with this attempt's wire id put back to the kit's run id (any other id is left as sent)."""
    if isinstance(item, dict):
        fields = cast(dict[str, Any], item)
        return {**fields, "run_id": run_id} if fields.get("run_id") == wire_id else fields
    if isinstance(item, BaseModel) and getattr(item, "run_id", None) == wire_id:
        return item.model_copy(update={"run_id": run_id})
    return item
