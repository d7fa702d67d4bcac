"""The back-call dispatcher: every call a runner makes is checked here against its run's frozen snapshot.

Checks, in order (PROTOCOL_V1 §8, QA guide §8): caller identity present → run live → caller is the run's
plugin → the call carries the run's own credential (its per-run ``call_token``) → known action → deadline → payload size → rate limit → parameters → the action is granted by the
snapshot for that resource. Denials answer the §9 codes. Every call, allowed or denied, leaves an audit
record (run, runner, action, resource, scope, decision, latency). v1 never retries anything by itself.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal, TypeVar

from agentrunner import (
    ACTIONS,
    APIError,
    BackCallRequest,
    DeadlineExceededError,
    InvalidArgumentError,
    NotFoundError,
    PayloadTooLargeError,
    PlatformActionReceipt,
    RateLimitedError,
    RuntimeAPIError,
    UnauthorizedError,
)
from agentrunner import codec as json
from agentrunner.actions import (
    ActionSpec,
    ArtifactIdParams,
    ArtifactReadParams,
    EmptyParams,
    EventGetParams,
    EventPageParams,
    HistoryPageParams,
    HistorySearchParams,
    KnowledgeListResult,
    KnowledgeRetrieveParams,
    ModelInvokeParams,
    ModelRerankParams,
    PlatformActionParams,
    StateDeleteParams,
    StateGetParams,
    StateListParams,
    StateSetParams,
    StorageDeleteParams,
    StorageGetParams,
    StorageListParams,
    StorageSetParams,
    ToolCallParams,
    ToolDetailParams,
)
from agentrunner.api_types import KnowledgeBaseInfo
from agentrunner.codec import JsonObject
from pydantic import BaseModel, ValidationError

from agentrunner_host.providers.protocols import KnowledgeProvider, ModelProvider, ToolProvider

from .access import RunAccess
from .authorization import AuthorizationSnapshot
from .ports import FactsAPI, IdempotencyKeys

__all__ = ["HANDLERS", "ActionHandler", "AuditRecord", "BackCallDispatcher", "LiveRun", "check_handlers"]

P = TypeVar("P", bound=BaseModel)
T = TypeVar("T")

log = logging.getLogger("agentrunner.host.dispatcher")

_ENDED_MEMORY = 10_000


@dataclass(slots=True)
class AuditRecord:
    """One back-call, as the audit trail records it."""

    run_id: str
    runner_id: str
    caller: str | None
    action: str
    resource: str | None
    scope: str | None
    decision: str
    """``allowed`` or the §9 error code."""
    latency_ms: float
    at: float
    risk: tuple[str, ...] = ()
    """The dangerous classes of the tool a ``tools.*`` call named (granted or withheld); empty otherwise."""
    source: Literal["backcall", "harness"] = "backcall"
    """``backcall``: a call of the back-call API; ``harness``: a tool the harness CLI reported using
    (:mod:`agentrunner_host.harness_audit`)."""
    detail: str | None = None
    """What a harness tool did (its command, file or URL), masked and capped."""
    error: str | None = None
    """A harness tool's failure code (``tool.error``, ``tool.unfinished``); ``None`` when it succeeded."""


class _TokenBucket:
    __slots__ = ("burst", "rate", "stamp", "tokens")

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, float(burst)
        self.tokens, self.stamp = float(burst), time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


# typed factories: a generic alias called per run (``list[AuditRecord]()``) raises and catches an
# AttributeError setting ``__orig_class__`` on the list


def _no_audit() -> list[AuditRecord]:
    return []


def _no_requests() -> list[JsonObject]:
    return []


@dataclass(slots=True)
class LiveRun:
    """A registered, live run."""

    snapshot: AuthorizationSnapshot
    access: RunAccess
    bucket: _TokenBucket
    call_token: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)
    """The run's call credential: every back-call must present it (a run id alone is not a credential)."""
    audit: list[AuditRecord] = field(default_factory=_no_audit)
    """The run's back-calls not yet known to be stored, in call order (the live audit writer drops the ones it
    stored)."""
    audit_stored: int = 0
    """How many of ``audit`` are stored already (written while the run was live)."""
    notify: Callable[[], None] | None = field(default=None, repr=False)
    """Called after each record is appended (the live audit writer stores them)."""
    platform_requests: list[JsonObject] = field(default_factory=_no_requests)


class BackCallDispatcher:
    """Implements :class:`~agentrunner_host.runtime.connection.BackCallHandler` for every live run."""

    def __init__(
        self,
        *,
        pull: FactsAPI | None = None,
        models: ModelProvider | None = None,
        tools: ToolProvider | None = None,
        knowledge: KnowledgeProvider | None = None,
        idempotency: IdempotencyKeys | None = None,
        on_audit: Callable[[AuditRecord], None] | None = None,
    ) -> None:
        self.pull = pull
        self.models = models
        self.tools = tools
        self.knowledge = knowledge
        self.idempotency = idempotency
        self.on_audit = on_audit
        self._live: dict[str, LiveRun] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()
        self._memory_idempotency: OrderedDict[tuple[str, str, str], JsonObject] = OrderedDict()

    # -- registry of live runs -------------------------------------------------------------------------------

    def register(self, snapshot: AuthorizationSnapshot) -> LiveRun:
        """Make a run live. A run id that has ended can never be registered again."""
        if snapshot.run_id in self._live or snapshot.run_id in self._ended:
            raise ValueError(f"run {snapshot.run_id} was already registered")
        policy = snapshot.run_policy
        live = LiveRun(snapshot, snapshot.access(), _TokenBucket(policy.backcall_rate, policy.backcall_burst))
        self._live[snapshot.run_id] = live
        return live

    def unregister(self, run_id: str) -> LiveRun | None:
        """End a run: every later call for it is refused. Idempotent."""
        live = self._live.pop(run_id, None)
        self._ended[run_id] = None
        while len(self._ended) > _ENDED_MEMORY:
            self._ended.popitem(last=False)
        return live

    def live_run_ids(self) -> list[str]:
        """The ids of the live runs."""
        return list(self._live)

    def live_run(self, run_id: str) -> LiveRun | None:
        """The registered run *run_id*, while it is live."""
        return self._live.get(run_id)

    def is_live(self, run_id: str) -> bool:
        """Whether the run accepts back-calls."""
        return run_id in self._live

    def live_count(self) -> int:
        """Number of live runs."""
        return len(self._live)

    # -- BackCallHandler ---------------------------------------------------------------------------------------

    async def handle(self, request: BackCallRequest) -> JsonObject:
        """Serve one call."""
        started = time.monotonic()
        live: LiveRun | None = None
        resource = _resource_of(request.params)
        try:
            live, handler, spec_params = self._admit(request)
            call = handler.call
            if call is None:
                raise InvalidArgumentError(f"{request.action} is a streaming action; use the stream call")
            cached = await self._idempotent_get(live, request)
            if cached is not None:
                self._audit(live, request, resource, "allowed", started)
                return cached
            remaining = live.snapshot.deadline_at - time.time()
            try:
                async with asyncio.timeout(remaining):
                    result = await call(self, live, spec_params)
            except TimeoutError:
                raise DeadlineExceededError(
                    f"{request.action} did not finish before the run's deadline"
                ) from None
            payload = result.model_dump(mode="json")
            if json.json_size(payload) > live.snapshot.run_policy.max_backcall_bytes:
                raise PayloadTooLargeError(f"the result of {request.action} is larger than the run's limit")
            await self._idempotent_put(live, request, payload)
        except APIError as exc:
            self._audit(live, request, resource, exc.code, started)
            raise
        except Exception as exc:  # a provider bug must not look like success, nor leak internals
            log.exception("back-call %s of run %s failed", request.action, request.run_id)
            self._audit(live, request, resource, "runtime_error", started)
            raise RuntimeAPIError(f"{request.action} failed: {type(exc).__name__}") from exc
        self._audit(live, request, resource, "allowed", started)
        return payload

    async def handle_stream(self, request: BackCallRequest) -> AsyncIterator[JsonObject]:
        """Serve a streaming call chunk by chunk."""
        started = time.monotonic()
        live: LiveRun | None = None
        resource = _resource_of(request.params)
        try:
            live, handler, params = self._admit(request)
            if handler.stream is None:
                raise InvalidArgumentError(f"{request.action} is not a streaming action")
            async for chunk in handler.stream(self, live, params):
                if request.run_id not in self._live:
                    raise UnauthorizedError(f"run {request.run_id} has ended")
                if time.time() > live.snapshot.deadline_at:
                    raise DeadlineExceededError(f"{request.action} did not finish before the run's deadline")
                yield chunk.model_dump(mode="json")
        except APIError as exc:
            self._audit(live, request, resource, exc.code, started)
            raise
        except Exception as exc:
            log.exception("streaming back-call %s of run %s failed", request.action, request.run_id)
            self._audit(live, request, resource, "runtime_error", started)
            raise RuntimeAPIError(f"{request.action} failed: {type(exc).__name__}") from exc
        self._audit(live, request, resource, "allowed", started)

    # -- checks ------------------------------------------------------------------------------------------------

    def _admit(self, request: BackCallRequest) -> tuple[LiveRun, ActionHandler, BaseModel]:
        if not request.caller:
            raise UnauthorizedError("the call carries no caller identity")
        live = self._live.get(request.run_id)
        if live is None:
            if request.run_id in self._ended:
                raise UnauthorizedError(f"run {request.run_id} has ended")
            raise UnauthorizedError(f"run {request.run_id} is not active")
        snapshot = live.snapshot
        if request.caller != snapshot.plugin_id:
            raise UnauthorizedError(f"run {request.run_id} does not belong to {request.caller}")
        # Same plugin, even the same connection, is not enough: runs of one plugin share a process, so a runner
        # could name a sibling run's id. Only the run's own API holds its token.
        if not hmac.compare_digest((request.call_token or "").encode(), live.call_token.encode()):
            raise UnauthorizedError(f"the call does not carry the credential of run {request.run_id}")
        handler = HANDLERS.get(request.action)
        if handler is None:
            raise InvalidArgumentError(f"unknown action {request.action!r}")
        if time.time() >= snapshot.deadline_at:
            raise DeadlineExceededError("the run's deadline has passed")
        if json.json_size(request.params) > snapshot.run_policy.max_backcall_bytes:
            raise PayloadTooLargeError(f"{request.action} parameters are larger than the run's limit")
        if not live.bucket.take():
            raise RateLimitedError(f"run {request.run_id} is making back-calls too fast")
        try:
            params = handler.params.model_validate(request.params)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "params"
            raise InvalidArgumentError(f"{request.action}: {loc}: {first['msg']}") from None
        handler.authorize(snapshot, params)
        return live, handler, params

    # -- idempotency and audit ---------------------------------------------------------------------------------

    async def _idempotent_get(self, live: LiveRun, request: BackCallRequest) -> JsonObject | None:
        if request.idempotency_key is None or not ACTIONS[request.action].side_effecting:
            return None
        scope = (live.snapshot.plugin_id, live.snapshot.binding_id, request.action)
        if self.idempotency is not None:
            found: JsonObject | None = await self.idempotency.get(scope, request.idempotency_key)
            return found
        return self._memory_idempotency.get((*scope[1:], request.idempotency_key))

    async def _idempotent_put(self, live: LiveRun, request: BackCallRequest, payload: JsonObject) -> None:
        if request.idempotency_key is None or not ACTIONS[request.action].side_effecting:
            return
        scope = (live.snapshot.plugin_id, live.snapshot.binding_id, request.action)
        if self.idempotency is not None:
            await self.idempotency.put(scope, request.idempotency_key, payload)
            return
        self._memory_idempotency[(*scope[1:], request.idempotency_key)] = payload
        while len(self._memory_idempotency) > _ENDED_MEMORY:
            self._memory_idempotency.popitem(last=False)

    def _audit(
        self,
        live: LiveRun | None,
        request: BackCallRequest,
        resource: str | None,
        decision: str,
        started: float,
    ) -> None:
        if live is None:
            # Denied before admission: still file it under the run it named, when that run is live.
            live = self._live.get(request.run_id)
        risk: tuple[str, ...] = ()
        if live is not None and resource is not None and request.action.startswith("tools."):
            snapshot = live.snapshot
            risk = snapshot.dangerous_tools.get(resource) or snapshot.withheld_tools.get(resource) or ()
        record = AuditRecord(
            run_id=request.run_id,
            runner_id=live.snapshot.runner_id if live else "",
            caller=request.caller,
            action=request.action,
            resource=resource,
            scope=(live.snapshot.conversation_id if live else None),
            decision=decision,
            latency_ms=(time.monotonic() - started) * 1000.0,
            at=time.time(),
            risk=risk,
        )
        if live is not None:
            live.audit.append(record)
            if live.notify is not None:
                live.notify()
        if risk:
            log.warning(
                "dangerous tool call: run=%s runner=%s tool=%s risk=%s decision=%s",
                request.run_id,
                record.runner_id,
                resource,
                ",".join(risk),
                decision,
            )
        if decision != "allowed":
            log.info(
                "back-call denied: run=%s action=%s resource=%s code=%s",
                request.run_id,
                request.action,
                resource,
                decision,
            )
        if self.on_audit is not None:
            self.on_audit(record)


