"""The admin risk view of a runner: what it may touch, computed from its manifest, the agents configured for
it and how its plugin runs (security gate item 9).

Everything here is derived from declarations and configuration, never from watching the runner: the host
confines what a runner reaches *through the host* (the frozen snapshot, the dispatcher), not what its
process does on its own. So ``network`` says what the runner is configured or able to contact, and a
runner in the host's own process is reported as sharing the host's memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from agentrunner import AgentRunnerManifest

from agentrunner_host.config import is_env_ref
from agentrunner_host.definitions import AgentConfig

__all__ = ["NetworkReach", "RiskLevel", "RunnerRisk", "RuntimeMode", "assess_runner", "env_references"]

RiskLevel = Literal["low", "medium", "high"]
NetworkReach = Literal["host_only", "external_service", "unrestricted"]
RuntimeMode = Literal["in_process", "subprocess", "remote"]

# Form fields whose name says the runner contacts an address the operator configures.
_ENDPOINT_WORDS: Final = ("url", "endpoint", "webhook", "host", "base-url", "base_url")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnerRisk:
    """What one runner may touch."""

    level: RiskLevel
    """``high``: executes code, acts on the platform or bridges MCP; ``medium``: reaches an external service,
    sees secrets, calls tools or runs in the host's process; ``low``: none of these."""
    executes_code: bool
    """It runs an external harness that executes code (``capabilities.executes_code``)."""
    network: NetworkReach
    """``unrestricted`` (it executes code), ``external_service`` (its form names an endpoint), or
    ``host_only`` (it reaches models, tools and data through the host's back-calls)."""
    secrets: list[str]
    """Names of the environment variables whose values it receives: env references in its agents' configs
    and variables granted to its plugin process (values are never shown)."""
    permissions: list[str]
    """What its manifest asks of the host, as ``area:operation`` (the binding and event narrow it per run)."""
    mcp_bridge: bool
    """It reaches the host's tools through the run-scoped MCP bridge."""
    mcp_servers: list[str]
    """Extra MCP servers a binding may give it (code-executing runners only)."""
    runtime: RuntimeMode
    """Where it runs; ``in_process`` shares the host's memory and environment."""
    agents: list[str]
    """Agents configured with it."""
    reasons: list[str]
    """Why the level is what it is, one short sentence per fact."""


def env_references(value: Any) -> list[str]:
    """The variable names of every ``{"env": "VAR"}`` reference inside *value* (depth-first, in order)."""
    found: list[str] = []
    if is_env_ref(value):
        found.append(value["env"])
    elif isinstance(value, Mapping):
        for item in value.values():  # pyright: ignore[reportUnknownVariableType]
            found.extend(env_references(item))
    elif isinstance(value, list | tuple):
        for item in value:  # pyright: ignore[reportUnknownVariableType]
            found.extend(env_references(item))
    return found


def _permissions(manifest: AgentRunnerManifest) -> list[str]:
    out: list[str] = []
    for area, operations in manifest.permissions.model_dump(mode="json").items():
        if isinstance(operations, list):
            out.extend(f"{area}:{op}" for op in operations)  # pyright: ignore[reportUnknownVariableType]
        elif operations is True:
            out.append(area)
    return out


def _names_endpoint(manifest: AgentRunnerManifest) -> bool:
    return any(
        item.type == "url" or any(word in item.name.lower() for word in _ENDPOINT_WORDS)
        for item in manifest.config_schema
    )


def assess_runner(
    manifest: AgentRunnerManifest,
    agents: Iterable[AgentConfig],
    *,
    runtime: RuntimeMode,
    granted_env: Sequence[str] = (),
    mcp_servers: Sequence[str] = (),
) -> RunnerRisk:
    """The risk view of the runner declared by *manifest*, given every configured agent (those of other
    runners are ignored), where its plugin runs, the variables granted to its process and the extra MCP
    servers the host allows harnesses."""
    capabilities = manifest.capabilities
    mine = [a for a in agents if a.runner_id == manifest.id]
    secrets = sorted({*granted_env, *(name for a in mine for name in env_references(a.runner_config))})
    permissions = _permissions(manifest)
    executes_code = capabilities.executes_code
    if executes_code:
        network: NetworkReach = "unrestricted"
    elif _names_endpoint(manifest):
        network = "external_service"
    else:
        network = "host_only"
    servers = sorted(mcp_servers) if executes_code else []
    high: list[str] = []
    medium: list[str] = []
    if executes_code:
        high.append("executes code in an external harness (its process can reach the network and files)")
    if manifest.permissions.platform_api or capabilities.platform_api:
        high.append("may ask the platform to act (platform API)")
    if capabilities.mcp_bridge:
        high.append("reaches host tools through the MCP bridge")
    if servers:
        high.append(f"bindings may give it extra MCP servers: {', '.join(servers)}")
    if network == "external_service":
        medium.append("contacts an external service named in its config")
    if secrets:
        medium.append(f"receives {len(secrets)} secret(s): {', '.join(secrets)}")
    if "tools:call" in permissions:
        medium.append("may call host tools")
    if runtime == "in_process":
        medium.append("runs inside the host process (shares its memory and environment)")
    level: RiskLevel = "high" if high else "medium" if medium else "low"
    return RunnerRisk(
        level=level,
        executes_code=executes_code,
        network=network,
        secrets=secrets,
        permissions=permissions,
        mcp_bridge=capabilities.mcp_bridge,
        mcp_servers=servers,
        runtime=runtime,
        agents=sorted(a.agent_id for a in mine),
        reasons=high + medium or ["reaches nothing but the host's back-calls it declares"],
    )
