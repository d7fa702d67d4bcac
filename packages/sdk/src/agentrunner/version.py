"""Protocol version negotiation (PROTOCOL_V1 §3)."""

from __future__ import annotations

__all__ = ["PROTOCOL_VERSION", "SUPPORTED_MAJOR_VERSIONS", "is_compatible_protocol"]

PROTOCOL_VERSION = "1"
"""The protocol major version this SDK implements."""

SUPPORTED_MAJOR_VERSIONS = frozenset({"1"})
"""Major versions a host built on this SDK accepts from a runner manifest."""


def is_compatible_protocol(version: str | None) -> bool:
    """True when a manifest's ``protocol_version`` has a supported major version.

    ``"1"``, ``"1.2"`` and ``"1.0.3"`` are compatible; ``"2"``, ``""`` and ``None`` are not. Minor parts never
    matter: new optional fields do not bump the major version.
    """
    if not version:
        return False
    major = version.strip().split(".", 1)[0]
    return major in SUPPORTED_MAJOR_VERSIONS
