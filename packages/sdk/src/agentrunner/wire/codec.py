"""NDJSON framing: one compact JSON object per ``\\n``-terminated line, encoded with orjson."""

from __future__ import annotations

import logging

from pydantic import BaseModel, ValidationError

from agentrunner import codec
from agentrunner.errors import ProtocolError

from .frames import FRAME_KINDS, Frame, FrameAdapter

__all__ = ["decode_frame", "encode_frame", "frame_from_object", "parse_line"]

_log = logging.getLogger("agentrunner.wire")


def encode_frame(frame: BaseModel) -> bytes:
    """The frame as one NDJSON line (newline included). orjson escapes control characters inside strings, so
    the line never contains a raw ``\\n`` before its end."""
    # Frame fields are JSON values already (payloads are plain dicts), so orjson encodes the field dict
    # directly; a pydantic dump would copy every payload first. Only error frames nest a model: orjson refuses
    # it, and that rare path dumps the nested model. A payload that is not JSON raises TypeError either way.
    try:
        return codec.dumps(frame.__dict__) + b"\n"
    except TypeError:
        fields = {
            k: v.model_dump(mode="json") if isinstance(v, BaseModel) else v for k, v in frame.__dict__.items()
        }
        return codec.dumps(fields) + b"\n"


def decode_frame(line: bytes | bytearray | memoryview) -> Frame | None:
    """Decode one line into a frame; ``None`` for a frame of a kind this wire version does not know.

    Raises :class:`~agentrunner.errors.ProtocolError` for anything that is not a valid frame: malformed JSON,
    a non-object, a missing ``kind``, or a known kind with invalid fields.
    """
    return frame_from_object(parse_line(line))


def parse_line(line: bytes | bytearray | memoryview) -> object:
    """The JSON value of one line; raises :class:`~agentrunner.errors.ProtocolError` when it is not JSON."""
    try:
        return codec.loads(line)
    except ValueError as exc:
        raise ProtocolError(f"frame is not valid JSON: {exc}") from None


def frame_from_object(raw: object) -> Frame | None:
    """Validate a decoded JSON value as a frame (see :func:`decode_frame`)."""
    if not isinstance(raw, dict):
        raise ProtocolError(f"frame must be a JSON object, got {type(raw).__name__}")
    kind = raw.get("kind")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(kind, str):
        raise ProtocolError("frame has no string 'kind'")
    if kind not in FRAME_KINDS:
        _log.warning("ignoring a frame of unknown kind %r (a newer peer?)", kind)
        return None
    try:
        return FrameAdapter.validate_python(raw)
    except ValidationError as exc:
        raise ProtocolError(f"invalid {kind!r} frame: {exc.errors(include_url=False)}") from None
