"""``docs/tutorial-first-runner.md`` followed verbatim: its files, taken from the code blocks that name a
path, are written into a directory outside the repository; ``uv sync --find-links <built wheels>`` installs
the project; its own tests pass, and so does the conformance kit's check of its runner."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from agentrunner_host.runtime.discovery import load_plugin_dir

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
    spec, reasons = load_plugin_dir(project)
    assert spec is not None and spec.runner_ids() == ["plugin:me/my-echo/default"], reasons
