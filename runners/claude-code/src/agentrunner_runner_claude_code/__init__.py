"""The official claude-code runner (``plugin:langbot/claude-code-agent/default``)."""

from .adapter import PREFIX, ClaudeCodeAdapter, ClaudeSettings
from .manifest import MANIFEST, RUNNER_ID
from .native import ClaudeOutputFormat, ClaudeParser
from .runner import ClaudeCodeRunner

__all__ = [
    "MANIFEST",
    "PREFIX",
    "RUNNER_ID",
    "ClaudeCodeAdapter",
    "ClaudeCodeRunner",
    "ClaudeOutputFormat",
    "ClaudeParser",
    "ClaudeSettings",
]
