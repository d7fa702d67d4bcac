"""Errors the bridge raises on purpose."""

from __future__ import annotations

from agentrunner.errors import AgentRunnerError

__all__ = ["BridgeClosedError", "BridgeError", "BridgeNotStartedError", "NonLoopbackBindError"]


class BridgeError(AgentRunnerError):
    """Root of the bridge's own errors."""


class NonLoopbackBindError(BridgeError, ValueError):
    """The bridge was asked to listen on a non-loopback address without ``allow_non_loopback=True``."""


class BridgeNotStartedError(BridgeError, RuntimeError):
    """The server is not serving (not started yet, or already stopped)."""


class BridgeClosedError(BridgeError, RuntimeError):
    """The run's bridge handle is closed: its token is revoked and its tools are gone."""