def _resource_of(params: JsonObject) -> str | None:
    """The resource a call names, for the audit trail (read before validation so denials name it too)."""
    for name in ("model_id", "tool_name", "kb_id", "artifact_id", "event_id", "key", "conversation_id"):
        value = params.get(name)
        if isinstance(value, str):
            return value[:200]
    return None


# -- one handler per action --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ActionHandler:
    """How the host serves one action of :data:`agentrunner.actions.ACTIONS`: its params model, the grant it
    checks against the run's snapshot, and what it does (a call answering one result, or a stream)."""

    action: str
    """Wire name."""
    params: type[BaseModel]
    """Params model (the action spec's)."""
    authorize: Callable[[AuthorizationSnapshot, BaseModel], None]
    """Raises :class:`~agentrunner.UnauthorizedError` unless the snapshot grants the call."""
    call: Callable[[BackCallDispatcher, LiveRun, BaseModel], Awaitable[BaseModel]] | None = None
    """Serves a unary action."""
    stream: Callable[[BackCallDispatcher, LiveRun, BaseModel], AsyncIterator[BaseModel]] | None = None
    """Serves a streaming action."""


def _as(kind: type[P], params: BaseModel) -> P:
    # The dispatcher validated *params* with this very model (check_handlers pins it to the action's spec).
    if not isinstance(params, kind):  # pragma: no cover - guarded by construction
        raise InvalidArgumentError(f"parameters are not {kind.__name__}")
    return params


