"""Errors of the host.

Exception tree::

    HostError
    ├── ConfigurationError            bad bindings/agents/config, reported when loaded (BindingConflictError ...)
    │   └── BindingConflictError      two bindings of equal precedence can match the same event
    ├── BindingNotFoundError          no binding matches an event
    ├── RunnerNotFoundError           the runner id is not in the registry
    ├── RunnerUnavailableError        the runner exists but cannot be used (incompatible protocol, plugin down)
    │   ├── CodeExecutionDisabledError  it executes code and the operator did not enable such runners
    │   └── RunnerDisabledError         an operator switched the runner off (``agentrunner runners disable``)
    ├── RunNotFoundError              no such run
    ├── DuplicateEventError           the event id was already accepted (carries the first run's id)
    └── RunnerTransportError          the runner raised or its runtime failed; ``code`` goes into run.failed
"""

from __future__ import annotations

__all__ = [
    "BindingConflictError",
    "BindingNotFoundError",
    "CodeExecutionDisabledError",
    "ConfigurationError",
    "DuplicateEventError",
    "HostError",
    "RunNotFoundError",
    "RunnerDisabledError",
    "RunnerNotFoundError",
    "RunnerTransportError",
    "RunnerUnavailableError",
]


class HostError(Exception):
    """Root of the host's errors."""

    message: str

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigurationError(HostError):
    """The configuration is invalid; raised when it is loaded, never in the middle of a run."""


class BindingConflictError(ConfigurationError):
    """Two bindings with the same precedence can match the same event."""


class BindingNotFoundError(HostError):
    """No enabled binding matches the event."""


class RunnerNotFoundError(HostError):
    """The runner id is not registered."""

    def __init__(self, runner_id: str, *, reason: str = "not registered") -> None:
        super().__init__(f"runner {runner_id} not found: {reason}")
        self.runner_id = runner_id


class RunnerUnavailableError(HostError):
    """The runner is known but cannot run now."""

    def __init__(self, runner_id: str, reason: str) -> None:
        super().__init__(f"runner {runner_id} unavailable: {reason}")
        self.runner_id = runner_id


class CodeExecutionDisabledError(RunnerUnavailableError):
    """The runner declares ``executes_code`` and code-executing runners are off (the default)."""

    code = "runner.code_execution_disabled"
    """Error code in API answers and host records."""

    def __init__(self, runner_id: str, switch: str) -> None:
        super().__init__(
            runner_id,
            f"it executes code (an external harness) and code-executing runners are disabled; "
            f"the operator enables them with {switch} in the host config",
        )
        self.switch = switch


class RunnerDisabledError(RunnerUnavailableError):
    """An operator disabled the runner: no new run of it starts until it is enabled again."""

    code = "runner.disabled"
    """Error code in host records."""

    def __init__(self, runner_id: str, reason: str) -> None:
        super().__init__(runner_id, f"disabled by the operator: {reason}")
        self.reason = reason


class RunNotFoundError(HostError):
    """No run with that id."""


class DuplicateEventError(HostError):
    """The event was delivered before; it is stored once and not run again."""

    def __init__(self, event_id: str, *, run_id: str | None = None) -> None:
        super().__init__(f"event {event_id} was already accepted")
        self.event_id = event_id
        self.run_id = run_id


class RunnerTransportError(HostError):
    """A runner raised, or its runtime crashed / broke the protocol. ``code`` becomes the run.failed code."""

    def __init__(self, code: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable
