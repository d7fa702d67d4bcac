"""The host side of one wire connection to a plugin runtime, over any :class:`~agentrunner.wire.FrameChannel`.

One reader task decodes frames and dispatches each without waiting on a consumer: results go to the run's
queue (bounded by the credit the host granted, so a fast runner cannot grow host memory), back-calls start their
own tasks. A slow result consumer therefore never delays a back-call's answer.

Identity is the connection: every back-call is stamped ``caller = plugin_id`` before it reaches the
:class:`~agentrunner_host.runtime.connection.BackCallHandler`, and a call naming a run this connection is not executing
is answered ``unauthorized`` without reaching it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Final, Literal, TypedDict, TypeGuard, cast

from agentrunner import ACTIONS, AgentRunRequest, APIError, BackCallRequest, ProtocolError, codec
from agentrunner.codec import JsonObject
from agentrunner.errors import AgentAPIError
from agentrunner.wire import (
    DEFAULT_RESULT_WINDOW,
    MAX_FRAME_BYTES,
    WIRE_VERSION,
    CallCancelFrame,
    CallEndFrame,
    CallErrorFrame,
    CallFrame,
    CancelFrame,
    ChunkFrame,
    CreditFrame,
    Frame,
    FrameChannel,
    HelloFrame,
    ListRunnersFrame,
    PingFrame,
    PongFrame,
    ResultFrame,
    RunEndFrame,
    RunFrame,
    RunnersFrame,
    StreamCreditFrame,
    WelcomeFrame,
    encode_frame,
    frame_from_object,
    parse_line,
)
from pydantic import BaseModel, ValidationError

from agentrunner_host.errors import RunnerTransportError
from agentrunner_host.runtime.connection import BackCallHandler, RawResult

__all__ = ["CLOSED", "CRASHED", "PROTOCOL_ERROR", "RESTARTED", "START_FAILED", "UNRESPONSIVE", "WireSession"]

CRASHED: Final = "runtime.crashed"
"""Run failure code: the runtime died (or closed its stream) while the run was live."""
PROTOCOL_ERROR: Final = "runtime.protocol_error"
"""Run failure code: the runtime sent something that is not a valid frame; the host dropped it."""
CLOSED: Final = "runtime.closed"
"""Run failure code: the host closed the connection (shutdown, kill)."""
START_FAILED: Final = "runtime.start_failed"
"""The runtime did not start or did not complete the handshake."""
UNRESPONSIVE: Final = "runtime.unresponsive"
"""Run failure code: the runtime stopped answering liveness pings (a blocked event loop); the host killed it."""
RESTARTED: Final = "runtime.restarted"
"""Run failure code: the host restarted the runtime because one of its runs ignored its cancellation."""
_RETRYABLE: Final = frozenset({CRASHED, UNRESPONSIVE, RESTARTED})

_log = logging.getLogger("agentrunner_host.runtime")


class _ResultWire(TypedDict):
    """A ``result`` frame as decoded: :class:`~agentrunner.wire.ResultFrame`'s fields, checked one by one by
    :func:`_is_result` instead of building the model (most frames are results)."""

    kind: Literal["result"]
    run_id: str
    sequence: int
    result: JsonObject


def _is_result(raw: object) -> TypeGuard[_ResultWire]:
    if not isinstance(raw, dict):
        return False
    frame = cast("dict[str, object]", raw)
    sequence = frame.get("sequence")
    return (
        frame.get("kind") == "result"
        and type(frame.get("run_id")) is str
        and type(sequence) is int
        and sequence >= 1
        and type(frame.get("result")) is dict
    )


class _CallWire(TypedDict):
    """A unary ``call`` frame as decoded: :class:`~agentrunner.wire.CallFrame`'s fields, checked by :func:`_is_unary_call`
    (a back-call's frame is validated once, as the :class:`~agentrunner.BackCallRequest` it carries)."""

    kind: Literal["call"]
    id: int
    request: JsonObject


def _is_unary_call(raw: object) -> TypeGuard[_CallWire]:
    # The same constraints as CallFrame; anything else (a streaming call, a value pydantic would coerce or
    # refuse) goes through CallFrame itself.
    if not isinstance(raw, dict):
        return False
    frame = cast("dict[str, object]", raw)
    window = frame.get("window", 1)
    return (
        frame.get("kind") == "call"
        and type(frame.get("id")) is int
        and type(frame.get("request")) is dict
        and frame.get("stream", False) is False
        and type(window) is int
        and window >= 1
    )


class _Ended:
    __slots__ = ("error",)

    def __init__(self, error: RunnerTransportError | None) -> None:
        self.error = error


class _HostRun:
    """A run live on this connection: its result queue, credit and in-flight back-calls."""

    __slots__ = ("calls", "credit", "queue", "remote_ended", "waiter")

    def __init__(self, window: int) -> None:
        # A deque and one future while the consumer waits, not an asyncio.Queue: a result costs an append and
        # a popleft instead of the queue's several calls (the credit bounds its length either way).
        self.queue: deque[RawResult | _Ended] = deque()
        self.waiter: asyncio.Future[None] | None = None
        self.credit = window
        self.remote_ended = False
        self.calls: set[int] = set()

    def put(self, item: RawResult | _Ended) -> None:
        self.queue.append(item)
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Return once the queue holds an item."""
        while not self.queue:
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None


class _Call:
    """A back-call being served; streaming calls wait for the runtime's chunk credit."""

    __slots__ = ("credit", "credit_changed", "run", "started", "task")

    def __init__(self, run: _HostRun, window: int) -> None:
        self.run = run
        self.credit = window
        self.credit_changed: asyncio.Event | None = None  # made by the first wait: unary calls never wait
        self.task: asyncio.Task[None] | None = None
        self.started = False
        """The task ran its first step; before that, cancelling it skips its body (and its clean-up)."""

    def add_credit(self, n: int) -> None:
        self.credit += n
        if self.credit_changed is not None:
            self.credit_changed.set()

    async def take_credit(self) -> None:
        while self.credit <= 0:
            if self.credit_changed is None:
                self.credit_changed = asyncio.Event()
            self.credit_changed.clear()
            await self.credit_changed.wait()
        self.credit -= 1


class WireSession:
    """Drives one runtime connection for the host: runs, discovery, back-calls, failure.

    A session lives as long as its channel. When the runtime dies or breaks the protocol, :meth:`fail` ends every
    live run with a :class:`RunnerTransportError` (``runtime.crashed`` / ``runtime.protocol_error``) and the
    session is done: the owner starts a new one.
    """

    def __init__(
        self,
        channel: FrameChannel,
        *,
        plugin_id: str,
        handler: BackCallHandler,
        result_window: int = DEFAULT_RESULT_WINDOW,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        describe_eof: Callable[[], Awaitable[str | tuple[str, str]]] | None = None,
        on_failure: Callable[[RunnerTransportError], None] | None = None,
        cancel_grace: float | None = 5.0,
    ) -> None:
        self.plugin_id = plugin_id
        self._cancel_grace = cancel_grace
        # Runs the host left (cancel, deadline, consumer gone) whose run_end has not arrived yet: each one's timer
        # restarts the runtime when the runner keeps ignoring the cancellation past the grace.
        self._abandoned: dict[str, asyncio.TimerHandle] = {}
        self._channel = channel
        self._handler = handler
        self._window = result_window
        self._refill = max(1, result_window // 2)
        self._max_frame_bytes = max_frame_bytes
        self._describe_eof = describe_eof
        self._on_failure = on_failure
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[BaseModel]] = {}
        self._runs: dict[str, _HostRun] = {}
        self._calls: dict[int, _Call] = {}
        self._reader: asyncio.Task[None] | None = None
        self.failure: RunnerTransportError | None = None
        """Why the session ended; ``None`` while it is alive."""
        self.welcome: WelcomeFrame | None = None
        """The runtime's answer to the handshake."""

    # -- lifecycle -------------------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        """The session can start runs."""
        return self.failure is None

    @property
    def live_runs(self) -> list[str]:
        """Ids of the runs live on this connection."""
        return list(self._runs)

    def start(self) -> None:
        """Start the reader task."""
        if self._reader is None:
            self._reader = asyncio.create_task(self._read_loop(), name=f"agentrunner-wire-{self.plugin_id}")

    async def handshake(self, *, timeout: float) -> WelcomeFrame:
        """Send ``hello`` and wait for ``welcome``; raises :class:`RunnerTransportError` ``runtime.start_failed``."""
        self.start()
        try:
            reply = await self._request(
                lambda i: HelloFrame(id=i, plugin_id=self.plugin_id, max_frame_bytes=self._max_frame_bytes),
                timeout=timeout,
            )
        except TimeoutError:
            raise RunnerTransportError(
                START_FAILED, f"plugin {self.plugin_id}: no handshake within {timeout:g}s"
            ) from None
        except RunnerTransportError as exc:
            raise RunnerTransportError(START_FAILED, f"plugin {self.plugin_id}: {exc.message}") from None
        assert isinstance(reply, WelcomeFrame)
        if reply.wire_version != WIRE_VERSION:
            message = f"plugin {self.plugin_id} speaks wire version {reply.wire_version}, host {WIRE_VERSION}"
            self.fail(START_FAILED, message)
            raise RunnerTransportError(START_FAILED, message)
        self.welcome = reply
        return reply

    def fail(self, code: str, message: str) -> None:
        """End the session: every live run ends with ``code``, calls stop, waiters fail. Idempotent."""
        if self.failure is not None:
            return
        retryable = code in _RETRYABLE
        for timer in self._abandoned.values():
            timer.cancel()
        self._abandoned.clear()
        self.failure = RunnerTransportError(code, message, retryable=retryable)
        if code != CLOSED:
            _log.warning(
                "plugin %s: %s (%s); %d live run(s) end", self.plugin_id, message, code, len(self._runs)
            )
        for run in self._runs.values():
            if not run.remote_ended:
                run.remote_ended = True
                run.put(_Ended(RunnerTransportError(code, message, retryable=retryable)))
        for call in self._calls.values():
            if call.task is not None:
                call.task.cancel()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(RunnerTransportError(code, message, retryable=retryable))
        self._pending.clear()
        if self._on_failure is not None:
            self._on_failure(self.failure)

    async def aclose(self) -> None:
        """End the session (runs end ``runtime.closed``), close the channel and stop every task."""
        self.fail(CLOSED, f"plugin {self.plugin_id}: the host closed the connection")
        await self._channel.aclose()
        tasks = [c.task for c in self._calls.values() if c.task is not None]
        if self._reader is not None:
            tasks.append(self._reader)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def list_runners(self, *, timeout: float = 30.0) -> list[JsonObject]:
        """``list_runners``: the runtime's runner manifests, undecoded."""
        reply = await self._request(lambda i: ListRunnersFrame(id=i), timeout=timeout)
        assert isinstance(reply, RunnersFrame)
        return reply.runners

    async def ping(self, *, timeout: float = 10.0) -> None:
        """Round trip a ``ping``."""
        await self._request(lambda i: PingFrame(id=i), timeout=timeout)

    async def keepalive(self, *, interval: float, timeout: float, then: str) -> None:
        """Ping the runtime every *interval* seconds while the session lives. One that has not answered within
        *timeout* is unresponsive (a blocked event loop, a peer that stopped reading): the session fails with
        ``runtime.unresponsive``, ending its live runs; *then* says what the owner does about it (for the log)."""
        while self.alive:
            await asyncio.sleep(interval)
            if not self.alive:
                return
            try:
                await self.ping(timeout=timeout)
            except TimeoutError:
                self.fail(
                    UNRESPONSIVE,
                    f"plugin {self.plugin_id}: no answer to a liveness ping within {timeout:g}s (a blocked event"
                    f" loop?); {then}",
                )
                return
            except RunnerTransportError:
                return

    async def run(self, request: AgentRunRequest) -> AsyncGenerator[RawResult, None]:
        """Start a run and yield its results (undecoded dicts with ``sequence`` set) in order.

        Raises :class:`RunnerTransportError` when the run ended with an error (the runner raised: ``runner.error``;
        cancelled: ``cancelled``; the runtime died: ``runtime.crashed``...). Leaving the iteration early cancels
        the run in the runtime.
        """
        self._raise_if_failed()
        run_id = request.context.run_id
        if run_id in self._runs:
            raise RunnerTransportError(
                "runtime.duplicate_run", f"run {run_id} is already live on {self.plugin_id}"
            )
        run = _HostRun(self._window)
        self._runs[run_id] = run
        consumed = 0
        try:
            await self._send_run(run_id, request)
            while True:
                if not run.queue:
                    await run.wait()
                item = run.queue.popleft()
                if isinstance(item, _Ended):
                    if item.error is not None:
                        raise item.error
                    return
                yield item
                consumed += 1
                if consumed >= self._refill and not run.remote_ended:
                    run.credit += consumed
                    self._send_nowait(CreditFrame(run_id=run_id, n=consumed))
                    consumed = 0
        finally:
            if self._runs.get(run_id) is run:
                del self._runs[run_id]
            self._cancel_calls(run)
            if not run.remote_ended and self.alive:
                self._send_nowait(CancelFrame(run_id=run_id))
                if self._cancel_grace is not None and run_id not in self._abandoned:
                    loop = asyncio.get_running_loop()
                    self._abandoned[run_id] = loop.call_later(
                        self._cancel_grace, self._cancel_ignored, run_id
                    )

    async def _send_run(self, run_id: str, request: AgentRunRequest) -> None:
        # The request is serialised to JSON by pydantic directly into the frame (a RunFrame would hold the dict
        # a dump builds first: the context is the largest thing the host sends). JSON holding NaN or Infinity
        # (possible inside a JsonValue field) takes the model's path, which writes them as null as before
        # rather than as tokens the runtime cannot parse.
        body = type(request).__pydantic_serializer__.to_json(request)
        if b"NaN" in body or b"Infinity" in body:
            await self._send(
                RunFrame(run_id=run_id, request=request.model_dump(mode="json"), window=self._window)
            )
            return
        data = b'{"kind":"run","run_id":%s,"request":%s,"window":%d}\n' % (
            codec.dumps(run_id),
            body,
            self._window,
        )
        if len(data) > self._max_frame_bytes + 1:
            raise RunnerTransportError(
                "runtime.payload_too_large", f"a RunFrame of {len(data)} bytes exceeds the frame limit"
            )
        await self._write(data)

    def _cancel_ignored(self, run_id: str) -> None:
        """A run the host left never answered its cancel with ``run_end``: its task (and whatever it started)
        lives on in the runtime, so the runtime is restarted — the only way to stop a runner that ignores it."""
        if self._abandoned.pop(run_id, None) is None or not self.alive:
            return
        self.fail(
            RESTARTED,
            f"plugin {self.plugin_id}: run {run_id} ignored its cancellation for {self._cancel_grace:g}s;"
            " the host restarts the runtime",
        )

    async def cancel(self, run_id: str) -> None:
        """Ask the runtime to cancel *run_id*; a no-op when it is not live here."""
        run = self._runs.get(run_id)
        if run is not None and not run.remote_ended and self.alive:
            await self._send(CancelFrame(run_id=run_id))

    # -- plumbing --------------------------------------------------------------------------------------------

    def _raise_if_failed(self) -> None:
        if self.failure is not None:
            raise RunnerTransportError(
                self.failure.code, self.failure.message, retryable=self.failure.retryable
            )

    async def _request(self, make: Callable[[int], BaseModel], *, timeout: float) -> BaseModel:
        self._raise_if_failed()
        request_id = next(self._ids)
        future: asyncio.Future[BaseModel] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            # asyncio.timeout, never wait_for (which can swallow the caller's cancellation on 3.11).
            async with asyncio.timeout(timeout):
                await self._send(make(request_id))
                return await future
        finally:
            self._pending.pop(request_id, None)

    async def _send(self, frame: BaseModel) -> None:
        data = encode_frame(frame)
        if len(data) > self._max_frame_bytes + 1:
            raise RunnerTransportError(
                "runtime.payload_too_large",
                f"a {frame.__class__.__name__} of {len(data)} bytes exceeds the frame limit",
            )
        await self._write(data)

    async def _write(self, data: bytes) -> None:
        try:
            await self._channel.send(data)
        except (ConnectionError, RuntimeError) as exc:
            # The reader sees the same death and fails the session with the right code.
            raise RunnerTransportError(
                CRASHED, f"plugin {self.plugin_id}: cannot write to the runtime: {exc}"
            ) from None

    def _send_nowait(self, frame: BaseModel) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            self._channel.send_nowait(encode_frame(frame))

    def _cancel_calls(self, run: _HostRun) -> None:
        for call_id in list(run.calls):
            call = self._calls.get(call_id)
            if call is not None:
                self._cancel_call(call_id, call)

    def _cancel_call(self, call_id: int, call: _Call) -> None:
        if call.task is not None:
            call.task.cancel()
        if not call.started:
            # Cancelled before its first step, the task never enters the body whose finally forgets it.
            self._forget_call(call_id, call)

    async def _read_loop(self) -> None:
        try:
            while True:
                line = await self._channel.receive()
                if line is None:
                    break
                raw = parse_line(line)
                if _is_result(raw):
                    # Most frames are results: checked field by field here, the same constraints as
                    # ResultFrame, without building a model per result.
                    self._on_result(raw["run_id"], raw["sequence"], raw["result"])
                    continue
                if _is_unary_call(raw):
                    self._start_call(raw["id"], raw["request"], stream=False, window=0)
                    continue
                frame = frame_from_object(raw)
                if frame is not None:
                    self._dispatch(frame)
        except ProtocolError as exc:
            self.fail(PROTOCOL_ERROR, f"plugin {self.plugin_id} broke the wire protocol: {exc.message}")
            return
        except (ConnectionError, OSError) as exc:
            self.fail(CRASHED, f"plugin {self.plugin_id}: reading the runtime failed: {exc}")
            return
        if self.failure is None:
            code, message = CRASHED, f"plugin {self.plugin_id}: the runtime closed its stream"
            if self._describe_eof is not None:
                # A (code, message) pair names why it ended (a resource limit); a message alone is a crash.
                described = await self._describe_eof()
                code, message = described if isinstance(described, tuple) else (CRASHED, described)
            self.fail(code, message)

    def _on_result(self, run_id: str, sequence: int, result: JsonObject) -> None:
        run = self._runs.get(run_id)
        if run is None or run.remote_ended:
            return  # the host already left this run; late results are dropped
        run.credit -= 1
        if run.credit < 0:
            raise ProtocolError(f"run {run_id}: a result beyond the granted credit")
        if result.get("sequence") != sequence:
            result["sequence"] = sequence
        run.put(result)

    def _dispatch(self, frame: Frame) -> None:
        match frame:
            case ResultFrame(run_id=run_id, sequence=sequence, result=result):
                self._on_result(run_id, sequence, result)
            case RunEndFrame(run_id=run_id, error=error):
                run = self._runs.get(run_id)
                if run is None or run.remote_ended:
                    timer = self._abandoned.pop(run_id, None)
                    if timer is not None:  # the cancelled run did stop
                        timer.cancel()
                    return
                run.remote_ended = True
                failure = (
                    None
                    if error is None
                    else RunnerTransportError(error.code, error.message, retryable=error.retryable)
                )
                run.put(_Ended(failure))
                self._cancel_calls(run)
            case CallFrame(id=call_id, request=request, stream=stream, window=window):
                self._start_call(call_id, request, stream=stream, window=window)
            case StreamCreditFrame(id=call_id, n=n):
                call = self._calls.get(call_id)
                if call is not None:
                    call.add_credit(n)
            case CallCancelFrame(id=call_id):
                call = self._calls.get(call_id)
                if call is not None:
                    self._cancel_call(call_id, call)
            case WelcomeFrame() | RunnersFrame() | PongFrame():
                future = self._pending.get(frame.id)
                if future is not None and not future.done():
                    future.set_result(frame)
            case PingFrame(id=ping_id):
                self._send_nowait(PongFrame(id=ping_id))
            case _:
                _log.warning(
                    "plugin %s sent a %r frame, which only a host sends; ignored", self.plugin_id, frame.kind
                )

    # -- back-calls ------------------------------------------------------------------------------------------

    def _start_call(self, call_id: int, wire_request: JsonObject, *, stream: bool, window: int) -> None:
        if call_id in self._calls:
            raise ProtocolError(f"call id {call_id} is already in use")
        raw = dict(wire_request)
        raw["caller"] = self.plugin_id  # identity is the connection, whatever the runtime wrote
        try:
            request = BackCallRequest.model_validate(raw)
        except ValidationError as exc:
            self._answer_error(
                call_id, "invalid_argument", f"invalid back-call request: {exc.errors(include_url=False)}"
            )
            return
        run = self._runs.get(request.run_id)
        if run is None or run.remote_ended:
            self._answer_error(call_id, "unauthorized", f"run {request.run_id} is not live on this runtime")
            return
        spec = ACTIONS.get(request.action)
        if spec is not None and spec.streaming != stream:
            how = "a streaming" if spec.streaming else "a unary"
            self._answer_error(call_id, "invalid_argument", f"{request.action} is {how} action")
            return
        call = _Call(run, window)
        # Each call gets its own task from the start: handlers may rely on task identity (asyncio.timeout
        # cancels the current task; anyio locks remember their owner), so a hand-rolled eager first step in the
        # reader would break them. The task forgets the call itself when it ends (no done callback to schedule).
        serve = (
            self._serve_stream(call_id, call, request)
            if stream
            else self._serve_unary(call_id, call, request)
        )
        self._calls[call_id] = call
        run.calls.add(call_id)
        call.task = asyncio.create_task(serve, name=f"agentrunner-call-{self.plugin_id}-{call_id}")

    def _forget_call(self, call_id: int, call: _Call) -> None:
        if self._calls.get(call_id) is call:
            del self._calls[call_id]
        call.run.calls.discard(call_id)

    def _answer_error(self, call_id: int, code: str, message: str) -> None:
        self._send_nowait(CallErrorFrame(id=call_id, error=AgentAPIError(code=code, message=message)))

    async def _send_error(self, call_id: int, error: APIError) -> None:
        with contextlib.suppress(RunnerTransportError):
            await self._send(CallErrorFrame(id=call_id, error=error.to_wire()))

    async def _serve_unary(self, call_id: int, call: _Call, request: BackCallRequest) -> None:
        call.started = True
        try:
            try:
                result = await self._handler.handle(request)
            except APIError as exc:
                await self._send_error(call_id, exc)
                return
            except Exception:
                _log.exception("back-call %s of plugin %s failed", request.action, self.plugin_id)
                await self._send_error(
                    call_id, APIError.from_wire({"code": "runtime_error", "message": "internal error"})
                )
                return
            await self._answer_result(call_id, result)
        finally:
            self._forget_call(call_id, call)

    async def _answer_result(self, call_id: int, result: JsonObject) -> None:
        # CallResultFrame's fields encoded directly: the model would only copy the handler's JSON object.
        try:
            data = codec.dumps({"kind": "call_result", "id": call_id, "result": result}) + b"\n"
        except TypeError as exc:
            await self._send_error(
                call_id,
                APIError.from_wire({"code": "runtime_error", "message": f"result is not JSON: {exc}"}),
            )
            return
        if len(data) > self._max_frame_bytes + 1:
            message = f"a CallResultFrame of {len(data)} bytes exceeds the frame limit"
            await self._send_error(
                call_id, APIError.from_wire({"code": "payload_too_large", "message": message})
            )
            return
        with contextlib.suppress(RunnerTransportError):
            await self._write(data)

    async def _serve_stream(self, call_id: int, call: _Call, request: BackCallRequest) -> None:
        call.started = True
        chunks = self._handler.handle_stream(request)
        try:
            async for chunk in chunks:
                await call.take_credit()
                await self._send(ChunkFrame(id=call_id, chunk=chunk))
            await self._send(CallEndFrame(id=call_id))
        except APIError as exc:
            await self._send_error(call_id, exc)
        except RunnerTransportError:
            pass
        except Exception:
            _log.exception("streaming back-call %s of plugin %s failed", request.action, self.plugin_id)
            await self._send_error(
                call_id, APIError.from_wire({"code": "runtime_error", "message": "internal error"})
            )
        finally:
            try:
                closer = getattr(chunks, "aclose", None)
                if closer is not None:
                    await closer()
            finally:
                self._forget_call(call_id, call)
