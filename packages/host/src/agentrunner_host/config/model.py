"""The shape of ``agentrunner.toml`` (pydantic models, ``extra="forbid"``: an unknown key is an error)."""

from __future__ import annotations

import ipaddress
import math
import re
from collections import Counter
from typing import Annotated, Final, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentrunner_host.admission import Identifier
from agentrunner_host.definitions import AgentBinding, AgentConfig, BindingScope, EventFilter

from .providers import KnowledgeBaseConfig, MCPServerConfig, ModelConfig

__all__ = [
    "DEFAULT_HTTP_PORT",
    "ECHO_RUNNER_ID",
    "LOCAL_AGENT_RUNNER_ID",
    "LOOPBACK_HOSTS",
    "BindingSpec",
    "DefaultsConfig",
    "HarnessMCPServer",
    "HarnessSkill",
    "HostConfig",
    "HttpConfig",
    "IsolationConfig",
    "RunnersConfig",
    "ClusterConfig",
    "RemotePluginConfig",
    "RuntimeServerConfig",
    "SecurityConfig",
    "MIN_TOKEN_BITS",
    "MIN_TOKEN_LENGTH",
    "is_loopback_host",
    "token_weakness",
]

DEFAULT_HTTP_PORT: Final = 8420
"""Port of the HTTP API when none is configured."""
ECHO_RUNNER_ID: Final = "plugin:agentrunner/echo/default"
"""The reference runner bound by default."""
LOCAL_AGENT_RUNNER_ID: Final = "plugin:langbot/local-agent/default"
"""The default runner once a model is configured (when installed)."""
LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "::1", "localhost"})
"""Host names that always count as loopback (any ``127.0.0.0/8`` or ``::1`` address does too)."""
MIN_TOKEN_LENGTH: Final = 32
"""Shortest API token accepted for a non-loopback bind."""
MIN_TOKEN_BITS: Final = 90.0
"""Least estimated entropy (bits) of an API token for a non-loopback bind (the estimate undercounts: a random
32-digit hex token, 128 real bits, scores 95 to 120)."""


