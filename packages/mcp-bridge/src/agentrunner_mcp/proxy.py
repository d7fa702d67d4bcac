"""``agentrunner-mcp-proxy``: MCP over stdio, forwarded to one run's HTTP bridge.

A harness that only launches stdio MCP servers starts this command. It reads the bridge endpoint from
``AGENTRUNNER_MCP_URL`` and the run's bearer token from ``AGENTRUNNER_MCP_TOKEN``, then relays every MCP
message between its stdin/stdout and the bridge. It adds nothing and decides nothing: the bridge authenticates,
filters and dispatches.

**It starts in milliseconds and answers ``initialize`` at once.** A harness gives its servers a short start-up
window (``claude -p`` starts its first turn without a server that has not listed its tools yet), and importing
``mcp`` takes 1-4 s on a loaded machine. So the proxy uses the standard library only (``json``, ``http.client``,
threads): it answers ``initialize`` from the bridge's fixed server description (:data:`SERVER_CAPABILITIES`, the
protocol version the client asked for when the bridge speaks it), replays that ``initialize`` to the bridge for
a real session in the background (dropping the duplicate answer), and relays every later message as MCP's
streamable HTTP does: one POST per message, in order, with the session id and protocol version headers, the
answer read from JSON or from the SSE stream and written to stdout as it comes. A refused request (revoked
token: 401) becomes a JSON-RPC error for its id. The bridge sends nothing unprompted, so the proxy opens no
GET stream.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import queue
import sys
import threading
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final, cast

from .env import PROXY_TOKEN_ENV, PROXY_URL_ENV

__all__ = [
    "HANDSHAKE_PROTOCOL_VERSIONS",
    "SERVER_CAPABILITIES",
    "ProxySettings",
    "initialize_answer",
    "main",
    "run_proxy",
]

HANDSHAKE_PROTOCOL_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The ``initialize`` versions the bridge (mcp 2.3) negotiates; the proxy answers with the client's when listed,
else the newest. ``tests/mcp/test_mcp_proxy.py`` keeps this equal to what the bridge answers."""

SERVER_CAPABILITIES: Final[dict[str, Any]] = {
    "completions": {},
    "logging": {},
    "resources": {"subscribe": True, "listChanged": False},
    "tools": {"listChanged": False},
}
"""What the bridge declares; the proxy's early ``initialize`` answer says the same (pinned by a test)."""

SERVER_INFO: Final = {"name": "agentrunner", "version": "1"}
"""The bridge's ``serverInfo`` (the default server name)."""


class ProxySettings:
    """Where the proxy forwards to."""

    url: str
    """The bridge's streamable-HTTP endpoint."""
    token: str
    """The run's bearer token."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.token = token

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ProxySettings:
        """Read the settings from *environ*; raises ``KeyError`` naming a missing variable."""
        url = environ.get(PROXY_URL_ENV, "")
        token = environ.get(PROXY_TOKEN_ENV, "")
        if not url:
            raise KeyError(PROXY_URL_ENV)
        if not token:
            raise KeyError(PROXY_TOKEN_ENV)
        return cls(url, token)


def initialize_answer(line: bytes) -> bytes | None:
    """The proxy's own answer to *line* when it is an ``initialize`` request (``None`` otherwise)."""
    try:
        # The standard library's json, not agentrunner.codec: importing the SDK alone takes ~2 s here.
        decoded: object = json.loads(line)
    except ValueError:
        return None
    if not isinstance(decoded, dict):
        return None
    message = cast(dict[str, Any], decoded)
    if message.get("method") != "initialize" or "id" not in message:
        return None
    params: object = message.get("params")
    asked = cast(dict[str, Any], params).get("protocolVersion") if isinstance(params, dict) else None
    version = asked if asked in HANDSHAKE_PROTOCOL_VERSIONS else HANDSHAKE_PROTOCOL_VERSIONS[-1]
    answer = {
        "jsonrpc": "2.0",
        "id": message["id"],
        "result": {
            "protocolVersion": version,
            "capabilities": SERVER_CAPABILITIES,
            "serverInfo": SERVER_INFO,
        },
    }
    return json.dumps(answer, separators=(",", ":")).encode() + b"\n"  # noqa: TID251 (see above)


