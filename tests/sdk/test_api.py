"""``AgentRunAPI`` over a fake transport: actions, params, typed results, errors and the run deadline."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest
from agentrunner import (
    ACTIONS,
    AgentAPIError,
    AgentRunAPI,
    APIError,
    APITransport,
    ArtifactChunk,
    ArtifactMetadata,
    BackCallRequest,
    ChatMessage,
    DeadlineExceededError,
    EventPage,
    EventRecord,
    HistoryPage,
    InvalidArgumentError,
    KnowledgeRetrieveResult,
    ModelResponse,
    ModelStreamChunk,
    NotFoundError,
    PayloadTooLargeError,
    PlatformActionReceipt,
    RateLimitedError,
    RerankResult,
    RuntimeAPIError,
    StateListPage,
    StateValue,
    StorageListPage,
    StorageValue,
    ToolCallResult,
    ToolDetail,
    UnauthorizedError,
)
from agentrunner.actions import KnowledgeListResult
from pydantic import BaseModel

from . import payloads

RUN_ID = "run-api"
_T = TypeVar("_T")


class FakeTransport:
    """An in-memory ``APITransport``: records every request and answers from canned responses."""

    def __init__(self) -> None:
        self.requests: list[BackCallRequest] = []
        self.timeouts: list[float | None] = []
        self.responses: dict[str, dict[str, Any]] = dict(payloads.ACTION_RESULTS)
        self.chunks: dict[str, list[dict[str, Any]]] = {}
        self.errors: dict[str, AgentAPIError] = {}
        self.call_delay = 0.0
        self.stall_after_chunks = False
        self.cancelled_calls = 0
        self.closed_streams = 0

    def _record(self, request: BackCallRequest, timeout: float | None) -> None:
        # A real transport stamps the caller's identity; the client must never set it itself.
        assert request.caller is None
        self.requests.append(request)
        self.timeouts.append(timeout)
        if request.action in self.errors:
            raise APIError.from_wire(self.errors[request.action])

    async def call(self, request: BackCallRequest, *, timeout: float | None) -> dict[str, Any]:
        self._record(request, timeout)
        try:
            await asyncio.sleep(self.call_delay)
        except asyncio.CancelledError:
            self.cancelled_calls += 1
            raise
        return self.responses[request.action]

    async def stream(
        self, request: BackCallRequest, *, timeout: float | None
    ) -> AsyncIterator[dict[str, Any]]:
        try:
            self._record(request, timeout)
            for chunk in self.chunks.get(request.action, []):
                yield chunk
            if self.stall_after_chunks:
                await asyncio.sleep(3600)
        finally:
            self.closed_streams += 1

    @property
    def last(self) -> BackCallRequest:
        return self.requests[-1]


async def _drain(stream: AsyncIterator[_T], into: list[_T], *, pause: float = 0) -> None:
    async for item in stream:
        into.append(item)
        await asyncio.sleep(pause)


@pytest.fixture
def transport() -> FakeTransport:
    """A fresh fake transport."""
    return FakeTransport()


@pytest.fixture
def api(transport: FakeTransport) -> AgentRunAPI:
    """A client without a deadline over the fake transport."""
    return AgentRunAPI(transport, run_id=RUN_ID)


def test_the_fake_transport_satisfies_the_transport_protocol() -> None:
    """The test double has the shape the SDK requires of every transport."""
    transport: APITransport = FakeTransport()
    assert callable(transport.call)


Call = Callable[[AgentRunAPI], Awaitable[Any]]

# (action, how a runner calls it, the params that must reach the host, the model the answer becomes)
CASES: list[tuple[str, Call, dict[str, Any], type[BaseModel] | None]] = [
    (
        "models.invoke",
        lambda api: api.models.invoke(
            "mdl-1", [ChatMessage(role="user", content="hi"), {"role": "system", "content": "s"}]
        ),
        {
            "model_id": "mdl-1",
            "messages": [
                {"role": "user", "content": "hi", "tool_calls": []},
                {"role": "system", "content": "s"},
            ],
        },
        ModelResponse,
    ),
    (
        "models.rerank",
        lambda api: api.models.rerank("mdl-2", "q", ("a", "b"), top_k=1),
        {"model_id": "mdl-2", "query": "q", "documents": ["a", "b"], "top_k": 1},
        RerankResult,
    ),
    ("tools.get_detail", lambda api: api.tools.get_detail("web"), {"tool_name": "web"}, ToolDetail),
    (
        "tools.call",
        lambda api: api.tools.call("web", {"q": "x"}),
        {"tool_name": "web", "parameters": {"q": "x"}},
        ToolCallResult,
    ),
    ("knowledge.list", lambda api: api.knowledge.list(), {}, KnowledgeListResult),
    (
        "knowledge.retrieve",
        lambda api: api.knowledge.retrieve("kb", "q"),
        {"kb_id": "kb", "query_text": "q", "top_k": 5},
        KnowledgeRetrieveResult,
    ),
    (
        "history.page",
        lambda api: api.history.page(before_cursor="c-9"),
        {"before_cursor": "c-9", "limit": 50, "direction": "backward", "include_artifacts": False},
        HistoryPage,
    ),
    ("history.search", lambda api: api.history.search("cats"), {"query": "cats", "top_k": 10}, HistoryPage),
    ("events.get", lambda api: api.events.get("e"), {"event_id": "e"}, EventRecord),
    (
        "events.page",
        lambda api: api.events.page(limit=10, event_types=["message.received"]),
        {"limit": 10, "event_types": ["message.received"]},
        EventPage,
    ),
    ("artifacts.metadata", lambda api: api.artifacts.metadata("a"), {"artifact_id": "a"}, ArtifactMetadata),
    (
        "artifacts.read_range",
        lambda api: api.artifacts.read_range("a", offset=0, length=2),
        {"artifact_id": "a", "offset": 0, "length": 2},
        ArtifactChunk,
    ),
    (
        "state.get",
        lambda api: api.state.get("conversation", "k"),
        {"scope": "conversation", "key": "k"},
        StateValue,
    ),
    (
        "state.set",
        lambda api: api.state.set("conversation", "k", {"v": 1}, expected_version=0),
        {"scope": "conversation", "key": "k", "value": {"v": 1}, "expected_version": 0},
        StateValue,
    ),
    ("state.delete", lambda api: api.state.delete("actor", "k"), {"scope": "actor", "key": "k"}, None),
    (
        "state.list",
        lambda api: api.state.list("runner", prefix="p."),
        {"scope": "runner", "prefix": "p.", "limit": 100},
        StateListPage,
    ),
    ("storage.get", lambda api: api.storage.get("plugin", "k"), {"area": "plugin", "key": "k"}, StorageValue),
    (
        "storage.set",
        lambda api: api.storage.set("plugin", "k", b"hi"),
        {"area": "plugin", "key": "k", "value_base64": "aGk="},
        StorageValue,
    ),
    (
        "storage.delete",
        lambda api: api.storage.delete("workspace", "k"),
        {"area": "workspace", "key": "k"},
        None,
    ),
    (
        "storage.list",
        lambda api: api.storage.list("binding", cursor="x"),
        {"area": "binding", "cursor": "x", "limit": 100},
        StorageListPage,
    ),
    (
        "platform.request_action",
        lambda api: api.platform.request_action("message.edit", {"message_id": "m"}, idempotency_key="k-1"),
        {"action": "message.edit", "target": {"message_id": "m"}, "payload": {}, "idempotency_key": "k-1"},
        PlatformActionReceipt,
    ),
]


@pytest.mark.parametrize(("action", "invoke", "params", "result_type"), CASES, ids=[c[0] for c in CASES])
async def test_each_namespace_method_sends_its_action_and_returns_the_typed_result(
    api: AgentRunAPI,
    transport: FakeTransport,
    action: str,
    invoke: Call,
    params: dict[str, Any],
    result_type: type[BaseModel] | None,
) -> None:
    """The method names the right action, sends the run id and its params (``None`` dropped), and validates
    the answer into the right model."""
    result = await invoke(api)
    assert transport.last.action == action
    assert transport.last.run_id == RUN_ID
    assert transport.last.params == params
    assert ACTIONS[action].params.model_validate(transport.last.params)
    if result_type is None:
        assert result is None
    else:
        assert type(result) is result_type
        assert result == result_type.model_validate(payloads.ACTION_RESULTS[action])


def test_every_non_streaming_action_has_a_namespace_method_under_test() -> None:
    """The table above covers the whole action vocabulary (the two streaming ones are tested below)."""
    streaming = {name for name, spec in ACTIONS.items() if spec.streaming}
    assert streaming == {"models.stream", "artifacts.open_stream"}
    assert {case[0] for case in CASES} == set(ACTIONS) - streaming


async def test_side_effecting_calls_carry_their_idempotency_key_in_the_envelope(
    api: AgentRunAPI, transport: FakeTransport
) -> None:
    """The key travels on ``BackCallRequest`` where the host de-duplicates."""
    await api.tools.call("web", idempotency_key="t-1")
    assert transport.last.idempotency_key == "t-1"
    assert transport.last.params == {"tool_name": "web", "parameters": {}}
    await api.state.set("conversation", "k", 1, idempotency_key="s-1")
    assert transport.last.idempotency_key == "s-1"
    await api.storage.set("plugin", "k", b"", idempotency_key="b-1")
    assert transport.last.idempotency_key == "b-1"
    await api.platform.request_action("message.edit", {"m": 1}, idempotency_key="p-1")
    assert transport.last.idempotency_key == "p-1"
    await api.state.get("conversation", "k")
    assert transport.last.idempotency_key is None


async def test_setting_a_state_key_to_null_still_sends_the_value(
    api: AgentRunAPI, transport: FakeTransport
) -> None:
    """``None`` is dropped only from optional params: a required JSON ``value`` of ``null`` is kept."""
    await api.state.set("conversation", "k", None)
    assert transport.last.params == {"scope": "conversation", "key": "k", "value": None}
    assert ACTIONS["state.set"].params.model_validate(transport.last.params)


async def test_model_stream_yields_typed_chunks(api: AgentRunAPI, transport: FakeTransport) -> None:
    """``models.stream`` sends its params once and validates every chunk."""
    transport.chunks["models.stream"] = [
        {"delta": "hel"},
        {"delta": "lo"},
        {"finish_reason": "stop", "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}},
    ]
    chunks = [
        c async for c in api.models.stream("mdl-1", [{"role": "user", "content": "hi"}], tools=[{"x": 1}])
    ]
    assert all(isinstance(c, ModelStreamChunk) for c in chunks)
    assert "".join(c.delta or "" for c in chunks) == "hello"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 3
    assert transport.last.action == "models.stream"
    assert transport.last.params == {
        "model_id": "mdl-1",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"x": 1}],
    }
    assert transport.closed_streams == 1


async def test_artifact_streams_are_read_whole_and_bounded(
    api: AgentRunAPI, transport: FakeTransport
) -> None:
    """``read_all`` joins the decoded chunks and refuses an artifact larger than ``max_bytes``."""
    parts = [b"hello ", b"world"]
    transport.chunks["artifacts.open_stream"] = [
        {
            "artifact_id": "a",
            "offset": 0,
            "length": 6,
            "size": 11,
            "data_base64": base64.b64encode(parts[0]).decode(),
        },
        {
            "artifact_id": "a",
            "offset": 6,
            "length": 5,
            "size": 11,
            "data_base64": base64.b64encode(parts[1]).decode(),
        },
    ]
    assert await api.artifacts.read_all("a") == b"hello world"
    assert transport.last.params == {"artifact_id": "a"}
    with pytest.raises(InvalidArgumentError, match="larger than 8 bytes"):
        await api.artifacts.read_all("a", max_bytes=8)
    assert transport.closed_streams == 2


@pytest.mark.parametrize(
    ("code", "exc_type", "retryable"),
    [
        ("unauthorized", UnauthorizedError, False),
        ("not_found", NotFoundError, False),
        ("deadline_exceeded", DeadlineExceededError, False),
        ("payload_too_large", PayloadTooLargeError, False),
        ("rate_limited", RateLimitedError, True),
        ("invalid_argument", InvalidArgumentError, False),
        ("runtime_error", RuntimeAPIError, False),
    ],
)
async def test_host_errors_surface_as_typed_exceptions(
    api: AgentRunAPI, transport: FakeTransport, code: str, exc_type: type[APIError], retryable: bool
) -> None:
    """A wire error of each §9 code becomes its own exception class, keeping message and details."""
    transport.errors["history.page"] = AgentAPIError(code=code, message=f"no: {code}", details={"why": code})
    transport.errors["models.stream"] = AgentAPIError(code=code, message=f"no: {code}")
    with pytest.raises(exc_type, match=f"^no: {code}$") as info:
        await api.history.page()
    assert type(info.value) is exc_type
    assert info.value.code == code
    assert info.value.message == f"no: {code}"
    assert info.value.details == {"why": code}
    assert info.value.retryable is False  # the wire said so, whatever the class default
    assert exc_type.default_retryable is retryable
    with pytest.raises(exc_type, match=f"^no: {code}$"):
        async for _ in api.models.stream("m", [{"role": "user", "content": "x"}]):
            pass


async def test_an_unknown_error_code_becomes_a_runtime_error_keeping_the_code(
    api: AgentRunAPI, transport: FakeTransport
) -> None:
    """Codes this SDK does not know are still typed, as ``RuntimeAPIError`` with the code in ``details``."""
    transport.errors["events.get"] = AgentAPIError(code="quota_exhausted", message="later", retryable=True)
    with pytest.raises(RuntimeAPIError, match="later") as info:
        await api.events.get("e")
    assert info.value.details["code"] == "quota_exhausted"
    assert info.value.retryable is True


async def test_an_unknown_action_is_an_invalid_argument_and_is_never_sent(
    api: AgentRunAPI, transport: FakeTransport
) -> None:
    """Actions outside the table fail locally, for plain and streaming calls alike."""
    with pytest.raises(InvalidArgumentError, match=r"unknown action 'models\.train'"):
        await api.call_raw("models.train", {})
    with pytest.raises(InvalidArgumentError, match="unknown action"):
        async for _ in api.stream("models.train", {}, ModelStreamChunk):
            pass
    assert transport.requests == []


async def test_without_a_deadline_calls_carry_no_timeout(api: AgentRunAPI, transport: FakeTransport) -> None:
    """No ``deadline_at`` means the transport gets ``timeout=None``."""
    await api.events.get("e")
    assert transport.timeouts == [None]


async def test_calls_carry_the_time_left_until_the_deadline(transport: FakeTransport) -> None:
    """The transport is told how long it may take: never more than what is left of the run."""
    api = AgentRunAPI(transport, run_id=RUN_ID, deadline_at=time.time() + 30)
    await api.events.get("e")
    timeout = transport.timeouts[-1]
    assert timeout is not None
    assert 0 < timeout <= 30


async def test_a_call_after_the_deadline_fails_at_once_without_reaching_the_host(
    transport: FakeTransport,
) -> None:
    """Once ``deadline_at`` has passed, every call and stream raises ``DeadlineExceededError`` locally."""
    api = AgentRunAPI(transport, run_id=RUN_ID, deadline_at=time.time() - 0.001)
    with pytest.raises(DeadlineExceededError, match="deadline has passed"):
        await api.events.get("e")
    with pytest.raises(DeadlineExceededError, match="deadline has passed"):
        async for _ in api.models.stream("m", [{"role": "user", "content": "x"}]):
            pass
    assert transport.requests == []


async def test_a_slow_call_is_abandoned_at_the_deadline(transport: FakeTransport) -> None:
    """A transport call still running when the deadline passes is cancelled and reported as exceeded."""
    transport.call_delay = 3600  # were it waited for, pytest-timeout would fail the test
    api = AgentRunAPI(transport, run_id=RUN_ID, deadline_at=time.time() + 0.2)
    with pytest.raises(DeadlineExceededError, match=r"events\.get did not finish"):
        await api.events.get("e")
    assert transport.cancelled_calls == 1


async def test_a_stream_that_stalls_is_abandoned_at_the_deadline_and_closed(transport: FakeTransport) -> None:
    """The deadline applies to each wait for the next chunk: chunks already sent arrive, then it fails."""
    transport.chunks["artifacts.open_stream"] = [payloads.ACTION_RESULTS["artifacts.open_stream"]]
    transport.stall_after_chunks = True
    api = AgentRunAPI(transport, run_id=RUN_ID, deadline_at=time.time() + 0.3)
    received: list[ArtifactChunk] = []
    with pytest.raises(DeadlineExceededError, match=r"artifacts\.open_stream did not finish"):
        await _drain(api.artifacts.open_stream("a"), received)
    assert [c.artifact_id for c in received] == ["art-1"]
    assert transport.closed_streams == 1


async def test_a_stream_consumer_that_outlives_the_deadline_fails_on_its_next_chunk(
    transport: FakeTransport,
) -> None:
    """Work between chunks is never interrupted, but the next chunk after the deadline is refused."""
    transport.chunks["models.stream"] = [{"delta": "a"}, {"delta": "b"}]
    api = AgentRunAPI(transport, run_id=RUN_ID, deadline_at=time.time() + 0.2)
    seen: list[ModelStreamChunk] = []
    # The consumer's own work after each chunk takes it past the deadline.
    with pytest.raises(DeadlineExceededError, match="deadline"):
        await _drain(api.models.stream("m", [{"role": "user", "content": "x"}]), seen, pause=0.4)
    assert [chunk.delta for chunk in seen] == ["a"]
    assert transport.closed_streams == 1


class CancellingTransport:
    """Answers in the very step in which the calling task gets cancelled — the case where ``asyncio.wait_for``
    on Python 3.11 returns the answer and drops the cancellation (issue 17: cancels lost mid-stream)."""

    def __init__(self, *, cancel_at: int) -> None:
        self.target: asyncio.Task[Any] | None = None
        self.cancel_at = cancel_at
        self.produced = 0

    def _answer_ready(self) -> None:
        self.produced += 1
        if self.produced == self.cancel_at:
            assert self.target is not None
            self.target.cancel()

    async def call(self, request: BackCallRequest, *, timeout: float | None) -> dict[str, Any]:
        await asyncio.sleep(0)
        self._answer_ready()
        return payloads.ACTION_RESULTS[request.action]

    async def stream(
        self, request: BackCallRequest, *, timeout: float | None
    ) -> AsyncIterator[dict[str, Any]]:
        while True:
            await asyncio.sleep(0)
            self._answer_ready()
            yield {"delta": "x"}


async def test_a_cancel_arriving_with_the_next_chunk_is_never_dropped() -> None:
    """The run's task is cancelled while its next stream chunk is being produced: the cancellation reaches the
    runner right after that chunk. (With ``asyncio.wait_for`` around the chunk wait it is dropped and the stream
    goes on; this test fails if the SDK's streaming call goes back to it.)"""
    transport = CancellingTransport(cancel_at=3)
    api = AgentRunAPI(transport, run_id=RUN_ID, deadline_at=time.time() + 3600)
    got: list[ModelStreamChunk] = []

    async def relay() -> None:
        async for chunk in api.models.stream("m", [{"role": "user", "content": "x"}]):
            got.append(chunk)
            if len(got) == 10:
                return

    task = asyncio.create_task(relay())
    transport.target = task
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled(), f"the cancellation was dropped: the stream went on to {len(got)} chunks"
    assert len(got) == 3


async def test_a_cancel_arriving_with_a_calls_answer_is_never_dropped() -> None:
    """The same for a unary call: the answer is returned, and the caller's next ``await`` is cancelled."""
    transport = CancellingTransport(cancel_at=1)
    api = AgentRunAPI(transport, run_id=RUN_ID, deadline_at=time.time() + 3600)
    steps: list[str] = []

    async def caller() -> None:
        await api.events.get("e")
        steps.append("answered")
        await asyncio.sleep(0)
        steps.append("went on")

    task = asyncio.create_task(caller())
    transport.target = task
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled() and steps == ["answered"], steps


def test_each_namespace_is_made_on_first_use_and_kept(api: AgentRunAPI) -> None:
    """A run's client makes none of its nine namespaces up front; the first use makes one, later uses get it."""
    names = ["models", "tools", "knowledge", "history", "events", "artifacts", "state", "storage", "platform"]
    assert not set(names) & set(vars(api))
    state = api.state
    assert api.state is state and set(names) & set(vars(api)) == {"state"}
    assert AgentRunAPI(api.transport, run_id=RUN_ID).state is not state  # each client its own
