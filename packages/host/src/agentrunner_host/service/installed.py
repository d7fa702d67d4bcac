"""The plugins installed into their own environments (``agentrunner plugins install``), kept in step with the
records under the data directory while the host runs.

An install, upgrade or removal done by the CLI next to a running server is picked up before the next event
(checked at most once a second): a new or upgraded plugin gets a fresh connection for new runs, and the old
process is closed once the runs live on it have ended (drained); a removed plugin's runners disappear.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Final

from agentrunner_host.errors import HostError
from agentrunner_host.registry import PluginFailure, RunnerRegistry
from agentrunner_host.runtime import RuntimeManager
from agentrunner_host.runtime.plugin_envs import (
    PLUGINS_DIR,
    InstalledPlugin,
    installed_plugins,
    record_status,
)

__all__ = ["InstalledPlugins"]

log = logging.getLogger("agentrunner.service")

_CHECK_EVERY: Final = 1.0


def _fingerprint(data_dir: Path) -> tuple[tuple[str, int], ...]:
    root = data_dir / PLUGINS_DIR
    if not root.is_dir():
        return ()
    marks: list[tuple[str, int]] = []
    for record in sorted(root.glob("*/plugin.json")):
        try:
            marks.append((str(record), record.stat().st_mtime_ns))
        except OSError:
            continue
    return tuple(marks)


class InstalledPlugins:
    """The installed plugins a host serves, by id."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.plugins: dict[str, InstalledPlugin] = {}
        """Installed plugins by id, as last loaded."""
        self.failures: list[PluginFailure] = []
        """Records that could not be read or registered."""
        self._mark = _fingerprint(data_dir)
        self._checked = time.monotonic()
        self._drains: set[asyncio.Task[None]] = set()
        found, broken = installed_plugins(data_dir)
        self.plugins = {p.plugin_id: p for p in found}
        self.failures = [PluginFailure(plugin_id=None, reason=why, source=str(path)) for path, why in broken]

    def register(self, runtime: RuntimeManager) -> None:
        """Add every installed plugin to *runtime* (a clash with a plugin directory is a failure)."""
        for plugin in list(self.plugins.values()):
            try:
                runtime.add(plugin.spec())
            except HostError as exc:
                del self.plugins[plugin.plugin_id]
                self.failures.append(
                    PluginFailure(
                        plugin_id=plugin.plugin_id, reason=str(exc), source=f"installed:{plugin.home}"
                    )
                )

    def record_discovery(self, registry: RunnerRegistry) -> None:
        """Write each installed plugin's outcome of the last discovery (shown by ``plugins list``)."""
        for plugin in self.plugins.values():
            failure = registry.failure(plugin.plugin_id)
            record_status(self.data_dir, plugin, None if failure is None else failure.reason)

    def sync(self, runtime: RuntimeManager, registry: RunnerRegistry) -> None:
        """Pick up installs, upgrades and removals made since the last check (at most once a second)."""
        now = time.monotonic()
        if now - self._checked < _CHECK_EVERY:
            return
        self._checked = now
        mark = _fingerprint(self.data_dir)
        if mark == self._mark:
            return
        self._mark = mark
        found, _ = installed_plugins(self.data_dir)
        current = {p.plugin_id: p for p in found}
        for plugin_id in set(self.plugins) - set(current):
            log.info("plugin %s was removed; its runners are gone", plugin_id)
            registry.remove(plugin_id)
            self._drain(runtime.remove(plugin_id))
        for plugin_id, plugin in current.items():
            known = self.plugins.get(plugin_id)
            if known is not None and known.generation == plugin.generation:
                continue
            if known is None and plugin_id in runtime.plugins:
                continue  # provided by a plugin directory, which wins
            log.info("plugin %s: generation %d installed; new runs use it", plugin_id, plugin.generation)
            self._drain(runtime.replace(plugin.spec()))
            registry.add(runtime.connection(plugin_id))
        self.plugins = {i: p for i, p in current.items() if i in runtime.plugins}

    def _drain(self, connection: object) -> None:
        if connection is None:
            return
        from agentrunner_host.runtime import SubprocessRunnerConnection

        if isinstance(connection, SubprocessRunnerConnection):
            task = asyncio.create_task(RuntimeManager.drain(connection), name="agentrunner-plugin-drain")
            self._drains.add(task)
            task.add_done_callback(self._drains.discard)

    async def aclose(self) -> None:
        """Wait for the old processes being drained (the runtime closes the current ones)."""
        if self._drains:
            await asyncio.gather(*self._drains, return_exceptions=True)
