"""The runner's declaration: capabilities and configuration form (``manifest.yaml`` says the same; a test keeps
the two equal)."""

from __future__ import annotations

from typing import Final

from agentrunner import AgentRunnerCapabilities, AgentRunnerManifest, DynamicFormItemSchema, I18nObject
from pydantic import JsonValue

from .config import DEFAULT_BASE_URL, DEFAULT_TIMEOUT

__all__ = ["MANIFEST", "RUNNER_ID"]

RUNNER_ID: Final = "plugin:langbot/langflow-agent/default"
"""The official runner id (what ``agentrunner migrate-config`` writes for ``langflow-api``)."""


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
        "base-url",
        "string",
        ("Base URL", "基础 URL"),
        (
            "The Langflow server, e.g. http://localhost:7860.",
            "Langflow 服务地址，例如 http://localhost:7860。",
        ),
        default=DEFAULT_BASE_URL,
        required=True,
    ),
    _field(
        "api-key",
        "string",
        ("API key", "API 密钥"),
        (
            'A Langflow API key, sent as x-api-key; give it as {"env": "VAR"}.',
            'Langflow API Key（以 x-api-key 发送）；请以 {"env": "变量名"} 引用环境变量。',
        ),
        default="",
        required=True,
        secret=True,
    ),
    _field(
        "flow-id",
        "string",
        ("Flow ID", "流程 ID"),
        ("The flow's id or endpoint name.", "流程 ID 或端点名称。"),
        default="",
        required=True,
    ),
    _field(
        "input-type",
        "string",
        ("Input type", "输入类型"),
        ("Langflow's input_type (chat, text or any).", "Langflow 的 input_type（chat、text 或 any）。"),
        default="chat",
    ),
    _field(
        "output-type",
        "string",
        ("Output type", "输出类型"),
        (
            "Langflow's output_type (chat, text, any or debug).",
            "Langflow 的 output_type（chat、text、any 或 debug）。",
        ),
        default="chat",
    ),
    _field(
        "tweaks",
        "json",
        ("Tweaks", "调整参数"),
        (
            "Per-component overrides as a JSON object (component id → fields); invalid JSON is refused.",
            "按组件覆盖参数的 JSON 对象（组件 ID → 字段）；非法 JSON 会被拒绝。",
        ),
        default="{}",
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
    label=I18nObject(en_US="Langflow", zh_Hans="Langflow"),
    description=I18nObject(
        en_US="Runs a Langflow flow through its run API, streamed token by token or as one answer.",
        zh_Hans="通过 run API 运行 Langflow 流程，可逐 token 流式输出或一次性返回。",
    ),
    capabilities=AgentRunnerCapabilities(streaming=True, stateful_session=True, interrupt=True),
    config_schema=CONFIG_SCHEMA,
)
"""The runner's manifest."""