def _grant(
    kind: type[P], check: Callable[[AuthorizationSnapshot, P], None]
) -> Callable[[AuthorizationSnapshot, BaseModel], None]:
    def authorize(snapshot: AuthorizationSnapshot, params: BaseModel) -> None:
        check(snapshot, _as(kind, params))

    return authorize


def _unary(
    action: str,
    kind: type[P],
    authorize: Callable[[AuthorizationSnapshot, P], None],
    call: Callable[[BackCallDispatcher, LiveRun, P], Awaitable[BaseModel]],
) -> ActionHandler:
    async def serve(dispatcher: BackCallDispatcher, live: LiveRun, params: BaseModel) -> BaseModel:
        return await call(dispatcher, live, _as(kind, params))

    return ActionHandler(action, kind, _grant(kind, authorize), call=serve)


def _streaming(
    action: str,
    kind: type[P],
    authorize: Callable[[AuthorizationSnapshot, P], None],
    stream: Callable[[BackCallDispatcher, LiveRun, P], AsyncIterator[BaseModel]],
) -> ActionHandler:
    def serve(dispatcher: BackCallDispatcher, live: LiveRun, params: BaseModel) -> AsyncIterator[BaseModel]:
        return stream(dispatcher, live, _as(kind, params))

    return ActionHandler(action, kind, _grant(kind, authorize), stream=serve)


