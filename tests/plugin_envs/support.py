"""A third-party plugin outside the workspace, and the small package it depends on (which no environment of
the host has): both written into a temporary directory, the package built into a wheel with uv."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

TINYDEP = """\
def shout(text: str) -> str:
    return text.upper() + "!"
"""

TINYDEP_PYPROJECT = """\
[project]
name = "tinydep-agentrunner-test"
version = "1.2.3"
requires-python = ">=3.11"

[tool.uv.build-backend]
module-name = "tinydep"

[build-system]
requires = ["uv_build>=0.8,<0.14"]
build-backend = "uv_build"
"""

PLUGIN_PYPROJECT = """\
[project]
name = "acme-shouter"
version = "{version}"
requires-python = ">=3.11"
dependencies = ["agentrunner-sdk>=0.1,<0.2", "tinydep-agentrunner-test==1.2.3"]

[tool.uv.build-backend]
module-name = "acme_shouter"

[build-system]
requires = ["uv_build>=0.8,<0.14"]
build-backend = "uv_build"
"""

PLUGIN_MANIFEST = """\
apiVersion: agentrunner/v1
kind: AgentRunner
metadata: {{ author: acme, name: shouter, version: "{version}" }}
execution:
  python: {{ module: acme_shouter, attr: Shouter }}
"""

PLUGIN_CODE = """\
from collections.abc import AsyncIterator

from agentrunner import AgentRunAPI, AgentRunContext, AgentRunner, AgentRunnerManifest, AgentRunResult, APIError
from tinydep import shout

PREFIX = "{prefix}"


class Shouter(AgentRunner):
    manifest = AgentRunnerManifest(id="plugin:acme/shouter/default", name="default", label="Shouter")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        text = "".join(ctx.input.text_parts())
        before = None
        if "conversation" in (ctx.context.available_apis.state_scopes or []):
            try:
                seen = await api.state.get("conversation", "last")
                before = seen.value
                await api.state.set("conversation", "last", text, expected_version=seen.version)
            except APIError:
                before = None
        reply = PREFIX + shout(text) + (f" (before: {{before}})" if before else "")
        yield out.message(reply)
        yield out.complete()
"""

BROKEN_CODE = "import a_module_nobody_installed\n"

PLUGIN_ID = "acme/shouter"
RUNNER_ID = "plugin:acme/shouter/default"


def uv() -> str:
    # `uv run` tells the processes it starts where it is ($UV): under the README's `./uvw` it is off PATH.
    found = os.environ.get("UV") or shutil.which("uv")
    assert found is not None, "these tests need uv: run them with `uv run`, or put uv on PATH"
    return found


def clean_env() -> dict[str, str]:
    """The environment without the host's virtualenv or configuration, and without this suite's own pytest and
    coverage options (CI passes ``--cov`` through ``PYTEST_ADDOPTS``; a project outside the repository has no
    pytest-cov, so its pytest would refuse the options)."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AGENTRUNNER_", "COVERAGE_"))
        and k not in {"VIRTUAL_ENV", "PYTHONPATH", "UV_PROJECT_ENVIRONMENT", "PYTEST_ADDOPTS"}
    }


def build_tinydep(root: Path) -> Path:
    """Build the dependency's wheel; returns the directory holding it (a ``--find-links`` target)."""
    src = root / "tinydep"
    (src / "src" / "tinydep").mkdir(parents=True)
    (src / "pyproject.toml").write_text(TINYDEP_PYPROJECT, encoding="utf-8")
    (src / "src" / "tinydep" / "__init__.py").write_text(TINYDEP, encoding="utf-8")
    wheels = root / "wheels"
    subprocess.run(
        [uv(), "build", "--wheel", "--no-config", "-q", "-o", str(wheels), str(src)],
        check=True,
        cwd=root,
        env=clean_env(),
    )
    return wheels


def write_plugin(path: Path, *, version: str = "0.1.0", prefix: str = "", broken: bool = False) -> Path:
    """Write (or rewrite) the plugin directory at *path*."""
    package = path / "src" / "acme_shouter"
    package.mkdir(parents=True, exist_ok=True)
    (path / "pyproject.toml").write_text(PLUGIN_PYPROJECT.format(version=version), encoding="utf-8")
    (path / "manifest.yaml").write_text(PLUGIN_MANIFEST.format(version=version), encoding="utf-8")
    code = BROKEN_CODE if broken else PLUGIN_CODE.format(prefix=prefix)
    (package / "__init__.py").write_text(code, encoding="utf-8")
    return path


def freeze(python: str | Path = sys.executable) -> list[str]:
    """Every distribution installed in *python*'s environment, pinned."""
    done = subprocess.run(
        [uv(), "pip", "freeze", "--no-config", "--python", str(python)],
        check=True,
        capture_output=True,
        text=True,
        env=clean_env(),
    )
    return sorted(done.stdout.splitlines())


CONFIG = f"""
[[agents]]
agent_id = "shouter"
runner_id = "{RUNNER_ID}"

[[bindings]]
binding_id = "shouter"
agent_id = "shouter"
scope = {{ type = "global" }}
priority = 10
"""
