"""The harness CLI's own commands as audit records (gate item 8: external commands are traceable).

A code-executing runner (``capabilities.executes_code``: Claude Code, Codex) reports each tool its CLI uses
— ``Bash``, ``Read``, ``Edit``, Codex's ``command_execution``, and the host's own tools through the MCP bridge —
as a ``tool.call.started`` / ``tool.call.completed`` pair. The host turns each pair into one audit record of
the run, action :data:`HARNESS_TOOL_ACTION` and caller :data:`HARNESS_CALLER`, stored like the back-calls'
(a ``host.backcall`` event with ``source: harness``) and returned by the same audit query (``GET /v1/audit``,
``agentrunner audit``), while the run is live:

* ``resource``: the tool's name as the CLI knows it; ``detail``: what it did (the command, the file or URL),
  at most :data:`DETAIL_CAP` characters, after the host masked the secrets it knows;
* ``risk``: the tool's danger classes by the words of its name (``Bash`` → ``shell``, ``Edit`` / ``Write`` →
  ``file_write``, ``WebFetch`` → ``network``: :func:`agentrunner_host.tool_risk.classify_tool`);
* ``decision``: ``allowed`` — the host does not decide a native tool (the CLI's own permission rules do; the
  runner is admitted by ``[security] allow_code_executing_runners``), it records what the CLI reports;
* ``error``: the tool's failure code when it failed (``tool.error``: the command failed *or* the CLI's
  permission rules refused it — the CLI's error text does not tell them apart reliably; Claude Code lists its
  refusals in the reply's metadata ``permission_denials``), ``tool.unfinished`` when the run ended first;
* ``at``: when the CLI started it; ``latency_ms``: how long it ran.

A runner that is not code-executing reports its tool calls too, but those are the host's tools, called by
back-call and audited by the dispatcher already; they get no second record.
"""

from __future__ import annotations

import time
from typing import Final

from agentrunner import ToolCallCompletedData, ToolCallStartedData
from agentrunner import codec as json

from .dispatcher import AuditRecord
from .run_state import RunState
from .tool_risk import classify_tool

__all__ = [
    "DETAIL_CAP",
    "HARNESS_CALLER",
    "HARNESS_TOOL_ACTION",
    "harness_tool_completed",
    "harness_tool_started",
    "harness_tools_unfinished",
]

HARNESS_TOOL_ACTION: Final = "harness.tool"
"""Audit action of a tool the harness CLI used."""
HARNESS_CALLER: Final = "harness"
"""Audit ``caller`` of those records: the CLI, not an identity of the back-call API."""
DETAIL_CAP: Final = 500
"""Most characters of a record's ``detail``."""
UNFINISHED: Final = "tool.unfinished"
"""``error`` of a tool whose end the run never reported."""

# The parameter that says what a tool did, in order of preference (Bash and Codex: the command; Read, Edit,
# Write: the file; WebFetch: the URL; Grep / Glob: the pattern).
_DETAIL_KEYS: Final = ("command", "cmd", "file_path", "path", "notebook_path", "url", "query", "pattern")


def _audited(state: RunState) -> bool:
    return state.live is not None and state.descriptor.manifest.capabilities.executes_code


def _detail(parameters: json.JsonObject) -> str | None:
    for key in _DETAIL_KEYS:
        value = parameters.get(key)
        if isinstance(value, str) and value:
            return value[:DETAIL_CAP]
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return " ".join(str(v) for v in value)[:DETAIL_CAP]
    if not parameters:
        return None
    return json.dumps_str(parameters)[:DETAIL_CAP]


def harness_tool_started(state: RunState, data: ToolCallStartedData) -> None:
    """Note when a tool of a code-executing runner's CLI started, and what it was asked to do."""
    if _audited(state):
        state.harness_tools[data.tool_call_id] = (time.time(), data.tool_name, _detail(data.parameters))


def harness_tool_completed(state: RunState, data: ToolCallCompletedData) -> None:
    """File the audit record of a tool of a code-executing runner's CLI that ended."""
    if not _audited(state):
        return
    started = state.harness_tools.pop(data.tool_call_id, None)
    at, name, detail = started if started is not None else (time.time(), data.tool_name, None)
    _file(state, at=at, name=name, detail=detail, error=data.error_code)


def harness_tools_unfinished(state: RunState) -> None:
    """File the records of the tools still running when the run ended (``error`` ``tool.unfinished``)."""
    for at, name, detail in state.harness_tools.values():
        _file(state, at=at, name=name, detail=detail, error=UNFINISHED)
    state.harness_tools.clear()


def _file(state: RunState, *, at: float, name: str, detail: str | None, error: str | None) -> None:
    live = state.live
    if live is None:
        return
    live.audit.append(
        AuditRecord(
            run_id=state.run_id,
            runner_id=state.snapshot.runner_id,
            caller=HARNESS_CALLER,
            action=HARNESS_TOOL_ACTION,
            resource=name[:200],
            scope=state.snapshot.conversation_id,
            decision="allowed",
            latency_ms=max(0.0, (time.time() - at) * 1000.0),
            at=at,
            risk=tuple(sorted(classify_tool(name))),
            source="harness",
            detail=detail,
            error=error,
        )
    )
    if live.notify is not None:
        live.notify()
