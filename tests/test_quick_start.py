"""The README's quick start is what CI runs: `.ci/run` runs its test command exactly, and
`.ci/quickstart.sh` its serve command exactly (both parsed, not copied)."""

from __future__ import annotations

import re
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


def test_ci_runs_exactly_the_readme_test_command() -> None:
    lines = REPO.joinpath(".ci/run").read_text(encoding="utf-8").splitlines()
    marker = next(i for i, line in enumerate(lines) if "== tests (the README's test command)" in line)
    assert lines[marker + 1].strip() == readme_commands()[1]


def test_the_fresh_environment_script_runs_exactly_the_readme_serve_command() -> None:
    script = REPO.joinpath(".ci/quickstart.sh").read_text(encoding="utf-8")
    assert f"SERVE_COMMAND='{readme_commands()[0]}'" in script
    run = REPO.joinpath(".ci/run").read_text(encoding="utf-8")
    assert "bash .ci/quickstart.sh" in run
