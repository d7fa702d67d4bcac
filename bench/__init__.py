"""Benchmarks of the agentrunner workspace: ``uv run python -m bench [--quick] [--only NAME] [--markdown FILE]``.

Every suite is registered in :data:`SUITES` (one line each) and imported only when it runs, so a suite's heavy
dependencies cost nothing to the others. How to add one: ``bench/README.md``.
"""

from __future__ import annotations

from ._framework import Goal, Measure, SuiteContext, SuiteRef

__all__ = ["SUITES", "Goal", "Measure", "SuiteContext", "SuiteRef"]

SUITES: list[SuiteRef] = [
    SuiteRef("sdk", "bench.sdk_models", "Protocol models: a 5 KB context and a 52-result stream vs orjson"),
    SuiteRef(
        "host", "bench.host_runs", "Whole runs through the orchestrator, in memory and persisted to SQLite"
    ),
    SuiteRef(
        "stores", "bench.stores", "Stores: persisted run vs one transaction; history.page at 10k-1M rows"
    ),
    SuiteRef("mcp", "bench.mcp_bridge", "MCP bridge: a tool call vs raw mcp over HTTP, and per-run set-up"),
    SuiteRef("conformance", "bench.conformance_check", "Conformance kit: a fuzzed echo run vs a bare one"),
    SuiteRef("runtime", "bench.runtime_wire", "Plugin runtime: back-calls and runs over stdio vs raw floors"),
    SuiteRef(
        "reaction", "bench.reaction", "Cancel and deadline: how fast the host ends a run, vs its own end"
    ),
    SuiteRef("http", "bench.http_echo", "HTTP API: POST /v1/events echo over SSE vs a bare Starlette app"),
    SuiteRef(
        "api_runners",
        "bench.http_runners",
        "HTTP-API runners: a streamed run against a fake vs a bare httpx client",
    ),
    SuiteRef(
        "cluster",
        "bench.cluster",
        "Several hosts on one PostgreSQL: 3 hosts vs 1, and B-side latency of A's results (needs PostgreSQL)",
    ),
    SuiteRef(
        "harness",
        "bench.harness_runners",
        "Harness runners: a claude-code / codex run vs the same CLI spawned bare, same fake model API",
    ),
]
"""Every suite, in the order they run and appear in the table."""
