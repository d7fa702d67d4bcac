"""The codex runner's declaration; ``manifest.yaml`` declares the same for discovery (a test keeps them equal)."""

from __future__ import annotations

from typing import Final

from agentrunner import AgentRunnerManifest, I18nObject
from agentrunner_harness.schema import (
    HARNESS_CAPABILITIES,
    HARNESS_CONTEXT,
    HARNESS_PERMISSIONS,
    common_fields,
    form_field,
)

__all__ = ["MANIFEST", "RUNNER_ID"]

RUNNER_ID: Final = "plugin:langbot/codex-agent/default"
"""The official runner id (as ``migrate-config`` and the spec name it)."""

CONFIG_SCHEMA: Final = [
    *common_fields(
        default_command="codex",
        api_key_help_en='API key of the model provider (OPENAI_API_KEY, or the provider at api-base-url); use {"env": "VAR"}.',
        api_key_help_zh='模型服务的 API 密钥（OPENAI_API_KEY，或 api-base-url 指定的服务）；请写成 {"env": "变量名"}。',
    ),
    form_field(
        "profile",
        "string",
        "Profile",
        "配置档",
        help_en="--profile of Codex.",
        help_zh="Codex 的 --profile。",
        default="",
    ),
    form_field(
        "approval-policy",
        "select",
        "Approval policy",
        "审批策略",
        help_en="approval_policy of Codex.",
        help_zh="Codex 的 approval_policy。",
        default="never",
        options=("never", "on-request", "on-failure", "untrusted"),
    ),
    form_field(
        "sandbox",
        "select",
        "Sandbox",
        "沙箱",
        help_en="--sandbox; danger-full-access needs the operator switch [security] allow_danger_full_access.",
        help_zh="--sandbox；danger-full-access 需要运维开关 [security] allow_danger_full_access。",
        default="read-only",
        options=("read-only", "workspace-write", "danger-full-access"),
    ),
    form_field(
        "output-format",
        "select",
        "Output format",
        "输出格式",
        help_en="json (JSONL events, streamed) or text.",
        help_zh="json（JSONL 事件，流式）或 text。",
        default="json",
        options=("json", "text"),
    ),
    form_field(
        "skip-git-repo-check",
        "boolean",
        "Skip the git check",
        "跳过 git 检查",
        help_en="--skip-git-repo-check.",
        help_zh="--skip-git-repo-check。",
        default=True,
    ),
    form_field(
        "ephemeral",
        "boolean",
        "Ephemeral",
        "临时会话",
        help_en="--ephemeral: keep no session (nothing to resume).",
        help_zh="--ephemeral：不保留会话（无法续接）。",
        default=False,
    ),
    form_field(
        "ignore-rules",
        "boolean",
        "Ignore rules",
        "忽略规则",
        help_en="--ignore-rules.",
        help_zh="--ignore-rules。",
        default=False,
    ),
    form_field(
        "config-overrides",
        "text",
        "Config overrides",
        "配置覆盖",
        help_en="One key=value per line, each passed as --config.",
        help_zh="每行一个 key=value，逐个作为 --config 传入。",
        default="",
    ),
]

MANIFEST: Final = AgentRunnerManifest(
    id=RUNNER_ID,
    name="default",
    label=I18nObject(en_US="Codex", zh_Hans="Codex"),
    description=I18nObject(
        en_US="Runs the Codex CLI on each event; it reaches the host's tools through the MCP bridge.",
        zh_Hans="每个事件运行一次 Codex CLI；它通过 MCP 桥访问宿主的工具。",
    ),
    capabilities=HARNESS_CAPABILITIES,
    permissions=HARNESS_PERMISSIONS,
    context=HARNESS_CONTEXT,
    config_schema=CONFIG_SCHEMA,
)
