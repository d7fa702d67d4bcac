"""Agents and bindings the service runs with: the configuration file's, the operator's and the default one.

Operator-managed definitions (HTTP API, ``agentrunner agents add``...) live in the database
(:class:`~agentrunner_host.stores.AgentStore`), so every host on one database serves the same ones.
Definitions from the configuration file are read-only. Every change is validated as a whole binding set
before it is saved: a conflict is refused, never discovered at run time. A change is written under the
version the directory read (compare-and-set); when another host or process wrote first, the change is
applied again on top of what it wrote. :meth:`AgentDirectory.refresh` picks up changes made elsewhere (the
service calls it when PostgreSQL announces one, or on a short poll on SQLite).

An ``agents.json`` left in the data directory by an earlier version is imported once
(:meth:`AgentDirectory.import_file`, definitions whose ids are already stored are skipped) and renamed to
``agents.json.imported``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from agentrunner_host.bindings import BindingSet
from agentrunner_host.config import BindingSpec, EnvReferenceError, HostConfig, resolve_env_refs
from agentrunner_host.definitions import AgentBinding, AgentConfig
from agentrunner_host.errors import ConfigurationError
from agentrunner_host.stores import AgentStore, DefinitionsChangedError, DefinitionSet

from .errors import AlreadyExistsError, InUseError, InvalidDefinitionError, NotFoundError, ReadOnlyError

__all__ = [
    "AGENTS_FILE_NAME",
    "IMPORTED_SUFFIX",
    "DEFAULT_AGENT_ID",
    "DEFAULT_BINDING_ID",
    "DEFAULT_BINDING_PRIORITY",
    "AgentDirectory",
    "AgentEntry",
    "BindingEntry",
    "Source",
]

log = logging.getLogger("agentrunner.service")

AGENTS_FILE_NAME: Final = "agents.json"
"""Where earlier versions kept operator-managed agents and bindings, inside the data directory (imported once)."""
IMPORTED_SUFFIX: Final = ".imported"
"""Appended to the name of an ``agents.json`` once its definitions are in the database."""
_ATTEMPTS: Final = 5
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
        store: AgentStore,
        data_dir: Path,
        environ: Mapping[str, str],
        default_runner_id: str | None,
        default_runner_config: Mapping[str, Any] | None = None,
    ) -> None:
        self._config = config
        self._environ = environ
        self._store = store
        self.path = data_dir / AGENTS_FILE_NAME
        """Where an earlier version's operator file would be (see :meth:`import_file`)."""
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
        self._version: int | None = None

    # -- reading -----------------------------------------------------------------------------------------------

    @property
    def version(self) -> int | None:
        """The version of the operator definitions loaded (``None`` before the first :meth:`refresh`)."""
        return self._version

    async def refresh(self) -> bool:
        """Load the operator definitions when they changed in the database since the last load; True when
        they did. A stored definition this version cannot read raises :class:`ConfigurationError`."""
        version = await self._store.version()
        if version == self._version:
            return False
        self._adopt(await self._store.load())
        return True

    def _adopt(self, stored: DefinitionSet) -> None:
        if self._version is not None and stored.version < self._version:
            return  # a load that raced with this directory's own newer write: keep the newer one
        try:
            self._file = _AgentsFile.model_validate({"agents": stored.agents, "bindings": stored.bindings})
        except ValidationError as exc:
            raise ConfigurationError(f"the stored agents and bindings are not valid: {exc}") from None
        self._version = stored.version

    async def import_file(self) -> tuple[list[str], list[str]] | None:
        """Import ``<data_dir>/agents.json`` (an earlier version's operator file) into the database, then
        rename it to ``agents.json.imported``; returns the agent and binding ids added, or ``None`` without a
        file. Ids already stored are kept as stored (so a second import, e.g. after a crash before the
        rename, adds nothing). The imported set must be valid with the rest, as any change."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            found = _AgentsFile.model_validate_json(raw)
        except (ValidationError, ValueError) as exc:
            raise ConfigurationError(f"{self.path} is not a valid agents file: {exc}") from None
        await self.refresh()
        added = await self._store.add_missing(
            agents=[(a.agent_id, a.model_dump(mode="json")) for a in found.agents],
            bindings=[(b.binding_id, b.model_dump(mode="json")) for b in found.bindings],
        )
        await self.refresh()
        self.binding_set()  # the imported definitions are refused at load time if they conflict
        self.path.replace(self.path.with_name(self.path.name + IMPORTED_SUFFIX))
        log.info("imported %s into the database: agents %s, bindings %s", self.path, *added)
        return added

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
        try:
            return AgentBinding.from_agent(
                agent.model_copy(update={"runner_config": config}),
                binding_id=f"agent:{agent_id}",
                event_types=["*"],
            )
        except ValidationError:
            # an agent id near the identifier limit leaves no room for the binding id's prefix
            # (schemathesis found the 500 this was)
            raise InvalidDefinitionError(
                f"agent {agent_id[:40]}...: its id is too long to address it directly; use a binding"
            ) from None

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

    async def _change(self, change: Callable[[_AgentsFile], _AgentsFile]) -> BindingSet:
        """Apply *change* to the newest operator definitions and store the result under the version read;
        when another writer got there first, read again and apply it again."""
        for attempt in range(_ATTEMPTS):
            await self.refresh()
            current = self._file
            new = change(current)
            agents = [*self._fixed_agents, *(AgentEntry(a, "api") for a in new.agents)]
            bindings = [*self._fixed_bindings, *(BindingEntry(b, "api") for b in new.bindings)]
            built = self._build(agents, bindings)  # raises before anything is written
            try:
                version = await self._store.replace(
                    agents=[(a.agent_id, a.model_dump(mode="json")) for a in new.agents],
                    bindings=[(b.binding_id, b.model_dump(mode="json")) for b in new.bindings],
                    expected_version=self._version or 0,
                )
            except DefinitionsChangedError:
                if attempt == _ATTEMPTS - 1:
                    raise
                continue
            self._file = new
            self._version = version
            return built
        raise AssertionError("unreachable")

    async def put_agent(self, agent: AgentConfig, *, create: bool) -> BindingSet:
        """Add (``create``) or replace an operator agent; returns the new binding set."""
        if agent.agent_id in self._fixed_agent_ids():
            raise ReadOnlyError(f"agent {agent.agent_id!r} is defined in the configuration; change it there")

        def change(current: _AgentsFile) -> _AgentsFile:
            existing = [a for a in current.agents if a.agent_id == agent.agent_id]
            if create and existing:
                raise AlreadyExistsError(f"agent {agent.agent_id!r} already exists")
            if not create and not existing:
                raise NotFoundError(f"agent {agent.agent_id!r} does not exist")
            agents = [a for a in current.agents if a.agent_id != agent.agent_id] + [agent]
            return _AgentsFile(agents=agents, bindings=current.bindings)

        return await self._change(change)

    async def remove_agent(self, agent_id: str) -> BindingSet:
        """Remove an operator agent no binding uses."""
        if agent_id in self._fixed_agent_ids():
            raise ReadOnlyError(f"agent {agent_id!r} is defined in the configuration; change it there")

        def change(current: _AgentsFile) -> _AgentsFile:
            if not any(a.agent_id == agent_id for a in current.agents):
                raise NotFoundError(f"agent {agent_id!r} does not exist")
            bindings = [*self._fixed_bindings, *(BindingEntry(b, "api") for b in current.bindings)]
            users = [e.binding.binding_id for e in bindings if e.binding.agent_id == agent_id]
            if users:
                raise InUseError(
                    f"agent {agent_id!r} is used by bindings {', '.join(users)}; remove them first"
                )
            agents = [a for a in current.agents if a.agent_id != agent_id]
            return _AgentsFile(agents=agents, bindings=current.bindings)

        return await self._change(change)

    async def put_binding(self, spec: BindingSpec, *, create: bool) -> BindingSet:
        """Add (``create``) or replace an operator binding; conflicts raise ``BindingConflictError``."""
        if spec.binding_id in self._fixed_binding_ids():
            raise ReadOnlyError(
                f"binding {spec.binding_id!r} is defined in the configuration; change it there"
            )

        def change(current: _AgentsFile) -> _AgentsFile:
            existing = [b for b in current.bindings if b.binding_id == spec.binding_id]
            if create and existing:
                raise AlreadyExistsError(f"binding {spec.binding_id!r} already exists")
            if not create and not existing:
                raise NotFoundError(f"binding {spec.binding_id!r} does not exist")
            bindings = [b for b in current.bindings if b.binding_id != spec.binding_id] + [spec]
            return _AgentsFile(agents=current.agents, bindings=bindings)

        return await self._change(change)

    async def remove_binding(self, binding_id: str) -> BindingSet:
        """Remove an operator binding."""
        if binding_id in self._fixed_binding_ids():
            raise ReadOnlyError(f"binding {binding_id!r} is defined in the configuration; change it there")

        def change(current: _AgentsFile) -> _AgentsFile:
            if not any(b.binding_id == binding_id for b in current.bindings):
                raise NotFoundError(f"binding {binding_id!r} does not exist")
            bindings = [b for b in current.bindings if b.binding_id != binding_id]
            return _AgentsFile(agents=current.agents, bindings=bindings)

        return await self._change(change)
