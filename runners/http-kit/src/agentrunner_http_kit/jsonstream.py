"""Concatenated JSON objects arriving in arbitrary chunks (n8n's streaming webhooks, Langflow's stream).

The stdlib decoder's ``raw_decode`` finds where each value ends, so an object split across TCP writes waits for
its rest and several objects in one chunk come out one by one; only bytes are buffered, never re-parsed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

__all__ = ["JsonObjectStream"]

_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"


class JsonObjectStream:
    """Feed it text chunks; it yields each complete JSON value (whitespace and blank lines between values
    are skipped). :meth:`rest` is what is left when the stream ends (an incomplete value)."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = ""

    def feed(self, chunk: str) -> Iterator[Any]:
        """The values completed by *chunk*. Raises :class:`ValueError` on text that can never become JSON."""
        self._buffer += chunk
        position = 0
        buffer = self._buffer
        length = len(buffer)
        try:
            while True:
                while position < length and buffer[position] in _SPACE:
                    position += 1
                if position >= length:
                    break
                try:
                    value, end = _DECODER.raw_decode(buffer, position)
                except json.JSONDecodeError as exc:
                    if _incomplete(buffer, exc):
                        break  # the value continues in a later chunk
                    raise ValueError(f"not JSON at offset {exc.pos}: {exc.msg}") from None
                position = end
                yield value
        finally:
            self._buffer = buffer[position:]

    def rest(self) -> str:
        """Unconsumed text (non-empty only when the stream ended inside a value)."""
        return self._buffer.strip()


def _incomplete(buffer: str, exc: json.JSONDecodeError) -> bool:
    """Whether the decoder stopped because the text ended, not because it is wrong: at the very end, inside
    an unterminated string, or inside a literal cut short (``tr`` of ``true``)."""
    if exc.pos >= len(buffer) or exc.msg.startswith("Unterminated string"):
        return True
    tail = buffer[exc.pos :]
    return any(word.startswith(tail) for word in ("true", "false", "null"))
