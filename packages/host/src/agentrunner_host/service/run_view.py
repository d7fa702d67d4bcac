"""``RunView``: the one shape a run is reported in, by ``GET /v1/runs/{run_id}`` and ``agentrunner runs show``.

The HTTP API, the CLI reading the database itself and the CLI asking a server (``--url``) all build or parse
this model, so the three cannot drift apart: a field added here appears in all of them, and a server answer
with a field this version does not know is refused by the CLI rather than silently dropped.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, JsonValue

from agentrunner_host.stores import RunRecord, RunStatus, RunStore

__all__ = ["RunView", "stored_run_view"]


class RunView(BaseModel):
    """A run."""

    model_config: ClassVar[ConfigDict] = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True
    )

    run_id: str
    """Run id."""
    status: RunStatus
    """State."""
    code: str | None = None
    """Failure code (``cancelled``, ``deadline_exceeded``, ``host_restarted``...)."""
    message: str | None = None
    """Failure message."""
    runner_id: str
    """Runner."""
    binding_id: str
    """Binding that chose the runner."""
    event_id: str
    """Triggering event."""
    conversation_id: str | None = None
    """Conversation."""
    thread_id: str | None = None
    """Thread."""
    started_at: int | None = None
    """Unix epoch milliseconds."""
    ended_at: int | None = None
    """Unix epoch milliseconds."""
    results: int
    """Results so far (the terminal one included once the run ended)."""
    live: bool
    """The run is executing in the process that answered (always false when the CLI reads the database)."""
    usage: dict[str, JsonValue] = {}
    """Usage totals reported by the runner."""

    @classmethod
    def of(cls, record: RunRecord, *, results: int, live: bool) -> RunView:
        """The view of a stored run with *results* results so far."""
        conversation = record.conversation
        return cls(
            run_id=record.run_id,
            status=record.status,
            code=record.code,
            message=record.message,
            runner_id=record.runner_id,
            binding_id=record.binding_id,
            event_id=record.event_id,
            conversation_id=None if conversation is None else conversation.conversation_id,
            thread_id=None if conversation is None else conversation.thread_id,
            started_at=record.started_at,
            ended_at=record.ended_at,
            results=results,
            live=live,
            usage=dict(record.usage or {}),
        )


async def stored_run_view(runs: RunStore, run_id: str) -> RunView | None:
    """The view of a run as the database holds it (``live`` false), or ``None`` when there is no such run."""
    record = await runs.get(run_id)
    if record is None:
        return None
    return RunView.of(record, results=await runs.result_count(run_id), live=False)
