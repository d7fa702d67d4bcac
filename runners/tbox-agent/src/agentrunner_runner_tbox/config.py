"""The binding's configuration (``ctx.config``) under its legacy names, checked before any request is made."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from agentrunner_http_kit import ConfigReader

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_TIMEOUT", "TboxConfig"]

DEFAULT_BASE_URL: Final = "https://api.tbox.cn"
"""Tbox's open API."""
DEFAULT_TIMEOUT: Final = 120.0
"""Seconds one call may take unless the binding sets ``timeout``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TboxConfig:
    """Everything the runner reads from ``ctx.config`` (legacy field names in brackets)."""

    api_key: str
    """[api-key] The Tbox access token, sent as the whole ``Authorization`` header (a secret)."""
    app_id: str
    """[app-id] The application's id."""
    base_url: str = DEFAULT_BASE_URL
    """[base-url] The API's base URL."""
    timeout: float = DEFAULT_TIMEOUT
    """[timeout] Seconds one call may take; the run's deadline still applies."""

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> TboxConfig:
        """Read and check a binding's config; raises ``config_invalid`` naming the first bad field."""
        read = ConfigReader(config)
        return cls(
            api_key=read.string("api-key", required=True),
            app_id=read.string("app-id", required=True),
            base_url=read.url("base-url", default=DEFAULT_BASE_URL),
            timeout=read.number("timeout", default=DEFAULT_TIMEOUT),
        )
