"""What a plugin process inherits from the host: an allowlisted environment, and redaction of what it prints.

The child never sees the host's environment as a whole: only :data:`DEFAULT_ENV_ALLOWLIST` plus the variables
the operator grants to that plugin. Its stderr goes to the host's log with secret-looking values masked.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Final

__all__ = ["DEFAULT_ENV_ALLOWLIST", "Redactor", "build_child_env", "looks_secret_name"]

DEFAULT_ENV_ALLOWLIST: Final[frozenset[str]] = frozenset(
    {
        "PATH",
        "HOME",
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
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONHASHSEED",
        "VIRTUAL_ENV",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "SYSTEMROOT",
    }
)
"""Host variables every plugin process inherits (when set): locale, paths, the Python environment."""

_SECRET_NAME = re.compile(
    r"(?i)(api[_-]?key|secret|token|passw(or)?d|credential|private[_-]?key|access[_-]?key|session[_-]?key"
    r"|auth[_-]?(key|header)|(^|_)dsn$|database_url)"
)

_PATTERNS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    # key=value / key: value / "key": "value" where the key names a secret
    (
        re.compile(
            r"(?i)\b([\w.-]*(?:api[_-]?key|secret|token|passw(?:or)?d|pwd|credential|private[_-]?key|access[_-]?key)"
            r"[\w.-]*)(\"?'?\s*[:=]\s*\"?'?)([^\s\"',;&]+)"
        ),
        r"\1\2***",
    ),
    (re.compile(r"(?i)\b(authorization\s*[:=]\s*)(\w+\s+)?[^\s\"',;]+"), r"\1\2***"),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"), "Bearer ***"),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"), "sk-***"),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{16,}"), "gh*_***"),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{8,}"), "xox*-***"),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), "AKIA***"),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^:/\s@]+:)[^@\s/]+@"), r"\1***@"),
)


def looks_secret_name(name: str) -> bool:
    """True for variable or key names that usually hold credentials (``OPENAI_API_KEY``, ``DB_PASSWORD``...)."""
    return bool(_SECRET_NAME.search(name))


class Redactor:
    """Masks secret-looking values in text: known secret values verbatim, then common credential shapes."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret that contains another is masked whole.
        self._secrets = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)

    @classmethod
    def for_environment(cls, *envs: Mapping[str, str]) -> Redactor:
        """A redactor that also masks the values of every secret-named variable in *envs*."""
        return cls(value for env in envs for name, value in env.items() if looks_secret_name(name))

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "***")
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
        return text


def build_child_env(
    *,
    allowlist: Iterable[str] = DEFAULT_ENV_ALLOWLIST,
    granted: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
    host_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a plugin process: *allowlist* and *granted* names copied from *host_env* (default
    ``os.environ``) when set, then *extra* values on top."""
    source = os.environ if host_env is None else host_env
    env = {name: source[name] for name in (*allowlist, *granted) if name in source}
    if extra:
        env.update(extra)
    return env
