"""Errors of the service layer (agents and bindings management, runs through the API)."""

from __future__ import annotations

from agentrunner_host.errors import ConfigurationError, HostError

__all__ = ["InvalidDefinitionError", "NotFoundError", "ReadOnlyError", "AlreadyExistsError", "InUseError"]


class NotFoundError(HostError):
    """No agent / binding / run with that id."""


class AlreadyExistsError(HostError):
    """An agent or binding with that id exists already."""


class ReadOnlyError(HostError):
    """The agent or binding is defined in the configuration file; change it there."""


class InUseError(HostError):
    """The agent is still used by bindings."""


class InvalidDefinitionError(ConfigurationError):
    """An agent or binding definition is invalid (unknown agent, unresolvable config...)."""
