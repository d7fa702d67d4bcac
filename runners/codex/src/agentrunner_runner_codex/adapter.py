"""The Codex command line of one run (runner-requirements §b.9) and its settings."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import orjson
from agentrunner_harness import (
    HarnessFailure,
    HarnessPlan,
    HarnessSettings,
    Invocation,
    NativeResult,
    config_bool,
    config_str,
    ensure_private_dir,
)

from .native import CodexParser

__all__ = ["API_KEY_ENV", "PREFIX", "CodexAdapter", "CodexSettings"]

PREFIX: Final = "codex"
"""Error-code prefix."""
API_KEY_ENV: Final = "AGENTRUNNER_CODEX_API_KEY"
"""Variable the configured model provider reads its key from (the key never goes into a file)."""
_PROVIDER: Final = "agentrunner"
_APPROVALS: Final = ("never", "on-request", "on-failure", "untrusted")
_SANDBOXES: Final = ("read-only", "workspace-write", "danger-full-access")
_LAST_MESSAGE: Final = "last-message.txt"
_OVERRIDE_KEY: Final = re.compile(r"^[A-Za-z0-9_.\-\"]+$")
_SESSION_GONE: Final = re.compile(
    r"(?i)(no (rollout|session|thread) found|session .*not found|thread .*not found|could not find)"
)


def _toml(value: str) -> str:
    return orjson.dumps(value).decode()  # a JSON string literal is a TOML basic string


@dataclass(frozen=True, slots=True, kw_only=True)
class CodexSettings:
    """The Codex-only fields."""

    profile: str | None = None
    """``--profile``."""
    approval_policy: str = "never"
    """``approval_policy``."""
    sandbox: str = "read-only"
    """``--sandbox``."""
    skip_git_repo_check: bool = True
    """``--skip-git-repo-check``."""
    ephemeral: bool = False
    """``--ephemeral`` (no session kept: nothing to resume)."""
    ignore_rules: bool = False
    """``--ignore-rules``."""
    config_overrides: tuple[str, ...] = ()
    """``key=value`` lines → ``--config``."""

    @classmethod
    def from_config(cls, config: Mapping[str, object], *, allow_full_access: bool) -> CodexSettings:
        approval = config_str(config, "approval-policy", "never") or "never"
        if approval not in _APPROVALS:
            raise HarnessFailure("config_invalid", f"approval-policy must be one of {', '.join(_APPROVALS)}")
        sandbox = config_str(config, "sandbox", "read-only") or "read-only"
        if sandbox not in _SANDBOXES:
            raise HarnessFailure("config_invalid", f"sandbox must be one of {', '.join(_SANDBOXES)}")
        if sandbox == "danger-full-access" and not allow_full_access:
            raise HarnessFailure(
                "config_invalid",
                "sandbox danger-full-access needs the operator switch [security] allow_danger_full_access",
            )
        fmt = config_str(config, "output-format", "json") or "json"
        if fmt not in {"json", "text"}:
            raise HarnessFailure("config_invalid", "output-format must be json or text")
        overrides: list[str] = []
        for line in (config_str(config, "config-overrides") or "").splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, _ = line.partition("=")
            if not sep or not _OVERRIDE_KEY.match(key.strip()):
                raise HarnessFailure("config_invalid", f"config-overrides: {line!r} is not key=value")
            if key.strip().split(".")[0] in {
                "model_providers",
                "mcp_servers",
                "sandbox_mode",
                "approval_policy",
            }:
                raise HarnessFailure(
                    "config_invalid", f"config-overrides may not set {key.strip()!r}; use its own field"
                )
            overrides.append(line)
        return cls(
            profile=config_str(config, "profile"),
            approval_policy=approval,
            sandbox=sandbox,
            skip_git_repo_check=config_bool(config, "skip-git-repo-check", True),
            ephemeral=config_bool(config, "ephemeral", False),
            ignore_rules=config_bool(config, "ignore-rules", False),
            config_overrides=tuple(overrides),
        )


def _output_format(config: Mapping[str, object]) -> str:
    return config_str(config, "output-format", "json") or "json"


class CodexAdapter:
    """:class:`agentrunner_harness.HarnessAdapter` for ``codex exec --json``."""

    prefix = PREFIX
    default_command = "codex"

    def settings(self, config: Mapping[str, object]) -> HarnessSettings:
        CodexSettings.from_config(config, allow_full_access=True)  # the operator switch is checked per run
        return HarnessSettings.from_config(config, default_command=self.default_command)

    def skills_parent(self, workdir: Path, run_dir: Path) -> Path:
        return run_dir / "codex-skills"

    def invocation(self, plan: HarnessPlan) -> Invocation:
        s = plan.settings
        c = CodexSettings.from_config(plan.ctx.config, allow_full_access=plan.policy.allow_danger_full_access)
        argv = [s.cli_command, "exec"]
        if plan.resume_session:
            argv += ["resume", plan.resume_session]
        if _output_format(plan.ctx.config) == "json":
            argv.append("--json")
        argv += ["--output-last-message", str(plan.run_dir / _LAST_MESSAGE)]
        if s.model:
            argv += ["--model", s.model]
        if not plan.resume_session:
            # Not accepted by `exec resume`: the session keeps the ones it started with.
            if c.profile:
                argv += ["--profile", c.profile]
            argv += ["--sandbox", c.sandbox, "--cd", str(plan.workdir)]
        if c.skip_git_repo_check:
            argv.append("--skip-git-repo-check")
        if c.ephemeral:
            argv.append("--ephemeral")
        if c.ignore_rules:
            argv.append("--ignore-rules")
        argv += ["--config", f"approval_policy={_toml(c.approval_policy)}"]
        env: dict[str, str] = {}
        secrets: tuple[str, ...] = ()
        if s.api_base_url:
            prefix = f"model_providers.{_PROVIDER}"
            argv += [
                "--config", f"model_provider={_toml(_PROVIDER)}",
                "--config", f"{prefix}.name={_toml(_PROVIDER)}",
                "--config", f"{prefix}.base_url={_toml(s.api_base_url)}",
                "--config", f"{prefix}.env_key={_toml(API_KEY_ENV)}",
                "--config", f"{prefix}.wire_api={_toml('responses')}",
            ]  # fmt: skip
            if s.api_key:
                env[API_KEY_ENV] = s.api_key
        elif s.api_key:
            env["OPENAI_API_KEY"] = s.api_key
        if s.api_key:
            secrets = (s.api_key,)
        for line in c.config_overrides:
            argv += ["--config", line]
        if plan.bridge is not None:
            argv += plan.bridge.codex_cli_overrides()
        for name, server in plan.extra_mcp_servers.items():
            for key, value in server.items():
                argv += ["--config", f"mcp_servers.{name}.{key}={orjson.dumps(value).decode()}"]
        argv += list(s.extra_args)
        argv.append("-")  # the prompt comes on stdin, which is closed after it
        # CODEX_HOME per workspace: Codex keeps its sessions (what `exec resume` reads) under it.
        codex_home = ensure_private_dir(plan.context_dir / "codex-home")
        env["CODEX_HOME"] = str(codex_home)
        return Invocation(
            argv=argv, env=env, home=ensure_private_dir(plan.context_dir / "home"), secrets=secrets
        )

    def parser(self, plan: HarnessPlan) -> CodexParser:
        return CodexParser(jsonl=_output_format(plan.ctx.config) == "json")

    def final_text(self, plan: HarnessPlan) -> str | None:
        path = plan.run_dir / _LAST_MESSAGE
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            return None
        return text if text.strip() else None

    def session_missing(self, stderr: str, result: NativeResult | None) -> bool:
        said = stderr + " " + ((result.error_message or "") if result is not None else "")
        return bool(_SESSION_GONE.search(said))
