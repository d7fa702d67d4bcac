"""Loading ``agentrunner.toml`` and the environment into :class:`Settings` (what the service runs with).

Precedence, highest first: command-line flags, ``AGENTRUNNER_*`` environment variables, the file, defaults.
Every problem is a :class:`ConfigFileError` naming the file, the key path and what is wrong.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from agentrunner_host.errors import ConfigurationError
from agentrunner_host.stores.engine import default_sqlite_url

from .model import HostConfig, is_loopback_host, token_weakness
from .secrets import find_literal_secrets, url_has_password

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_CONFIG_FILE",
    "ENV_OVERRIDES",
    "ConfigFileError",
    "Settings",
    "default_data_dir",
    "format_key_path",
    "load_settings",
    "parse_config",
]

CONFIG_ENV: Final = "AGENTRUNNER_CONFIG"
"""Environment variable naming the configuration file."""
DEFAULT_CONFIG_FILE: Final = "agentrunner.toml"
"""Read from the working directory when no file is named (and only if it exists)."""
ENV_OVERRIDES: Final = {
    "AGENTRUNNER_DATA_DIR": "data directory",
    "AGENTRUNNER_DATABASE_URL": "database URL",
    "AGENTRUNNER_HTTP_HOST": "HTTP bind address",
    "AGENTRUNNER_HTTP_PORT": "HTTP port",
    "AGENTRUNNER_API_TOKEN": "API bearer token (the variable named by http.api_token_env)",
    "AGENTRUNNER_PLUGIN_DIRS": "extra plugin directories, separated by the OS path separator",
    "AGENTRUNNER_LOG_LEVEL": "log level",
}
"""The environment variables the host reads, and what each one sets."""


class ConfigFileError(ConfigurationError):
    """The configuration (file or environment) is invalid."""

    def __init__(self, source: str, problems: list[str]) -> None:
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"invalid configuration in {source}:\n{lines}")
        self.source = source
        self.problems = problems


def format_key_path(path: tuple[str | int, ...]) -> str:
    """``("models", 0, "api_key")`` → ``models[0].api_key``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "(top level)"


def default_data_dir(environ: Mapping[str, str]) -> Path:
    """``$XDG_DATA_HOME/agentrunner`` when ``XDG_DATA_HOME`` is set, else ``./.agentrunner``."""
    xdg = environ.get("XDG_DATA_HOME")
    return Path(xdg) / "agentrunner" if xdg else Path(".agentrunner")


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The configuration resolved against the environment and flags."""

    config: HostConfig
    """The file's content (defaults when there is no file)."""
    config_path: Path | None
    """The file read, if any."""
    data_dir: Path
    """Absolute data directory."""
    database_url: str = field(repr=False)
    """Database URL (may carry credentials when it comes from the environment)."""
    http_host: str
    """Bind address."""
    http_port: int
    """Port."""
    api_token: str | None = field(repr=False)
    """Bearer token (from the environment only)."""
    plugin_dirs: tuple[Path, ...]
    """Absolute plugin directories."""
    log_level: str
    """Log level."""
    environ: Mapping[str, str] = field(repr=False)
    """The environment secrets are read from."""

    @property
    def is_loopback(self) -> bool:
        """Whether the HTTP API binds a loopback address."""
        return is_loopback_host(self.http_host)

    def require_token_for_bind(self) -> None:
        """Refuse a non-loopback bind without a token, or with a weak one (raises :class:`ConfigFileError`)."""
        if self.is_loopback:
            return
        variable = self.config.http.api_token_env
        if not self.api_token:
            raise ConfigFileError(
                "the environment",
                [
                    f"http.host = {self.http_host!r} is not a loopback address: set "
                    f"{variable} to a bearer token (refusing to serve an open API)"
                ],
            )
        weakness = token_weakness(self.api_token)
        if weakness is not None:
            raise ConfigFileError(
                "the environment",
                [
                    f"{variable} is too weak for the non-loopback bind {self.http_host!r}: {weakness} "
                    "(generate one with: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
                ],
            )


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigFileError(str(path), ["the file does not exist"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(str(path), [f"not valid TOML: {exc}"]) from None
    except OSError as exc:
        raise ConfigFileError(str(path), [f"cannot be read: {exc.strerror}"]) from None


def parse_config(data: Mapping[str, Any], *, source: str) -> HostConfig:
    """Validate parsed TOML; literal secrets and schema errors are reported with their key paths."""
    secrets = find_literal_secrets(data)
    if secrets:
        raise ConfigFileError(source, [f"{format_key_path(p)}: {reason}" for p, reason in secrets])
    try:
        return HostConfig.model_validate(data)
    except ValidationError as exc:
        problems: list[str] = []
        for error in exc.errors():
            loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and p.startswith("function-")))
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = "unknown key"
            problems.append(f"{format_key_path(loc)}: {message}")
        raise ConfigFileError(source, problems) from None


