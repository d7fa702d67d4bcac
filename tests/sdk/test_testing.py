"""``agentrunner.testing``: contexts in one call, the in-memory host double, and collecting a run's results."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator

import pytest
from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerManifest,
    AgentRunResult,
    APIError,
    I18nObject,
    InvalidArgumentError,
    PayloadTooLargeError,
    RateLimitedError,
    UnauthorizedError,
)
from agentrunner import testing as art
from agentrunner.testing import FakeHost, StreamRuleError, collect, make_context

PINNED = [
    "DEFAULT_STATE_SCOPES",
    "DEFAULT_STORAGE_AREAS",
    "FakeCall",
    "FakeHost",
    "Handler",
    "MAX_STORAGE_VALUE_BYTES",
    "RunOutcome",
    "StreamRuleError",
    "collect",
    "make_context",
    "stream_problems",
]


def test_the_public_surface_is_pinned() -> None:
    """``agentrunner.testing.__all__`` is exactly this list, and every name exists."""
    assert sorted(art.__all__) == PINNED
    for name in PINNED:
        assert getattr(art, name) is not None


def test_it_imports_nothing_of_the_host_or_the_kit() -> None:
    """The package depends on the SDK only: no host, no conformance kit, no pytest or Hypothesis."""
    code = (
        "import sys, agentrunner.testing\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'agentrunner_host', 'agentrunner_conformance', 'pytest', 'hypothesis', 'sqlalchemy'})\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_make_context_is_a_valid_context_in_one_call() -> None:
    """Every required field is filled; it survives the wire round trip; grants show in available_apis."""
    ctx = make_context("hi", streaming=True, config={"prefix": "> "})
    again = AgentRunContext.model_validate_json(ctx.model_dump_json())
    assert again == ctx
    assert ctx.event.source and ctx.event.event_type == "message.received"
    assert ctx.input.text == "hi" and ctx.delivery.supports_streaming and ctx.config == {"prefix": "> "}
    apis = ctx.context.available_apis
    assert apis.state and apis.state_scopes == ["conversation", "actor", "runner"]
    assert ctx.runtime.deadline_at is not None
    bare = make_context(None, conversation_id=None, actor_id=None, state_scopes=["conversation", "actor"])
    assert not bare.context.available_apis.state and bare.context.available_apis.state_scopes == []
    assert make_context().run_id != make_context().run_id


async def _api(host: FakeHost, **kwargs: object) -> AgentRunAPI:
    return host.api(make_context(**kwargs))  # pyright: ignore[reportArgumentType]


async def test_state_compare_and_set_matches_the_host() -> None:
    """Versions count writes; a lost CAS is invalid_argument with details.reason=version_conflict."""
    api = await _api(FakeHost())
    created = await api.state.set("conversation", "k", {"n": 1}, expected_version=0)
    assert (created.exists, created.version) == (True, 1)
    with pytest.raises(InvalidArgumentError, match="state key 'k' is at version 1, not 0") as lost:
        await api.state.set("conversation", "k", {"n": 2}, expected_version=0)
    assert lost.value.details == {"reason": "version_conflict", "expected_version": 0, "current_version": 1}
    updated = await api.state.set("conversation", "k", {"n": 2}, expected_version=1)
    assert updated.version == 2 and (await api.state.get("conversation", "k")).value == {"n": 2}
    await api.state.delete("conversation", "k")
    gone = await api.state.get("conversation", "k")
    assert (gone.exists, gone.value, gone.version) == (False, None, 0)
    with pytest.raises(PayloadTooLargeError, match="state values are limited to 262144 bytes"):
        await api.state.set("conversation", "big", "x" * 300_000)


async def test_grants_are_per_scope_and_area() -> None:
    """An ungranted scope or area is unauthorized; so is any action without a handler."""
    api = await _api(FakeHost(state_scopes=["conversation"], storage_areas=["plugin"]))
    await api.state.set("conversation", "k", 1)
    with pytest.raises(UnauthorizedError, match="'actor' is not granted"):
        await api.state.get("actor", "k")
    await api.storage.set("plugin", "blob", b"\x00\x01")
    assert (await api.storage.get("plugin", "blob")).value_bytes() == b"\x00\x01"
    assert [e.key for e in (await api.storage.list("plugin")).items] == ["blob"]
    with pytest.raises(UnauthorizedError, match="storage area 'binding' is not granted to this run"):
        await api.storage.get("binding", "blob")
    with pytest.raises(
        UnauthorizedError, match=r"models\.invoke is not granted to this run \(no handler in the FakeHost\)"
    ):
        await api.models.invoke("m", [{"role": "user", "content": "hi"}])


async def test_state_is_kept_per_conversation_and_listed_by_prefix() -> None:
    """The conversation scope is keyed by the conversation, as on the host; state.list pages by key."""
    host = FakeHost()
    one = await _api(host, conversation_id="c1")
    two = await _api(host, conversation_id="c2")
    for n in range(3):
        await one.state.set("conversation", f"p/{n}", n)
    assert not (await two.state.get("conversation", "p/0")).exists
    first = await one.state.list("conversation", prefix="p/", limit=2)
    assert [e.key for e in first.items] == ["p/0", "p/1"] and first.has_more and first.next_cursor
    rest = await one.state.list("conversation", prefix="p/", cursor=first.next_cursor)
    assert [e.key for e in rest.items] == ["p/2"] and not rest.has_more


async def test_injected_errors_and_handlers() -> None:
    """``fail`` answers the next calls with an error; ``on`` answers an action with the test's handler."""
    host = FakeHost()
    host.fail("state.get", RateLimitedError("slow down"), times=1)
    host.on(
        "models.invoke",
        lambda request: {"model_id": "m", "message": {"role": "assistant", "content": "hi there"}},
    )
    api = host.api(make_context())
    with pytest.raises(RateLimitedError, match="slow down"):
        await api.state.get("conversation", "k")
    assert not (await api.state.get("conversation", "k")).exists
    answer = await api.models.invoke("m", [{"role": "user", "content": "hi"}])
    assert answer.message.content == "hi there"
    assert host.actions() == ["state.get", "state.get", "models.invoke"]
    assert isinstance(host.calls[0].error, RateLimitedError) and host.calls[1].error is None
    with pytest.raises(ValueError, match="unknown action"):
        host.fail("nope", RateLimitedError("x"))


