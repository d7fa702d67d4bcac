"""``manifest.yaml``: how a plugin directory declares itself and its runners (``docs/wire.md`` § Manifest).

Two forms, both ``kind: AgentRunner``:

* one runner: top-level ``spec`` and ``execution`` (the runner is named ``metadata.runner``, default ``default``);
* several runners: a ``runners:`` list whose items each have ``name``, ``spec`` and ``execution``.

The models forbid unknown keys: a manifest is written by hand, and a misspelt key should be reported, not ignored.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Final, Literal

from agentrunner import (
    PROTOCOL_VERSION,
    AgentRunnerCapabilities,
    AgentRunnerContextPolicy,
    AgentRunnerManifest,
    AgentRunnerPermissions,
    DynamicFormItemSchema,
    I18nObject,
    RunnerId,
)
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "API_VERSIONS",
    "ManifestExecution",
    "ManifestMetadata",
    "ManifestRunner",
    "PluginManifest",
    "PythonExecution",
    "RunnerSpecSection",
]

API_VERSIONS: Final[frozenset[str]] = frozenset({"agentrunner/v1", "langbot/v1"})
"""Accepted ``apiVersion`` values (``langbot/v1`` is the spelling of OFFICIAL_RUNNER_PLUGINS §4)."""

_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, populate_by_name=True)


class ManifestMetadata(_Strict):
    """Who the plugin is. ``author/name`` is the plugin identity every back-call is stamped with."""

    author: str = Field(pattern=_NAME, max_length=64)
    """Plugin author, e.g. ``acme``."""
    name: str = Field(pattern=_NAME, max_length=64)
    """Plugin name, e.g. ``dify-agent``."""
    label: I18nObject | None = None
    """Display name of the plugin (and of a one-runner plugin's runner)."""
    description: I18nObject | None = None
    """Display description."""
    version: str | None = None
    """Plugin version, for display and diagnostics."""
    runner: str = Field(default="default", pattern=_NAME, max_length=64)
    """Name of the runner in the one-runner form."""


class PythonExecution(_Strict):
    """Where the runner class lives: exactly one of ``module`` and ``path``, plus ``attr``."""

    module: str | None = None
    """Importable module, e.g. ``acme_agent.runner`` (the plugin directory is on ``sys.path``)."""
    path: str | None = None
    """A ``.py`` file relative to the plugin directory, e.g. ``./main.py``; it may not leave the directory."""
    attr: str = Field(min_length=1)
    """The :class:`agentrunner.AgentRunner` subclass, e.g. ``DefaultAgentRunner``."""

    @field_validator("path")
    @classmethod
    def _relative_inside(cls, value: str | None) -> str | None:
        if value is None:
            return None
        pure = PurePosixPath(value)
        if pure.is_absolute() or ".." in pure.parts:
            raise ValueError("must be a relative path inside the plugin directory")
        if pure.suffix != ".py":
            raise ValueError("must name a .py file")
        return value

    @model_validator(mode="after")
    def _one_target(self) -> PythonExecution:
        if (self.module is None) == (self.path is None):
            raise ValueError("set exactly one of 'module' and 'path'")
        return self

    @property
    def ref(self) -> str:
        """The reference ``agentrunner-plugin --runner`` takes."""
        return f"{self.module or self.path}:{self.attr}"


class ManifestExecution(_Strict):
    """How to run the runner; only ``python`` exists in v1."""

    python: PythonExecution
    """A Python class run by ``agentrunner-plugin``."""


class RunnerSpecSection(_Strict):
    """A runner's declaration (PROTOCOL_V1 §4): the same fields as :class:`agentrunner.AgentRunnerManifest`."""

    protocol_version: str = PROTOCOL_VERSION
    """Protocol major version the runner implements."""
    config: list[DynamicFormItemSchema] = []
    """The binding configuration form."""
    capabilities: AgentRunnerCapabilities = Field(default_factory=AgentRunnerCapabilities)
    """§4.3."""
    permissions: AgentRunnerPermissions = Field(default_factory=AgentRunnerPermissions)
    """§4.4."""
    context: AgentRunnerContextPolicy = Field(default_factory=AgentRunnerContextPolicy)
    """§4.5."""


class ManifestRunner(_Strict):
    """One item of ``runners:``."""

    name: str = Field(pattern=_NAME, max_length=64)
    """Runner name inside the plugin."""
    label: I18nObject | None = None
    """Display name; defaults to the plugin's label."""
    description: I18nObject | None = None
    """Display description; defaults to the plugin's."""
    spec: RunnerSpecSection = Field(default_factory=RunnerSpecSection)
    """Declaration."""
    execution: ManifestExecution
    """Runner class."""


class PluginManifest(_Strict):
    """A plugin directory's ``manifest.yaml``."""

    api_version: str = Field(alias="apiVersion")
    """``agentrunner/v1`` (``langbot/v1`` is accepted)."""
    kind: Literal["AgentRunner"]
    """Always ``AgentRunner``."""
    metadata: ManifestMetadata
    """Plugin identity and display data."""
    spec: RunnerSpecSection | None = None
    """One-runner form: the runner's declaration."""
    execution: ManifestExecution | None = None
    """One-runner form: the runner class."""
    runners: list[ManifestRunner] | None = Field(default=None, min_length=1)
    """Several-runner form."""

    @field_validator("api_version")
    @classmethod
    def _known_api_version(cls, value: str) -> str:
        if value not in API_VERSIONS:
            raise ValueError(f"unsupported apiVersion {value!r} (expected one of {sorted(API_VERSIONS)})")
        return value

    @model_validator(mode="after")
    def _one_form(self) -> PluginManifest:
        if self.runners is not None:
            if self.spec is not None or self.execution is not None:
                raise ValueError("use either 'runners:' or top-level 'spec'/'execution', not both")
            names = [r.name for r in self.runners]
            if len(set(names)) != len(names):
                raise ValueError(f"runner names must be unique, got {names}")
        elif self.execution is None:
            raise ValueError("a manifest needs 'execution' (one runner) or 'runners:' (several)")
        return self

    @property
    def plugin_id(self) -> str:
        """``author/name``."""
        return f"{self.metadata.author}/{self.metadata.name}"

    def runner_entries(self) -> list[ManifestRunner]:
        """Every runner, the one-runner form normalised to a one-item list."""
        if self.runners is not None:
            return list(self.runners)
        assert self.execution is not None
        return [
            ManifestRunner(
                name=self.metadata.runner,
                spec=self.spec or RunnerSpecSection(),
                execution=self.execution,
            )
        ]

    def runner_manifest(self, entry: ManifestRunner) -> AgentRunnerManifest:
        """The §4.2 manifest the entry declares (what discovery shows before the plugin process starts)."""
        meta = self.metadata
        runner_id = RunnerId(meta.author, meta.name, entry.name)
        label = entry.label or meta.label or I18nObject(en_US=f"{meta.name}/{entry.name}")
        return AgentRunnerManifest(
            id=str(runner_id),
            name=entry.name,
            label=label,
            description=entry.description or meta.description,
            protocol_version=entry.spec.protocol_version,
            capabilities=entry.spec.capabilities,
            permissions=entry.spec.permissions,
            context=entry.spec.context,
            config_schema=entry.spec.config,
            metadata={"plugin_version": meta.version} if meta.version else {},
        )
