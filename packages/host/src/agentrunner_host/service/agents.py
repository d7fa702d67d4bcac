"""Agents and bindings the service runs with: the configuration file's, the operator's and the default one.

Operator-managed definitions (HTTP API, ``agentrunner agents add``...) live in ``<data_dir>/agents.json``,
written atomically (temporary file + rename), so a crash never leaves half a file. Definitions from the
configuration file are read-only. Every change is validated as a whole binding set before it is saved: a
conflict is refused, never discovered at run time. The file is re-read when another process changes it, so
``agentrunner bindings add`` reaches a running server on its next event.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from agentrunner_host.bindings import BindingSet
from agentrunner_host.config import BindingSpec, EnvReferenceError, HostConfig, resolve_env_refs
from agentrunner_host.definitions import AgentBinding, AgentConfig
from agentrunner_host.errors import ConfigurationError

from .errors import AlreadyExistsError, InUseError, InvalidDefinitionError, NotFoundError, ReadOnlyError

__all__ = [
    "AGENTS_FILE_NAME",
    "DEFAULT_AGENT_ID",
    "DEFAULT_BINDING_ID",
    "DEFAULT_BINDING_PRIORITY",
    "AgentDirectory",
    "AgentEntry",
    "BindingEntry",
    "Source",
]

AGENTS_FILE_NAME: Final = "agents.json"
"""Operator-managed agents and bindings, inside the data directory."""
DEFAULT_AGENT_ID: Final = "default"
"""Id of the zero-configuration agent."""
DEFAULT_BINDING_ID: Final = "default"
"""Id of the zero-configuration binding."""
DEFAULT_BINDING_PRIORITY: Final = -1_000_000
"""The default binding loses against any other global binding."""

Source = Literal["config", "api", "default"]
"""Where a definition comes from: the configuration file, the operator (API/CLI) or the built-in default."""


@dataclass(frozen=True, slots=True)
class AgentEntry:
    """An agent and where it is defined."""

    agent: AgentConfig
    """The agent as defined (runner config unresolved, env references kept)."""
    source: Source
    """Where it is defined."""


@dataclass(frozen=True, slots=True)
class BindingEntry:
    """A binding spec and where it is defined."""

    binding: BindingSpec
    """The binding as defined."""
    source: Source
    """Where it is defined."""


class _AgentsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    agents: list[AgentConfig] = []
    bindings: list[BindingSpec] = []


class AgentDirectory:
    """Every agent and binding, with validated changes."""

    def __init__(
        self,
        config: HostConfig,
        *,
        data_dir: Path,
        environ: Mapping[str, str],
        default_runner_id: str | None,
        default_runner_config: Mapping[str, Any] | None = None,
    ) -> None:
        self._config = config
        self._environ = environ
        self.path = data_dir / AGENTS_FILE_NAME
        """The operator file."""
        self._fixed_agents: list[AgentEntry] = [AgentEntry(a, "config") for a in config.agents]
        self._fixed_bindings: list[BindingEntry] = [BindingEntry(b, "config") for b in config.bindings]
        if default_runner_id is not None and config.defaults.binding:
            self._fixed_agents.append(
                AgentEntry(
                    AgentConfig(
                        agent_id=DEFAULT_AGENT_ID,
                        runner_id=default_runner_id,
                        runner_config=dict(default_runner_config or {}),
                        label="Default agent",
                    ),
                    "default",
                )
            )
            self._fixed_bindings.append(
                BindingEntry(
                    BindingSpec(
                        binding_id=DEFAULT_BINDING_ID,
                        agent_id=DEFAULT_AGENT_ID,
                        priority=DEFAULT_BINDING_PRIORITY,
                    ),
                    "default",
                )
            )
        self._file = _AgentsFile()
        self._stamp: tuple[int, int] | None = None
        self.reload()

    # -- reading -----------------------------------------------------------------------------------------------

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def reload(self) -> bool:
        """Re-read the operator file when it changed on disk; True when it did."""
        stamp = self._file_stamp()
        if stamp == self._stamp:
            return False
        if stamp is None:
            self._file = _AgentsFile()
        else:
            try:
                self._file = _AgentsFile.model_validate_json(self.path.read_bytes())
            except (ValidationError, ValueError) as exc:
                raise ConfigurationError(f"{self.path} is not a valid agents file: {exc}") from None
        self._stamp = stamp
        return True

    def agents(self) -> list[AgentEntry]:
        """Every agent: configuration file first, then the default, then the operator's."""
        return [*self._fixed_agents, *(AgentEntry(a, "api") for a in self._file.agents)]

    def bindings(self) -> list[BindingEntry]:
        """Every binding spec."""
        return [*self._fixed_bindings, *(BindingEntry(b, "api") for b in self._file.bindings)]

    def agent(self, agent_id: str) -> AgentEntry:
        """One agent; raises :class:`NotFoundError`."""
        for entry in self.agents():
            if entry.agent.agent_id == agent_id:
                return entry
        raise NotFoundError(f"agent {agent_id!r} does not exist")

    def binding(self, binding_id: str) -> BindingEntry:
        """One binding; raises :class:`NotFoundError`."""
        for entry in self.bindings():
            if entry.binding.binding_id == binding_id:
                return entry
        raise NotFoundError(f"binding {binding_id!r} does not exist")

    def binding_set(self) -> BindingSet:
        """The host bindings of every spec, validated together (runner configs resolved from the environment)."""
        return self._build(self.agents(), self.bindings())

    def direct_binding(self, agent_id: str) -> AgentBinding:
        """A binding that sends an event straight to one agent (``agentrunner chat --agent``), bypassing
        resolution; raises :class:`NotFoundError` or :class:`InvalidDefinitionError`."""
        agent = self.agent(agent_id).agent
        try:
            config = resolve_env_refs(
                agent.runner_config, environ=self._environ, where=f"agent {agent_id} runner_config"
            )
        except EnvReferenceError as exc:
            raise InvalidDefinitionError(str(exc)) from None
        return AgentBinding.from_agent(
            agent.model_copy(update={"runner_config": config}),
            binding_id=f"agent:{agent_id}",
            event_types=["*"],
        )

    def _build(self, agents: Sequence[AgentEntry], bindings: Sequence[BindingEntry]) -> BindingSet:
        by_id = {e.agent.agent_id: e.agent for e in agents}
        out: list[AgentBinding] = []
        for entry in bindings:
            spec = entry.binding
            agent = by_id.get(spec.agent_id)
            if agent is None:
                raise InvalidDefinitionError(
                    f"binding {spec.binding_id!r} names unknown agent {spec.agent_id!r}"
                )
            try:
                config = resolve_env_refs(
                    agent.runner_config, environ=self._environ, where=f"agent {agent.agent_id} runner_config"
                )
            except EnvReferenceError as exc:
                raise InvalidDefinitionError(str(exc)) from None
            out.append(spec.project(agent.model_copy(update={"runner_config": config})))
        return BindingSet(out)

    # -- changes -----------------------------------------------------------------------------------------------

    def _fixed_agent_ids(self) -> set[str]:
        return {e.agent.agent_id for e in self._fixed_agents}

    def _fixed_binding_ids(self) -> set[str]:
        return {e.binding.binding_id for e in self._fixed_bindings}

    def put_agent(self, agent: AgentConfig, *, create: bool) -> BindingSet:
        """Add (``create``) or replace an operator agent; returns the new binding set."""
        self.reload()
        if agent.agent_id in self._fixed_agent_ids():
            raise ReadOnlyError(f"agent {agent.agent_id!r} is defined in the configuration; change it there")
        existing = [a for a in self._file.agents if a.agent_id == agent.agent_id]
        if create and existing:
            raise AlreadyExistsError(f"agent {agent.agent_id!r} already exists")
        if not create and not existing:
            raise NotFoundError(f"agent {agent.agent_id!r} does not exist")
        agents = [a for a in self._file.agents if a.agent_id != agent.agent_id] + [agent]
        return self._save(_AgentsFile(agents=agents, bindings=self._file.bindings))

    def remove_agent(self, agent_id: str) -> BindingSet:
        """Remove an operator agent no binding uses."""
        self.reload()
        if agent_id in self._fixed_agent_ids():
            raise ReadOnlyError(f"agent {agent_id!r} is defined in the configuration; change it there")
        if not any(a.agent_id == agent_id for a in self._file.agents):
            raise NotFoundError(f"agent {agent_id!r} does not exist")
        users = [e.binding.binding_id for e in self.bindings() if e.binding.agent_id == agent_id]
        if users:
            raise InUseError(f"agent {agent_id!r} is used by bindings {', '.join(users)}; remove them first")
        agents = [a for a in self._file.agents if a.agent_id != agent_id]
        return self._save(_AgentsFile(agents=agents, bindings=self._file.bindings))

    def put_binding(self, spec: BindingSpec, *, create: bool) -> BindingSet:
        """Add (``create``) or replace an operator binding; conflicts raise ``BindingConflictError``."""
        self.reload()
        if spec.binding_id in self._fixed_binding_ids():
            raise ReadOnlyError(
                f"binding {spec.binding_id!r} is defined in the configuration; change it there"
            )
        existing = [b for b in self._file.bindings if b.binding_id == spec.binding_id]
        if create and existing:
            raise AlreadyExistsError(f"binding {spec.binding_id!r} already exists")
        if not create and not existing:
            raise NotFoundError(f"binding {spec.binding_id!r} does not exist")
        bindings = [b for b in self._file.bindings if b.binding_id != spec.binding_id] + [spec]
        return self._save(_AgentsFile(agents=self._file.agents, bindings=bindings))

    def remove_binding(self, binding_id: str) -> BindingSet:
        """Remove an operator binding."""
        self.reload()
        if binding_id in self._fixed_binding_ids():
            raise ReadOnlyError(f"binding {binding_id!r} is defined in the configuration; change it there")
        if not any(b.binding_id == binding_id for b in self._file.bindings):
            raise NotFoundError(f"binding {binding_id!r} does not exist")
        bindings = [b for b in self._file.bindings if b.binding_id != binding_id]
        return self._save(_AgentsFile(agents=self._file.agents, bindings=bindings))

    def _save(self, new: _AgentsFile) -> BindingSet:
        agents = [*self._fixed_agents, *(AgentEntry(a, "api") for a in new.agents)]
        bindings = [*self._fixed_bindings, *(BindingEntry(b, "api") for b in new.bindings)]
        built = self._build(agents, bindings)  # raises before anything is written
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".agents-", suffix=".json", dir=self.path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(new.model_dump_json(indent=2).encode())
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._file = new
        self._stamp = self._file_stamp()
        return built
