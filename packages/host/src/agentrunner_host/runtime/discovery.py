"""Finding plugins: directories with a ``manifest.yaml`` and installed ``agentrunner.runners`` entry points.

Discovery never imports plugin code into the host. Each bad manifest becomes a :class:`DiscoveryWarning` naming
the file and the reason (and a log warning); it never hides the good plugins next to it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, cast

import yaml
from agentrunner import AgentRunnerManifest, InvalidRunnerIdError, RunnerId, is_compatible_protocol
from agentrunner.wire import ENTRY_POINT_GROUP
from pydantic import ValidationError

from .manifest import PluginManifest

__all__ = [
    "MANIFEST_FILE",
    "DiscoveryResult",
    "DiscoveryWarning",
    "PluginSpec",
    "RunnerEntry",
    "discover_entry_points",
    "discover_plugins",
    "load_plugin_dir",
]

MANIFEST_FILE = "manifest.yaml"
"""File name of a plugin directory's manifest."""

_log = logging.getLogger("agentrunner_host.runtime.discovery")


@dataclass(frozen=True, kw_only=True, slots=True)
class RunnerEntry:
    """One runner of a plugin, as discovery found it."""

    name: str
    """Runner name inside the plugin."""
    ref: str
    """Class reference for ``agentrunner-plugin --runner`` (``module:Class`` or ``file.py:Class``)."""
    manifest: AgentRunnerManifest | None = None
    """The declaration from ``manifest.yaml``; ``None`` for entry points (the runtime reports it when asked)."""
    declared: bool = False
    """``manifest.yaml`` repeats the runner's declaration (``spec``): the registry then checks it against the
    class's, which stays the one source."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PluginSpec:
    """Everything needed to start a plugin's runtime process."""

    plugin_id: str
    """Identity ``author/plugin``: stamped as ``caller`` on every back-call of its runtime."""
    runners: tuple[RunnerEntry, ...]
    """Its runners."""
    plugin_dir: Path | None = None
    """The plugin directory (put on the runtime's ``sys.path``); ``None`` for installed distributions."""
    source: str = ""
    """Where it was found: the manifest path or ``entry-point:<distribution>``."""
    version: str | None = None
    """Plugin version, when declared."""
    python: Path | None = None
    """The interpreter of the plugin's own environment (``agentrunner plugins install``); ``None``: the
    runtime's configured command (by default the host's interpreter)."""

    def __post_init__(self) -> None:
        RunnerId.parse(f"plugin:{self.plugin_id}/x")

    def runtime_args(self) -> list[str]:
        """Arguments of ``agentrunner-plugin`` that load exactly this plugin's runners."""
        args: list[str] = []
        if self.plugin_dir is not None:
            args += ["--plugin-dir", str(self.plugin_dir)]
        for runner in self.runners:
            args += ["--runner", runner.ref]
        args += ["--plugin-id", self.plugin_id]
        return args

    def runner_ids(self) -> list[str]:
        """``plugin:author/plugin/runner`` of each runner."""
        return [f"plugin:{self.plugin_id}/{runner.name}" for runner in self.runners]


@dataclass(frozen=True, slots=True)
class DiscoveryWarning:
    """A plugin (or one of its runners) that could not be loaded, and why."""

    path: str
    """The manifest file (or entry point) at fault."""
    reason: str
    """What is wrong with it."""
    plugin_id: str | None = field(default=None, kw_only=True)
    """``author/plugin`` when the manifest says so, even if it is otherwise unusable."""
    fatal: bool = field(default=False, kw_only=True)
    """The whole plugin was skipped (not just one of its runners)."""

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass(slots=True)
class DiscoveryResult:
    """Plugins found, by id, and the warnings of those skipped."""

    plugins: dict[str, PluginSpec] = field(default_factory=dict[str, PluginSpec])
    """Good plugins by ``author/plugin``."""
    warnings: list[DiscoveryWarning] = field(default_factory=list[DiscoveryWarning])
    """One per skipped manifest, runner or entry point."""

    def add_warning(
        self, path: Path | str, reason: str, *, plugin_id: str | None = None, fatal: bool = False
    ) -> None:
        """Record (and log) a skipped plugin, or a skipped runner of a plugin (*fatal* false)."""
        warning = DiscoveryWarning(str(path), reason, plugin_id=plugin_id, fatal=fatal)
        _log.warning("skipping %s: %s", "plugin" if fatal else "runner", warning)
        self.warnings.append(warning)

    @property
    def failed(self) -> list[DiscoveryWarning]:
        """The warnings of plugins skipped entirely."""
        return [w for w in self.warnings if w.fatal]

    def add_plugin(self, spec: PluginSpec) -> None:
        """Add a plugin; a duplicate id is a warning, the first one stays."""
        existing = self.plugins.get(spec.plugin_id)
        if existing is not None:
            self.add_warning(
                spec.source,
                f"plugin {spec.plugin_id} is already provided by {existing.source}",
                plugin_id=spec.plugin_id,
            )
            return
        self.plugins[spec.plugin_id] = spec


