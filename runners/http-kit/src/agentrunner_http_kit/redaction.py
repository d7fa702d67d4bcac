"""Secret-safe text: every credential a run uses is masked in whatever it says about a failure."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Final

from pydantic import JsonValue

__all__ = ["MASK", "SECRET_HEADER_NAMES", "SecretRedactor"]

MASK: Final = "***"
"""What a masked secret is shown as."""

SECRET_HEADER_NAMES: Final = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie", "x-auth-token"}
)
"""Request headers whose values are always treated as secrets (a runner adds its own with
:meth:`SecretRedactor.add`)."""

_MIN_SECRET_CHARS: Final = 4
"""Shorter values are not masked: masking ``"a"`` everywhere would garble text without protecting anything."""


class SecretRedactor:
    """Masks known secret values in text and JSON. Besides each value it also masks the parts a platform may
    echo back: the token of ``Bearer <token>`` / ``Basic <b64>`` and the base64 of ``user:password``."""

    __slots__ = ("_secrets",)

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets: set[str] = set()
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str | None) -> None:
        """Treat *secret* (and its scheme-less token) as secret from now on."""
        if not secret or len(secret) < _MIN_SECRET_CHARS:
            return
        self._secrets.add(secret)
        scheme, _, token = secret.partition(" ")
        if token and scheme.lower() in ("bearer", "basic", "token"):
            self.add(token.strip())

    def add_basic(self, username: str, password: str) -> None:
        """Treat an HTTP Basic pair as secret (the password and the encoded pair)."""
        self.add(password)
        self.add(base64.b64encode(f"{username}:{password}".encode()).decode("ascii"))

    def add_headers(self, headers: Mapping[str, str], *, extra: Iterable[str] = ()) -> None:
        """Treat the values of the credential headers in *headers* as secrets (plus those named in *extra*)."""
        names = SECRET_HEADER_NAMES | {name.lower() for name in extra}
        for name, value in headers.items():
            if name.lower() in names:
                self.add(value)

    def redact(self, text: str) -> str:
        """*text* with every known secret replaced by :data:`MASK` (longest first, so a token inside a longer
        secret does not leave the rest visible)."""
        for secret in sorted(self._secrets, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def redact_json(self, value: JsonValue) -> JsonValue:
        """A copy of a JSON value with every string redacted."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self.redact_json(item) for item in value]
        if isinstance(value, dict):
            return {self.redact(k): self.redact_json(v) for k, v in value.items()}
        return value
