"""Code-executing runners (external harnesses such as Claude Code and Codex): the operator's gate, their
workspace policy, and the one long-lived MCP bridge their runs reach the host through.

* **Default off.** A runner whose manifest declares ``executes_code`` is refused — at config load for the
  agents that name it, and when an event would start it — unless ``[security] allow_code_executing_runners``
  is true. The refusal is :class:`CodeExecutionDisabledError`, whose message names the switch.
* **Workspace policy.** Such runs receive ``runtime.metadata['harness']``: the workspace root under the data
  directory, the operator's allowed roots and the MCP servers a binding may add.
* **Pins, by the host.** Before a code-executing runner gets its run, the host applies the operator's pins
  (``[[security.harness_mcp_servers]]``, ``[[security.harness_skills]]``) to the config it would receive, with
  the harness kit's own rules (:func:`agentrunner_harness.check_pinned_config`): an extra MCP server or a
  skill they do not allow ends the run :data:`NOT_PINNED_CODE` before anything reaches the runner. The
  runner checks again (defence in depth) and alone checks ``mcp-config-file``, which is read where it runs.
* **Bridge.** A runner declaring ``mcp_bridge`` gets its run registered on the host's :class:`BridgeServer`
  (started once, on first need) with a back-call client of the same dispatcher and snapshot as every other
  back-call; the endpoint and per-run token go in ``runtime.metadata['mcp_bridge']``, where the SDK's
  ``create_external_mcp_bridge`` picks them up. The token is revoked when the run ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from agentrunner import AgentRunAPI, AgentRunRequest
from agentrunner_harness import HarnessFailure, check_pinned_config

from agentrunner_host.config.model import HarnessMCPServer, HarnessSkill
from agentrunner_host.runtime.connection import BackCallHandler
from agentrunner_host.runtime.inprocess import InProcessTransport

from .errors import CodeExecutionDisabledError, HostError
from .registry import RunnerDescriptor

if TYPE_CHECKING:
    from agentrunner_mcp import BridgeServer

__all__ = [
    "BRIDGE_METADATA_KEY",
    "CODE_EXECUTION_SWITCH",
    "HARNESS_METADATA_KEY",
    "NOT_PINNED_CODE",
    "HarnessPolicy",
    "HarnessPolicyError",
    "HarnessSupport",
    "refuse_code_execution",
]

CODE_EXECUTION_SWITCH: Final = "[security] allow_code_executing_runners = true"
"""The operator switch, as error messages name it."""
HARNESS_METADATA_KEY: Final = "harness"
"""``runtime.metadata`` key of the workspace policy."""
BRIDGE_METADATA_KEY: Final = "mcp_bridge"
"""``runtime.metadata`` key of the run's bridge endpoint."""
NOT_PINNED_CODE: Final = "harness.not_pinned"
"""``run.failed`` code of a run whose config gives an MCP server or skill the operator did not pin."""


class HarnessPolicyError(HostError):
    """The host refused a code-executing runner's run: its config breaks the operator's pins."""

    code: Final = NOT_PINNED_CODE
    """Its ``run.failed`` code."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HarnessPolicy:
    """The operator's settings for code-executing runners."""

    allow_code_executing_runners: bool = False
    """The gate."""
    workspace_root: Path | None = None
    """Where per-session working directories are created (default: ``<data_dir>/harness``)."""
    allowed_roots: tuple[str, ...] = ()
    """Directories a binding's ``working-directory`` may be inside."""
    mcp_servers: tuple[HarnessMCPServer, ...] = ()
    """Extra MCP servers a binding may give the harness, each pinned to its command and args or its URL."""
    allow_danger_full_access: bool = False
    """Whether Codex's ``danger-full-access`` sandbox may be configured."""
    skills: tuple[HarnessSkill, ...] | None = None
    """Skills a binding may project, pinned by digest; ``None``: not verified."""

    def metadata(self) -> dict[str, object]:
        """``runtime.metadata['harness']`` of a run: what the harness-kit's ``WorkspacePolicy`` reads."""
        root = self.workspace_root
        return {
            "workspace_root": str(root) if root is not None else None,
            "allowed_roots": list(self.allowed_roots),
            "mcp_server_allowlist": [server.name for server in self.mcp_servers],
            # what each allowed name must run or reach: the harness refuses a binding's entry that differs
            "mcp_server_pins": {server.name: server.pin() for server in self.mcp_servers},
            "allow_danger_full_access": self.allow_danger_full_access,
            "skill_pins": None
            if self.skills is None
            else [{"name": s.name, "sha256": s.sha256, "version": s.version} for s in self.skills],
        }


