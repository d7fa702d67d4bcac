"""The runner's declaration: capabilities and configuration form (``manifest.yaml`` says the same; a test keeps
the two equal)."""

from __future__ import annotations

from typing import Final

from agentrunner import (
    AgentRunnerCapabilities,
    AgentRunnerManifest,
    DynamicFormItemSchema,
    FormOption,
    I18nObject,
)
from pydantic import JsonValue

from .config import DEFAULT_BASE_URL, DEFAULT_TIMEOUT
from .events import DEFAULT_REFERENCES_QUOTE

__all__ = ["MANIFEST", "RUNNER_ID"]

RUNNER_ID: Final = "plugin:langbot/dashscope-agent/default"
"""The official runner id (what ``agentrunner migrate-config`` writes for ``dashscope-app-api``)."""


def _field(
    name: str,
    type_: str,
    label: tuple[str, str],
    help_: tuple[str, str],
    *,
    default: JsonValue = None,
    required: bool = False,
    secret: bool = False,
    options: list[FormOption] | None = None,
    aliases: tuple[str, ...] = (),
) -> DynamicFormItemSchema:
    return DynamicFormItemSchema(
        name=name,
        type=type_,
        label=I18nObject(en_US=label[0], zh_Hans=label[1]),
        description=I18nObject(en_US=help_[0], zh_Hans=help_[1]),
        default=default,
        required=required,
        secret=secret,
        options=options or [],
        aliases=list(aliases),
    )


CONFIG_SCHEMA: Final = [
    _field(
        "app-type",
        "select",
        ("App type", "应用类型"),
        ("An agent application or a workflow application.", "智能体应用或工作流应用。"),
        default="agent",
        required=True,
        options=[
            FormOption(name="agent", label=I18nObject(en_US="Agent", zh_Hans="智能体")),
            FormOption(name="workflow", label=I18nObject(en_US="Workflow", zh_Hans="工作流")),
        ],
    ),
    _field(
        "api-key",
        "string",
        ("API key", "API 密钥"),
        (
            'The DashScope API key; give it as {"env": "VAR"}.',
            '百炼 API Key；请以 {"env": "变量名"} 引用环境变量。',
        ),
        default="",
        required=True,
        secret=True,
    ),
    _field(
        "app-id",
        "string",
        ("App ID", "应用 ID"),
        ("The application's id in Model Studio.", "百炼控制台中的应用 ID。"),
        default="",
        required=True,
    ),
    _field(
        "references_quote",
        "string",
        ("References quote", "引用文本"),
        (
            "Put before the document name of a cited reference (references-quote is read too).",
            "引用文档名称前的文字（也接受 references-quote）。",
        ),
        default=DEFAULT_REFERENCES_QUOTE,
        # LangBot's default pipeline spelled it with a hyphen and migrate-config copies keys verbatim.
        aliases=("references-quote",),
    ),
    _field(
        "base-url",
        "string",
        ("Base URL", "基础 URL"),
        (
            "The API endpoint up to /api/v1; international region: https://dashscope-intl.aliyuncs.com/api/v1.",
            "接口地址（到 /api/v1）；国际站：https://dashscope-intl.aliyuncs.com/api/v1。",
        ),
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
    label=I18nObject(en_US="DashScope", zh_Hans="阿里云百炼"),
    description=I18nObject(
        en_US="Runs an Alibaba Cloud Model Studio (DashScope) agent or workflow application.",
        zh_Hans="调用阿里云百炼的智能体或工作流应用。",
    ),
    capabilities=AgentRunnerCapabilities(streaming=True, stateful_session=True, interrupt=True),
    config_schema=CONFIG_SCHEMA,
)
"""The runner's manifest."""
