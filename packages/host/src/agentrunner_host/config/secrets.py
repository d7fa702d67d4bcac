"""Secrets: refused as literals in the configuration file, resolved from the environment, redacted in output.

* :func:`find_literal_secrets` walks the parsed TOML and reports every value that looks like a credential
  (a secret-looking key with a literal value, a well-known token prefix, a URL with a password).
* Runner configs may reference the environment with ``{ env = "VAR" }``; :func:`resolve_env_refs` replaces
  each reference with the variable's value when the host builds a binding, so the value never sits in a file.
* :func:`redact_config` masks the fields a runner's manifest marks ``secret`` and every secret-looking key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final, cast
from urllib.parse import urlsplit

from agentrunner import DynamicFormItemSchema
from agentrunner.codec import JsonObject, JsonValue

from agentrunner_host.context_builder import is_secret_name

__all__ = [
    "REDACTED",
    "EnvReferenceError",
    "find_literal_secrets",
    "is_env_ref",
    "redact_config",
    "resolve_env_refs",
    "url_has_password",
]

REDACTED: Final = "***"
"""What a redacted value is shown as."""

_TOKEN_PREFIXES: Final = re.compile(
    r"^(sk-[A-Za-z0-9_\-]{8,}|sk_live_|ghp_|gho_|github_pat_|xox[abprs]-|AKIA[0-9A-Z]{12}|glpat-|Bearer\s+\S+)"
)


class EnvReferenceError(LookupError):
    """A ``{ env = "VAR" }`` reference names an unset variable."""


def is_env_ref(value: object) -> bool:
    """Whether *value* is an environment reference ``{"env": "VAR"}``."""
    if not isinstance(value, Mapping):
        return False
    mapping = cast("Mapping[str, object]", value)
    return list(mapping) == ["env"] and isinstance(mapping["env"], str)


def url_has_password(url: str) -> bool:
    """Whether a URL carries a password (``scheme://user:password@host``)."""
    try:
        return bool(urlsplit(url).password)
    except ValueError:
        return False


def _looks_like_token(value: str) -> bool:
    return bool(_TOKEN_PREFIXES.match(value.strip()))


def find_literal_secrets(
    data: object,
    path: tuple[str | int, ...] = (),
    *,
    schema: Sequence[DynamicFormItemSchema] | None = None,
) -> list[tuple[tuple[str | int, ...], str]]:
    """Every (key path, reason) where *data* holds a literal secret.

    With a runner's config *schema* (for a runner config), a top-level field the schema declares is secret
    exactly when it is marked ``secret``; other keys are judged by name: a key named like a credential
    (``api_key``, ``token``, ``password``...) may only hold an environment reference, an ``*_env`` variable
    name, or an empty value. Any string that starts like a well-known token or a URL with a password is
    refused wherever it appears.
    """
    declared = {item.name: item.secret for item in schema or ()}
    found: list[tuple[tuple[str | int, ...], str]] = []
    if isinstance(data, Mapping):
        for key, value in cast("Mapping[object, object]", data).items():
            name = str(key)
            here = (*path, name)
            if is_env_ref(value):
                continue
            if name in declared:
                secret_key = declared[name]
            else:
                secret_key = is_secret_name(name) and not name.lower().endswith("_env")
            if (
                secret_key
                and isinstance(value, (str, int, float))
                and not isinstance(value, bool)
                and value != ""
            ):
                why = "is marked secret by the runner" if declared.get(name) else "looks like a secret"
                found.append((here, f"{name!r} {why}; put it in an environment variable"))
                continue
            found.extend(find_literal_secrets(value, here))
    elif isinstance(data, list):
        for index, item in enumerate(cast("list[object]", data)):
            found.extend(find_literal_secrets(item, (*path, index)))
    elif isinstance(data, str):
        if _looks_like_token(data):
            found.append((path, "the value looks like an API token; put it in an environment variable"))
        elif "://" in data and url_has_password(data):
            found.append((path, "the URL contains a password; put the whole URL in an environment variable"))
    return found


def resolve_env_refs(
    value: JsonValue, *, environ: Mapping[str, str], where: str = "runner_config"
) -> JsonValue:
    """A copy of *value* with every ``{ env = "VAR" }`` replaced by the variable's value."""
    if isinstance(value, dict):
        if is_env_ref(value):
            name = str(value["env"])
            resolved = environ.get(name)
            if resolved is None:
                raise EnvReferenceError(f"{where}: environment variable {name} is not set")
            return resolved
        return {k: resolve_env_refs(v, environ=environ, where=f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_env_refs(v, environ=environ, where=f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def redact_config(
    config: Mapping[str, JsonValue], schema: Sequence[DynamicFormItemSchema] | None = None
) -> JsonObject:
    """A copy of a runner config with secret fields shown as ``"***"``.

    A top-level field the runner's form declares is secret exactly when it is marked ``secret``; any other key
    is secret when its name looks like a credential, at any depth. Environment references are kept as they
    are: they name a variable, not its value.
    """
    declared = {item.name: item.secret for item in schema or ()}
    return _redact(config, declared)


def _redact(value: Mapping[str, JsonValue], declared: dict[str, bool]) -> JsonObject:
    out: JsonObject = {}
    for key, item in value.items():
        secret = declared[key] if key in declared else is_secret_name(key)
        if isinstance(item, dict) and is_env_ref(item):
            out[key] = dict(item)
        elif secret and item not in (None, ""):
            out[key] = REDACTED
        elif isinstance(item, dict):
            out[key] = _redact(item, {})
        elif isinstance(item, list):
            out[key] = [_redact(v, {}) if isinstance(v, dict) else v for v in item]
        else:
            out[key] = item
    return out
