"""How a run becomes stored facts: the event, the run's start and end, its transcript items and its host
records (the audit trail). The start is one transaction (on SQLite it usually rides in the journal's
transaction with the run's first results, see ``RunStore.begin``); the results go to the run's result log as
they come (see :mod:`agentrunner_host.stores.journal`) and the end is committed after them, grouped with
other runs' writes. The projection of results into transcript items lives here and nowhere else."""

from __future__ import annotations

import contextlib
import time

from agentrunner import ArtifactRef, RawEventRef
from agentrunner import codec as json
from agentrunner.codec import JsonObject, JsonValue

from agentrunner_host.definitions import AgentEventEnvelope

from .access import ConversationKey
from .authorization import snapshot_json
from .context_builder import HistoryHandles
from .dispatcher import AuditRecord, LiveRun
from .ids import event_id as new_event_id
from .ports import RunStores
from .run_state import RunState
from .stores import (
    BACKCALL_EVENT,
    ArtifactOwner,
    EventEntry,
    RunExistsError,
    RunFinish,
    RunStart,
    TranscriptEntry,
)

__all__ = [
    "backcall_entry",
    "event_entry",
    "finish_record",
    "persist_finish",
    "run_start",
    "store_event_data",
    "store_runner_artifact",
    "user_turn",
]

_SUMMARY = 200


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def event_entry(event: AgentEventEnvelope) -> EventEntry:
    """The event-log entry of an incoming event."""
    text = event.input.text
    actor, subject = event.actor, event.subject
    return EventEntry(
        event_id=event.event_id,
        event_type=event.event_type,
        source=event.source,
        kind="event",
        conversation_id=event.conversation_id,
        thread_id=event.thread_id,
        workspace_id=event.workspace_id,
        bot_id=event.bot_id,
        actor_type=actor and actor.actor_type,
        actor_id=actor and actor.actor_id,
        subject_type=subject and subject.subject_type,
        subject_id=subject and subject.subject_id,
        source_event_type=event.source_event_type,
        summary=text[:_SUMMARY] if text else None,
        data={
            "input": event.input.model_dump(mode="json", exclude={"message_chain"}),
            "subject": event.subject.model_dump(mode="json") if event.subject else None,
            "raw_ref": event.raw_ref.model_dump(mode="json") if event.raw_ref else None,
        },
        event_time=event.event_time,
    )


def _conversation(event: AgentEventEnvelope) -> ConversationKey | None:
    if event.conversation_id is None:
        return None
    return ConversationKey(event.conversation_id, event.thread_id, event.workspace_id)


def user_turn(event: AgentEventEnvelope) -> TranscriptEntry | None:
    """The transcript item an event projects to: a user message, or an ``event`` item (never fake user text)."""
    conversation = _conversation(event)
    if conversation is None:
        return None
    actor = event.actor.model_dump(mode="json") if event.actor else None
    if event.event_type == "message.received":
        return TranscriptEntry(
            item_id="ti_" + event.event_id,
            conversation=conversation,
            role="user",
            item_type="message",
            event_id=event.event_id,
            event_type=event.event_type,
            content=event.input.text,
            contents=[c.model_dump(mode="json") for c in event.input.contents],
            artifacts=[a.model_dump(mode="json") for a in event.input.attachments],
            metadata={"actor": actor} if actor else {},
            created_at=event.event_time,
        )
    return TranscriptEntry(
        item_id="ti_" + event.event_id,
        conversation=conversation,
        role="event",
        item_type="event",
        event_id=event.event_id,
        event_type=event.event_type,
        content=None,
        metadata={
            "actor": actor,
            "subject": event.subject.model_dump(mode="json") if event.subject else None,
        },
        created_at=event.event_time,
    )


def run_start(state: RunState, history: HistoryHandles, *, event: EventEntry | None = None) -> RunStart:
    """The start record of a run (its snapshot is written to the event log with it); *event*: the entry of
    its triggering event, when the start stores that too."""
    snapshot = state.snapshot
    trigger, entry = state.event, event
    digest = snapshot.digest()
    return RunStart(
        run_id=state.run_id,
        runner_id=snapshot.runner_id,
        plugin_id=snapshot.plugin_id,
        binding_id=snapshot.binding_id,
        event_id=trigger.event_id,
        conversation=_conversation(trigger),
        snapshot=snapshot_json(snapshot),
        snapshot_hash=digest,
        deadline_at=snapshot.deadline_at,
        started_at=_now_ms(),
        event=entry,
        user_turn=user_turn(trigger),
        start_events=[
            _host_event(
                state,
                "run.started",
                {
                    "snapshot_hash": digest,
                    "binding_id": snapshot.binding_id,
                    "transcript_seq": history.transcript_seq,
                },
            )
        ],
    )


def _host_event(state: RunState, kind: str, data: JsonObject, *, at: int | None = None) -> EventEntry:
    event = state.event
    return EventEntry(
        event_id=new_event_id(),
        event_type=kind,
        source="host",
        kind="host",
        conversation_id=event.conversation_id,
        thread_id=event.thread_id,
        workspace_id=event.workspace_id,
        run_id=state.run_id,
        runner_id=state.snapshot.runner_id,
        data=data,
        event_time=at,
    )


