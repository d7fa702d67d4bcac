"""Removing ``<think>...</think>`` reasoning blocks from model output, also when the tags span streamed chunks."""

from __future__ import annotations

from typing import Final

__all__ = ["ThinkFilter", "strip_think"]

_OPEN: Final = "<think>"
_CLOSE: Final = "</think>"


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of *text* that is a proper prefix of *tag* (a tag cut by a chunk border)."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


class ThinkFilter:
    """Feed it chunks, get back the visible text; hold back only what could still be the start of a tag.

    An unclosed block is dropped at :meth:`flush` (the model never finished thinking aloud); whitespace right
    after a closing tag is dropped so answers do not start with blank lines.
    """

    __slots__ = ("_in_think", "_pending", "_trim")

    def __init__(self) -> None:
        self._pending = ""
        self._in_think = False
        self._trim = False

    def feed(self, chunk: str) -> str:
        """The visible text *chunk* completes."""
        self._pending += chunk
        visible: list[str] = []
        while self._pending:
            if self._in_think:
                end = self._pending.find(_CLOSE)
                if end < 0:
                    keep = _partial_suffix(self._pending, _CLOSE)
                    self._pending = self._pending[len(self._pending) - keep :] if keep else ""
                    break
                self._pending = self._pending[end + len(_CLOSE) :]
                self._in_think = False
                self._trim = True
                continue
            start = self._pending.find(_OPEN)
            if start >= 0:
                visible.append(self._visible(self._pending[:start]))
                self._pending = self._pending[start + len(_OPEN) :]
                self._in_think = True
                continue
            keep = _partial_suffix(self._pending, _OPEN)
            cut = len(self._pending) - keep
            visible.append(self._visible(self._pending[:cut]))
            self._pending = self._pending[cut:]
            break
        return "".join(visible)

    def flush(self) -> str:
        """The rest of the visible text at the end of the stream."""
        rest = "" if self._in_think else self._pending
        self._pending = ""
        self._in_think = False
        return self._visible(rest)

    def _visible(self, text: str) -> str:
        if self._trim and text:
            text = text.lstrip()
            if text:
                self._trim = False
        return text


def strip_think(text: str) -> str:
    """*text* without its ``<think>`` blocks."""
    think = ThinkFilter()
    return think.feed(text) + think.flush()
