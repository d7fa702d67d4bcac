"""The official DashScope runner (``plugin:langbot/dashscope-agent/default``)."""

from .config import DashScopeConfig
from .manifest import MANIFEST, RUNNER_ID
from .runner import SESSION_KEY, DashScopeRunner

__all__ = ["MANIFEST", "RUNNER_ID", "SESSION_KEY", "DashScopeConfig", "DashScopeRunner"]