def is_loopback_host(host: str) -> bool:
    """Whether *host* is a loopback address or ``localhost``, decided by parsing it as an IP address (so
    ``127.0.0.1.example`` is not loopback; ``[::1]`` and ``::ffff:127.0.0.1`` are)."""
    name = host.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name in {"localhost", "localhost."}:
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def token_weakness(token: str) -> str | None:
    """Why *token* is too weak to protect a non-loopback bind, or ``None``.

    The entropy estimate is the token's length times the Shannon entropy of its own character distribution:
    ``secrets.token_urlsafe(32)`` scores about 220 bits; a token made of few distinct characters, or of a
    repeated pattern, is refused. It is a floor against obvious mistakes, not a proof of randomness."""
    if len(token) < MIN_TOKEN_LENGTH:
        return f"it has {len(token)} characters; at least {MIN_TOKEN_LENGTH} are required"
    if (token + token).find(token, 1) < len(token):
        return "it repeats a shorter pattern"
    counts = Counter(token)
    per_char = -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())
    bits = per_char * len(token)
    if per_char < 2.5 or bits < MIN_TOKEN_BITS:
        return f"its estimated entropy is {bits:.0f} bits; at least {MIN_TOKEN_BITS:.0f} are required"
    return None


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class HttpConfig(_Section):
    """``[http]``: where the HTTP API listens and which requests it accepts."""

    host: str = "127.0.0.1"
    """Bind address; anything but loopback requires a strong API token."""
    port: int = Field(default=DEFAULT_HTTP_PORT, ge=0, le=65535)
    """TCP port (0 = any free port)."""
    api_token_env: str = Field(default="AGENTRUNNER_API_TOKEN", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Environment variable holding the bearer token that protects the API."""
    graceful_shutdown_seconds: float = Field(default=5.0, ge=0)
    """How long open connections may take to finish once shutdown starts."""
    allowed_hosts: list[str] = []
    """Host names (``Host`` header, without port) accepted besides the loopback names; ``"*"`` accepts any.
    A request for any other name is refused with 421 (this stops DNS rebinding)."""
    allowed_origins: list[str] = []
    """Browser origins (``https://console.example``) allowed to call the API; CORS is answered for exactly
    these and is off when the list is empty. Any other ``Origin`` is refused with 403."""
    header_timeout_seconds: float = Field(default=10.0, gt=0)
    """A connection that has not sent a complete request head this long after connecting (or after its
    previous answer) is closed."""
    body_timeout_seconds: float = Field(default=30.0, gt=0)
    """Longest time to receive a request body; slower bodies are answered 408."""
    keep_alive_seconds: int = Field(default=5, ge=1)
    """Idle keep-alive connections are closed after this long."""
    max_connections: int = Field(default=4096, ge=1)
    """Concurrent connections (and requests) served; more are answered 503. Every open SSE stream holds one,
    so the default leaves room for a few thousand live streams; ``serve`` raises its open-files limit
    (``RLIMIT_NOFILE``, up to the hard limit) to fit this many connections plus its own files."""
    cookie_secure_mode: Literal["auto", "always"] = "auto"
    """The console's session cookie is ``Secure`` when the request came over HTTPS (``auto``: uvicorn takes
    ``X-Forwarded-Proto`` only from the proxies in ``FORWARDED_ALLOW_IPS``, loopback by default), or always
    (``always``: behind a TLS-terminating proxy the host cannot see)."""
    login_max_failures: int = Field(default=5, ge=1, le=1000)
    """Wrong tokens one client may send to the console's ``POST /login`` within ``login_window_seconds``;
    further attempts are answered 429 with ``Retry-After`` until the oldest failure leaves the window."""
    login_window_seconds: float = Field(default=60.0, gt=0, le=86400)
    """The window of ``login_max_failures``."""

    @property
    def is_loopback(self) -> bool:
        """Whether the bind address is a loopback address."""
        return is_loopback_host(self.host)


class RunnersConfig(_Section):
    """``[runners]``: where runners come from."""

    entry_points: Literal["in_process", "subprocess", "off"] = "in_process"
    """Installed ``agentrunner.runners`` entry points: run in the host's process (trusted, installed code),
    each in its own supervised process, or ignored."""
    plugin_dirs: list[str] = []
    """Plugin directories (each holds plugin folders with a ``manifest.yaml``); always run out of process."""
    cancel_grace_seconds: float = Field(default=5.0, gt=0, le=600)
    """How long a run may go on after its cancellation or deadline before the host force-ends it; out of process
    a runner still ignoring it then gets its plugin process restarted (the plugin's other live runs end
    ``runtime.restarted``)."""
    ping_interval_seconds: float = Field(default=10.0, ge=0)
    """Seconds between liveness pings of each warm plugin process; 0 turns the pings off."""
    ping_timeout_seconds: float = Field(default=10.0, gt=0)
    """A plugin process that has not answered a ping within this is killed with its process group (its live runs
    end ``runtime.unresponsive``) and restarted with backoff on next use."""


class ClusterConfig(_Section):
    """``[cluster]``: this host among the others on one database (see docs/deployment.md)."""

    host_name: str | None = Field(default=None, min_length=1, max_length=255)
    """Name of the machine this host runs on (default: its host name); two machines must not share one,
    because a new process treats a dead process of its own machine's name as its previous incarnation."""
    heartbeat_seconds: float = Field(default=5.0, gt=0, le=3600)
    """How often the host renews its lease (and looks for runs of hosts whose lease expired)."""
    lease_seconds: float = Field(default=30.0, gt=0, le=86400)
    """How long after its last renewal a host counts as gone: its runs are then closed as ``host_restarted``
    by any other host. Longer than the heartbeat."""

    @model_validator(mode="after")
    def _lease_outlives_heartbeat(self) -> ClusterConfig:
        if self.lease_seconds <= self.heartbeat_seconds:
            raise ValueError("cluster.lease_seconds must be longer than cluster.heartbeat_seconds")
        return self


class RemotePluginConfig(_Section):
    """``[[runtime_server.plugins]]``: one plugin whose runtime connects to the host from elsewhere."""

    plugin_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
    """``author/plugin``: the identity every connection with this token gets (the runtime cannot choose it)."""
    token_env: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Environment variable holding the plugin's runtime token (at least 32 characters, random); the runtime
    presents the same value in ``$AGENTRUNNER_RUNTIME_TOKEN``."""


class RuntimeServerConfig(_Section):
    """``[runtime_server]``: the WebSocket endpoint where remote runtimes (``agentrunner-plugin --connect``)
    attach (see docs/deployment.md). Off while ``plugins`` is empty."""

    host: str = "127.0.0.1"
    """Bind address. The endpoint speaks plain ``ws://``: off loopback, put it on a private network or behind
    a TLS-terminating proxy."""
    port: int = Field(default=8421, ge=0, le=65535)
    """TCP port (0 = any free port, logged at start)."""
    connect_timeout_seconds: float = Field(default=10.0, gt=0, le=3600)
    """How long a run waits for a runtime of its plugin to be connected (to this host) before it fails
    ``runtime.unavailable``."""
    plugins: list[RemotePluginConfig] = []
    """Plugins served by remote runtimes, each with its own token."""

    @model_validator(mode="after")
    def _distinct(self) -> RuntimeServerConfig:
        ids = [p.plugin_id for p in self.plugins]
        if len(set(ids)) != len(ids):
            raise ValueError("runtime_server.plugins: a plugin is listed twice")
        return self


class HarnessMCPServer(_Section):
    """One extra MCP server a harness binding may add (``[[security.harness_mcp_servers]]``), pinned: a
    binding's ``mcp-config-json`` entry of this name must start exactly this ``command`` with exactly these
    ``args`` (a local stdio server) or reach exactly this ``url`` (a remote one). A name alone would let the
    binding run any program under an allowlisted name."""

    name: Identifier
    """The server's name in ``mcpServers``."""
    command: str | None = Field(default=None, min_length=1)
    """The program of a stdio server, as the binding must give it."""
    args: list[str] = []
    """Its arguments, in order (the binding's must be equal)."""
    env: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]] = []
    """Names of variables the binding may set for a stdio server (none by default: ``NODE_OPTIONS`` or
    ``LD_PRELOAD`` would change what the pinned command runs)."""
    url: str | None = Field(default=None, pattern=r"^https?://[^\s]+$")
    """The endpoint of a remote (``http`` / ``sse``) server; its ``headers`` may be set by the binding."""

    @model_validator(mode="after")
    def _one_transport(self) -> HarnessMCPServer:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"harness MCP server {self.name!r} needs exactly one of command or url")
        if self.url is not None and (self.args or self.env):
            raise ValueError(f"harness MCP server {self.name!r}: args and env belong to a command")
        return self

    def pin(self) -> dict[str, object]:
        """What the harness checks a binding's entry against (``runtime.metadata``)."""
        if self.url is not None:
            return {"url": self.url}
        return {"command": self.command, "args": list(self.args), "env": list(self.env)}


