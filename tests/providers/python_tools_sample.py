"""Python tools registered through a (monkeypatched) ``agentrunner.tools`` entry point in the tests."""

from __future__ import annotations

from pydantic import BaseModel, Field


class WordCountArgs(BaseModel):
    """Arguments of :func:`word_count`."""

    text: str = Field(description="Text to count")
    """Text to count."""


def word_count(args: WordCountArgs) -> dict[str, int]:
    """Count the words of a text."""
    return {"words": len(args.text.split())}


class RepeatArgs(BaseModel):
    """Arguments of :func:`repeat`."""

    word: str
    """Word to repeat."""
    times: int = Field(ge=0)
    """How often."""


async def repeat(args: RepeatArgs) -> str:
    """Repeat a word (async)."""
    return " ".join([args.word] * args.times)


def explode(args: RepeatArgs) -> str:
    """Always raises."""
    raise RuntimeError(f"cannot repeat {args.word}")


def not_a_tool(x: int) -> int:
    """Takes no pydantic model: refused at discovery."""
    return x
