"""The official n8n runner (``plugin:langbot/n8n-agent/default``)."""

from .manifest import MANIFEST, RUNNER_ID
from .runner import CONVERSATION_KEY, SESSION_KEY, N8nConfig, N8nRunner, reply_from_json

__all__ = (
    "N8nRunner",
    "N8nConfig",
    "MANIFEST",
    "RUNNER_ID",
    "CONVERSATION_KEY",
    "SESSION_KEY",
    "reply_from_json",
)
