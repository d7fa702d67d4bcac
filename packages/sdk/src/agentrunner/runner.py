"""``AgentRunner``: the base class plugin authors subclass."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, ClassVar

from .api import AgentRunAPI
from .context import AgentRunContext
from .emitter import ResultEmitter
from .errors import RunnerDefinitionError
from .manifest import AgentRunnerManifest
from .results import AgentRunResult

if TYPE_CHECKING:
    # Types only: the bridge is an optional package that itself depends on the SDK.
    from agentrunner_mcp import BridgeServer, ExternalMCPBridge

__all__ = ["AgentRunner"]


class AgentRunner(ABC):
    """Base class of an agent runner.

    Declare the runner with a class attribute ``manifest`` (an :class:`AgentRunnerManifest`: id, name,
    label, capabilities, permissions, context policy, config form) and implement :meth:`run`.

    The contract of :meth:`run`, which the host and the conformance kit enforce:

    * It is an async generator: ``async def run(self, ctx, api): yield ...``. Results carry ``ctx.run_id``;
      use :meth:`emitter` (``out = self.emitter(ctx)``) so ``run_id``, ``sequence`` and ``timestamp`` are
      filled for you.
    * It yields **exactly one terminal result**, ``run.completed`` or ``run.failed``, last. Nothing follows
      it. A run that produced no message must end with ``run.failed``, not an empty success.
    * Only declared abilities are used: no ``message.delta`` without the ``streaming`` capability, no
      ``action.requested`` without ``platform_api``. Only resources in ``ctx.resources`` are called, and
      only through *api*.
    * A back-call error (:class:`~agentrunner.errors.APIError`) is handled, or turned into ``run.failed``;
      it must not escape as a crash. (If it does, the host still ends the run as ``run.failed``.)
    * **Cancellation**: the host cancels a run by cancelling the task iterating the generator (and, out of
      process, by a cancel message). ``asyncio.CancelledError`` is raised at the current ``await``/``yield``.
      Let it propagate after releasing your resources; the host records ``run.failed`` with code
      ``cancelled``. Runners that declare ``interrupt`` must stop promptly.
    * **No state on the instance between runs.** One instance serves many concurrent runs of many bindings;
      ``ctx.config`` carries the binding's config. Keep durable state in host state/storage (``api.state``)
      or in an external system keyed by ``ctx.runtime.metadata['session_key']``.
    * The host enforces the deadline ``ctx.runtime.deadline_at``; *api* calls fail with
      ``DeadlineExceededError`` once it passes.
    """

    manifest: ClassVar[AgentRunnerManifest]
    """The runner's declaration; validated when the subclass is defined."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # ABCMeta computes __abstractmethods__ only after this hook, so look at `run` itself: an intermediate
        # base that leaves it abstract is checked through its concrete subclasses instead.
        if getattr(cls.run, "__isabstractmethod__", False):
            return
        manifest = cls.__dict__.get("manifest", getattr(cls, "manifest", None))
        if manifest is None:
            raise RunnerDefinitionError(f"{cls.__qualname__} must declare a class attribute 'manifest'")
        if isinstance(manifest, dict):
            try:
                manifest = AgentRunnerManifest.model_validate(manifest)
            except ValueError as exc:
                raise RunnerDefinitionError(f"{cls.__qualname__}.manifest is invalid: {exc}") from exc
            cls.manifest = manifest
        if not isinstance(manifest, AgentRunnerManifest):
            raise RunnerDefinitionError(f"{cls.__qualname__}.manifest must be an AgentRunnerManifest")

    @abstractmethod
    def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        """Handle one event; yield results ending with exactly one terminal result (see the class docstring)."""
        ...

    @staticmethod
    def emitter(ctx: AgentRunContext) -> ResultEmitter:
        """A fresh :class:`ResultEmitter` for this run."""
        return ResultEmitter(ctx.run_id)

    @staticmethod
    def create_external_mcp_bridge(
        ctx: AgentRunContext, api: AgentRunAPI, *, server: BridgeServer | None = None
    ) -> AbstractAsyncContextManager[ExternalMCPBridge]:
        """The run-scoped MCP bridge for an external harness (see ``docs/mcp-bridge.md``).

        Use as ``async with self.create_external_mcp_bridge(ctx, api) as bridge:``; the bridge offers the run's
        authorized host tools to Claude Code, Codex and friends, and every call goes through *api*. It is
        ``agentrunner_mcp.create_external_mcp_bridge`` from the optional package ``agentrunner-mcp-bridge``,
        imported only when called, so the SDK itself never imports ``mcp``.

        Raises ``ImportError`` naming the package to install when ``agentrunner-mcp-bridge`` (or its ``mcp``
        dependency) is not installed.
        """
        try:
            from agentrunner_mcp import create_external_mcp_bridge
        except ImportError as exc:
            if (exc.name or "").partition(".")[0] not in {"agentrunner_mcp", "mcp"}:
                raise  # a bug inside the bridge package, not a missing install
            raise ImportError(
                "AgentRunner.create_external_mcp_bridge needs the optional package agentrunner-mcp-bridge "
                f"({exc.name} is not installed): add it to the runner's dependencies, or "
                "`pip install agentrunner-mcp-bridge`",
                name=exc.name,
            ) from exc
        return create_external_mcp_bridge(ctx, api, server=server)
