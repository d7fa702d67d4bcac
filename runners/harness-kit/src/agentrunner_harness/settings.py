"""The configuration fields both harness runners share (runner-requirements §b.7–b.9), read from ``ctx.config``.

Names are the legacy kebab-case ones so a migrated pipeline's config is copied verbatim. A value of the
wrong type is ``config_invalid`` naming the field, before anything is written or spawned.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from .errors import HarnessFailure

__all__ = [
    "DEFAULT_CONTEXT_DIRECTORY",
    "DEFAULT_TIMEOUT_SECONDS",
    "HarnessSettings",
    "config_bool",
    "config_int",
    "config_str",
]

DEFAULT_TIMEOUT_SECONDS: Final = 300
"""``timeout`` when none is configured."""
DEFAULT_CONTEXT_DIRECTORY: Final = ".langbot/agent-runner"
"""``context-directory`` when none is configured."""


def config_str(config: Mapping[str, object], name: str, default: str | None = None) -> str | None:
    """A string field (empty = unset)."""
    value = config.get(name, default)
    if value is None or value == "":
        return default
    if not isinstance(value, str):
        raise HarnessFailure("config_invalid", f"config field {name!r} must be a string")
    return value


def config_bool(config: Mapping[str, object], name: str, default: bool) -> bool:
    """A boolean field (also ``"true"``/``"false"`` from form inputs)."""
    value = config.get(name, default)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in {"true", "false"}:
        return value.lower() == "true"
    raise HarnessFailure("config_invalid", f"config field {name!r} must be true or false")


def config_int(config: Mapping[str, object], name: str, default: int, *, minimum: int = 0) -> int:
    """An integer field ``>= minimum``."""
    value = config.get(name, default)
    if value is None or value == "":
        return default
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise HarnessFailure("config_invalid", f"config field {name!r} must be an integer")
    try:
        number = int(value)
    except ValueError:
        raise HarnessFailure("config_invalid", f"config field {name!r} must be an integer") from None
    if number < minimum:
        raise HarnessFailure("config_invalid", f"config field {name!r} must be at least {minimum}")
    return number


@dataclass(frozen=True, slots=True, kw_only=True)
class HarnessSettings:
    """The shared fields, parsed."""

    cli_command: str
    """The CLI (a name on ``PATH`` or a path)."""
    extra_args: tuple[str, ...] = ()
    """More CLI arguments (``extra-args``, shell-quoted)."""
    working_directory: str | None = None
    """``working-directory``."""
    inject_context: bool = True
    """Write ``agent-context.json`` / ``LANGBOT_CONTEXT.md``."""
    context_directory: str = DEFAULT_CONTEXT_DIRECTORY
    """Where, relative to the working directory."""
    enable_langbot_mcp: bool = True
    """Hand the run's tools to the harness through the host's MCP bridge."""
    inject_skills: bool = True
    """Project ``skills-json``."""
    skills_json: object = None
    """The skills."""
    mcp_config_json: object = None
    """Extra MCP servers (``{"mcpServers": {...}}``), only names in the operator's allowlist."""
    mcp_config_file: str | None = None
    """A file holding the same."""
    model: str | None = None
    """Model name."""
    resume: bool = True
    """Resume the native session stored in conversation state."""
    timeout: int = DEFAULT_TIMEOUT_SECONDS
    """Seconds; the run's deadline still applies."""
    environment_json: object = None
    """Non-secret variables for the CLI."""
    api_key: str | None = None
    """The model API credential (a secret field)."""
    api_base_url: str | None = None
    """The model API's base URL."""
    cpu_time_limit: int = 0
    """``RLIMIT_CPU`` seconds (0 = none)."""
    memory_limit_mb: int = 0
    """``RLIMIT_AS`` MiB (0 = none)."""

    @classmethod
    def from_config(cls, config: Mapping[str, object], *, default_command: str) -> HarnessSettings:
        """Parse the shared fields of *config*."""
        extra = config_str(config, "extra-args") or ""
        try:
            extra_args = tuple(shlex.split(extra))
        except ValueError as exc:
            raise HarnessFailure(
                "config_invalid", f"config field 'extra-args' cannot be split: {exc}"
            ) from exc
        return cls(
            cli_command=config_str(config, "cli-command", default_command) or default_command,
            extra_args=extra_args,
            working_directory=config_str(config, "working-directory"),
            inject_context=config_bool(config, "inject-context", True),
            context_directory=config_str(config, "context-directory", DEFAULT_CONTEXT_DIRECTORY)
            or DEFAULT_CONTEXT_DIRECTORY,
            enable_langbot_mcp=config_bool(config, "enable-langbot-mcp", True),
            inject_skills=config_bool(config, "inject-skills", True),
            skills_json=config.get("skills-json"),
            mcp_config_json=config.get("mcp-config-json"),
            mcp_config_file=config_str(config, "mcp-config-file"),
            model=config_str(config, "model"),
            resume=config_bool(config, "resume", True),
            timeout=config_int(config, "timeout", DEFAULT_TIMEOUT_SECONDS, minimum=1),
            environment_json=config.get("environment-json"),
            api_key=config_str(config, "api-key"),
            api_base_url=config_str(config, "api-base-url"),
            cpu_time_limit=config_int(config, "cpu-time-limit", 0),
            memory_limit_mb=config_int(config, "memory-limit-mb", 0),
        )
