"""The simulated host: an in-memory back-call backend that checks every call and injects faults.

:class:`SimulatedHost` implements :class:`agentrunner.APITransport`. It serves every action of
:data:`agentrunner.ACTIONS` from memory (a small transcript, the event log, artifacts, state, storage, models
that echo, tools that echo their arguments, knowledge bases that quote the query). Every call is checked
against the run's own context: a resource outside ``ctx.resources`` or an API switched off in
``ctx.context.available_apis`` is answered ``unauthorized`` **and recorded as a violation**. A
:class:`FaultPlan` makes chosen calls fail with a §9 code or answer slowly (or never), so a runner's error
handling is exercised. Calls made after a run ended are answered ``unauthorized`` and recorded as late.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast

from agentrunner import (
    ACTIONS,
    MAX_STATE_VALUE_BYTES,
    AgentRunAPI,
    AgentRunContext,
    ArtifactRef,
    AudioContent,
    BackCallRequest,
    FileContent,
    ImageContent,
    ParsedResult,
    StateUpdatedResult,
    codec,
)
from agentrunner.api_types import (
    ArtifactChunk,
    ArtifactMetadata,
    ChatMessage,
    EventPage,
    EventRecord,
    HistoryPage,
    KnowledgeBaseInfo,
    KnowledgeHit,
    KnowledgeRetrieveResult,
    ModelResponse,
    ModelStreamChunk,
    ModelUsage,
    PlatformActionReceipt,
    RerankItem,
    RerankResult,
    StateEntry,
    StateListPage,
    StateValue,
    StorageEntry,
    StorageListPage,
    StorageValue,
    ToolCallResult,
    ToolDetail,
    TranscriptItem,
)
from agentrunner.errors import (
    APIError,
    DeadlineExceededError,
    InvalidArgumentError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    RuntimeAPIError,
    UnauthorizedError,
)
from pydantic import BaseModel, JsonValue, ValidationError

__all__ = ["FAULT_CODES", "CallBehaviour", "CallRecord", "FaultCode", "FaultPlan", "SimulatedHost"]

FaultCode = Literal[
    "unauthorized",
    "not_found",
    "deadline_exceeded",
    "payload_too_large",
    "rate_limited",
    "invalid_argument",
    "runtime_error",
]
"""A §9 error the host can inject."""

FAULT_CODES: tuple[FaultCode, ...] = FaultCode.__args__
"""Every injectable code."""

_ERRORS: dict[str, type[APIError]] = {
    "unauthorized": UnauthorizedError,
    "not_found": NotFoundError,
    "deadline_exceeded": DeadlineExceededError,
    "payload_too_large": PayloadTooLargeError,
    "rate_limited": RateLimitedError,
    "invalid_argument": InvalidArgumentError,
    "runtime_error": RuntimeAPIError,
}

_SCOPE_SEPARATOR = "\x1f"
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True, kw_only=True)
class CallBehaviour:
    """How the host answers one call."""

    error: FaultCode | None = None
    """Fail with this §9 code instead of answering."""
    delay: float = 0.0
    """Seconds to wait before answering; ``math.inf`` never answers (until the call is cancelled)."""

    def describe(self) -> str:
        """A short label such as ``rate_limited after 0.01s``."""
        what = self.error or "ok"
        if self.delay == 0:
            return what
        return f"{what} after {'never' if math.isinf(self.delay) else f'{self.delay:g}s'}"


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultPlan:
    """Behaviour of the n-th back-call of a run (``calls[n]``), else ``default``."""

    calls: tuple[CallBehaviour, ...] = ()
    """Behaviour per call index, in call order."""
    default: CallBehaviour = field(default_factory=CallBehaviour)
    """Behaviour of calls past the end of ``calls``."""

    def for_call(self, index: int) -> CallBehaviour:
        """The behaviour of the call with this 0-based index."""
        return self.calls[index] if index < len(self.calls) else self.default

    def describe(self) -> str:
        """A short label of the plan."""
        parts = [b.describe() for b in self.calls]
        return f"[{', '.join(parts)}] then {self.default.describe()}"


@dataclass(slots=True, kw_only=True)
class CallRecord:
    """One back-call the host received."""

    run_id: str
    """The run the call claimed to act for."""
    action: str
    """Action name."""
    params: dict[str, Any]
    """Parameters as received."""
    index: int
    """0-based index of the call within its run."""
    at: float
    """``time.monotonic()`` when it arrived."""
    violation: str | None = None
    """Why the call was outside the run's authorization (``None`` when it was allowed)."""
    invalid_params: str | None = None
    """Why the parameters failed validation."""
    late: bool = False
    """The run had already ended."""
    outcome: str = "pending"
    """``ok``, a §9 code, or ``cancelled`` once answered."""


