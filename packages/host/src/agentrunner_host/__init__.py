"""agentrunner host: receives events, resolves one binding, freezes a run-scoped authorization snapshot, runs
the runner (in process or in its own process), consumes its result stream and serves its back-calls, and keeps
the facts (event log, transcript, artifacts, state) in SQLAlchemy stores.

Start with :class:`Host` (everything wired) or the CLI ``agentrunner serve``.
"""

from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version

from agentrunner_host.definitions import (
    AgentBinding,
    AgentConfig,
    AgentEventEnvelope,
    BindingScope,
    DeliveryPolicy,
    EventFilter,
    ResourcePolicy,
    RunPolicy,
    StatePolicy,
)
from agentrunner_host.providers.protocols import KnowledgeProvider, ModelProvider, ToolProvider
from agentrunner_host.runtime.connection import BackCallHandler, RawResult, RunnerConnection
from agentrunner_host.runtime.inprocess import InProcessConnection, InProcessTransport

from .access import ConversationKey, RunAccess, StateOwner, StorageOwner
from .authorization import AuthorizationSnapshot, SnapshotBuilder
from .bindings import BindingSet
from .catalog import ResourceCatalog, ResourceSelection, SelectorRegistry, default_selectors
from .context_builder import ContextBuilder, HistoryHandles
from .dispatcher import AuditRecord, BackCallDispatcher
from .errors import (
    BindingConflictError,
    BindingNotFoundError,
    CodeExecutionDisabledError,
    ConfigurationError,
    DuplicateEventError,
    HostError,
    RunnerDisabledError,
    RunnerNotFoundError,
    RunnerTransportError,
    RunnerUnavailableError,
    RunNotFoundError,
)
from .host import Host
from .orchestrator import DeliveredResult, Orchestrator, RunHandle, RunOutcome
from .registry import PluginFailure, RegistryWarning, RunnerDescriptor, RunnerRegistry

try:
    __version__ = _version("agentrunner-host")
except _PackageNotFoundError:  # pragma: no cover - source tree without metadata
    __version__ = "0.0.0"

__all__ = (
    # the host
    "Host",
    "Orchestrator",
    "RunHandle",
    "RunOutcome",
    "DeliveredResult",
    # configuration models
    "AgentEventEnvelope",
    "AgentConfig",
    "AgentBinding",
    "BindingScope",
    "EventFilter",
    "ResourcePolicy",
    "StatePolicy",
    "DeliveryPolicy",
    "RunPolicy",
    "BindingSet",
    # runners and transports
    "RunnerRegistry",
    "RunnerDescriptor",
    "RegistryWarning",
    "PluginFailure",
    "RunnerConnection",
    "BackCallHandler",
    "RawResult",
    "InProcessConnection",
    "InProcessTransport",
    # authorization and context
    "AuthorizationSnapshot",
    "SnapshotBuilder",
    "ResourceCatalog",
    "ResourceSelection",
    "SelectorRegistry",
    "default_selectors",
    "ContextBuilder",
    "HistoryHandles",
    "RunAccess",
    "ConversationKey",
    "StateOwner",
    "StorageOwner",
    # back-calls
    "BackCallDispatcher",
    "AuditRecord",
    "ModelProvider",
    "ToolProvider",
    "KnowledgeProvider",
    # errors
    "HostError",
    "ConfigurationError",
    "BindingConflictError",
    "BindingNotFoundError",
    "CodeExecutionDisabledError",
    "DuplicateEventError",
    "RunnerDisabledError",
    "RunnerNotFoundError",
    "RunnerUnavailableError",
    "RunNotFoundError",
    "RunnerTransportError",
)
