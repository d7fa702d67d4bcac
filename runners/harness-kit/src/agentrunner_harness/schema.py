"""Configuration-form items both harness runners declare (labels in English and Chinese)."""

from __future__ import annotations

from typing import Final

from agentrunner import (
    AgentRunnerCapabilities,
    AgentRunnerContextPolicy,
    AgentRunnerPermissions,
    DynamicFormItemSchema,
    FormOption,
    I18nObject,
)
from pydantic import JsonValue

from .settings import DEFAULT_CONTEXT_DIRECTORY, DEFAULT_TIMEOUT_SECONDS

__all__ = ["HARNESS_CAPABILITIES", "HARNESS_CONTEXT", "HARNESS_PERMISSIONS", "common_fields", "form_field"]

# Both harness runners (claude-code, codex) declare the same surface: the CLI owns its loop, context and
# compaction, executes code, and reaches the host only through the MCP bridge.
HARNESS_CAPABILITIES: Final = AgentRunnerCapabilities(
    streaming=True,
    tool_calling=True,
    knowledge_retrieval=True,
    event_context=True,
    stateful_session=True,
    interrupt=True,
    self_managed_context=True,
    executes_code=True,
    mcp_bridge=True,
)
"""Capabilities of a harness runner."""

HARNESS_PERMISSIONS: Final = AgentRunnerPermissions(
    tools=["detail", "call"], knowledge_bases=["list", "retrieve"], history=["page"], events=["get"]
)
"""What a harness runner asks for: the host tools the bridge projects."""

HARNESS_CONTEXT: Final = AgentRunnerContextPolicy(
    supports_history_pull=True,
    supports_history_search=False,
    supports_artifact_pull=False,
    owns_compaction=True,
    wants_static_context_refs=False,
)
"""Context policy of a harness runner: the CLI keeps its own session and compacts it."""


def form_field(
    name: str,
    type_: str,
    en: str,
    zh: str,
    *,
    help_en: str,
    help_zh: str,
    default: JsonValue = None,
    options: tuple[str, ...] = (),
    secret: bool = False,
) -> DynamicFormItemSchema:
    """One form item."""
    return DynamicFormItemSchema(
        name=name,
        type=type_,
        label=I18nObject(en_US=en, zh_Hans=zh),
        description=I18nObject(en_US=help_en, zh_Hans=help_zh),
        default=default,
        options=[FormOption(name=o, label=I18nObject(en_US=o, zh_Hans=o)) for o in options],
        secret=secret,
    )


