"""The frames of the runtime wire protocol (``docs/wire.md``), one pydantic model per ``kind``.

A connection carries frames in both directions between a host and one plugin runtime. Frames that belong to a
run carry its ``run_id``; request/response pairs carry an integer ``id`` chosen by the side that sends the
request, so any number of runs, back-calls and streams interleave on one connection. Ids are scoped to their
direction: the host's ``list_runners`` #1 and the runtime's ``call`` #1 are unrelated.

Payloads that hold a protocol object a peer may get wrong (the run request, a back-call request, a result) are
kept as JSON objects here and validated by the code that owns them, so one bad run or call fails on its own and
never breaks the connection.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal, TypeAlias

from pydantic import Field, TypeAdapter

from agentrunner._base import ProtocolModel
from agentrunner.codec import WireObject
from agentrunner.errors import AgentAPIError
from agentrunner.version import PROTOCOL_VERSION

__all__ = [
    "DEFAULT_RESULT_WINDOW",
    "DEFAULT_STREAM_WINDOW",
    "FRAME_KINDS",
    "MAX_FRAME_BYTES",
    "WIRE_VERSION",
    "CallCancelFrame",
    "CallEndFrame",
    "CallErrorFrame",
    "CallFrame",
    "CallResultFrame",
    "CancelFrame",
    "ChunkFrame",
    "CreditFrame",
    "Frame",
    "FrameAdapter",
    "HelloFrame",
    "ListRunnersFrame",
    "PingFrame",
    "PongFrame",
    "ResultFrame",
    "RunEndError",
    "RunEndFrame",
    "RunFrame",
    "RunnersFrame",
    "StreamCreditFrame",
    "WelcomeFrame",
]

WIRE_VERSION: Final = 1
"""Version of the framing and frame vocabulary (independent of the Protocol v1 schemas it carries)."""

MAX_FRAME_BYTES: Final = 8 * 1024 * 1024
"""Default largest frame, newline excluded. A larger frame is a protocol error, never an unbounded read."""

DEFAULT_RESULT_WINDOW: Final = 64
"""Results a runtime may send for one run before the host grants more credit."""

DEFAULT_STREAM_WINDOW: Final = 16
"""Chunks a host may send for one streaming back-call before the runtime grants more credit."""


# -- handshake -------------------------------------------------------------------------------------------------


class HelloFrame(ProtocolModel):
    """Host → runtime, first frame of a connection: who the host is and what it speaks."""

    kind: Literal["hello"] = "hello"
    """Discriminator."""
    id: int
    """Correlation id; the runtime answers with a ``welcome`` of the same id."""
    wire_version: int = WIRE_VERSION
    """Wire version the host speaks."""
    protocol_version: str = PROTOCOL_VERSION
    """Protocol major version of the run contexts the host sends."""
    plugin_id: str | None = None
    """The identity ``author/plugin`` the host assigned to this connection."""
    max_frame_bytes: int = MAX_FRAME_BYTES
    """Largest frame the host accepts; the runtime never sends a larger one."""


class WelcomeFrame(ProtocolModel):
    """Runtime → host, answer to ``hello``."""

    kind: Literal["welcome"] = "welcome"
    """Discriminator."""
    id: int
    """The ``hello``'s id."""
    wire_version: int = WIRE_VERSION
    """Wire version the runtime speaks; the host drops a runtime whose version it does not speak."""
    runtime: str = "agentrunner-python"
    """Runtime implementation name."""
    sdk_version: str | None = None
    """Version of the runtime's SDK, for diagnostics."""
    pid: int | None = None
    """Process id of the runtime, for diagnostics."""
    runners: list[str] = Field(default_factory=list[str], json_schema_extra={"default": []})
    """Ids of the runners the runtime hosts."""


class PingFrame(ProtocolModel):
    """Either direction: liveness probe; the peer answers ``pong`` with the same id at once."""

    kind: Literal["ping"] = "ping"
    """Discriminator."""
    id: int
    """Correlation id."""


class PongFrame(ProtocolModel):
    """Either direction: answer to ``ping``."""

    kind: Literal["pong"] = "pong"
    """Discriminator."""
    id: int
    """The ping's id."""


# -- discovery -------------------------------------------------------------------------------------------------


class ListRunnersFrame(ProtocolModel):
    """Host → runtime: ``LIST_AGENT_RUNNERS`` (PROTOCOL_V1 §4.1)."""

    kind: Literal["list_runners"] = "list_runners"
    """Discriminator."""
    id: int
    """Correlation id."""


class RunnersFrame(ProtocolModel):
    """Runtime → host: answer to ``list_runners``."""

    kind: Literal["runners"] = "runners"
    """Discriminator."""
    id: int
    """The request's id."""
    runners: list[WireObject] = Field(default_factory=list[WireObject], json_schema_extra={"default": []})
    """One ``AgentRunnerManifest`` object per runner (the host validates each on its own)."""


# -- runs ------------------------------------------------------------------------------------------------------


class RunFrame(ProtocolModel):
    """Host → runtime: ``RUN_AGENT`` (PROTOCOL_V1 §5.1). Starts a run."""

    kind: Literal["run"] = "run"
    """Discriminator."""
    run_id: str = Field(min_length=1)
    """The run (equal to ``request.context.run_id``); every frame of the run carries it."""
    request: WireObject
    """An ``AgentRunRequest`` object."""
    window: int = Field(default=DEFAULT_RESULT_WINDOW, ge=1)
    """Initial result credit: results the runtime may send before the host grants more with ``credit``."""


