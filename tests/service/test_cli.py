"""The ``agentrunner`` command in process: exit codes, chat, agents/bindings, runs, db, migrate-config."""

from __future__ import annotations

import argparse
import asyncio
import io
from pathlib import Path

import pytest
from agentrunner import AgentRunnerManifest, DynamicFormItemSchema, I18nObject
from agentrunner import codec as json
from agentrunner_host.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, cli
from agentrunner_host.stores import HostStores, RunStart
from agentrunner_host.stores.engine import create_engine, default_sqlite_url, upgrade

ECHO = "plugin:agentrunner/echo/default"


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Run every command in ``tmp_path`` with its own data directory and no ambient configuration."""
    for name in (
        "AGENTRUNNER_CONFIG",
        "AGENTRUNNER_DATABASE_URL",
        "AGENTRUNNER_API_TOKEN",
        "AGENTRUNNER_HTTP_HOST",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AGENTRUNNER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = cli(list(argv), out=out)
    return code, out.getvalue()


def test_usage_errors_exit_with_2(capsys: pytest.CaptureFixture[str]) -> None:
    """Unknown commands and missing arguments are usage errors."""
    assert run("frobnicate")[0] == EXIT_USAGE
    assert run("agents", "show")[0] == EXIT_USAGE
    assert "usage:" in capsys.readouterr().err


def test_db_upgrade_migrates_to_head() -> None:
    """``db upgrade`` creates the database and reports the revision."""
    code, out = run("db", "upgrade")
    assert code == EXIT_OK and out.startswith("database at revision ")
    assert (Path("data") / "agentrunner.db").is_file()


def test_chat_with_one_message_prints_the_streamed_answer() -> None:
    """``chat --message`` sends one message to the default (echo) binding and prints the reply."""
    code, out = run("chat", "--message", "hello from the terminal")
    assert code == EXIT_OK and out == "hello from the terminal\n"


def test_chat_json_prints_the_result_stream_and_runs_show_reads_it_back() -> None:
    """``--json`` prints one result per line; ``runs show`` then finds the completed run in the database."""
    code, out = run("chat", "--message", "json please", "--json", "--conversation", "cli-conv")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == EXIT_OK and lines[-1]["type"] == "run.completed"
    assert [line["host_seq"] for line in lines] == list(range(1, len(lines) + 1))
    run_id = lines[-1]["result"]["run_id"]
    code, shown = run("runs", "show", run_id)
    assert code == EXIT_OK and json.loads(shown)["status"] == "completed"
    assert run("runs", "show", "run_missing")[0] == EXIT_FAILURE


def test_chat_reads_lines_until_an_empty_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Interactive mode answers every line of stdin and ends on an empty line."""
    monkeypatch.setattr("sys.stdin", io.StringIO("first\nsecond\n\n"))
    code, out = run("chat", "--conversation", "talk")
    assert code == EXIT_OK and out.splitlines() == ["first", "second"]


def test_agents_and_bindings_can_be_managed_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Add, list, show and remove; a conflicting binding fails with the conflict message and exit code 1."""
    assert run("agents", "add", "loud", "--runner", ECHO, "--runner-config", '{"prefix": "!"}')[0] == EXIT_OK
    code, listed = run("agents", "list")
    assert code == EXIT_OK and "loud\tplugin:agentrunner/echo/default\tapi" in listed
    assert run("bindings", "add", "b1", "--agent", "loud", "--scope", "bot:b")[0] == EXIT_OK
    code, _ = run("bindings", "add", "b2", "--agent", "loud", "--scope", "bot:b")
    assert code == EXIT_FAILURE and "same precedence" in capsys.readouterr().err
    code, shown = run("bindings", "show", "b1")
    assert json.loads(shown)["scope"] == {"type": "bot", "id": "b"}
    assert run("chat", "--message", "hey", "--agent", "loud")[1] == "!hey\n"
    assert run("agents", "remove", "loud")[0] == EXIT_FAILURE
    assert "used by bindings b1" in capsys.readouterr().err
    assert run("bindings", "remove", "b1")[0] == EXIT_OK
    assert run("agents", "remove", "loud")[0] == EXIT_OK
    assert run("bindings", "add", "b3", "--agent", "x", "--scope", "nowhere")[0] == EXIT_FAILURE


def test_the_cli_refuses_literal_secrets_and_redacts_secret_fields(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``agents add`` refuses a literal secret; ``agents show`` masks form-secret fields and shows env refs."""
    code, _ = run("agents", "add", "a", "--runner", ECHO, "--runner-config", '{"api_key": "abc"}')
    assert code == EXIT_FAILURE and "literal secrets (api_key)" in capsys.readouterr().err
    secretive = AgentRunnerManifest(
        id=ECHO,
        name="default",
        label=I18nObject(en_US="Echo"),
        config_schema=[
            DynamicFormItemSchema(
                name="access_code", label=I18nObject(en_US="Code"), type="string", secret=True
            )
        ],
    )
    monkeypatch.setattr(
        "agentrunner_host.service.host_service.installed_manifests", lambda: {ECHO: secretive}
    )
    Path("agentrunner.toml").write_text(
        f'[[agents]]\nagent_id = "s"\nrunner_id = "{ECHO}"\n'
        'runner_config = { access_code = "1234", password = { env = "PW" } }\n'
    )
    monkeypatch.setenv("PW", "never-printed")
    code, shown = run("agents", "show", "s")
    assert code == EXIT_OK
    assert json.loads(shown)["runner_config"] == {"access_code": "***", "password": {"env": "PW"}}
    _, listed = run("agents", "list", "--json")
    assert "1234" not in listed and "never-printed" not in listed


