"""Starting a plugin runtime: load the plugin's runner classes, then serve the host over stdio."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from agentrunner.errors import RunnerDefinitionError
from agentrunner.runner import AgentRunner
from agentrunner.runner_id import RunnerId

from .channel import StreamFrameChannel
from .frames import MAX_FRAME_BYTES
from .loader import load_entry_point_runners, load_runner_class, runner_refs_from_plugin_dir
from .runtime import PluginRuntime

__all__ = ["load_runners", "serve_stdio"]


class _WritePipeProtocol(asyncio.streams.FlowControlMixin):
    """Flow control for the frame pipe, plus the close waiter ``StreamWriter.wait_closed`` needs."""

    def __init__(self) -> None:
        super().__init__()
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self._closed.done():
            self._closed.set_result(None)

    def _get_close_waiter(self, stream: asyncio.StreamWriter) -> asyncio.Future[None]:
        return self._closed


def load_runners(
    *,
    plugin_dir: Path | None = None,
    refs: Sequence[str] = (),
    entry_points: bool = False,
    plugin_id: str | None = None,
) -> list[AgentRunner]:
    """One instance of each runner class the arguments name (see ``agentrunner-plugin --help``).

    Raises :class:`RunnerDefinitionError` when nothing is found, a reference is wrong, or (with *plugin_id*) a
    runner's id belongs to another plugin.
    """
    if plugin_dir is not None:
        plugin_dir = plugin_dir.resolve()
        sys.path.insert(0, str(plugin_dir))
        if not refs and not entry_points:
            refs = runner_refs_from_plugin_dir(plugin_dir)
    classes = [load_runner_class(ref, base_dir=plugin_dir) for ref in refs]
    if entry_points:
        classes += load_entry_point_runners(plugin_id=plugin_id)
    if not classes:
        raise RunnerDefinitionError("no runner to serve: pass --plugin-dir, --runner or --entry-points")
    unique = list(dict.fromkeys(classes))
    if plugin_id is not None:
        for cls in unique:
            if RunnerId.parse(cls.manifest.id).plugin_id != plugin_id:
                raise RunnerDefinitionError(
                    f"{cls.__qualname__} declares {cls.manifest.id}, which does not belong to plugin {plugin_id}"
                )
    return [cls() for cls in unique]


async def serve_stdio(
    runners: Sequence[AgentRunner], *, frame_fd: int = 1, max_frame_bytes: int = MAX_FRAME_BYTES
) -> None:
    """Serve *runners* with frames read from stdin and written to *frame_fd*, until stdin closes."""
    from agentrunner import __version__

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=max_frame_bytes)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", buffering=0, closefd=False)
    )
    write_transport, write_protocol = await loop.connect_write_pipe(
        _WritePipeProtocol, os.fdopen(frame_fd, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(write_transport, write_protocol, reader, loop)
    channel = StreamFrameChannel(reader, writer, max_frame_bytes=max_frame_bytes)
    runtime = PluginRuntime(runners, sdk_version=__version__)
    try:
        await runtime.serve(channel)
    finally:
        read_transport.close()
        write_transport.close()
