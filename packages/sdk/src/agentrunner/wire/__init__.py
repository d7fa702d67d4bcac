"""The runtime wire protocol: frames, NDJSON framing and the plugin side (``docs/wire.md``).

A host runs each plugin in its own process (or reaches it over a WebSocket) and talks to it with the frames of
:mod:`agentrunner.wire.frames`. :class:`PluginRuntime` is the plugin side; ``agentrunner-plugin`` (the
``agentrunner.wire.plugin`` module) is the program a plugin process runs.
"""

from .channel import FrameChannel, StreamFrameChannel
from .codec import decode_frame, encode_frame, frame_from_object, parse_line
from .frames import (
    DEFAULT_RESULT_WINDOW,
    DEFAULT_STREAM_WINDOW,
    FRAME_KINDS,
    MAX_FRAME_BYTES,
    WIRE_VERSION,
    CallCancelFrame,
    CallEndFrame,
    CallErrorFrame,
    CallFrame,
    CallResultFrame,
    CancelFrame,
    ChunkFrame,
    CreditFrame,
    Frame,
    FrameAdapter,
    HelloFrame,
    ListRunnersFrame,
    PingFrame,
    PongFrame,
    ResultFrame,
    RunEndError,
    RunEndFrame,
    RunFrame,
    RunnersFrame,
    StreamCreditFrame,
    WelcomeFrame,
)
from .loader import ENTRY_POINT_GROUP, load_runner_class
from .runtime import PluginRuntime, WireAPITransport
from .serve import load_runners, serve_stdio

__all__ = (
    # versions and limits
    "WIRE_VERSION",
    "MAX_FRAME_BYTES",
    "DEFAULT_RESULT_WINDOW",
    "DEFAULT_STREAM_WINDOW",
    "FRAME_KINDS",
    # frames
    "Frame",
    "FrameAdapter",
    "HelloFrame",
    "WelcomeFrame",
    "PingFrame",
    "PongFrame",
    "ListRunnersFrame",
    "RunnersFrame",
    "RunFrame",
    "ResultFrame",
    "RunEndFrame",
    "RunEndError",
    "CancelFrame",
    "CreditFrame",
    "CallFrame",
    "CallResultFrame",
    "CallErrorFrame",
    "ChunkFrame",
    "CallEndFrame",
    "StreamCreditFrame",
    "CallCancelFrame",
    # framing
    "encode_frame",
    "decode_frame",
    "parse_line",
    "frame_from_object",
    "FrameChannel",
    "StreamFrameChannel",
    # plugin side
    "PluginRuntime",
    "WireAPITransport",
    "ENTRY_POINT_GROUP",
    "load_runner_class",
    "load_runners",
    "serve_stdio",
)
