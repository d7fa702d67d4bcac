"""The binding's configuration (``ctx.config``), read leniently into one typed object.

Values a form could not have produced (wrong types, out-of-range numbers) fall back to the field's default
instead of failing the run: the form is the contract, and a run is the wrong place to reject a binding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

__all__ = [
    "DEFAULT_PROMPT",
    "NONE_SENTINELS",
    "LocalAgentConfig",
    "PromptMessage",
]

NONE_SENTINELS: Final = frozenset({"", "__none__", "__none"})
"""Selector values that mean "nothing selected"."""

PromptRole = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class PromptMessage:
    """One message of the bound prompt."""

    role: PromptRole
    """``system``, ``user`` or ``assistant``."""
    content: str
    """Its text."""


DEFAULT_PROMPT: Final = (PromptMessage("system", "You are a helpful assistant."),)
"""The prompt used when the binding sets none."""

_ROLES: Final = frozenset({"system", "user", "assistant"})


def _model_id(value: Any) -> str | None:
    if isinstance(value, str) and value.strip() not in NONE_SENTINELS:
        return value.strip()
    return None


def _list(value: Any) -> list[Any]:
    return cast("list[Any]", value) if isinstance(value, list) else []


def _mapping(value: Any) -> Mapping[str, Any] | None:
    return cast("Mapping[str, Any]", value) if isinstance(value, Mapping) else None


def _ids(value: Any) -> tuple[str, ...]:
    items: Sequence[Any] = [value] if isinstance(value, str) else _list(value)
    out: list[str] = []
    for item in items:
        found = _model_id(item)
        if found is not None and found not in out:
            out.append(found)
    return tuple(out)


def _int(value: Any, default: int, *, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return default
    try:
        number = int(value)
    except ValueError:
        return default
    return min(max(number, low), high)


def _bool(value: Any, default: bool) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in {"true", "false"}:
        return value.lower() == "true"
    return default


def _prompt(value: Any) -> tuple[PromptMessage, ...]:
    if not isinstance(value, list):
        return DEFAULT_PROMPT
    out: list[PromptMessage] = []
    for raw in _list(value):
        entry = _mapping(raw)
        if entry is None:
            continue
        role, content = entry.get("role"), entry.get("content")
        if isinstance(role, str) and role in _ROLES and isinstance(content, str) and content.strip():
            out.append(PromptMessage(cast("PromptRole", role), content))
    return tuple(out)


@dataclass(frozen=True, kw_only=True, slots=True)
class LocalAgentConfig:
    """Everything the runner reads from ``ctx.config`` (form field names in brackets)."""

    primary_model: str | None = None
    """[model] The model tried first."""
    fallback_models: tuple[str, ...] = ()
    """[model] Models tried in order when the previous one fails."""
    prompt: tuple[PromptMessage, ...] = DEFAULT_PROMPT
    """[prompt] The static bound prompt."""
    knowledge_bases: tuple[str, ...] = ()
    """[knowledge-bases] Knowledge bases to search."""
    rerank_model: str | None = None
    """[rerank-model] Model that reorders retrieved passages."""
    rerank_top_k: int = 5
    """[rerank-top-k] Passages kept after reranking."""
    retrieval_top_k: int = 5
    """[retrieval-top-k] Passages asked from each knowledge base (and kept without a rerank model)."""
    history_turns: int = 10
    """[history-turns] Recent user turns of history read back."""
    history_token_budget: int = 6000
    """[history-token-budget] Most tokens of history sent to the model."""
    max_tool_rounds: int = 8
    """[max-tool-rounds] Model/tool round trips before the model must answer."""
    remove_think: bool = False
    """[remove-think] Drop ``<think>`` blocks from replies."""
    timeout_seconds: float = 120.0
    """[timeout-seconds] Whole-run time limit (the host's deadline still applies)."""

    @property
    def model_chain(self) -> tuple[str, ...]:
        """Primary then fallbacks, without repeats."""
        chain = [self.primary_model] if self.primary_model else []
        chain += [m for m in self.fallback_models if m not in chain]
        return tuple(chain)

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> LocalAgentConfig:
        """Read a binding's config."""
        model: Any = config.get("model")
        selection = _mapping(model)
        fallbacks: tuple[str, ...] = ()
        if selection is not None:
            primary = _model_id(selection.get("primary"))
            fallbacks = _ids(selection.get("fallbacks"))
        else:
            primary = _model_id(model)
        defaults = cls()
        timeout = _int(config.get("timeout-seconds"), int(defaults.timeout_seconds), low=1, high=3600)
        return cls(
            primary_model=primary,
            fallback_models=fallbacks,
            prompt=_prompt(config.get("prompt")),
            knowledge_bases=_ids(config.get("knowledge-bases")),
            rerank_model=_model_id(config.get("rerank-model")),
            rerank_top_k=_int(config.get("rerank-top-k"), defaults.rerank_top_k, low=1, high=50),
            retrieval_top_k=_int(config.get("retrieval-top-k"), defaults.retrieval_top_k, low=1, high=50),
            history_turns=_int(config.get("history-turns"), defaults.history_turns, low=0, high=200),
            history_token_budget=_int(
                config.get("history-token-budget"), defaults.history_token_budget, low=0, high=1_000_000
            ),
            max_tool_rounds=_int(config.get("max-tool-rounds"), defaults.max_tool_rounds, low=0, high=50),
            remove_think=_bool(config.get("remove-think"), defaults.remove_think),
            timeout_seconds=float(timeout),
        )
