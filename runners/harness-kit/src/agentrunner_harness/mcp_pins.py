"""Extra MCP servers a binding gives a harness, checked against the operator's pins.

The host passes, in ``runtime.metadata['harness']['mcp_server_pins']``, what each allowed server name must
run or reach (``[[security.harness_mcp_servers]]``). A binding's ``mcpServers`` entry is accepted only when
its name is pinned and it matches the pin exactly:

* a stdio server: the same ``command``, the same ``args`` in the same order, and ``env`` only for the
  variable names the pin lists (a variable such as ``NODE_OPTIONS`` or ``LD_PRELOAD`` changes what the pinned
  command runs);
* a remote server (``http`` / ``sse``): the same ``url``; its ``headers`` are the binding's (credentials);
* no other keys (``cwd`` and the like would change what runs, too).

A name without a pin (a host that only sends names) is refused: a name alone would let a binding run any
program under an allowlisted name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import orjson
from pydantic import JsonValue

from .errors import HarnessFailure
from .jsonvalues import as_list, as_object

__all__ = ["MCPServerPin", "check_mcp_server", "mcp_config_document", "mcp_servers_of", "parse_pins"]

_STDIO_KEYS: Final = frozenset({"type", "command", "args", "env"})
_REMOTE_KEYS: Final = frozenset({"type", "url", "headers"})
_ALLOWLIST_SETTING: Final = "[[security.harness_mcp_servers]]"


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPServerPin:
    """What one allowed server must be."""

    command: str | None = None
    """Program of a stdio server."""
    args: tuple[str, ...] = ()
    """Its exact arguments."""
    env: frozenset[str] = frozenset()
    """Variable names the binding may set for it."""
    url: str | None = None
    """Endpoint of a remote server."""


def parse_pins(raw: object) -> dict[str, MCPServerPin]:
    """The pins of ``runtime.metadata['harness']['mcp_server_pins']`` (malformed entries are left out, so
    their servers are refused)."""
    pins: dict[str, MCPServerPin] = {}
    for name, value in (as_object(raw) or {}).items():
        entry = as_object(value)
        if entry is None:
            continue
        command, url = entry.get("command"), entry.get("url")
        if isinstance(command, str) and command and url is None:
            args = [a for a in as_list(entry.get("args")) if isinstance(a, str)]
            env = frozenset(v for v in as_list(entry.get("env")) if isinstance(v, str))
            pins[name] = MCPServerPin(command=command, args=tuple(args), env=env)
        elif isinstance(url, str) and url and command is None:
            pins[name] = MCPServerPin(url=url)
    return pins


def _refuse(name: str, why: str) -> HarnessFailure:
    return HarnessFailure("config_invalid", f"MCP server {name!r} {why} ({_ALLOWLIST_SETTING})")


def check_mcp_server(
    name: str, server: Mapping[str, JsonValue], pins: Mapping[str, MCPServerPin]
) -> dict[str, JsonValue]:
    """*server* when it matches the pin of *name*; :class:`HarnessFailure` ``config_invalid`` naming what
    differs otherwise."""
    pin = pins.get(name)
    if pin is None:
        raise _refuse(name, "is not in the operator's allowlist")
    if pin.command is not None:
        extra = sorted(set(server) - _STDIO_KEYS)
        if extra:
            raise _refuse(name, f"sets {', '.join(extra)}, which a pinned stdio server may not")
        if server.get("type", "stdio") != "stdio" or server.get("command") != pin.command:
            raise _refuse(name, f"must run the pinned command {pin.command!r}")
        args = server.get("args", [])
        if not isinstance(args, list) or tuple(args) != pin.args:
            raise _refuse(name, "must be given exactly the pinned arguments")
        env = as_object(server.get("env")) if server.get("env") is not None else {}
        if env is None:
            raise _refuse(name, "has an env that is not an object")
        unpinned = sorted(set(env) - pin.env)
        if unpinned:
            raise _refuse(name, f"sets variables the pin does not allow: {', '.join(unpinned)}")
        return dict(server)
    extra = sorted(set(server) - _REMOTE_KEYS)
    if extra:
        raise _refuse(name, f"sets {', '.join(extra)}, which a pinned remote server may not")
    if server.get("type", "http") not in ("http", "sse") or server.get("url") != pin.url:
        raise _refuse(name, f"must reach the pinned URL {pin.url!r}")
    return dict(server)


def mcp_config_document(raw: object) -> object | None:
    """The document of ``mcp-config-json`` (its JSON text or the object itself); ``None`` when unset;
    :class:`HarnessFailure` ``config_invalid`` when it is neither."""
    if isinstance(raw, str) and raw.strip():
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise HarnessFailure("config_invalid", f"mcp-config-json is not JSON: {exc}") from exc
    if as_object(raw):
        return raw
    if raw not in (None, "", {}):
        raise HarnessFailure("config_invalid", "mcp-config-json must be an object")
    return None


def mcp_servers_of(doc: object) -> dict[str, dict[str, JsonValue]]:
    """The ``mcpServers`` table of an MCP config document, each entry an object; :class:`HarnessFailure`
    ``config_invalid`` otherwise."""
    table = as_object((as_object(doc) or {}).get("mcpServers"))
    if table is None:
        raise HarnessFailure("config_invalid", 'an MCP config must be {"mcpServers": {name: server}}')
    servers: dict[str, dict[str, JsonValue]] = {}
    for name, raw_server in table.items():
        server = as_object(raw_server)
        if server is None:
            raise HarnessFailure("config_invalid", f"MCP server {name!r} must be an object")
        servers[name] = server
    return servers
