"""The real server sends the writes of one event-loop turn as one: a short streamed answer leaves in one
``send``, and what is held is sent on the loop's next turn, before a close, or never after an abort."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from agentrunner_host.http.coalescing import HOLD_BYTES, CoalescingTransport
from agentrunner_host.service import HostService

from .conftest import LiveServer, SettingsFactory


class FakeSocketTransport(asyncio.Transport):
    """A test double of a socket transport: records what it is asked to do."""

    __slots__ = ("calls", "closing")

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, bytes]] = []
        self.closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.calls.append(("write", bytes(data)))

    def close(self) -> None:
        self.calls.append(("close", b""))
        self.closing = True

    def abort(self) -> None:
        self.calls.append(("abort", b""))
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 0


async def _next_turn() -> None:
    # a callback scheduled now runs after the ones already scheduled (the transport's send among them)
    done = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(done.set_result, None)
    await done


async def test_one_turns_writes_reach_the_socket_transport_as_one_on_the_next_turn() -> None:
    inner = FakeSocketTransport()
    transport = CoalescingTransport(inner, asyncio.get_running_loop())
    transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
    transport.write(b"")
    transport.write(bytearray(b"5\r\nhello\r\n"))
    transport.write(b"0\r\n\r\n")
    assert inner.calls == []
    assert transport.get_write_buffer_size() == 19 + 10 + 5
    await _next_turn()
    assert inner.calls == [("write", b"HTTP/1.1 200 OK\r\n\r\n5\r\nhello\r\n0\r\n\r\n")]
    transport.write(b"later")
    await _next_turn()
    assert inner.calls[1:] == [("write", b"later")]


async def test_a_close_sends_what_is_held_first_and_an_abort_drops_it() -> None:
    loop = asyncio.get_running_loop()
    closed, aborted = FakeSocketTransport(), FakeSocketTransport()
    first, second = CoalescingTransport(closed, loop), CoalescingTransport(aborted, loop)
    first.write(b"bye")
    first.close()
    second.write(b"lost")
    second.abort()
    await _next_turn()
    assert closed.calls == [("write", b"bye"), ("close", b"")]
    assert aborted.calls == [("abort", b"")]
    assert first.is_closing() and second.is_closing()


async def test_a_turn_writing_more_than_the_hold_limit_reaches_the_socket_transport_at_once() -> None:
    """A live feed's window (up to 16 results of up to 1 MiB) can be framed in one turn: the socket transport
    gets it as it passes the limit, so its buffer fills and pauses the writer as without the holding."""
    inner = FakeSocketTransport()
    transport = CoalescingTransport(inner, asyncio.get_running_loop())
    transport.write(b"x" * 40_000)
    assert inner.calls == []
    transport.write(b"y" * (HOLD_BYTES - 40_000))
    assert inner.calls == [("write", b"x" * 40_000 + b"y" * (HOLD_BYTES - 40_000))]
    assert transport.get_write_buffer_size() == 0
    transport.write(b"z")
    await _next_turn()
    assert inner.calls[1:] == [("write", b"z")]


async def test_what_is_held_for_a_connection_lost_meanwhile_is_dropped() -> None:
    inner = FakeSocketTransport()
    transport = CoalescingTransport(inner, asyncio.get_running_loop())
    transport.write(b"too late")
    inner.closing = True  # the peer went away before the next turn
    await _next_turn()
    assert inner.calls == []


async def test_a_streamed_echo_answer_leaves_the_server_in_one_send(
    make_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the server ``serve`` runs: head, events and the chunked end of ``POST /v1/events?stream=true``
    reach the server socket's transport as one write (uvicorn writes them as three), bytes intact."""
    writes: list[bytes] = []
    async with HostService.open(make_settings()) as service, LiveServer(service) as live:
        _, probe = await asyncio.open_connection("127.0.0.1", live.port)
        socket_transport = type(probe.transport)  # asyncio's socket transport class, the server's too
        probe.close()
        original = socket_transport.write

        def counting(self: asyncio.WriteTransport, data: bytes | bytearray | memoryview) -> None:
            sockname = self.get_extra_info("sockname")
            if isinstance(sockname, tuple) and sockname[1] == live.port:  # the server's side of a connection
                writes.append(bytes(data))
            original(self, data)

        monkeypatch.setattr(socket_transport, "write", counting)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{live.port}") as client:
            for _ in range(2):  # a kept-alive connection's second answer too
                writes.clear()
                response = await client.post("/v1/events?stream=true", json={"text": "hello"})
                assert response.status_code == 200
                assert [line for line in response.text.splitlines() if line.startswith("event:")] == [
                    "event: message.delta",
                    "event: message.completed",
                    "event: run.completed",
                ]
                assert len(writes) == 1
                assert writes[0].startswith(b"HTTP/1.1 200 OK\r\n") and writes[0].endswith(b"\r\n0\r\n\r\n")


async def test_a_buffer_the_caller_reuses_after_writing_is_sent_as_it_was_written() -> None:
    inner = FakeSocketTransport()
    transport = CoalescingTransport(inner, asyncio.get_running_loop())
    buffer = bytearray(b"first")
    transport.write(buffer)
    buffer[:] = b"later"
    transport.write(memoryview(buffer))
    await _next_turn()
    assert inner.calls == [("write", b"firstlater")]