def _need(provider: T | None, what: str) -> T:
    if provider is None:
        raise NotFoundError(f"this host has no {what} configured")
    return provider


def _require(flag: bool, action: str) -> None:
    if not flag:
        raise UnauthorizedError(f"{action} is not permitted in this run")


def _facts(d: BackCallDispatcher) -> FactsAPI:
    return _need(d.pull, "host stores")


# models


def _model_grant(op: str) -> Callable[[AuthorizationSnapshot, ModelInvokeParams | ModelRerankParams], None]:
    def authorize(snapshot: AuthorizationSnapshot, p: ModelInvokeParams | ModelRerankParams) -> None:
        if not snapshot.allows_model(p.model_id, op):
            raise UnauthorizedError(f"model {p.model_id!r} is not granted for {op} in this run")

    return authorize


async def _models_invoke(d: BackCallDispatcher, live: LiveRun, p: ModelInvokeParams) -> BaseModel:
    models = _need(d.models, "models")
    model = live.snapshot.resources.model(p.model_id)
    assert model is not None  # authorized above
    return await models.invoke(model, p, access=live.access)


async def _models_stream(
    d: BackCallDispatcher, live: LiveRun, p: ModelInvokeParams
) -> AsyncIterator[BaseModel]:
    models = _need(d.models, "models")
    model = live.snapshot.resources.model(p.model_id)
    assert model is not None
    async for chunk in models.stream(model, p, access=live.access):
        yield chunk


async def _models_rerank(d: BackCallDispatcher, live: LiveRun, p: ModelRerankParams) -> BaseModel:
    models = _need(d.models, "models")
    model = live.snapshot.resources.model(p.model_id)
    assert model is not None
    return await models.rerank(model, p, access=live.access)


# tools


def _tool_grant(op: str) -> Callable[[AuthorizationSnapshot, ToolDetailParams | ToolCallParams], None]:
    def authorize(snapshot: AuthorizationSnapshot, p: ToolDetailParams | ToolCallParams) -> None:
        if not snapshot.allows_tool(p.tool_name, op):
            risks = snapshot.withheld_tools.get(p.tool_name)
            if risks is not None:
                raise UnauthorizedError(
                    f"tool {p.tool_name!r} is classified dangerous ({', '.join(risks)}) and the binding"
                    " does not grant it (resource_policy.dangerous_tools)"
                )
            raise UnauthorizedError(f"tool {p.tool_name!r} is not granted for {op} in this run")

    return authorize


async def _tools_detail(d: BackCallDispatcher, live: LiveRun, p: ToolDetailParams) -> BaseModel:
    tools = _need(d.tools, "tools")
    tool = live.snapshot.resources.tool(p.tool_name)
    assert tool is not None
    return await tools.detail(tool, access=live.access)


async def _tools_call(d: BackCallDispatcher, live: LiveRun, p: ToolCallParams) -> BaseModel:
    tools = _need(d.tools, "tools")
    tool = live.snapshot.resources.tool(p.tool_name)
    assert tool is not None
    return await tools.call(tool, p, access=live.access)


# knowledge


def _knowledge_list_grant(snapshot: AuthorizationSnapshot, _p: EmptyParams) -> None:
    if not (snapshot.capabilities.knowledge_retrieval and "list" in snapshot.permissions.knowledge_bases):
        raise UnauthorizedError("knowledge.list is not permitted for this runner")


async def _knowledge_list(_d: BackCallDispatcher, live: LiveRun, _p: EmptyParams) -> BaseModel:
    return KnowledgeListResult(
        knowledge_bases=[
            KnowledgeBaseInfo(kb_id=k.kb_id, name=k.name, description=k.description)
            for k in live.snapshot.resources.knowledge_bases
        ]
    )


def _knowledge_retrieve_grant(snapshot: AuthorizationSnapshot, p: KnowledgeRetrieveParams) -> None:
    if not snapshot.allows_knowledge_base(p.kb_id, "retrieve"):
        raise UnauthorizedError(f"knowledge base {p.kb_id!r} is not granted in this run")


