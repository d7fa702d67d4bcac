"""Host-owned facts on SQLAlchemy: event log, transcript, runs and results, artifacts, state, storage and
idempotency keys. Every call takes its scope explicitly; nothing is ambient.

How it fits together:

* :class:`HostStores` opens every store over one injected engine (``agentrunner_host.stores.engine.create_engine``;
  migrate first with ``agentrunner_host.stores.engine.upgrade``) and a data directory for artifact files.
* A run starts with one write transaction (``runs.start``; concurrent starts grouped on SQLite); its results
  and its end go through the journal, which commits every live run's pending results and every pending run
  end together (group commit), and tells each run how far its results are committed (:class:`ResultLog`).
* Events are numbered per conversation, transcript items per thread, from 1 with no gaps, inside the
  writing transaction; ingestion is idempotent on ``event_id`` / ``item_id``.
* Reads are keyset pages on clustered keys; full-text search uses FTS5 (SQLite) or ``tsvector`` (PostgreSQL).
* Store errors are :class:`StoreError` subclasses; :mod:`agentrunner_host.facts_api` maps them to §9 errors.
"""

from .agents import AGENTS_CHANNEL, AgentStore, DefinitionsChangedError, DefinitionSet
from .artifacts import DEFAULT_ARTIFACT_MAX_BYTES, ArtifactOwner, ArtifactRecord, ArtifactStore
from .audit import BACKCALL_EVENT, MAX_AUDIT_PAGE, AuditEntry, AuditFilter, AuditLog, AuditPage
from .controls import RunnerControl, RunnerControlStore
from .errors import (
    ArtifactUnavailableError,
    DuplicateEventStoredError,
    InvalidValueError,
    RunExistsError,
    RunStateError,
    StateVersionConflict,
    StoreError,
    ValueTooLargeError,
)
from .events import MAX_SUMMARY_CHARS, AppendOutcome, EventEntry, EventKind, EventLog, StoredEvent
from .facade import HostStores, StartFacts, StartReads
from .host_requests import HostRequest, HostRequestStore, RequestKind
from .hosts import HostRecord, HostStore
from .idempotency import IdempotencyStore
from .journal import DEFAULT_FLUSH_WINDOW, ResultLog, ResultLogError
from .records import Role, TranscriptItemType
from .runs import (
    HOST_RESTARTED,
    ResultRecord,
    RunFinish,
    RunListFilter,
    RunRecord,
    RunStart,
    RunStatus,
    RunStore,
    StartPlan,
)
from .state import StateItem, StateKey, StateStore, StateTTL, StateWrite
from .storage import DEFAULT_STORAGE_MAX_BYTES, StorageItem, StorageKey, StorageStore
from .transcript import MAX_SEARCH_TOP_K, StoredTranscriptItem, Transcript, TranscriptEntry

__all__ = [
    # facade
    "HostStores",
    "StartFacts",
    "StartReads",
    # event log
    "AppendOutcome",
    "EventEntry",
    "EventKind",
    "EventLog",
    "MAX_SUMMARY_CHARS",
    "StoredEvent",
    # transcript
    "MAX_SEARCH_TOP_K",
    "StoredTranscriptItem",
    "Transcript",
    "TranscriptEntry",
    "Role",
    "TranscriptItemType",
    # runs
    "HOST_RESTARTED",
    "ResultRecord",
    "RunFinish",
    "RunListFilter",
    "RunRecord",
    "RunStart",
    "RunStatus",
    "RunStore",
    "StartPlan",
    "DEFAULT_FLUSH_WINDOW",
    "ResultLog",
    "ResultLogError",
    # artifacts
    "ArtifactOwner",
    "ArtifactRecord",
    "ArtifactStore",
    "DEFAULT_ARTIFACT_MAX_BYTES",
    # state and storage
    "DEFAULT_STORAGE_MAX_BYTES",
    "StateItem",
    "StateKey",
    "StateStore",
    "StateTTL",
    "StateWrite",
    "StorageItem",
    "StorageKey",
    "StorageStore",
    # idempotency
    "IdempotencyStore",
    # operator agents and bindings
    "AGENTS_CHANNEL",
    "AgentStore",
    "DefinitionSet",
    "DefinitionsChangedError",
    # host registry
    "HostRecord",
    "HostStore",
    "HostRequest",
    "HostRequestStore",
    "RequestKind",
    # operator controls and the audit query
    "AuditEntry",
    "AuditFilter",
    "AuditLog",
    "AuditPage",
    "BACKCALL_EVENT",
    "MAX_AUDIT_PAGE",
    "RunnerControl",
    "RunnerControlStore",
    # errors
    "ArtifactUnavailableError",
    "DuplicateEventStoredError",
    "InvalidValueError",
    "RunExistsError",
    "RunStateError",
    "StateVersionConflict",
    "StoreError",
    "ValueTooLargeError",
]
