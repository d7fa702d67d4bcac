"""The typed back-call client a runner uses to reach the host (PROTOCOL_V1 §8).

``AgentRunAPI`` speaks over an abstract :class:`APITransport` (in-process, the stdio wire, a WebSocket).
Every call carries the run's id; the transport adds the caller's identity. The run's deadline
(``ctx.runtime.deadline_at``) bounds every call: a call made after it fails at once with
:class:`~agentrunner.errors.DeadlineExceededError`, and a call still running when it passes is abandoned with
the same error. Host errors surface as the typed exceptions of :mod:`agentrunner.errors`.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Generic, Protocol, Self, TypeVar, overload

from pydantic import BaseModel, JsonValue

from . import codec
from .actions import ACTIONS, BackCallRequest, KnowledgeListResult
from .api_types import (
    ArtifactChunk,
    ArtifactMetadata,
    ChatMessage,
    EventPage,
    EventRecord,
    HistoryPage,
    KnowledgeRetrieveResult,
    ModelResponse,
    ModelStreamChunk,
    PlatformActionReceipt,
    RerankResult,
    StateListPage,
    StateValue,
    StorageListPage,
    StorageValue,
    ToolCallResult,
    ToolDetail,
)
from .codec import JsonObject
from .errors import DeadlineExceededError, InvalidArgumentError
from .results import StateScope

__all__ = ["APITransport", "AgentRunAPI"]

_R = TypeVar("_R", bound=BaseModel)


class APITransport(Protocol):
    """Carries back-calls to the host. Implementations set ``request.caller`` to the plugin's identity."""

    async def call(self, request: BackCallRequest, *, timeout: float | None) -> JsonObject:
        """Perform one call; return the result as a JSON object or raise an :class:`APIError`."""
        ...

    def stream(self, request: BackCallRequest, *, timeout: float | None) -> AsyncIterator[JsonObject]:
        """Perform a streaming call; yield each chunk; raise an :class:`APIError` on failure."""
        ...


class _Namespace:
    def __init__(self, api: AgentRunAPI) -> None:
        self._api = api


_N = TypeVar("_N", bound=_Namespace)


class _Part(Generic[_N]):
    """A namespace of :class:`AgentRunAPI` made on first use and then kept as the instance's attribute: a run
    uses a few of the nine, an echo none, and the client is built for every run."""

    def __init__(self, namespace: type[_N]) -> None:
        self._namespace = namespace
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, instance: None, owner: type) -> Self: ...
    @overload
    def __get__(self, instance: AgentRunAPI, owner: type) -> _N: ...
    def __get__(self, instance: AgentRunAPI | None, owner: type) -> Self | _N:
        if instance is None:
            return self
        part = self._namespace(instance)
        # a descriptor without __set__: the instance's own attribute is found first from now on
        vars(instance)[self._name] = part
        return part


class _Models(_Namespace):
    async def invoke(
        self,
        model_id: str,
        messages: Sequence[ChatMessage | Mapping[str, JsonValue]],
        *,
        tools: Sequence[Mapping[str, JsonValue]] | None = None,
        extra_args: dict[str, JsonValue] | None = None,
    ) -> ModelResponse:
        """Complete *messages* with a granted model."""
        params = {
            "model_id": model_id,
            "messages": _dump_all(messages),
            "tools": _objects(tools),
            "extra_args": extra_args,
        }
        return await self._api.call("models.invoke", params, ModelResponse)

    def stream(
        self,
        model_id: str,
        messages: Sequence[ChatMessage | Mapping[str, JsonValue]],
        *,
        tools: Sequence[Mapping[str, JsonValue]] | None = None,
        extra_args: dict[str, JsonValue] | None = None,
    ) -> AsyncIterator[ModelStreamChunk]:
        """Stream a completion chunk by chunk."""
        params = {
            "model_id": model_id,
            "messages": _dump_all(messages),
            "tools": _objects(tools),
            "extra_args": extra_args,
        }
        return self._api.stream("models.stream", params, ModelStreamChunk)

    async def rerank(
        self, model_id: str, query: str, documents: Sequence[str], *, top_k: int | None = None
    ) -> RerankResult:
        """Rank *documents* by relevance to *query*."""
        texts: list[JsonValue] = list(documents)
        params = {"model_id": model_id, "query": query, "documents": texts, "top_k": top_k}
        return await self._api.call("models.rerank", params, RerankResult)


