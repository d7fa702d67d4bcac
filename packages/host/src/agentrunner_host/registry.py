"""The runner registry: which runners exist, discovered from plugin connections (HOST_SDK §4.3).

* Each plugin's manifests are validated one by one: a bad manifest is a warning naming the plugin and the
  reason, and never hides the plugin's other runners or other plugins.
* A plugin may only declare runner ids under its own identity (``plugin:<its author>/<its name>/...``).
* ``protocol_version`` must have a supported major version; incompatible runners are left out with a warning.
* A failed discovery is never cached as "no runners": the plugin is retried on the next lookup, and a lookup
  of an unknown id refreshes once before failing.
* A plugin that yields no runner is a :class:`PluginFailure` with its reason (:attr:`RunnerRegistry.failures`),
  shown next to the runners by the API and the CLI, until a later discovery of it succeeds. Failures found
  before a connection exists (a manifest that does not parse) are recorded with :meth:`record_failure`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from agentrunner import AgentRunnerManifest, InvalidRunnerIdError, RunnerId, is_compatible_protocol
from pydantic import ValidationError

from agentrunner_host.runtime.connection import RunnerConnection

from .errors import HostError, RunnerNotFoundError, RunnerUnavailableError
from .runtime.discovery import PluginSpec

__all__ = ["PluginFailure", "RegistryWarning", "RunnerDescriptor", "RunnerRegistry"]

log = logging.getLogger("agentrunner.host.registry")


@dataclass(frozen=True, slots=True)
class RunnerDescriptor:
    """A validated runner the host can run."""

    runner_id: str
    """Canonical id."""
    plugin_id: str
    """Owning plugin ``author/plugin``."""
    manifest: AgentRunnerManifest
    """Its validated manifest."""
    source: str = "plugin"
    """Always ``plugin`` (§13: nothing bypasses the plugin/runtime/proxy chain)."""


@dataclass(frozen=True, slots=True)
class RegistryWarning:
    """Why a plugin or one of its manifests was left out."""

    plugin_id: str
    """The plugin."""
    message: str
    """What was wrong."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PluginFailure:
    """A plugin that yields no runner, and why (its runtime did not start, every manifest was refused...)."""

    plugin_id: str | None
    """``author/plugin``, when known (a manifest that does not parse may not say)."""
    reason: str
    """What went wrong, e.g. ``... No module named 'pydantic_ai'``."""
    source: str = ""
    """Where the plugin was found: a manifest path, ``entry-point:<distribution>``..."""