async def _knowledge_retrieve(d: BackCallDispatcher, live: LiveRun, p: KnowledgeRetrieveParams) -> BaseModel:
    knowledge = _need(d.knowledge, "knowledge")
    kb = live.snapshot.resources.knowledge_base(p.kb_id)
    assert kb is not None
    return await knowledge.retrieve(kb, p, access=live.access)


# pull actions (the facts API), state and storage


def _api_grant(
    action: str, flag: Callable[[AuthorizationSnapshot], bool]
) -> Callable[[AuthorizationSnapshot, BaseModel], None]:
    def authorize(snapshot: AuthorizationSnapshot, _p: BaseModel) -> None:
        _require(flag(snapshot), action)

    return authorize


def _pull(
    action: str,
    kind: type[P],
    flag: Callable[[AuthorizationSnapshot], bool],
    call: Callable[[FactsAPI, RunAccess, P], Awaitable[BaseModel]],
) -> ActionHandler:
    """A pull action served by the facts API and granted by one flag of the run's available APIs."""

    async def serve(d: BackCallDispatcher, live: LiveRun, p: P) -> BaseModel:
        return await call(_facts(d), live.access, p)

    return _unary(action, kind, _api_grant(action, flag), serve)


async def _artifacts_open_stream(
    d: BackCallDispatcher, live: LiveRun, p: ArtifactIdParams
) -> AsyncIterator[BaseModel]:
    async for chunk in _facts(d).artifacts_open_stream(live.access, p):
        yield chunk


StateParams = StateGetParams | StateSetParams | StateDeleteParams | StateListParams
StorageParams = StorageGetParams | StorageSetParams | StorageDeleteParams | StorageListParams


def _state_grant(action: str) -> Callable[[AuthorizationSnapshot, StateParams], None]:
    def authorize(snapshot: AuthorizationSnapshot, p: StateParams) -> None:
        _require(snapshot.available_apis.state, action)
        if p.scope not in snapshot.state_owners:
            raise UnauthorizedError(f"state scope {p.scope!r} is not granted in this run")

    return authorize


def _storage_grant(action: str) -> Callable[[AuthorizationSnapshot, StorageParams], None]:
    def authorize(snapshot: AuthorizationSnapshot, p: StorageParams) -> None:
        _require(snapshot.available_apis.storage, action)
        if p.area not in snapshot.storage_owners:
            raise UnauthorizedError(f"storage area {p.area!r} is not granted in this run")

    return authorize


# platform


def _platform_grant(snapshot: AuthorizationSnapshot, p: PlatformActionParams) -> None:
    if p.action not in snapshot.platform_actions:
        raise UnauthorizedError(f"platform action {p.action!r} is not granted in this run")


async def _platform_request(_d: BackCallDispatcher, live: LiveRun, p: PlatformActionParams) -> BaseModel:
    # v1 records the request for the platform and never executes it (the receipt says so).
    live.platform_requests.append(p.model_dump(mode="json"))
    return PlatformActionReceipt(
        accepted=True, executed=False, approval_required=live.snapshot.action_approval
    )


def _table(*handlers: ActionHandler) -> dict[str, ActionHandler]:
    return {h.action: h for h in handlers}