_WORKSPACE: Final = (
    (
        "working-directory",
        "string",
        "Working directory",
        "工作目录",
        "Directory the CLI works in; must be inside the operator's allowed workspace roots. Empty: one directory per conversation under the host's data directory.",
        "CLI 的工作目录，必须位于运维允许的工作区根目录内；留空则在宿主数据目录下为每个会话创建目录。",
        "",
    ),
    (
        "inject-context",
        "boolean",
        "Write run context files",
        "写入运行上下文文件",
        "Write agent-context.json and LANGBOT_CONTEXT.md for the CLI to read.",
        "写入 agent-context.json 与 LANGBOT_CONTEXT.md 供 CLI 读取。",
        True,
    ),
    (
        "context-directory",
        "string",
        "Context directory",
        "上下文目录",
        "Where the context files go, relative to the working directory.",
        "上下文文件的位置（相对工作目录）。",
        DEFAULT_CONTEXT_DIRECTORY,
    ),
    (
        "enable-langbot-mcp",
        "boolean",
        "Host tools over MCP",
        "通过 MCP 提供宿主工具",
        "Give the CLI the run's authorized tools, history and knowledge through the host's MCP bridge.",
        "通过宿主的 MCP 桥向 CLI 提供本次运行授权的工具、历史与知识库。",
        True,
    ),
    (
        "inject-skills",
        "boolean",
        "Project skills",
        "投影技能",
        "Write the skills of skills-json as read-only SKILL.md directories.",
        "将 skills-json 中的技能写成只读的 SKILL.md 目录。",
        True,
    ),
    (
        "skills-json",
        "json",
        "Skills",
        "技能",
        'A list of {"name", "content", "files": [{"path", "content"}]}.',
        '技能列表：{"name", "content", "files": [{"path", "content"}]}。',
        None,
    ),
    (
        "mcp-config-json",
        "json",
        "Extra MCP servers",
        "额外 MCP 服务器",
        '{"mcpServers": {...}}; only servers matching an operator pin '
        "([[security.harness_mcp_servers]]: same command and args, or URL).",
        '{"mcpServers": {...}}；仅限与运维固定项一致的服务器（[[security.harness_mcp_servers]]：命令与参数或 URL 相同）。',
        None,
    ),
    (
        "mcp-config-file",
        "string",
        "Extra MCP config file",
        "额外 MCP 配置文件",
        "A file holding the same document, inside the allowed workspace roots.",
        "包含同样内容的文件，须位于允许的工作区根目录内。",
        "",
    ),
    (
        "model",
        "string",
        "Model",
        "模型",
        "Model name passed to the CLI (empty: the CLI's default).",
        "传给 CLI 的模型名（留空则使用 CLI 默认值）。",
        "",
    ),
    (
        "resume",
        "boolean",
        "Resume the session",
        "续接会话",
        "Continue the CLI's own session of this conversation on the next turn.",
        "下一轮继续该会话在 CLI 中的原生会话。",
        True,
    ),
    (
        "timeout",
        "integer",
        "Timeout (seconds)",
        "超时（秒）",
        "Time limit of one CLI run; the host's deadline still applies.",
        "单次 CLI 运行的时间上限；宿主截止时间仍然生效。",
        DEFAULT_TIMEOUT_SECONDS,
    ),
    (
        "api-base-url",
        "string",
        "Model API base URL",
        "模型 API 地址",
        "Base URL of the model API the CLI calls (empty: the CLI's default).",
        "CLI 调用的模型 API 地址（留空则使用默认值）。",
        "",
    ),
    (
        "environment-json",
        "json",
        "Environment variables",
        "环境变量",
        "Non-secret variables for the CLI (proxy settings and the like); credentials are refused here.",
        "传给 CLI 的非敏感环境变量（如代理设置）；此处不接受凭据。",
        None,
    ),
    (
        "cpu-time-limit",
        "integer",
        "CPU time limit (seconds)",
        "CPU 时间上限（秒）",
        "RLIMIT_CPU of the CLI and its children (0: none).",
        "CLI 及其子进程的 RLIMIT_CPU（0 表示不限制）。",
        0,
    ),
    (
        "memory-limit-mb",
        "integer",
        "Address-space limit (MiB)",
        "地址空间上限（MiB）",
        "RLIMIT_AS of each CLI process (0: none); Node-based CLIs need several GiB.",
        "每个 CLI 进程的 RLIMIT_AS（0 表示不限制）；基于 Node 的 CLI 需要数 GiB。",
        0,
    ),
)


def common_fields(
    *, default_command: str, api_key_help_en: str, api_key_help_zh: str
) -> list[DynamicFormItemSchema]:
    """The shared items, led by ``cli-command``, ``extra-args`` and the secret ``api-key``."""
    items = [
        form_field(
            "cli-command",
            "string",
            "CLI command",
            "CLI 命令",
            help_en="The CLI to run: a name on PATH or a path.",
            help_zh="要运行的 CLI：PATH 中的命令名或路径。",
            default=default_command,
        ),
        form_field(
            "extra-args",
            "string",
            "Extra arguments",
            "额外参数",
            help_en="More CLI arguments, shell-quoted.",
            help_zh="额外的 CLI 参数（按 shell 规则引用）。",
            default="",
        ),
        form_field(
            "api-key",
            "string",
            "Model API key",
            "模型 API 密钥",
            help_en=api_key_help_en,
            help_zh=api_key_help_zh,
            default="",
            secret=True,
        ),
    ]
    for name, type_, en, zh, help_en, help_zh, default in _WORKSPACE:
        items.append(form_field(name, type_, en, zh, help_en=help_en, help_zh=help_zh, default=default))
    return items