class HarnessSkill(_Section):
    """A skill a harness binding may project (``[[security.harness_skills]]``), pinned by its digest: the
    sha256 of the ``sha256sum`` lines of its files (``SKILL.md`` and any others), sorted; the refusal of an
    unpinned skill names the digest to pin after review."""

    name: str = Field(min_length=1, max_length=200)
    """The skill's name in ``skills-json``."""
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """Its digest."""
    version: str | None = Field(default=None, min_length=1)
    """The version it must declare, when given."""


def _pinned_servers(value: object) -> object:
    if not isinstance(value, list):
        return value
    items = cast(list[object], value)
    for item in items:
        if isinstance(item, str):
            raise ValueError(
                f"harness_mcp_servers entry {item!r} is a bare name: pin what it runs, "
                f'{{ name = "{item}", command = "...", args = [...] }} or {{ name = "{item}", url = "..." }}'
            )
    return items


class SecurityConfig(_Section):
    """``[security]``: what the operator allows runners to do."""

    allow_code_executing_runners: bool = False
    """Run runners whose manifest declares ``executes_code`` (Claude Code, Codex): they run a model's code
    on this machine. Off by default: such runners are refused at start-up and on every event."""
    harness_workspace_roots: list[str] = []
    """Directories a code-executing runner's ``working-directory`` may be inside (checked after realpath);
    per-conversation workspaces under ``<data_dir>/harness`` are always allowed."""
    harness_workspace_ttl_seconds: float = Field(default=2_592_000.0, ge=0)
    """Per-session workspaces under ``<data_dir>/harness/sessions`` unused this long (30 days) are deleted by
    the periodic sweep (``[state] sweep_interval_seconds``), never while a run uses one; the next turn of
    that conversation starts a fresh workspace and native session. 0 keeps them. A binding's own
    ``working-directory`` is never deleted."""
    harness_mcp_servers: list[HarnessMCPServer] = []
    """Extra MCP servers a binding may give a harness (``mcp-config-json``), each pinned to its command and
    arguments or its URL; none by default."""
    allow_danger_full_access: bool = False
    """Allow Codex's ``danger-full-access`` sandbox in a binding's config."""
    harness_skills: list[HarnessSkill] | None = None
    """Skills a harness binding may project (``skills-json``), each pinned to its digest (and version). Unset:
    skills are projected unverified, their digests recorded; set (even to ``[]``): only these."""

    @field_validator("harness_mcp_servers", mode="before")
    @classmethod
    def _no_bare_names(cls, value: object) -> object:
        return _pinned_servers(value)

    @field_validator("harness_mcp_servers")
    @classmethod
    def _unique_servers(cls, value: list[HarnessMCPServer]) -> list[HarnessMCPServer]:
        _unique("security.harness_mcp_servers", [s.name for s in value])
        return value

    @field_validator("harness_skills")
    @classmethod
    def _unique_skills(cls, value: list[HarnessSkill] | None) -> list[HarnessSkill] | None:
        _unique("security.harness_skills", [s.name for s in value or []])
        return value