def _no_artifacts() -> dict[str, ArtifactRef]:
    return {}


@dataclass(slots=True)
class _Session:
    ctx: AgentRunContext
    plan: FaultPlan
    live: bool = True
    calls: int = 0
    artifacts: dict[str, ArtifactRef] = field(default_factory=_no_artifacts)


class SimulatedHost:
    """An in-memory host for conformance runs; one instance may serve many concurrent runs.

    >>> host = SimulatedHost()
    >>> api = host.open(ctx)          # doctest: +SKIP
    >>> ...                           # run the runner with *api*
    >>> host.close(ctx.run_id)        # later calls are late
    """

    calls: list[CallRecord]
    """Every call received, in arrival order."""

    def __init__(self, *, plan: FaultPlan | None = None, caller: str | None = None) -> None:
        self.calls = []
        self._default_plan = plan or FaultPlan()
        self._caller = caller
        self._sessions: dict[str, _Session] = {}
        self._state: dict[str, tuple[JsonValue, int, int]] = {}
        self._storage: dict[str, tuple[bytes, int]] = {}

    # run lifecycle ---------------------------------------------------------------------------------------

    def open(self, ctx: AgentRunContext, *, plan: FaultPlan | None = None) -> AgentRunAPI:
        """Register a live run and return the API client its runner uses."""
        session = _Session(ctx=ctx, plan=plan or self._default_plan)
        for ref in _context_artifacts(ctx):
            session.artifacts[ref.artifact_id] = ref
        self._sessions[ctx.run_id] = session
        for scope, values in (
            ("conversation", ctx.state.conversation),
            ("actor", ctx.state.actor),
            ("subject", ctx.state.subject),
            ("runner", ctx.state.runner),
        ):
            if not values:
                continue
            owner = _scope_owner(ctx, scope)
            for key, value in values.items():
                if owner is not None:
                    self._state.setdefault(_state_key(scope, owner, key), (value, 1, _now_ms()))
        return AgentRunAPI(self, run_id=ctx.run_id, deadline_at=ctx.runtime.deadline_at)

    def close(self, run_id: str) -> None:
        """The run ended: later calls for it are answered ``unauthorized`` and recorded as late."""
        session = self._sessions.get(run_id)
        if session is not None:
            session.live = False

    def is_live(self, run_id: str) -> bool:
        """Whether *run_id* is registered and has not ended."""
        session = self._sessions.get(run_id)
        return session is not None and session.live

    def apply(self, run_id: str, result: ParsedResult) -> None:
        """Apply a result the host acts on: ``state.updated`` writes state, ``artifact.created`` registers."""
        session = self._sessions.get(run_id)
        if session is None:
            return
        if isinstance(result, StateUpdatedResult):
            data = result.data
            owner = _scope_owner(session.ctx, data.scope)
            if owner is None or _json_size(data.value) > MAX_STATE_VALUE_BYTES:
                return
            key = _state_key(data.scope, owner, data.key)
            if data.value is None:
                self._state.pop(key, None)
            else:
                version = self._state.get(key, (None, 0, 0))[1] + 1
                self._state[key] = (data.value, version, _now_ms())
        elif result.type == "artifact.created":
            ref = result.data.artifact
            session.artifacts[ref.artifact_id] = ref

    def calls_for(self, run_id: str) -> list[CallRecord]:
        """The calls made for one run."""
        return [c for c in self.calls if c.run_id == run_id]

    def pending(self, run_id: str) -> int:
        """How many calls of *run_id* are still waiting for an answer."""
        return sum(1 for c in self.calls if c.run_id == run_id and c.outcome == "pending")

    def state_value(self, ctx: AgentRunContext, scope: str, key: str) -> JsonValue:
        """The current state value of *key* in *scope* as seen by *ctx* (``None`` when unset)."""
        owner = _scope_owner(ctx, scope)
        if owner is None:
            return None
        return self._state.get(_state_key(scope, owner, key), (None, 0, 0))[0]

    # APITransport ----------------------------------------------------------------------------------------

    async def call(self, request: BackCallRequest, *, timeout: float | None) -> dict[str, Any]:
        """Serve one call (see the class docstring)."""
        session, record = self._admit(request)
        return await _faulted(session, record, lambda: self._serve(session, request.action, request.params))

    async def stream(
        self, request: BackCallRequest, *, timeout: float | None
    ) -> AsyncIterator[dict[str, Any]]:
        """Serve a streaming call chunk by chunk."""
        session, record = self._admit(request)
        chunks = await _faulted(
            session, record, lambda: self._serve_stream(session, request.action, request.params)
        )
        for chunk in chunks:
            yield chunk

    # admission -------------------------------------------------------------------------------------------

    def _admit(self, request: BackCallRequest) -> tuple[_Session, CallRecord]:
        session = self._sessions.get(request.run_id)
        index = 0 if session is None else session.calls
        record = CallRecord(
            run_id=request.run_id,
            action=request.action,
            params=dict(request.params),
            index=index,
            at=time.monotonic(),
        )
        self.calls.append(record)
        if session is None:
            record.violation = f"no run {request.run_id!r} is registered with this host"
            record.outcome = "unauthorized"
            raise UnauthorizedError("unknown run")
        session.calls += 1
        if not session.live:
            record.late = True
            record.outcome = "unauthorized"
            raise UnauthorizedError("the run has ended")
        deadline = session.ctx.runtime.deadline_at
        if deadline is not None and time.time() >= deadline:
            record.outcome = "deadline_exceeded"
            raise DeadlineExceededError("the run's deadline has passed")
        spec = ACTIONS.get(request.action)
        if spec is None:
            record.invalid_params = f"unknown action {request.action!r}"
            record.outcome = "invalid_argument"
            raise InvalidArgumentError(record.invalid_params)
        try:
            spec.params.model_validate(request.params)
        except ValidationError as exc:
            record.invalid_params = _first_error(exc)
            record.outcome = "invalid_argument"
            raise InvalidArgumentError(f"invalid parameters: {record.invalid_params}") from None
        reason = _authorize(session, request.action, request.params)
        if reason is not None:
            record.violation = reason
            record.outcome = "unauthorized"
            raise UnauthorizedError(reason)
        return session, record

    # backends --------------------------------------------------------------------------------------------

    def _serve(self, session: _Session, action: str, params: dict[str, Any]) -> dict[str, Any]:
        ctx = session.ctx
        match action:
            case "models.invoke":
                text = _echo_text(params)
                return _dump(
                    ModelResponse(
                        model_id=params["model_id"],
                        message=ChatMessage(role="assistant", content=text),
                        finish_reason="stop",
                        usage=ModelUsage(
                            input_tokens=len(text), output_tokens=len(text), total_tokens=2 * len(text)
                        ),
                    )
                )
            case "models.rerank":
                query_words = set(str(params["query"]).split())
                scored = [
                    RerankItem(index=i, score=float(len(query_words & set(doc.split()))), document=doc)
                    for i, doc in enumerate(params["documents"])
                ]
                scored.sort(key=lambda item: (-item.score, item.index))
                top_k = params.get("top_k")
                return _dump(RerankResult(results=scored[:top_k] if top_k else scored))
            case "tools.get_detail":
                tool = ctx.resources.tool(params["tool_name"])
                assert tool is not None  # authorized above
                return _dump(
                    ToolDetail(name=tool.tool_name, description=tool.description, parameters=tool.parameters)
                )
            case "tools.call":
                return _dump(
                    ToolCallResult(
                        content={"tool": params["tool_name"], "echo": params.get("parameters", {})}
                    )
                )
            case "knowledge.list":
                infos = [
                    KnowledgeBaseInfo(kb_id=kb.kb_id, name=kb.name, description=kb.description)
                    for kb in ctx.resources.knowledge_bases
                ]
                return {"knowledge_bases": [_dump(info) for info in infos]}
            case "knowledge.retrieve":
                query = str(params["query_text"])
                hit = KnowledgeHit(text=f"a passage about {query}", score=1.0, kb_id=params["kb_id"])
                return _dump(KnowledgeRetrieveResult(hits=[hit]))
            case "history.page" | "history.search":
                return _dump(HistoryPage(items=_transcript(ctx), has_more=False))
            case "events.get":
                if params["event_id"] != ctx.event.event_id:
                    raise NotFoundError("no such event in this conversation")
                return _dump(_event_record(ctx))
            case "events.page":
                return _dump(EventPage(items=[_event_record(ctx)], has_more=False))
            case "artifacts.metadata":
                ref = session.artifacts[params["artifact_id"]]
                return _dump(
                    ArtifactMetadata.model_validate({**_dump(ref), "size": len(_artifact_bytes(ref))})
                )
            case "artifacts.read_range":
                ref = session.artifacts[params["artifact_id"]]
                data = _artifact_bytes(ref)
                offset, length = int(params.get("offset", 0)), int(params.get("length", 65536))
                piece = data[offset : offset + length]
                return _dump(
                    ArtifactChunk(
                        artifact_id=ref.artifact_id,
                        offset=offset,
                        length=len(piece),
                        size=len(data),
                        data_base64=base64.b64encode(piece).decode(),
                        has_more=offset + len(piece) < len(data),
                        mime_type=ref.mime_type,
                    )
                )
            case "state.get" | "state.set" | "state.delete" | "state.list":
                return self._serve_state(ctx, action, params)
            case "storage.get" | "storage.set" | "storage.delete" | "storage.list":
                return self._serve_storage(ctx, action, params)
            case "platform.request_action":
                return _dump(PlatformActionReceipt(accepted=True, executed=False))
            case _:  # pragma: no cover - every action of ACTIONS is served above or in _serve_stream
                raise InvalidArgumentError(f"{action} must be called as a stream")

    def _serve_stream(self, session: _Session, action: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        if action == "models.stream":
            text = _echo_text(params)
            words = [w + " " for w in text.split(" ")] if text else []
            chunks = [_dump(ModelStreamChunk(delta=w)) for w in words]
            usage = ModelUsage(input_tokens=len(text), output_tokens=len(text), total_tokens=2 * len(text))
            chunks.append(_dump(ModelStreamChunk(finish_reason="stop", usage=usage)))
            return chunks
        if action == "artifacts.open_stream":
            ref = session.artifacts[params["artifact_id"]]
            data = _artifact_bytes(ref)
            size, step = len(data), 1024
            return [
                _dump(
                    ArtifactChunk(
                        artifact_id=ref.artifact_id,
                        offset=start,
                        length=len(data[start : start + step]),
                        size=size,
                        data_base64=base64.b64encode(data[start : start + step]).decode(),
                        has_more=start + step < size,
                    )
                )
                for start in range(0, max(size, 1), step)
            ]
        raise InvalidArgumentError(f"{action} is not a streaming action")

    def _serve_state(self, ctx: AgentRunContext, action: str, params: dict[str, Any]) -> dict[str, Any]:
        scope, owner = params["scope"], _scope_owner(ctx, params["scope"])
        assert owner is not None  # authorized above
        if action == "state.list":
            prefix = _state_key(scope, owner, params.get("prefix") or "")
            items = [
                StateEntry(key=k.rsplit(_SCOPE_SEPARATOR, 1)[1], version=v[1], updated_at=v[2])
                for k, v in sorted(self._state.items())
                if k.startswith(prefix)
            ]
            return _dump(StateListPage(items=items[: int(params.get("limit", 100))]))
        key = _state_key(scope, owner, params["key"])
        if action == "state.delete":
            self._state.pop(key, None)
            return {"ok": True}
        if action == "state.set":
            value: JsonValue = params["value"]
            if _json_size(value) > MAX_STATE_VALUE_BYTES:
                raise PayloadTooLargeError("state values are at most 256 KiB")
            current = self._state.get(key, (None, 0, 0))
            expected = params.get("expected_version")
            if expected is not None and expected != current[1]:
                raise InvalidArgumentError("version mismatch")
            self._state[key] = (value, current[1] + 1, _now_ms())
        stored = self._state.get(key)
        if stored is None:
            # StateValue(scope=scope, key=key)'s dump, written out: both are strings validated with the params,
            # and building and dumping the model cost about as much as the rest of the call's admission.
            return {"scope": scope, "key": params["key"], "value": None, "exists": False, "version": 0}
        return _dump(
            StateValue(scope=scope, key=params["key"], value=stored[0], exists=True, version=stored[1])
        )

    def _serve_storage(self, ctx: AgentRunContext, action: str, params: dict[str, Any]) -> dict[str, Any]:
        area = params["area"]
        if action == "storage.list":
            prefix = f"{area}{_SCOPE_SEPARATOR}{params.get('prefix') or ''}"
            items = [
                StorageEntry(key=k.split(_SCOPE_SEPARATOR, 1)[1], size=len(v[0]), updated_at=v[1])
                for k, v in sorted(self._storage.items())
                if k.startswith(prefix)
            ]
            return _dump(StorageListPage(items=items[: int(params.get("limit", 100))]))
        key = f"{area}{_SCOPE_SEPARATOR}{params['key']}"
        if action == "storage.delete":
            self._storage.pop(key, None)
            return {"ok": True}
        if action == "storage.set":
            self._storage[key] = (base64.b64decode(params["value_base64"]), _now_ms())
        stored = self._storage.get(key)
        if stored is None:
            return _dump(StorageValue(area=area, key=params["key"]))
        return _dump(
            StorageValue(
                area=area,
                key=params["key"],
                value_base64=base64.b64encode(stored[0]).decode(),
                exists=True,
                size=len(stored[0]),
            )
        )


async def _faulted(session: _Session, record: CallRecord, serve: Callable[[], _T]) -> _T:
    """Apply the fault plan's delay and injected error to one call, serve it, and record how it ended.

    A plain coroutine rather than an async context manager: most calls have no fault, and the context
    manager's generator cost about a tenth of the kit's work on a short run."""
    behaviour = session.plan.for_call(record.index)
    try:
        if behaviour.delay > 0:
            await _wait(behaviour.delay)
        if behaviour.error is not None:
            raise _ERRORS[behaviour.error](f"injected {behaviour.error}")
        answer = serve()
    except APIError as exc:
        record.outcome = exc.code
        raise
    except asyncio.CancelledError:
        record.outcome = "cancelled"
        raise
    record.outcome = "ok"
    return answer


# authorization ---------------------------------------------------------------------------------------------


def _authorize(session: _Session, action: str, params: dict[str, Any]) -> str | None:
    """Why *action* is outside the run's authorization, or ``None`` when it is allowed."""
    ctx = session.ctx
    apis = ctx.context.available_apis
    resources = ctx.resources
    area, _, verb = action.partition(".")
    if area == "models":
        model = resources.model(params["model_id"])
        op = {"invoke": "invoke", "stream": "stream", "rerank": "rerank"}[verb]
        if model is None:
            return f"model {params['model_id']!r} is not in ctx.resources.models"
        if op not in model.operations:
            return f"operation {op!r} is not granted on model {model.model_id!r}"
        return None
    if area == "tools":
        tool = resources.tool(params["tool_name"])
        op = "detail" if verb == "get_detail" else "call"
        if tool is None:
            return f"tool {params['tool_name']!r} is not in ctx.resources.tools"
        if op not in tool.operations:
            return f"operation {op!r} is not granted on tool {tool.tool_name!r}"
        return None
    if area == "knowledge":
        if verb == "list":
            if not any("list" in kb.operations for kb in resources.knowledge_bases):
                return "knowledge.list is not granted"
            return None
        kb = resources.knowledge_base(params["kb_id"])
        if kb is None:
            return f"knowledge base {params['kb_id']!r} is not in ctx.resources.knowledge_bases"
        if "retrieve" not in kb.operations:
            return f"retrieve is not granted on knowledge base {kb.kb_id!r}"
        return None
    if area == "history":
        allowed = apis.history_page if verb == "page" else apis.history_search
        if not allowed:
            return f"history.{verb} is switched off in ctx.context.available_apis"
        conversation = ctx.conversation.conversation_id if ctx.conversation else None
        asked = params.get("conversation_id")
        if asked is not None and asked != conversation:
            return "history of another conversation"
        return None
    if area == "events":
        allowed = apis.event_get if verb == "get" else apis.event_page
        return None if allowed else f"events.{verb} is switched off in ctx.context.available_apis"
    if area == "artifacts":
        allowed = apis.artifact_metadata if verb == "metadata" else apis.artifact_read
        if not allowed:
            return f"artifacts.{verb} is switched off in ctx.context.available_apis"
        if params["artifact_id"] not in session.artifacts:
            return f"artifact {params['artifact_id']!r} is not visible to this run"
        return None
    if area == "state":
        if not apis.state:
            return "state is switched off in ctx.context.available_apis"
        if _scope_owner(ctx, params["scope"]) is None:
            return f"state scope {params['scope']!r} has no owner in this run's context"
        return None
    if area == "storage":
        granted = {
            "plugin": resources.storage.plugin_storage,
            "workspace": resources.storage.workspace_storage,
            "binding": resources.storage.binding_storage,
        }
        if not apis.storage or not granted.get(params["area"], False):
            return f"storage area {params['area']!r} is not granted"
        return None
    if area == "platform":
        actions: object = resources.platform_capabilities.get("actions", [])
        if not isinstance(actions, list) or params["action"] not in actions:
            return f"platform action {params['action']!r} is not granted"
        return None
    return f"unknown action area {area!r}"  # pragma: no cover - ACTIONS has no other areas


def _scope_owner(ctx: AgentRunContext, scope: str) -> str | None:
    conversation = ctx.conversation
    match scope:
        case "conversation":
            return conversation.conversation_id if conversation else None
        case "actor":
            return ctx.actor.actor_id if ctx.actor else None
        case "subject":
            return ctx.subject.subject_id if ctx.subject else None
        case "workspace":
            return conversation.workspace_id if conversation else None
        case "runner" | "binding":
            return scope
        case _:
            return None


def _state_key(scope: str, owner: str, key: str) -> str:
    return f"{scope}{_SCOPE_SEPARATOR}{owner}{_SCOPE_SEPARATOR}{key}"


# helpers ---------------------------------------------------------------------------------------------------


async def _wait(delay: float) -> None:
    if delay <= 0:
        return
    if math.isinf(delay):
        await asyncio.Event().wait()  # never set: only a cancel (or the run's deadline) ends the wait
        return
    await asyncio.sleep(delay)


def _context_artifacts(ctx: AgentRunContext) -> list[ArtifactRef]:
    refs = list(ctx.input.attachments)
    for element in ctx.input.contents:
        if isinstance(element, ImageContent | FileContent | AudioContent) and element.artifact is not None:
            refs.append(element.artifact)
    refs.extend(f.artifact for f in ctx.resources.files)
    if ctx.event.raw_ref is not None and ctx.event.raw_ref.artifact is not None:
        refs.append(ctx.event.raw_ref.artifact)
    return refs


def _artifact_bytes(ref: ArtifactRef) -> bytes:
    size = min(ref.size if ref.size is not None else 64, 4096)
    seed = hashlib.sha256(ref.artifact_id.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def _echo_text(params: dict[str, Any]) -> str:
    messages: list[Any] = params.get("messages", [])
    for message in reversed(messages):
        content = cast(dict[str, Any], message).get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            return content
    return ""


def _transcript(ctx: AgentRunContext) -> list[TranscriptItem]:
    conversation = ctx.conversation.conversation_id if ctx.conversation else None
    if conversation is None:
        return []
    return [
        TranscriptItem(
            item_id=f"{conversation}-{n}",
            cursor=f"c{n}",
            conversation_id=conversation,
            role="user" if n % 2 == 0 else "assistant",
            content=f"earlier message {n}",
            created_at=1_700_000_000_000 + n,
        )
        for n in range(3)
    ]


def _event_record(ctx: AgentRunContext) -> EventRecord:
    return EventRecord(
        event_id=ctx.event.event_id,
        event_type=ctx.event.event_type,
        cursor="e0",
        source=ctx.event.source,
        conversation_id=ctx.conversation.conversation_id if ctx.conversation else None,
        data=ctx.event.data,
        created_at=ctx.event.event_time or 0,
    )


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json")


def _json_size(value: object) -> int:
    try:
        return codec.json_size(value)
    except TypeError:
        return MAX_STATE_VALUE_BYTES + 1


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"]) or "params"
    return f"{where}: {error['msg']}"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
