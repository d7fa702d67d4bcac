"""The Claude Code command line of one run (runner-requirements §b.8) and its settings."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, cast

import orjson
from agentrunner_harness import (
    HarnessFailure,
    HarnessPlan,
    HarnessSettings,
    Invocation,
    NativeResult,
    config_bool,
    config_int,
    config_str,
    ensure_private_dir,
)
from agentrunner_mcp import PROXY_TOKEN_ENV

from .native import ClaudeOutputFormat, ClaudeParser

__all__ = ["PREFIX", "ClaudeCodeAdapter", "ClaudeSettings"]

PREFIX: Final = "claude_code"
"""Error-code prefix."""
_FORMATS: Final = ("json", "stream-json", "text")
_PERMISSION_MODES: Final = ("plan", "default", "acceptEdits", "bypassPermissions", "dontAsk", "auto")
_MCP_FILE: Final = "mcp.json"
_SESSION_GONE: Final = re.compile(r"(?i)no conversation found|session .*not found|could not find session")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaudeSettings:
    """The Claude-only fields."""

    output_format: ClaudeOutputFormat = "json"
    """``--output-format``."""
    verbose: bool = False
    """``--verbose`` (always on with stream-json)."""
    max_turns: int = 1
    """``--max-turns``."""
    permission_mode: str = "plan"
    """``--permission-mode``."""
    tools: str | None = None
    """``--tools``."""
    allowed_tools: tuple[str, ...] = ()
    """``--allowedTools`` (the bridge's tools are added)."""
    disallowed_tools: tuple[str, ...] = ("AskUserQuestion",)
    """``--disallowedTools``."""
    strict_mcp_config: bool = True
    """``--strict-mcp-config``: only the projected servers."""
    setting_sources: str | None = None
    """``--setting-sources``."""

    @classmethod
    def from_config(cls, config: Mapping[str, object]) -> ClaudeSettings:
        fmt = config_str(config, "output-format", "json") or "json"
        if fmt not in _FORMATS:
            raise HarnessFailure("config_invalid", f"output-format must be one of {', '.join(_FORMATS)}")
        mode = config_str(config, "permission-mode", "plan") or "plan"
        if mode not in _PERMISSION_MODES:
            raise HarnessFailure(
                "config_invalid", f"permission-mode must be one of {', '.join(_PERMISSION_MODES)}"
            )
        return cls(
            output_format=fmt,
            verbose=config_bool(config, "verbose", False),
            max_turns=config_int(config, "max-turns", 1, minimum=1),
            permission_mode=mode,
            tools=config_str(config, "tools"),
            allowed_tools=_names(config_str(config, "allowed-tools")),
            disallowed_tools=_names(config_str(config, "disallowed-tools", "AskUserQuestion")),
            strict_mcp_config=config_bool(config, "strict-mcp-config", True),
            setting_sources=config_str(config, "setting-sources"),
        )


def _names(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(n for n in re.split(r"[,\s]+", value) if n)


class ClaudeCodeAdapter:
    """:class:`agentrunner_harness.HarnessAdapter` for ``claude -p``."""

    prefix = PREFIX
    default_command = "claude"

    def settings(self, config: Mapping[str, object]) -> HarnessSettings:
        ClaudeSettings.from_config(config)  # checked before anything is written
        return HarnessSettings.from_config(config, default_command=self.default_command)

    def skills_parent(self, workdir: Path, run_dir: Path) -> Path:
        return workdir / ".claude" / "skills"

    def invocation(self, plan: HarnessPlan) -> Invocation:
        s, c = plan.settings, ClaudeSettings.from_config(plan.ctx.config)
        argv = [s.cli_command, "-p", "--output-format", c.output_format]
        if c.verbose or c.output_format == "stream-json":
            argv.append("--verbose")  # stream-json in print mode exits 1 without it
        if s.model:
            argv += ["--model", s.model]
        argv += ["--max-turns", str(c.max_turns), "--permission-mode", c.permission_mode]
        if c.tools is not None:
            argv += ["--tools", c.tools]
        allowed = list(c.allowed_tools)
        servers: dict[str, object] = dict(plan.extra_mcp_servers)
        if plan.bridge is not None:
            config = plan.bridge.claude_mcp_config()
            bridge_servers = config.get("mcpServers")
            if isinstance(bridge_servers, dict):
                for name, server in cast(dict[str, object], bridge_servers).items():
                    servers[name] = _token_from_env(server)
            allowed += plan.bridge.claude_allowed_tools
        if allowed:
            argv += ["--allowedTools", ",".join(allowed)]
        if c.disallowed_tools:
            argv += ["--disallowedTools", ",".join(c.disallowed_tools)]
        if servers:
            path = plan.run_dir / _MCP_FILE
            path.write_bytes(orjson.dumps({"mcpServers": servers}))
            path.chmod(0o600)
            argv += ["--mcp-config", str(path)]
            if c.strict_mcp_config:
                argv.append("--strict-mcp-config")
        if c.setting_sources:
            argv += ["--setting-sources", c.setting_sources]
        if plan.resume_session:
            argv += ["--resume", plan.resume_session]
        argv += list(s.extra_args)
        env = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}
        if s.api_key:
            env["ANTHROPIC_API_KEY"] = s.api_key
        if s.api_base_url:
            env["ANTHROPIC_BASE_URL"] = s.api_base_url
        # HOME per workspace: Claude keeps its sessions (what --resume reads) and settings under it.
        home = ensure_private_dir(plan.context_dir / "home")
        return Invocation(argv=argv, env=env, home=home, secrets=tuple(x for x in (s.api_key,) if x))

    def parser(self, plan: HarnessPlan) -> ClaudeParser:
        return ClaudeParser(ClaudeSettings.from_config(plan.ctx.config).output_format)

    def final_text(self, plan: HarnessPlan) -> str | None:
        return None

    def session_missing(self, stderr: str, result: NativeResult | None) -> bool:
        said = stderr + " " + ((result.error_message or "") if result is not None else "")
        return bool(_SESSION_GONE.search(said))


def _token_from_env(server: object) -> object:
    # Claude Code expands ${VAR} in MCP configs: the bearer token stays in the CLI's environment (the bridge
    # env carries it) instead of the file.
    if not isinstance(server, dict):
        return server
    entry = dict(cast(dict[str, object], server))
    headers = entry.get("headers")
    if isinstance(headers, dict) and "Authorization" in headers:
        entry["headers"] = {
            **cast(dict[str, object], headers),
            "Authorization": f"Bearer ${{{PROXY_TOKEN_ENV}}}",
        }
    return entry