class ResultFrame(ProtocolModel):
    """Runtime → host: one result of a run. Costs the runtime one credit of that run."""

    kind: Literal["result"] = "result"
    """Discriminator."""
    run_id: str
    """The run."""
    sequence: int = Field(ge=1)
    """The result's per-run sequence (1-based, strictly increasing); equal to ``result.sequence``."""
    result: WireObject
    """An ``AgentRunResult`` object."""


class RunEndError(ProtocolModel):
    """Why a run ended without finishing its stream."""

    code: str
    """``runner.error`` (the runner raised), ``cancelled``, ``runtime.runner_not_found``,
    ``runtime.invalid_request``, ``runtime.duplicate_run``, ..."""
    message: str
    """Human-readable message."""
    retryable: bool = False
    """The run could be retried by an upper layer."""


class RunEndFrame(ProtocolModel):
    """Runtime → host: the run's stream ended; no frame of this run follows. Costs no credit."""

    kind: Literal["run_end"] = "run_end"
    """Discriminator."""
    run_id: str
    """The run."""
    error: RunEndError | None = None
    """``null`` when the runner's stream ended normally."""


class CancelFrame(ProtocolModel):
    """Host → runtime: cancel a run. The runtime cancels it and answers with ``run_end`` code ``cancelled``;
    a cancel for a run the runtime does not know is ignored."""

    kind: Literal["cancel"] = "cancel"
    """Discriminator."""
    run_id: str
    """The run."""


class CreditFrame(ProtocolModel):
    """Host → runtime: the host consumed results; the runtime may send *n* more of this run."""

    kind: Literal["credit"] = "credit"
    """Discriminator."""
    run_id: str
    """The run."""
    n: int = Field(ge=1)
    """Additional results allowed."""


# -- back-calls ------------------------------------------------------------------------------------------------


class CallFrame(ProtocolModel):
    """Runtime → host: a back-call (PROTOCOL_V1 §8) on behalf of a live run of this connection."""

    kind: Literal["call"] = "call"
    """Discriminator."""
    id: int
    """Correlation id chosen by the runtime."""
    request: WireObject
    """A ``BackCallRequest`` object without ``caller``: the host stamps the connection's identity."""
    stream: bool = False
    """A streaming action (``models.stream``, ``artifacts.open_stream``): answered by ``chunk`` frames and
    ``call_end``."""
    window: int = Field(default=DEFAULT_STREAM_WINDOW, ge=1)
    """Initial chunk credit of a streaming call."""


class CallResultFrame(ProtocolModel):
    """Host → runtime: the result of a unary back-call."""

    kind: Literal["call_result"] = "call_result"
    """Discriminator."""
    id: int
    """The call's id."""
    result: WireObject
    """The action's result object."""


class CallErrorFrame(ProtocolModel):
    """Host → runtime: a back-call (unary or streaming) failed; ends the call."""

    kind: Literal["call_error"] = "call_error"
    """Discriminator."""
    id: int
    """The call's id."""
    error: AgentAPIError
    """The §9 error."""


class ChunkFrame(ProtocolModel):
    """Host → runtime: one chunk of a streaming back-call. Costs the host one credit of that call."""

    kind: Literal["chunk"] = "chunk"
    """Discriminator."""
    id: int
    """The call's id."""
    chunk: WireObject
    """One result object of the action (``ModelStreamChunk``, ``ArtifactChunk``)."""


class CallEndFrame(ProtocolModel):
    """Host → runtime: a streaming back-call finished normally."""

    kind: Literal["call_end"] = "call_end"
    """Discriminator."""
    id: int
    """The call's id."""


class StreamCreditFrame(ProtocolModel):
    """Runtime → host: the runner consumed chunks; the host may send *n* more of this streaming call."""

    kind: Literal["stream_credit"] = "stream_credit"
    """Discriminator."""
    id: int
    """The call's id."""
    n: int = Field(ge=1)
    """Additional chunks allowed."""


class CallCancelFrame(ProtocolModel):
    """Runtime → host: the runner abandoned a call (deadline, closed stream); the host stops serving it and
    sends nothing more for this id."""

    kind: Literal["call_cancel"] = "call_cancel"
    """Discriminator."""
    id: int
    """The call's id."""


Frame: TypeAlias = Annotated[
    HelloFrame
    | WelcomeFrame
    | PingFrame
    | PongFrame
    | ListRunnersFrame
    | RunnersFrame
    | RunFrame
    | ResultFrame
    | RunEndFrame
    | CancelFrame
    | CreditFrame
    | CallFrame
    | CallResultFrame
    | CallErrorFrame
    | ChunkFrame
    | CallEndFrame
    | StreamCreditFrame
    | CallCancelFrame,
    Field(discriminator="kind"),
]
"""Any frame, discriminated on ``kind``."""

FrameAdapter: TypeAdapter[Frame] = TypeAdapter(Frame)
"""Validates a decoded JSON object as a :data:`Frame`."""

FRAME_KINDS: Final[frozenset[str]] = frozenset(
    {
        "hello",
        "welcome",
        "ping",
        "pong",
        "list_runners",
        "runners",
        "run",
        "result",
        "run_end",
        "cancel",
        "credit",
        "call",
        "call_result",
        "call_error",
        "chunk",
        "call_end",
        "stream_credit",
        "call_cancel",
    }
)
"""Every ``kind`` of wire version 1. A frame of another kind (a newer peer) is ignored with a warning."""
