"""The shared HTTP-runner kit: deadlines, error mapping, redaction, deltas, JSON streams, state, and a session
against a loopback fake server (SSE, statuses, timeout, a cancelled stream closes the connection, a stream left at
its last frame is read to its end)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Generator

import httpx
import pytest
from agentrunner import AdapterContext, AgentRunResult, ArtifactRef, ResultEmitter, RunFailedResult
from agentrunner_http_kit import (
    ConfigReader,
    CumulativeText,
    ExternalIds,
    HttpSession,
    JsonObjectStream,
    PlatformError,
    ReplyText,
    RunDeadline,
    SecretRedactor,
    ThinkFilter,
    adapter_params,
    effective_timeout,
    guarded,
    media_inputs,
    status_error,
    transport_error,
    user_tag,
)
from agentrunner_http_kit import session as kit_session
from agentrunner_http_kit.testing import FakePlatform, FakeResponse, run_context, sse_frame
from httpx_sse import ServerSentEvent

SENTINEL = "sk-sentinel-0123456789abcdef"


def test_the_limit_is_the_earlier_of_timeout_and_deadline() -> None:
    now = 1000.0
    assert effective_timeout(30, None, now=now) == 30
    assert effective_timeout(30, now + 5, now=now) == 5
    assert effective_timeout(None, now + 5, now=now) == 5
    assert effective_timeout(None, None, now=now) is None
    assert effective_timeout(30, now - 5, now=now) == 0.0
    deadline = RunDeadline(10, None)
    remaining = deadline.remaining()
    assert remaining is not None and 0 < remaining <= 10


def test_statuses_map_to_the_common_kinds_and_only_429_and_5xx_are_retryable() -> None:
    cases = {401: ("auth_error", False), 403: ("auth_error", False), 404: ("http_error", False)}
    cases |= {429: ("http_error", True), 500: ("http_error", True), 503: ("http_error", True)}
    for status, (kind, retryable) in cases.items():
        error = status_error(status, "body", platform="P")
        assert (error.kind, error.retryable, error.details["status"]) == (kind, retryable, status)
    long = status_error(500, "x" * 1000, platform="P")
    assert len(str(long.details["body"])) <= 200
    assert transport_error(httpx.ReadTimeout("slow"), platform="P").kind == "timeout"
    assert transport_error(httpx.ConnectError("refused"), platform="P").kind == "http_error"
    assert transport_error(httpx.RemoteProtocolError("cut"), platform="P").kind == "response_invalid"


def test_the_redactor_masks_secrets_their_bearer_tokens_and_basic_pairs() -> None:
    redactor = SecretRedactor([SENTINEL, None, "ab"])
    redactor.add_headers({"Authorization": "Bearer tok-123456", "X-Other": "visible"})
    redactor.add_basic("user", "pass-word")
    text = redactor.redact(
        f"key {SENTINEL} header Bearer tok-123456 pw pass-word b64 dXNlcjpwYXNzLXdvcmQ= ab"
    )
    assert SENTINEL not in text and "tok-123456" not in text and "pass-word" not in text
    assert "dXNlcjpwYXNzLXdvcmQ=" not in text and text.endswith(" ab")
    assert redactor.redact_json({"k": [SENTINEL]}) == {"k": ["***"]}


def test_cumulative_text_becomes_increments() -> None:
    text = CumulativeText()
    assert [text.advance(t) for t in ["He", "Hell", "Hello"]] == ["He", "ll", "o"]
    assert text.advance("Bye") == "" and text.rewritten and text.text == "Bye"
    reply = ReplyText()
    assert reply.append("a") == "a" and not ReplyText()
    reply.append("b")
    assert reply.text == "ab"
    reply.replace("new")
    assert reply.text == "new"


def test_json_objects_split_and_concatenated_across_chunks() -> None:
    data = '{"type":"begin"}\n{"type":"item","content":"a \\"q\\" }"}{"ok": true}\n\n{"n": null}'
    for size in (1, 2, 7, len(data)):
        stream = JsonObjectStream()
        values = [v for i in range(0, len(data), size) for v in stream.feed(data[i : i + size])]
        assert values == [
            {"type": "begin"},
            {"type": "item", "content": 'a "q" }'},
            {"ok": True},
            {"n": None},
        ]
        assert stream.rest() == ""
    broken = JsonObjectStream()
    with pytest.raises(ValueError, match="not JSON"):
        list(broken.feed('{"a": 1} nope'))
    cut = JsonObjectStream()
    assert list(cut.feed('{"a": [1, 2')) == [] and cut.rest() == '{"a": [1, 2'


def test_config_reader_names_the_field() -> None:
    reader = ConfigReader({"base-url": "ftp://x", "n": "abc", "t": "true", "empty": "", "kind": "z"})
    with pytest.raises(PlatformError, match="'base-url'") as caught:
        reader.url("base-url")
    assert caught.value.kind == "config_invalid"
    with pytest.raises(PlatformError, match="'n' must be a number"):
        reader.number("n", default=1)
    with pytest.raises(PlatformError, match="'empty' is required"):
        reader.string("empty", required=True)
    with pytest.raises(PlatformError, match="one of a, b"):
        reader.choice("kind", ["a", "b"], default="a")
    assert reader.boolean("t", default=False) is True
    assert reader.number("missing", default=30) == 30


def test_external_ids_record_only_changes() -> None:
    ctx = run_context(conversation_state={"external.conversation_id": "c1"})
    ids = ExternalIds(ctx)
    assert ids.get("external.conversation_id") == "c1"
    ids.set("external.conversation_id", "c1")
    assert ids.changed == {}
    ids.set("external.session_id", "s1")
    ids.forget("external.conversation_id")
    assert ids.changed == {"external.session_id": "s1", "external.conversation_id": None}
    updates = list(ids.updates(ResultEmitter("run-1")))
    assert [(u.data.scope, u.data.key, u.data.value) for u in updates] == [
        ("conversation", "external.session_id", "s1"),
        ("conversation", "external.conversation_id", None),
    ]


def test_media_inputs_refuse_artifacts_the_run_cannot_read() -> None:
    ctx = run_context(contents=[{"type": "image", "artifact": {"artifact_id": "art-1"}}])
    context = ctx.context.model_copy(
        update={"available_apis": ctx.context.available_apis.model_copy(update={"artifact_read": False})}
    )
    with pytest.raises(PlatformError, match="cannot be read") as caught:
        media_inputs(ctx.model_copy(update={"context": context}))
    assert caught.value.kind == "input_error"


def test_media_inputs_dedupe_artifacts_and_keep_urls() -> None:
    ref = {"artifact_id": "art-1", "mime_type": "image/png", "name": "a.png"}
    ctx = run_context(
        contents=[
            {"type": "image", "artifact": ref},
            {"type": "image", "url": "https://example.com/b.jpg"},
            {
                "type": "file",
                "artifact": {"artifact_id": "art-2", "mime_type": "application/pdf"},
                "name": "d.pdf",
            },
        ]
    )
    attachments = [ArtifactRef.model_validate(ref), ArtifactRef(artifact_id="art-3", mime_type="audio/ogg")]
    ctx = ctx.model_copy(update={"input": ctx.input.model_copy(update={"attachments": attachments})})
    items = media_inputs(ctx)
    assert [(i.kind, i.artifact.artifact_id if i.artifact else i.url) for i in items] == [
        ("image", "art-1"),
        ("image", "https://example.com/b.jpg"),
        ("document", "art-2"),
        ("audio", "art-3"),
    ]


async def test_a_session_reads_sse_and_maps_statuses_without_echoing_the_key() -> None:
    async with FakePlatform() as fake:
        fake.route(
            "POST",
            "/sse",
            FakeResponse.sse([sse_frame({"a": 1}, event="x"), ": comment\n\n", sse_frame("[DONE]")]),
        )
        fake.route("POST", "/401", FakeResponse.json({"msg": f"bad key {SENTINEL}"}, status=401))
        ctx = run_context()
        redactor = SecretRedactor([SENTINEL])
        async with HttpSession.open(ctx, platform="Fake", timeout=30, redactor=redactor) as http:
            headers = {"Authorization": f"Bearer {SENTINEL}"}
            async with http.stream(
                "POST", f"{fake.base_url}/sse", headers=headers, json={"q": 1}
            ) as response:
                assert response.is_event_stream
                events = [(e.event, e.data) async for e in response.events()]
            assert events == [("x", '{"a": 1}'), ("message", "[DONE]")]
            with pytest.raises(
                PlatformError, match=r'Fake refused the credentials \(HTTP 401\): \{"msg": "bad key \*\*\*"\}'
            ) as caught:
                async with http.stream("POST", f"{fake.base_url}/401", headers=headers):
                    pass
        assert caught.value.kind == "auth_error" and SENTINEL not in caught.value.message
        assert SENTINEL not in str(caught.value.details)
        assert fake.requests[0].json() == {"q": 1}
        assert fake.requests[0].headers["authorization"] == f"Bearer {SENTINEL}"


async def _failing_run(out: ResultEmitter, url: str, timeout: float) -> AsyncGenerator[AgentRunResult]:
    async with (
        HttpSession.open(run_context(), platform="Fake", timeout=timeout) as http,
        http.stream("POST", url) as response,
    ):
        async for event in response.events():
            yield out.delta(event.data)
    yield out.complete("done")


async def test_a_slow_platform_fails_timeout_retryable_and_the_guard_names_it() -> None:
    async with FakePlatform() as fake:
        fake.route("POST", "/slow", FakeResponse.sse([sse_frame({"a": 1})], delay=30))
        out = ResultEmitter("run-1")
        results = [
            r
            async for r in guarded(
                _failing_run(out, f"{fake.base_url}/slow", 0.2),
                out,
                prefix="fake",
                platform="Fake",
                redactor=SecretRedactor(),
            )
        ]
    # the platform would answer after 30 s: only the 0.2 s timeout makes this a failure
    assert [r.type for r in results] == ["run.failed"]
    failure = results[0]
    assert isinstance(failure, RunFailedResult)
    assert failure.data.code == "fake.timeout" and failure.data.retryable


async def _read_holding(http: HttpSession, url: str, got: list[str], *, hold_past_deadline: bool) -> None:
    async with http.stream("POST", url) as response:
        async for event in response.events():
            got.append(event.data)
            remaining = http.deadline.remaining()
            if hold_past_deadline and remaining is not None:
                await asyncio.sleep(
                    remaining + 0.05
                )  # the consumer holds the frame: passing the deadline is the point


async def test_the_deadline_never_fires_in_the_consumers_code_and_leaves_no_cancellation_behind() -> None:
    """The stream's one deadline timer cancels a read in progress, never the consumer holding a frame; a read
    after the deadline fails at once; neither leaves the task cancelled."""
    async with FakePlatform() as fake:
        frames = [sse_frame({"n": i}) for i in range(3)]
        fake.route("POST", "/three", FakeResponse.sse(frames))
        fake.route("POST", "/hold", FakeResponse.sse(frames[:1], hold=True))
        task = asyncio.current_task()
        assert task is not None
        async with HttpSession.open(run_context(), platform="Fake", timeout=0.3) as http:
            got: list[str] = []
            await _read_holding(http, f"{fake.base_url}/three", got, hold_past_deadline=False)
            assert got == [f'{{"n": {i}}}' for i in range(3)]
            assert task.cancelling() == 0
            got.clear()
            # the consumer's own await runs to its end; the next read fails at once, though frames are buffered
            with pytest.raises(TimeoutError):  # noqa: PT011 - a timeout has no message
                await _read_holding(http, f"{fake.base_url}/three", got, hold_past_deadline=True)
            assert got == ['{"n": 0}']
            assert task.cancelling() == 0
        got.clear()
        async with HttpSession.open(run_context(), platform="Fake", timeout=0.3) as http:
            # a read waiting when the deadline passes is cancelled into TimeoutError
            with pytest.raises(TimeoutError):  # noqa: PT011 - a timeout has no message
                await _read_holding(http, f"{fake.base_url}/hold", got, hold_past_deadline=False)
            assert got == ['{"n": 0}']
            assert task.cancelling() == 0


async def test_cancelling_a_run_closes_the_stream_and_the_server_sees_it() -> None:
    async with FakePlatform() as fake:
        fake.route("POST", "/hold", FakeResponse.sse([sse_frame({"a": 1})], hold=True))
        out = ResultEmitter("run-1")
        got_first = asyncio.Event()

        async def consume() -> None:
            async for _ in guarded(
                _failing_run(out, f"{fake.base_url}/hold", 60),
                out,
                prefix="fake",
                platform="Fake",
                redactor=SecretRedactor(),
            ):
                got_first.set()

        task = asyncio.create_task(consume())
        await got_first.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):  # noqa: PT011 - a cancellation has no message
            await task
        await asyncio.wait_for(fake.disconnected.wait(), 30)


def test_think_blocks_are_removed_even_when_tags_are_split() -> None:
    text = "a<think>x</think>b <thin"
    for size in (1, 2, 3, len(text)):
        think = ThinkFilter()
        out = "".join(think.feed(text[i : i + size]) for i in range(0, len(text), size)) + think.flush()
        assert out == "ab <thin"


def test_user_tag_and_adapter_params() -> None:
    assert user_tag(run_context(actor_id="42")) == "user_42"
    assert user_tag(run_context(actor_id=None, run_id="r9")) == "user_r9"
    ctx = run_context().model_copy(update={"adapter": AdapterContext(extra={"params": {"a": 1}})})
    assert adapter_params(ctx) == {"a": 1}
    assert adapter_params(run_context()) == {}


@contextlib.contextmanager
def loop_finalized_readers() -> Generator[list[str]]:
    """The HTTP client's async generators (httpx, httpcore, httpx-sse, this kit) that were dropped unfinished
    and so left for the event loop to finalize. Enter it inside the running test: the loop installs its own
    hooks each time it starts running."""
    previous = sys.get_asyncgen_hooks()
    finalized: list[str] = []
    client_code = ("httpx", "httpcore", "httpx_sse", "agentrunner_http_kit")

    def finalizer(agen: AsyncGenerator[object]) -> None:
        code = getattr(agen, "ag_code", None)
        filename = getattr(code, "co_filename", "")
        if any(f"/{name}/" in filename for name in client_code):
            finalized.append(getattr(code, "co_qualname", "?"))
        if previous.finalizer is not None:
            previous.finalizer(agen)

    sys.set_asyncgen_hooks(firstiter=previous.firstiter, finalizer=finalizer)
    try:
        yield finalized
    finally:
        sys.set_asyncgen_hooks(*previous)


async def test_a_stream_left_at_its_last_frame_is_read_to_its_end_and_leaves_the_loop_nothing_to_finalize() -> (
    None
):
    async with FakePlatform() as fake:
        frames = [sse_frame({"n": 1}), sse_frame({"end": True}), ": trailing comment\n\n"]
        fake.route("POST", "/sse", FakeResponse.sse(frames))
        fake.route("POST", "/json", FakeResponse(chunks=['{"n": 1}\n', '{"end": true}\n', '{"after": 1}\n']))
        got: list[object] = []
        with loop_finalized_readers() as finalized:
            async with HttpSession.open(run_context(), platform="Fake", timeout=30) as http:
                async with http.stream("POST", f"{fake.base_url}/sse") as response:
                    async for event in response.events():
                        got.append(event.data)
                        if "end" in event.data:
                            break  # the platform's last frame, as runners stop at message_end
                async with http.stream("POST", f"{fake.base_url}/json") as response:
                    async for value in response.json_objects():
                        got.append(value)
                        if "end" in value:
                            break
            gc.collect()
    assert got == ['{"n": 1}', '{"end": true}', {"n": 1}, {"end": True}]
    # without HttpStream.finish, each break left httpx's chain of ~9 reader generators to the loop
    assert finalized == []


async def test_a_run_failing_mid_stream_closes_its_reader_and_leaves_the_loop_nothing_to_finalize() -> None:
    async with FakePlatform() as fake:
        frames = [sse_frame({"n": 1}), sse_frame({"code": "Refused"}, event="error"), sse_frame({"n": 2})]
        fake.route("POST", "/sse", FakeResponse.sse(frames))

        async def run(http: HttpSession) -> None:
            async with http.stream("POST", f"{fake.base_url}/sse") as response:
                async for event in response.events():
                    if event.event == "error":  # as a runner fails the run on an error frame
                        raise PlatformError("api_error", event.data)

        with loop_finalized_readers() as finalized:
            async with HttpSession.open(run_context(), platform="Fake", timeout=30) as http:
                with pytest.raises(PlatformError, match="Refused"):
                    await run(http)
                gc.collect()
    # without HttpStream.close on the way out, the raise left the whole reader chain to the loop
    assert finalized == []


async def test_a_stream_still_open_after_the_last_frame_is_closed_and_the_run_goes_on() -> None:
    async with FakePlatform() as fake:
        fake.route("POST", "/hold", FakeResponse.sse([sse_frame({"end": True})], hold=True))
        async with HttpSession.open(run_context(), platform="Fake", timeout=30) as http:
            async with http.stream("POST", f"{fake.base_url}/hold") as response:
                got = [event.data async for event in _until_end(response.events())]
            assert got == ['{"end": true}']
            # the wait for the end of the body is short, and the platform sees the connection go away
            await asyncio.wait_for(fake.disconnected.wait(), 30)


async def test_cancelling_a_run_while_its_stream_finishes_propagates_and_closes_the_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kit_session, "_FINISH_SECONDS", 60)  # only the cancellation can end the wait
    async with FakePlatform() as fake:
        fake.route("POST", "/hold", FakeResponse.sse([sse_frame({"end": True})], hold=True))
        finishing = asyncio.Event()

        async def consume() -> None:
            async with (
                HttpSession.open(run_context(), platform="Fake", timeout=60) as http,
                http.stream("POST", f"{fake.base_url}/hold") as response,
            ):
                async for _ in _until_end(response.events()):
                    pass
                finishing.set()

        task = asyncio.create_task(consume())
        await finishing.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):  # noqa: PT011 - a cancellation has no message
            await task
        await asyncio.wait_for(fake.disconnected.wait(), 30)


async def _until_end(events: AsyncIterator[ServerSentEvent]) -> AsyncIterator[ServerSentEvent]:
    async for event in events:
        yield event
        if "end" in event.data:
            return
