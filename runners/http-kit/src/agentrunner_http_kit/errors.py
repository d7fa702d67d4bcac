"""The failure codes every HTTP-API runner shares, and how HTTP statuses and transport errors map onto them.

A runner raises :class:`PlatformError` with one of the :data:`ErrorKind` values; :func:`~.guard.guarded` turns it
into ``run.failed`` with the code ``<prefix>.<kind>`` (``dify.auth_error``). Only timeouts, 429 and 5xx are
retryable.
"""

from __future__ import annotations

from typing import Final, Literal

import httpx
from pydantic import JsonValue

from .redaction import SecretRedactor

__all__ = [
    "BODY_PREVIEW_CHARS",
    "ErrorKind",
    "PlatformError",
    "status_error",
    "transport_error",
]

ErrorKind = Literal[
    "config_invalid",
    "auth_error",
    "http_error",
    "timeout",
    "response_invalid",
    "api_error",
    "empty_response",
    "input_error",
    "unexpected_error",
]
"""The common failure kinds; the run's code is ``<runner prefix>.<kind>``."""

BODY_PREVIEW_CHARS: Final = 200
"""At most this much of an error body is repeated in a failure (after redaction)."""


class PlatformError(Exception):
    """A run of an HTTP-API runner failed in a way it can name. ``message`` and ``details`` are redacted
    again before they leave the run, so a secret that slipped in is still masked."""

    def __init__(
        self,
        kind: ErrorKind | str,
        message: str,
        *,
        retryable: bool = False,
        details: dict[str, JsonValue] | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind | str = kind
        """The failure kind (one of :data:`ErrorKind`, or a platform-specific one such as Coze's
        ``requires_action``)."""
        self.message = message
        """Human-readable text (no credentials)."""
        self.retryable = retryable
        """Whether retrying the same request may succeed."""
        self.details: dict[str, JsonValue] = details or {}
        """Structured facts (status, platform code, request id)."""


def _preview(body: str, redactor: SecretRedactor | None) -> str:
    text = " ".join(body.split())
    if redactor is not None:
        text = redactor.redact(text)
    return text if len(text) <= BODY_PREVIEW_CHARS else text[: BODY_PREVIEW_CHARS - 1] + "…"


def status_error(
    status: int,
    body: str,
    *,
    platform: str,
    redactor: SecretRedactor | None = None,
    hint: str | None = None,
    details: dict[str, JsonValue] | None = None,
) -> PlatformError:
    """The failure for a non-2xx answer: 401/403 → ``auth_error``, anything else → ``http_error`` (retryable
    for 429 and 5xx). The message names the status and quotes at most :data:`BODY_PREVIEW_CHARS` of the body,
    never a header."""
    preview = _preview(body, redactor)
    facts: dict[str, JsonValue] = {"status": status, "body": preview, **(details or {})}
    tail = f": {preview}" if preview else ""
    extra = f" ({hint})" if hint else ""
    if status in (401, 403):
        return PlatformError(
            "auth_error", f"{platform} refused the credentials (HTTP {status}){extra}{tail}", details=facts
        )
    retryable = status == 429 or status >= 500
    return PlatformError(
        "http_error", f"{platform} answered HTTP {status}{extra}{tail}", retryable=retryable, details=facts
    )


def transport_error(
    exc: httpx.HTTPError, *, platform: str, redactor: SecretRedactor | None = None
) -> PlatformError:
    """The failure for an httpx error that is not a status: timeouts → ``timeout`` (retryable), a broken
    stream → ``response_invalid``, anything else (refused connection, DNS) → ``http_error``."""
    name = type(exc).__name__
    text = redactor.redact(str(exc)) if redactor is not None else str(exc)
    if isinstance(exc, httpx.TimeoutException):
        return PlatformError(
            "timeout", f"{platform} did not answer in time ({name})", retryable=True, details={"error": name}
        )
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.DecodingError)):
        return PlatformError(
            "response_invalid", f"{platform} sent a broken response ({name}: {text})", details={"error": name}
        )
    return PlatformError(
        "http_error", f"could not reach {platform} ({name}: {text})", details={"error": name}
    )
