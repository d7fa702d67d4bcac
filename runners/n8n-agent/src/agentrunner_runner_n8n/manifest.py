"""The n8n runner's declaration. ``manifest.yaml`` at the plugin root says the same for discovery; a test
keeps the two equal. Field names are the legacy pipeline's (``n8n-service-api``)."""

from __future__ import annotations

from typing import Final

from agentrunner import AgentRunnerCapabilities, AgentRunnerManifest, I18nObject
from agentrunner_http_kit import form_field

__all__ = ["AUTH_TYPES", "MANIFEST", "RUNNER_ID"]

RUNNER_ID: Final = "plugin:langbot/n8n-agent/default"
"""The official runner id (what ``agentrunner migrate-config`` maps ``n8n-service-api`` to)."""

AUTH_TYPES: Final = ("none", "basic", "jwt", "header")
"""The webhook authentication modes n8n's Webhook node offers."""

CONFIG_SCHEMA: Final = [
    form_field(
        "webhook-url",
        "string",
        ("Webhook URL", "Webhook 地址"),
        ("The production URL of the workflow's Webhook node.", "工作流 Webhook 节点的生产地址。"),
        required=True,
    ),
    form_field(
        "auth-type",
        "select",
        ("Authentication", "认证方式"),
        ("How the Webhook node checks callers.", "Webhook 节点校验调用方的方式。"),
        default="none",
        options=AUTH_TYPES,
    ),
    form_field(
        "basic-username",
        "string",
        ("Basic auth user", "Basic 认证用户名"),
        ("User name for basic authentication.", "Basic 认证的用户名。"),
        default="",
    ),
    form_field(
        "basic-password",
        "string",
        ("Basic auth password", "Basic 认证密码"),
        (
            'Password for basic authentication; give {"env": "VAR"}.',
            'Basic 认证的密码；请写成 {"env": "VAR"}。',
        ),
        default="",
        secret=True,
    ),
    form_field(
        "jwt-secret",
        "string",
        ("JWT secret", "JWT 密钥"),
        (
            'Key that signs the JWT sent as a bearer token; give {"env": "VAR"}.',
            '签名 JWT（作为 Bearer 令牌发送）的密钥；请写成 {"env": "VAR"}。',
        ),
        default="",
        secret=True,
    ),
    form_field(
        "jwt-algorithm",
        "string",
        ("JWT algorithm", "JWT 算法"),
        ("Signing algorithm (HS256, HS384, HS512).", "签名算法（HS256、HS384、HS512）。"),
        default="HS256",
    ),
    form_field(
        "header-name",
        "string",
        ("Header name", "请求头名称"),
        ("Header checked by header authentication.", "Header 认证校验的请求头名称。"),
        default="",
    ),
    form_field(
        "header-value",
        "string",
        ("Header value", "请求头值"),
        ('Its value; give {"env": "VAR"}.', '请求头的值；请写成 {"env": "VAR"}。'),
        default="",
        secret=True,
    ),
    form_field(
        "timeout",
        "float",
        ("Timeout (seconds)", "超时（秒）"),
        (
            "Time limit of the whole call; the host's deadline still applies.",
            "整次调用的时间上限；宿主的截止时间仍然生效。",
        ),
        default=120,
    ),
    form_field(
        "output-key",
        "string",
        ("Output key", "输出字段"),
        ("Field of the JSON answer that holds the reply.", "JSON 回答中存放回复的字段。"),
        default="response",
    ),
]

MANIFEST: Final = AgentRunnerManifest(
    id=RUNNER_ID,
    name="default",
    label=I18nObject(en_US="n8n", zh_Hans="n8n"),
    description=I18nObject(
        en_US="Answers with an n8n workflow called through its webhook (JSON or streamed answers).",
        zh_Hans="通过 Webhook 调用 n8n 工作流回答（JSON 或流式回答）。",
    ),
    capabilities=AgentRunnerCapabilities(streaming=True, stateful_session=True, interrupt=True),
    config_schema=CONFIG_SCHEMA,
)
"""The runner's manifest."""
