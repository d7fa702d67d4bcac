"""A run's artifacts as MCP resources, scoped by the run's snapshot.

* ``resources/list``: the artifacts the run's input carries (attachments and the artifacts of its content
  elements), when the snapshot lets the run read artifacts (``available_apis.artifact_read``);
* ``resources/templates/list``: ``agentrunner-artifact:///{artifact_id}``, any artifact by id (the host decides
  on every read), under the same condition;
* ``resources/read``: the artifact's bytes through ``artifacts.read_range`` back-calls of the run, so the host
  authorizes each read exactly as it authorizes the runner's own; text for textual MIME types, else a blob;
* ``completion/complete`` on the template's ``artifact_id``: the listed ids that start with the prefix.

Artifacts never change once stored, so a subscription is accepted and never notified.
"""

from __future__ import annotations

from typing import Final

import mcp_types as types
from agentrunner import ArtifactRef
from agentrunner.context import AgentRunContext

from .content import ARTIFACT_URI_PREFIX, artifact_uri

__all__ = ["ARTIFACT_TEMPLATE", "artifact_resources", "artifact_template", "complete_artifact_id", "readable"]

ARTIFACT_TEMPLATE: Final = ARTIFACT_URI_PREFIX + "{artifact_id}"
"""URI template of any artifact by id."""


def readable(ctx: AgentRunContext) -> bool:
    """Whether the run's snapshot lets it read artifacts (and so offers them as resources)."""
    return ctx.context.available_apis.artifact_read


def snapshot_artifacts(ctx: AgentRunContext) -> list[ArtifactRef]:
    """The artifacts the run's input carries, each once, in order."""
    refs: list[ArtifactRef] = list(ctx.input.attachments)
    for element in ctx.input.contents:
        artifact = getattr(element, "artifact", None)
        if isinstance(artifact, ArtifactRef):
            refs.append(artifact)
    seen: set[str] = set()
    out: list[ArtifactRef] = []
    for ref in refs:
        if ref.artifact_id not in seen:
            seen.add(ref.artifact_id)
            out.append(ref)
    return out


def artifact_resources(ctx: AgentRunContext) -> list[types.Resource]:
    """``resources/list`` of the run."""
    if not readable(ctx):
        return []
    return [
        types.Resource(
            uri=artifact_uri(ref.artifact_id),
            name=ref.name or ref.artifact_id,
            mime_type=ref.mime_type,
            size=ref.size,
            description=ref.summary or f"{ref.artifact_type} artifact of this run",
        )
        for ref in snapshot_artifacts(ctx)
    ]


def artifact_template(ctx: AgentRunContext) -> list[types.ResourceTemplate]:
    """``resources/templates/list`` of the run."""
    if not readable(ctx):
        return []
    return [
        types.ResourceTemplate(
            uri_template=ARTIFACT_TEMPLATE,
            name="artifact",
            description="Any artifact this run may read, by id (the host authorizes every read).",
        )
    ]


def complete_artifact_id(ctx: AgentRunContext, prefix: str) -> list[str]:
    """Completions of the template's ``artifact_id``: the run's listed artifact ids starting with *prefix*."""
    if not readable(ctx):
        return []
    return [ref.artifact_id for ref in snapshot_artifacts(ctx) if ref.artifact_id.startswith(prefix)][:100]
