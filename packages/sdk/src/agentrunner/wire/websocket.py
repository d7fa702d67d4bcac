"""The wire protocol over a WebSocket: one frame per text message, so a runtime can live on another machine.

Needs the ``websockets`` package (not a dependency of the SDK: install it where a remote runtime runs). The
runtime authenticates with a per-runtime token sent as ``Authorization: Bearer <token>``; the host derives the
plugin identity from the token, never from anything the runtime says.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any, Protocol

from agentrunner.errors import ProtocolError
from agentrunner.runner import AgentRunner

from .frames import MAX_FRAME_BYTES
from .runtime import PluginRuntime

__all__ = ["TOKEN_ENV", "WebSocketFrameChannel", "serve_websocket"]

TOKEN_ENV = "AGENTRUNNER_RUNTIME_TOKEN"
"""Environment variable ``agentrunner-plugin --connect`` reads the runtime's token from (never argv: ``ps``
shows argv to every user)."""

_MESSAGE_TOO_BIG = 1009


class _WebSocket(Protocol):
    async def recv(self) -> str | bytes: ...

    async def send(self, message: Any, *, text: bool | None = None) -> None: ...

    async def close(self, code: int = 1000, reason: str = "") -> None: ...


class WebSocketFrameChannel:
    """A :class:`~agentrunner.wire.FrameChannel` over a ``websockets`` asyncio connection (client or server).

    The connection must have been opened with ``max_size=max_frame_bytes``: a larger message closes it with
    code 1009, which :meth:`receive` reports as a :class:`~agentrunner.errors.ProtocolError`.
    """

    def __init__(self, websocket: _WebSocket, *, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self._ws = websocket
        self.max_frame_bytes = max_frame_bytes
        self._pending: set[asyncio.Task[None]] = set()

    async def receive(self) -> bytes | None:
        """The next frame, or ``None`` once the connection closed normally."""
        from websockets.exceptions import ConnectionClosed

        try:
            message = await self._ws.recv()
        except ConnectionClosed as exc:
            codes = {frame.code for frame in (exc.rcvd, exc.sent) if frame is not None}
            if _MESSAGE_TOO_BIG in codes:
                raise ProtocolError(f"frame larger than {self.max_frame_bytes} bytes") from None
            return None
        return message.encode() if isinstance(message, str) else message

    async def send(self, data: bytes) -> None:
        """Send one frame as a text message (without its newline)."""
        from websockets.exceptions import ConnectionClosed

        try:
            await self._ws.send(data.rstrip(b"\n"), text=True)
        except ConnectionClosed as exc:
            raise ConnectionResetError(f"the WebSocket is closed: {exc}") from None

    async def send_batched(self, data: bytes) -> None:
        """Send one frame (a WebSocket message per frame: nothing to coalesce)."""
        await self.send(data)

    def send_nowait(self, data: bytes) -> None:
        """Send a small control frame from a task of its own (a WebSocket has no synchronous send)."""
        task = asyncio.get_running_loop().create_task(self._send_quietly(data))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _send_quietly(self, data: bytes) -> None:
        with contextlib.suppress(ConnectionError):
            await self.send(data)

    async def aclose(self) -> None:
        """Close the WebSocket after the control frames queued so far."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        await self._ws.close()


async def serve_websocket(
    runners: Sequence[AgentRunner], url: str, *, token: str, max_frame_bytes: int = MAX_FRAME_BYTES
) -> None:
    """Connect to a host at *url* (``ws://`` or ``wss://``) with *token* and serve *runners* until it closes."""
    try:
        from websockets.asyncio.client import connect
    except ImportError:  # pragma: no cover - depends on the environment
        raise RuntimeError(
            "a remote runtime needs the 'websockets' package: pip install websockets"
        ) from None
    from agentrunner import __version__

    headers = {"Authorization": f"Bearer {token}"}
    async with connect(url, additional_headers=headers, max_size=max_frame_bytes, compression=None) as ws:
        runtime = PluginRuntime(runners, sdk_version=__version__)
        await runtime.serve(WebSocketFrameChannel(ws, max_frame_bytes=max_frame_bytes))
