"""agentrunner MCP bridge."""
