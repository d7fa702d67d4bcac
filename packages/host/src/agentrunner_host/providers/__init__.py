"""What the dispatcher calls for models, tools and knowledge, and the host's own implementations of it.

* :mod:`.protocols` — the interfaces (:class:`ModelProvider`, :class:`ToolProvider`,
  :class:`KnowledgeProvider`) the dispatcher depends on;
* :mod:`.llm` — OpenAI-compatible models;
* :mod:`.tools` — MCP servers and Python entry-point tools;
* :mod:`.knowledge` — the embedded full-text knowledge index;
* :mod:`.wiring` — the providers of a service, built from the configuration's provider sections.

Only the interfaces are imported here, so depending on them never loads an HTTP or MCP client.
"""

from agentrunner_host.providers.protocols import KnowledgeProvider, ModelProvider, ToolProvider

__all__ = ("KnowledgeProvider", "ModelProvider", "ToolProvider")
