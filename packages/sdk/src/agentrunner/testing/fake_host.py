"""``FakeHost``: an in-memory double of the host's run API for a runner's unit tests.

It answers back-calls the way the host does for the parts a runner usually touches — state with per-key
versions and compare-and-set, storage areas, grants per scope and area — refuses the rest with the host's
error, lets a test inject errors (``unauthorized``, ``rate_limited``, a CAS conflict...) and answer any action
with its own handler (a model, a tool). It never imports the host: the semantics are those the host documents
in ``docs/protocol.md`` and are pinned against the real host by ``tests/sdk/test_testing.py``.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel, JsonValue, ValidationError

from agentrunner import codec
from agentrunner.actions import (
    ACTIONS,
    BackCallRequest,
    EmptyResult,
    StateDeleteParams,
    StateGetParams,
    StateListParams,
    StateSetParams,
    StorageDeleteParams,
    StorageGetParams,
    StorageListParams,
    StorageSetParams,
)
from agentrunner.api import AgentRunAPI
from agentrunner.api_types import (
    StateEntry,
    StateListPage,
    StateValue,
    StorageEntry,
    StorageListPage,
    StorageValue,
)
from agentrunner.codec import JsonObject
from agentrunner.context import AgentRunContext
from agentrunner.errors import (
    APIError,
    InvalidArgumentError,
    PayloadTooLargeError,
    UnauthorizedError,
)
from agentrunner.results import MAX_STATE_VALUE_BYTES, StateScope, StateUpdatedResult

from .contexts import DEFAULT_STATE_SCOPES, DEFAULT_STORAGE_AREAS

__all__ = ["MAX_STORAGE_VALUE_BYTES", "FakeCall", "FakeHost", "Handler"]

MAX_STORAGE_VALUE_BYTES: Final = 1024 * 1024
"""The host's default cap of one storage value (bytes)."""

_PAGE_CAP: Final = 100

Handler = Callable[[BackCallRequest], Awaitable[Mapping[str, Any]] | Mapping[str, Any]]
"""Answers one call: returns the result as JSON (or an awaitable of it), or raises an :class:`APIError`."""


@dataclass(frozen=True, slots=True)
class FakeCall:
    """One back-call the fake host received."""

    request: BackCallRequest
    """The call as the runner's client sent it."""
    error: APIError | None = None
    """The error it was answered with, if any."""

    @property
    def action(self) -> str:
        """The action, e.g. ``state.set``."""
        return self.request.action


@dataclass(slots=True)
class _Injected:
    error: APIError
    times: int | None  # None: every call


@dataclass(slots=True)
class _Entry:
    value: JsonValue
    version: int
    updated_at: int


