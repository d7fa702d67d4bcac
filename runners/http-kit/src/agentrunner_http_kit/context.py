"""What every HTTP-API runner takes from the run context: the user tag and the adapter's parameters."""

from __future__ import annotations

from typing import cast

from agentrunner import AgentRunContext
from pydantic import JsonValue

__all__ = ["adapter_params", "user_tag"]


def user_tag(ctx: AgentRunContext) -> str:
    """The user id sent to the platform: ``<actor_type>_<actor_id>``, else ``user_<run_id>``."""
    actor = ctx.actor
    if actor is not None and actor.actor_id:
        return f"{actor.actor_type}_{actor.actor_id}"
    return f"user_{ctx.run_id}"


def adapter_params(ctx: AgentRunContext) -> dict[str, JsonValue]:
    """The entry parameters the host passed (``ctx.adapter.extra["params"]``, already secret-filtered)."""
    if ctx.adapter is None:
        return {}
    params = ctx.adapter.extra.get("params")
    return dict(cast("dict[str, JsonValue]", params)) if isinstance(params, dict) else {}
