"""Binding resolution: one event → exactly one binding (PROTOCOL_V1 §13).

Precedence is deterministic: scope specificity (conversation > actor > bot > workspace > global), then the
number of filters, then an explicit event type over ``*``, then the operator's ``priority``. Two bindings
that tie on all of that and can match the same event are a configuration error, reported when the set is
built — never a surprise at run time. No fan-out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import combinations

from agentrunner_host.definitions import AgentBinding, AgentEventEnvelope, EventFilter

from .errors import BindingConflictError, BindingNotFoundError, ConfigurationError

__all__ = ["BindingSet"]


class BindingSet:
    """An immutable, validated set of bindings with a resolver."""

    def __init__(self, bindings: Iterable[AgentBinding]) -> None:
        items = tuple(bindings)
        seen: set[str] = set()
        for b in items:
            if b.binding_id in seen:
                raise ConfigurationError(f"duplicate binding id {b.binding_id!r}")
            seen.add(b.binding_id)
        enabled = [b for b in items if b.enabled]
        for a, b in combinations(enabled, 2):
            if a.precedence() == b.precedence() and _may_overlap(a, b):
                raise BindingConflictError(
                    f"bindings {a.binding_id!r} and {b.binding_id!r} have the same precedence "
                    f"(scope {a.scope.type}, {len(a.filters)} filters, priority {a.priority}) and can match the "
                    "same event; give one a narrower scope, a filter or a higher priority"
                )
        # Highest precedence first, so resolution is the first match.
        self._ordered: tuple[AgentBinding, ...] = tuple(
            sorted(enabled, key=lambda b: b.precedence(), reverse=True)
        )
        self._all = items

    @property
    def bindings(self) -> Sequence[AgentBinding]:
        """All bindings, in the order given."""
        return self._all

    def get(self, binding_id: str) -> AgentBinding | None:
        """A binding by id."""
        return next((b for b in self._all if b.binding_id == binding_id), None)

    def resolve(self, event: AgentEventEnvelope) -> AgentBinding:
        """The one binding for *event*; raises :class:`BindingNotFoundError` when none matches."""
        for binding in self._ordered:
            if binding.handles(event):
                return binding
        where = f" in conversation {event.conversation_id}" if event.conversation_id else ""
        raise BindingNotFoundError(f"no enabled binding handles event type {event.event_type!r}{where}")


def _may_overlap(a: AgentBinding, b: AgentBinding) -> bool:
    if a.scope != b.scope:
        return False
    types_a, types_b = set(a.event_types), set(b.event_types)
    if "*" not in types_a and "*" not in types_b and not types_a & types_b:
        return False
    return not _filters_disjoint(a.filters, b.filters)


def _allowed(f: EventFilter) -> set[str] | None:
    if f.equals is not None:
        values = {f.equals}
        return values & set(f.one_of) if f.one_of is not None else values
    return set(f.one_of) if f.one_of is not None else None


def _filters_disjoint(fa: Sequence[EventFilter], fb: Sequence[EventFilter]) -> bool:
    """True when some field is constrained by both sides to disjoint value sets (no event can match both)."""
    for x in fa:
        for y in fb:
            if x.field != y.field:
                continue
            ax, ay = _allowed(x), _allowed(y)
            if ax is not None and ay is not None and not ax & ay:
                return True
    return False
