"""Errors (PROTOCOL_V1 §9): the wire form, the exception tree and the mapping between them."""

from __future__ import annotations

import pytest
from agentrunner import (
    AgentAPIError,
    AgentRunnerError,
    APIError,
    DeadlineExceededError,
    InvalidArgumentError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    RuntimeAPIError,
    UnauthorizedError,
)
from agentrunner.errors import API_ERROR_CODES

_CLASSES: list[type[APIError]] = [
    UnauthorizedError,
    NotFoundError,
    DeadlineExceededError,
    PayloadTooLargeError,
    RateLimitedError,
    InvalidArgumentError,
    RuntimeAPIError,
]


def test_there_is_one_exception_class_per_spec_error_code() -> None:
    """The seven codes of §9 map one to one onto the ``APIError`` subclasses."""
    assert {cls.code for cls in _CLASSES} == API_ERROR_CODES
    assert len(API_ERROR_CODES) == 7
    assert all(issubclass(cls, AgentRunnerError) for cls in _CLASSES)


@pytest.mark.parametrize("cls", _CLASSES, ids=lambda cls: cls.code)
def test_an_api_error_survives_the_wire_both_ways(cls: type[APIError]) -> None:
    """``to_wire`` then ``from_wire`` (from the model or from a plain dict) gives back the same error."""
    error = cls("it broke", retryable=True, details={"resource": "kb-1"})
    wire = error.to_wire()
    assert wire == AgentAPIError(
        code=cls.code, message="it broke", retryable=True, details={"resource": "kb-1"}
    )
    for form in (wire, wire.model_dump(mode="json")):
        again = APIError.from_wire(form)
        assert type(again) is cls
        assert (again.message, again.retryable, again.details) == ("it broke", True, {"resource": "kb-1"})


def test_only_rate_limiting_is_retryable_by_default() -> None:
    """Without an explicit flag, a rate-limited call may be retried and nothing else may."""
    assert RateLimitedError("slow down").retryable is True
    assert NotFoundError("gone").retryable is False
    assert RateLimitedError("x", retryable=False).retryable is False


def test_an_error_shows_its_code_and_message() -> None:
    """``str`` is the message and ``repr`` names the code, for logs."""
    error = NotFoundError("no such model")
    assert str(error) == "no such model"
    assert repr(error) == "NotFoundError(code='not_found', message='no such model')"


def test_a_wire_error_needs_a_code_and_a_message() -> None:
    """The wire model rejects an error without its two required fields."""
    with pytest.raises(ValueError, match="message"):
        AgentAPIError.model_validate({"code": "not_found"})
    with pytest.raises(ValueError, match="code"):
        APIError.from_wire({"message": "x"})
