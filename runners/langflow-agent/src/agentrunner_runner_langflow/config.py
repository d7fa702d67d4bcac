"""The binding's configuration (``ctx.config``) under its legacy names, checked before any request is made."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

from agentrunner import codec as json
from agentrunner_http_kit import ConfigReader
from pydantic import JsonValue

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_TIMEOUT", "LangflowConfig"]

DEFAULT_BASE_URL: Final = "http://localhost:7860"
"""Where a local Langflow listens."""
DEFAULT_TIMEOUT: Final = 120.0
"""Seconds one call may take unless the binding sets ``timeout``."""


def _tweaks(config: Mapping[str, Any]) -> dict[str, JsonValue]:
    raw = config.get("tweaks")
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if isinstance(raw, str):
        # The legacy form stored tweaks as JSON text; the reference runner only warned on bad JSON and ran
        # the flow without them, which hides the mistake: refuse it instead.
        try:
            raw = json.loads(raw)
        except ValueError:
            raise ConfigReader.invalid("tweaks", "is not valid JSON") from None
    if not isinstance(raw, Mapping):
        raise ConfigReader.invalid("tweaks", "must be a JSON object (component id → field overrides)")
    return dict(cast("Mapping[str, JsonValue]", raw))


@dataclass(frozen=True, kw_only=True, slots=True)
class LangflowConfig:
    """Everything the runner reads from ``ctx.config`` (legacy field names in brackets)."""

    base_url: str = DEFAULT_BASE_URL
    """[base-url] The Langflow server."""
    api_key: str
    """[api-key] A Langflow API key (a secret: never logged or echoed)."""
    flow_id: str
    """[flow-id] The flow's id (or endpoint name)."""
    input_type: str = "chat"
    """[input-type] Langflow's ``input_type``."""
    output_type: str = "chat"
    """[output-type] Langflow's ``output_type``."""
    tweaks: dict[str, JsonValue] = field(default_factory=dict[str, JsonValue])
    """[tweaks] Per-component overrides, sent as they are."""
    timeout: float = DEFAULT_TIMEOUT
    """[timeout] Seconds one call may take; the run's deadline still applies."""

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> LangflowConfig:
        """Read and check a binding's config; raises ``config_invalid`` naming the first bad field."""
        read = ConfigReader(config)
        return cls(
            base_url=read.url("base-url", default=DEFAULT_BASE_URL),
            api_key=read.string("api-key", required=True),
            flow_id=read.string("flow-id", required=True),
            input_type=read.string("input-type", default="chat"),
            output_type=read.string("output-type", default="chat"),
            tweaks=_tweaks(config),
            timeout=read.number("timeout", default=DEFAULT_TIMEOUT),
        )
