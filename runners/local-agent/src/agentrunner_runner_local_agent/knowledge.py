"""Retrieval from the selected knowledge bases, with an optional rerank, rendered as one text part.

Retrieval enriches an answer, so a knowledge base that errors is skipped (and reported in the run's metadata);
only an ``unauthorized`` refusal or the deadline ends the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from agentrunner import (
    AgentResources,
    AgentRunAPI,
    APIError,
    DeadlineExceededError,
    KnowledgeHit,
    ModelResource,
    UnauthorizedError,
)
from pydantic import JsonValue

from .deadline import Deadline

__all__ = ["PASSAGE_CHARS", "Retrieval", "granted_bases", "granted_rerank_model", "retrieve"]

PASSAGE_CHARS: Final = 2_000
"""Most characters of one passage given to the model."""


def granted_bases(wanted: Sequence[str], resources: AgentResources) -> list[str]:
    """The selected knowledge bases that ``ctx.resources`` grants for ``retrieve``, in config order."""
    out: list[str] = []
    for kb_id in wanted:
        kb = resources.knowledge_base(kb_id)
        if kb is not None and "retrieve" in kb.operations and kb_id not in out:
            out.append(kb_id)
    return out


def granted_rerank_model(model_id: str | None, resources: AgentResources) -> ModelResource | None:
    """The configured rerank model when ``ctx.resources`` grants it for ``rerank``."""
    if model_id is None:
        return None
    model = resources.model(model_id)
    if model is None or "rerank" not in model.operations:
        return None
    return model


@dataclass(slots=True)
class Retrieval:
    """The passages kept for the model and what happened on the way."""

    passages: list[KnowledgeHit] = field(default_factory=list[KnowledgeHit])
    """Best first."""
    hits: int = 0
    """Passages returned by all bases before reranking."""
    reranked: bool = False
    """The rerank model ordered the passages."""
    errors: list[dict[str, JsonValue]] = field(default_factory=list[dict[str, JsonValue]])
    """Knowledge bases or rerank calls that failed (id, code)."""

    def as_text(self) -> str | None:
        """The passages as one text part, or ``None`` when there are none."""
        if not self.passages:
            return None
        blocks = [f"[{i}] {hit.text[:PASSAGE_CHARS]}" for i, hit in enumerate(self.passages, start=1)]
        return (
            "Passages retrieved from the knowledge base; use them when they are relevant to the message:\n\n"
            + "\n\n".join(blocks)
        )


async def retrieve(
    api: AgentRunAPI,
    query: str,
    *,
    bases: Sequence[str],
    top_k: int,
    rerank_model: ModelResource | None,
    rerank_top_k: int,
    deadline: Deadline,
) -> Retrieval:
    """Search each base with *query*; rerank the union when a rerank model is granted."""
    found = Retrieval()
    if not query.strip() or not bases:
        return found
    hits: list[KnowledgeHit] = []
    for kb_id in bases:
        try:
            async with deadline.scope():
                result = await api.knowledge.retrieve(kb_id, query, top_k=top_k)
        except (UnauthorizedError, DeadlineExceededError):
            raise
        except APIError as exc:
            found.errors.append({"kb_id": kb_id, "code": exc.code})
            continue
        hits.extend(result.hits)
    found.hits = len(hits)
    hits.sort(key=lambda h: h.score, reverse=True)
    if rerank_model is not None and hits:
        try:
            async with deadline.scope():
                ranked = await api.models.rerank(
                    rerank_model.model_id, query, [h.text for h in hits], top_k=rerank_top_k
                )
        except (UnauthorizedError, DeadlineExceededError):
            raise
        except APIError as exc:
            found.errors.append({"rerank_model": rerank_model.model_id, "code": exc.code})
        else:
            order = [item.index for item in ranked.results if 0 <= item.index < len(hits)]
            found.passages = [hits[i] for i in dict.fromkeys(order)][:rerank_top_k]
            found.reranked = True
            return found
    found.passages = hits[:top_k]
    return found