class _Refused(Exception):
    """The bridge answered a message with an HTTP error."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"the bridge answered HTTP {status}: {body[:200].decode('utf-8', 'replace')}")
        self.status = status


class _Bridge:
    """Streamable HTTP to the bridge, message by message (``http.client``; one connection per message)."""

    def __init__(self, settings: ProxySettings) -> None:
        parts = urllib.parse.urlsplit(settings.url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self._path = parts.path or "/"
        self._token = settings.token
        self.session_id: str | None = None
        self.protocol_version: str | None = None

    def send(self, body: bytes) -> http.client.HTTPResponse | None:
        """POST one message; the response once its headers arrived (``None`` for 202 Accepted)."""
        headers = {
            "Authorization": f"Bearer {self._token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self.protocol_version is not None:
            headers["mcp-protocol-version"] = self.protocol_version
        connection = http.client.HTTPConnection(self._host, self._port)
        connection.request("POST", self._path, body=body, headers=headers)
        response = connection.getresponse()
        if response.status >= 400:
            raise _Refused(response.status, response.read())
        session = response.getheader("mcp-session-id")
        if session:
            self.session_id = session
        if response.status == 202:
            response.close()
            return None
        return response


def _answers(response: http.client.HTTPResponse) -> Iterator[bytes]:
    """The JSON-RPC messages of one response: its JSON body, or the ``data`` of each SSE event."""
    with response:
        if "text/event-stream" not in (response.getheader("content-type") or ""):
            body = response.read().strip()
            if body:
                yield body
            return
        data: list[bytes] = []
        for raw in response:
            line = raw.rstrip(b"\r\n")
            if not line:
                if data:
                    yield b"\n".join(data)
                data = []
            elif line.startswith(b"data:"):
                data.append(line[5:].lstrip())
        if data:
            yield b"\n".join(data)


class _Proxy:
    """Relays stdin → bridge (in order, one sender thread) and each response → stdout (a reader thread each)."""

    def __init__(self, settings: ProxySettings) -> None:
        self.settings = settings
        self.bridge = _Bridge(settings)
        self.outbox: queue.Queue[tuple[bytes, bool] | None] = queue.Queue()
        self.write_lock = threading.Lock()
        self.failed: BaseException | None = None

    def write(self, line: bytes) -> None:
        with self.write_lock:
            sys.stdout.buffer.write(line.rstrip(b"\n") + b"\n")
            sys.stdout.buffer.flush()

    def sender(self) -> None:
        first = True
        while (item := self.outbox.get()) is not None:
            body, drop = item
            try:
                response = self.bridge.send(body)
            except _Refused as exc:
                if first:
                    self.fail(exc)
                    return
                self._refused(body, exc)
                continue
            except OSError as exc:
                self.fail(exc)
                return
            first = False
            if response is not None:
                reader = threading.Thread(target=self.reader, args=(response, drop), daemon=True)
                reader.start()
                if drop:
                    reader.join()  # the session's protocol version must be known before the next message

    def reader(self, response: http.client.HTTPResponse, drop: bool) -> None:
        try:
            for answer in _answers(response):
                if drop:
                    self._learn_version(answer)
                else:
                    self.write(answer)
        except OSError as exc:
            print(f"agentrunner-mcp-proxy: {exc}", file=sys.stderr)

    def _learn_version(self, answer: bytes) -> None:
        try:
            decoded: object = json.loads(answer)
        except ValueError:
            return
        result = cast(dict[str, Any], decoded).get("result") if isinstance(decoded, dict) else None
        version = cast(dict[str, Any], result).get("protocolVersion") if isinstance(result, dict) else None
        if isinstance(version, str):
            self.bridge.protocol_version = version

    def _refused(self, body: bytes, exc: _Refused) -> None:
        try:
            decoded: object = json.loads(body)
        except ValueError:
            return
        if isinstance(decoded, dict) and "id" in decoded and "method" in decoded:
            request_id = cast(dict[str, Any], decoded)["id"]
            error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32603, "message": str(exc)}}
            self.write(json.dumps(error).encode())  # noqa: TID251 (see initialize_answer)
        else:
            print(f"agentrunner-mcp-proxy: {exc}", file=sys.stderr)

    def fail(self, exc: BaseException) -> None:
        # The bridge is out of reach (or refused the session): one line, and the process ends (stdin may block).
        print(f"agentrunner-mcp-proxy: {self.settings.url}: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)


def run_proxy(settings: ProxySettings, *, first_line: bytes, answered: bool) -> int:
    """Relay MCP between this process's stdio and the bridge until stdin closes (see the module docstring)."""
    proxy = _Proxy(settings)
    sender = threading.Thread(target=proxy.sender, name="agentrunner-mcp-proxy", daemon=True)
    sender.start()
    proxy.outbox.put((first_line, answered))
    for line in sys.stdin.buffer:
        if line.strip():
            proxy.outbox.put((line, False))
    proxy.outbox.put(None)
    sender.join(timeout=5)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point: ``--help`` prints what the proxy reads; it takes no other arguments."""
    parser = argparse.ArgumentParser(
        prog="agentrunner-mcp-proxy",
        description="Relay MCP between stdin/stdout and one run's HTTP bridge (started by a harness).",
        epilog=f"Reads the bridge endpoint from {PROXY_URL_ENV} and the run's bearer token from {PROXY_TOKEN_ENV}.",
    )
    parser.parse_args(argv)
    try:
        settings = ProxySettings.from_env(os.environ)
    except KeyError as exc:
        print(f"agentrunner-mcp-proxy: {exc.args[0]} is not set", file=sys.stderr)
        return 2
    first_line = sys.stdin.buffer.readline()
    if not first_line.strip():
        return 0  # the harness closed stdin before saying anything
    answer = initialize_answer(first_line)
    if answer is not None:
        sys.stdout.buffer.write(answer)
        sys.stdout.buffer.flush()
    try:
        return run_proxy(settings, first_line=first_line, answered=answer is not None)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