class RunnerRegistry:
    """Runner descriptors from the registered plugin connections, cached and refreshed on change."""

    def __init__(
        self, connections: Iterable[RunnerConnection] = (), *, miss_refresh_interval: float = 1.0
    ) -> None:
        self._connections: dict[str, RunnerConnection] = {}
        for c in connections:
            self._connections[c.plugin_id] = c
        self._descriptors: dict[str, RunnerDescriptor] = {}
        self._loaded: set[str] = set()  # plugins whose last discovery succeeded
        self._warnings: list[RegistryWarning] = []
        self._failures: dict[str, PluginFailure] = {}  # by plugin id: its last discovery yielded nothing
        self._recorded: list[PluginFailure] = []  # found before any connection existed
        self._lock = asyncio.Lock()
        self._miss_refresh_interval = miss_refresh_interval
        self._last_miss_refresh = 0.0

    @property
    def warnings(self) -> list[RegistryWarning]:
        """Warnings of the last refresh."""
        return list(self._warnings)

    @property
    def failures(self) -> list[PluginFailure]:
        """Plugins that yield no runner: those recorded with :meth:`record_failure`, then those whose last
        discovery failed (by plugin id)."""
        return [*self._recorded, *(self._failures[pid] for pid in sorted(self._failures))]

    def failure(self, plugin_id: str) -> PluginFailure | None:
        """Why *plugin_id* yields no runner, if it does not."""
        found = self._failures.get(plugin_id)
        if found is not None:
            return found
        return next((f for f in self._recorded if f.plugin_id == plugin_id), None)

    def record_failure(self, failure: PluginFailure) -> None:
        """Remember a plugin that could not even be registered (its manifest is unusable)."""
        self._recorded.append(failure)

    def connection(self, plugin_id: str) -> RunnerConnection:
        """The live connection of a plugin."""
        try:
            return self._connections[plugin_id]
        except KeyError:
            raise RunnerUnavailableError(plugin_id, "plugin is not installed") from None

    def connections(self) -> list[RunnerConnection]:
        """All plugin connections."""
        return list(self._connections.values())

    def add(self, connection: RunnerConnection) -> None:
        """Install (or replace) a plugin; its runners are discovered on the next lookup."""
        self._connections[connection.plugin_id] = connection
        self._forget(connection.plugin_id)

    def remove(self, plugin_id: str) -> RunnerConnection | None:
        """Uninstall a plugin; its runners disappear at once."""
        self._forget(plugin_id)
        return self._connections.pop(plugin_id, None)

    def _forget(self, plugin_id: str) -> None:
        self._loaded.discard(plugin_id)
        self._failures.pop(plugin_id, None)
        for rid in [rid for rid, d in self._descriptors.items() if d.plugin_id == plugin_id]:
            del self._descriptors[rid]

    async def refresh(self, *, only_missing: bool = False) -> list[RegistryWarning]:
        """Re-discover every plugin (or only those not loaded yet). Returns the warnings."""
        async with self._lock:
            warnings: list[RegistryWarning] = []
            targets = [
                c for pid, c in self._connections.items() if not (only_missing and pid in self._loaded)
            ]
            results = await asyncio.gather(*(self._discover(c) for c in targets), return_exceptions=True)
            for conn, result in zip(targets, results, strict=True):
                pid = conn.plugin_id
                if isinstance(result, BaseException):
                    # Keep what we knew before; a transient failure must not look like "no runners".
                    self._loaded.discard(pid)
                    what = "" if isinstance(result, HostError) else f"{type(result).__name__}: "
                    reason = f"discovery failed: {what}{result}"
                    warnings.append(RegistryWarning(pid, reason))
                    self._failures[pid] = PluginFailure(plugin_id=pid, reason=reason, source=_source(conn))
                    continue
                descriptors, plugin_warnings = result
                warnings.extend(plugin_warnings)
                self._forget(pid)
                for d in descriptors:
                    self._descriptors[d.runner_id] = d
                self._loaded.add(pid)
                if not descriptors:
                    why = "; ".join(w.message for w in plugin_warnings) or "the plugin declares no runner"
                    self._failures[pid] = PluginFailure(
                        plugin_id=pid, reason=f"no usable runner: {why}", source=_source(conn)
                    )
            for w in warnings:
                log.warning("runner registry: plugin %s: %s", w.plugin_id, w.message)
            self._warnings = warnings
            return warnings

    async def _discover(self, conn: RunnerConnection) -> tuple[list[RunnerDescriptor], list[RegistryWarning]]:
        raw = await conn.list_runners()
        declared = _declared_in_manifest_file(conn)
        out: list[RunnerDescriptor] = []
        warnings: list[RegistryWarning] = []
        for index, item in enumerate(raw):
            where = f"manifest #{index}"
            try:
                manifest = AgentRunnerManifest.model_validate(item)
            except ValidationError as exc:
                first = exc.errors()[0]
                loc = ".".join(str(p) for p in first["loc"])
                warnings.append(
                    RegistryWarning(conn.plugin_id, f"{where} is invalid at {loc}: {first['msg']}")
                )
                continue
            where = f"runner {manifest.id}"
            if manifest.runner_id.plugin_id != conn.plugin_id:
                warnings.append(
                    RegistryWarning(conn.plugin_id, f"{where} is outside the plugin's own id space; ignored")
                )
                continue
            if manifest.runner_id.runner != manifest.name:
                warnings.append(
                    RegistryWarning(
                        conn.plugin_id, f"{where}: manifest name {manifest.name!r} differs from the id"
                    )
                )
                continue
            if not is_compatible_protocol(manifest.protocol_version):
                warnings.append(
                    RegistryWarning(
                        conn.plugin_id,
                        f"{where} speaks protocol {manifest.protocol_version!r}; this host speaks 1",
                    )
                )
                continue
            repeated = declared.get(manifest.name)
            differences = [] if repeated is None else manifest_differences(repeated, manifest)
            if differences:
                warnings.append(
                    RegistryWarning(
                        conn.plugin_id,
                        f"{where}: manifest.yaml declares {', '.join(differences)} unlike the runner class, "
                        "which is the declaration; remove `spec` from manifest.yaml or make it equal",
                    )
                )
                continue
            if manifest.id in {d.runner_id for d in out}:
                warnings.append(
                    RegistryWarning(conn.plugin_id, f"{where} is declared twice; the first one is kept")
                )
                continue
            out.append(RunnerDescriptor(runner_id=manifest.id, plugin_id=conn.plugin_id, manifest=manifest))
        return out, warnings

    async def list(self) -> list[RunnerDescriptor]:
        """Every available runner (discovering plugins not loaded yet)."""
        if set(self._connections) - self._loaded:
            await self.refresh(only_missing=True)
        return sorted(self._descriptors.values(), key=lambda d: d.runner_id)

    async def get(self, runner_id: str) -> RunnerDescriptor:
        """The descriptor of *runner_id*; raises :class:`RunnerNotFoundError`."""
        found = self._descriptors.get(runner_id)
        if found is not None:
            return found  # the keys are valid ids as RunnerId spells them: nothing to parse (every run asks)
        try:
            rid = str(RunnerId.parse(runner_id))
        except InvalidRunnerIdError as exc:
            raise RunnerNotFoundError(runner_id, reason=exc.reason) from None
        found = self._descriptors.get(rid)
        if found is not None:
            return found
        plugin_id = RunnerId.parse(rid).plugin_id
        if plugin_id not in self._connections:
            failure = self.failure(plugin_id)
            if failure is not None:
                raise RunnerNotFoundError(rid, reason=f"plugin {plugin_id} failed to load ({failure.reason})")
            raise RunnerNotFoundError(rid, reason=f"plugin {plugin_id} is not installed")
        now = time.monotonic()
        if plugin_id not in self._loaded or now - self._last_miss_refresh >= self._miss_refresh_interval:
            self._last_miss_refresh = now
            await self.refresh(only_missing=plugin_id not in self._loaded)
        found = self._descriptors.get(rid)
        if found is None:
            reason = "not declared by its plugin"
            failure = self._failures.get(plugin_id)
            if plugin_id not in self._loaded:
                reason = "its plugin's discovery failed"
                if failure is not None:
                    reason = f"{reason} ({failure.reason})"
            raise RunnerNotFoundError(rid, reason=reason)
        return found


