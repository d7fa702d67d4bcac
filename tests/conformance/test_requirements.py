"""The requirements manifest: complete, referenced by checks, covered by probes, typo-proof."""

from __future__ import annotations

import re

import pytest
from agentrunner_conformance import PROBES, REQUIREMENTS, UnknownRequirementError, invariants
from agentrunner_conformance.requirements import CHECKS, check, requirement


def test_every_requirement_has_a_check_and_every_check_a_requirement() -> None:
    """Both directions: no requirement without a check, no check of an unlisted id."""
    assert invariants.RUN_INVARIANTS, "importing the invariants registers the checks"
    assert set(CHECKS) == set(REQUIREMENTS)
    assert all(CHECKS[requirement_id] for requirement_id in REQUIREMENTS)


def test_every_requirement_is_judged_by_some_probe_or_the_manifest_check() -> None:
    """A requirement no probe judges could only ever be BLOCKED."""
    judged = {"manifest.protocol-version"}.union(*(p.judges for p in PROBES))
    assert judged == set(REQUIREMENTS)


def test_a_check_naming_an_unknown_requirement_fails_at_import() -> None:
    """The decorator raises before the function exists, so a typo cannot become a silent rule."""
    with pytest.raises(UnknownRequirementError, match=r"result\.terminal\.exactly-on"):

        @check("result.terminal.exactly-on")
        def _typo() -> None: ...


def test_requirement_ids_levels_and_sections_are_well_formed() -> None:
    """Ids are dotted kebab-case, levels are RFC 2119, every rule cites where it comes from."""
    for requirement_id, req in REQUIREMENTS.items():
        assert req.id == requirement_id
        assert re.fullmatch(r"[a-z]+(\.[a-z0-9-]+)+", requirement_id), requirement_id
        assert req.level in {"MUST", "SHOULD", "MAY"}
        assert req.section
        assert req.summary.endswith(".")
    assert requirement("result.terminal.exactly-one").level == "MUST"
