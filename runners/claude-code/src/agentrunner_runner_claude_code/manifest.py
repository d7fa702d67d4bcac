"""The claude-code runner's declaration; ``manifest.yaml`` declares the same for discovery (a test keeps them equal)."""

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

RUNNER_ID: Final = "plugin:langbot/claude-code-agent/default"
"""The official runner id (as ``migrate-config`` and the spec name it)."""

CONFIG_SCHEMA: Final = [
    *common_fields(
        default_command="claude",
        api_key_help_en='Anthropic API key for the CLI (ANTHROPIC_API_KEY); use {"env": "VAR"}.',
        api_key_help_zh='CLI 使用的 Anthropic API 密钥（ANTHROPIC_API_KEY）；请写成 {"env": "变量名"}。',
    ),
    form_field(
        "output-format",
        "select",
        "Output format",
        "输出格式",
        help_en="stream-json streams the reply as it is written; json and text answer at the end.",
        help_zh="stream-json 边生成边输出；json 与 text 在结束时输出。",
        default="json",
        options=("json", "stream-json", "text"),
    ),
    form_field(
        "verbose",
        "boolean",
        "Verbose",
        "详细输出",
        help_en="Pass --verbose (always on with stream-json).",
        help_zh="传入 --verbose（stream-json 时总是开启）。",
        default=False,
    ),
    form_field(
        "max-turns",
        "integer",
        "Max turns",
        "最大轮数",
        help_en="--max-turns; a tool round trip needs at least 2.",
        help_zh="--max-turns；一次工具往返至少需要 2 轮。",
        default=1,
    ),
    form_field(
        "permission-mode",
        "select",
        "Permission mode",
        "权限模式",
        help_en="--permission-mode of Claude Code.",
        help_zh="Claude Code 的 --permission-mode。",
        default="plan",
        options=("plan", "default", "acceptEdits", "bypassPermissions", "dontAsk", "auto"),
    ),
    form_field(
        "tools",
        "string",
        "Built-in tools",
        "内置工具",
        help_en='--tools: the built-in tools offered ("" for none, empty: the default set).',
        help_zh="--tools：提供的内置工具（留空为默认集合）。",
        default="",
    ),
    form_field(
        "allowed-tools",
        "string",
        "Allowed tools",
        "允许的工具",
        help_en="--allowedTools, comma-separated (the host's bridge tools are always added).",
        help_zh="--allowedTools，逗号分隔（宿主桥接工具总会加入）。",
        default="",
    ),
    form_field(
        "disallowed-tools",
        "string",
        "Disallowed tools",
        "禁止的工具",
        help_en="--disallowedTools, comma-separated.",
        help_zh="--disallowedTools，逗号分隔。",
        default="AskUserQuestion",
    ),
    form_field(
        "strict-mcp-config",
        "boolean",
        "Only projected MCP servers",
        "仅使用投影的 MCP 服务器",
        help_en="--strict-mcp-config: ignore MCP servers from the user's settings.",
        help_zh="--strict-mcp-config：忽略用户设置中的 MCP 服务器。",
        default=True,
    ),
    form_field(
        "setting-sources",
        "string",
        "Setting sources",
        "设置来源",
        help_en="--setting-sources (user, project, local).",
        help_zh="--setting-sources（user、project、local）。",
        default="",
    ),
]

MANIFEST: Final = AgentRunnerManifest(
    id=RUNNER_ID,
    name="default",
    label=I18nObject(en_US="Claude Code", zh_Hans="Claude Code"),
    description=I18nObject(
        en_US="Runs the Claude Code CLI on each event; it reaches the host's tools through the MCP bridge.",
        zh_Hans="每个事件运行一次 Claude Code CLI；它通过 MCP 桥访问宿主的工具。",
    ),
    capabilities=HARNESS_CAPABILITIES,
    permissions=HARNESS_PERMISSIONS,
    context=HARNESS_CONTEXT,
    config_schema=CONFIG_SCHEMA,
)
