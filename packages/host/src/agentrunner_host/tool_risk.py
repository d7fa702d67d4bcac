"""Dangerous-tool classification: which host tools can run commands, change files, reach the network or
destroy data, so a binding only gets them when it grants them by name or by class.

A tool's classes come from, in this order:

1. the operator's word (``[[mcp_servers]] tool_risks = { tool = ["shell"] }``; ``[]`` declares a tool safe);
   when given it is the whole answer;
2. otherwise its MCP annotations, which can only *add* classes (``destructiveHint`` → ``destructive``,
   ``openWorldHint`` → ``network``): a server saying ``readOnlyHint`` is not believed over its tool's name,
   because annotations are the server's claim, not the operator's;
3. and the words of its name (``run_shell``, ``writeFile``, ``http-fetch``...).

A tool with any class is *dangerous*: the authorization snapshot leaves it out unless the binding lists it,
or all of its classes, in ``resource_policy.dangerous_tools``, and every call of a granted one is audited
with its classes (``host.backcall`` ``risk``).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Final, Literal, get_args

__all__ = ["TOOL_RISKS", "ToolRisk", "classify_tool", "grants_dangerous_tool", "name_words"]

ToolRisk = Literal["shell", "file_write", "network", "destructive"]
"""A class of dangerous tool: runs commands or code; writes, moves or deletes files; reaches other hosts;
destroys or irreversibly changes data."""

TOOL_RISKS: Final[tuple[ToolRisk, ...]] = get_args(ToolRisk)
"""Every class, in a stable order."""

_WORDS: Final[dict[ToolRisk, frozenset[str]]] = {
    "shell": frozenset(
        {"shell", "bash", "sh", "zsh", "exec", "execute", "terminal", "subprocess", "powershell", "cmd"}
        | {"command", "commands", "spawn", "eval", "sudo"}
    ),
    "file_write": frozenset(
        {"write", "edit", "delete", "remove", "rm", "move", "mv", "rename", "mkdir", "rmdir", "patch"}
        | {"upload", "overwrite", "append", "chmod", "chown", "truncate", "unlink", "copy", "cp"}
    ),
    "network": frozenset(
        {"fetch", "http", "https", "request", "download", "curl", "wget", "browse", "browser", "navigate"}
        | {"url", "web", "webhook", "socket", "scrape", "crawl"}
    ),
    "destructive": frozenset({"drop", "destroy", "purge", "wipe", "kill", "terminate", "erase"}),
}

_CAMEL: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT: Final = re.compile(r"[^A-Za-z0-9]+")


def name_words(name: str) -> list[str]:
    """The lower-case words of a tool name (``run_shell``, ``runShell``, ``run-shell`` → ``run``, ``shell``)."""
    return [w.lower() for part in _SPLIT.split(name) for w in _CAMEL.sub(" ", part).split() if w]


def classify_tool(
    name: str,
    *,
    declared: Iterable[ToolRisk] | None = None,
    destructive_hint: bool | None = None,
    open_world_hint: bool | None = None,
) -> frozenset[ToolRisk]:
    """The dangerous classes of the tool called *name* (its own name, without the server prefix).

    *declared* is the operator's classification and wins outright; the hints are the MCP annotations."""
    if declared is not None:
        return frozenset(declared)
    words = set(name_words(name))
    risks: set[ToolRisk] = {risk for risk, vocabulary in _WORDS.items() if words & vocabulary}
    if destructive_hint:
        risks.add("destructive")
    if open_world_hint:
        risks.add("network")
    return frozenset(risks)


def grants_dangerous_tool(tool_name: str, risks: Collection[str], granted: Collection[str]) -> bool:
    """Whether a binding's ``dangerous_tools`` (*granted*: tool names and class names) covers the tool:
    it names the tool, or every one of its classes."""
    return not risks or tool_name in granted or all(risk in granted for risk in risks)