class _Tools(_Namespace):
    async def get_detail(self, tool_name: str) -> ToolDetail:
        """Describe a granted tool."""
        return await self._api.call("tools.get_detail", {"tool_name": tool_name}, ToolDetail)

    async def call(
        self,
        tool_name: str,
        parameters: dict[str, JsonValue] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> ToolCallResult:
        """Call a granted tool."""
        return await self._api.call(
            "tools.call",
            {"tool_name": tool_name, "parameters": parameters or {}},
            ToolCallResult,
            idempotency_key=idempotency_key,
        )


class _Knowledge(_Namespace):
    async def list(self) -> KnowledgeListResult:
        """The run's knowledge bases (needs the ``knowledge_bases: [list]`` permission)."""
        return await self._api.call("knowledge.list", {}, KnowledgeListResult)

    async def retrieve(
        self, kb_id: str, query_text: str, *, top_k: int = 5, filters: dict[str, JsonValue] | None = None
    ) -> KnowledgeRetrieveResult:
        """Retrieve passages from a granted knowledge base."""
        params = {"kb_id": kb_id, "query_text": query_text, "top_k": top_k, "filters": filters}
        return await self._api.call("knowledge.retrieve", params, KnowledgeRetrieveResult)


class _History(_Namespace):
    async def page(
        self,
        *,
        conversation_id: str | None = None,
        thread_id: str | None = None,
        before_cursor: str | None = None,
        after_cursor: str | None = None,
        limit: int = 50,
        direction: str = "backward",
        include_artifacts: bool = False,
    ) -> HistoryPage:
        """A page of the transcript (oldest first within the page)."""
        params = {
            "conversation_id": conversation_id,
            "thread_id": thread_id,
            "before_cursor": before_cursor,
            "after_cursor": after_cursor,
            "limit": limit,
            "direction": direction,
            "include_artifacts": include_artifacts,
        }
        return await self._api.call("history.page", params, HistoryPage)

    async def search(
        self, query: str, *, filters: dict[str, JsonValue] | None = None, top_k: int = 10
    ) -> HistoryPage:
        """Full-text search of the transcript."""
        return await self._api.call(
            "history.search", {"query": query, "filters": filters, "top_k": top_k}, HistoryPage
        )


class _Events(_Namespace):
    async def get(self, event_id: str) -> EventRecord:
        """One event of the run's conversation."""
        return await self._api.call("events.get", {"event_id": event_id}, EventRecord)

    async def page(
        self, *, before_cursor: str | None = None, limit: int = 50, event_types: list[str] | None = None
    ) -> EventPage:
        """A page of the conversation's event log."""
        types: list[JsonValue] | None = None if event_types is None else list(event_types)
        params = {"before_cursor": before_cursor, "limit": limit, "event_types": types}
        return await self._api.call("events.page", params, EventPage)


class _Artifacts(_Namespace):
    async def metadata(self, artifact_id: str) -> ArtifactMetadata:
        """An artifact's metadata."""
        return await self._api.call("artifacts.metadata", {"artifact_id": artifact_id}, ArtifactMetadata)

    async def read_range(self, artifact_id: str, *, offset: int = 0, length: int = 65536) -> ArtifactChunk:
        """A byte range of an artifact."""
        params = {"artifact_id": artifact_id, "offset": offset, "length": length}
        return await self._api.call("artifacts.read_range", params, ArtifactChunk)

    def open_stream(self, artifact_id: str) -> AsyncIterator[ArtifactChunk]:
        """Stream an artifact's bytes chunk by chunk."""
        return self._api.stream("artifacts.open_stream", {"artifact_id": artifact_id}, ArtifactChunk)

    async def read_all(self, artifact_id: str, *, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        """All bytes of an artifact (refuses artifacts larger than *max_bytes*)."""
        out = bytearray()
        chunks = self.open_stream(artifact_id)
        try:
            async for chunk in chunks:
                out += base64.b64decode(chunk.data_base64)
                if len(out) > max_bytes:
                    raise InvalidArgumentError(f"artifact {artifact_id} is larger than {max_bytes} bytes")
        finally:
            # Bailing out early must close the transport's stream now, not whenever the generator is collected.
            closer = getattr(chunks, "aclose", None)
            if closer is not None:
                await closer()
        return bytes(out)


class _State(_Namespace):
    async def get(self, scope: StateScope, key: str) -> StateValue:
        """Read a state key."""
        return await self._api.call("state.get", {"scope": scope, "key": key}, StateValue)

    async def set(
        self,
        scope: StateScope,
        key: str,
        value: JsonValue,
        *,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> StateValue:
        """Write a state key (compare-and-set with *expected_version*)."""
        params = {"scope": scope, "key": key, "value": value, "expected_version": expected_version}
        return await self._api.call("state.set", params, StateValue, idempotency_key=idempotency_key)

    async def delete(self, scope: StateScope, key: str) -> None:
        """Delete a state key."""
        await self._api.call_raw("state.delete", {"scope": scope, "key": key})

    async def list(
        self, scope: StateScope, *, prefix: str | None = None, cursor: str | None = None, limit: int = 100
    ) -> StateListPage:
        """List state keys by prefix."""
        params = {"scope": scope, "prefix": prefix, "cursor": cursor, "limit": limit}
        return await self._api.call("state.list", params, StateListPage)


class _Storage(_Namespace):
    async def get(self, area: str, key: str) -> StorageValue:
        """Read a storage key."""
        return await self._api.call("storage.get", {"area": area, "key": key}, StorageValue)

    async def set(
        self, area: str, key: str, value: bytes, *, idempotency_key: str | None = None
    ) -> StorageValue:
        """Write a storage key."""
        params = {"area": area, "key": key, "value_base64": base64.b64encode(value).decode()}
        return await self._api.call("storage.set", params, StorageValue, idempotency_key=idempotency_key)

    async def delete(self, area: str, key: str) -> None:
        """Delete a storage key."""
        await self._api.call_raw("storage.delete", {"area": area, "key": key})

    async def list(
        self, area: str, *, prefix: str | None = None, cursor: str | None = None, limit: int = 100
    ) -> StorageListPage:
        """List storage keys by prefix."""
        params = {"area": area, "prefix": prefix, "cursor": cursor, "limit": limit}
        return await self._api.call("storage.list", params, StorageListPage)


class _Platform(_Namespace):
    async def request_action(
        self,
        action: str,
        target: dict[str, JsonValue],
        payload: dict[str, JsonValue] | None = None,
        *,
        idempotency_key: str,
    ) -> PlatformActionReceipt:
        """Ask for a platform action (recorded, never executed in v1)."""
        params = {
            "action": action,
            "target": target,
            "payload": payload or {},
            "idempotency_key": idempotency_key,
        }
        return await self._api.call(
            "platform.request_action", params, PlatformActionReceipt, idempotency_key=idempotency_key
        )


class AgentRunAPI:
    """The back-call client of one run. Build it with the run's id and deadline; share it across tasks."""

    models: _Part[_Models] = _Part(_Models)
    """``models.invoke`` / ``stream`` / ``rerank``."""
    tools: _Part[_Tools] = _Part(_Tools)
    """``tools.get_detail`` / ``call``."""
    knowledge: _Part[_Knowledge] = _Part(_Knowledge)
    """``knowledge.list`` / ``retrieve``."""
    history: _Part[_History] = _Part(_History)
    """``history.page`` / ``search``."""
    events: _Part[_Events] = _Part(_Events)
    """``events.get`` / ``page``."""
    artifacts: _Part[_Artifacts] = _Part(_Artifacts)
    """``artifacts.metadata`` / ``read_range`` / ``open_stream``."""
    state: _Part[_State] = _Part(_State)
    """``state.get`` / ``set`` / ``delete`` / ``list``."""
    storage: _Part[_Storage] = _Part(_Storage)
    """``storage.get`` / ``set`` / ``delete`` / ``list``."""
    platform: _Part[_Platform] = _Part(_Platform)
    """``platform.request_action``."""

    def __init__(
        self,
        transport: APITransport,
        *,
        run_id: str,
        deadline_at: float | None = None,
        call_token: str | None = None,
    ) -> None:
        self.transport = transport
        self.run_id = run_id
        self.deadline_at = deadline_at
        self._call_token = call_token  # the run's credential (AgentRunRequest.call_token); never logged

    def _remaining(self) -> float | None:
        if self.deadline_at is None:
            return None
        remaining = self.deadline_at - time.time()
        if remaining <= 0:
            raise DeadlineExceededError("the run's deadline has passed")
        return remaining

    def _request(
        self, action: str, params: Mapping[str, JsonValue], idempotency_key: str | None
    ) -> BackCallRequest:
        spec = ACTIONS.get(action)
        if spec is None:
            raise InvalidArgumentError(f"unknown action {action!r}")
        # None means "not given" for optional params only: a required JSON value may itself be null.
        fields = spec.params.model_fields
        clean = {
            k: v for k, v in params.items() if v is not None or (k in fields and fields[k].is_required())
        }
        where = codec.non_finite_path(clean)
        if where is not None:
            raise InvalidArgumentError(f"{action}: {where}: NaN and Infinity are not JSON numbers")
        return BackCallRequest(
            run_id=self.run_id,
            action=action,
            params=clean,
            idempotency_key=idempotency_key,
            call_token=self._call_token,
        )

    async def call_raw(
        self, action: str, params: Mapping[str, JsonValue], *, idempotency_key: str | None = None
    ) -> JsonObject:
        """Perform *action* and return its JSON result unvalidated (actions outside :data:`ACTIONS` are refused)."""
        request = self._request(action, params, idempotency_key)
        timeout = self._remaining()
        if timeout is None:  # no deadline: no timeout scope to enter and leave on every call
            return await self.transport.call(request, timeout=None)
        try:
            async with asyncio.timeout(timeout):
                return await self.transport.call(request, timeout=timeout)
        except TimeoutError as exc:
            raise DeadlineExceededError(f"{action} did not finish before the run's deadline") from exc

    async def call(
        self,
        action: str,
        params: Mapping[str, JsonValue],
        result: type[_R],
        *,
        idempotency_key: str | None = None,
    ) -> _R:
        """Perform *action* and validate its result as *result*."""
        raw = await self.call_raw(action, params, idempotency_key=idempotency_key)
        return result.model_validate(raw)

    async def stream(
        self, action: str, params: Mapping[str, JsonValue], result: type[_R]
    ) -> AsyncIterator[_R]:
        """Perform a streaming *action*, validating each chunk as *result*.

        The deadline is applied to each wait for the next chunk, never around a ``yield``, so the consumer's own
        work between chunks is not interrupted by a timeout scope.
        """
        request = self._request(action, params, None)
        chunks = aiter(self.transport.stream(request, timeout=self._remaining()))
        try:
            while True:
                timeout = self._remaining()
                try:
                    # asyncio.timeout, never wait_for: on Python 3.11 wait_for drops the caller's cancellation
                    # when the inner call has already finished, so a cancelled run would stream on.
                    async with asyncio.timeout(timeout):
                        chunk = await anext(chunks)
                except StopAsyncIteration:
                    return
                except TimeoutError as exc:
                    raise DeadlineExceededError(f"{action} did not finish before the run's deadline") from exc
                yield result.model_validate(chunk)
        finally:
            closer = getattr(chunks, "aclose", None)
            if closer is not None:
                await closer()


def _dump_all(messages: Sequence[ChatMessage | Mapping[str, JsonValue]]) -> list[JsonValue]:
    return [
        m.model_dump(mode="json", exclude_none=True) if isinstance(m, ChatMessage) else dict(m)
        for m in messages
    ]


def _objects(items: Sequence[Mapping[str, JsonValue]] | None) -> list[JsonValue] | None:
    return None if items is None else [dict(item) for item in items]
