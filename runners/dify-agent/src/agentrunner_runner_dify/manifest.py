"""The Dify runner's declaration. ``manifest.yaml`` at the plugin root says the same for discovery; a test
keeps the two equal. Field names are the legacy pipeline's (``dify-service-api``), so a migrated config fits."""

from __future__ import annotations

from typing import Final

from agentrunner import (
    AgentRunnerCapabilities,
    AgentRunnerManifest,
    AgentRunnerPermissions,
    I18nObject,
)
from agentrunner_http_kit import form_field

__all__ = ["APP_TYPES", "DEFAULT_BASE_PROMPT", "MANIFEST", "RUNNER_ID"]

RUNNER_ID: Final = "plugin:langbot/dify-agent/default"
"""The official runner id (what ``agentrunner migrate-config`` maps ``dify-service-api`` to)."""

APP_TYPES: Final = ("chat", "agent", "chatflow", "workflow")
"""Dify app types: chat, agent and chatflow apps use ``/chat-messages``; workflow apps ``/workflows/run``."""

DEFAULT_BASE_PROMPT: Final = (
    "When the file content is readable, please read the content of this file. "
    "When the file is an image, describe the content of this image."
)

CONFIG_SCHEMA: Final = [
    form_field(
        "base-url",
        "string",
        ("Base URL", "API 地址"),
        ("Dify service API base URL, ending in /v1.", "Dify 服务 API 地址，以 /v1 结尾。"),
        default="https://api.dify.ai/v1",
        required=True,
    ),
    form_field(
        "api-key",
        "string",
        ("API key", "API 密钥"),
        (
            'The app\'s API key; give {"env": "VAR"} so it stays out of files.',
            '应用的 API 密钥；请写成 {"env": "VAR"}，不要写入文件。',
        ),
        required=True,
        secret=True,
    ),
    form_field(
        "app-type",
        "select",
        ("App type", "应用类型"),
        (
            "chat, agent and chatflow apps chat; workflow apps run once per message.",
            "聊天/Agent/Chatflow 应用对话；工作流应用每条消息运行一次。",
        ),
        default="chat",
        options=APP_TYPES,
    ),
    form_field(
        "base-prompt",
        "string",
        ("Base prompt", "基础提示词"),
        ("Sent as the query when a message has files but no text.", "消息只有文件没有文字时作为提问发送。"),
        default=DEFAULT_BASE_PROMPT,
    ),
    form_field(
        "timeout",
        "float",
        ("Timeout (seconds)", "超时（秒）"),
        (
            "Time limit of the whole exchange; the host's deadline still applies.",
            "整次请求的时间上限；宿主的截止时间仍然生效。",
        ),
        default=30,
    ),
    form_field(
        "remove-think",
        "boolean",
        ("Remove thinking", "移除思考过程"),
        ("Remove <think>...</think> blocks from replies.", "从回复中移除 <think>...</think> 思考内容。"),
        default=False,
    ),
]

MANIFEST: Final = AgentRunnerManifest(
    id=RUNNER_ID,
    name="default",
    label=I18nObject(en_US="Dify", zh_Hans="Dify"),
    description=I18nObject(
        en_US="Answers with a Dify app (chat, agent, chatflow or workflow) through its service API.",
        zh_Hans="通过 Dify 服务 API 使用 Dify 应用（聊天、Agent、Chatflow 或工作流）回答。",
    ),
    capabilities=AgentRunnerCapabilities(
        streaming=True, multimodal_input=True, stateful_session=True, interrupt=True
    ),
    permissions=AgentRunnerPermissions(artifacts=["metadata", "read"]),
    config_schema=CONFIG_SCHEMA,
)
"""The runner's manifest."""