def test_configuration_errors_exit_1_naming_the_file_and_key(capsys: pytest.CaptureFixture[str]) -> None:
    """A bad file stops every command with the file, the key path and the problem."""
    Path("agentrunner.toml").write_text("[http]\nprot = 1\n")
    assert run("agents", "list")[0] == EXIT_FAILURE
    err = capsys.readouterr().err
    assert "agentrunner.toml" in err and "http.prot: unknown key" in err


def test_serve_refuses_a_public_address_without_a_token(capsys: pytest.CaptureFixture[str]) -> None:
    """``serve --host 0.0.0.0`` without ``AGENTRUNNER_API_TOKEN`` exits 1 before binding anything."""
    assert run("serve", "--host", "0.0.0.0", "--port", "1")[0] == EXIT_FAILURE
    assert "AGENTRUNNER_API_TOKEN" in capsys.readouterr().err


def test_runs_cancel_reports_an_unreachable_server(capsys: pytest.CaptureFixture[str]) -> None:
    """Cancelling goes through a server's API; with none listening the command fails clearly."""
    code, _ = run("runs", "cancel", "run_x", "--url", "http://127.0.0.1:9")
    assert code == EXIT_FAILURE and "cannot reach http://127.0.0.1:9" in capsys.readouterr().err


def test_migrate_config_prints_a_dry_run_diff(capsys: pytest.CaptureFixture[str]) -> None:
    """A legacy pipeline configuration is converted and shown as a diff; the file is not changed."""
    legacy = {"ai": {"runner": {"runner": "local-agent"}, "local-agent": {"model": "m1"}}}
    Path("pipeline.json").write_bytes(json.dumps(legacy))
    code, out = run("migrate-config", "pipeline.json")
    assert code == EXIT_OK
    assert "+" in out and "plugin:langbot/local-agent/default" in out
    assert json.loads(Path("pipeline.json").read_bytes()) == legacy
    Path("broken.json").write_text("{nope")
    assert run("migrate-config", "broken.json")[0] == EXIT_FAILURE


def test_chat_leaves_the_runs_of_a_running_server_alone() -> None:
    """Only ``serve`` closes interrupted runs; ``chat`` next to a live server must not fail its runs."""
    data = Path("data").resolve()
    data.mkdir()

    async def start_foreign_run() -> None:
        engine = create_engine(default_sqlite_url(data))
        try:
            await upgrade(engine)
            stores = await HostStores.open(engine, data_dir=data)
            await stores.runs.start(
                RunStart(
                    run_id="run_of_the_server",
                    runner_id=ECHO,
                    plugin_id="agentrunner/echo",
                    binding_id="default",
                    event_id="evt_server",
                    conversation=None,
                    snapshot={},
                    snapshot_hash="h",
                    deadline_at=None,
                    started_at=1,
                )
            )
            await stores.aclose()
        finally:
            await engine.dispose()

    asyncio.run(start_foreign_run())
    assert run("chat", "--message", "hi")[0] == EXIT_OK
    code, shown = run("runs", "show", "run_of_the_server")
    assert code == EXIT_OK and json.loads(shown)["status"] == "running"


def _leaf_parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        return [(path, parser)]
    leaves: list[tuple[tuple[str, ...], argparse.ArgumentParser]] = []
    for action in subparsers:
        for name, sub in action.choices.items():
            leaves += _leaf_parsers(sub, (*path, name))
    return leaves


def test_every_command_accepts_the_common_options() -> None:
    """docs/operators.md: every command accepts --config, --data-dir and --database-url."""
    from agentrunner_host.cli import build_parser

    leaves = _leaf_parsers(build_parser())
    assert len(leaves) > 20
    for path, parser in leaves:
        options = {option for action in parser._actions for option in action.option_strings}
        assert {"--config", "--data-dir", "--database-url"} <= options, path
