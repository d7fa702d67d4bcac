"""``ResultEmitter``: every verb builds a valid result with run id, sequence and timestamp filled."""

from __future__ import annotations

import time

import pytest
from agentrunner import (
    ActionRequestedResult,
    AgentRunResultAdapter,
    ArtifactCreatedResult,
    ArtifactRef,
    AssistantMessage,
    ImageContent,
    MessageCompletedResult,
    MessageDeltaResult,
    ResultEmitter,
    RunCompletedResult,
    RunFailedResult,
    StateUpdatedResult,
    TextContent,
    ToolCallCompletedResult,
    ToolCallStartedResult,
)
from agentrunner.results import AgentRunResultBase


def _every_verb(out: ResultEmitter) -> list[AgentRunResultBase]:
    art = ArtifactRef(artifact_id="a-1", mime_type="text/plain")
    return [
        out.delta("hel"),
        out.delta(contents=[TextContent(text="lo")]),
        out.message("hello", contents=[ImageContent(artifact=art)], artifacts=[art], metadata={"k": 1}),
        out.tool_started("tc-1", "search", {"q": "x"}),
        out.tool_completed("tc-1", "search", result_preview={"n": 1}),
        out.tool_completed("tc-2", "search", error_code="timeout", error_message="slow"),
        out.artifact(art, content_base64="aGk="),
        out.state("conversation", "external.session_id", "s-1"),
        out.state("runner", "gone", None),
        out.action("message.edit", {"message_id": "m"}, payload={"text": "t"}, idempotency_key="k-1"),
        out.complete("bye", usage={"output_tokens": 3}),
    ]


def test_every_verb_fills_run_id_and_a_one_based_strictly_increasing_sequence() -> None:
    """Sequences go 1, 2, 3... across all verbs, and ``last_sequence`` tracks the last one."""
    out = ResultEmitter("run-7")
    assert out.last_sequence == 0
    results = _every_verb(out)
    assert [r.run_id for r in results] == ["run-7"] * len(results)
    assert [r.sequence for r in results] == list(range(1, len(results) + 1))
    assert out.last_sequence == len(results)


def test_timestamps_are_current_epoch_milliseconds_and_never_go_back() -> None:
    """Each result is stamped with the wall clock in integer milliseconds."""
    before = time.time_ns() // 1_000_000
    results = _every_verb(ResultEmitter("r"))
    after = time.time_ns() // 1_000_000
    stamps = [r.timestamp for r in results]
    assert all(isinstance(s, int) and before <= s <= after for s in stamps)
    assert stamps == sorted(stamps)  # pyright: ignore[reportArgumentType]


def test_each_verb_builds_the_matching_result_type_with_its_payload() -> None:
    """The verbs map to the nine result types and carry what they were given."""
    results = _every_verb(ResultEmitter("r"))
    delta, delta2, message, started, completed, failed_tool, artifact, state, deleted, action, done = results
    assert isinstance(delta, MessageDeltaResult)
    assert delta.data.chunk.content == "hel"
    assert isinstance(delta2, MessageDeltaResult)
    assert delta2.data.chunk.contents == [TextContent(text="lo")]
    assert isinstance(message, MessageCompletedResult)
    assert message.data.message.text() == "hello"
    assert message.data.message.metadata == {"k": 1}
    assert isinstance(started, ToolCallStartedResult)
    assert started.data.parameters == {"q": "x"}
    assert isinstance(completed, ToolCallCompletedResult)
    assert completed.data.error_code is None
    assert isinstance(failed_tool, ToolCallCompletedResult)
    assert failed_tool.data.error_code == "timeout"
    assert isinstance(artifact, ArtifactCreatedResult)
    assert artifact.data.content_base64 == "aGk="
    assert isinstance(state, StateUpdatedResult)
    assert state.data.value == "s-1"
    assert isinstance(deleted, StateUpdatedResult)
    assert deleted.data.value is None
    assert isinstance(action, ActionRequestedResult)
    assert action.data.idempotency_key == "k-1"
    assert isinstance(done, RunCompletedResult)
    assert done.data.message == AssistantMessage(content="bye")
    assert done.data.usage == {"output_tokens": 3}


def test_fail_builds_a_terminal_failure() -> None:
    """``fail`` makes a ``run.failed`` with code, message, retryable flag and details."""
    failed = ResultEmitter("r").fail("runner.error", "boom", retryable=True, details={"n": 1})
    assert isinstance(failed, RunFailedResult)
    assert (failed.data.code, failed.data.message, failed.data.retryable) == ("runner.error", "boom", True)
    assert failed.data.details == {"n": 1}


def test_complete_without_text_has_no_message_and_accepts_a_prebuilt_one() -> None:
    """``complete()`` alone ends the run with no message; ``message=`` passes one through."""
    out = ResultEmitter("r")
    assert out.complete().data.message is None
    prebuilt = AssistantMessage(contents=[TextContent(text="x")])
    assert out.complete(message=prebuilt, finish_reason="length").data.message == prebuilt


def test_emitted_results_round_trip_through_the_union() -> None:
    """What the emitter builds is exactly what a host parses back."""
    for result in _every_verb(ResultEmitter("r")):
        again = AgentRunResultAdapter.validate_json(result.model_dump_json())
        assert again == result


def test_invalid_arguments_fail_at_the_verb_not_at_the_host() -> None:
    """The emitter validates, so a bad scope or an empty failure code is caught where it is written."""
    out = ResultEmitter("r")
    with pytest.raises(ValueError, match="scope"):
        out.state("global", "k", 1)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="code"):
        out.fail("", "no code")


def test_a_verb_that_fails_validation_does_not_use_up_a_sequence_number() -> None:
    """A runner that catches the error and carries on leaves no gap in the sequence."""
    out = ResultEmitter("r")
    out.delta("a")
    with pytest.raises(ValueError, match="key"):
        out.state("conversation", "", 1)
    assert out.last_sequence == 1
    assert out.complete().sequence == 2


def test_separate_emitters_count_separately() -> None:
    """Each run has its own counter."""
    first, second = ResultEmitter("a"), ResultEmitter("b")
    first.delta("x")
    first.delta("y")
    assert second.delta("z").sequence == 1
    assert first.complete().sequence == 3
