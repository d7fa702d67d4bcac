"""Multipart upload of an input file read through the run API."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from agentrunner import AgentRunAPI
from pydantic import JsonValue

from .errors import PlatformError
from .media import MediaFile, MediaInput, read_media
from .session import HttpSession

__all__ = ["upload_media"]


async def upload_media(
    http: HttpSession,
    api: AgentRunAPI,
    item: MediaInput | MediaFile,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    data: Mapping[str, str] | None = None,
    field: str = "file",
    expect: Collection[int] = (200, 201),
) -> JsonValue:
    """Read *item*'s bytes (when it is a :class:`MediaInput`) and ``POST`` them as multipart field *field*
    with form fields *data*; returns the parsed JSON answer. 401/403 fail ``auth_error``; any other status
    outside *expect*, or a body that is not JSON, fails ``input_error`` (the file could not be handed over)."""
    file = item if isinstance(item, MediaFile) else await read_media(api, item)
    async with http.stream(
        "POST",
        url,
        headers=headers,
        data=data or {},
        files={field: (file.name, file.data, file.mime_type)},
        check_status=False,
    ) as response:
        if response.status_code in (401, 403):
            raise http.status_error(response.status_code, await response.read_text())
        if response.status_code not in expect:
            error = http.status_error(response.status_code, await response.read_text())
            raise PlatformError(
                "input_error",
                f"uploading {file.name} failed: {error.message}",
                retryable=error.retryable,
                details=error.details,
            )
        try:
            return await response.read_json()
        except PlatformError as exc:
            raise PlatformError("input_error", f"uploading {file.name} failed: {exc.message}") from None
