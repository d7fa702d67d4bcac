"""The runners as an operator sees them: manifest, disable switch, risk view, process status and warnings.

Read by ``GET /v1/runners``, ``agentrunner runners list`` and the console's runners page; the switch itself
is written through :class:`~agentrunner_host.stores.RunnerControlStore` and enforced by the orchestrator
before every run starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentrunner_host.definitions import AgentConfig
from agentrunner_host.registry import RegistryWarning, RunnerDescriptor, RunnerRegistry
from agentrunner_host.risk import RunnerRisk, RuntimeMode, assess_runner
from agentrunner_host.runtime.inprocess import InProcessConnection
from agentrunner_host.runtime.process import SubprocessRunnerConnection
from agentrunner_host.runtime.remote import RemoteRunnerConnection
from agentrunner_host.stores import RunnerControl

__all__ = ["ProcessStatus", "RunnerView", "process_status", "runner_view"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessStatus:
    """How a runner's plugin runs right now."""

    mode: RuntimeMode
    """``in_process``, ``subprocess`` or ``remote`` (a runtime connected over a WebSocket)."""
    warm: bool
    """Its process is up (always true in process; a remote runtime is connected)."""
    pid: int | None = None
    """Process id of the live child (subprocess only)."""
    starts: int = 0
    """Child processes started so far (subprocess only)."""
    restarts: int = 0
    """Starts after the first: a crash, a cancel that was ignored, a replaced plugin (subprocess only)."""
    live_runs: int = 0
    """Runs executing in it now (subprocess only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnerView:
    """One available runner for the admin surfaces."""

    descriptor: RunnerDescriptor
    """Its validated descriptor (manifest included)."""
    control: RunnerControl | None
    """Set when an operator disabled it."""
    risk: RunnerRisk
    """What it may touch."""
    process: ProcessStatus
    """How its plugin runs."""
    warnings: list[str]
    """Registry warnings about its plugin (manifests left out and why)."""


def process_status(registry: RunnerRegistry, plugin_id: str) -> tuple[ProcessStatus, Sequence[str]]:
    """The plugin's process status and the variables granted to its process."""
    try:
        connection = registry.connection(plugin_id)
    except Exception:
        return ProcessStatus(mode="in_process", warm=False), ()
    match connection:
        case SubprocessRunnerConnection():
            status = ProcessStatus(
                mode="subprocess",
                warm=connection.pid is not None,
                pid=connection.pid,
                starts=connection.starts,
                restarts=max(0, connection.starts - 1),
                live_runs=len(connection.live_runs),
            )
            return status, tuple(connection.options.granted_env)
        case RemoteRunnerConnection():
            return ProcessStatus(mode="remote", warm=connection.connected), ()
        case InProcessConnection():
            return ProcessStatus(mode="in_process", warm=True), ()
        case _:
            return ProcessStatus(mode="in_process", warm=True), ()


def runner_view(
    descriptor: RunnerDescriptor,
    *,
    registry: RunnerRegistry,
    agents: Sequence[AgentConfig],
    control: RunnerControl | None,
    warnings: Sequence[RegistryWarning] = (),
    mcp_servers: Sequence[str] = (),
) -> RunnerView:
    """The admin view of one runner."""
    process, granted = process_status(registry, descriptor.plugin_id)
    risk = assess_runner(
        descriptor.manifest, agents, runtime=process.mode, granted_env=granted, mcp_servers=mcp_servers
    )
    return RunnerView(
        descriptor=descriptor,
        control=control,
        risk=risk,
        process=process,
        warnings=[w.message for w in warnings if w.plugin_id == descriptor.plugin_id],
    )
