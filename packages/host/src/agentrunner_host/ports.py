"""The typed interfaces the run path is wired with: the stores, the facts a run reads and writes, and the
idempotency keys of side-effecting back-calls.

The orchestrator, the dispatcher and :class:`~agentrunner_host.host.Host` take these protocols rather than the
concrete classes, so what each of them relies on is written down in one place and pyright checks every use
(a misspelt store method is a type error, not an ``AttributeError`` in production). The implementations are
:class:`~agentrunner_host.stores.HostStores`, :class:`~agentrunner_host.facts_api.PullAPI` and
:class:`~agentrunner_host.stores.IdempotencyStore`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Protocol

from agentrunner import (
    ArtifactChunk,
    ArtifactMetadata,
    EventPage,
    EventRecord,
    HistoryPage,
    StateListPage,
    StateValue,
    StorageListPage,
    StorageValue,
)
from agentrunner.actions import (
    ArtifactIdParams,
    ArtifactReadParams,
    EmptyResult,
    EventGetParams,
    EventPageParams,
    HistoryPageParams,
    HistorySearchParams,
    StateDeleteParams,
    StateGetParams,
    StateListParams,
    StateSetParams,
    StorageDeleteParams,
    StorageGetParams,
    StorageListParams,
    StorageSetParams,
)
from agentrunner.codec import JsonObject

from agentrunner_host.stores import (
    ArtifactStore,
    EventLog,
    RunnerControlStore,
    RunStart,
    RunStore,
    StartFacts,
    StartReads,
    StateStore,
    StorageStore,
    Transcript,
)

from .access import ConversationKey, RunAccess
from .context_builder import HistoryHandles

__all__ = ["FactsAPI", "IdempotencyKeys", "RunStores"]


class IdempotencyKeys(Protocol):
    """First answers of side-effecting back-calls, by (scope, key)."""

    async def get(self, scope: tuple[str, ...], key: str, /) -> JsonObject | None:
        """The answer stored for (*scope*, *key*), or ``None``."""
        ...

    async def put(self, scope: tuple[str, ...], key: str, result: JsonObject, /) -> JsonObject:
        """Store *result* unless an answer is stored already; returns the one that wins."""
        ...


class RunStores(Protocol):
    """What the run path uses of the host's stores (:class:`~agentrunner_host.stores.HostStores`)."""

    @property
    def events(self) -> EventLog:
        """The event log (incoming events and host records)."""
        ...

    @property
    def runs(self) -> RunStore:
        """Runs, their results and ends."""
        ...

    @property
    def state(self) -> StateStore:
        """Host state (the snapshot a context inlines, the updates results carry)."""
        ...

    @property
    def artifacts(self) -> ArtifactStore:
        """Artifact bytes and metadata."""
        ...

    @property
    def idempotency(self) -> IdempotencyKeys:
        """Idempotency keys of side-effecting back-calls."""
        ...

    @property
    def transcript(self) -> Transcript:
        """The transcript (``history.*``)."""
        ...

    @property
    def storage(self) -> StorageStore:
        """Storage areas (``storage.*``)."""
        ...

    @property
    def controls(self) -> RunnerControlStore:
        """Operator controls on runners (the disable switch read before every run starts)."""
        ...

    async def positions(self, *, conversation: ConversationKey) -> tuple[int | None, int | None]:
        """The newest transcript seq and event seq of the conversation's thread."""
        ...

    async def start_run(self, reads: StartReads, build: Callable[[StartFacts], RunStart], /) -> StartFacts:
        """Read what a starting run needs and store the start *build* makes of it (SQLite: one transaction)."""
        ...

    async def read_start(self, reads: StartReads, /, *, event_id: str | None) -> StartFacts | None:
        """The same reads on the loop, for a start committed with the run's first results
        (``runs.begin``); ``None``: use :meth:`start_run`."""
        ...


class FactsAPI(Protocol):
    """The pull actions: one method per action, ``(access, params) -> result`` (failures are ``APIError``\\ s),
    and where a run's conversation stands when it starts."""

    async def history_handles(self, access: RunAccess, /) -> HistoryHandles:
        """The newest transcript and event positions of the run's conversation."""
        ...

    def history_handles_at(
        self, access: RunAccess, transcript_seq: int | None, event_seq: int | None, /
    ) -> HistoryHandles:
        """The handles of the run's conversation at positions read already (see ``RunStores.start_run``)."""
        ...

    async def history_page(self, access: RunAccess, params: HistoryPageParams, /) -> HistoryPage:
        """``history.page``."""
        ...

    async def history_search(self, access: RunAccess, params: HistorySearchParams, /) -> HistoryPage:
        """``history.search``."""
        ...

    async def events_get(self, access: RunAccess, params: EventGetParams, /) -> EventRecord:
        """``events.get``."""
        ...

    async def events_page(self, access: RunAccess, params: EventPageParams, /) -> EventPage:
        """``events.page``."""
        ...

    async def artifacts_metadata(self, access: RunAccess, params: ArtifactIdParams, /) -> ArtifactMetadata:
        """``artifacts.metadata``."""
        ...

    async def artifacts_read_range(self, access: RunAccess, params: ArtifactReadParams, /) -> ArtifactChunk:
        """``artifacts.read_range``."""
        ...

    def artifacts_open_stream(
        self, access: RunAccess, params: ArtifactIdParams, /
    ) -> AsyncIterator[ArtifactChunk]:
        """``artifacts.open_stream``."""
        ...

    async def state_get(self, access: RunAccess, params: StateGetParams, /) -> StateValue:
        """``state.get``."""
        ...

    async def state_set(self, access: RunAccess, params: StateSetParams, /) -> StateValue:
        """``state.set``."""
        ...

    async def state_delete(self, access: RunAccess, params: StateDeleteParams, /) -> EmptyResult:
        """``state.delete``."""
        ...

    async def state_list(self, access: RunAccess, params: StateListParams, /) -> StateListPage:
        """``state.list``."""
        ...

    async def storage_get(self, access: RunAccess, params: StorageGetParams, /) -> StorageValue:
        """``storage.get``."""
        ...

    async def storage_set(self, access: RunAccess, params: StorageSetParams, /) -> StorageValue:
        """``storage.set``."""
        ...

    async def storage_delete(self, access: RunAccess, params: StorageDeleteParams, /) -> EmptyResult:
        """``storage.delete``."""
        ...

    async def storage_list(self, access: RunAccess, params: StorageListParams, /) -> StorageListPage:
        """``storage.list``."""
        ...
