"""Token estimates without a tokenizer: good enough to budget a context window, never used for billing.

Latin text averages about four characters per token; CJK text about one token per character. Images are
counted at a flat rate close to what vision models charge for one high-detail tile set.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

from agentrunner import ChatMessage, ImageContent, TextContent

__all__ = ["IMAGE_TOKENS", "MESSAGE_OVERHEAD", "estimate_message", "estimate_messages", "estimate_text"]

IMAGE_TOKENS: Final = 800
"""Flat estimate of one image."""
MESSAGE_OVERHEAD: Final = 4
"""Role markers and separators every chat message costs."""


def _is_wide(char: str) -> bool:
    code = ord(char)
    return (
        0x3040 <= code <= 0x30FF  # kana
        or 0x3400 <= code <= 0x4DBF  # CJK extension A
        or 0x4E00 <= code <= 0x9FFF  # CJK unified ideographs
        or 0xAC00 <= code <= 0xD7AF  # hangul
        or 0xF900 <= code <= 0xFAFF  # CJK compatibility ideographs
        or 0xFF00 <= code <= 0xFFEF  # full-width forms
    )


def estimate_text(text: str | None) -> int:
    """Estimated tokens of *text*."""
    if not text:
        return 0
    wide = sum(1 for c in text if _is_wide(c))
    return wide + math.ceil((len(text) - wide) / 4)


def estimate_message(message: ChatMessage) -> int:
    """Estimated tokens of one chat message, including tool calls and the role overhead."""
    total = MESSAGE_OVERHEAD
    content = message.content
    if isinstance(content, str):
        total += estimate_text(content)
    elif content is not None:
        for part in content:
            if isinstance(part, TextContent):
                total += estimate_text(part.text)
            elif isinstance(part, ImageContent):
                total += IMAGE_TOKENS
            else:
                total += MESSAGE_OVERHEAD
    for call in message.tool_calls:
        total += estimate_text(call.name) + estimate_text(str(call.arguments))
    return total


def estimate_messages(messages: Iterable[ChatMessage]) -> int:
    """Estimated tokens of a list of chat messages."""
    return sum(estimate_message(m) for m in messages)
