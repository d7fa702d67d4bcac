"""Shared test settings: a small, fast search profile."""

from __future__ import annotations

from agentrunner_conformance import Profile

FAST = Profile(
    name="test",
    max_examples=15,
    stateful_steps=6,
    stateful_examples=5,
    cancel_grace=0.05,
    deadline_grace=0.2,
)
"""Enough examples to catch every gallery runner, small enough to keep the suite fast."""
