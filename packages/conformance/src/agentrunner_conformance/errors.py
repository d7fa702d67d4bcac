"""Errors of the conformance kit.

Exception tree::

    ConformanceError              root of everything the kit raises on purpose
    ├── UnknownRequirementError   a check names a requirement id that is not in the manifest
    ├── TargetError               a CLI / plugin target cannot be resolved to a runner class
    └── ExpectedFailuresError     an expected-failures file is malformed or names unknown ids
"""

from __future__ import annotations

__all__ = ["ConformanceError", "ExpectedFailuresError", "TargetError", "UnknownRequirementError"]


class ConformanceError(Exception):
    """Root of every error the conformance kit raises on purpose."""

    message: str
    """Human-readable message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnknownRequirementError(ConformanceError, KeyError):
    """A requirement id that is not in :data:`~agentrunner_conformance.requirements.REQUIREMENTS`."""

    requirement_id: str
    """The unknown id."""

    def __init__(self, requirement_id: str) -> None:
        super().__init__(f"unknown requirement id {requirement_id!r}: add it to REQUIREMENTS first")
        self.requirement_id = requirement_id

    def __str__(self) -> str:
        return self.message


class TargetError(ConformanceError):
    """The target (``module:Class``, plugin directory or runner id) does not name a runner."""


class ExpectedFailuresError(ConformanceError):
    """The expected-failures file cannot be read or names requirement ids that do not exist."""
