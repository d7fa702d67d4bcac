"""The binding's configuration (``ctx.config``) under its legacy names, checked before any request is made."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from agentrunner_http_kit import ConfigReader

from .events import DEFAULT_REFERENCES_QUOTE, AppType

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_TIMEOUT", "INTL_BASE_URL", "DashScopeConfig"]

DEFAULT_BASE_URL: Final = "https://dashscope.aliyuncs.com/api/v1"
"""The mainland (Beijing) region endpoint."""
INTL_BASE_URL: Final = "https://dashscope-intl.aliyuncs.com/api/v1"
"""The international (Singapore) region endpoint."""
DEFAULT_TIMEOUT: Final = 120.0
"""Seconds one call may take unless the binding sets ``timeout``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class DashScopeConfig:
    """Everything the runner reads from ``ctx.config`` (legacy field names in brackets)."""

    app_type: AppType = "agent"
    """[app-type] ``agent`` or ``workflow``."""
    api_key: str
    """[api-key] The DashScope API key (a secret: never logged or echoed)."""
    app_id: str
    """[app-id] The application's id."""
    references_quote: str = DEFAULT_REFERENCES_QUOTE
    """[references_quote, also references-quote] Prefix of a rewritten document reference."""
    base_url: str = DEFAULT_BASE_URL
    """[base-url] The API's base URL, up to ``/api/v1`` (mainland or international region)."""
    timeout: float = DEFAULT_TIMEOUT
    """[timeout] Seconds one call may take; the run's deadline still applies."""

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> DashScopeConfig:
        """Read and check a binding's config; raises ``config_invalid`` naming the first bad field."""
        read = ConfigReader(config)
        app_type = read.choice("app-type", ("agent", "workflow"), default="agent")
        api_key = read.string("api-key", required=True)
        app_id = read.string("app-id", required=True)
        # LangBot's default pipeline config spelled it with a hyphen, its form with an underscore, and the
        # migration copies keys verbatim, so both arrive. The form's spelling wins when both are set.
        quote = read.string("references_quote") or read.string("references-quote") or DEFAULT_REFERENCES_QUOTE
        return cls(
            app_type="workflow" if app_type == "workflow" else "agent",
            api_key=api_key,
            app_id=app_id,
            references_quote=quote,
            base_url=read.url("base-url", default=DEFAULT_BASE_URL),
            timeout=read.number("timeout", default=DEFAULT_TIMEOUT),
        )
