"""Every ``agentrunner.toml`` example in the docs is a configuration the host accepts, and every agent in it
passes the same admission as ``POST /v1/agents`` against the installed runner's form.

An operator copies these blocks verbatim; a renamed key or a field a runner's form no longer declares would
otherwise only show up on their machine. Blocks that are not host configuration (``pyproject.toml`` entry
points, Codex's own ``config.toml``) are recognised by their first table and skipped, and the test checks
that it found the examples at all."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from agentrunner import AgentRunner, AgentRunnerManifest, codec
from agentrunner_host.admission import check_agent_config
from agentrunner_host.config import HostConfig, parse_config
from agentrunner_host.definitions import DeliveryPolicy, ResourcePolicy, RunPolicy, StatePolicy
from pydantic import BaseModel

DOCS = Path(__file__).resolve().parents[2] / "docs"
_BLOCK = re.compile(r"^ *```toml\n(.*?)^ *```", re.S | re.M)
# First tables of TOML blocks that configure something else than the host.
_NOT_HOST = ("[project", "[mcp_servers.agentrunner]", "[build-system]", "[dependency-groups]")


def _host_examples() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for doc in sorted(DOCS.rglob("*.md")):
        for number, match in enumerate(_BLOCK.finditer(doc.read_text(encoding="utf-8")), start=1):
            text = match.group(1)
            if any(marker in text for marker in _NOT_HOST):
                continue
            found.append((f"{doc.relative_to(DOCS)}#{number}", text))
    return found


EXAMPLES = _host_examples()


def _installed_manifests() -> dict[str, AgentRunnerManifest]:
    manifests: dict[str, AgentRunnerManifest] = {}
    for point in entry_points(group="agentrunner.runners"):
        runner = point.load()
        if isinstance(runner, type) and issubclass(runner, AgentRunner):
            manifests[runner.manifest.id] = runner.manifest
    return manifests


def test_the_docs_have_host_configuration_examples() -> None:
    names = {name.split("#")[0] for name, _ in EXAMPLES}
    # operators.md's full example, the deployment's runtime server and the runner pages' agents
    assert {"operators.md", "deployment.md", "runners/dify.md", "runners/claude-code.md"} <= names


@pytest.mark.parametrize(("name", "text"), EXAMPLES, ids=[name for name, _ in EXAMPLES])
def test_a_documented_configuration_loads_and_its_agents_are_admitted(name: str, text: str) -> None:
    config = parse_config(tomllib.loads(text), source=name)
    manifests = _installed_manifests()
    for agent in config.agents:
        # Raises AdmissionError naming the field when the example no longer fits the runner's form.
        check_agent_config(agent.runner_id, agent.runner_config, manifests.get(agent.runner_id))
    agent_ids = {agent.agent_id for agent in config.agents}
    for binding in config.bindings:
        assert binding.agent_id in agent_ids, f"{name}: binding {binding.binding_id} names an undefined agent"


def _doc_text(description: str | None) -> str:
    text = re.sub(r":\w+:`", "`", re.sub(r"\s+", " ", description or ""))  # Sphinx roles read as code
    return re.sub(r"``([^`]+)``", r"`\1`", text).strip()


def test_the_policy_table_of_operators_md_is_the_policy_models() -> None:
    """docs/operators.md says its policy table is rendered from the models in ``agentrunner_host.definitions``:
    every field is a row, with the model's default and its attribute docstring."""
    doc = (DOCS / "operators.md").read_text(encoding="utf-8")
    rows = dict(
        (key, (codec.loads(default), meaning))
        for key, default, meaning in re.findall(
            r"^\| `((?:resource|state|delivery|run)_policy\.\w+)` \| `(.*?)` \| (.*) \|$", doc, re.M
        )
    )
    expected: dict[str, tuple[object, str]] = {}
    for prefix, model in (
        ("resource_policy", ResourcePolicy),
        ("state_policy", StatePolicy),
        ("delivery_policy", DeliveryPolicy),
        ("run_policy", RunPolicy),
    ):
        for name, field in model.model_fields.items():
            default = field.get_default(call_default_factory=True)
            expected[f"{prefix}.{name}"] = (default, _doc_text(field.description))
    assert rows == expected


def _config_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    keys: list[str] = []
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            keys += _config_keys(kind, f"{prefix}{name}.")
        else:
            keys.append(f"{prefix}{name}")
    return keys


def test_every_configuration_key_is_in_the_reference_of_operators_md() -> None:
    """The operator's reference table names every key of ``agentrunner.toml`` (a section given whole, such as
    ``[[models]]``, counts for its keys)."""
    doc = (DOCS / "operators.md").read_text(encoding="utf-8")
    reference = doc[doc.index("### Reference") : doc.index("### Environment variables")]
    documented = {
        key
        for cell in re.findall(r"^\| ([^|]+) \|", reference, re.M)
        for key in re.findall(r"`\[*([a-z_.]+)", cell)
    }
    missing = [
        key
        for key in _config_keys(HostConfig)
        if key not in documented and key.split(".")[0] not in documented
    ]
    assert missing == []


def test_the_harness_cli_versions_the_runner_pages_name_are_the_ones_ci_installs() -> None:
    script = (DOCS.parent / ".ci" / "harness-clis.sh").read_text(encoding="utf-8")
    pinned = dict(re.findall(r'^(CLAUDE_CODE|CODEX)_VERSION="([^"]+)"', script, re.M))
    for page, name in (("claude-code.md", "CLAUDE_CODE"), ("codex.md", "CODEX")):
        text = (DOCS / "runners" / page).read_text(encoding="utf-8")
        assert f"CI pins {pinned[name]}" in text, f"docs/runners/{page} names another version than CI's"
