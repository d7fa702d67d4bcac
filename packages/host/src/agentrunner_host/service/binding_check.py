"""A binding checked before it is saved: the bindings it would conflict with and where it would rank.

The conflict rule is the one :class:`~agentrunner_host.bindings.BindingSet` applies when a set is built
(same precedence and may match the same event); here the candidate is paired with every other enabled
binding so *all* conflicts are named at once, not only the first. Nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentrunner_host.bindings import BindingSet
from agentrunner_host.config import BindingSpec
from agentrunner_host.definitions import AgentBinding
from agentrunner_host.errors import BindingConflictError

from .agents import AgentDirectory

__all__ = ["BindingCheck", "check_binding"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BindingCheck:
    """What saving a binding would do."""

    conflicts: dict[str, str]
    """Bindings it conflicts with → why (saving would be refused with 409 ``binding_conflict``)."""
    problems: list[str]
    """Other reasons saving would be refused (an unknown agent)."""
    precedence: tuple[int, int, int, int] | None
    """Its sort key: scope specificity, number of filters, explicit event type, priority."""
    order: list[str]
    """Enabled binding ids, highest precedence first, with the candidate in its place: an event is handled
    by the first one that matches."""


def check_binding(directory: AgentDirectory, spec: BindingSpec) -> BindingCheck:
    """Check *spec* against the current bindings (a binding with its id is the one it would replace)."""
    agents = {entry.agent.agent_id: entry.agent for entry in directory.agents()}
    agent = agents.get(spec.agent_id)
    if agent is None:
        return BindingCheck(
            conflicts={}, problems=[f"agent {spec.agent_id!r} does not exist"], precedence=None, order=[]
        )
    candidate = spec.project(agent)
    others = [b for b in directory.binding_set().bindings if b.binding_id != spec.binding_id and b.enabled]
    conflicts: dict[str, str] = {}
    if candidate.enabled:
        for other in others:
            try:
                BindingSet([other, candidate])
            except BindingConflictError as exc:
                conflicts[other.binding_id] = exc.message
    ranked: list[AgentBinding] = [*others, *([candidate] if candidate.enabled else [])]
    ranked.sort(key=lambda b: b.precedence(), reverse=True)
    return BindingCheck(
        conflicts=conflicts,
        problems=[],
        precedence=candidate.precedence(),
        order=[b.binding_id for b in ranked],
    )
