"""The built wheels depend on each other with compatible-version pins, and the conformance kit installs alone
from its wheel (with the SDK resolved from the same wheel directory) and checks a runner."""

from __future__ import annotations

import email.parser
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from .conftest import wheel
from .support import clean_env, uv

pytestmark = pytest.mark.slow

# The distributions whose pins this test holds; the runners other teams are adding are not checked yet.
CHECKED = {
    "agentrunner-sdk",
    "agentrunner-host",
    "agentrunner-conformance",
    "agentrunner-mcp-bridge",
    "agentrunner-runner-echo",
    "agentrunner-runner-local-agent",
    "agentrunner-http-kit",
    "agentrunner-harness-kit",
    "agentrunner-runner-claude-code",
    "agentrunner-runner-codex",
    "agentrunner-runner-dify",
    "agentrunner-runner-n8n",
    "agentrunner-runner-coze",
    "agentrunner-runner-dashscope",
    "agentrunner-runner-langflow",
    "agentrunner-runner-tbox",
}


def _requires(path: Path) -> list[Requirement]:
    with zipfile.ZipFile(path) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(archive.read(name).decode())
    return [Requirement(line) for line in metadata.get_all("Requires-Dist") or []]


def test_workspace_dependencies_are_pinned_to_the_compatible_release(built_wheels: Path) -> None:
    """Every dependency on another workspace distribution allows the built version and nothing from the next
    minor version (``>=0.1,<0.2`` while the packages are 0.1.x)."""
    versions = {
        p.name.split("-")[0].replace("_", "-"): Version(p.name.split("-")[1])
        for p in built_wheels.glob("*.whl")
    }
    for name in sorted(CHECKED):
        for requirement in _requires(wheel(built_wheels, name)):
            target = requirement.name.lower()
            if target not in versions:
                continue
            built = versions[target]
            assert requirement.specifier, f"{name} depends on {target} without a version"
            assert built in requirement.specifier, f"{name}: {requirement} excludes the built {built}"
            next_minor = Version(f"{built.major}.{built.minor + 1}.0")
            assert next_minor not in requirement.specifier, f"{name}: {requirement} admits {next_minor}"


RUNNER = """\
from agentrunner import AgentRunner, AgentRunnerManifest


class Hello(AgentRunner):
    manifest = AgentRunnerManifest(id="plugin:tests/hello/default", name="default", label="Hello")

    async def run(self, ctx, api):
        out = self.emitter(ctx)
        yield out.message("hello")
        yield out.complete()
"""


def test_the_conformance_kit_installs_alone_from_its_wheel(tmp_path: Path, built_wheels: Path) -> None:
    """Only the kit's wheel is named; the SDK comes from the wheel directory; the kit's CLI checks a runner."""
    env = tmp_path / "env"
    python = env / "bin" / "python"
    subprocess.run(
        [uv(), "venv", "-q", "--no-config", "--python", sys.executable, str(env)], check=True, env=clean_env()
    )
    subprocess.run(
        [
            uv(),
            "pip",
            "install",
            "-q",
            "--no-config",
            "--python",
            str(python),
            "--find-links",
            str(built_wheels),
            str(wheel(built_wheels, "agentrunner-conformance")),
        ],
        check=True,
        env=clean_env(),
    )
    (tmp_path / "hello.py").write_text(RUNNER, encoding="utf-8")
    checked = subprocess.run(
        [
            str(env / "bin" / "agentrunner-conformance"),
            "check",
            "hello.py:Hello",
            "--profile",
            "quick",
            "--seed",
            "1",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(),
        timeout=600,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "0 failed" in checked.stdout
    listed = subprocess.run(
        [uv(), "pip", "freeze", "--no-config", "--python", str(python)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "agentrunner-host" not in listed