class IsolationConfig(_Section):
    """``[isolation]``: how plugin processes are kept away from the host's secrets and resources."""

    plugin_user: str | None = None
    """Run plugin processes (plugin directories, subprocess entry points) as this account, e.g.
    ``agentrunner-plugin``; the host must run as root. Another uid cannot read the host's environment,
    memory, data directory or database. Unset: plugins run as the host's user."""
    plugin_command: list[str] = []
    """Program running the plugin runtime (the plugin's arguments are appended); default: the host's own
    interpreter with ``-m agentrunner.wire.plugin``. The plugin account must be able to execute it."""
    cpu_seconds: int | None = Field(default=None, ge=1)
    """CPU seconds per plugin process (a warm process serves many runs, so this bounds its lifetime's CPU);
    unset = no limit."""
    memory_mb: int | None = Field(default=None, ge=64)
    """Address space per plugin process in MiB (virtual, not resident memory); unset = no limit."""
    open_files: int | None = Field(default=1024, ge=16)
    """Open file descriptors per plugin process."""
    file_size_mb: int | None = Field(default=1024, ge=1)
    """Largest file a plugin process may write, in MiB."""
    non_dumpable: bool = True
    """``agentrunner serve`` marks itself non-dumpable: processes of its own uid cannot read its ``/proc``
    files (environment, memory) or attach a debugger."""
    scrub_environment: bool = True
    """``agentrunner serve`` removes the variables it read secrets from out of its own environment once read."""


class StateConfig(_Section):
    """``[state]``: how long host-owned state values live after their last write."""

    ttl_seconds: dict[
        Literal["conversation", "actor", "subject", "runner", "binding", "workspace"], float
    ] = {}
    """Scope → seconds a value lives after its last write, e.g. ``{ conversation = 2592000 }``; scopes not
    named never expire."""
    key_ttl_seconds: dict[str, Annotated[float, Field(ge=0)]] = {}
    """Key (or key prefix ending in ``*``) → seconds, in any scope; wins over the scope's rule (an exact key
    first, then the longest prefix). 0 keeps the key forever."""
    sweep_interval_seconds: float = Field(default=3600.0, gt=0)
    """How often expired values (and expired artifacts and idempotency answers) are deleted; they are
    unreadable from the moment they expire."""
    idempotency_ttl_seconds: float = Field(default=604_800.0, gt=0)
    """How long the first answer of a side-effecting back-call is kept for its ``idempotency_key`` (7 days): a
    repeat of the key within it gets that answer, a later one acts again. Deleted by the sweep."""

    @model_validator(mode="after")
    def _positive(self) -> StateConfig:
        for scope, ttl in self.ttl_seconds.items():
            if ttl <= 0:
                raise ValueError(
                    f"state.ttl_seconds.{scope} must be more than 0 (leave a scope out to keep it)"
                )
        return self


class DefaultsConfig(_Section):
    """``[defaults]``: the zero-configuration behaviour."""

    binding: bool = True
    """Add a global ``message.received`` binding at the lowest priority, so every message gets an answer
    even before any binding is configured (any configured binding of the same scope takes precedence)."""
    runner_id: str | None = None
    """Runner of that default binding; the echo runner, or local-agent once a model is configured."""
    runner_config: dict[str, object] = {}
    """Its runner config."""


EVENT_TYPE_PATTERN: Final = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$"
"""A stable dotted event type (``message.received``, ``schedule.triggered``): lower-case words joined by dots.
A platform's own name (``"Message Received"``, ``FriendMessage``) belongs in ``source_event_type``."""

_EVENT_TYPE = re.compile(EVENT_TYPE_PATTERN)


