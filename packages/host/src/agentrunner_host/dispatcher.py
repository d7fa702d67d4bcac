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
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

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
from agentrunner import _json as json
from agentrunner.actions import KnowledgeListResult
from agentrunner.api_types import KnowledgeBaseInfo
from pydantic import BaseModel, ValidationError

from agentrunner_host.providers.protocols import KnowledgeProvider, ModelProvider, ToolProvider

from .access import RunAccess
from .authorization import AuthorizationSnapshot

__all__ = ["AuditRecord", "BackCallDispatcher", "LiveRun"]

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


@dataclass(slots=True)
class LiveRun:
    """A registered, live run."""

    snapshot: AuthorizationSnapshot
    access: RunAccess
    bucket: _TokenBucket
    call_token: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)
    """The run's call credential: every back-call must present it (a run id alone is not a credential)."""
    audit: list[AuditRecord] = field(default_factory=list[AuditRecord])
    platform_requests: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])


class BackCallDispatcher:
    """Implements :class:`~agentrunner_host.runtime.connection.BackCallHandler` for every live run."""

    def __init__(
        self,
        *,
        pull: Any = None,
        models: ModelProvider | None = None,
        tools: ToolProvider | None = None,
        knowledge: KnowledgeProvider | None = None,
        idempotency: Any = None,
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
        self._memory_idempotency: OrderedDict[tuple[str, str, str], dict[str, Any]] = OrderedDict()

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

    def is_live(self, run_id: str) -> bool:
        """Whether the run accepts back-calls."""
        return run_id in self._live

    def live_count(self) -> int:
        """Number of live runs."""
        return len(self._live)

    # -- BackCallHandler ---------------------------------------------------------------------------------------

    async def handle(self, request: BackCallRequest) -> dict[str, Any]:
        """Serve one call."""
        started = time.monotonic()
        live: LiveRun | None = None
        resource = _resource_of(request.params)
        try:
            live, spec_params = self._admit(request)
            spec = ACTIONS[request.action]
            if spec.streaming:
                raise InvalidArgumentError(f"{request.action} is a streaming action; use the stream call")
            cached = await self._idempotent_get(live, request)
            if cached is not None:
                self._audit(live, request, resource, "allowed", started)
                return cached
            remaining = live.snapshot.deadline_at - time.time()
            try:
                async with asyncio.timeout(remaining):
                    result = await self._execute(live, request.action, spec_params)
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

    async def handle_stream(self, request: BackCallRequest) -> AsyncIterator[dict[str, Any]]:
        """Serve a streaming call chunk by chunk."""
        started = time.monotonic()
        live: LiveRun | None = None
        resource = _resource_of(request.params)
        try:
            live, params = self._admit(request)
            if not ACTIONS[request.action].streaming:
                raise InvalidArgumentError(f"{request.action} is not a streaming action")
            stream = self._execute_stream(live, request.action, params)
            async for chunk in stream:
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

    def _admit(self, request: BackCallRequest) -> tuple[LiveRun, BaseModel]:
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
        spec = ACTIONS.get(request.action)
        if spec is None:
            raise InvalidArgumentError(f"unknown action {request.action!r}")
        if time.time() >= snapshot.deadline_at:
            raise DeadlineExceededError("the run's deadline has passed")
        if json.json_size(request.params) > snapshot.run_policy.max_backcall_bytes:
            raise PayloadTooLargeError(f"{request.action} parameters are larger than the run's limit")
        if not live.bucket.take():
            raise RateLimitedError(f"run {request.run_id} is making back-calls too fast")
        try:
            params = spec.params.model_validate(request.params)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "params"
            raise InvalidArgumentError(f"{request.action}: {loc}: {first['msg']}") from None
        self._authorize(snapshot, request.action, params)
        return live, params

    def _authorize(self, snapshot: AuthorizationSnapshot, action: str, params: BaseModel) -> None:
        apis = snapshot.available_apis
        p: Any = params
        match action:
            case "models.invoke" | "models.stream" | "models.rerank":
                op = action.split(".", 1)[1]
                if not snapshot.allows_model(p.model_id, op):
                    raise UnauthorizedError(f"model {p.model_id!r} is not granted for {op} in this run")
            case "tools.get_detail" | "tools.call":
                op = "detail" if action == "tools.get_detail" else "call"
                if not snapshot.allows_tool(p.tool_name, op):
                    risks = snapshot.withheld_tools.get(p.tool_name)
                    if risks is not None:
                        raise UnauthorizedError(
                            f"tool {p.tool_name!r} is classified dangerous ({', '.join(risks)}) and the binding"
                            " does not grant it (resource_policy.dangerous_tools)"
                        )
                    raise UnauthorizedError(f"tool {p.tool_name!r} is not granted for {op} in this run")
            case "knowledge.list":
                if not (
                    snapshot.capabilities.knowledge_retrieval
                    and "list" in snapshot.permissions.knowledge_bases
                ):
                    raise UnauthorizedError("knowledge.list is not permitted for this runner")
            case "knowledge.retrieve":
                if not snapshot.allows_knowledge_base(p.kb_id, "retrieve"):
                    raise UnauthorizedError(f"knowledge base {p.kb_id!r} is not granted in this run")
            case "history.page":
                _require(apis.history_page, action)
            case "history.search":
                _require(apis.history_search, action)
            case "events.get":
                _require(apis.event_get, action)
            case "events.page":
                _require(apis.event_page, action)
            case "artifacts.metadata":
                _require(apis.artifact_metadata, action)
            case "artifacts.read_range" | "artifacts.open_stream":
                _require(apis.artifact_read, action)
            case "state.get" | "state.set" | "state.delete" | "state.list":
                _require(apis.state, action)
                if p.scope not in snapshot.state_owners:
                    raise UnauthorizedError(f"state scope {p.scope!r} is not granted in this run")
            case "storage.get" | "storage.set" | "storage.delete" | "storage.list":
                _require(apis.storage, action)
                if p.area not in snapshot.storage_owners:
                    raise UnauthorizedError(f"storage area {p.area!r} is not granted in this run")
            case "platform.request_action":
                if p.action not in snapshot.platform_actions:
                    raise UnauthorizedError(f"platform action {p.action!r} is not granted in this run")
            case _:  # pragma: no cover - every action of ACTIONS is listed above
                raise UnauthorizedError(f"{action} is not granted")

    # -- execution ---------------------------------------------------------------------------------------------

    async def _execute(self, live: LiveRun, action: str, params: BaseModel) -> BaseModel:
        snapshot, access = live.snapshot, live.access
        p: Any = params
        area, _, verb = action.partition(".")
        if area == "models":
            models = self._need(self.models, "models")
            model = snapshot.resources.model(p.model_id)
            assert model is not None  # authorized above
            if verb == "invoke":
                return await models.invoke(model, p, access=access)
            return await models.rerank(model, p, access=access)
        if area == "tools":
            tools = self._need(self.tools, "tools")
            tool = snapshot.resources.tool(p.tool_name)
            assert tool is not None
            if verb == "get_detail":
                return await tools.detail(tool, access=access)
            return await tools.call(tool, p, access=access)
        if action == "knowledge.list":
            return KnowledgeListResult(
                knowledge_bases=[
                    KnowledgeBaseInfo(kb_id=k.kb_id, name=k.name, description=k.description)
                    for k in snapshot.resources.knowledge_bases
                ]
            )
        if action == "knowledge.retrieve":
            knowledge = self._need(self.knowledge, "knowledge")
            kb = snapshot.resources.knowledge_base(p.kb_id)
            assert kb is not None
            return await knowledge.retrieve(kb, p, access=access)
        if action == "platform.request_action":
            live.platform_requests.append(p.model_dump(mode="json"))
            return PlatformActionReceipt(
                accepted=True, executed=False, approval_required=snapshot.action_approval
            )
        pull = self._need(self.pull, "host stores")
        method = getattr(pull, action.replace(".", "_"))
        return await method(access, params)

    async def _execute_stream(
        self, live: LiveRun, action: str, params: BaseModel
    ) -> AsyncIterator[BaseModel]:
        p: Any = params
        if action == "models.stream":
            models = self._need(self.models, "models")
            model = live.snapshot.resources.model(p.model_id)
            assert model is not None
            async for chunk in models.stream(model, p, access=live.access):
                yield chunk
            return
        pull = self._need(self.pull, "host stores")
        async for chunk in pull.artifacts_open_stream(live.access, params):
            yield chunk

    @staticmethod
    def _need(provider: Any, what: str) -> Any:
        if provider is None:
            raise NotFoundError(f"this host has no {what} configured")
        return provider

    # -- idempotency and audit ---------------------------------------------------------------------------------

    async def _idempotent_get(self, live: LiveRun, request: BackCallRequest) -> dict[str, Any] | None:
        if request.idempotency_key is None or not ACTIONS[request.action].side_effecting:
            return None
        scope = (live.snapshot.plugin_id, live.snapshot.binding_id, request.action)
        if self.idempotency is not None:
            found: dict[str, Any] | None = await self.idempotency.get(scope, request.idempotency_key)
            return found
        return self._memory_idempotency.get((*scope[1:], request.idempotency_key))

    async def _idempotent_put(self, live: LiveRun, request: BackCallRequest, payload: dict[str, Any]) -> None:
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


def _require(flag: bool, action: str) -> None:
    if not flag:
        raise UnauthorizedError(f"{action} is not permitted in this run")


def _resource_of(params: dict[str, Any]) -> str | None:
    """The resource a call names, for the audit trail (read before validation so denials name it too)."""
    for name in ("model_id", "tool_name", "kb_id", "artifact_id", "event_id", "key", "conversation_id"):
        value = params.get(name)
        if isinstance(value, str):
            return value[:200]
    return None
