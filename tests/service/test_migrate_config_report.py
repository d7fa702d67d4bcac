"""``agentrunner migrate-config`` per pipeline: whether the target runner is installed (a warning; non-zero exit
with ``--strict``), and literal credentials turned into ``{"env": "VAR"}`` references with the variables to set
— the runner's schema deciding what is a credential, and no value ever printed."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from agentrunner import codec as json
from agentrunner_host.cli import EXIT_FAILURE, EXIT_OK, cli
from agentrunner_host.legacy import externalize_secrets, migrate_pipeline_config

DIFY_KEY = "app-SENTINEL-migrate-1111"
OTHER_KEY = "app-SENTINEL-migrate-2222"
HEADER_VALUE = "hdr-SENTINEL-migrate-3333"


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv("AGENTRUNNER_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return cli(list(argv), out=out), out.getvalue()


def _dify(key: str) -> dict[str, object]:
    return {
        "ai": {
            "runner": {"runner": "dify-service-api"},
            "dify-service-api": {"base-url": "https://dify.example/v1", "api-key": key, "app-type": "chat"},
        }
    }


def test_literal_keys_become_env_references_and_are_never_printed(capsys: pytest.CaptureFixture[str]) -> None:
    Path("a.json").write_bytes(json.dumps(_dify(DIFY_KEY)))
    Path("b.json").write_bytes(json.dumps(_dify(OTHER_KEY)))
    Path("c.json").write_bytes(json.dumps(_dify(DIFY_KEY)))
    code, out = _run("migrate-config", "a.json", "b.json", "c.json")
    err = capsys.readouterr().err
    assert code == EXIT_OK
    assert '"env": "DIFY_AGENT_API_KEY"' in out and '"env": "DIFY_AGENT_API_KEY_2"' in out
    assert DIFY_KEY not in out + err and OTHER_KEY not in out + err
    assert "set DIFY_AGENT_API_KEY: the value of ai.dify-service-api.api-key in a.json" in err
    assert "set DIFY_AGENT_API_KEY_2: the value of ai.dify-service-api.api-key in b.json" in err
    assert (
        "set DIFY_AGENT_API_KEY: the value of ai.dify-service-api.api-key in c.json" in err
    )  # same value, same name
    assert "a.json: runner plugin:langbot/dify-agent/default is installed" in err
    assert json.loads(Path("a.json").read_bytes()) == _dify(DIFY_KEY)  # a dry run


def test_the_runner_schema_decides_what_is_a_credential() -> None:
    legacy = {
        "ai": {
            "runner": {"runner": "n8n-service-api"},
            "n8n-service-api": {
                "webhook-url": "https://n8n.example/webhook/x",
                "auth-type": "header",
                "header-name": "X-Key",
                "header-value": HEADER_VALUE,
            },
        }
    }
    schema_secret = {"header-value", "basic-password", "jwt-secret"}
    result = externalize_secrets(
        legacy, migrate_pipeline_config(legacy), is_secret=lambda runner_id, name: name in schema_secret
    )
    block = result.config["ai"]["runner_config"]["plugin:langbot/n8n-agent/default"]
    assert block["header-value"] == {"env": "N8N_AGENT_HEADER_VALUE"}
    assert block["auth-type"] == "header" and block["header-name"] == "X-Key"
    assert [(e.variable, e.field) for e in result.env] == [("N8N_AGENT_HEADER_VALUE", "header-value")]
    assert HEADER_VALUE not in json.dumps(result.config).decode()


def test_a_runner_that_is_not_installed_is_a_warning_and_fails_with_strict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    legacy = {"ai": {"runner": {"id": "plugin:someone/not-here/default"}, "runner_config": {}}}
    Path("p.json").write_bytes(json.dumps(legacy))
    code, _ = _run("migrate-config", "p.json")
    err = capsys.readouterr().err
    assert code == EXIT_OK
    assert "warning: p.json: runner plugin:someone/not-here/default is not installed" in err
    assert _run("migrate-config", "--strict", "p.json")[0] == EXIT_FAILURE
    Path("ok.json").write_bytes(json.dumps(_dify(DIFY_KEY)))
    assert _run("migrate-config", "--strict", "ok.json")[0] == EXIT_OK


def test_runners_of_configured_plugin_directories_count_as_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugin = tmp_path / "plugins" / "thing"
    plugin.mkdir(parents=True)
    manifest = Path(__file__).resolve().parents[2] / "runners" / "echo" / "manifest.yaml"
    text = (
        manifest.read_text(encoding="utf-8")
        .replace("author: agentrunner", "author: acme")
        .replace("name: echo", "name: thing")
    )
    (plugin / "manifest.yaml").write_text(text, encoding="utf-8")
    Path("agentrunner.toml").write_text('[runners]\nplugin_dirs = ["plugins"]\n', encoding="utf-8")
    legacy = {"ai": {"runner": {"id": "plugin:acme/thing/default"}, "runner_config": {}}}
    Path("p.json").write_bytes(json.dumps(legacy))
    code, _ = _run("migrate-config", "--strict", "p.json")
    err = capsys.readouterr().err
    assert code == EXIT_OK, err
    assert "p.json: runner plugin:acme/thing/default is installed" in err


@pytest.mark.parametrize(
    "config",
    [
        {"ai": {"runner": {"id": "plugin:langbot/dify-agent/default"}}},
        {"ai": {"runner": {"id": "", "expire-time": 0}, "runner_config": {}}},
        {"trigger": {"prefix": ["/ai"]}},
    ],
)
def test_a_config_with_nothing_to_migrate_prints_no_diff(config: dict[str, object]) -> None:
    Path("done.json").write_bytes(json.dumps(config))
    code, out = _run("migrate-config", "done.json")
    assert code == EXIT_OK
    assert out == "nothing to migrate\n"


def test_migrate_config_takes_the_common_options(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Like every command it accepts --config, --data-dir and --database-url (docs/operators.md); the plugins
    installed under that data directory count as installed runners."""
    Path("p.json").write_bytes(json.dumps(_dify(DIFY_KEY)))
    code, out = _run(
        "migrate-config",
        "--data-dir",
        str(isolated / "data"),
        "--database-url",
        f"sqlite+aiosqlite:///{isolated / 'x.db'}",
        "p.json",
    )
    assert code == EXIT_OK and '"env": "DIFY_AGENT_API_KEY"' in out
    assert "is installed" in capsys.readouterr().err
