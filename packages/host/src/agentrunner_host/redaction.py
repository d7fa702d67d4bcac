"""The secrets the host knows, and keeping them out of its logs at every level.

:func:`known_secrets` collects every credential value the configuration points at: the API token, the
database URL's password, each variable named by ``*_env`` / ``env_from`` / ``headers_from`` / ``{ env = "VAR" }``,
and every secret-named variable of the environment. :class:`SecretLogFilter` masks those values (and the
usual credential shapes, see :class:`~agentrunner_host.runtime.environment.Redactor`) in every record a handler
emits, message, arguments and traceback included. :func:`install_log_redaction` puts it on the root handlers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final, cast
from urllib.parse import urlsplit

from agentrunner import AgentRunResult, UnknownResult, parse_result
from agentrunner import codec as json

from agentrunner_host.config import Settings, is_env_ref
from agentrunner_host.runtime.environment import Redactor, looks_secret_name

_MASK: Final = b"***"

__all__ = [
    "ResultRedactor",
    "SecretLogFilter",
    "StreamMasker",
    "install_log_redaction",
    "known_secrets",
    "secret_variables",
]


def _referenced_variables(node: object) -> Iterable[str]:
    """Names of environment variables a configuration tree points at."""
    if is_env_ref(node):
        yield cast(Mapping[str, str], node)["env"]
        return
    if isinstance(node, Mapping):
        for key, value in cast(Mapping[str, object], node).items():
            if isinstance(value, str) and (key.endswith("_env") or key == "env"):
                yield value
            elif key in {"env_from", "headers_from"} and isinstance(value, Mapping):
                yield from (v for v in cast(Mapping[str, object], value).values() if isinstance(v, str))
            else:
                yield from _referenced_variables(value)
    elif isinstance(node, list):
        for value in cast(list[object], node):
            yield from _referenced_variables(value)


def secret_variables(settings: Settings) -> frozenset[str]:
    """Names of the environment variables the configuration reads secrets from (the API token, the
    database URL, every ``*_env`` / ``env_from`` / ``headers_from`` / ``{ env = "VAR" }`` reference)."""
    names = set(_referenced_variables(settings.config.model_dump(mode="json")))
    names.update({settings.config.http.api_token_env, "AGENTRUNNER_API_TOKEN", "AGENTRUNNER_DATABASE_URL"})
    return frozenset(names)


def known_secrets(settings: Settings) -> frozenset[str]:
    """Every secret value *settings* can reach (at least 6 characters; shorter ones would mask noise)."""
    environ = settings.environ
    values: set[str] = set()
    if settings.api_token:
        values.add(settings.api_token)
    try:
        password = urlsplit(settings.database_url).password
    except ValueError:
        password = None
    if password:
        values.add(password)
    for name in _referenced_variables(settings.config.model_dump(mode="json")):
        value = environ.get(name)
        if value:
            values.add(value)
    values.update(value for name, value in environ.items() if value and looks_secret_name(name))
    return frozenset(v for v in values if len(v) >= 6)


class SecretLogFilter(logging.Filter):
    """Masks known secret values and credential shapes in a record before any handler formats it."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self._redact = Redactor(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = self._redact(message)
        if masked != message or record.args:
            record.msg = masked
            record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self._redact(record.stack_info)
        return True


def install_log_redaction(secrets: Iterable[str], *, logger: logging.Logger | None = None) -> SecretLogFilter:
    """Add a :class:`SecretLogFilter` to every handler of *logger* (default: the root logger)."""
    target = logger or logging.getLogger()
    redactor = SecretLogFilter(secrets)
    for handler in target.handlers:
        for previous in [f for f in handler.filters if isinstance(f, SecretLogFilter)]:
            handler.removeFilter(previous)  # installing again replaces, never stacks
        handler.addFilter(redactor)
    return redactor


class ResultRedactor:
    """Masks known secret values inside runner results before the host delivers or stores them, so a runner
    echoing its API key (or a user's pasted one) leaves it in neither the result stream nor the transcript.

    The check is one substring search per secret over the result's JSON; only a result that holds a secret is
    re-encoded and re-parsed. A secret split across ``message.delta`` chunks is caught by the run's
    :meth:`stream` window."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)
        # The JSON-escaped form is what appears inside the encoded result.
        needles = {json.dumps(s)[1:-1] for s in self._secrets}
        self._needles = sorted(needles, key=len, reverse=True)

    def stream(self) -> StreamMasker:
        """A rolling window over one run's streamed text (see :class:`StreamMasker`)."""
        return StreamMasker(self._secrets)

    def __bool__(self) -> bool:
        return bool(self._needles)

    def scrub(
        self, parsed: AgentRunResult | UnknownResult, payload: dict[str, Any] | bytes
    ) -> tuple[AgentRunResult | UnknownResult, dict[str, Any] | bytes]:
        """*parsed* and *payload* unchanged, or both with every known secret replaced by ``***``."""
        data = payload if isinstance(payload, bytes) else json.dumps(payload)
        if not any(needle in data for needle in self._needles):
            return parsed, payload
        for needle in self._needles:
            data = data.replace(needle, _MASK)
        return parse_result(json.loads(data)), data


class StreamMasker:
    """A rolling window over a run's ``message.delta`` text, so a secret split across chunks is masked too.

    Each chunk is joined to the tail held back from the previous one; whole secrets in the joined text become
    ``***``, and the longest end of it that could still grow into a secret (a proper prefix of one) is held
    back for the next chunk. So no delivered chunk ever holds a secret, nor the first part of one whose rest
    follows. What is held back is released by :meth:`flush` before the next result that is not a delta; it
    is at most one character shorter than the longest secret."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._held = ""

    @property
    def holding(self) -> bool:
        """Text is held back."""
        return bool(self._held)

    def feed(self, chunk: str) -> str:
        """What of *chunk* (after the held tail) may be delivered now."""
        text = self._held + chunk
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, _MASK.decode())
        keep = 0
        for secret in self._secrets:
            for size in range(min(len(secret) - 1, len(text)), keep, -1):
                if text.endswith(secret[:size]):
                    keep = size
                    break
        self._held = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """The held tail (never a whole secret); the window is empty afterwards."""
        held, self._held = self._held, ""
        return held