class BindingSpec(_Section):
    """A binding as configured: which events go to which agent (``[[bindings]]`` and ``/v1/bindings``)."""

    binding_id: Identifier
    """Id (:data:`~agentrunner_host.admission.ID_PATTERN`)."""
    agent_id: Identifier
    """The agent that handles the events."""
    scope: BindingScope = BindingScope()
    """Where it applies (``global``, ``workspace``, ``bot``, ``actor``, ``conversation``)."""
    event_types: list[str] = Field(default=["message.received"], min_length=1)
    """Event types it handles (``*`` = any)."""
    filters: list[EventFilter] = []
    """Extra conditions on event fields."""
    priority: int = Field(default=0, ge=-1_000_000, le=1_000_000)
    """Tie-breaker among equally specific bindings (higher wins)."""
    enabled: bool = True
    """Disabled bindings never match."""

    @field_validator("event_types")
    @classmethod
    def _dotted_event_types(cls, value: list[str]) -> list[str]:
        for event_type in value:
            if event_type != "*" and not _EVENT_TYPE.match(event_type):
                raise ValueError(
                    f"event type {event_type!r} is not a stable dotted name such as message.received (or *)"
                )
        return value

    @model_validator(mode="after")
    def _scope_id(self) -> BindingSpec:
        if self.scope.type != "global" and not self.scope.id:
            raise ValueError(f"a {self.scope.type} scope needs an id")
        return self

    def project(self, agent: AgentConfig) -> AgentBinding:
        """The host binding of this spec for *agent* (whose runner config is already resolved)."""
        binding = AgentBinding.from_agent(
            agent,
            binding_id=self.binding_id,
            scope=self.scope,
            event_types=list(self.event_types),
            filters=list(self.filters),
            priority=self.priority,
        )
        return binding if self.enabled else binding.model_copy(update={"enabled": False})


class HostConfig(_Section):
    """The whole configuration file."""

    data_dir: str | None = None
    """Data directory (database, artifacts, operator-managed agents); see the operator guide for the default."""
    database_url: str | None = None
    """SQLAlchemy URL (``sqlite+aiosqlite:///...`` or ``postgresql+asyncpg://...``, without password: use
    ``database_url_env`` or ``AGENTRUNNER_DATABASE_URL`` for a URL with credentials). Default: SQLite in the
    data directory."""
    database_url_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Environment variable holding the database URL."""
    max_timeout_seconds: float = Field(default=3600.0, gt=0)
    """Upper bound of any run's deadline."""
    result_flush_ms: float = Field(default=0.0, ge=0, le=1000)
    """How long the host collects results of live runs before it commits them together (group commit; a
    result is delivered only once committed). 0: commit as soon as the writer gets to run."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    """Log level of ``agentrunner serve``."""
    http: HttpConfig = HttpConfig()
    """HTTP API."""
    runners: RunnersConfig = RunnersConfig()
    """Runner sources."""
    cluster: ClusterConfig = ClusterConfig()
    """Host registry and leases (several hosts on one database)."""
    runtime_server: RuntimeServerConfig = RuntimeServerConfig()
    """Where remote runtimes attach."""
    isolation: IsolationConfig = IsolationConfig()
    """Plugin process isolation and quotas."""
    defaults: DefaultsConfig = DefaultsConfig()
    """Zero-configuration behaviour."""
    security: SecurityConfig = SecurityConfig()
    """What runners may do."""
    state: StateConfig = StateConfig()
    """Lifetime of host-owned state."""
    models: list[ModelConfig] = []
    """Model providers."""
    mcp_servers: list[MCPServerConfig] = []
    """MCP tool servers (their tools are granted as ``<server>__<tool>``)."""
    python_tools: bool = True
    """Serve the tools installed under the ``agentrunner.tools`` entry-point group."""
    knowledge_bases: list[KnowledgeBaseConfig] = []
    """Knowledge bases."""
    agents: list[AgentConfig] = []
    """Agents (runner + config + policies)."""
    bindings: list[BindingSpec] = []
    """Bindings (events → agent)."""

    @model_validator(mode="after")
    def _references(self) -> HostConfig:
        _unique("models", [m.id for m in self.models])
        _unique("mcp_servers", [t.name for t in self.mcp_servers])
        _unique("knowledge_bases", [k.id for k in self.knowledge_bases])
        _unique("agents", [a.agent_id for a in self.agents])
        _unique("bindings", [b.binding_id for b in self.bindings])
        agents = {a.agent_id for a in self.agents}
        for b in self.bindings:
            if b.agent_id not in agents:
                raise ValueError(f"binding {b.binding_id!r} names unknown agent {b.agent_id!r}")
        models = {m.id for m in self.models}
        for kb in self.knowledge_bases:
            if kb.rerank_model_id is not None and kb.rerank_model_id not in models:
                raise ValueError(
                    f"knowledge base {kb.id!r} names unknown rerank model {kb.rerank_model_id!r}"
                )
        return self


def _unique(section: str, ids: list[str]) -> None:
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            raise ValueError(f"{section}: duplicate id {i!r}")
        seen.add(i)
