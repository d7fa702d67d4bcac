"""The two harness runners' manifests: ids, yaml equal to code, honest capabilities, i18n labels, secrets."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from agentrunner import AgentRunnerManifest
from agentrunner_host.runtime.manifest import PluginManifest
from agentrunner_runner_claude_code import MANIFEST as CLAUDE
from agentrunner_runner_codex import MANIFEST as CODEX

ROOT = Path(__file__).resolve().parents[2]
CASES = [
    (CLAUDE, ROOT / "runners" / "claude-code", "agentrunner_runner_claude_code:ClaudeCodeRunner"),
    (CODEX, ROOT / "runners" / "codex", "agentrunner_runner_codex:CodexRunner"),
]


@pytest.mark.parametrize(("manifest", "plugin_dir", "ref"), CASES, ids=["claude-code", "codex"])
def test_manifest_yaml_declares_the_same_runner(
    manifest: AgentRunnerManifest, plugin_dir: Path, ref: str
) -> None:
    plugin = PluginManifest.model_validate(yaml.safe_load((plugin_dir / "manifest.yaml").read_text()))
    [entry] = plugin.runner_entries()
    declared = plugin.runner_manifest(entry)
    assert declared.model_dump(exclude={"metadata"}) == manifest.model_dump(exclude={"metadata"})
    assert entry.execution.python.ref == ref


@pytest.mark.parametrize(("manifest", "plugin_dir", "ref"), CASES, ids=["claude-code", "codex"])
def test_manifest_declares_code_execution_and_the_bridge(
    manifest: AgentRunnerManifest, plugin_dir: Path, ref: str
) -> None:
    caps = manifest.capabilities
    assert caps.executes_code and caps.mcp_bridge and caps.stateful_session and caps.interrupt
    assert manifest.id == f"plugin:langbot/{plugin_dir.name}-agent/default"
    names = [item.name for item in manifest.config_schema]
    assert len(names) == len(set(names))
    for item in manifest.config_schema:
        assert item.label.en_US and item.label.zh_Hans, item.name
        assert item.description is not None and item.description.zh_Hans, item.name
    assert manifest.secret_fields() == {"api-key"}
    for name in (
        "cli-command",
        "working-directory",
        "context-directory",
        "enable-langbot-mcp",
        "skills-json",
        "timeout",
        "resume",
    ):
        assert name in names