class _Counter(AgentRunner):
    manifest = AgentRunnerManifest(
        id="plugin:tests/counter/default", name="default", label=I18nObject(en_US="counter")
    )

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        try:
            seen = (await api.state.get("conversation", "turns")).value
        except APIError as exc:
            yield out.fail("state.unavailable", str(exc))
            return
        turns = (seen if isinstance(seen, int) else 0) + 1
        await api.state.set("conversation", "turns", turns)
        if ctx.delivery.supports_streaming:
            yield out.delta(f"turn {turns}")
        yield out.message(f"turn {turns}")
        yield out.complete()


async def test_collect_keeps_results_calls_and_memory_across_turns() -> None:
    """Two turns on one host: the second sees the first's state; the outcome names text, deltas and calls."""
    host = FakeHost()
    first = await collect(_Counter(), make_context("a", streaming=True), host=host)
    second = await collect(_Counter(), make_context("b"), host=host)
    assert first.completed and first.text == "turn 1" and first.streamed == "turn 1"
    assert second.text == "turn 2" and second.types() == ["message.completed", "run.completed"]
    assert [c.action for c in second.calls] == ["state.get", "state.set"]
    host.fail("state.get", UnauthorizedError("no"))
    failed = await collect(_Counter(), make_context("c"), host=host)
    assert failed.failure is not None and failed.failure.data.code == "state.unavailable"


async def test_calls_after_the_run_ended_are_refused() -> None:
    """``collect`` closes the run after its last result, as the host does."""
    host = FakeHost()
    ctx = make_context()
    await collect(_Counter(), ctx, host=host)
    late = AgentRunAPI(host, run_id=ctx.run_id)
    with pytest.raises(UnauthorizedError, match="not live"):
        await late.state.get("conversation", "turns")


class _TwoTerminals(_Counter):
    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.message("x")
        yield out.complete()
        yield out.complete()


async def test_collect_refuses_a_stream_that_breaks_the_rules() -> None:
    """Two terminal results raise StreamRuleError (or are kept with check=False)."""
    with pytest.raises(StreamRuleError, match="2 terminal results"):
        await collect(_TwoTerminals(), make_context())
    kept = await collect(_TwoTerminals(), make_context(), check=False)
    assert kept.types() == ["message.completed", "run.completed", "run.completed"]


async def test_state_updated_results_are_applied_like_the_host() -> None:
    """A ``state.updated`` result writes host state once the run produced it; ``null`` deletes."""

    class Writer(_Counter):
        async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
            out = self.emitter(ctx)
            yield out.state("conversation", "note", ctx.input.text)
            yield out.message("ok")
            yield out.complete()

    host = FakeHost()
    ctx = make_context("remember me")
    outcome = await collect(Writer(), ctx, host=host)
    assert [u.data.key for u in outcome.state_updates] == ["note"]
    assert host.state_value(ctx, "conversation", "note") == "remember me"
