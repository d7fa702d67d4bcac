"""``RuntimeManager``: plugin ids → supervised runtime connections, created and started lazily."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from agentrunner import RunnerId

from agentrunner_host.errors import HostError, RunnerNotFoundError
from agentrunner_host.runtime.connection import BackCallHandler

from .discovery import DiscoveryWarning, PluginSpec, discover_plugins
from .process import RuntimeOptions, SubprocessRunnerConnection

__all__ = ["RuntimeManager"]

_log = logging.getLogger("agentrunner_host.runtime")

_HOST_PYTHON_ENV = frozenset({"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "PYTHONUSERBASE"})


class RuntimeManager:
    """Owns one :class:`SubprocessRunnerConnection` per plugin. A connection is created on first lookup and its
    process starts on first use; :meth:`aclose` stops them all.

    >>> manager = RuntimeManager.from_directories([Path("plugins")], handler)   # doctest: +SKIP
    >>> conn = manager.connection_for_runner("plugin:acme/echo/default")      # doctest: +SKIP
    """

    def __init__(
        self,
        handler: BackCallHandler,
        *,
        plugins: Iterable[PluginSpec] = (),
        options: RuntimeOptions | None = None,
        overrides: Mapping[str, RuntimeOptions] | None = None,
    ) -> None:
        self._handler = handler
        self._options = options or RuntimeOptions()
        self._overrides = dict(overrides or {})
        self._plugins: dict[str, PluginSpec] = {}
        self._connections: dict[str, SubprocessRunnerConnection] = {}
        self.discovery_warnings: list[DiscoveryWarning] = []
        """Warnings of :meth:`from_directories`."""
        for spec in plugins:
            self.add(spec)

    @classmethod
    def from_directories(
        cls,
        plugin_dirs: Iterable[Path],
        handler: BackCallHandler,
        *,
        entry_points: bool = False,
        options: RuntimeOptions | None = None,
        overrides: Mapping[str, RuntimeOptions] | None = None,
    ) -> RuntimeManager:
        """A manager of every plugin :func:`discover_plugins` finds; its warnings are in ``discovery_warnings``."""
        found = discover_plugins(plugin_dirs, entry_points=entry_points)
        manager = cls(handler, plugins=found.plugins.values(), options=options, overrides=overrides)
        manager.discovery_warnings = found.warnings
        return manager

    @property
    def plugins(self) -> Mapping[str, PluginSpec]:
        """Known plugins by id."""
        return self._plugins

    def add(self, spec: PluginSpec) -> None:
        """Register a plugin; raises :class:`HostError` when its id is taken."""
        if spec.plugin_id in self._plugins:
            raise HostError(
                f"plugin {spec.plugin_id} is already registered (from {self._plugins[spec.plugin_id].source})"
            )
        self._plugins[spec.plugin_id] = spec

    def replace(self, spec: PluginSpec) -> SubprocessRunnerConnection | None:
        """Register *spec* in place of the plugin of the same id (an upgrade): the next lookup gets a new
        connection. Returns the old connection, still running, for the caller to :meth:`drain`."""
        self._plugins[spec.plugin_id] = spec
        return self._connections.pop(spec.plugin_id, None)

    def remove(self, plugin_id: str) -> SubprocessRunnerConnection | None:
        """Forget a plugin; returns its connection, still running, for the caller to :meth:`drain`."""
        self._plugins.pop(plugin_id, None)
        return self._connections.pop(plugin_id, None)

    @staticmethod
    async def drain(connection: SubprocessRunnerConnection, *, poll: float = 0.05) -> None:
        """Close *connection* once the runs live on it have ended (no new run reaches a replaced one)."""
        # The session has no "idle" event to wait on; only a replaced connection is polled, while it drains.
        while connection.live_runs:  # noqa: ASYNC110
            await asyncio.sleep(poll)
        await connection.aclose()

    def options_for(self, plugin_id: str) -> RuntimeOptions:
        """The options a plugin's process runs with: its override, else the defaults — started with the
        interpreter of its own environment when it was installed into one."""
        override = self._overrides.get(plugin_id)
        if override is not None:
            return override
        spec = self._plugins.get(plugin_id)
        if spec is None or spec.python is None:
            return self._options
        env_dir = spec.python.parent.parent
        return replace(
            self._options,
            command=[str(spec.python), "-m", "agentrunner.wire.plugin"],
            # The host's own Python search path must not leak into the plugin's environment.
            env_allowlist=self._options.env_allowlist - _HOST_PYTHON_ENV,
            env={**self._options.env, "VIRTUAL_ENV": str(env_dir)},
        )

    def connection(self, plugin_id: str) -> SubprocessRunnerConnection:
        """The plugin's connection (created now if needed; its process starts on first use)."""
        connection = self._connections.get(plugin_id)
        if connection is None:
            spec = self._plugins.get(plugin_id)
            if spec is None:
                raise RunnerNotFoundError(
                    f"plugin:{plugin_id}/*", reason=f"no plugin {plugin_id} is installed"
                )
            connection = SubprocessRunnerConnection(spec, self._handler, options=self.options_for(plugin_id))
            self._connections[plugin_id] = connection
        return connection

    def connection_for_runner(self, runner_id: str) -> SubprocessRunnerConnection:
        """The connection of the plugin that owns *runner_id* (``plugin:author/plugin/runner``)."""
        return self.connection(RunnerId.parse(runner_id).plugin_id)

    async def list_runners(self) -> dict[str, list[dict[str, Any]]]:
        """Every plugin's runner manifests, asked from the runtimes concurrently; a plugin that fails is logged and
        left out."""
        ids = list(self._plugins)
        answers = await asyncio.gather(
            *(self.connection(i).list_runners() for i in ids), return_exceptions=True
        )
        out: dict[str, list[dict[str, Any]]] = {}
        for plugin_id, answer in zip(ids, answers, strict=True):
            if isinstance(answer, BaseException):
                _log.warning("plugin %s: listing runners failed: %s", plugin_id, answer)
                continue
            out[plugin_id] = answer
        return out

    async def aclose(self) -> None:
        """Stop every plugin process."""
        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(c.aclose() for c in connections), return_exceptions=True)

    async def __aenter__(self) -> RuntimeManager:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