HANDLERS: Final[Mapping[str, ActionHandler]] = _table(
    _unary("models.invoke", ModelInvokeParams, _model_grant("invoke"), _models_invoke),
    _streaming("models.stream", ModelInvokeParams, _model_grant("stream"), _models_stream),
    _unary("models.rerank", ModelRerankParams, _model_grant("rerank"), _models_rerank),
    _unary("tools.get_detail", ToolDetailParams, _tool_grant("detail"), _tools_detail),
    _unary("tools.call", ToolCallParams, _tool_grant("call"), _tools_call),
    _unary("knowledge.list", EmptyParams, _knowledge_list_grant, _knowledge_list),
    _unary("knowledge.retrieve", KnowledgeRetrieveParams, _knowledge_retrieve_grant, _knowledge_retrieve),
    _pull(
        "history.page",
        HistoryPageParams,
        lambda s: s.available_apis.history_page,
        lambda f, a, p: f.history_page(a, p),
    ),
    _pull(
        "history.search",
        HistorySearchParams,
        lambda s: s.available_apis.history_search,
        lambda f, a, p: f.history_search(a, p),
    ),
    _pull(
        "events.get", EventGetParams, lambda s: s.available_apis.event_get, lambda f, a, p: f.events_get(a, p)
    ),
    _pull(
        "events.page",
        EventPageParams,
        lambda s: s.available_apis.event_page,
        lambda f, a, p: f.events_page(a, p),
    ),
    _pull(
        "artifacts.metadata",
        ArtifactIdParams,
        lambda s: s.available_apis.artifact_metadata,
        lambda f, a, p: f.artifacts_metadata(a, p),
    ),
    _pull(
        "artifacts.read_range",
        ArtifactReadParams,
        lambda s: s.available_apis.artifact_read,
        lambda f, a, p: f.artifacts_read_range(a, p),
    ),
    _streaming(
        "artifacts.open_stream",
        ArtifactIdParams,
        lambda s, _p: _require(s.available_apis.artifact_read, "artifacts.open_stream"),
        _artifacts_open_stream,
    ),
    _unary(
        "state.get",
        StateGetParams,
        _state_grant("state.get"),
        lambda d, live, p: _facts(d).state_get(live.access, p),
    ),
    _unary(
        "state.set",
        StateSetParams,
        _state_grant("state.set"),
        lambda d, live, p: _facts(d).state_set(live.access, p),
    ),
    _unary(
        "state.delete",
        StateDeleteParams,
        _state_grant("state.delete"),
        lambda d, live, p: _facts(d).state_delete(live.access, p),
    ),
    _unary(
        "state.list",
        StateListParams,
        _state_grant("state.list"),
        lambda d, live, p: _facts(d).state_list(live.access, p),
    ),
    _unary(
        "storage.get",
        StorageGetParams,
        _storage_grant("storage.get"),
        lambda d, live, p: _facts(d).storage_get(live.access, p),
    ),
    _unary(
        "storage.set",
        StorageSetParams,
        _storage_grant("storage.set"),
        lambda d, live, p: _facts(d).storage_set(live.access, p),
    ),
    _unary(
        "storage.delete",
        StorageDeleteParams,
        _storage_grant("storage.delete"),
        lambda d, live, p: _facts(d).storage_delete(live.access, p),
    ),
    _unary(
        "storage.list",
        StorageListParams,
        _storage_grant("storage.list"),
        lambda d, live, p: _facts(d).storage_list(live.access, p),
    ),
    _unary("platform.request_action", PlatformActionParams, _platform_grant, _platform_request),
)
"""Every back-call action's handler, by wire name (checked against ``ACTIONS`` when this module loads)."""


def check_handlers(handlers: Mapping[str, ActionHandler], actions: Mapping[str, ActionSpec]) -> None:
    """Raise :class:`RuntimeError` unless *handlers* serve exactly *actions*, each with the action's params
    model and of its kind (unary or streaming)."""
    problems = [f"{name}: no handler" for name in sorted(actions.keys() - handlers.keys())]
    problems += [f"{name}: a handler for no action" for name in sorted(handlers.keys() - actions.keys())]
    for name in sorted(actions.keys() & handlers.keys()):
        spec, handler = actions[name], handlers[name]
        if handler.action != name or handler.params is not spec.params:
            problems.append(f"{name}: the handler does not take {spec.params.__name__}")
        unary, streaming = handler.call is not None, handler.stream is not None
        if unary == streaming or streaming != spec.streaming:
            problems.append(f"{name}: the handler is not {'streaming' if spec.streaming else 'unary'}")
    if problems:
        raise RuntimeError(
            "back-call handlers do not match agentrunner.actions.ACTIONS: " + "; ".join(problems)
        )


check_handlers(HANDLERS, ACTIONS)
