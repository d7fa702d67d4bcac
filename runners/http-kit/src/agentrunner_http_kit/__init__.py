"""agentrunner-http-kit: the parts every HTTP-API runner (Dify, n8n, Coze, DashScope, Langflow, Tbox) shares.

A runner stays a thin mapping of its platform onto these:

* :class:`ConfigReader` — typed config fields, ``config_invalid`` naming the field, before any request;
* :class:`HttpSession` — one httpx client per run, every call bounded by ``min(timeout, deadline)``, SSE via
  httpx-sse (:meth:`HttpStream.events`), concatenated JSON (:meth:`HttpStream.json_objects`), the stream
  closed on every exit including cancellation;
* :class:`PlatformError` / :func:`status_error` / :func:`transport_error` — the common failure kinds;
* :class:`SecretRedactor` — credentials masked in every failure message and log line;
* :func:`guarded` — the run loop's safety net (one redacted ``run.failed``);
* :class:`ReplyText` / :class:`CumulativeText` — incremental deltas, never cumulative;
* :class:`ExternalIds` — the platform's conversation ids in the host's conversation state;
* :func:`media_inputs` / :func:`read_media` / :func:`upload_media` — input files through the run API.

Test helpers (a loopback fake platform and a host harness) are in :mod:`agentrunner_http_kit.testing`.
"""

from .config import ConfigReader
from .context import adapter_params, user_tag
from .deltas import CumulativeText, ReplyText, ThinkFilter
from .errors import BODY_PREVIEW_CHARS, ErrorKind, PlatformError, status_error, transport_error
from .forms import form_field
from .guard import guarded
from .jsonstream import JsonObjectStream
from .media import MAX_MEDIA_BYTES, MediaFile, MediaInput, MediaKind, media_inputs, read_media
from .redaction import MASK, SECRET_HEADER_NAMES, SecretRedactor
from .session import MAX_BODY_BYTES, HttpSession, HttpStream
from .state import ExternalIds
from .timing import RunDeadline, effective_timeout
from .uploads import upload_media

__all__ = (
    # the run
    "guarded",
    "HttpSession",
    "HttpStream",
    "RunDeadline",
    "effective_timeout",
    "MAX_BODY_BYTES",
    # config and context
    "ConfigReader",
    "form_field",
    "user_tag",
    "adapter_params",
    # failures and secrets
    "ErrorKind",
    "PlatformError",
    "status_error",
    "transport_error",
    "BODY_PREVIEW_CHARS",
    "SecretRedactor",
    "MASK",
    "SECRET_HEADER_NAMES",
    # text
    "ReplyText",
    "CumulativeText",
    "ThinkFilter",
    "JsonObjectStream",
    # state
    "ExternalIds",
    # files
    "MediaInput",
    "MediaFile",
    "MediaKind",
    "MAX_MEDIA_BYTES",
    "media_inputs",
    "read_media",
    "upload_media",
)
