"""Connection limits of the real server: half-open connections are closed, slow bodies answered 408, and
connections beyond the limit answered 503."""

from __future__ import annotations

import asyncio
import resource

from agentrunner_host.http.server import OWN_FILES, raise_open_files_limit
from agentrunner_host.service import HostService

from .conftest import LiveServer, SettingsFactory

_GENEROUS = 60.0


async def _closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection."""
    return await asyncio.wait_for(reader.read(), _GENEROUS)


async def test_half_open_connections_are_dropped(make_settings: SettingsFactory) -> None:
    """Connections that send nothing, or an unfinished request head, are closed by the server; a complete
    request on another connection is still answered."""
    settings = make_settings("[http]\nheader_timeout_seconds = 0.3\n")
    async with HostService.open(settings) as service, LiveServer(service) as live:
        streams = [await asyncio.open_connection("127.0.0.1", live.port) for _ in range(30)]
        for index, (_, writer) in enumerate(streams):
            if index % 2:
                writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
                await writer.drain()
        answers = await asyncio.gather(*(_closed_by_server(reader) for reader, _ in streams))
        assert all(answer == b"" for answer in answers)
        for _, writer in streams:
            writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", live.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        await writer.drain()
        assert (await _closed_by_server(reader)).startswith(b"HTTP/1.1 200")
        writer.close()


async def test_a_kept_alive_connection_that_starts_a_second_head_and_stalls_is_dropped(
    make_settings: SettingsFactory,
) -> None:
    """After a first answer, a connection trickling an unfinished second request head is closed too."""
    settings = make_settings("[http]\nheader_timeout_seconds = 0.3\nkeep_alive_seconds = 600\n")
    async with HostService.open(settings) as service, LiveServer(service) as live:
        reader, writer = await asyncio.open_connection("127.0.0.1", live.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _GENEROUS)
        assert head.startswith(b"HTTP/1.1 200")
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        await writer.drain()
        rest = await _closed_by_server(reader)
        assert b"HTTP/1.1" not in rest.split(b"\r\n\r\n", 1)[-1]  # the second request got no answer
        writer.close()


async def test_a_body_slower_than_the_body_timeout_is_answered_408(make_settings: SettingsFactory) -> None:
    """A client that declares a body and stops sending it is answered 408, not waited for."""
    settings = make_settings("[http]\nbody_timeout_seconds = 0.3\n")
    async with HostService.open(settings) as service, LiveServer(service) as live:
        reader, writer = await asyncio.open_connection("127.0.0.1", live.port)
        writer.write(
            b"POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"text":'
        )
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _GENEROUS)
        assert head.startswith(b"HTTP/1.1 408"), head
        writer.close()


async def test_connections_beyond_the_limit_are_answered_503(make_settings: SettingsFactory) -> None:
    """``http.max_connections`` bounds what one client can hold open."""
    settings = make_settings("[http]\nmax_connections = 3\nheader_timeout_seconds = 600\n")
    async with HostService.open(settings) as service, LiveServer(service) as live:
        held = [await asyncio.open_connection("127.0.0.1", live.port) for _ in range(3)]
        reader, writer = await asyncio.open_connection("127.0.0.1", live.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        await writer.drain()
        assert (await _closed_by_server(reader)).startswith(b"HTTP/1.1 503")
        writer.close()
        for _, w in held:
            w.close()


async def test_the_default_limit_serves_a_thousand_open_connections(make_settings: SettingsFactory) -> None:
    """The default ``max_connections`` holds 1,000 open connections (1,000 live SSE streams hold as many)
    and still answers the next request: the old default of 512 answered it 503."""
    settings = make_settings("[http]\nheader_timeout_seconds = 600\n")
    # serve raises its descriptor limit so: the 1,000 client ends are in this process too
    raise_open_files_limit(2 * 1000)
    async with HostService.open(settings) as service, LiveServer(service) as live:
        held: list[asyncio.StreamWriter] = []
        try:
            for _ in range(1000):
                held.append((await asyncio.open_connection("127.0.0.1", live.port))[1])
            reader, writer = await asyncio.open_connection("127.0.0.1", live.port)
            held.append(writer)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            await writer.drain()
            assert (await _closed_by_server(reader)).startswith(b"HTTP/1.1 200")
        finally:
            for w in held:
                w.close()
            await asyncio.gather(*(w.wait_closed() for w in held), return_exceptions=True)


def test_serve_raises_a_low_open_files_limit_to_fit_its_connections() -> None:
    """A soft ``RLIMIT_NOFILE`` below the connections plus serve's own files is raised (within the hard
    limit); a higher one is left alone."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        wanted = 300 + OWN_FILES
        expected = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        assert raise_open_files_limit(300) == expected
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (expected, hard)
        assert raise_open_files_limit(10) == expected  # never lowered
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
