"""The one exception the runner's helpers raise to end a run with a chosen ``run.failed`` code."""

from __future__ import annotations

from pydantic import JsonValue

__all__ = ["RunFailure"]


class RunFailure(Exception):
    """Ends the run as ``run.failed`` with :attr:`code`; raised by helpers, turned into a result by the runner."""

    code: str
    """The ``run.failed`` code, e.g. ``config.missing`` or ``model.error``."""
    message: str
    """Human-readable reason."""
    retryable: bool
    """Whether retrying the whole run could help."""
    details: dict[str, JsonValue]
    """Extra diagnostic data (never secrets)."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool = False,
        details: dict[str, JsonValue] | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = retryable
        self.details = details or {}
