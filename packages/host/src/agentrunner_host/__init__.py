"""agentrunner host."""