def backcall_entry(state: RunState, record: AuditRecord) -> EventEntry:
    """The ``host.backcall`` event-log record of one audit record (what the audit query reads): a back-call,
    or a tool the harness CLI used (``source`` ``harness``)."""
    data: JsonObject = {
        "action": record.action,
        "resource": record.resource,
        "caller": record.caller,
        "scope": record.scope,
        "decision": record.decision,
        "latency_ms": round(record.latency_ms, 3),
    }
    if record.risk:
        data["risk"] = list(record.risk)  # dangerous tools' calls are findable by their classes
    if record.detail is not None:
        data["detail"] = record.detail
    if record.error is not None:
        data["error"] = record.error
    if record.source != "backcall":
        data["source"] = record.source
    return _host_event(
        state,
        BACKCALL_EVENT,
        data,
        # when the call was made (the record may be stored later, with the run's end): the audit query's
        # time filter reads it
        at=int(record.at * 1000),
    )


async def persist_finish(stores: RunStores, state: RunState, live: LiveRun | None) -> None:
    """Write the end of a run in one transaction, after its results (and its start first, if the run ended
    before that), with the back-call records not stored while it was live."""
    if not state.start_persisted:
        # The start may have committed although the run was cancelled before it could note that.
        with contextlib.suppress(RunExistsError):
            await stores.runs.start(run_start(state, HistoryHandles()))
    await stores.runs.finish(finish_record(state, live))


def finish_record(state: RunState, live: LiveRun | None) -> RunFinish:
    """The end of a run as :func:`persist_finish` writes it (its start must be stored or queued)."""
    terminal = state.terminal
    failed = terminal is not None and terminal.type == "run.failed"
    code = message = None
    usage: JsonObject = {}
    if terminal is not None and terminal.type == "run.failed":
        code, message = terminal.data.code, terminal.data.message
    elif terminal is not None and terminal.type == "run.completed":
        usage = dict(terminal.data.usage)
    conversation = _conversation(state.event)
    transcript: list[TranscriptEntry] = []
    if conversation is not None:
        for index, turn in enumerate(state.transcript):
            msg = turn.message
            transcript.append(
                TranscriptEntry(
                    item_id=f"ti_{state.run_id}_{index}",
                    conversation=conversation,
                    role="assistant",
                    item_type="message",
                    run_id=state.run_id,
                    content=turn.text,
                    contents=_objects(msg.get("contents")),
                    artifacts=_objects(msg.get("artifacts")),
                    metadata={"runner_id": state.snapshot.runner_id, **_truncation(msg)},
                )
            )
    events = [_host_event(state, e.event_type, e.data) for e in state.host_events]
    if live is not None:
        events += [backcall_entry(state, record) for record in live.audit[live.audit_stored :]]
        for request in live.platform_requests:
            events.append(_host_event(state, "platform.request_action", {**request, "executed": False}))
    events.append(
        _host_event(
            state,
            "run.failed" if failed else "run.completed",
            {"code": code, "message": message, "results": state.host_seq},
        )
    )
    return RunFinish(
        run_id=state.run_id,
        status="failed" if failed else "completed",
        code=code,
        message=message,
        ended_at=_now_ms(),
        transcript=transcript,
        events=events,
        usage=usage,
    )


def _truncation(message: JsonObject) -> JsonObject:
    """``{"truncated": True}`` for the streamed text of an unfinished reply the host cut to one result's size."""
    meta = message.get("metadata")
    return {"truncated": True} if isinstance(meta, dict) and meta.get("truncated") is True else {}


def _objects(value: JsonValue) -> list[JsonObject]:
    """The objects of a message's JSON array (``contents``, ``artifacts``); nothing when it has none."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


async def store_runner_artifact(
    stores: RunStores, state: RunState, ref: ArtifactRef, content: bytes
) -> ArtifactRef:
    """Store inline artifact bytes from a runner; the host measures size and digest and picks the id."""
    event = state.event
    record = await stores.artifacts.put(
        content,
        mime_type=ref.mime_type,
        name=ref.name,
        artifact_type=ref.artifact_type,
        source="runner",
        owner=ArtifactOwner(
            conversation_id=event.conversation_id,
            run_id=state.run_id,
            binding_id=state.snapshot.binding_id,
            workspace_id=event.workspace_id,
        ),
        expires_at=ref.expires_at,
        metadata=dict(ref.metadata),
        summary=ref.summary,
    )
    meta = stores.artifacts.to_metadata(record)
    return ArtifactRef.model_validate(meta.model_dump(include=set(ArtifactRef.model_fields)))


async def store_event_data(stores: RunStores, state: RunState) -> RawEventRef:
    """Store the event's data (too large to inline in the context) as a JSON artifact the run may read, and
    return the ``raw_ref`` the context carries instead."""
    event = state.event
    content = json.dumps(event.data)
    record = await stores.artifacts.put(
        content,
        mime_type="application/json",
        name="event-data.json",
        source="host",
        owner=ArtifactOwner(
            conversation_id=event.conversation_id,
            run_id=state.run_id,
            binding_id=state.snapshot.binding_id,
            workspace_id=event.workspace_id,
        ),
        summary=f"data of event {event.event_id}",
    )
    meta = stores.artifacts.to_metadata(record)
    ref = ArtifactRef.model_validate(meta.model_dump(include=set(ArtifactRef.model_fields)))
    return RawEventRef(
        ref_id=record.artifact_id,
        source=event.source,
        artifact=ref,
        size=len(content),
        mime_type="application/json",
    )
