"""Announcements between the hosts of one database: PostgreSQL ``LISTEN``/``NOTIFY``.

One dedicated asyncpg connection per host listens on the channels the host cares about (results committed,
definitions changed, cancel requests). It is outside the engine's pool on purpose: a listening connection
is held for the life of the host and must never be handed to a statement. When it breaks, it is opened
again with a growing delay (up to :data:`MAX_RECONNECT_DELAY`); because notifications sent meanwhile are
lost, every reconnect is reported to the subscribers (:meth:`Notifications.on_reconnect`), which then read
the store instead of trusting that nothing happened. A periodic ``SELECT 1`` notices a connection that died
without the socket saying so.

On SQLite (one machine, usually one host process) nothing is listened to: :attr:`Notifications.listening`
is False and callers fall back to polling the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Final, Protocol, cast

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["KEEPALIVE_SECONDS", "MAX_RECONNECT_DELAY", "Notifications"]

log = logging.getLogger("agentrunner.cluster")

KEEPALIVE_SECONDS: Final = 10.0
"""How often the listening connection is probed with ``SELECT 1``."""
MAX_RECONNECT_DELAY: Final = 5.0
"""Longest wait between two attempts to open the listening connection again."""

Handler = Callable[[str], None]
"""Called with a notification's payload, on the event loop (must not block)."""


class _ListeningConnection(Protocol):
    """What this module uses of an ``asyncpg.Connection`` (the driver ships no type information)."""

    def add_termination_listener(self, callback: Callable[[object], None]) -> None: ...
    async def add_listener(self, channel: str, callback: Callable[[object, int, str, str], None]) -> None: ...
    async def execute(self, query: str) -> str: ...
    def terminate(self) -> None: ...
    def get_server_pid(self) -> int: ...


class Notifications:
    """The host's listening connection and a way to notify the others (see the module docstring)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self.listening: bool = engine.dialect.name == "postgresql"
        """Notifications reach this host (PostgreSQL); False on SQLite, where callers poll."""
        self._handlers: dict[str, list[Handler]] = {}
        self._reconnect: list[Callable[[], None]] = []
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.connected = asyncio.Event()
        """Set while the listening connection is open (tests wait on it)."""
        self.backend_pid: int | None = None
        """PostgreSQL's process id of the listening connection while it is open."""
        self.connector: Callable[[str], Awaitable[object]] | None = None
        """Opens the listening connection from a DSN (default: ``asyncpg.connect``); a test may wrap it to
        hold a reconnect back."""

    def subscribe(self, channel: str, handler: Handler) -> None:
        """Call *handler* with the payload of every notification on *channel* (subscribe before :meth:`start`)."""
        self._handlers.setdefault(channel, []).append(handler)

    def on_reconnect(self, callback: Callable[[], None]) -> None:
        """Call *callback* every time the listening connection is (re)opened: notifications may have been
        missed, so the subscriber should look at the store again."""
        self._reconnect.append(callback)

    async def start(self) -> None:
        """Open the listening connection (PostgreSQL) and wait, briefly, for the first attempt."""
        if not self.listening or self._task is not None:
            return
        self._task = asyncio.create_task(self._listen(), name="agentrunner-listen")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10):
                await self.connected.wait()

    async def notify(self, channel: str, payload: str) -> None:
        """Send a notification (through the engine's pool, in autocommit: delivered at once). A no-op on SQLite."""
        if not self.listening:
            return
        async with self._engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(
                text("SELECT pg_notify(:channel, :payload)"), {"channel": channel, "payload": payload}
            )

    async def aclose(self) -> None:
        """Stop listening."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def _dispatch(self, channel: str, payload: str) -> None:
        for handler in self._handlers.get(channel, ()):
            try:
                handler(payload)
            except Exception:
                log.exception("a handler of channel %s failed", channel)

    async def _listen(self) -> None:
        import asyncpg  # the PostgreSQL driver the engine uses already

        default = cast(Callable[..., Awaitable[_ListeningConnection]], asyncpg.connect)  # pyright: ignore[reportUnknownMemberType]
        dsn = self._engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        delay = 0.05
        while not self._closed:
            conn: _ListeningConnection | None = None
            lost = asyncio.Event()
            try:
                if self.connector is not None:
                    conn = cast(_ListeningConnection, await self.connector(dsn))
                else:
                    conn = await default(dsn, timeout=10)
                self.backend_pid = conn.get_server_pid()
                conn.add_termination_listener(_setter(lost))
                for channel in self._handlers:
                    await conn.add_listener(channel, self._on_notification)
                self.connected.set()
                delay = 0.05
                for callback in self._reconnect:
                    try:
                        callback()
                    except Exception:
                        log.exception("a reconnect callback failed")
                while not self._closed:
                    try:
                        async with asyncio.timeout(KEEPALIVE_SECONDS):
                            await lost.wait()
                        break
                    except TimeoutError:
                        async with asyncio.timeout(KEEPALIVE_SECONDS):
                            await conn.execute("SELECT 1")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("the notification connection failed (%s); reconnecting", type(exc).__name__)
            finally:
                self.connected.clear()
                self.backend_pid = None
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.terminate()
            if self._closed:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_RECONNECT_DELAY)

    def _on_notification(self, _conn: object, _pid: int, channel: str, payload: str) -> None:
        self._dispatch(channel, payload)


def _setter(event: asyncio.Event) -> Callable[[object], None]:
    def on_termination(_conn: object) -> None:
        event.set()

    return on_termination