def load_plugin_dir(plugin_dir: Path) -> tuple[PluginSpec | None, list[str]]:
    """Parse ``plugin_dir/manifest.yaml``: the spec (``None`` when unusable) and the reasons of what is wrong.

    A runner whose ``protocol_version`` is incompatible is left out with a reason (PROTOCOL_V1 §3); the plugin
    stays usable if another runner remains.
    """
    path = plugin_dir / MANIFEST_FILE
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return None, [f"cannot read: {exc}"]
    except yaml.YAMLError as exc:
        return None, [f"invalid YAML: {exc}"]
    if not isinstance(data, dict):
        return None, ["the manifest must be a mapping"]
    try:
        manifest = PluginManifest.model_validate(data)
    except ValidationError as exc:
        return None, [_describe(exc)]
    reasons: list[str] = []
    runners: list[RunnerEntry] = []
    for entry in manifest.runner_entries():
        python = entry.execution.python
        if python.path is not None and not (plugin_dir / python.path).is_file():
            reasons.append(f"runner {entry.name!r}: execution.python.path {python.path!r} does not exist")
            continue
        if not is_compatible_protocol(entry.spec.protocol_version):
            reasons.append(
                f"runner {entry.name!r}: protocol_version {entry.spec.protocol_version!r} is not supported"
            )
            continue
        try:
            declared = manifest.runner_manifest(entry)
        except (ValidationError, InvalidRunnerIdError) as exc:
            reasons.append(f"runner {entry.name!r}: {exc}")
            continue
        repeated = manifest.spec is not None if manifest.runners is None else "spec" in entry.model_fields_set
        runners.append(RunnerEntry(name=entry.name, ref=python.ref, manifest=declared, declared=repeated))
    if not runners:
        return None, reasons or ["no usable runner"]
    spec = PluginSpec(
        plugin_id=manifest.plugin_id,
        runners=tuple(runners),
        plugin_dir=plugin_dir.resolve(),
        source=str(path),
        version=manifest.metadata.version,
    )
    return spec, reasons


def _describe(exc: ValidationError) -> str:
    parts: list[str] = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "(top level)"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def _declared_plugin_id(manifest_path: Path) -> str | None:
    """``metadata.author/metadata.name`` of a manifest that is otherwise unusable, when both are valid."""
    try:
        data: object = yaml.safe_load(manifest_path.read_text(encoding="utf-8"))
        metadata = cast(dict[str, object], data).get("metadata") if isinstance(data, dict) else None
        if not isinstance(metadata, dict):
            return None
        fields = cast(dict[str, object], metadata)
        plugin_id = f"{fields.get('author')}/{fields.get('name')}"
        RunnerId.parse(f"plugin:{plugin_id}/x")
    except (OSError, UnicodeDecodeError, yaml.YAMLError, InvalidRunnerIdError):
        return None
    return plugin_id


def discover_plugins(plugin_dirs: Iterable[Path], *, entry_points: bool = False) -> DiscoveryResult:
    """Plugins in *plugin_dirs* (each a plugin directory itself, or a directory of plugin directories) and,
    with *entry_points*, installed distributions of the ``agentrunner.runners`` group. First one wins on a
    duplicate id."""
    result = DiscoveryResult()
    for root in plugin_dirs:
        if not root.is_dir():
            result.add_warning(root, "plugin directory does not exist", fatal=True)
            continue
        candidates = (
            [root] if (root / MANIFEST_FILE).is_file() else sorted(p for p in root.iterdir() if p.is_dir())
        )
        for candidate in candidates:
            manifest_path = candidate / MANIFEST_FILE
            if not manifest_path.is_file():
                continue
            spec, reasons = load_plugin_dir(candidate)
            plugin_id = spec.plugin_id if spec is not None else _declared_plugin_id(manifest_path)
            for reason in reasons:
                result.add_warning(manifest_path, reason, plugin_id=plugin_id, fatal=spec is None)
            if spec is not None:
                result.add_plugin(spec)
    if entry_points:
        discover_entry_points(result)
    return result


def discover_entry_points(result: DiscoveryResult | None = None) -> DiscoveryResult:
    """Add the ``agentrunner.runners`` entry points (name ``author/plugin/runner``, value ``module:Class``),
    grouped into one plugin per ``author/plugin``."""
    result = result if result is not None else DiscoveryResult()
    grouped: dict[str, list[tuple[str, EntryPoint]]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        where = f"entry-point:{ep.name}"
        try:
            runner_id = RunnerId.parse(f"plugin:{ep.name}")
        except InvalidRunnerIdError as exc:
            result.add_warning(
                where, f"entry point names must be author/plugin/runner: {exc.reason}", fatal=True
            )
            continue
        if ":" not in ep.value:
            result.add_warning(where, f"entry point value {ep.value!r} must be module:Class", fatal=True)
            continue
        grouped.setdefault(runner_id.plugin_id, []).append((runner_id.runner, ep))
    for plugin_id, eps in grouped.items():
        dist = eps[0][1].dist
        runners = tuple(RunnerEntry(name=name, ref=ep.value) for name, ep in eps)
        result.add_plugin(
            PluginSpec(
                plugin_id=plugin_id,
                runners=runners,
                source=f"entry-point:{dist.name if dist is not None else plugin_id}",
                version=dist.version if dist is not None else None,
            )
        )
    return result
