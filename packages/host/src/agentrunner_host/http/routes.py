"""The route handlers and the endpoint table (the single source of the routes and of the OpenAPI paths)."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Mapping
from typing import Final, TypeVar
from urllib.parse import quote

from agentrunner import AgentInput, InvalidRunnerIdError, RunnerId
from agentrunner import codec as json
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from agentrunner_host.access import ConversationKey
from agentrunner_host.admission import ID_PATTERN, check_agent_config, is_valid_id
from agentrunner_host.config import BindingSpec, find_literal_secrets, format_key_path, is_env_ref
from agentrunner_host.deadlines import TaskTimeout
from agentrunner_host.definitions import AgentConfig, AgentEventEnvelope
from agentrunner_host.ids import event_id as new_event_id
from agentrunner_host.registry import PluginFailure
from agentrunner_host.service import AgentEntry, BindingEntry, HostService, ReplayItem, RunView
from agentrunner_host.service.binding_check import check_binding
from agentrunner_host.service.runner_views import RunnerView
from agentrunner_host.stores import (
    MAX_AUDIT_PAGE,
    AuditFilter,
    RunnerControl,
    StoredTranscriptItem,
)

from .errors import ApiError
from .openapi import Endpoint, Param
from .schemas import (
    AgentList,
    AgentOut,
    AuditPageOut,
    BindingCheckOut,
    BindingList,
    BindingOut,
    CancelOut,
    DisableRunner,
    ErrorBody,
    EventSubmission,
    FailedPluginOut,
    Health,
    ProcessStatusOut,
    Readiness,
    ResultItem,
    ResultPage,
    RunAccepted,
    RunnerControlOut,
    RunnerList,
    RunnerOut,
    RunnerRiskOut,
    RunOut,
    RunWithResults,
    TranscriptItemOut,
    TranscriptPage,
)
from .sse import KEEPALIVE_SECONDS, SSE_HEADERS, EventStreamResponse, sse_stream

__all__ = ["ENDPOINTS", "MAX_BODY_BYTES"]

MAX_BODY_BYTES: Final = 1024 * 1024
"""Largest request body accepted."""
_CANCEL_SETTLE_SECONDS: Final = 5.0
_BODY_TIMEOUT_SECONDS: Final = 30.0
_INTEGER: Final = re.compile(r"-?[0-9]{1,12}")
_SEQ: Final = re.compile(r"[0-9]{0,10}")
_CURSOR: Final = re.compile(r"[0-9]{1,12}")
_MAX_RUNNER_ID: Final = 255
# What would make a body's numbers unstorable as sent: NaN / Infinity tokens (accepted by the parser), an
# exponent of 308 or more (a float that may overflow to infinity), 19 digits in a row (an integer that may
# pass 64 bits, or a float long enough to overflow). A body with none of these anywhere, strings included,
# and little nesting (orjson's own depth limit) skips the dump and walk below; any match takes them.
_UNSTORABLE_NUMBER: Final = re.compile(
    rb"NaN|Infinity|[0-9]{19}|[eE]\+?0*(?:30[89]|3[1-9][0-9]|[4-9][0-9]{2}|[1-9][0-9]{3})"
)
_SHALLOW: Final = 64
_PLUGIN_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")

M = TypeVar("M", bound=BaseModel)


# -- helpers ---------------------------------------------------------------------------------------------------


def _service(request: Request) -> HostService:
    service: HostService = request.app.state.service
    return service


def _json(model: BaseModel, status: int = 200, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(model.model_dump(mode="json"), status_code=status, headers=headers)


def _describe(exc: ValidationError) -> str:
    parts: list[str] = []
    for error in exc.errors()[:5]:
        loc = format_key_path(tuple(error["loc"]))
        parts.append(f"{loc}: {error['msg']}")
    return "; ".join(parts)


async def _body(request: Request, model: type[M]) -> M:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise ApiError(413, "payload_too_large", f"the body exceeds {MAX_BODY_BYTES} bytes")
    chunks: list[bytes] = []
    size = 0
    timeout: float = getattr(request.app.state, "body_timeout", _BODY_TIMEOUT_SECONDS)
    # A client trickling its body must not hold a handler (and a connection slot) forever; on the timer all
    # requests share (asyncio.timeout made, pushed and cancelled a loop timer per request)
    limit = TaskTimeout(timeout)
    receive = request.receive
    more = True
    try:
        # the ASGI messages read here, not through Request.stream(): that async generator (made, hooked into
        # the loop's set of them, finalised) was most of a one-message body's reading
        while more:
            message = await receive()
            if message["type"] != "http.request":
                raise ClientDisconnect  # as Request.stream() raises it (http.disconnect)
            chunk: bytes = message.get("body", b"")
            more = message.get("more_body", False)
            if chunk:
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise ApiError(413, "payload_too_large", f"the body exceeds {MAX_BODY_BYTES} bytes")
                chunks.append(chunk)
    except asyncio.CancelledError:
        if limit.withdraw():
            raise ApiError(408, "request_timeout", f"the body did not arrive within {timeout:g} s") from None
        raise
    finally:
        limit.withdraw()
    raw = b"".join(chunks)
    if not raw.strip():
        raise ApiError(422, "invalid_request", "a JSON request body is required")
    try:
        # Strict: the document says boolean/integer/string, so 0 is not false and "1" is not 1.
        value = model.model_validate_json(raw, strict=True)
    except ValidationError as exc:
        raise ApiError(422, "invalid_request", _describe(exc)) from None
    if _UNSTORABLE_NUMBER.search(raw) is None and raw.count(b"{") + raw.count(b"[") <= _SHALLOW:
        return value  # nothing in the body can be a number the stores would not keep as sent
    dumped = value.model_dump(mode="json")
    where = json.non_finite_path(dumped)
    if where is not None:
        # JSON has no NaN/Infinity (Python's parser accepts them); stored with orjson they would become null.
        raise ApiError(422, "invalid_request", f"{where}: NaN and Infinity are not JSON numbers")
    try:
        # The stores encode with orjson, which holds integers to 64 bits; refuse larger ones here, not later.
        json.dumps(dumped)
    except TypeError as exc:
        raise ApiError(422, "invalid_request", f"the body cannot be stored: {exc}") from None
    return value


def _query(request: Request) -> Mapping[str, str]:
    """The query parameters, the last value of a repeated name (as Starlette's parser gives them): split
    directly when nothing in the query string is escaped, as on every request of the event path (the
    parser's unquoting is most of a short query's cost), parsed by Starlette otherwise."""
    raw: bytes = request.scope.get("query_string", b"")
    if b"%" in raw or b"+" in raw:
        return request.query_params
    pairs = (part.partition("=") for part in raw.decode("latin-1").split("&") if part)
    return {name: value for name, _, value in pairs}


def _int_query(request: Request, name: str, default: int, *, low: int, high: int) -> int:
    raw = _query(request).get(name)
    if raw is None:
        return default
    # an empty value (`?limit=`) is not an integer either: the document declares one, so it is refused
    # int() would also take "1_0", " 1" and non-ASCII digits; the document promises a plain integer.
    if not _INTEGER.fullmatch(raw):
        raise ApiError(422, "invalid_request", f"query parameter {name} must be an integer")
    value = int(raw)
    if not low <= value <= high:
        raise ApiError(422, "invalid_request", f"query parameter {name} must be between {low} and {high}")
    return value


def _flag(query: Mapping[str, str], name: str) -> bool:
    """The boolean query parameter *name* of the parsed *query* (absent: false)."""
    raw = query.get(name)
    if raw is None:
        return False
    lowered = raw.lower()
    if lowered in {"true", "1", "yes"}:
        return True
    if lowered in {"false", "0", "no"}:
        return False
    raise ApiError(422, "invalid_request", f"query parameter {name} must be true or false")


def _path_id(request: Request, name: str) -> str:
    value: str = request.path_params[name]
    if not is_valid_id(value):
        raise ApiError(422, "invalid_request", f"{name} must match {ID_PATTERN}")
    return value


def _wants_stream(request: Request, *, query: Mapping[str, str] | None = None) -> bool:
    """``?stream=true`` or an ``Accept`` of ``text/event-stream`` (*query*: the request's, parsed already)."""
    flags = _query(request) if query is None else query
    return _flag(flags, "stream") or "text/event-stream" in request.headers.get("accept", "")


def _run_out(view: RunView) -> RunOut:
    # Same fields, already validated: copy them over without validating again.
    return RunOut.model_construct(**dict(view))


def _item(item: ReplayItem) -> ResultItem:
    return ResultItem(host_seq=item.host_seq, type=item.type, result=item.payload)


def _event_stream(
    service: HostService, run_id: str, *, after: int, headers: dict[str, str]
) -> EventStreamResponse:
    return EventStreamResponse(
        sse_stream(service.batches(run_id, after=after, idle=KEEPALIVE_SECONDS)),
        headers={**SSE_HEADERS, **headers},
    )


# -- events and runs ------------------------------------------------------------------------------------------


def _envelope(sub: EventSubmission, *, streaming: bool) -> AgentEventEnvelope:
    user_input: AgentInput | dict[str, object] = (
        {"text": sub.text} if sub.text is not None else sub.input or {}
    )
    try:
        # One validation of the nested document (the input and the delivery context as dicts): a
        # constructor per part cost a Python __init__ and a validator call each.
        return AgentEventEnvelope.model_validate(
            {
                "event_id": sub.event_id or new_event_id(),
                "event_type": sub.event_type,
                "event_time": sub.event_time,
                "source": "api",
                "conversation_id": sub.conversation_id,
                "thread_id": sub.thread_id,
                "bot_id": sub.bot_id,
                "workspace_id": sub.workspace_id,
                "actor": sub.actor,
                "subject": sub.subject,
                "input": user_input,
                "delivery": {"surface": "api", "supports_streaming": streaming},
                "data": sub.data,
                "params": sub.params,
                "locale": sub.locale,
                "timezone": sub.timezone,
            }
        )
    except ValidationError as exc:
        raise ApiError(422, "invalid_request", _describe(exc)) from None


async def submit_event(request: Request) -> Response:
    """``POST /v1/events``."""
    service = _service(request)
    sub = await _body(request, EventSubmission)
    query = _query(request)  # parsed once for both flags
    stream = _wants_stream(request, query=query)
    wait = _flag(query, "wait")
    if stream and wait:
        raise ApiError(422, "invalid_request", "choose either stream or wait")
    event = _envelope(sub, streaming=stream)
    # an id made up here (no event_id in the body) is new by construction: the start need not look it up
    run_id = await service.accept(event, agent_id=sub.agent_id, minted=sub.event_id is None)
    location = {"Location": f"/v1/runs/{run_id}", "X-Run-Id": run_id}
    if stream:
        return _event_stream(service, run_id, after=0, headers=location)
    if wait:
        items = [_item(i) async for i in service.follow(run_id)]
        view = await service.run(run_id)
        return _json(RunWithResults(run=_run_out(view), results=items), headers=location)
    return _json(RunAccepted(run_id=run_id, event_id=event.event_id), 202, headers=location)


async def get_run(request: Request) -> Response:
    """``GET /v1/runs/{run_id}``."""
    view = await _service(request).run(_path_id(request, "run_id"))
    return _json(_run_out(view))


async def get_results(request: Request) -> Response:
    """``GET /v1/runs/{run_id}/results``."""
    service = _service(request)
    run_id = _path_id(request, "run_id")
    after = _int_query(request, "after", 0, low=0, high=2**31)
    last_event_id = request.headers.get("last-event-id")
    if last_event_id is not None:
        if not _SEQ.fullmatch(last_event_id):
            raise ApiError(422, "invalid_request", "Last-Event-ID must be a result's host_seq")
        # An empty id is how SSE says "no event received yet".
        after = int(last_event_id) if last_event_id else after
    limit = _int_query(request, "limit", 100, low=1, high=1000)
    view = await service.run(run_id)
    if _wants_stream(request):
        return _event_stream(service, run_id, after=after, headers={})
    # a live run's results are in the store as soon as any reader can see them
    items = await service.stored_results(run_id, after=after, limit=limit)
    next_after = items[-1].host_seq if items else after
    done = view.status != "running" and next_after >= view.results
    return _json(
        ResultPage(run_id=run_id, results=[_item(i) for i in items], next_after=next_after, done=done)
    )


async def cancel_run(request: Request) -> Response:
    """``POST /v1/runs/{run_id}/cancel``."""
    service = _service(request)
    run_id = _path_id(request, "run_id")
    feed = service.feed(run_id)
    cancelled = await service.cancel(run_id)
    # a run another host executes: the request was handed to that host (cancelled is then True)
    forwarded = feed is None and cancelled
    cancelling = forwarded or (feed is not None and feed.handle.cancel_requested is not None)
    if cancelling:
        # Let the run record its cancellation so the answer shows the final status. asyncio.timeout, never
        # wait_for (which can swallow this request's own cancellation on 3.11); the host force-ends a run that
        # ignores its cancellation, so a run still live after the settle time is answered as "cancelling".
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_CANCEL_SETTLE_SECONDS):
                await service.wait_ended(run_id)
    view = await service.run(run_id)
    if not cancelling and view.status == "running":
        raise ApiError(
            409,
            "not_live",
            f"run {run_id} was started without a registered owner host and cannot be cancelled from here",
        )
    in_progress = cancelling and view.status == "running"
    return _json(
        CancelOut(run_id=run_id, cancelled=cancelled, status=view.status, cancelling=in_progress),
        status=202 if in_progress else 200,
    )


# -- runners, agents, bindings --------------------------------------------------------------------------------


def _control_out(control: RunnerControl) -> RunnerControlOut:
    return RunnerControlOut(
        runner_id=control.runner_id,
        reason=control.reason,
        disabled_by=control.disabled_by,
        disabled_at=control.disabled_at,
    )


def _runner_out(view: RunnerView) -> RunnerOut:
    d = view.descriptor
    m = d.manifest
    risk = view.risk
    process = view.process
    return RunnerOut(
        runner_id=d.runner_id,
        plugin_id=d.plugin_id,
        label=m.label.model_dump(exclude_none=True),
        description=m.description.model_dump(exclude_none=True) if m.description else None,
        capabilities=m.capabilities.model_dump(mode="json"),
        permissions=m.permissions.model_dump(mode="json"),
        config_schema=[item.model_dump(mode="json", exclude_none=True) for item in m.config_schema],
        protocol_version=m.protocol_version,
        disabled=None if view.control is None else _control_out(view.control),
        risk=RunnerRiskOut(
            level=risk.level,
            executes_code=risk.executes_code,
            network=risk.network,
            secrets=risk.secrets,
            permissions=risk.permissions,
            mcp_bridge=risk.mcp_bridge,
            mcp_servers=risk.mcp_servers,
            runtime=risk.runtime,
            agents=risk.agents,
            reasons=risk.reasons,
        ),
        process=ProcessStatusOut(
            mode=process.mode,
            warm=process.warm,
            pid=process.pid,
            starts=process.starts,
            restarts=process.restarts,
            live_runs=process.live_runs,
        ),
        warnings=view.warnings,
    )


async def list_runners(request: Request) -> Response:
    """``GET /v1/runners``."""
    service = _service(request)
    views = await service.runner_views()
    failed = [_failed_out(f) for f in service.plugin_failures()]
    return _json(RunnerList(runners=[_runner_out(v) for v in views], failed=failed))


def _parse_runner_id(value: str) -> str:
    if len(value) > _MAX_RUNNER_ID:
        raise ApiError(422, "invalid_request", f"runner_id is longer than {_MAX_RUNNER_ID} characters")
    try:
        return str(RunnerId.parse(value))
    except InvalidRunnerIdError as exc:
        raise ApiError(422, "invalid_request", f"runner_id: {exc.reason}") from None


def _runner_id(request: Request) -> str:
    return _parse_runner_id(request.path_params["runner_id"])


async def disable_runner(request: Request) -> Response:
    """``PUT /v1/runners/{runner_id}/disabled``."""
    service = _service(request)
    runner_id = _runner_id(request)
    body = await _body(request, DisableRunner)
    control = await service.disable_runner(runner_id, reason=body.reason, by="api")
    return _json(_control_out(control))


async def enable_runner(request: Request) -> Response:
    """``DELETE /v1/runners/{runner_id}/disabled``."""
    await _service(request).enable_runner(_runner_id(request))
    return Response(status_code=204)


_OUTCOME: Final = re.compile(r"[a-z][a-z0-9_.]{0,63}")
_ACTION: Final = re.compile(r"[a-z][a-z0-9_.]{0,63}")


def _text_query(request: Request, name: str, pattern: re.Pattern[str], what: str) -> str | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if not pattern.fullmatch(raw):
        raise ApiError(422, "invalid_request", f"query parameter {name} must be {what}")
    return raw


_EPOCH: Final = re.compile(r"[0-9]{1,16}")


def _epoch_query(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if not _EPOCH.fullmatch(raw) or int(raw) > 2**53:
        raise ApiError(422, "invalid_request", f"query parameter {name} must be Unix epoch milliseconds")
    return int(raw)


async def get_audit(request: Request) -> Response:
    """``GET /v1/audit``."""
    service = _service(request)
    run_id = request.query_params.get("run_id") or None
    if run_id is not None and not is_valid_id(run_id):
        raise ApiError(422, "invalid_request", f"run_id must match {ID_PATTERN}")
    runner_id = request.query_params.get("runner_id") or None
    if runner_id is not None:
        runner_id = _parse_runner_id(runner_id)
    plugin_id = request.query_params.get("plugin_id") or None
    if plugin_id is not None and (len(plugin_id) > _MAX_RUNNER_ID or not _PLUGIN_ID.fullmatch(plugin_id)):
        raise ApiError(422, "invalid_request", "plugin_id must be author/name")
    raw_cursor = request.query_params.get("cursor") or ""
    if raw_cursor and not _CURSOR.fullmatch(raw_cursor):
        raise ApiError(422, "invalid_request", "cursor must be a value returned as next_cursor")
    order = request.query_params.get("order", "desc")
    if order not in {"asc", "desc"}:
        raise ApiError(422, "invalid_request", "order must be asc or desc")
    where = AuditFilter(
        run_id=run_id,
        runner_id=runner_id,
        plugin_id=plugin_id,
        action=_text_query(request, "action", _ACTION, "an action name such as models.invoke"),
        outcome=_text_query(request, "outcome", _OUTCOME, "allowed, denied or a refusal code"),
        since=_epoch_query(request, "since"),
        until=_epoch_query(request, "until"),
    )
    page = await service.audit(
        where,
        cursor=int(raw_cursor) if raw_cursor else None,
        limit=_int_query(request, "limit", 100, low=1, high=MAX_AUDIT_PAGE),
        order=order,
    )
    return _json(
        AuditPageOut(
            entries=page.entries,
            next_cursor=None if page.next_cursor is None else str(page.next_cursor),
        )
    )


def _failed_out(failure: PluginFailure) -> FailedPluginOut:
    return FailedPluginOut(plugin_id=failure.plugin_id, reason=failure.reason, source=failure.source)


async def _agent_out(service: HostService, entry: AgentEntry) -> AgentOut:
    agent = entry.agent
    redacted = await service.redacted(agent.runner_id, agent.runner_config)
    return AgentOut(agent=agent.model_copy(update={"runner_config": redacted}), source=entry.source)


async def _admit_agent(service: HostService, agent: AgentConfig) -> None:
    # The runner's schema decides for its own fields (secret: true); names are only guessed for the rest.
    descriptor = await service.runner_schema(agent.runner_id)
    schema = descriptor.manifest.config_schema if descriptor is not None else None
    problems = [
        f"runner_config.{format_key_path(p)}: {why}"
        for p, why in find_literal_secrets(agent.runner_config, schema=schema)
    ]
    if descriptor is not None:
        for name in descriptor.manifest.secret_fields():
            value = agent.runner_config.get(name)
            if value not in (None, "") and not is_env_ref(value):
                problems.append(f'runner_config.{name}: marked secret by the runner; give {{"env": "VAR"}}')
    if problems:
        raise ApiError(
            422,
            "literal_secret",
            "secrets are read from environment variables, never stored: " + "; ".join(sorted(set(problems))),
        )
    # The runner must be available and the config must fit its form (AdmissionError → typed 422).
    check_agent_config(agent.runner_id, agent.runner_config, descriptor.manifest if descriptor else None)


async def list_agents(request: Request) -> Response:
    """``GET /v1/agents``."""
    service = _service(request)
    service.refresh_bindings()
    return _json(AgentList(agents=[await _agent_out(service, e) for e in service.directory.agents()]))


async def get_agent(request: Request) -> Response:
    """``GET /v1/agents/{agent_id}``."""
    service = _service(request)
    service.refresh_bindings()
    return _json(await _agent_out(service, service.directory.agent(_path_id(request, "agent_id"))))


async def create_agent(request: Request) -> Response:
    """``POST /v1/agents``."""
    service = _service(request)
    agent = await _body(request, AgentConfig)
    await _admit_agent(service, agent)
    service.apply_bindings(await service.directory.put_agent(agent, create=True))
    out = await _agent_out(service, service.directory.agent(agent.agent_id))
    return _json(out, 201, headers={"Location": f"/v1/agents/{quote(agent.agent_id, safe='')}"})


async def replace_agent(request: Request) -> Response:
    """``PUT /v1/agents/{agent_id}``."""
    service = _service(request)
    agent_id = _path_id(request, "agent_id")
    agent = await _body(request, AgentConfig)
    if agent.agent_id != agent_id:
        raise ApiError(422, "invalid_request", "agent_id in the body differs from the path")
    await _admit_agent(service, agent)
    service.apply_bindings(await service.directory.put_agent(agent, create=False))
    return _json(await _agent_out(service, service.directory.agent(agent_id)))


async def delete_agent(request: Request) -> Response:
    """``DELETE /v1/agents/{agent_id}``."""
    service = _service(request)
    service.apply_bindings(await service.directory.remove_agent(_path_id(request, "agent_id")))
    return Response(status_code=204)


def _binding_out(entry: BindingEntry) -> BindingOut:
    return BindingOut(binding=entry.binding, source=entry.source)


async def list_bindings(request: Request) -> Response:
    """``GET /v1/bindings``."""
    service = _service(request)
    service.refresh_bindings()
    return _json(BindingList(bindings=[_binding_out(e) for e in service.directory.bindings()]))


async def get_binding(request: Request) -> Response:
    """``GET /v1/bindings/{binding_id}``."""
    service = _service(request)
    service.refresh_bindings()
    return _json(_binding_out(service.directory.binding(_path_id(request, "binding_id"))))


async def create_binding(request: Request) -> Response:
    """``POST /v1/bindings``."""
    service = _service(request)
    spec = await _body(request, BindingSpec)
    service.apply_bindings(await service.directory.put_binding(spec, create=True))
    out = _binding_out(service.directory.binding(spec.binding_id))
    return _json(out, 201, headers={"Location": f"/v1/bindings/{quote(spec.binding_id, safe='')}"})


async def check_binding_route(request: Request) -> Response:
    """``POST /v1/bindings/check``."""
    service = _service(request)
    spec = await _body(request, BindingSpec)
    service.refresh_bindings()
    found = check_binding(service.directory, spec)
    return _json(
        BindingCheckOut(
            ok=not found.conflicts and not found.problems,
            conflicts=found.conflicts,
            problems=found.problems,
            precedence=None if found.precedence is None else list(found.precedence),
            order=found.order,
        )
    )


async def replace_binding(request: Request) -> Response:
    """``PUT /v1/bindings/{binding_id}``."""
    service = _service(request)
    binding_id = _path_id(request, "binding_id")
    spec = await _body(request, BindingSpec)
    if spec.binding_id != binding_id:
        raise ApiError(422, "invalid_request", "binding_id in the body differs from the path")
    service.apply_bindings(await service.directory.put_binding(spec, create=False))
    return _json(_binding_out(service.directory.binding(binding_id)))


async def delete_binding(request: Request) -> Response:
    """``DELETE /v1/bindings/{binding_id}``."""
    service = _service(request)
    service.apply_bindings(await service.directory.remove_binding(_path_id(request, "binding_id")))
    return Response(status_code=204)


# -- transcript and health ------------------------------------------------------------------------------------


def _transcript_item(item: StoredTranscriptItem) -> TranscriptItemOut:
    return TranscriptItemOut(
        seq=item.seq,
        item_id=item.item_id,
        role=item.role,
        item_type=item.item_type,
        content=item.content,
        contents=list(item.contents),
        artifacts=list(item.artifacts),
        run_id=item.run_id,
        event_id=item.event_id,
        created_at=item.created_at,
    )


async def get_transcript(request: Request) -> Response:
    """``GET /v1/conversations/{conversation_id}/transcript``."""
    service = _service(request)
    conversation_id = _path_id(request, "conversation_id")
    thread_id = request.query_params.get("thread_id") or None
    if thread_id is not None and not is_valid_id(thread_id):
        raise ApiError(422, "invalid_request", f"thread_id must match {ID_PATTERN}")
    raw_cursor = request.query_params.get("cursor") or ""
    if raw_cursor and not _CURSOR.fullmatch(raw_cursor):
        raise ApiError(422, "invalid_request", "cursor must be a value returned as next_cursor")
    after = int(raw_cursor) if raw_cursor else 0
    limit = _int_query(request, "limit", 50, low=1, high=500)
    items, more = await service.stores.transcript.page(
        conversation=ConversationKey(conversation_id, thread_id),
        after_seq=after,
        limit=limit,
        direction="forward",
    )
    next_cursor = str(items[-1].seq) if more and items else None
    return _json(
        TranscriptPage(
            conversation_id=conversation_id,
            thread_id=thread_id,
            items=[_transcript_item(i) for i in items],
            next_cursor=next_cursor,
        )
    )


async def healthz(request: Request) -> Response:
    """``GET /healthz``."""
    return _json(Health())


async def readyz(request: Request) -> Response:
    """``GET /readyz``."""
    service = _service(request)
    ready, detail = await service.readiness()
    failed = [_failed_out(f) for f in service.plugin_failures()]
    return _json(Readiness(ready=ready, detail=detail, failed_plugins=failed), 200 if ready else 503)


# -- the table --------------------------------------------------------------------------------------------------

_ID_SCHEMA: Final = {"type": "string", "minLength": 1, "maxLength": 200, "pattern": ID_PATTERN}

_RUN_ID = Param(
    name="run_id",
    where="path",
    schema=_ID_SCHEMA,
    description="Run id.",
)
_AGENT_ID = Param(
    name="agent_id",
    where="path",
    schema=_ID_SCHEMA,
    description="Agent id.",
)
_BINDING_ID = Param(
    name="binding_id",
    where="path",
    schema=_ID_SCHEMA,
    description="Binding id.",
)
_RUNNER_ID_PATTERN: Final = (
    "^plugin:[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$"
)
_RUNNER_ID = Param(
    name="runner_id",
    where="path",
    schema={"type": "string", "maxLength": 255, "pattern": _RUNNER_ID_PATTERN},
    description="Runner id `plugin:author/plugin/runner` (its `/` may be sent as is or as `%2F`).",
    slashes=True,
)
_AUDIT_PARAMS: Final = (
    Param(
        name="run_id",
        where="query",
        schema={"type": "string", "maxLength": 200, "pattern": "^$|" + ID_PATTERN},
        description="Only this run's calls (empty: any).",
    ),
    Param(
        name="runner_id",
        where="query",
        schema={"type": "string", "maxLength": 255, "pattern": "^$|" + _RUNNER_ID_PATTERN},
        description="Only calls of this runner's runs (empty: any).",
    ),
    Param(
        name="plugin_id",
        where="query",
        schema={"type": "string", "maxLength": 255, "pattern": "^$|^" + _PLUGIN_ID.pattern + "$"},
        description="Only calls of this plugin's runs, `author/name` (empty: any).",
    ),
    Param(
        name="action",
        where="query",
        schema={"type": "string", "pattern": "^$|^" + _ACTION.pattern + "$"},
        description="Only this action, `models.invoke`, `state.get`... (empty: any).",
    ),
    Param(
        name="outcome",
        where="query",
        schema={"type": "string", "pattern": "^$|^" + _OUTCOME.pattern + "$"},
        description="`allowed`, `denied` (every refusal) or one refusal code, `unauthorized`... (empty: any).",
    ),
    Param(
        name="since",
        where="query",
        schema={"type": "integer", "minimum": 0, "maximum": 2**53},
        description="Calls made at or after this instant (Unix epoch milliseconds).",
    ),
    Param(
        name="until",
        where="query",
        schema={"type": "integer", "minimum": 0, "maximum": 2**53},
        description="Calls made before this instant (Unix epoch milliseconds).",
    ),
    Param(
        name="cursor",
        where="query",
        schema={"type": "string", "pattern": "^[0-9]{0,12}$"},
        description="`next_cursor` of the previous page.",
    ),
    Param(
        name="limit",
        where="query",
        schema={"type": "integer", "minimum": 1, "maximum": MAX_AUDIT_PAGE},
        description="Page size.",
    ),
    Param(
        name="order",
        where="query",
        schema={"type": "string", "enum": ["asc", "desc"]},
        description="`desc` (newest first, the default) or `asc` (call order).",
    ),
)
_STREAM = Param(
    name="stream",
    where="query",
    schema={"type": "boolean"},
    description="Answer as Server-Sent Events (same as `Accept: text/event-stream`).",
)
_E404 = (ErrorBody, "Not found.")
_E409 = (ErrorBody, "Conflict.")
_E422 = (ErrorBody, "Invalid request.")

ENDPOINTS: Final[tuple[Endpoint, ...]] = (
    Endpoint(
        method="POST",
        path="/v1/events",
        handler=submit_event,
        operation_id="submitEvent",
        summary="Submit an event: 202 with the run id, a live result stream (SSE) or the finished run (wait).",
        tag="runs",
        body=EventSubmission,
        params=(
            _STREAM,
            Param(
                name="wait",
                where="query",
                schema={"type": "boolean"},
                description="Answer when the run has ended, with every result.",
            ),
        ),
        responses={
            200: (RunWithResults, "The finished run (`wait=true`), or its results as SSE (`stream=true`)."),
            202: (RunAccepted, "Accepted; the run is executing."),
            404: (
                ErrorBody,
                "No binding handles the event (`binding_not_found`), or `agent_id` names no agent (`not_found`).",
            ),
            409: (
                ErrorBody,
                "The event id was already submitted (`duplicate_event`, with the first `run_id`).",
            ),
            403: (
                ErrorBody,
                "The bound runner executes code and the operator has not enabled such runners "
                "(`code_execution_disabled`; `[security] allow_code_executing_runners`), or an operator "
                "disabled the runner (`runner_disabled`, with the reason).",
            ),
            413: (ErrorBody, "The body is too large."),
            503: (ErrorBody, "The bound runner is unavailable, or the host is shutting down."),
        },
        sse_status=200,
    ),
    Endpoint(
        method="GET",
        path="/v1/runs/{run_id}",
        handler=get_run,
        operation_id="getRun",
        summary="Status, outcome and result count of a run.",
        tag="runs",
        params=(_RUN_ID,),
        responses={200: (RunOut, "The run."), 404: _E404},
    ),
    Endpoint(
        method="GET",
        path="/v1/runs/{run_id}/results",
        handler=get_results,
        operation_id="getRunResults",
        summary="Results after a cursor, as a JSON page or as SSE (resumable with `Last-Event-ID`; live runs continue live).",
        tag="runs",
        params=(
            _RUN_ID,
            Param(
                name="after",
                where="query",
                schema={"type": "integer", "minimum": 0, "maximum": 2**31},
                description="Return results with host_seq greater than this.",
            ),
            Param(
                name="limit",
                where="query",
                schema={"type": "integer", "minimum": 1, "maximum": 1000},
                description="Page size (JSON only).",
            ),
            _STREAM,
            Param(
                name="Last-Event-ID",
                where="header",
                schema={"type": "string", "pattern": "^[0-9]{0,10}$"},
                description="SSE resume cursor: the last `id` received (overrides `after`; empty = from the start).",
            ),
        ),
        responses={200: (ResultPage, "A page of results, or SSE."), 404: _E404},
        sse_status=200,
    ),
    Endpoint(
        method="POST",
        path="/v1/runs/{run_id}/cancel",
        handler=cancel_run,
        operation_id="cancelRun",
        summary="Cancel a live run (it ends `run.failed` with code `cancelled`).",
        tag="runs",
        params=(_RUN_ID,),
        responses={
            200: (CancelOut, "Cancelled, or already ended."),
            202: (
                CancelOut,
                "Cancellation accepted earlier or now; the run has not ended yet (`cancelling`).",
            ),
            404: _E404,
            409: (
                ErrorBody,
                "The run was recorded without an owner host, so no host can be asked to cancel it.",
            ),
        },
    ),
    Endpoint(
        method="GET",
        path="/v1/runners",
        handler=list_runners,
        operation_id="listRunners",
        summary="Available runners and their config forms.",
        tag="runners",
        responses={200: (RunnerList, "Runners.")},
    ),
    Endpoint(
        method="PUT",
        path="/v1/runners/{runner_id}/disabled",
        handler=disable_runner,
        operation_id="disableRunner",
        summary="Disable a runner: every later event bound to it is refused (403 `runner_disabled`), on every "
        "host sharing the database, until it is enabled again.",
        tag="runners",
        body=DisableRunner,
        params=(_RUNNER_ID,),
        responses={200: (RunnerControlOut, "Disabled."), 404: _E404, 422: _E422},
    ),
    Endpoint(
        method="DELETE",
        path="/v1/runners/{runner_id}/disabled",
        handler=enable_runner,
        operation_id="enableRunner",
        summary="Enable a runner again (nothing happens when it was not disabled).",
        tag="runners",
        params=(_RUNNER_ID,),
        responses={204: (None, "Enabled."), 404: _E404, 422: _E422},
    ),
    Endpoint(
        method="GET",
        path="/v1/audit",
        handler=get_audit,
        operation_id="getAudit",
        summary="The back-call audit: every call a runner made into the host, allowed or refused, with filters "
        "and paging (a live run's records are stored a moment after its calls, batched; the rest when it ends).",
        tag="audit",
        params=_AUDIT_PARAMS,
        responses={200: (AuditPageOut, "A page."), 422: _E422},
    ),
    Endpoint(
        method="GET",
        path="/v1/agents",
        handler=list_agents,
        operation_id="listAgents",
        summary="Agents (secrets redacted).",
        tag="agents",
        responses={200: (AgentList, "Agents.")},
    ),
    Endpoint(
        method="POST",
        path="/v1/agents",
        handler=create_agent,
        operation_id="createAgent",
        summary="Add an agent.",
        tag="agents",
        body=AgentConfig,
        responses={201: (AgentOut, "Created."), 409: _E409, 422: _E422},
    ),
    Endpoint(
        method="GET",
        path="/v1/agents/{agent_id}",
        handler=get_agent,
        operation_id="getAgent",
        summary="One agent (secrets redacted).",
        tag="agents",
        params=(_AGENT_ID,),
        responses={200: (AgentOut, "The agent."), 404: _E404},
    ),
    Endpoint(
        method="PUT",
        path="/v1/agents/{agent_id}",
        handler=replace_agent,
        operation_id="replaceAgent",
        summary="Replace an agent; takes effect for the next event.",
        tag="agents",
        body=AgentConfig,
        params=(_AGENT_ID,),
        responses={200: (AgentOut, "Replaced."), 404: _E404, 409: _E409, 422: _E422},
    ),
    Endpoint(
        method="DELETE",
        path="/v1/agents/{agent_id}",
        handler=delete_agent,
        operation_id="deleteAgent",
        summary="Remove an agent no binding uses.",
        tag="agents",
        params=(_AGENT_ID,),
        responses={204: (None, "Removed."), 404: _E404, 409: _E409},
    ),
    Endpoint(
        method="GET",
        path="/v1/bindings",
        handler=list_bindings,
        operation_id="listBindings",
        summary="Bindings.",
        tag="bindings",
        responses={200: (BindingList, "Bindings.")},
    ),
    Endpoint(
        method="POST",
        path="/v1/bindings",
        handler=create_binding,
        operation_id="createBinding",
        summary="Add a binding; a conflicting one is refused (409).",
        tag="bindings",
        body=BindingSpec,
        responses={201: (BindingOut, "Created."), 409: _E409, 422: _E422},
    ),
    Endpoint(
        method="POST",
        path="/v1/bindings/check",
        handler=check_binding_route,
        operation_id="checkBinding",
        summary="Check a binding before saving it: the bindings it conflicts with and its place in the "
        "precedence order (nothing is written).",
        tag="bindings",
        body=BindingSpec,
        responses={200: (BindingCheckOut, "The check."), 422: _E422},
    ),
    Endpoint(
        method="GET",
        path="/v1/bindings/{binding_id}",
        handler=get_binding,
        operation_id="getBinding",
        summary="One binding.",
        tag="bindings",
        params=(_BINDING_ID,),
        responses={200: (BindingOut, "The binding."), 404: _E404},
    ),
    Endpoint(
        method="PUT",
        path="/v1/bindings/{binding_id}",
        handler=replace_binding,
        operation_id="replaceBinding",
        summary="Replace a binding; takes effect for the next event.",
        tag="bindings",
        body=BindingSpec,
        params=(_BINDING_ID,),
        responses={200: (BindingOut, "Replaced."), 404: _E404, 409: _E409, 422: _E422},
    ),
    Endpoint(
        method="DELETE",
        path="/v1/bindings/{binding_id}",
        handler=delete_binding,
        operation_id="deleteBinding",
        summary="Remove a binding.",
        tag="bindings",
        params=(_BINDING_ID,),
        responses={204: (None, "Removed."), 404: _E404, 409: _E409},
    ),
    Endpoint(
        method="GET",
        path="/v1/conversations/{conversation_id}/transcript",
        handler=get_transcript,
        operation_id="getTranscript",
        summary="A conversation's transcript, oldest first, paged.",
        tag="conversations",
        params=(
            Param(
                name="conversation_id",
                where="path",
                schema=_ID_SCHEMA,
                description="Conversation id.",
            ),
            Param(
                name="thread_id",
                where="query",
                schema={"type": "string", "maxLength": 200, "pattern": "^$|" + ID_PATTERN},
                description="Thread (main line when absent).",
            ),
            Param(
                name="cursor",
                where="query",
                schema={"type": "string", "pattern": "^[0-9]{0,12}$"},
                description="`next_cursor` of the previous page.",
            ),
            Param(
                name="limit",
                where="query",
                schema={"type": "integer", "minimum": 1, "maximum": 500},
                description="Page size.",
            ),
        ),
        responses={200: (TranscriptPage, "A page.")},
    ),
    Endpoint(
        method="GET",
        path="/healthz",
        handler=healthz,
        operation_id="healthz",
        summary="Liveness.",
        tag="health",
        responses={200: (Health, "The process serves requests.")},
    ),
    Endpoint(
        method="GET",
        path="/readyz",
        handler=readyz,
        operation_id="readyz",
        summary="Readiness: the database answers and is migrated to head.",
        tag="health",
        responses={200: (Readiness, "Ready."), 503: (Readiness, "Not ready.")},
    ),
)
