"""The plugin runtime: runners out of process, discovered from manifests, one warm process per plugin.

* :func:`discover_plugins` reads plugin directories (``manifest.yaml``) and ``agentrunner.runners`` entry points;
* :class:`SubprocessRunnerConnection` runs one plugin in a supervised child process and speaks the wire
  protocol (``docs/wire.md``) with it;
* :class:`RuntimeManager` maps plugin ids to connections, started lazily;
* :class:`RemoteRuntimeServer` accepts runtimes on other machines over an authenticated WebSocket.
"""

from .discovery import (
    MANIFEST_FILE,
    DiscoveryResult,
    DiscoveryWarning,
    PluginSpec,
    RunnerEntry,
    discover_entry_points,
    discover_plugins,
    load_plugin_dir,
)
from .environment import DEFAULT_ENV_ALLOWLIST, Redactor, build_child_env
from .manager import RuntimeManager
from .manifest import PluginManifest
from .process import RuntimeOptions, SubprocessRunnerConnection, default_command
from .remote import UNAVAILABLE, RemoteRunnerConnection, RemoteRuntimeServer
from .session import CLOSED, CRASHED, PROTOCOL_ERROR, START_FAILED, WireSession

__all__ = (
    # discovery
    "discover_plugins",
    "discover_entry_points",
    "load_plugin_dir",
    "DiscoveryResult",
    "DiscoveryWarning",
    "PluginSpec",
    "RunnerEntry",
    "PluginManifest",
    "MANIFEST_FILE",
    # supervision
    "RuntimeManager",
    "SubprocessRunnerConnection",
    "RuntimeOptions",
    "default_command",
    "WireSession",
    # remote runtimes (WebSocket)
    "RemoteRuntimeServer",
    "RemoteRunnerConnection",
    # child environment
    "DEFAULT_ENV_ALLOWLIST",
    "build_child_env",
    "Redactor",
    # failure codes
    "CRASHED",
    "PROTOCOL_ERROR",
    "CLOSED",
    "START_FAILED",
    "UNAVAILABLE",
)
