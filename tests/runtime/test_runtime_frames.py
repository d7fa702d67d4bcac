"""Frames and NDJSON framing of the wire protocol, without processes."""

from __future__ import annotations

import asyncio
import logging

import pytest
from agentrunner import ProtocolError
from agentrunner.errors import AgentAPIError
from agentrunner.wire import (
    FRAME_KINDS,
    CallErrorFrame,
    CallFrame,
    HelloFrame,
    ResultFrame,
    RunEndError,
    RunEndFrame,
    StreamFrameChannel,
    decode_frame,
    encode_frame,
)


def test_a_frame_is_one_line_that_decodes_to_an_equal_frame() -> None:
    """encode_frame gives one newline-terminated line; decode_frame gives the same frame back."""
    frames = [
        HelloFrame(id=1, plugin_id="acme/x"),
        ResultFrame(run_id="r", sequence=3, result={"type": "message.delta", "text": "a\nb"}),
        RunEndFrame(run_id="r", error=RunEndError(code="runner.error", message="boom")),
        CallErrorFrame(id=7, error=AgentAPIError(code="not_found", message="nope")),
        CallFrame(id=2, request={"run_id": "r", "action": "models.stream"}, stream=True, window=4),
    ]
    for frame in frames:
        line = encode_frame(frame)
        assert line.endswith(b"\n")
        assert line.count(b"\n") == 1  # newlines inside strings are escaped
        assert decode_frame(line) == frame


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"this is not json\n", "not valid JSON"),
        (b"[1, 2]\n", "must be a JSON object"),
        (b'{"id": 1}\n', "no string 'kind'"),
        (b'{"kind": "result", "run_id": "r"}\n', "invalid 'result' frame"),
        (b'{"kind": "result", "run_id": "r", "sequence": 0, "result": {}}\n', "invalid 'result' frame"),
    ],
)
def test_anything_but_a_valid_frame_is_a_protocol_error(line: bytes, reason: str) -> None:
    """Malformed JSON, non-objects, a missing kind and invalid fields raise ProtocolError with the reason."""
    with pytest.raises(ProtocolError, match=reason):
        decode_frame(line)


def test_a_frame_of_an_unknown_kind_is_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    """A newer peer's new kind decodes to None (forward compatibility) and is logged."""
    assert "telemetry" not in FRAME_KINDS
    with caplog.at_level(logging.WARNING, logger="agentrunner.wire"):
        assert decode_frame(b'{"kind": "telemetry", "x": 1}\n') is None
    assert "unknown kind 'telemetry'" in caplog.text


def test_unknown_fields_of_a_known_frame_are_ignored() -> None:
    """A newer peer may add optional fields to a frame; they are dropped, not rejected."""
    frame = decode_frame(b'{"kind": "ping", "id": 5, "added_later": true}\n')
    assert frame is not None
    assert frame.kind == "ping"


class _NullWriter:
    """Just enough of a StreamWriter for a channel that only reads."""

    def is_closing(self) -> bool:
        return True


async def _channel_over(data: bytes, *, limit: int) -> StreamFrameChannel:
    reader = asyncio.StreamReader(limit=limit)
    reader.feed_data(data)
    reader.feed_eof()
    return StreamFrameChannel(reader, _NullWriter(), max_frame_bytes=limit)  # pyright: ignore[reportArgumentType]


async def test_the_channel_reads_lines_skips_blank_ones_and_reports_eof() -> None:
    """receive() returns each frame line, ignores empty lines, and None at the end of the stream."""
    channel = await _channel_over(b'{"kind":"ping","id":1}\n\n{"kind":"pong","id":1}\n', limit=1024)
    assert await channel.receive() == b'{"kind":"ping","id":1}\n'
    assert await channel.receive() == b'{"kind":"pong","id":1}\n'
    assert await channel.receive() is None


async def test_a_truncated_last_line_counts_as_the_end_of_the_stream() -> None:
    """A peer that died mid-frame leaves a partial line: that is EOF (a crash), not a frame."""
    channel = await _channel_over(b'{"kind":"ping","id":1}\n{"kind":"po', limit=1024)
    assert await channel.receive() is not None
    assert await channel.receive() is None


async def test_a_line_longer_than_the_limit_is_a_protocol_error() -> None:
    """The reader never buffers past the limit: an oversized line raises ProtocolError."""
    channel = await _channel_over(b"x" * 5000 + b"\n", limit=1024)
    with pytest.raises(ProtocolError, match="larger than 1024 bytes"):
        await channel.receive()
