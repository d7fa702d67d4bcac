"""Protocol version negotiation (PROTOCOL_V1 §3)."""

from __future__ import annotations

import pytest
from agentrunner import PROTOCOL_VERSION, is_compatible_protocol


def test_the_sdk_speaks_protocol_major_version_one() -> None:
    """The version constant is the major version string ``"1"``."""
    assert PROTOCOL_VERSION == "1"
    assert is_compatible_protocol(PROTOCOL_VERSION)


@pytest.mark.parametrize("version", ["1", "1.0", "1.2", "1.0.3", " 1.4"])
def test_any_minor_version_of_the_supported_major_is_compatible(version: str) -> None:
    """New optional fields do not bump the major version, so minor parts never matter."""
    assert is_compatible_protocol(version)


@pytest.mark.parametrize("version", ["2", "2.0", "0.9", "", None, "v1", "10", "one"])
def test_other_majors_and_missing_versions_are_incompatible(version: str | None) -> None:
    """A different major, an empty string or no version at all is refused."""
    assert not is_compatible_protocol(version)