_DECLARATION_FIELDS = ("protocol_version", "capabilities", "permissions", "context", "config_schema")


def manifest_differences(repeated: AgentRunnerManifest, actual: AgentRunnerManifest) -> list[str]:
    """The declaration fields (capabilities, permissions, context policy, config form, protocol) in which a
    repeated manifest (``manifest.yaml``) differs from the runner's own."""
    left = repeated.model_dump(mode="json", include=set(_DECLARATION_FIELDS))
    right = actual.model_dump(mode="json", include=set(_DECLARATION_FIELDS))
    return [name for name in _DECLARATION_FIELDS if left.get(name) != right.get(name)]


def _declared_in_manifest_file(conn: RunnerConnection) -> dict[str, AgentRunnerManifest]:
    # Only runtime connections come from a manifest file; they expose the spec discovery built from it.
    spec = getattr(conn, "spec", None)
    if not isinstance(spec, PluginSpec):
        return {}
    return {r.name: r.manifest for r in spec.runners if r.declared and r.manifest is not None}


def _source(conn: RunnerConnection) -> str:
    # Runtime connections know where their plugin came from; other connections (in process, tests) do not.
    spec = getattr(conn, "spec", None)
    source = getattr(spec, "source", None)
    return source if isinstance(source, str) else ""
