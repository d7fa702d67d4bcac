"""The typed failures of a harness run (runner-requirements §b.7); each becomes one ``run.failed``."""

from __future__ import annotations

from typing import Final, Literal, get_args

__all__ = ["FAILURE_KINDS", "FailureKind", "HarnessFailure"]

FailureKind = Literal[
    "command_not_found",
    "timeout",
    "cli_error",
    "empty_response",
    "working_directory_not_found",
    "path_denied",
    "context_injection_error",
    "config_invalid",
    "turn_failed",
    "unexpected_error",
]
"""The code suffixes; the runner puts its prefix (``claude_code`` / ``codex``) in front."""

FAILURE_KINDS: Final[frozenset[str]] = frozenset(get_args(FailureKind))


class HarnessFailure(Exception):
    """A run that ends ``run.failed`` with ``<prefix>.<kind>``."""

    def __init__(
        self,
        kind: FailureKind,
        message: str,
        *,
        retryable: bool = False,
        details: dict[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: FailureKind = kind
        self.message = message
        self.retryable = retryable
        self.details: dict[str, object] = details or {}

    def code(self, prefix: str) -> str:
        """The ``run.failed`` code for a runner whose codes start with *prefix*."""
        return f"{prefix}.{self.kind}"