def load_settings(
    config_path: Path | str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    data_dir: Path | str | None = None,
    database_url: str | None = None,
    http_host: str | None = None,
    http_port: int | None = None,
    cwd: Path | None = None,
) -> Settings:
    """Read the configuration file (``config_path``, else ``$AGENTRUNNER_CONFIG``, else ``./agentrunner.toml``
    when it exists, else none) and resolve it against the environment and the given overrides."""
    env = dict(os.environ if environ is None else environ)
    base = cwd or Path.cwd()
    path: Path | None = None
    if config_path is not None:
        path = Path(config_path)
    elif env.get(CONFIG_ENV):
        path = Path(env[CONFIG_ENV])
    elif (base / DEFAULT_CONFIG_FILE).is_file():
        path = base / DEFAULT_CONFIG_FILE
    if path is not None and not path.is_absolute():
        path = base / path
    config = parse_config(_read_file(path), source=str(path)) if path is not None else HostConfig()
    here = path.parent if path is not None else base
    problems: list[str] = []

    def resolve(p: str | Path, root: Path) -> Path:
        candidate = Path(p).expanduser()
        return (candidate if candidate.is_absolute() else root / candidate).resolve()

    if data_dir is not None:
        data = resolve(data_dir, base)
    elif env.get("AGENTRUNNER_DATA_DIR"):
        data = resolve(env["AGENTRUNNER_DATA_DIR"], base)
    elif config.data_dir is not None:
        data = resolve(config.data_dir, here)
    else:
        data = resolve(default_data_dir(env), base)

    url = database_url or env.get("AGENTRUNNER_DATABASE_URL")
    if url is None and config.database_url_env is not None:
        url = env.get(config.database_url_env)
        if not url:
            problems.append(f"database_url_env: environment variable {config.database_url_env} is not set")
    if url is None and config.database_url is not None:
        if url_has_password(config.database_url):
            problems.append("database_url: the URL contains a password; use database_url_env instead")
        url = config.database_url
    url = url or default_sqlite_url(data)

    host = http_host or env.get("AGENTRUNNER_HTTP_HOST") or config.http.host
    port = config.http.port
    raw_port = env.get("AGENTRUNNER_HTTP_PORT")
    if http_port is not None:
        port = http_port
    elif raw_port:
        try:
            port = int(raw_port)
        except ValueError:
            problems.append(f"AGENTRUNNER_HTTP_PORT: {raw_port!r} is not a port number")
        else:
            if not 0 <= port <= 65535:
                problems.append(f"AGENTRUNNER_HTTP_PORT: {port} is out of range")

    if config.knowledge_bases:
        # Knowledge files are named relative to the configuration file, like plugin directories.
        kbs = [
            kb.model_copy(update={"paths": [resolve(p, here) for p in kb.paths]})
            for kb in config.knowledge_bases
        ]
        config = config.model_copy(update={"knowledge_bases": kbs})
    plugin_dirs = [resolve(p, here) for p in config.runners.plugin_dirs]
    plugin_dirs += [resolve(p, base) for p in env.get("AGENTRUNNER_PLUGIN_DIRS", "").split(os.pathsep) if p]

    level = env.get("AGENTRUNNER_LOG_LEVEL", config.log_level).lower()
    if level not in {"debug", "info", "warning", "error"}:
        problems.append(f"AGENTRUNNER_LOG_LEVEL: {level!r} is not one of debug, info, warning, error")
    if problems:
        raise ConfigFileError(str(path) if path else "the environment", problems)
    return Settings(
        config=config,
        config_path=path,
        data_dir=data,
        database_url=url,
        http_host=host,
        http_port=port,
        api_token=env.get(config.http.api_token_env) or None,
        plugin_dirs=tuple(plugin_dirs),
        log_level=level,
        environ=env,
    )
