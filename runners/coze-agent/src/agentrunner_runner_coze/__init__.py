"""The official Coze runner (``plugin:langbot/coze-agent/default``)."""

from .manifest import MANIFEST, RUNNER_ID
from .runner import AUTH_ERROR_CODES, CONVERSATION_KEY, CozeConfig, CozeRunner

__all__ = ("CozeRunner", "CozeConfig", "MANIFEST", "RUNNER_ID", "CONVERSATION_KEY", "AUTH_ERROR_CODES")
