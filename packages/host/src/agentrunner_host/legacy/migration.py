"""Migration of legacy LangBot pipeline configurations to runner ids (OFFICIAL_RUNNER_PLUGINS §2).

A legacy pipeline names its runner in ``ai.runner.runner`` (``local-agent``, ``dify-service-api``...) and keeps
each runner's settings in a block of its own (``ai['local-agent']``). The migrated form names the runner by
id in ``ai.runner.id`` and keeps its settings in ``ai.runner_config[<runner id>]``. The runtime reads only
the migrated fields (:func:`resolve_runner_id`, :func:`resolve_runner_config`).

:func:`migrate_pipeline_config` never edits its input, keeps every key it does not know, reports each change,
and is idempotent: migrating a migrated configuration changes nothing. :func:`diff` renders a dry run.

:func:`externalize_secrets` then replaces literal credentials in the runner configs by ``{"env": "VAR"}``
references (a runner's schema decides what is secret when it is installed; names are guessed otherwise) and
lists the variables to set, so no key is copied into the new configuration.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast

import orjson

__all__ = [
    "EnvReference",
    "externalize_secrets",
    "redact_sources",
    "LEGACY_RUNNERS",
    "MigrationChange",
    "MigrationResult",
    "diff",
    "expire_seconds",
    "migrate_pipeline_config",
    "resolve_runner_config",
    "resolve_runner_id",
]

LEGACY_RUNNERS: Final[Mapping[str, str]] = {
    "local-agent": "plugin:langbot/local-agent/default",
    "dify-service-api": "plugin:langbot/dify-agent/default",
    "n8n-service-api": "plugin:langbot/n8n-agent/default",
    "coze-api": "plugin:langbot/coze-agent/default",
    "dashscope-app-api": "plugin:langbot/dashscope-agent/default",
    "langflow-api": "plugin:langbot/langflow-agent/default",
    "tbox-app-api": "plugin:langbot/tbox-agent/default",
}
"""Legacy runner name → runner id of its official plugin."""


@dataclass(frozen=True, slots=True)
class MigrationChange:
    """One change the migration made."""

    action: Literal["added", "set", "moved", "removed"]
    """What happened."""
    path: str
    """Where, as a dotted path (``ai.runner.id``); moves name their source."""
    detail: str
    """Human explanation."""


@dataclass(frozen=True, slots=True)
class MigrationResult:
    """The migrated configuration and what changed."""

    config: dict[str, Any]
    """The migrated configuration (a new object; the input is never edited)."""
    runner_id: str | None
    """The configured runner id afterwards (``None`` when there is none)."""
    changes: list[MigrationChange] = field(default_factory=list[MigrationChange])
    """Changes, in the order they were made."""
    warnings: list[str] = field(default_factory=list[str])
    """What could not be migrated and was left as it was."""
    env: list[EnvReference] = field(default_factory=list["EnvReference"])
    """Literal credentials replaced by environment references (:func:`externalize_secrets`)."""

    @property
    def changed(self) -> bool:
        """Whether anything changed."""
        return bool(self.changes)


def _dict(value: object) -> dict[str, Any] | None:
    return cast(dict[str, Any], value) if isinstance(value, dict) else None


def migrate_pipeline_config(legacy: Mapping[str, Any]) -> MigrationResult:
    """Convert a legacy pipeline configuration to the runner-id form.

    * ``ai.runner_config`` is created when a legacy block moves into it; ``ai.runner`` and
      ``ai.runner_config`` holding something other than an object are replaced by an object (with a warning);
      a configuration with nothing to migrate comes back equal, with no change;
    * when ``ai.runner.id`` is empty and ``ai.runner.runner`` is a legacy name, ``id`` becomes its runner id
      and the legacy ``runner`` key is removed;
    * every legacy runner block (``ai['local-agent']``, ``ai['dify-service-api']``...) moves verbatim to
      ``ai.runner_config[<its runner id>]``, so settings of runners not selected survive too; a block whose
      target already exists is left in place with a warning;
    * anything else — ``expire-time``, unknown keys, unknown runner names — is kept as it is.
    """
    config: dict[str, Any] = copy.deepcopy(dict(legacy))
    changes: list[MigrationChange] = []
    warnings: list[str] = []
    ai = _dict(config.get("ai"))
    if ai is None:
        if "ai" in config:
            warnings.append("'ai' is not an object; left unchanged")
        return MigrationResult(config=config, runner_id=None, changes=changes, warnings=warnings)

    # A missing section is only created when something moves into it: the runtime reads a missing one as
    # empty, so an empty section would be a diff with nothing migrated.
    runner = _dict(ai.get("runner"))
    if runner is None:
        runner = {}
        if "runner" in ai:
            warnings.append(
                f"ai.runner was {type(ai['runner']).__name__}, not an object; replaced by an object"
            )
            ai["runner"] = runner
            changes.append(MigrationChange("added", "ai.runner", "created the runner section"))
    runner_config = _dict(ai.get("runner_config"))
    if runner_config is None:
        runner_config = {}
        if "runner_config" in ai or any(name in ai for name in LEGACY_RUNNERS):
            if "runner_config" in ai:
                warnings.append("ai.runner_config was not an object; replaced by an object")
            ai["runner_config"] = runner_config
            changes.append(MigrationChange("added", "ai.runner_config", "created the runner config section"))

    current = runner.get("id")
    legacy_name = runner.get("runner")
    if isinstance(current, str) and current:
        if legacy_name is not None:
            warnings.append(
                f"ai.runner.runner={legacy_name!r} is ignored: ai.runner.id is already {current!r}"
            )
    elif isinstance(legacy_name, str) and legacy_name in LEGACY_RUNNERS:
        runner["id"] = LEGACY_RUNNERS[legacy_name]
        del runner["runner"]
        changes.append(
            MigrationChange("set", "ai.runner.id", f"legacy runner {legacy_name!r} is now {runner['id']!r}")
        )
        changes.append(MigrationChange("removed", "ai.runner.runner", "replaced by ai.runner.id"))
    elif legacy_name is not None:
        warnings.append(
            f"legacy runner {legacy_name!r} has no official plugin; ai.runner.runner left unchanged"
        )

    for name, runner_id in LEGACY_RUNNERS.items():
        if name not in ai:
            continue
        block = ai[name]
        if runner_id in runner_config:
            warnings.append(f"ai[{name!r}] kept: ai.runner_config[{runner_id!r}] already exists")
            continue
        runner_config[runner_id] = block
        del ai[name]
        changes.append(MigrationChange("moved", f"ai.{name}", f"moved to ai.runner_config[{runner_id!r}]"))

    runner_id = runner.get("id")
    return MigrationResult(
        config=config,
        runner_id=runner_id if isinstance(runner_id, str) and runner_id else None,
        changes=changes,
        warnings=warnings,
    )


def _pretty(value: Any) -> list[str]:
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return text.decode().splitlines(keepends=True)


def diff(
    old: Mapping[str, Any], new: Mapping[str, Any], *, old_name: str = "before", new_name: str = "after"
) -> str:
    """A unified diff of the two configurations as pretty JSON (sorted keys); empty when they are equal."""
    lines = difflib.unified_diff(_pretty(old), _pretty(new), fromfile=old_name, tofile=new_name)
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


# -- what the runtime reads (migrated fields only) -------------------------------------------------------------


def resolve_runner_id(config: Mapping[str, Any]) -> str | None:
    """``ai.runner.id`` when set; a legacy ``ai.runner.runner`` is never read (migrate first)."""
    runner = _dict((_dict(config.get("ai")) or {}).get("runner")) or {}
    value = runner.get("id")
    return value if isinstance(value, str) and value else None


def resolve_runner_config(config: Mapping[str, Any], runner_id: str) -> dict[str, Any]:
    """A copy of ``ai.runner_config[runner_id]`` (``{}`` when missing); legacy blocks are never read."""
    configs = _dict((_dict(config.get("ai")) or {}).get("runner_config")) or {}
    return copy.deepcopy(_dict(configs.get(runner_id)) or {})


def expire_seconds(config: Mapping[str, Any]) -> int:
    """``ai.runner['expire-time']`` in seconds; 0 (the default, and for invalid values) means never."""
    runner = _dict((_dict(config.get("ai")) or {}).get("runner")) or {}
    value = runner.get("expire-time", 0)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return 0
    return int(value)


# -- literal credentials out of the configuration --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EnvReference:
    """A literal credential the migration replaced by ``{"env": variable}``."""

    variable: str
    """The environment variable to set (to the value found at *source*)."""
    runner_id: str
    """The runner whose config field it is."""
    field: str
    """The config field."""
    source: tuple[str, ...]
    """Where the value was in the legacy configuration (key path)."""


def _env_name(runner_id: str, name: str) -> str:
    plugin = runner_id.split("/")[1] if runner_id.count("/") >= 2 else runner_id
    return re.sub(r"[^A-Z0-9]+", "_", f"{plugin}_{name}".upper()).strip("_")


def externalize_secrets(
    legacy: Mapping[str, Any],
    result: MigrationResult,
    *,
    is_secret: Callable[[str, str], bool],
    taken: dict[str, str] | None = None,
) -> MigrationResult:
    """A copy of *result* whose runner configs hold ``{"env": "VAR"}`` instead of literal credentials.

    *is_secret(runner_id, field)* decides (the installed runner's schema, else a name guess). Variable names are
    ``<PLUGIN>_<FIELD>`` (``DIFY_AGENT_API_KEY``); *taken* maps names already handed out (across pipelines of one
    run) to their values, so one value keeps one name and a different value gets a numbered name. Values are
    never part of the result.
    """
    taken = {} if taken is None else taken
    config = copy.deepcopy(result.config)
    configs = _dict((_dict(config.get("ai")) or {}).get("runner_config")) or {}
    moved = {runner_id: name for name, runner_id in LEGACY_RUNNERS.items()}
    source_ai = _dict(legacy.get("ai")) or {}
    env: list[EnvReference] = []
    changes = list(result.changes)
    for runner_id, block in configs.items():
        fields = _dict(block)
        if fields is None:
            continue
        legacy_name = moved.get(runner_id)
        from_legacy = legacy_name is not None and legacy_name in source_ai
        source_root = (
            ("ai", legacy_name) if from_legacy and legacy_name else ("ai", "runner_config", runner_id)
        )
        for name, value in fields.items():
            if not isinstance(value, str) or not value or not is_secret(runner_id, name):
                continue
            base = _env_name(runner_id, name)
            variable, number = base, 1
            while variable in taken and taken[variable] != value:
                number += 1
                variable = f"{base}_{number}"
            taken[variable] = value
            fields[name] = {"env": variable}
            env.append(EnvReference(variable, runner_id, name, (*source_root, name)))
            changes.append(
                MigrationChange(
                    "set",
                    f"ai.runner_config[{runner_id!r}].{name}",
                    f'literal credential replaced by {{"env": "{variable}"}}; set {variable} to its value',
                )
            )
    return MigrationResult(
        config=config, runner_id=result.runner_id, changes=changes, warnings=list(result.warnings), env=env
    )


def redact_sources(legacy: Mapping[str, Any], env: list[EnvReference]) -> dict[str, Any]:
    """A copy of the legacy configuration with the credentials *env* names masked (for showing a diff)."""
    shown: dict[str, Any] = copy.deepcopy(dict(legacy))
    for reference in env:
        node: dict[str, Any] | None = shown
        for key in reference.source[:-1]:
            node = _dict(node.get(key)) if node is not None else None
        if node is not None and reference.source[-1] in node:
            node[reference.source[-1]] = "***"
    return shown
