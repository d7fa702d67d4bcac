"""The CLI's environment: an allowlist of the runner's own, plus what the binding grants. Nothing else.

An in-process runner's ``os.environ`` is the host's, secrets included, and a plugin process's is already the
runtime's allowlist; either way the CLI starts from :data:`BASE_ENV_ALLOWLIST` only. The binding adds
non-secret variables (``environment-json``, refused when a name or value looks like a credential) and the
runner adds the credentials of its own config fields (``api-key``), under the one name the CLI reads.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Final

from .errors import HarnessFailure

__all__ = ["BASE_ENV_ALLOWLIST", "build_environment", "parse_environment_json", "redact"]

BASE_ENV_ALLOWLIST: Final[frozenset[str]] = frozenset(
    {
        "PATH",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "LC_ALL",
        "LC_CTYPE",
        "LC_MESSAGES",
        "TZ",
        "TMPDIR",
        "TERM",
    }
)
"""Variables of the runner's own environment the CLI inherits (``HOME`` is always the workspace's)."""

_SECRET_NAME: Final = re.compile(
    r"(?i)(api[_-]?key|secret|token|passw(or)?d|credential|private[_-]?key|access[_-]?key|auth)"
)
_SECRET_VALUE: Final = re.compile(
    r"^(sk-|sk_|xox[abp]-|ghp_|gho_|github_pat_|AKIA|AIza|eyJ)|(://[^/\s:@]+:[^/\s@]+@)"
)
_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REDACT: Final = re.compile(
    r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}|\b(sk-[A-Za-z0-9_-]{6,}|ghp_[A-Za-z0-9]{10,})|((?:api[_-]?key|token|secret|password)\"?\s*[:=]\s*\"?)[^\s\"',]+"
)


def parse_environment_json(raw: object, *, field: str = "environment-json") -> dict[str, str]:
    """A binding's extra variables: a JSON object (or its text) of names to strings; ``config_invalid`` for
    anything else, and for any name or value that looks like a credential (those belong in secret fields)."""
    if raw is None or raw in ("", {}):
        return {}
    if isinstance(raw, str):
        import orjson

        try:
            raw = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise HarnessFailure("config_invalid", f"{field} is not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise HarnessFailure("config_invalid", f"{field} must be an object of variable names to values")
    env: dict[str, str] = {}
    for name, value in raw.items():  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(name, str) or not _NAME.match(name):
            raise HarnessFailure("config_invalid", f"{field}: {name!r} is not a variable name")
        if not isinstance(value, str | int | float | bool):
            raise HarnessFailure("config_invalid", f"{field}.{name} must be a string")
        text = str(value)
        if _SECRET_NAME.search(name) or _SECRET_VALUE.search(text):
            raise HarnessFailure(
                "config_invalid",
                f"{field}.{name} looks like a credential; pass credentials through the secret config fields",
            )
        env[name] = text
    return env


def build_environment(
    *,
    home: str,
    extra: Mapping[str, str],
    granted: Mapping[str, str],
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The allowlisted part of *source* (default ``os.environ``), then *granted*, then *extra* (the runner's
    own settings win), with ``HOME`` set to *home*."""
    base = os.environ if source is None else source
    env = {k: v for k, v in base.items() if k in BASE_ENV_ALLOWLIST}
    env.update(granted)
    env.update(extra)
    env["HOME"] = home
    return env


def redact(text: str, *, secrets: tuple[str, ...] = ()) -> str:
    """*text* with the given secret values and credential-looking tokens masked."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return _REDACT.sub(lambda m: (m.group(1) or m.group(3) or "") + "***", text)
