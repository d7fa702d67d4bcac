"""The reference echo runner (``plugin:agentrunner/echo/default``)."""

from .runner import TURN_KEY, EchoRunner

__all__ = ("EchoRunner", "TURN_KEY")
