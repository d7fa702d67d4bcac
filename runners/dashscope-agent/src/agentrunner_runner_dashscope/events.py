"""DashScope application output → reply text, without any I/O (pure, unit-tested on recorded frames).

An application call answers with frames whose ``output`` carries the reply so far. With
``"incremental_output": true`` each frame's ``text`` (agent apps) or ``workflow_message.message.content``
(workflow apps with ``"flow_stream_mode": "message_format"``) is the *new* part only; the runner asks for that, so
the pieces here are increments and are never diffed.

Two rewrites happen on the way, both able to span frames:

* agent apps with ``"has_thoughts": true`` send reasoning in ``thoughts[0].thought`` before the answer; it is
  wrapped in one ``<think>…</think>`` block at the front of the reply;
* a retrieval-augmented answer cites documents as ``<ref>[index_id]</ref>``; each tag whose ``index_id`` is in
  the ``doc_references`` seen so far becomes ``({quote} {doc_name})``. A tag can be cut by a frame border and the
  references may arrive after the tag, so text from the first unresolved tag on is held back until it resolves
  or the stream ends (then it is sent as it is). The streamed pieces therefore always add up to the final text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast

from agentrunner_http_kit import PlatformError
from pydantic import JsonValue

__all__ = [
    "DEFAULT_REFERENCES_QUOTE",
    "AppType",
    "DashScopeReply",
    "error_from_body",
]

AppType = Literal["agent", "workflow"]
"""The two kinds of DashScope (Model Studio) application this runner calls."""

DEFAULT_REFERENCES_QUOTE: Final = "参考资料来自:"
"""What a rewritten reference starts with unless the binding sets ``references_quote``."""

THINK_OPEN: Final = "<think>\n"
THINK_CLOSE: Final = "\n</think>\n"

_REF: Final = re.compile(r"<ref>\[([^\]<>]*)\]</ref>")
_REF_TAG: Final = "<ref>["
_AUTH_CODES: Final = frozenset({"InvalidApiKey", "InvalidApiKeyError", "Unauthorized", "AccessDenied"})


def _mapping(value: object) -> Mapping[str, Any] | None:
    # Decoded JSON objects are dicts; an exact dict check is several times cheaper than the Mapping ABC.
    return cast("Mapping[str, Any]", value) if isinstance(value, dict) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def error_from_body(body: object, *, status: int | None = None) -> PlatformError | None:
    """The failure a DashScope error body (``{"code", "message", "request_id"}``) describes; ``None`` if the
    body is not one. ``InvalidApiKey`` (or HTTP 401/403) is ``auth_error``; an HTTP status outside 2xx is
    ``http_error`` (retryable for 429 and 5xx); an error frame inside a 200 stream is ``api_error``."""
    data = _mapping(body)
    if data is None or "output" in data:
        return None
    code, message = _str(data.get("code")), _str(data.get("message"))
    if code is None and message is None:
        return None
    details: dict[str, JsonValue] = {}
    if status is not None:
        details["status"] = status
    if code:
        details["platform_code"] = code
    request_id = _str(data.get("request_id"))
    if request_id:
        details["request_id"] = request_id
    text = f"DashScope reported {code or 'an error'}: {message or code}"
    if code in _AUTH_CODES or status in (401, 403):
        return PlatformError("auth_error", text, details=details)
    if status is not None and not 200 <= status < 300:
        retryable = status == 429 or status >= 500
        return PlatformError("http_error", f"{text} (HTTP {status})", retryable=retryable, details=details)
    return PlatformError("api_error", text, details=details)


@dataclass
class DashScopeReply:
    """Accumulates one application answer from its frames (:meth:`feed`), handing out the text to stream.

    Call :meth:`feed` per frame, :meth:`finish` at the end; each returns the text that became final (to send as a
    ``message.delta``). :attr:`text` is the whole reply.
    """

    app_type: AppType
    """Which output fields carry the answer."""
    references_quote: str = DEFAULT_REFERENCES_QUOTE
    """Prefix of a rewritten document reference."""
    session_id: str | None = None
    """``output.session_id`` (the platform's conversation), once seen."""
    request_id: str | None = None
    """The last ``request_id`` seen."""
    finished: bool = False
    """A frame said ``finish_reason: "stop"``."""
    frames: int = 0
    """Frames fed."""
    references: dict[str, str] = field(default_factory=dict[str, str])
    """``index_id`` → ``doc_name`` of every document reference seen."""
    _usage: Mapping[str, Any] | None = None
    _raw: str = ""
    _sent: int = 0
    _thinking: bool = False
    _thought_done: bool = False
    _fallback_text: str = ""

    @property
    def text(self) -> str:
        """The reply so far with references rewritten (final after :meth:`finish`)."""
        return self._rewrite(self._raw)

    def usage(self) -> dict[str, JsonValue]:
        """Usage in the protocol's names, from the last frame's ``usage`` (``usage.models[]`` summed over the
        models the application called); empty when the platform reported none."""
        usage = self._usage
        if usage is None:
            return {}
        models = usage.get("models")
        if isinstance(models, list):
            entries = [m for m in (_mapping(x) for x in cast("list[object]", models)) if m is not None]
            input_tokens = sum(_int(m.get("input_tokens")) for m in entries)
            output_tokens = sum(_int(m.get("output_tokens")) for m in entries)
        else:
            input_tokens, output_tokens = _int(usage.get("input_tokens")), _int(usage.get("output_tokens"))
        if not (input_tokens or output_tokens):
            return {}
        return {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        }

    def feed(self, frame: object) -> str:
        """Take one frame (a decoded ``data:`` payload or the non-streaming body); the newly final text.

        Raises ``api_error`` / ``auth_error`` (:class:`~agentrunner_http_kit.PlatformError`) when the frame is an
        error body.
        """
        data = _mapping(frame)
        if data is None:
            return ""
        error = error_from_body(data)
        if error is not None:
            raise error
        self.frames += 1
        self.request_id = _str(data.get("request_id")) or self.request_id
        self._read_usage(_mapping(data.get("usage")))
        output = _mapping(data.get("output"))
        if output is None:
            return ""
        self.session_id = _str(output.get("session_id")) or self.session_id
        docs = output.get("doc_references")
        for doc in cast("list[object]", docs) if isinstance(docs, list) else []:
            ref = _mapping(doc)
            if ref is None:
                continue
            index_id, name = ref.get("index_id"), ref.get("doc_name")
            if index_id is not None and isinstance(name, str):
                self.references[str(index_id)] = name
        if self.app_type == "agent":
            self._agent_output(output)
        else:
            self._workflow_output(output)
        if output.get("finish_reason") == "stop":
            self.finished = True
        return self._release(final=False)

    def finish(self) -> str:
        """End of the answer: close an open think block and release everything held back."""
        if self._thinking and not self._thought_done:
            self._thought_done = True
            self._raw += THINK_CLOSE
        if not self._raw and self._fallback_text:
            self._raw = self._fallback_text
        return self._release(final=True)

    # -- pieces --------------------------------------------------------------------------------------------

    def _read_usage(self, usage: Mapping[str, Any] | None) -> None:
        # Usage is cumulative per frame: keep the last one, add it up once at the end (:meth:`usage`).
        if usage is not None:
            self._usage = usage

    def _agent_output(self, output: Mapping[str, Any]) -> None:
        thoughts = output.get("thoughts")
        first = (
            _mapping(cast("list[object]", thoughts)[0]) if isinstance(thoughts, list) and thoughts else None
        )
        thought = first.get("thought") if first is not None else None
        if isinstance(thought, str) and thought and not self._thought_done:
            if not self._thinking:
                self._thinking = True
                self._raw += THINK_OPEN
            self._raw += thought
        text = output.get("text")
        if isinstance(text, str) and text:
            if self._thinking and not self._thought_done:
                self._thought_done = True
                self._raw += THINK_CLOSE
            self._raw += text

    def _workflow_output(self, output: Mapping[str, Any]) -> None:
        message = _mapping(output.get("workflow_message"))
        content = _mapping(message.get("message")) if message is not None else None
        piece = content.get("content") if content is not None else None
        if isinstance(piece, str) and piece:
            self._raw += piece
        text = output.get("text")
        if isinstance(text, str) and text:
            # Without message-format nodes the answer is only in ``text``: used when no workflow message came.
            self._fallback_text += text

    def _rewrite(self, text: str) -> str:
        if "<ref>" not in text:
            return text

        def replace(match: re.Match[str]) -> str:
            name = self.references.get(match.group(1))
            return match.group(0) if name is None else f"({self.references_quote} {name})"

        return _REF.sub(replace, text)

    def _release(self, *, final: bool) -> str:
        """Text from :attr:`_sent` on that can no longer change, rewritten; advances :attr:`_sent`."""
        end = len(self._raw)
        if not final:
            end = min(end, self._first_unresolved(self._raw, self._sent))
        if end <= self._sent:
            return ""
        piece = self._rewrite(self._raw[self._sent : end])
        self._sent = end
        return piece

    def _first_unresolved(self, raw: str, start: int) -> int:
        """Where the first tag that may still change starts (from *start*); ``len(raw)`` if none."""
        position = start
        while True:
            index = raw.find("<", position)
            if index == -1:
                return len(raw)
            match = _REF.match(raw, index)
            if match is not None:
                if match.group(1) not in self.references:
                    return index  # complete but not yet known: its reference may still arrive
                position = match.end()
                continue
            tail = raw[index:]
            if _REF_TAG.startswith(tail[: len(_REF_TAG)]) and (
                len(tail) < len(_REF_TAG) or _is_open_tag(tail)
            ):
                return index  # cut by the frame border
            position = index + 1


def _is_open_tag(tail: str) -> bool:
    """``tail`` starts with ``<ref>[`` and could still become a whole tag."""
    rest = tail[len(_REF_TAG) :]
    close = rest.find("]")
    if close == -1:
        return "<" not in rest and ">" not in rest
    return "]</ref>".startswith(rest[close:]) and len(rest[close:]) < len("]</ref>")


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
