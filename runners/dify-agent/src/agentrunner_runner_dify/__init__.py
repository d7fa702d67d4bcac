"""The official Dify runner (``plugin:langbot/dify-agent/default``)."""

from .manifest import MANIFEST, RUNNER_ID
from .runner import (
    CONVERSATION_KEY,
    WORKFLOW_CONVERSATION_KEY,
    WORKFLOW_SESSION_KEY,
    DifyConfig,
    DifyRunner,
)

__all__ = (
    "DifyRunner",
    "DifyConfig",
    "MANIFEST",
    "RUNNER_ID",
    "CONVERSATION_KEY",
    "WORKFLOW_SESSION_KEY",
    "WORKFLOW_CONVERSATION_KEY",
)
