"""Streamed text is delivered in increments: ``message.delta`` chunks are never the text so far."""

from __future__ import annotations

__all__ = ["CumulativeText", "ReplyText"]


class CumulativeText:
    """Turns a platform that resends the whole text so far in every frame into increments.

    >>> text = CumulativeText()
    >>> text.advance("Hel"), text.advance("Hello"), text.text
    ('Hel', 'lo', 'Hello')
    """

    __slots__ = ("rewritten", "text")

    def __init__(self) -> None:
        self.text = ""
        """The latest full text."""
        self.rewritten = False
        """The platform changed text it had already sent (nothing can be taken back from a stream; the
        final message carries the new text)."""

    def advance(self, full: str) -> str:
        """The part of *full* not seen yet ("" when *full* rewrote earlier text)."""
        if full.startswith(self.text):
            piece = full[len(self.text) :]
        else:
            self.rewritten = True
            piece = ""
        self.text = full
        return piece


class ReplyText:
    """Collects incremental pieces into the final reply (one join at the end, not a string per piece)."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[str] = []

    def append(self, piece: str) -> str:
        """Add *piece*; returns it (so ``out.delta(reply.append(p))`` reads naturally)."""
        if piece:
            self._parts.append(piece)
        return piece

    def replace(self, text: str) -> None:
        """Replace everything so far (a platform's "replace the answer" frame)."""
        self._parts = [text] if text else []

    @property
    def text(self) -> str:
        """The reply so far."""
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def __bool__(self) -> bool:
        return any(self._parts)
