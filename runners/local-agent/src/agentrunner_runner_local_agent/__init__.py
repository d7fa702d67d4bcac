"""The official local-agent runner (``plugin:langbot/local-agent/default``)."""

from .config import LocalAgentConfig
from .history import SUMMARY_KEY
from .manifest import MANIFEST, RUNNER_ID
from .runner import LocalAgentRunner

__all__ = ["MANIFEST", "RUNNER_ID", "SUMMARY_KEY", "LocalAgentConfig", "LocalAgentRunner"]
