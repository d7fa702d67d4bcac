"""The runner's declaration: capabilities, permissions and configuration form (``manifest.yaml`` says the same;
a test keeps the two equal)."""

from __future__ import annotations

from typing import Final

from agentrunner import (
    AgentRunnerCapabilities,
    AgentRunnerManifest,
    AgentRunnerPermissions,
    DynamicFormItemSchema,
    I18nObject,
)
from pydantic import JsonValue

from .config import DEFAULT_BASE_URL, DEFAULT_TIMEOUT

__all__ = ["MANIFEST", "RUNNER_ID"]

RUNNER_ID: Final = "plugin:langbot/tbox-agent/default"
"""The official runner id (what ``agentrunner migrate-config`` writes for ``tbox-app-api``)."""


def _field(
    name: str,
    type_: str,
    label: tuple[str, str],
    help_: tuple[str, str],
    *,
    default: JsonValue = None,
    required: bool = False,
    secret: bool = False,
) -> DynamicFormItemSchema:
    return DynamicFormItemSchema(
        name=name,
        type=type_,
        label=I18nObject(en_US=label[0], zh_Hans=label[1]),
        description=I18nObject(en_US=help_[0], zh_Hans=help_[1]),
        default=default,
        required=required,
        secret=secret,
    )


CONFIG_SCHEMA: Final = [
    _field(
        "api-key",
        "string",
        ("API key", "API 密钥"),
        (
            'The Tbox access token, sent as the Authorization header; give it as {"env": "VAR"}.',
            '百宝箱访问令牌（作为 Authorization 头发送）；请以 {"env": "变量名"} 引用环境变量。',
        ),
        default="",
        required=True,
        secret=True,
    ),
    _field(
        "app-id",
        "string",
        ("App ID", "应用 ID"),
        ("The published application's id.", "已发布应用的 AppID。"),
        default="",
        required=True,
    ),
    _field(
        "base-url",
        "string",
        ("Base URL", "基础 URL"),
        ("The open API's address.", "开放平台接口地址。"),
        default=DEFAULT_BASE_URL,
    ),
    _field(
        "timeout",
        "float",
        ("Timeout (seconds)", "超时（秒）"),
        (
            "Longest time one call may take; the run's deadline still applies.",
            "单次调用的最长时间；运行的截止时间仍然生效。",
        ),
        default=int(DEFAULT_TIMEOUT),
    ),
]

MANIFEST: Final = AgentRunnerManifest(
    id=RUNNER_ID,
    name="default",
    label=I18nObject(en_US="Tbox", zh_Hans="百宝箱"),
    description=I18nObject(
        en_US="Runs an Ant Group Tbox chat application, with images and files uploaded to it.",
        zh_Hans="调用蚂蚁百宝箱对话型应用，图片与文件会上传给它。",
    ),
    capabilities=AgentRunnerCapabilities(
        streaming=True, multimodal_input=True, stateful_session=True, interrupt=True
    ),
    permissions=AgentRunnerPermissions(artifacts=["metadata", "read"]),
    config_schema=CONFIG_SCHEMA,
)
"""The runner's manifest."""
