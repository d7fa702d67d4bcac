"""``docs/tutorial-first-runner.md`` followed verbatim: its files, taken from the code blocks that name a
path, are written into a directory outside the repository; ``uv sync --find-links <built wheels>`` installs
the project; its own tests pass, and so does the conformance kit's check of its runner."""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from agentrunner_host.cli import HTTP_PORT_FILE
from agentrunner_host.config import load_settings
from agentrunner_host.runtime.discovery import load_plugin_dir
from serve_ready import wait_until_ready

from .conftest import REPO
from .support import clean_env, uv

pytestmark = pytest.mark.slow

TUTORIAL = REPO / "docs" / "tutorial-first-runner.md"
_FILE_BLOCK = re.compile(r"```(?:python|toml|yaml)\n# ([\w./-]+)\n(.*?)```", re.S)


def tutorial_files() -> dict[str, str]:
    """Every code block whose first line is ``# <path>``, by path (the comment line kept)."""
    files: dict[str, str] = {}
    for match in _FILE_BLOCK.finditer(TUTORIAL.read_text(encoding="utf-8")):
        path, body = match.groups()
        files[path] = f"# {path}\n{body}"
    return files


def test_the_tutorial_names_every_file_of_its_project() -> None:
    """The project is complete: package, tests, manifest."""
    assert set(tutorial_files()) == {
        "pyproject.toml",
        "src/my_echo/runner.py",
        "src/my_echo/__init__.py",
        "tests/test_my_echo.py",
        "tests/test_my_echo_properties.py",
        "manifest.yaml",
    }


def test_the_tutorial_project_passes_its_tests_and_the_kit(tmp_path: Path, built_wheels: Path) -> None:
    project = tmp_path / "my-echo"
    for path, text in tutorial_files().items():
        target = project / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    env = clean_env()

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=900)

    synced = run(uv(), "sync", "--find-links", str(built_wheels))
    assert synced.returncode == 0, synced.stderr
    tests = run(uv(), "run", "--frozen", "pytest", "-q", "-p", "no:cacheprovider")
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "5 passed" in tests.stdout, tests.stdout
    kit = run(
        uv(), "run", "--frozen", "agentrunner-conformance", "check", "my_echo:MyEcho", "--profile", "quick"
    )
    assert kit.returncode == 0, kit.stdout + kit.stderr
    assert " 0 failed" in kit.stdout, kit.stdout
    (plugin_line,) = [
        line
        for line in TUTORIAL.read_text(encoding="utf-8").splitlines()
        if line.startswith("uv run --frozen pytest --agentrunner-runner")
    ]
    plugin = run(uv(), *shlex.split(plugin_line)[1:], "-p", "no:cacheprovider")
    assert plugin.returncode == 0, plugin.stdout + plugin.stderr
    # Only the kit's requirement tests ran: the project's five tests were deselected.
    assert "5 deselected" in plugin.stdout and " failed" not in plugin.stdout, plugin.stdout
    spec, reasons = load_plugin_dir(project)
    assert spec is not None and spec.runner_ids() == ["plugin:me/my-echo/default"], reasons


def _step_six_block(name: str) -> str:
    """The bash block of step 6 that contains *name*."""
    step = TUTORIAL.read_text(encoding="utf-8").split("## 6.", 1)[1].split("## 7.", 1)[0]
    (block,) = [b for b in re.findall(r"```bash\n(.*?)```", step, re.S) if name in b]
    return block


@pytest.mark.timeout(1200)  # builds the wheels, installs a plugin environment, starts a server
def test_the_tutorial_runner_is_served_by_the_host_as_step_six_says(
    tmp_path: Path, built_wheels: Path
) -> None:
    """Step 6's commands, run with this clone's ``agentrunner`` program (what ``./uvw run --frozen agentrunner``
    starts) from a fresh directory, the test's paths for ``../my-echo`` and ``~/agentrunner-wheels`` and
    ``--port 0`` (the port ``serve`` binds is read from its data directory): the runner answers the README's curl request, and counts the turns through host state."""
    project = tmp_path / "my-echo"
    for path, text in tutorial_files().items():
        target = project / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    here = tmp_path / "host"
    here.mkdir()
    prefix = "./uvw run --frozen agentrunner "
    lines = [line for line in _step_six_block("plugins install").splitlines() if line.strip()]
    assert lines[0] == "cd agentrunner"
    commands = [shlex.split(line.removeprefix(prefix)) for line in lines[1:]]
    assert all(line.startswith(prefix) for line in lines[1:]) and commands[-1] == ["serve"]
    program = str(Path(sys.executable).with_name("agentrunner"))
    paths = {"../my-echo": str(project), "~/agentrunner-wheels": str(built_wheels)}
    env = clean_env()
    for argv in commands[:-1]:
        done = subprocess.run(
            [program, *(paths.get(arg, arg) for arg in argv)],
            cwd=here,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, (argv, done.stdout, done.stderr)
        if argv[:2] == ["plugins", "list"]:
            assert done.stdout.split("\t")[:3] == ["me/my-echo", "0.1.0", "ok"], done.stdout

    curl = shlex.split(_step_six_block("curl -N").strip())
    body = curl[curl.index("-d") + 1]
    assert curl[-1] == "http://127.0.0.1:8420/v1/events"
    # the data directory serve uses when started there like that (the default one, as step 6 has no flag)
    port_file = load_settings(None, environ=env, cwd=here).data_dir / HTTP_PORT_FILE
    log = tmp_path / "serve.log"
    with log.open("wb") as log_file:
        server = subprocess.Popen(
            [program, "serve", "--port", "0"],
            cwd=here,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        base = wait_until_ready(server, port_file, log, timeout=300)
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        for turn in (1, 2):
            answer = httpx.post(f"{base}/v1/events", content=body, headers=headers, timeout=120).text
            assert '"content":"hello"' in answer and '"type":"run.completed"' in answer, answer
            assert f'"turn":{turn}' in answer, answer
        assert "plugin:me/my-echo/default" in httpx.get(f"{base}/v1/runners", timeout=30).text
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
