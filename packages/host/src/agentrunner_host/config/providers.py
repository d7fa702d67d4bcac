"""The provider sections of ``agentrunner.toml``: ``[[models]]``, ``[[mcp_servers]]``, ``[[knowledge_bases]]``.

Their models belong to the providers that consume them and are re-exported here, so the file and the
provider can never disagree: :class:`ModelConfig` (``providers.llm``), :class:`MCPServerConfig`
(``providers.tools``), :class:`KnowledgeBaseConfig` (``providers.knowledge``). Credentials are never values
in them: a section names the environment variable that holds each one (``api_key_env``, ``env_from``,
``headers_from``), read when the provider is built.
"""

from __future__ import annotations

from agentrunner_host.providers.knowledge import KnowledgeBaseConfig
from agentrunner_host.providers.llm import ModelConfig
from agentrunner_host.providers.tools import MCPServerConfig

__all__ = ["KnowledgeBaseConfig", "MCPServerConfig", "ModelConfig"]
