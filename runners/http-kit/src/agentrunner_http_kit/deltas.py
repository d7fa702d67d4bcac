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


class ThinkFilter:
    """Removes ``<think>…</think>`` blocks from streamed text, even when a tag is split across pieces.

    >>> f = ThinkFilter()
    >>> f.feed("a<thi") + f.feed("nk>hidden</th") + f.feed("ink>b") + f.flush()
    'ab'
    """

    __slots__ = ("_inside", "_pending")

    _OPEN = "<think>"
    _CLOSE = "</think>"

    def __init__(self) -> None:
        self._inside = False
        self._pending = ""

    def feed(self, piece: str) -> str:
        """The visible part of *piece* (a possible tag start at its end is held back)."""
        text = self._pending + piece
        self._pending = ""
        out: list[str] = []
        while text:
            tag = self._CLOSE if self._inside else self._OPEN
            index = text.find(tag)
            if index >= 0:
                if not self._inside:
                    out.append(text[:index])
                text = text[index + len(tag) :]
                self._inside = not self._inside
                continue
            keep = _partial_suffix(text, tag)
            if not self._inside:
                out.append(text[: len(text) - keep])
            self._pending = text[len(text) - keep :] if keep else ""
            break
        return "".join(out)

    def flush(self) -> str:
        """What was held back when the stream ends (an unfinished tag start is plain text)."""
        rest, self._pending = self._pending, ""
        return "" if self._inside else rest


def _partial_suffix(text: str, tag: str) -> int:
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0
