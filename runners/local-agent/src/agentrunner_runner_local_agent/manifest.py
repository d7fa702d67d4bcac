"""The runner's declaration: capabilities, permissions, context policy and configuration form.

``manifest.yaml`` at the plugin root declares the same thing for discovery without importing this code; a test
keeps the two equal.
"""

from __future__ import annotations

from typing import Final

from agentrunner import (
    AgentRunnerCapabilities,
    AgentRunnerContextPolicy,
    AgentRunnerManifest,
    AgentRunnerPermissions,
    DynamicFormItemSchema,
    I18nObject,
)
from pydantic import JsonValue

from .config import DEFAULT_PROMPT, LocalAgentConfig

__all__ = ["MANIFEST", "RUNNER_ID"]

RUNNER_ID: Final = "plugin:langbot/local-agent/default"
"""The official runner id."""

_DEFAULTS: Final = LocalAgentConfig()


def _field(
    name: str,
    type_: str,
    en: str,
    zh: str,
    *,
    help_en: str,
    help_zh: str,
    default: JsonValue = None,
    required: bool = False,
) -> DynamicFormItemSchema:
    return DynamicFormItemSchema(
        name=name,
        type=type_,
        label=I18nObject(en_US=en, zh_Hans=zh),
        description=I18nObject(en_US=help_en, zh_Hans=help_zh),
        default=default,
        required=required,
    )


CONFIG_SCHEMA: Final = [
    _field(
        "model",
        "model-fallback-selector",
        "Model",
        "模型",
        help_en="The primary model, and fallback models tried in order when it fails.",
        help_zh="主模型，以及主模型失败时依次尝试的备用模型。",
        default={"primary": "", "fallbacks": []},
        required=True,
    ),
    _field(
        "prompt",
        "prompt-editor",
        "Prompt",
        "提示词",
        help_en="Messages put before every conversation (usually one system message).",
        help_zh="每次对话前置的消息（通常是一条 system 消息）。",
        default=[{"role": m.role, "content": m.content} for m in DEFAULT_PROMPT],
    ),
    _field(
        "knowledge-bases",
        "knowledge-base-multi-selector",
        "Knowledge bases",
        "知识库",
        help_en="Knowledge bases searched with the user's message.",
        help_zh="用用户消息检索的知识库。",
        default=[],
    ),
    _field(
        "rerank-model",
        "rerank-model-selector",
        "Rerank model",
        "重排序模型",
        help_en="Reorders retrieved passages by relevance; leave empty to keep the retrieval order.",
        help_zh="按相关度重排检索结果；留空则保持检索顺序。",
        default="",
    ),
    _field(
        "rerank-top-k",
        "integer",
        "Passages kept after rerank",
        "重排序后保留条数",
        help_en="How many passages the rerank model keeps.",
        help_zh="重排序后保留的段落数。",
        default=_DEFAULTS.rerank_top_k,
    ),
    _field(
        "retrieval-top-k",
        "integer",
        "Passages per knowledge base",
        "每个知识库检索条数",
        help_en="How many passages each knowledge base returns.",
        help_zh="每个知识库返回的段落数。",
        default=_DEFAULTS.retrieval_top_k,
    ),
    _field(
        "history-turns",
        "integer",
        "History turns",
        "历史轮数",
        help_en="How many recent user turns of the conversation are read back (0 disables history).",
        help_zh="读取最近多少轮用户对话（0 表示不读取历史）。",
        default=_DEFAULTS.history_turns,
    ),
    _field(
        "history-token-budget",
        "integer",
        "History token budget",
        "历史 token 预算",
        help_en="Most tokens of history sent to the model; older turns are summarised into a checkpoint.",
        help_zh="发送给模型的历史 token 上限；更早的对话会被压缩为摘要检查点。",
        default=_DEFAULTS.history_token_budget,
    ),
    _field(
        "max-tool-rounds",
        "integer",
        "Max tool rounds",
        "最大工具调用轮数",
        help_en="Model/tool round trips before the model must answer without tools.",
        help_zh="模型与工具往返的最大轮数，超过后模型必须直接回答。",
        default=_DEFAULTS.max_tool_rounds,
    ),
    _field(
        "remove-think",
        "boolean",
        "Remove thinking",
        "移除思考过程",
        help_en="Remove <think>...</think> blocks from replies.",
        help_zh="从回复中移除 <think>...</think> 思考内容。",
        default=_DEFAULTS.remove_think,
    ),
    _field(
        "timeout-seconds",
        "integer",
        "Timeout (seconds)",
        "超时（秒）",
        help_en="Time limit of one run; the host's own deadline still applies.",
        help_zh="单次运行的时间上限；宿主的截止时间仍然生效。",
        default=int(_DEFAULTS.timeout_seconds),
    ),
]

MANIFEST: Final = AgentRunnerManifest(
    id=RUNNER_ID,
    name="default",
    label=I18nObject(en_US="Local Agent", zh_Hans="内置 Agent"),
    description=I18nObject(
        en_US="An agent built on the host's models, tools, knowledge bases, history and state.",
        zh_Hans="基于宿主模型、工具、知识库、历史与状态的 Agent。",
    ),
    capabilities=AgentRunnerCapabilities(
        streaming=True,
        tool_calling=True,
        knowledge_retrieval=True,
        multimodal_input=True,
        interrupt=True,
        event_context=True,
        self_managed_context=True,
    ),
    permissions=AgentRunnerPermissions(
        models=["invoke", "stream", "rerank"],
        tools=["detail", "call"],
        knowledge_bases=["list", "retrieve"],
        history=["page", "search"],
        artifacts=["metadata", "read"],
        storage=["plugin"],
    ),
    context=AgentRunnerContextPolicy(
        supports_history_pull=True,
        supports_history_search=False,
        supports_artifact_pull=True,
        owns_compaction=True,
        wants_static_context_refs=False,
    ),
    config_schema=CONFIG_SCHEMA,
)
"""The runner's manifest."""
