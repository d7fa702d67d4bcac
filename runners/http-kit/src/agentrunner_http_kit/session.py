"""One run's HTTP client: every call bounded by the run's deadline, failures mapped to the common codes, the
stream closed on every exit (so a cancelled run closes its connection and the platform sees it)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import types
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, Final, TypeVar

import httpx
from agentrunner import AgentRunContext
from httpx_sse import EventSource, ServerSentEvent, SSEError
from pydantic import JsonValue

from .errors import PlatformError, status_error, transport_error
from .jsonstream import JsonObjectStream
from .redaction import SecretRedactor
from .timing import ReadWatch, RunDeadline

__all__ = ["MAX_BODY_BYTES", "HttpSession", "HttpStream"]

MAX_BODY_BYTES: Final = 4 * 1024 * 1024
"""Largest non-streamed body read (JSON answers, error bodies)."""

_ERROR_BODY_BYTES: Final = 16 * 1024
_FINISH_SECONDS: Final = 0.1
"""How long a stream left after the platform's last frame may take to end by itself (see
:meth:`HttpStream.finish`)."""
_T = TypeVar("_T")
_SSL: list[ssl.SSLContext] = []


def _ssl_context() -> ssl.SSLContext:
    # Building the default context loads the CA bundle (milliseconds); one per process is enough.
    if not _SSL:
        _SSL.append(httpx.create_ssl_context())
    return _SSL[0]


class HttpStream:
    """An open response. Iterate :meth:`events` (SSE), :meth:`json_objects` (concatenated JSON) or
    :meth:`text_chunks`, or :meth:`read` it whole; each step waits at most until the run's deadline.

    A runner may stop iterating at the platform's last frame (``message_end``, ``finish_reason``...): when the
    ``async with`` of :meth:`HttpSession.stream` then ends normally, :meth:`finish` reads what is left of the
    body for a moment so the chain of readers under the iterator ends by itself."""

    __slots__ = ("_reader", "_session", "response")

    def __init__(self, session: HttpSession, response: httpx.Response) -> None:
        self._session = session
        self.response = response
        """The httpx response (status and headers; its body is read through this object)."""
        self._reader: AsyncGenerator[object] | None = None

    @property
    def status_code(self) -> int:
        """HTTP status."""
        return self.response.status_code

    @property
    def content_type(self) -> str:
        """The media type, lower-case, without parameters."""
        return self.response.headers.get("content-type", "").partition(";")[0].strip().lower()

    @property
    def is_event_stream(self) -> bool:
        """Whether the body is ``text/event-stream``."""
        return self.content_type == "text/event-stream"

    async def read(self, *, limit: int = MAX_BODY_BYTES) -> bytes:
        """The whole body (``response_invalid`` beyond *limit* bytes)."""
        out = bytearray()
        async for chunk in self._session.bounded(self.response.aiter_bytes()):
            out += chunk
            if len(out) > limit:
                raise PlatformError(
                    "response_invalid", f"{self._session.platform} sent more than {limit} bytes"
                )
        return bytes(out)

    async def read_text(self, *, limit: int = MAX_BODY_BYTES) -> str:
        """The whole body as text (invalid UTF-8 replaced)."""
        return (await self.read(limit=limit)).decode(self.response.encoding or "utf-8", errors="replace")

    async def read_json(self, *, limit: int = MAX_BODY_BYTES) -> JsonValue:
        """The whole body as JSON (``response_invalid`` when it is not)."""
        text = await self.read_text(limit=limit)
        try:
            return httpx.Response(200, content=text.encode()).json()
        except ValueError:
            raise PlatformError(
                "response_invalid",
                f"{self._session.platform} sent a body that is not JSON: "
                + self._session.redactor.redact(text[:120]),
            ) from None

    def events(self) -> AsyncIterator[ServerSentEvent]:
        """The Server-Sent Events of the body (parsed by httpx-sse; comments and retry fields are dropped).
        A body that is not ``text/event-stream`` fails ``response_invalid``."""
        return self._track(self._session.bounded(EventSource(self.response).aiter_sse()))

    def text_chunks(self) -> AsyncIterator[str]:
        """The body decoded as text, chunk by chunk as it arrives."""
        return self._track(self._session.bounded(self.response.aiter_text()))

    def json_objects(self) -> AsyncIterator[Any]:
        """Each JSON value of a body of concatenated values, however they are split across chunks
        (``response_invalid`` on text that is not JSON or a value cut off at the end)."""
        return self._track(self._json_objects())

    def _track(self, reader: AsyncGenerator[_T]) -> AsyncGenerator[_T]:
        # The outermost reader, the one finish() drives to its end.
        self._reader = reader
        return reader

    async def finish(self) -> None:
        """Let the body's reader end with the body, if it was left unfinished: read and drop what is left for
        at most 0.1 s (a platform ends its stream right after its last frame), then :meth:`close` it.

        Why: a reader left open is finalized by the event loop, one task (woken through the loop's self-pipe)
        for each of the ~9 async generators httpx and httpcore stack under it; read to its end, each of them
        just returns. A stream still open after the wait, or failing, is closed: the answer is complete
        either way. Cancellation propagates. Called by :meth:`HttpSession.stream` on a normal exit."""
        reader = self._reader
        if reader is None:
            return
        try:
            if isinstance(reader, types.AsyncGeneratorType) and reader.ag_frame is None:
                return  # read to its end already
            with contextlib.suppress(TimeoutError, PlatformError):
                async with asyncio.timeout(_FINISH_SECONDS):
                    async for _ in reader:
                        pass
        finally:
            await self.close()

    async def close(self) -> None:
        """Close the connection and end the body's reader where it stands, if one is still open.

        Why: a reader left suspended (a runner raised on an ``event:error`` frame, or stopped reading) is
        dropped with the ~9 generators stacked under it, for garbage collection and the loop to finalize one by
        one; CI once saw that finalization fail ("async generator already executing" in httpx-sse's line
        reader) after a run failed on an error frame. With the connection closed first, reading on ends each
        of them (they return or raise), so nothing is left to finalize. Called by :meth:`HttpSession.stream`
        on every exit."""
        reader, self._reader = self._reader, None
        if reader is None:
            return
        try:
            await self.response.aclose()
            if not (isinstance(reader, types.AsyncGeneratorType) and reader.ag_frame is None):
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(_FINISH_SECONDS):
                        async for _ in reader:
                            pass
        finally:
            await reader.aclose()

    async def _json_objects(self) -> AsyncGenerator[Any]:
        decoder = JsonObjectStream()
        async for chunk in self._session.bounded(self.response.aiter_text()):
            try:
                values = list(decoder.feed(chunk))
            except ValueError as exc:
                raise PlatformError(
                    "response_invalid", f"{self._session.platform} sent a frame that is not JSON ({exc})"
                ) from None
            for value in values:
                yield value
        if decoder.rest():
            raise PlatformError(
                "response_invalid", f"{self._session.platform}'s stream ended inside a JSON value"
            )


class HttpSession:
    """The HTTP side of one run. Open with :meth:`open`; it owns an httpx client closed at the end."""

    __slots__ = ("client", "deadline", "platform", "redactor")

    def __init__(
        self, client: httpx.AsyncClient, *, platform: str, deadline: RunDeadline, redactor: SecretRedactor
    ) -> None:
        self.client = client
        """The run's httpx client."""
        self.platform = platform
        """The platform's display name (used in failure messages)."""
        self.deadline = deadline
        """The run's HTTP time limit."""
        self.redactor = redactor
        """Masks the run's secrets (request credential headers are added automatically)."""

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        ctx: AgentRunContext,
        *,
        platform: str,
        timeout: float | None,
        redactor: SecretRedactor | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> AsyncGenerator[HttpSession]:
        """A session limited to ``min(timeout, ctx.runtime.deadline_at - now)``."""
        deadline = RunDeadline(timeout, ctx.runtime.deadline_at)
        async with httpx.AsyncClient(
            verify=_ssl_context(), transport=transport, follow_redirects=False, timeout=None
        ) as client:
            yield cls(client, platform=platform, deadline=deadline, redactor=redactor or SecretRedactor())

    def _timeout(self) -> httpx.Timeout:
        remaining = self.deadline.remaining()
        return httpx.Timeout(None if remaining is None else max(remaining, 0.001))

    def status_error(self, status: int, body: str, *, hint: str | None = None) -> PlatformError:
        """:func:`~.errors.status_error` with this session's platform name and redactor."""
        return status_error(status, body, platform=self.platform, redactor=self.redactor, hint=hint)

    async def bounded(self, source: AsyncIterator[_T]) -> AsyncGenerator[_T]:
        """*source* with each step bounded by the deadline and httpx/SSE errors mapped; closes *source*."""
        watch = ReadWatch(self.deadline)
        try:
            while True:
                try:
                    watch.start()
                    try:
                        item = await anext(source)
                    except BaseException as exc:
                        watch.stop(exc)
                        raise
                    watch.stop()
                except StopAsyncIteration:
                    return
                except SSEError as exc:
                    raise PlatformError(
                        "response_invalid", f"{self.platform} did not answer with an event stream ({exc})"
                    ) from None
                except httpx.HTTPError as exc:
                    raise transport_error(exc, platform=self.platform, redactor=self.redactor) from None
                yield item
        finally:
            watch.close()
            closer = getattr(source, "aclose", None)
            if closer is not None:
                await closer()

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        json: JsonValue = None,
        params: Mapping[str, str] | None = None,
        content: bytes | None = None,
        data: Mapping[str, str] | None = None,
        files: Mapping[str, tuple[str, bytes, str]] | None = None,
        auth: httpx.Auth | None = None,
        check_status: bool = True,
    ) -> AsyncGenerator[HttpStream]:
        """Send a request and hold its response open. With *check_status* a non-2xx answer fails at once
        (``auth_error`` / ``http_error``, quoting at most 200 redacted characters of the body)."""
        request = self.client.build_request(
            method,
            url,
            headers=dict(headers or {}),
            json=json,
            params=dict(params or {}),
            content=content,
            data=dict(data) if data is not None else None,
            files=dict(files) if files is not None else None,
            timeout=self._timeout(),
        )
        if auth is not None:
            request = next(auth.auth_flow(request))
        self.redactor.add_headers(request.headers)
        try:
            async with self.deadline.scope():
                response = await self.client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise transport_error(exc, platform=self.platform, redactor=self.redactor) from None
        opened = HttpStream(self, response)
        try:
            if check_status and not response.is_success:
                body = await opened.read_text(limit=_ERROR_BODY_BYTES * 64)
                raise self.status_error(response.status_code, body[:_ERROR_BODY_BYTES])
            yield opened
            await opened.finish()
        except BaseException:
            # The exception in flight is the one to report; a reader failing as it closes says nothing new.
            with contextlib.suppress(Exception):
                await opened.close()
            raise
        finally:
            await response.aclose()

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        json: JsonValue = None,
        params: Mapping[str, str] | None = None,
        data: Mapping[str, str] | None = None,
        files: Mapping[str, tuple[str, bytes, str]] | None = None,
        check_status: bool = True,
    ) -> tuple[int, JsonValue]:
        """A whole JSON exchange: (status, parsed body). Non-JSON bodies fail ``response_invalid``."""
        async with self.stream(
            method,
            url,
            headers=headers,
            json=json,
            params=params,
            data=data,
            files=files,
            check_status=check_status,
        ) as response:
            return response.status_code, await response.read_json()
