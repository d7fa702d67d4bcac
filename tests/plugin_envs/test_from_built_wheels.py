"""The acceptance test of per-plugin environments, as an operator would do it: a host installed from the
built wheels into a fresh environment installs a third-party plugin from a directory outside the workspace —
one that depends on a package the host does not have — serves it, and answers two turns over HTTP with memory
across turns. The host's environment is the same afterwards, package for package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from serve_ready import serve_child

from .conftest import wheel
from .support import CONFIG, PLUGIN_ID, RUNNER_ID, build_tinydep, clean_env, freeze, uv, write_plugin

pytestmark = pytest.mark.slow


def _bin(env: Path, name: str) -> str:
    return str(env / ("Scripts" if os.name == "nt" else "bin") / name)


def test_a_plugin_with_its_own_dependency_is_installed_served_and_remembers(
    tmp_path: Path, built_wheels: Path
) -> None:
    host_env = tmp_path / "host-env"
    subprocess.run(
        [uv(), "venv", "-q", "--no-config", "--python", sys.executable, str(host_env)],
        check=True,
        env=clean_env(),
    )
    subprocess.run(
        [
            uv(),
            "pip",
            "install",
            "-q",
            "--no-config",
            "--python",
            _bin(host_env, "python"),
            str(wheel(built_wheels, "agentrunner-host")),
            str(wheel(built_wheels, "agentrunner-sdk")),
            # the host checks the harness pins with the harness kit's rules (sdk + orjson)
            str(wheel(built_wheels, "agentrunner-harness-kit")),
        ],
        check=True,
        env=clean_env(),
    )
    before = freeze(_bin(host_env, "python"))
    assert not any(line.startswith("tinydep") for line in before)

    wheels = build_tinydep(tmp_path)
    plugin = write_plugin(tmp_path / "acme-shouter")
    data = tmp_path / "data"
    config = tmp_path / "agentrunner.toml"
    config.write_text(CONFIG, encoding="utf-8")
    env = clean_env()
    installed = subprocess.run(
        [
            _bin(host_env, "agentrunner"),
            "plugins",
            "install",
            str(plugin),
            "--find-links",
            str(wheels),
            "--data-dir",
            str(data),
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert installed.returncode == 0, installed.stderr
    assert f"runners: {RUNNER_ID}" in installed.stdout

    log = tmp_path / "serve.log"
    with serve_child(
        data, log, config=config, env=env, program=[_bin(host_env, "agentrunner")], cwd=tmp_path
    ) as server:
        with httpx.Client(base_url=server.base, timeout=60) as client:
            runners = client.get("/v1/runners").json()
            assert RUNNER_ID in {r["runner_id"] for r in runners["runners"]}, runners
            assert runners["failed"] == []
            replies: list[str] = []
            for text in ("hello", "again"):
                answer = client.post(
                    "/v1/events?wait=true", json={"text": text, "conversation_id": "c1"}
                ).json()
                assert answer["run"]["status"] == "completed", answer
                # The memory went through the state API: no result of the run carries it.
                assert all(r["type"] != "state.updated" for r in answer["results"]), answer
                replies += [
                    r["result"]["data"]["message"]["content"]
                    for r in answer["results"]
                    if r["type"] == "message.completed"
                ]
        assert replies == ["HELLO!", "AGAIN! (before: hello)"]
        server.stop()
    assert "Traceback" not in log.read_text()

    listed = subprocess.run(
        [_bin(host_env, "agentrunner"), "plugins", "list", "--data-dir", str(data), "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=tmp_path,
    )
    assert listed.stdout.startswith(f"{PLUGIN_ID}\t0.1.0\tok\t"), listed.stdout
    assert freeze(_bin(host_env, "python")) == before, "the host's environment changed"
    probe = subprocess.run([_bin(host_env, "python"), "-c", "import tinydep"], capture_output=True, env=env)
    assert probe.returncode != 0, "the plugin's dependency leaked into the host's environment"
