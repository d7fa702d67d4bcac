"""agentrunner conformance kit."""
