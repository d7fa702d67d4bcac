"""The operator's pins applied to a harness binding's config as a whole, for the host to check before the
runner gets it (the runner checks again while it prepares the run: defence in depth).

:func:`check_pinned_config` takes the config a run would receive and the workspace policy the host sends
(``runtime.metadata['harness']``, what ``HarnessPolicy.metadata()`` gives) and applies the same rules as the
run itself: every entry of ``mcp-config-json`` must match its pin (:func:`.mcp_pins.check_mcp_server`), and,
when skills are projected (``inject-skills``, on by default) and the operator pins skills, every skill of
``skills-json`` must match its pin by digest and version (:func:`.projection.verify_skills`).

What it cannot see is left to the runner: ``mcp-config-file`` is read where the runner runs (a remote runtime's
file is not the host's), and a malformed value is the runner's to report with its own code.
"""

from __future__ import annotations

from collections.abc import Mapping

from .errors import HarnessFailure
from .mcp_pins import check_mcp_server, mcp_config_document, mcp_servers_of, parse_pins
from .projection import SkillSpec, parse_skill_pins, parse_skills, verify_skills

__all__ = ["check_pinned_config"]


def check_pinned_config(config: Mapping[str, object], policy: Mapping[str, object]) -> None:
    """Raise :class:`HarnessFailure` ``config_invalid`` (its message names the server or skill and what
    differs) when *config* gives an MCP server or a skill the operator's pins in *policy* do not allow."""
    try:
        document = mcp_config_document(config.get("mcp-config-json"))
        servers = mcp_servers_of(document) if document is not None else {}
    except HarnessFailure:
        servers = {}  # malformed: the runner refuses it with its own code
    pins = parse_pins(policy.get("mcp_server_pins"))
    for name, server in servers.items():
        check_mcp_server(name, server, pins)
    if config.get("inject-skills", True) is False:
        return
    try:
        skills: list[SkillSpec] = parse_skills(config.get("skills-json"))
    except HarnessFailure:
        return
    if skills:
        verify_skills(skills, parse_skill_pins(policy.get("skill_pins")))
