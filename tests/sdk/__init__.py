"""Tests of the SDK package ``agentrunner`` (a package so module names cannot clash with other suites)."""
