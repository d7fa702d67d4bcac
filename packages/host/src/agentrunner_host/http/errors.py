"""Typed errors of the HTTP API and how host errors map onto status codes."""

from __future__ import annotations

from starlette.responses import JSONResponse

from agentrunner_host.admission import AdmissionError
from agentrunner_host.errors import (
    BindingConflictError,
    BindingNotFoundError,
    CodeExecutionDisabledError,
    ConfigurationError,
    DuplicateEventError,
    HostError,
    RunnerDisabledError,
    RunnerNotFoundError,
    RunnerUnavailableError,
)
from agentrunner_host.service import (
    AlreadyExistsError,
    InUseError,
    InvalidDefinitionError,
    NotFoundError,
    ReadOnlyError,
)

from .schemas import ErrorBody, ErrorDetail

__all__ = ["ApiError", "error_response", "from_host_error"]


class ApiError(Exception):
    """An error answered as ``{"error": {"code", "message"}}`` with an HTTP status."""

    def __init__(self, status: int, code: str, message: str, *, run_id: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.run_id = run_id

    def response(self) -> JSONResponse:
        """The JSON answer."""
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else None
        return error_response(self.status, self.code, self.message, run_id=self.run_id, headers=headers)


def error_response(
    status: int, code: str, message: str, *, run_id: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    """A JSON error answer."""
    body = ErrorBody(error=ErrorDetail(code=code, message=message, run_id=run_id))
    return JSONResponse(body.model_dump(mode="json", exclude_none=True), status_code=status, headers=headers)


def from_host_error(exc: HostError) -> ApiError:
    """The API error of a host error (most specific class first)."""
    match exc:
        case DuplicateEventError():
            return ApiError(409, "duplicate_event", exc.message, run_id=exc.run_id)
        case BindingNotFoundError():
            return ApiError(404, "binding_not_found", exc.message)
        case NotFoundError():
            return ApiError(404, "not_found", exc.message)
        case BindingConflictError():
            return ApiError(409, "binding_conflict", exc.message)
        case AlreadyExistsError():
            return ApiError(409, "already_exists", exc.message)
        case ReadOnlyError():
            return ApiError(409, "read_only", exc.message)
        case InUseError():
            return ApiError(409, "in_use", exc.message)
        case AdmissionError():
            return ApiError(422, exc.code, exc.message)
        case InvalidDefinitionError():
            return ApiError(422, "invalid_definition", exc.message)
        case ConfigurationError():
            return ApiError(422, "invalid_configuration", exc.message)
        case CodeExecutionDisabledError():
            return ApiError(403, "code_execution_disabled", exc.message)
        case RunnerDisabledError():
            return ApiError(403, "runner_disabled", exc.message)
        case RunnerNotFoundError() | RunnerUnavailableError():
            return ApiError(503, "runner_unavailable", exc.message)
        case _:
            return ApiError(503, "unavailable", exc.message)
