"""Fixtures of the plugin-environment tests: the workspace's wheels, built once per session."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .support import clean_env, uv

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def built_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``uv build --all-packages --wheel``: every distribution of the workspace, as users get them."""
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [uv(), "build", "--all-packages", "--wheel", "-q", "-o", str(dist)],
        check=True,
        cwd=REPO,
        env=clean_env(),
    )
    return dist


def wheel(dist: Path, distribution: str) -> Path:
    """The built wheel of *distribution* (``agentrunner-sdk`` → ``agentrunner_sdk-….whl``)."""
    (found,) = dist.glob(distribution.replace("-", "_") + "-*.whl")
    return found
