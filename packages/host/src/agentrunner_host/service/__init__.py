"""The host as a service: built from the configuration, with agents/bindings management and live feeds."""

from .agents import (
    AGENTS_FILE_NAME,
    DEFAULT_AGENT_ID,
    DEFAULT_BINDING_ID,
    AgentDirectory,
    AgentEntry,
    BindingEntry,
    Source,
)
from .errors import AlreadyExistsError, InUseError, InvalidDefinitionError, NotFoundError, ReadOnlyError
from .feeds import ReplayItem, ResultBatch, RunFeed
from .host_service import HostService
from .run_view import RunView, stored_run_view

__all__ = (
    # the service
    "HostService",
    "RunView",
    "stored_run_view",
    "ReplayItem",
    "ResultBatch",
    "RunFeed",
    # agents and bindings
    "AgentDirectory",
    "AgentEntry",
    "BindingEntry",
    "Source",
    "AGENTS_FILE_NAME",
    "DEFAULT_AGENT_ID",
    "DEFAULT_BINDING_ID",
    # errors
    "NotFoundError",
    "AlreadyExistsError",
    "ReadOnlyError",
    "InUseError",
    "InvalidDefinitionError",
)
