"""The Coze runner's declaration. ``manifest.yaml`` at the plugin root says the same for discovery; a test
keeps the two equal. Field names are the legacy pipeline's (``coze-api``)."""

from __future__ import annotations

from typing import Final

from agentrunner import AgentRunnerCapabilities, AgentRunnerManifest, AgentRunnerPermissions, I18nObject
from agentrunner_http_kit import form_field

__all__ = ["API_BASES", "MANIFEST", "RUNNER_ID"]

RUNNER_ID: Final = "plugin:langbot/coze-agent/default"
"""The official runner id (what ``agentrunner migrate-config`` maps ``coze-api`` to)."""

API_BASES: Final = ("https://api.coze.cn", "https://api.coze.com")
"""Coze's two regions (any other http(s) base is accepted too, e.g. a gateway)."""

CONFIG_SCHEMA: Final = [
    form_field(
        "api-key",
        "string",
        ("API key", "API 密钥"),
        ('A Coze personal access token; give {"env": "VAR"}.', 'Coze 个人访问令牌；请写成 {"env": "VAR"}。'),
        required=True,
        secret=True,
    ),
    form_field(
        "bot-id",
        "string",
        ("Bot ID", "Bot ID"),
        ("The id of the published bot.", "已发布 Bot 的 ID。"),
        required=True,
    ),
    form_field(
        "api-base",
        # A string with the two regions as suggestions, not a select: the runner takes any http(s) base
        # (a gateway, a self-hosted proxy), and admission checks a select's value against its options.
        "string",
        ("API base", "API 地址"),
        (
            "coze.cn (China), coze.com (international) or another http(s) base such as a gateway.",
            "coze.cn（国内）、coze.com（国际），或其他 http(s) 地址（如网关）。",
        ),
        default="https://api.coze.cn",
        options=API_BASES,
    ),
    form_field(
        "auto-save-history",
        "boolean",
        ("Save history on Coze", "在 Coze 保存历史"),
        (
            "Let Coze keep the conversation's messages (needed for multi-turn context).",
            "由 Coze 保存会话消息（多轮上下文需要）。",
        ),
        default=True,
    ),
    form_field(
        "timeout",
        "float",
        ("Timeout (seconds)", "超时（秒）"),
        (
            "Time limit of the whole exchange; the host's deadline still applies.",
            "整次请求的时间上限；宿主的截止时间仍然生效。",
        ),
        default=120,
    ),
    form_field(
        "remove-think",
        "boolean",
        ("Remove thinking", "移除思考过程"),
        ("Leave the bot's reasoning out of replies.", "回复中不包含 Bot 的思考过程。"),
        default=False,
    ),
]

MANIFEST: Final = AgentRunnerManifest(
    id=RUNNER_ID,
    name="default",
    label=I18nObject(en_US="Coze", zh_Hans="扣子 Coze"),
    description=I18nObject(
        en_US="Answers with a Coze bot through the v3 chat API, images and files included.",
        zh_Hans="通过 v3 对话 API 使用 Coze Bot 回答，支持图片和文件。",
    ),
    capabilities=AgentRunnerCapabilities(
        streaming=True, multimodal_input=True, stateful_session=True, interrupt=True
    ),
    permissions=AgentRunnerPermissions(artifacts=["metadata", "read"]),
    config_schema=CONFIG_SCHEMA,
)
"""The runner's manifest."""
