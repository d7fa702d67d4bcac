"""Plugin isolation, tested from inside a real plugin process: the probe plugin tries to read the host's
``/proc/<pid>/environ``, memory, data directory, database and cursor key under a real ``agentrunner serve``.

As root (CI), plugins run as the dedicated ``agentrunner-plugin`` account and get nothing. The host is also
non-dumpable and removes the secret variables it read from its own ``os.environ``."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from agentrunner import MessageCompletedResult, codec, parse_result
from agentrunner_host.runtime.sandbox import is_dumpable, make_non_dumpable, scrub_environ

from .isolation import plugin_account, plugin_command, serving, world_readable_probe

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SENTINEL = "SENTINEL-" + secrets.token_hex(16)


def _answer(body: dict[str, object]) -> str:
    items: list[dict[str, object]] = body["results"]  # type: ignore[assignment]
    for item in items:
        result = parse_result(item["result"])  # type: ignore[arg-type]
        if isinstance(result, MessageCompletedResult):
            return result.data.message.text()
    raise AssertionError(f"no message in {body}")


def test_a_plugin_running_as_the_plugin_account_reads_nothing_of_the_host(tmp_path: Path) -> None:
    """Host as root, plugin as ``agentrunner-plugin``: the host's environ, mem and maps, its data directory,
    database and cursor key are all refused; the plugin's own environment holds no host secret."""
    user = plugin_account()
    if user is None:
        pytest.skip("needs root and useradd to run plugins as another account (CI runs as root)")
    command = plugin_command(user)
    if command is None:
        pytest.skip(f"no Python interpreter that {user.name} can execute was found")
    data_dir = tmp_path / "data"
    token = "SENTINEL-" + secrets.token_urlsafe(32)
    with world_readable_probe() as plugins:
        targets = {
            "paths": [
                str(data_dir),
                str(data_dir / "agentrunner.db"),
                str(data_dir / "agentrunner.db-wal"),
                str(data_dir / "cursor.key"),
                str(tmp_path / "agentrunner.toml"),
            ],
            "sentinels": ["SENTINEL-"],
        }
        config = tmp_path / "agentrunner.toml"
        config.write_text(
            f"[runners]\nplugin_dirs = [{codec.dumps_str(str(plugins))}]\n"
            f"[isolation]\nplugin_user = {codec.dumps_str(user.name)}\nplugin_command = {codec.dumps_str(command)}\n"
            "[[agents]]\nagent_id = 'snoop'\nrunner_id = 'plugin:security/probe/snoop'\n"
            f"runner_config = {{ targets = {{ paths = {codec.dumps_str(targets['paths'])}, "
            f"sentinels = {codec.dumps_str(targets['sentinels'])} }} }}\n"
            "[[bindings]]\nbinding_id = 'snoop'\nagent_id = 'snoop'\n"
            "scope = { type = 'conversation', id = 'snoop' }\n",
            encoding="utf-8",
        )
        env = {"AGENTRUNNER_API_TOKEN": token, "SENTINEL_API_KEY": SENTINEL}
        with serving(config, data_dir, tmp_path / "serve.log", env=env) as (base, host_pid):
            response = httpx.post(
                f"{base}/v1/events?wait=true",
                json={"text": "go", "conversation_id": "snoop"},
                headers={"Authorization": f"Bearer {token}"},
                timeout=120,
            )
            assert response.status_code == 200, response.text
            report = codec.loads(_answer(response.json()))
    assert report["host_pid"] == host_pid
    assert report["uid"] == user.uid and report["euid"] == user.uid
    assert report["env_has_sentinel"] is False
    for path, outcome in report["results"].items():
        assert outcome["read"] is False, (path, outcome)
        assert outcome["error"] == "PermissionError", (path, outcome)


def test_the_host_marks_itself_non_dumpable_and_scrubs_its_secret_variables(tmp_path: Path) -> None:
    """``serve``'s process hardening, run in a separate interpreter (it changes the whole process)."""
    script = (
        "import json, os\n"
        "from agentrunner_host.config import load_settings\n"
        "from agentrunner_host.cli import _harden_process\n"
        "from agentrunner_host.runtime.sandbox import is_dumpable\n"
        "settings = load_settings(None)\n"
        "_harden_process(settings)\n"
        "print(json.dumps({'dumpable': is_dumpable(), 'umask': os.umask(0o077),"
        " 'token': 'AGENTRUNNER_API_TOKEN' in os.environ, 'db': 'AGENTRUNNER_DATABASE_URL' in os.environ,"
        " 'kept': os.environ.get('UNRELATED_SETTING'), 'held': settings.api_token}))\n"
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AGENTRUNNER_")},
        "AGENTRUNNER_API_TOKEN": SENTINEL,
        "AGENTRUNNER_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/x.db",
        "AGENTRUNNER_DATA_DIR": str(tmp_path / "data"),
        "UNRELATED_SETTING": "kept",
    }
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True, check=True
    )
    state = codec.loads(done.stdout.strip().splitlines()[-1])
    assert state["dumpable"] is False
    assert state["umask"] == 0o077
    assert state["token"] is False and state["db"] is False  # gone from os.environ...
    assert state["held"] == SENTINEL  # ...but still held by the settings
    assert state["kept"] == "kept"


def test_scrub_environ_removes_only_the_named_variables() -> None:
    """The scrub takes exactly the secret variables the configuration names."""
    environ = {"A_TOKEN": "x", "PATH": "/bin", "B_KEY": "y"}
    assert scrub_environ(["A_TOKEN", "B_KEY", "MISSING"], environ) == ["A_TOKEN", "B_KEY"]
    assert environ == {"PATH": "/bin"}


def test_non_dumpable_is_reported() -> None:
    """``make_non_dumpable`` works on this platform (checked in a child, so this process is unchanged)."""
    script = "from agentrunner_host.runtime.sandbox import *; print(make_non_dumpable(), is_dumpable())"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "False"]
    assert is_dumpable() is True and callable(make_non_dumpable)
