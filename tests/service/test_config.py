"""Loading ``agentrunner.toml``: validation errors with file and key path, secrets, environment overrides."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from agentrunner.codec import JsonObject
from agentrunner_host.config import (
    ConfigFileError,
    default_data_dir,
    load_settings,
    redact_config,
    resolve_env_refs,
)
from agentrunner_host.config.secrets import EnvReferenceError
from agentrunner_host.stores.engine import DATABASE_FILE_NAME

from .conftest import SettingsFactory


def test_an_unknown_key_is_reported_with_the_file_and_its_key_path(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    """A typo inside a list of tables names the file, ``models[0].base_ur`` and the problem."""
    toml = '[[models]]\nid = "m"\nbase_ur = "https://x"\nmodel = "m"\n'
    with pytest.raises(ConfigFileError, match=r"models\[0\]\.base_ur: unknown key") as caught:
        make_settings(toml)
    message = caught.value.message
    assert str(tmp_path / "agentrunner.toml") in message
    assert "models[0].base_ur: unknown key" in message
    assert "models[0].base_url: Field required" in message


def test_wrong_types_and_bad_references_name_their_key(make_settings: SettingsFactory) -> None:
    """A port that is not a number and a binding naming an unknown agent are reported precisely."""
    with pytest.raises(ConfigFileError, match=r"http\.port: Input should be a valid integer"):
        make_settings('[http]\nport = "eighty"\n')
    toml = '[[bindings]]\nbinding_id = "b"\nagent_id = "nobody"\n'
    with pytest.raises(ConfigFileError, match="unknown agent 'nobody'"):
        make_settings(toml)


def test_invalid_toml_is_reported_with_the_file(make_settings: SettingsFactory) -> None:
    """A syntax error names the file and says it is not TOML."""
    with pytest.raises(ConfigFileError, match="not valid TOML"):
        make_settings("this is = = not toml")


def test_a_missing_configuration_file_is_an_error(tmp_path: Path) -> None:
    """A named file that does not exist is not silently replaced by defaults."""
    with pytest.raises(ConfigFileError, match="does not exist"):
        load_settings(tmp_path / "absent.toml", environ={})


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        (
            '[[models]]\nid = "m"\nbase_url = "https://x"\nmodel = "m"\napi_key = "abc123"\n',
            "models[0].api_key",
        ),
        (
            '[[agents]]\nagent_id = "a"\nrunner_id = "plugin:a/b/c"\nrunner_config = { token = "t0ps3cret" }\n',
            "agents[0].runner_config.token",
        ),
        (
            '[[agents]]\nagent_id = "a"\nrunner_id = "plugin:a/b/c"\nrunner_config = { note = "sk-proj-abcdefghijklmnop" }\n',
            "agents[0].runner_config.note",
        ),
        ('database_url = "postgresql+asyncpg://u:hunter2@db/agentrunner"\n', "database_url"),
    ],
)
def test_literal_secrets_in_the_file_are_refused(make_settings: SettingsFactory, toml: str, key: str) -> None:
    """Secret-looking keys, token-shaped values and URLs with passwords are refused, with their key path."""
    with pytest.raises(ConfigFileError, match="environment variable") as caught:
        make_settings(toml)
    assert f"{key}:" in caught.value.message
    assert "environment variable" in caught.value.message
    assert "hunter2" not in caught.value.message and "t0ps3cret" not in caught.value.message


def test_secrets_come_from_the_environment(make_settings: SettingsFactory) -> None:
    """The API token and the database URL are read from the variables the file names."""
    toml = 'database_url_env = "MY_DB"\n[http]\napi_token_env = "MY_TOKEN"\n'
    settings = make_settings(toml, environ={"MY_DB": "sqlite+aiosqlite:///x.db", "MY_TOKEN": "s3cr3t-value"})
    assert settings.database_url == "sqlite+aiosqlite:///x.db" and settings.api_token == "s3cr3t-value"
    assert "s3cr3t-value" not in repr(settings) and "x.db" not in repr(settings)
    with pytest.raises(ConfigFileError, match="MY_DB is not set"):
        make_settings(toml)


def test_environment_variables_override_the_file_and_flags_override_both(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    """``AGENTRUNNER_*`` beat the file; explicit arguments beat the environment."""
    toml = 'data_dir = "from-file"\n[http]\nhost = "127.0.0.2"\nport = 9000\n'
    settings = make_settings(toml, environ={"AGENTRUNNER_HTTP_PORT": "9100"})
    assert settings.http_host == "127.0.0.2" and settings.http_port == 9100
    assert settings.data_dir == tmp_path / "data"
    flagged = make_settings(toml, environ={"AGENTRUNNER_HTTP_PORT": "9100"}, http_port=9200)
    assert flagged.http_port == 9200
    with pytest.raises(ConfigFileError, match="AGENTRUNNER_HTTP_PORT"):
        make_settings(environ={"AGENTRUNNER_HTTP_PORT": "lots"})


def test_every_documented_environment_variable_beats_the_file(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    """docs/operators.md's table of ``AGENTRUNNER_*`` variables: database URL, bind address, plugin directories
    (added to the file's) and log level each override the file; a log level that is none of the four is an
    error naming the variable."""
    toml = (
        'log_level = "warning"\ndatabase_url = "sqlite+aiosqlite:///from-file.db"\n'
        '[http]\nhost = "127.0.0.2"\n[runners]\nplugin_dirs = ["from-file"]\n'
    )
    environ = {
        "AGENTRUNNER_LOG_LEVEL": "DEBUG",
        "AGENTRUNNER_DATABASE_URL": "sqlite+aiosqlite:///from-env.db",
        "AGENTRUNNER_HTTP_HOST": "127.0.0.3",
        "AGENTRUNNER_PLUGIN_DIRS": f"one{os.pathsep}two",
    }
    settings = make_settings(toml, environ=environ)
    assert settings.log_level == "debug"
    assert settings.database_url == "sqlite+aiosqlite:///from-env.db"
    assert settings.http_host == "127.0.0.3"
    assert settings.plugin_dirs == (tmp_path / "from-file", tmp_path / "one", tmp_path / "two")
    assert make_settings(toml).log_level == "warning"
    with pytest.raises(ConfigFileError, match="AGENTRUNNER_LOG_LEVEL: 'loud' is not one of"):
        make_settings(environ={"AGENTRUNNER_LOG_LEVEL": "loud"})


def test_relative_paths_in_the_file_resolve_against_the_file(tmp_path: Path) -> None:
    """``data_dir`` and plugin directories are relative to the configuration file, not the working directory."""
    conf = tmp_path / "etc"
    conf.mkdir()
    (conf / "agentrunner.toml").write_text('data_dir = "state"\n[runners]\nplugin_dirs = ["plugins"]\n')
    settings = load_settings(conf / "agentrunner.toml", environ={}, cwd=tmp_path)
    assert settings.data_dir == conf / "state"
    assert settings.plugin_dirs == (conf / "plugins",)
    assert settings.database_url.endswith(f"{conf / 'state' / DATABASE_FILE_NAME}")


def test_the_default_data_directory_follows_xdg(tmp_path: Path) -> None:
    """``$XDG_DATA_HOME/agentrunner`` when set, ``./.agentrunner`` otherwise."""
    assert default_data_dir({"XDG_DATA_HOME": "/xdg"}) == Path("/xdg/agentrunner")
    assert default_data_dir({}) == Path(".agentrunner")
    settings = load_settings(None, environ={}, cwd=tmp_path)
    assert settings.config_path is None and settings.data_dir == tmp_path / ".agentrunner"


def test_the_data_directory_is_the_flag_then_the_environment_then_the_file_then_the_default(
    tmp_path: Path,
) -> None:
    """The order docs/operators.md gives: ``--data-dir``, ``$AGENTRUNNER_DATA_DIR``, ``data_dir`` in the file
    (relative to the file), ``$XDG_DATA_HOME/agentrunner``, ``./.agentrunner``."""
    conf = tmp_path / "etc"
    conf.mkdir()
    (conf / "agentrunner.toml").write_text('data_dir = "from-file"\n', encoding="utf-8")
    file = conf / "agentrunner.toml"
    env = {"AGENTRUNNER_DATA_DIR": "from-env", "XDG_DATA_HOME": str(tmp_path / "xdg")}
    assert (
        load_settings(file, environ=env, cwd=tmp_path, data_dir="from-flag").data_dir
        == tmp_path / "from-flag"
    )
    assert load_settings(file, environ=env, cwd=tmp_path).data_dir == tmp_path / "from-env"
    del env["AGENTRUNNER_DATA_DIR"]
    assert load_settings(file, environ=env, cwd=tmp_path).data_dir == conf / "from-file"
    assert load_settings(None, environ=env, cwd=tmp_path).data_dir == tmp_path / "xdg" / "agentrunner"
    assert load_settings(None, environ={}, cwd=tmp_path).data_dir == tmp_path / ".agentrunner"


def test_the_config_file_is_found_through_the_environment_or_the_working_directory(tmp_path: Path) -> None:
    """``AGENTRUNNER_CONFIG`` names the file; otherwise ``./agentrunner.toml`` is used when present."""
    named = tmp_path / "named.toml"
    named.write_text("[http]\nport = 7001\n")
    assert load_settings(None, environ={"AGENTRUNNER_CONFIG": str(named)}, cwd=tmp_path).http_port == 7001
    (tmp_path / "agentrunner.toml").write_text("[http]\nport = 7002\n")
    assert load_settings(None, environ={}, cwd=tmp_path).http_port == 7002


def test_env_references_resolve_and_redaction_masks_secret_fields() -> None:
    """``{env = "X"}`` becomes the variable's value for runs; output masks form-secret and secret-named keys."""
    config: JsonObject = {
        "api_key": {"env": "K"},
        "nested": {"token": "abc"},
        "plain": "ok",
        "items": [{"password": "p"}],
    }
    assert resolve_env_refs(config, environ={"K": "v"}) == {**config, "api_key": "v"}
    with pytest.raises(EnvReferenceError, match="K is not set"):
        resolve_env_refs(config, environ={})
    assert redact_config(config) == {
        "api_key": {"env": "K"},
        "nested": {"token": "***"},
        "plain": "ok",
        "items": [{"password": "***"}],
    }
