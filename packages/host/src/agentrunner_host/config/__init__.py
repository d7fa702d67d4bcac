"""The host's configuration: ``agentrunner.toml`` plus ``AGENTRUNNER_*`` environment overrides."""

from .loader import (
    CONFIG_ENV,
    DEFAULT_CONFIG_FILE,
    ENV_OVERRIDES,
    ConfigFileError,
    Settings,
    default_data_dir,
    format_key_path,
    load_settings,
    parse_config,
)
from .model import (
    DEFAULT_HTTP_PORT,
    ECHO_RUNNER_ID,
    LOCAL_AGENT_RUNNER_ID,
    MIN_TOKEN_BITS,
    MIN_TOKEN_LENGTH,
    BindingSpec,
    ClusterConfig,
    DefaultsConfig,
    HostConfig,
    HttpConfig,
    IsolationConfig,
    RunnersConfig,
    SecurityConfig,
    StateConfig,
    is_loopback_host,
    token_weakness,
)
from .providers import KnowledgeBaseConfig, MCPServerConfig, ModelConfig
from .secrets import (
    REDACTED,
    EnvReferenceError,
    find_literal_secrets,
    is_env_ref,
    redact_config,
    resolve_env_refs,
)

__all__ = (
    # loading
    "load_settings",
    "parse_config",
    "Settings",
    "ConfigFileError",
    "CONFIG_ENV",
    "DEFAULT_CONFIG_FILE",
    "ENV_OVERRIDES",
    "default_data_dir",
    "format_key_path",
    # the file
    "HostConfig",
    "HttpConfig",
    "IsolationConfig",
    "RunnersConfig",
    "ClusterConfig",
    "SecurityConfig",
    "StateConfig",
    "DefaultsConfig",
    "BindingSpec",
    "DEFAULT_HTTP_PORT",
    "ECHO_RUNNER_ID",
    "LOCAL_AGENT_RUNNER_ID",
    "MIN_TOKEN_BITS",
    "MIN_TOKEN_LENGTH",
    "is_loopback_host",
    "token_weakness",
    # providers
    "ModelConfig",
    "MCPServerConfig",
    "KnowledgeBaseConfig",
    # secrets
    "REDACTED",
    "EnvReferenceError",
    "find_literal_secrets",
    "is_env_ref",
    "redact_config",
    "resolve_env_refs",
)
