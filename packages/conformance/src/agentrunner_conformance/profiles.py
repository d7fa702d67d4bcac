"""How hard a check searches: example counts and timing budgets, by profile name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["PROFILES", "Profile"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """Search budget of one conformance check."""

    name: str
    """Profile name."""
    max_examples: int
    """Hypothesis examples per probe."""
    stateful_steps: int
    """Steps per state-machine example (concurrent runs, cancels, deadlines)."""
    stateful_examples: int
    """State-machine examples."""
    cancel_grace: float = 0.5
    """Seconds a cancelled run has to stop."""
    deadline_grace: float = 0.5
    """Seconds a run may go on once its deadline passed."""
    check_budget: float = 600.0
    """Wall-clock seconds the whole check may take; probes that have not finished by then are BLOCKED."""
    example_budget: float = 30.0
    """Wall-clock seconds one example may take (a run that never ends fails its probe's hang requirement)."""
    shrink_budget: float = 5.0
    """Wall-clock seconds spent shrinking one failure; past it the smallest example found so far is reported."""


PROFILES: Final[dict[str, Profile]] = {
    "smoke": Profile(
        name="smoke",
        max_examples=3,
        stateful_steps=4,
        stateful_examples=2,
        cancel_grace=0.2,
        deadline_grace=0.2,
        check_budget=60.0,
        shrink_budget=2.0,
    ),
    "quick": Profile(
        name="quick",
        max_examples=10,
        stateful_steps=8,
        stateful_examples=5,
        cancel_grace=0.2,
        deadline_grace=0.2,
        check_budget=120.0,
        shrink_budget=4.0,
    ),
    "default": Profile(
        name="default", max_examples=100, stateful_steps=20, stateful_examples=50, check_budget=600.0
    ),
    "thorough": Profile(
        name="thorough",
        max_examples=300,
        stateful_steps=40,
        stateful_examples=100,
        check_budget=3600.0,
        shrink_budget=60.0,
    ),
}
"""The built-in profiles: ``smoke`` (does it load and basically work), ``quick`` (seconds), ``default`` (well under
a minute for a simple runner), ``thorough`` (minutes)."""