@dataclass(slots=True)
class _Run:
    ctx: AgentRunContext
    live: bool = True
    owners: dict[str, str] = field(default_factory=dict[str, str])


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class FakeHost:
    """An in-memory host for unit tests; one instance keeps state across the runs it serves.

    >>> host = FakeHost()                                   # the host's default grants
    >>> api = host.api(ctx)                                 # doctest: +SKIP
    >>> host.fail("state.get", RateLimitedError("slow down"), times=1)
    >>> host.on("models.invoke", lambda request: {"model_id": "m", "message": {"role": "assistant", "content": "hi"}})

    *state_scopes* are the granted state scopes (the host's default: conversation, actor, runner); a scope also
    needs the identity it is keyed by (a conversation id, an actor id). *storage_areas* are the granted
    storage areas. Every other action is refused ``unauthorized`` unless a handler answers it (:meth:`on`).
    """

    calls: list[FakeCall]
    """Every call received, in order."""

    def __init__(
        self,
        *,
        state_scopes: Iterable[StateScope] = DEFAULT_STATE_SCOPES,
        storage_areas: Iterable[str] = DEFAULT_STORAGE_AREAS,
        runner_id: str = "plugin:tests/fake/default",
        binding_id: str = "binding-1",
    ) -> None:
        self.calls = []
        self.state_scopes: frozenset[str] = frozenset(state_scopes)
        """Granted state scopes."""
        self.storage_areas: frozenset[str] = frozenset(storage_areas)
        """Granted storage areas."""
        self.runner_id = runner_id
        """Owner of the ``runner`` state scope."""
        self.binding_id = binding_id
        """Owner of the ``binding`` state scope and storage area."""
        self._handlers: dict[str, Handler] = {}
        self._errors: dict[str, list[_Injected]] = {}
        self._runs: dict[str, _Run] = {}
        self._state: dict[tuple[str, str, str], _Entry] = {}
        self._storage: dict[tuple[str, str, str], tuple[bytes, int]] = {}

    # -- configuration ---------------------------------------------------------------------------------------

    def on(self, action: str, handler: Handler) -> None:
        """Answer *action* with *handler* (replaces the built-in state/storage answer for it)."""
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        self._handlers[action] = handler

    def fail(self, action: str, error: APIError, *, times: int | None = None) -> None:
        """Answer the next *times* calls of *action* (every call when ``None``) with *error*; injected errors
        are used in the order they were added."""
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        self._errors.setdefault(action, []).append(_Injected(error, times))

    # -- runs ------------------------------------------------------------------------------------------------

    def api(self, ctx: AgentRunContext) -> AgentRunAPI:
        """Open a run for *ctx* and return the client its runner uses (bounded by ``ctx.runtime.deadline_at``)."""
        run = _Run(ctx=ctx)
        run.owners = self._owners(ctx)
        self._runs[ctx.run_id] = run
        for scope, values in (
            ("conversation", ctx.state.conversation),
            ("actor", ctx.state.actor),
            ("subject", ctx.state.subject),
            ("runner", ctx.state.runner),
        ):
            owner = run.owners.get(scope)
            if owner is None:
                continue
            for key, value in values.items():
                self._state.setdefault((scope, owner, key), _Entry(value, 1, _now_ms()))
        return AgentRunAPI(self, run_id=ctx.run_id, deadline_at=ctx.runtime.deadline_at)

    def close(self, run_id: str) -> None:
        """End a run: later calls for it are refused ``unauthorized``, as the host does."""
        run = self._runs.get(run_id)
        if run is not None:
            run.live = False

    def apply(self, run_id: str, result: StateUpdatedResult) -> None:
        """Apply a ``state.updated`` result as the host does after the run recorded it (``value: null``
        deletes); an ungranted scope is ignored, as the host refuses it."""
        run = self._runs.get(run_id)
        data = result.data
        owner = None if run is None else run.owners.get(data.scope)
        if owner is None:
            return
        key = (data.scope, owner, data.key)
        if data.value is None:
            self._state.pop(key, None)
            return
        previous = self._state.get(key)
        self._state[key] = _Entry(data.value, 1 if previous is None else previous.version + 1, _now_ms())

    # -- inspection ------------------------------------------------------------------------------------------

    def state_value(self, ctx: AgentRunContext, scope: StateScope, key: str) -> JsonValue:
        """The value of *key* in *scope* as a run with *ctx* sees it (``None`` when unset)."""
        owner = self._owners(ctx).get(scope)
        entry = None if owner is None else self._state.get((scope, owner, key))
        return None if entry is None else entry.value

    def actions(self) -> list[str]:
        """The action of every call received, in order."""
        return [c.action for c in self.calls]

    # -- APITransport ----------------------------------------------------------------------------------------

    async def call(self, request: BackCallRequest, *, timeout: float | None) -> JsonObject:
        """Answer one call (``APITransport``)."""
        try:
            answer = await self._answer(request)
        except APIError as exc:
            self.calls.append(FakeCall(request, exc))
            raise
        self.calls.append(FakeCall(request))
        return answer

    async def stream(self, request: BackCallRequest, *, timeout: float | None) -> AsyncIterator[JsonObject]:
        """Answer a streaming call with the chunks its handler returns (``{"chunks": [...]}``)."""
        answer = await self.call(request, timeout=timeout)
        chunks = answer.get("chunks", [answer])
        if not isinstance(chunks, list):
            raise TypeError(f"{request.action}: a streaming handler answers {{'chunks': [...]}}")
        for chunk in chunks:
            if not isinstance(chunk, dict):
                raise TypeError(f"{request.action}: each chunk is a JSON object")
            yield dict(chunk)

    async def _answer(self, request: BackCallRequest) -> JsonObject:
        run = self._runs.get(request.run_id)
        if run is None or not run.live:
            raise UnauthorizedError(f"run {request.run_id} is not live")
        injected = self._errors.get(request.action)
        if injected:
            first = injected[0]
            if first.times is not None:
                first.times -= 1
                if first.times <= 0:
                    injected.pop(0)
            raise first.error
        spec = ACTIONS[request.action]
        try:
            params = spec.params.model_validate(request.params)
        except ValidationError as exc:
            raise InvalidArgumentError(
                f"{request.action}: invalid params: {exc.errors()[0]['msg']}"
            ) from None
        handler = self._handlers.get(request.action)
        if handler is not None:
            answer = handler(request)
            if isinstance(answer, Awaitable):
                answer = await answer
            return dict(answer)
        built_in = self._built_in(run, params)
        if built_in is None:
            raise UnauthorizedError(
                f"{request.action} is not granted to this run (no handler in the FakeHost)"
            )
        return built_in.model_dump(mode="json")

    def _built_in(self, run: _Run, params: BaseModel) -> BaseModel | None:
        match params:
            case StateGetParams(scope=scope, key=key):
                entry = self._state.get((scope, self._state_owner(run, scope), key))
                if entry is None:
                    return StateValue(scope=scope, key=key)
                return StateValue(scope=scope, key=key, value=entry.value, exists=True, version=entry.version)
            case StateSetParams(scope=scope, key=key, value=value, expected_version=expected):
                return self._state_set(run, scope, key, value, expected)
            case StateDeleteParams(scope=scope, key=key):
                self._state.pop((scope, self._state_owner(run, scope), key), None)
                return EmptyResult()
            case StateListParams(scope=scope, prefix=prefix, cursor=cursor, limit=limit):
                owner = self._state_owner(run, scope)
                keys = sorted(
                    k for (s, o, k) in self._state if s == scope and o == owner and k.startswith(prefix or "")
                )
                page, more = _page(keys, cursor, limit)
                return StateListPage(
                    items=[
                        StateEntry(key=k, version=e.version, updated_at=e.updated_at)
                        for k in page
                        for e in (self._state[(scope, owner, k)],)
                    ],
                    next_cursor=page[-1] if more and page else None,
                    has_more=more,
                )
            case StorageGetParams(area=area, key=key):
                stored = self._storage.get((area, self._storage_owner(run, area), key))
                if stored is None:
                    return StorageValue(area=area, key=key)
                return StorageValue(
                    area=area,
                    key=key,
                    value_base64=base64.b64encode(stored[0]).decode(),
                    exists=True,
                    size=len(stored[0]),
                )
            case StorageSetParams(area=area, key=key, value_base64=encoded):
                owner = self._storage_owner(run, area)
                try:
                    data = base64.b64decode(encoded, validate=True)
                except (binascii.Error, ValueError):
                    raise InvalidArgumentError("value_base64 is not valid base64") from None
                if len(data) > MAX_STORAGE_VALUE_BYTES:
                    raise PayloadTooLargeError(
                        f"storage values are limited to {MAX_STORAGE_VALUE_BYTES} bytes"
                    )
                self._storage[(area, owner, key)] = (data, _now_ms())
                return StorageValue(area=area, key=key, value_base64=encoded, exists=True, size=len(data))
            case StorageDeleteParams(area=area, key=key):
                self._storage.pop((area, self._storage_owner(run, area), key), None)
                return EmptyResult()
            case StorageListParams(area=area, prefix=prefix, cursor=cursor, limit=limit):
                owner = self._storage_owner(run, area)
                keys = sorted(
                    k
                    for (a, o, k) in self._storage
                    if a == area and o == owner and k.startswith(prefix or "")
                )
                page, more = _page(keys, cursor, limit)
                return StorageListPage(
                    items=[
                        StorageEntry(key=k, size=len(v), updated_at=t)
                        for k in page
                        for (v, t) in (self._storage[(area, owner, k)],)
                    ],
                    next_cursor=page[-1] if more and page else None,
                    has_more=more,
                )
            case _:
                return None

    def _state_set(
        self, run: _Run, scope: str, key: str, value: JsonValue, expected: int | None
    ) -> StateValue:
        owner = self._state_owner(run, scope)
        size = codec.json_size(value)
        if size > MAX_STATE_VALUE_BYTES:
            raise PayloadTooLargeError(
                f"state values are limited to {MAX_STATE_VALUE_BYTES} bytes",
                details={"size": size, "limit": MAX_STATE_VALUE_BYTES},
            )
        previous = self._state.get((scope, owner, key))
        current = 0 if previous is None else previous.version
        if expected is not None and expected != current:
            # The host's answer to a lost compare-and-set (docs/protocol.md § Back-calls).
            raise InvalidArgumentError(
                f"state key {key!r} is at version {current}, not {expected}",
                details={
                    "reason": "version_conflict",
                    "expected_version": expected,
                    "current_version": current,
                },
            )
        entry = _Entry(value, current + 1, _now_ms())
        self._state[(scope, owner, key)] = entry
        return StateValue(scope=scope, key=key, value=value, exists=True, version=entry.version)

    def _state_owner(self, run: _Run, scope: str) -> str:
        owner = run.owners.get(scope)
        if owner is None:
            raise UnauthorizedError(f"state scope {scope!r} is not granted to this run")
        return owner

    def _storage_owner(self, run: _Run, area: str) -> str:
        owner = run.owners.get(f"storage:{area}")
        if owner is None:
            raise UnauthorizedError(f"storage area {area!r} is not granted to this run")
        return owner

    def _owners(self, ctx: AgentRunContext) -> dict[str, str]:
        # The identity each granted scope and area is keyed by, as the host derives it from the event.
        conversation = ctx.conversation
        ids: dict[str, str | None] = {
            "conversation": None
            if conversation is None or conversation.conversation_id is None
            else f"{conversation.conversation_id}/{conversation.thread_id or ''}",
            "actor": None if ctx.actor is None else ctx.actor.actor_id,
            "subject": None if ctx.subject is None else ctx.subject.subject_id,
            "runner": self.runner_id,
            "binding": self.binding_id,
            "workspace": None if conversation is None else conversation.workspace_id,
        }
        owners = {scope: owner for scope, owner in ids.items() if scope in self.state_scopes and owner}
        areas: dict[str, str | None] = {
            "plugin": self.runner_id.removeprefix("plugin:").rsplit("/", 1)[0],
            "binding": self.binding_id,
            "workspace": ids["workspace"],
        }
        owners |= {f"storage:{a}": o for a, o in areas.items() if a in self.storage_areas and o}
        return owners


def _page(keys: list[str], cursor: str | None, limit: int) -> tuple[list[str], bool]:
    after = [k for k in keys if cursor is None or k > cursor]
    size = min(limit, _PAGE_CAP)
    return after[:size], len(after) > size
