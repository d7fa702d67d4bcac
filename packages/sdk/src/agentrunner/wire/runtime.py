"""The plugin side of the wire: :class:`PluginRuntime` hosts a plugin's runners and serves one host connection.

Everything happens on one event loop: the reader decodes a frame and dispatches it without awaiting the runner,
each run is its own task, and back-calls are futures resolved by the reader. No thread hop on any path.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
from collections.abc import AsyncIterator, Sequence
from typing import Final, Literal, TypedDict, TypeGuard, cast

from pydantic import BaseModel, ValidationError

from agentrunner import codec
from agentrunner.actions import BackCallRequest
from agentrunner.api import AgentRunAPI
from agentrunner.codec import JsonObject
from agentrunner.context import AgentRunRequest
from agentrunner.errors import AgentAPIError, APIError, PayloadTooLargeError, ProtocolError, RuntimeAPIError
from agentrunner.runner import AgentRunner

from .channel import FrameChannel
from .codec import encode_frame, frame_from_object, parse_line
from .frames import (
    DEFAULT_STREAM_WINDOW,
    MAX_FRAME_BYTES,
    CallCancelFrame,
    CallEndFrame,
    CallErrorFrame,
    CallFrame,
    CallResultFrame,
    CancelFrame,
    ChunkFrame,
    CreditFrame,
    Frame,
    HelloFrame,
    ListRunnersFrame,
    PingFrame,
    PongFrame,
    RunEndError,
    RunEndFrame,
    RunFrame,
    RunnersFrame,
    StreamCreditFrame,
    WelcomeFrame,
)

__all__ = ["PluginRuntime", "WireAPITransport"]

_log = logging.getLogger("agentrunner.wire.runtime")

_END: Final = object()
"""Queue marker: the streaming call ended normally."""


class _CallResultWire(TypedDict):
    """A ``call_result`` frame as decoded: :class:`~agentrunner.wire.CallResultFrame`'s fields, checked by
    :func:`_is_call_result` instead of building the model (every unary back-call is answered by one)."""

    kind: Literal["call_result"]
    id: int
    result: JsonObject


def _is_call_result(raw: object) -> TypeGuard[_CallResultWire]:
    # The same constraints as CallResultFrame; anything else goes through the model (and its errors).
    if not isinstance(raw, dict):
        return False
    frame = cast("dict[str, object]", raw)
    return (
        frame.get("kind") == "call_result"
        and type(frame.get("id")) is int
        and type(frame.get("result")) is dict
    )


_NOT_SENT: Final = {"caller"}
"""Request fields a runtime never sends: the host stamps ``caller`` from the connection."""
_REQUEST_SERIALIZER: Final = BackCallRequest.__pydantic_serializer__


class _RunSlot:
    """A run hosted by this runtime: its task and its result credit."""

    __slots__ = ("credit", "credit_changed", "ended", "task")

    def __init__(self, window: int) -> None:
        self.credit = window
        self.credit_changed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.ended = False

    async def wait_credit(self) -> None:
        """Return once the run has credit for a result (the caller takes it)."""
        while self.credit <= 0:
            self.credit_changed.clear()
            await self.credit_changed.wait()


class WireAPITransport:
    """The :class:`~agentrunner.APITransport` of runs hosted by a :class:`PluginRuntime`: back-calls travel as
    ``call`` frames and are answered by the host. The host stamps ``caller`` from the connection."""

    def __init__(self, runtime: PluginRuntime, *, stream_window: int = DEFAULT_STREAM_WINDOW) -> None:
        self._runtime = runtime
        self._ids = itertools.count(1)
        self._calls: dict[int, asyncio.Future[JsonObject]] = {}
        self._streams: dict[int, asyncio.Queue[object]] = {}
        self.stream_window = stream_window

    @staticmethod
    def _wire_request(request: BackCallRequest) -> JsonObject:
        return request.model_dump(mode="json", exclude=_NOT_SENT, exclude_none=True)

    async def call(self, request: BackCallRequest, *, timeout: float | None) -> JsonObject:
        """Send a ``call`` frame and wait for its ``call_result`` / ``call_error``.

        *timeout* is enforced by :class:`~agentrunner.AgentRunAPI` around this call; when it cancels us the host
        is told with ``call_cancel``.
        """
        call_id = next(self._ids)
        future: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        self._calls[call_id] = future
        try:
            # A unary CallFrame written directly: pydantic serialises the request to JSON straight into the line,
            # with no dict built first and no frame model. JSON holding NaN or Infinity (params are not checked
            # when a caller builds its own request) takes the dict path, which writes them as null as before.
            body = _REQUEST_SERIALIZER.to_json(request, exclude=_NOT_SENT, exclude_none=True)
            if b"NaN" in body or b"Infinity" in body:
                frame = {"kind": "call", "id": call_id, "request": self._wire_request(request)}
                data = codec.dumps(frame) + b"\n"
            else:
                data = b'{"kind":"call","id":%d,"request":%s}\n' % (call_id, body)
            await self._runtime.send_encoded(data, what="CallFrame")
            return await future
        except asyncio.CancelledError:
            if not future.done():
                self._runtime.send_nowait(CallCancelFrame(id=call_id))
            raise
        finally:
            self._calls.pop(call_id, None)

    async def stream(self, request: BackCallRequest, *, timeout: float | None) -> AsyncIterator[JsonObject]:
        """Send a streaming ``call`` and yield its ``chunk`` frames, granting credit as they are consumed."""
        call_id = next(self._ids)
        queue: asyncio.Queue[object] = asyncio.Queue()
        self._streams[call_id] = queue
        window = self.stream_window
        refill = max(1, window // 2)
        consumed = 0
        finished = False
        try:
            frame = CallFrame(id=call_id, request=self._wire_request(request), stream=True, window=window)
            await self._runtime.send(frame)
            while True:
                item = await queue.get()
                if item is _END:
                    finished = True
                    return
                if isinstance(item, AgentAPIError):
                    finished = True
                    raise APIError.from_wire(item)
                assert isinstance(item, dict)
                yield item
                consumed += 1
                if consumed >= refill:
                    self._runtime.send_nowait(StreamCreditFrame(id=call_id, n=consumed))
                    consumed = 0
        finally:
            self._streams.pop(call_id, None)
            if not finished:
                self._runtime.send_nowait(CallCancelFrame(id=call_id))

    def deliver_result(self, call_id: int, result: JsonObject) -> None:
        """Route a ``call_result`` (its fields, decoded) like :meth:`deliver`."""
        future = self._calls.get(call_id)
        if future is not None:
            if not future.done():
                future.set_result(result)
            return
        queue = self._streams.get(call_id)
        if queue is not None:
            queue.put_nowait(
                AgentAPIError(code="runtime_error", message="host answered a stream with call_result")
            )

    def deliver(self, frame: CallResultFrame | CallErrorFrame | ChunkFrame | CallEndFrame) -> None:
        """Route an answer from the host to its waiting call; answers to abandoned calls are dropped."""
        future = self._calls.get(frame.id)
        if future is not None:
            if future.done():
                return
            if isinstance(frame, CallResultFrame):
                future.set_result(frame.result)
            elif isinstance(frame, CallErrorFrame):
                future.set_exception(APIError.from_wire(frame.error))
            else:
                future.set_exception(
                    RuntimeAPIError(f"host answered call {frame.id} with a {frame.kind!r} frame")
                )
            return
        queue = self._streams.get(frame.id)
        if queue is None:
            return
        if isinstance(frame, ChunkFrame):
            queue.put_nowait(frame.chunk)
        elif isinstance(frame, CallEndFrame):
            queue.put_nowait(_END)
        elif isinstance(frame, CallErrorFrame):
            queue.put_nowait(frame.error)
        else:
            queue.put_nowait(
                AgentAPIError(code="runtime_error", message="host answered a stream with call_result")
            )

    def fail_all(self, message: str) -> None:
        """The host is gone: every waiting call fails with ``runtime_error``."""
        error = AgentAPIError(code="runtime_error", message=message)
        for future in self._calls.values():
            if not future.done():
                future.set_exception(APIError.from_wire(error))
        for queue in self._streams.values():
            queue.put_nowait(error)


class PluginRuntime:
    """Hosts runner instances (one per class, shared by every run and binding) and serves a host connection.

    >>> runtime = PluginRuntime([MyRunner()])   # doctest: +SKIP
    >>> await runtime.serve(channel)            # doctest: +SKIP   (returns when the host closes the channel)
    """

    def __init__(
        self,
        runners: Sequence[AgentRunner],
        *,
        stream_window: int = DEFAULT_STREAM_WINDOW,
        sdk_version: str | None = None,
    ) -> None:
        self._runners: dict[str, AgentRunner] = {}
        for runner in runners:
            runner_id = runner.manifest.id
            if runner_id in self._runners:
                raise ValueError(f"two runners declare the id {runner_id}")
            self._runners[runner_id] = runner
        self._by_name = {runner.manifest.name: runner for runner in runners}
        self._runs: dict[str, _RunSlot] = {}
        self._channel: FrameChannel | None = None
        self._closing = False
        self._sdk_version = sdk_version
        self.max_frame_bytes: int = MAX_FRAME_BYTES
        """Largest frame the host accepts (from its ``hello``)."""
        self.transport: WireAPITransport = WireAPITransport(self, stream_window=stream_window)
        """The back-call transport every run's :class:`~agentrunner.AgentRunAPI` uses."""

    @property
    def runner_ids(self) -> list[str]:
        """Ids of the hosted runners."""
        return list(self._runners)

    # -- sending ---------------------------------------------------------------------------------------------

    async def send(self, frame: BaseModel) -> None:
        """Send a frame, waiting for the channel to drain.

        Raises :class:`~agentrunner.errors.PayloadTooLargeError` for a frame over the host's limit: the host
        would drop the whole connection for it, so it fails only the call or run that made it.
        """
        await self.send_encoded(encode_frame(frame), what=frame.__class__.__name__)

    async def send_encoded(self, data: bytes, *, what: str) -> None:
        """Like :meth:`send` for a frame encoded already (one NDJSON line); *what* names it in the error."""
        if self._channel is None or self._closing:
            raise RuntimeAPIError("the host connection is closed")
        if len(data) > self.max_frame_bytes + 1:
            raise PayloadTooLargeError(
                f"a {what} of {len(data)} bytes exceeds the host's {self.max_frame_bytes}-byte frame limit"
            )
        await self._channel.send(data)

    def send_nowait(self, frame: BaseModel) -> None:
        """Queue a small control frame without waiting; dropped once the connection is closing."""
        if self._channel is not None and not self._closing:
            self._channel.send_nowait(encode_frame(frame))

    # -- serving ---------------------------------------------------------------------------------------------

    async def serve(self, channel: FrameChannel) -> None:
        """Serve *channel* until the host closes it (or breaks the protocol), then cancel every run."""
        self._channel = channel
        try:
            while True:
                line = await channel.receive()
                if line is None:
                    break
                raw = parse_line(line)
                if _is_call_result(raw):
                    self.transport.deliver_result(raw["id"], raw["result"])
                    continue
                frame = frame_from_object(raw)
                if frame is not None:
                    await self._dispatch(frame)
        except ProtocolError as exc:
            _log.error("the host broke the wire protocol: %s", exc.message)
        except (ConnectionError, RuntimeAPIError):
            pass
        finally:
            await self._shutdown()

    async def _dispatch(self, frame: Frame) -> None:
        match frame:
            case CreditFrame(run_id=run_id, n=n):
                slot = self._runs.get(run_id)
                if slot is not None:
                    slot.credit += n
                    slot.credit_changed.set()
            case CallResultFrame() | CallErrorFrame() | ChunkFrame() | CallEndFrame():
                self.transport.deliver(frame)
            case RunFrame():
                self._start_run(frame)
            case CancelFrame(run_id=run_id):
                slot = self._runs.get(run_id)
                if slot is not None and slot.task is not None:
                    slot.task.cancel()
            case PingFrame(id=ping_id):
                await self.send(PongFrame(id=ping_id))
            case HelloFrame(id=hello_id, max_frame_bytes=limit):
                self.max_frame_bytes = limit
                welcome = WelcomeFrame(
                    id=hello_id, sdk_version=self._sdk_version, pid=os.getpid(), runners=self.runner_ids
                )
                await self.send(welcome)
            case ListRunnersFrame(id=list_id):
                manifests = [r.manifest.model_dump(mode="json") for r in self._runners.values()]
                await self.send(RunnersFrame(id=list_id, runners=manifests))
            case _:
                # pong, welcome, call, stream_credit, call_cancel, result, run_end, runners: host-bound kinds.
                _log.warning("ignoring a %r frame, which a host never sends", frame.kind)

    def _start_run(self, frame: RunFrame) -> None:
        run_id = frame.run_id
        if run_id in self._runs:
            error = RunEndError(code="runtime.duplicate_run", message=f"run {run_id} is already running")
            self.send_nowait(RunEndFrame(run_id=run_id, error=error))
            return
        slot = _RunSlot(frame.window)
        self._runs[run_id] = slot
        slot.task = asyncio.create_task(
            self._run(run_id, frame.request, slot), name=f"agentrunner-run-{run_id}"
        )
        slot.task.add_done_callback(lambda _task: self._after_run(run_id, slot))

    def _after_run(self, run_id: str, slot: _RunSlot) -> None:
        # A task cancelled before its first step never runs its body, so no run_end was sent: send it here.
        if self._runs.get(run_id) is slot:
            del self._runs[run_id]
        if not slot.ended and not self._closing:
            slot.ended = True
            error = RunEndError(code="cancelled", message="the run was cancelled by the host")
            self.send_nowait(RunEndFrame(run_id=run_id, error=error))

    def _resolve(self, request: AgentRunRequest) -> AgentRunner | None:
        return self._runners.get(request.runner_id) or self._by_name.get(request.runner_name)

    async def _run(self, run_id: str, raw_request: JsonObject, slot: _RunSlot) -> None:
        error: RunEndError | None = None
        try:
            try:
                request = AgentRunRequest.model_validate(raw_request)
            except ValidationError as exc:
                error = RunEndError(
                    code="runtime.invalid_request",
                    message=f"invalid run request: {exc.errors(include_url=False)}",
                )
                return
            runner = self._resolve(request)
            if runner is None:
                error = RunEndError(
                    code="runtime.runner_not_found",
                    message=f"this runtime hosts no runner {request.runner_id} (has {', '.join(self._runners)})",
                )
                return
            error = await self._drive(run_id, runner, request, slot)
        finally:
            self._runs.pop(run_id, None)
            if not self._closing:
                slot.ended = True
                with contextlib.suppress(ConnectionError, RuntimeAPIError):
                    await self.send(RunEndFrame(run_id=run_id, error=error))

    async def _drive(
        self, run_id: str, runner: AgentRunner, request: AgentRunRequest, slot: _RunSlot
    ) -> RunEndError | None:
        """Iterate the runner's stream, sending each result under credit; the error that ended it, if any."""
        ctx = request.context
        api = AgentRunAPI(
            self.transport, run_id=run_id, deadline_at=ctx.runtime.deadline_at, call_token=request.call_token
        )
        stream = runner.run(ctx, api)
        sequence = 0
        head = b'{"kind":"result","run_id":' + codec.dumps(run_id) + b',"sequence":'
        try:
            async for result in stream:
                data, sequence = _result_line(result, run_id, head, sequence)
                # The credit check and the send are inlined (the hot path): an awaited helper per result costs
                # a coroutine each even when nothing waits.
                if slot.credit <= 0:
                    await slot.wait_credit()
                slot.credit -= 1
                channel = self._channel
                if channel is None or self._closing:
                    raise RuntimeAPIError("the host connection is closed")
                if len(data) > self.max_frame_bytes + 1:
                    return RunEndError(
                        code="runtime.payload_too_large",
                        message=f"a result of {len(data)} bytes exceeds the host's {self.max_frame_bytes}-byte"
                        " frame limit",
                    )
                await channel.send_batched(data)
        except asyncio.CancelledError:
            # The cancel may have landed while we waited for credit, outside the runner's own await: deliver
            # it at the runner's yield too, so its cleanup sees CancelledError either way.
            await _throw_cancel(stream)
            if self._closing:
                raise
            return RunEndError(code="cancelled", message="the run was cancelled by the host")
        except Exception as exc:
            if self._closing:
                return None  # the host is gone: nobody to tell
            _log.exception("runner %s failed in run %s", request.runner_id, run_id)
            return RunEndError(code="runner.error", message=f"{type(exc).__name__}: {exc}")
        finally:
            closer = getattr(stream, "aclose", None)
            if closer is not None:
                await closer()
        return None

    async def _shutdown(self) -> None:
        self._closing = True
        self.transport.fail_all("the host connection closed")
        tasks = [slot.task for slot in self._runs.values() if slot.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._channel is not None:
            await self._channel.aclose()


async def _throw_cancel(stream: AsyncIterator[object]) -> None:
    athrow = getattr(stream, "athrow", None)
    if athrow is None:
        return
    try:
        await athrow(asyncio.CancelledError())
    except (asyncio.CancelledError, StopAsyncIteration, RuntimeError):
        pass
    except Exception:
        _log.debug("runner raised while being cancelled", exc_info=True)


def _result_line(result: object, run_id: str, head: bytes, last: int) -> tuple[bytes, int]:
    """The ``result`` frame line of *result* and its sequence (the runner's own, else the one after *last*).

    *head* is the frame's start up to its sequence, encoded once per run. A result model that carries its
    sequence is serialised to JSON by pydantic directly, without the Python dict a dump would build first; one
    whose JSON holds NaN or Infinity (possible inside a JsonValue field) takes the dict path, which writes them
    as ``null`` as before rather than as tokens the host cannot parse.
    """
    if isinstance(result, BaseModel):
        given = getattr(result, "sequence", None)
        if type(given) is int and given >= 1:
            body = type(result).__pydantic_serializer__.to_json(result)
            if b"NaN" not in body and b"Infinity" not in body:
                return b'%s%d,"result":%s}\n' % (head, given, body), given
    payload = _dump_result(result, run_id)
    given = payload.get("sequence")
    if isinstance(given, int) and not isinstance(given, bool) and given >= 1:
        sequence = given
    else:
        sequence = last + 1
        payload["sequence"] = sequence
    frame = {"kind": "result", "run_id": run_id, "sequence": sequence, "result": payload}
    return codec.dumps(frame) + b"\n", sequence


def _dump_result(result: object, run_id: str) -> JsonObject:
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json")
    if isinstance(result, dict):
        payload: JsonObject = dict(result)  # pyright: ignore[reportUnknownArgumentType]
        payload.setdefault("run_id", run_id)
        # Validated models refuse NaN themselves; a raw dict is checked here, before orjson writes it as null.
        where = codec.non_finite_path(payload)
        if where is not None:
            raise ValueError(f"the result holds NaN or Infinity at {where}, which JSON cannot carry")
        return payload
    raise TypeError(f"a runner must yield AgentRunResult objects, got {type(result).__name__}")
