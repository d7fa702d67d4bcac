"""The official codex runner (``plugin:langbot/codex-agent/default``)."""

from .adapter import API_KEY_ENV, PREFIX, CodexAdapter, CodexSettings
from .manifest import MANIFEST, RUNNER_ID
from .native import CodexParser
from .runner import CodexRunner

__all__ = [
    "API_KEY_ENV",
    "MANIFEST",
    "PREFIX",
    "RUNNER_ID",
    "CodexAdapter",
    "CodexParser",
    "CodexRunner",
    "CodexSettings",
]
