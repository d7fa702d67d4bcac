"""The run loop's safety net: whatever goes wrong becomes one redacted ``run.failed`` with a common code."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator

import httpx
from agentrunner import AgentRunResult, ResultEmitter

from .errors import PlatformError, transport_error
from .redaction import SecretRedactor

__all__ = ["guarded"]

log = logging.getLogger("agentrunner_http_kit")


async def guarded(
    body: AsyncGenerator[AgentRunResult],
    out: ResultEmitter,
    *,
    prefix: str,
    platform: str,
    redactor: SecretRedactor,
) -> AsyncIterator[AgentRunResult]:
    """Pass *body*'s results through; a :class:`PlatformError`, a timeout, an httpx error or any other
    exception ends the run with ``run.failed`` ``<prefix>.<kind>``, message and details redacted.

    Cancellation is not caught: it closes *body* (and with it the HTTP stream) and propagates, and nothing
    more is emitted."""
    failure: PlatformError | None = None
    async with contextlib.aclosing(body):
        try:
            async for result in body:
                yield result
        except PlatformError as exc:
            failure = exc
        except TimeoutError:
            failure = PlatformError("timeout", f"{platform} did not answer in time", retryable=True)
        except httpx.HTTPError as exc:
            failure = transport_error(exc, platform=platform, redactor=redactor)
        except Exception as exc:
            # No traceback in the log: exception text may quote a request (and its credentials).
            failure = PlatformError(
                "unexpected_error", f"{platform} runner failed: {type(exc).__name__}: {str(exc)[:200]}"
            )
    if failure is not None:
        message = redactor.redact(failure.message)
        details = {redactor.redact(k): redactor.redact_json(v) for k, v in failure.details.items()}
        log.info("%s run failed: %s.%s %s", prefix, prefix, failure.kind, message)
        yield out.fail(f"{prefix}.{failure.kind}", message, retryable=failure.retryable, details=details)
