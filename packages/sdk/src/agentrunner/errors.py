"""Errors of the protocol (PROTOCOL_V1 §9) and of the SDK.

Exception tree::

    AgentRunnerError                    root of everything this SDK raises on purpose
    ├── APIError                        a back-call failed; ``code`` is one of §9
    │   ├── UnauthorizedError           unauthorized
    │   ├── NotFoundError               not_found
    │   ├── DeadlineExceededError       deadline_exceeded
    │   ├── PayloadTooLargeError        payload_too_large
    │   ├── RateLimitedError            rate_limited
    │   ├── InvalidArgumentError        invalid_argument
    │   └── RuntimeAPIError             runtime_error (and any code this SDK does not know)
    │       └── ModelAuthFailedError    model.auth_failed: the model provider refused the host's credentials
    ├── ProtocolError                   a peer broke the wire protocol
    └── RunnerDefinitionError           an AgentRunner subclass is declared wrongly (a usage error)

``InvalidRunnerIdError`` (a ``ValueError``) lives in :mod:`agentrunner.runner_id`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal

from pydantic import Field, JsonValue

from ._base import ProtocolModel

__all__ = [
    "API_ERROR_CODES",
    "APIError",
    "AgentAPIError",
    "AgentRunnerError",
    "DeadlineExceededError",
    "ErrorCode",
    "InvalidArgumentError",
    "ModelAuthFailedError",
    "NotFoundError",
    "PayloadTooLargeError",
    "ProtocolError",
    "RateLimitedError",
    "RunnerDefinitionError",
    "RuntimeAPIError",
    "UnauthorizedError",
]

ErrorCode = Literal[
    "unauthorized",
    "not_found",
    "deadline_exceeded",
    "payload_too_large",
    "rate_limited",
    "invalid_argument",
    "runtime_error",
]

API_ERROR_CODES: Final[frozenset[str]] = frozenset(ErrorCode.__args__)
"""The error codes of §9."""


class AgentAPIError(ProtocolModel):
    """The wire form of a back-call error (§9)."""

    code: str
    """One of :data:`API_ERROR_CODES` (unknown codes are treated as ``runtime_error``)."""
    message: str
    """Human-readable message; never contains secrets."""
    retryable: bool = False
    """The same call may succeed later."""
    details: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Extra data."""


class AgentRunnerError(Exception):
    """Root of every error this SDK raises on purpose."""

    message: str
    """Human-readable message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class APIError(AgentRunnerError):
    """A back-call failed. Catch a subclass to handle one code, or this class for all."""

    code: ClassVar[str] = "runtime_error"
    """The §9 code of this class."""
    default_retryable: ClassVar[bool] = False

    retryable: bool
    """The same call may succeed later."""
    details: dict[str, Any]
    """Extra data from the host."""

    def __init__(
        self, message: str, *, retryable: bool | None = None, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.retryable = self.default_retryable if retryable is None else retryable
        self.details = dict(details or {})

    def to_wire(self) -> AgentAPIError:
        """The wire form."""
        return AgentAPIError(
            code=self.code, message=self.message, retryable=self.retryable, details=self.details
        )

    @staticmethod
    def from_wire(error: AgentAPIError | dict[str, Any]) -> APIError:
        """The exception for a wire error; unknown codes become :class:`RuntimeAPIError` keeping the code."""
        if isinstance(error, dict):
            error = AgentAPIError.model_validate(error)
        cls = _BY_CODE.get(error.code)
        if cls is None:
            exc: APIError = RuntimeAPIError(
                error.message, retryable=error.retryable, details={**error.details, "code": error.code}
            )
            return exc
        return cls(error.message, retryable=error.retryable, details=error.details)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class UnauthorizedError(APIError):
    """The run may not touch this resource or scope."""

    code = "unauthorized"


class NotFoundError(APIError):
    """The resource does not exist or is not visible to this run."""

    code = "not_found"


class DeadlineExceededError(APIError):
    """The run's deadline passed before the call finished."""

    code = "deadline_exceeded"


class PayloadTooLargeError(APIError):
    """The request or the response is larger than the host allows."""

    code = "payload_too_large"


class RateLimitedError(APIError):
    """The run made too many calls; retry later."""

    code = "rate_limited"
    default_retryable = True


class InvalidArgumentError(APIError):
    """The call's parameters are invalid."""

    code = "invalid_argument"


class RuntimeAPIError(APIError):
    """The host or a downstream capability failed."""

    code = "runtime_error"


class ModelAuthFailedError(RuntimeAPIError):
    """The model provider refused the host's credentials (upstream 401/403): a revoked or wrong provider key.

    The provider's fault, not the run's grant (that is :class:`UnauthorizedError`): a runner with fallback models
    should try the next one. A peer that does not know the code reads it as ``runtime_error``."""

    code = "model.auth_failed"


_BY_CODE: Final[dict[str, type[APIError]]] = {
    cls.code: cls
    for cls in (
        UnauthorizedError,
        NotFoundError,
        DeadlineExceededError,
        PayloadTooLargeError,
        RateLimitedError,
        InvalidArgumentError,
        RuntimeAPIError,
        ModelAuthFailedError,
    )
}


class ProtocolError(AgentRunnerError):
    """A peer broke the wire protocol: malformed frame, unknown correlation id, oversized message."""


class RunnerDefinitionError(AgentRunnerError, TypeError):
    """An :class:`~agentrunner.AgentRunner` subclass is declared wrongly (a mistake of the plugin author)."""