def refuse_code_execution(descriptor: RunnerDescriptor, policy: HarnessPolicy | None) -> None:
    """Raise :class:`CodeExecutionDisabledError` when *descriptor* executes code and the policy does not allow it."""
    if descriptor.manifest.capabilities.executes_code and not (
        policy and policy.allow_code_executing_runners
    ):
        raise CodeExecutionDisabledError(descriptor.runner_id, CODE_EXECUTION_SWITCH)


@dataclass(eq=False, slots=True)
class HarnessSupport:
    """Per-host support of code-executing runners (see the module docstring)."""

    policy: HarnessPolicy
    """The operator's settings."""
    dispatcher: BackCallHandler
    """The host's back-call dispatcher (bridge calls go through it)."""
    _server: BridgeServer | None = field(default=None, init=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    def check(self, descriptor: RunnerDescriptor) -> None:
        """The gate for one runner."""
        refuse_code_execution(descriptor, self.policy)

    @property
    def bridge(self) -> BridgeServer | None:
        """The bridge server, once started."""
        return self._server

    async def start_bridge(self) -> BridgeServer:
        """Start the bridge server (once); later calls return it."""
        async with self._lock:
            if self._server is None:
                from agentrunner_mcp import BridgeServer

                server = BridgeServer()
                await server.start()
                self._server = server
            return self._server

    async def aclose(self) -> None:
        """Stop the bridge server."""
        async with self._lock:
            if self._server is not None:
                server, self._server = self._server, None
                await server.stop()

    @contextlib.asynccontextmanager
    async def scope(
        self, descriptor: RunnerDescriptor, request: AgentRunRequest
    ) -> AsyncGenerator[AgentRunRequest]:
        """The request of one run, with the workspace policy and (for bridge runners) a live registration."""
        caps = descriptor.manifest.capabilities
        if not caps.executes_code and not caps.mcp_bridge:
            yield request
            return
        ctx = request.context
        metadata: dict[str, object] = dict(ctx.runtime.metadata)
        if caps.executes_code:
            policy = self.policy.metadata()
            try:
                check_pinned_config(ctx.config, policy)
            except HarnessFailure as refused:
                raise HarnessPolicyError(refused.message) from None
            metadata[HARNESS_METADATA_KEY] = policy
        if not caps.mcp_bridge:
            yield _with_metadata(request, metadata)
            return
        server = await self.start_bridge()
        transport = InProcessTransport(self.dispatcher, caller=descriptor.plugin_id)
        # The bridge's calls carry the run's own credential, like every back-call of the run.
        api = AgentRunAPI(
            transport, run_id=ctx.run_id, deadline_at=ctx.runtime.deadline_at, call_token=request.call_token
        )
        with server.open_run(ctx, api) as registration:
            metadata[BRIDGE_METADATA_KEY] = {
                "url": registration.url,
                "token": registration.token,
                "server_name": server.name,
                "tool_names": list(registration.tool_names),
            }
            yield _with_metadata(request, metadata)


def _with_metadata(request: AgentRunRequest, metadata: dict[str, object]) -> AgentRunRequest:
    runtime = request.context.runtime.model_copy(update={"metadata": metadata})
    context = request.context.model_copy(update={"runtime": runtime})
    return request.model_copy(update={"context": context})
