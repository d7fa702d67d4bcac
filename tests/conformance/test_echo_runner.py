"""The reference echo runner behaves as its docs say, against the simulated host."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from agentrunner import (
    AgentRunnerManifest,
    ArtifactRef,
    ImageContent,
    MessageCompletedResult,
    MessageDeltaResult,
    RunCompletedResult,
    RunFailedResult,
    StateUpdatedResult,
)
from agentrunner_conformance import (
    CallBehaviour,
    FaultPlan,
    SimulatedHost,
    drive_run,
    evaluate_run,
    load_target,
)
from agentrunner_conformance.host import FaultCode
from agentrunner_runner_echo import TURN_KEY, EchoRunner

from .support import make_context

ECHO_DIR = Path(__file__).resolve().parents[2] / "runners" / "echo"


def _types(record: Any) -> list[str]:
    return [r.type for r in record.results]


async def test_it_streams_the_input_back_in_deltas_when_the_surface_streams() -> None:
    """Deltas add up to the text, then one complete message and one run.completed with usage."""
    text = "a fairly long message that needs more than one chunk"
    record = await drive_run(EchoRunner(), make_context(text), SimulatedHost())
    deltas = [r.parsed for r in record.results if isinstance(r.parsed, MessageDeltaResult)]
    assert len(deltas) > 1
    assert "".join(d.data.chunk.content or "" for d in deltas) == text
    assert _types(record)[-2:] == ["message.completed", "run.completed"]
    terminal = record.results[-1].parsed
    assert isinstance(terminal, RunCompletedResult)
    assert terminal.data.usage["output_chars"] == len(text)
    assert evaluate_run(record, EchoRunner.manifest) == []


async def test_it_sends_one_message_when_the_surface_does_not_stream() -> None:
    """No deltas without streaming delivery."""
    record = await drive_run(EchoRunner(), make_context("hi", streaming=False), SimulatedHost())
    assert "message.delta" not in _types(record)
    message = next(r.parsed for r in record.results if isinstance(r.parsed, MessageCompletedResult))
    assert message.data.message.content == "hi"


async def test_it_counts_turns_per_conversation_in_host_state() -> None:
    """The counter is read with state.get and advanced with state.updated; conversations do not share it."""
    host = SimulatedHost()
    runner = EchoRunner()
    for n in (1, 2, 3):
        await drive_run(runner, make_context("hi", run_id=f"run-{n}"), host)
    await drive_run(runner, make_context("hi", run_id="other", conversation_id="conv-2"), host)
    assert host.state_value(make_context(), "conversation", TURN_KEY) == 3
    assert host.state_value(make_context(conversation_id="conv-2"), "conversation", TURN_KEY) == 1
    assert [c.action for c in host.calls_for("run-2")] == ["state.get"]


async def test_it_leaves_state_alone_when_the_state_api_is_switched_off() -> None:
    """No back-call and no state.updated when available_apis.state is false."""
    host = SimulatedHost()
    record = await drive_run(EchoRunner(), make_context("hi", state=False), host)
    assert host.calls == []
    assert not any(isinstance(r.parsed, StateUpdatedResult) for r in record.results)
    assert _types(record)[-1] == "run.completed"


async def test_a_failing_back_call_still_gets_the_user_a_reply() -> None:
    """An APIError from state.get is handled: the run completes, without touching the counter."""
    codes: list[FaultCode] = ["unauthorized", "rate_limited", "deadline_exceeded", "runtime_error"]
    for code in codes:
        plan = FaultPlan(default=CallBehaviour(error=code))
        record = await drive_run(EchoRunner(), make_context("hi"), SimulatedHost(), plan=plan)
        assert record.exception is None
        assert _types(record)[-1] == "run.completed", code
        assert not any(isinstance(r.parsed, StateUpdatedResult) for r in record.results)


async def test_a_non_message_event_is_named_not_passed_off_as_user_text() -> None:
    """message.recalled gets a note naming the event, never the (absent) input as if a user said it."""
    ctx = make_context(None, event_type="message.recalled")
    record = await drive_run(EchoRunner(), ctx, SimulatedHost())
    message = next(r.parsed for r in record.results if isinstance(r.parsed, MessageCompletedResult))
    assert message.data.message.content == "[event message.recalled]"


async def test_an_empty_message_fails_the_run_instead_of_an_empty_success() -> None:
    """Nothing to echo ends in run.failed with code input.empty."""
    record = await drive_run(EchoRunner(), make_context(""), SimulatedHost())
    terminal = record.results[-1].parsed
    assert isinstance(terminal, RunFailedResult)
    assert terminal.data.code == "input.empty"


async def test_attachments_are_counted_not_read() -> None:
    """Images and attachments are acknowledged in the reply; the bytes are never fetched."""
    image = ImageContent(artifact=ArtifactRef(artifact_id="art-1", artifact_type="image"))
    ctx = make_context("look", contents=[image], attachments=[ArtifactRef(artifact_id="art-2")])
    host = SimulatedHost()
    record = await drive_run(EchoRunner(), ctx, host)
    message = next(r.parsed for r in record.results if isinstance(r.parsed, MessageCompletedResult))
    assert message.data.message.content == "look [2 attachments]"
    assert all(not c.action.startswith("artifacts.") for c in host.calls)


async def test_the_prefix_config_is_put_before_the_reply() -> None:
    """ctx.config['prefix'] comes from the binding's config form."""
    record = await drive_run(EchoRunner(), make_context("x", config={"prefix": "echo: "}), SimulatedHost())
    message = next(r.parsed for r in record.results if isinstance(r.parsed, MessageCompletedResult))
    assert message.data.message.content == "echo: x"


def test_the_plugin_manifest_declares_what_the_class_declares() -> None:
    """manifest.yaml and EchoRunner.manifest agree on id, capabilities, permissions, context and config."""
    data: dict[str, Any] = yaml.safe_load((ECHO_DIR / "manifest.yaml").read_text(encoding="utf-8"))
    meta, spec = data["metadata"], data["spec"]
    declared = AgentRunnerManifest(
        id=f"plugin:{meta['author']}/{meta['name']}/{meta['runner']}",
        name=meta["runner"],
        label=meta["label"],
        description=meta["description"],
        protocol_version=spec["protocol_version"],
        capabilities=spec["capabilities"],
        permissions=spec["permissions"],
        context=spec["context"],
        config_schema=spec["config"],
    )
    assert declared == EchoRunner.manifest
    assert data["execution"]["python"] == {"module": "agentrunner_runner_echo", "attr": "EchoRunner"}


def test_the_runner_is_found_by_its_id_its_plugin_directory_and_its_class_path() -> None:
    """Every kind of CLI target names the same class."""
    assert load_target("plugin:agentrunner/echo/default") is EchoRunner
    assert load_target(str(ECHO_DIR)) is EchoRunner
    assert load_target("agentrunner_runner_echo:EchoRunner") is EchoRunner
