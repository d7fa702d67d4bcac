"""The official Langflow runner (``plugin:langbot/langflow-agent/default``)."""

from .config import LangflowConfig
from .manifest import MANIFEST, RUNNER_ID
from .runner import SESSION_KEY, LangflowRunner

__all__ = ["MANIFEST", "RUNNER_ID", "SESSION_KEY", "LangflowConfig", "LangflowRunner"]
