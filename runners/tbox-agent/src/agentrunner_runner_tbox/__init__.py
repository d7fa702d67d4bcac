"""The official Tbox runner (``plugin:langbot/tbox-agent/default``)."""

from .config import TboxConfig
from .manifest import MANIFEST, RUNNER_ID
from .runner import CONVERSATION_KEY, TboxRunner

__all__ = ["CONVERSATION_KEY", "MANIFEST", "RUNNER_ID", "TboxConfig", "TboxRunner"]
