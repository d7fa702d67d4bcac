"""The n8n runner's declaration (manifest.yaml = the class's manifest), its JSON-answer rule, and the
conformance kit (unconfigured, and configured against the loopback fake)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import ClassVar

import yaml
from agentrunner import AgentRunAPI, AgentRunContext, AgentRunResult
from agentrunner_conformance import PROFILES, Outcome, Report, check_runner
from agentrunner_host.runtime.manifest import PluginManifest
from agentrunner_http_kit.testing import FakePlatform, fake_platform_in_thread
from agentrunner_runner_n8n import MANIFEST, RUNNER_ID, N8nRunner, reply_from_json
from n8n_fake import N8nFake

# The quick profile with generous graces: the kit judges "stops within the grace" by the clock, and on a loaded
# machine a correct run (a child process to kill, a late-scheduled loop) overran quick's 0.2 s.
QUICK = dataclasses.replace(PROFILES["quick"], cancel_grace=2.0, deadline_grace=2.0)

PLUGIN_DIR = Path(__file__).resolve().parents[1]


def test_the_manifest_yaml_declares_the_same_runner_as_the_class() -> None:
    plugin = PluginManifest.model_validate(yaml.safe_load((PLUGIN_DIR / "manifest.yaml").read_text()))
    [entry] = plugin.runner_entries()
    declared = plugin.runner_manifest(entry)
    assert declared.id == RUNNER_ID == "plugin:langbot/n8n-agent/default"
    assert declared.model_dump(exclude={"metadata"}) == MANIFEST.model_dump(exclude={"metadata"})
    assert entry.execution.python.ref == "agentrunner_runner_n8n:N8nRunner"


def test_every_field_has_both_labels_and_credentials_are_secret() -> None:
    for item in MANIFEST.config_schema:
        assert item.label.en_US and item.label.zh_Hans, item.name
        assert item.description is not None and item.description.en_US and item.description.zh_Hans
    assert MANIFEST.secret_fields() == {"basic-password", "jwt-secret", "header-value"}
    assert not MANIFEST.capabilities.multimodal_input


def test_the_reply_of_a_json_answer() -> None:
    assert reply_from_json({"response": "a"}, "response") == "a"
    assert reply_from_json([{"response": "a"}], "response") == "a"
    assert reply_from_json({"response": {"x": 1}}, "response") == '{"x":1}'
    assert reply_from_json({"other": 1}, "response") == '{"other":1}'
    assert reply_from_json([{"a": 1}, {"a": 2}], "a") == '[{"a":1},{"a":2}]'
    assert reply_from_json(None, "response") == ""


def _problems(report: Report) -> dict[str, str]:
    return {
        rid: f"{r.outcome.name}: {r.message}"
        for rid, r in report.results.items()
        if r.outcome not in (Outcome.PASS, Outcome.SKIPPED)
    }


def test_the_unconfigured_runner_passes_the_conformance_kit() -> None:
    report = check_runner(N8nRunner, profile=QUICK, seed=20261201)
    assert _problems(report) == {}
    assert report.ok


def test_the_runner_configured_against_the_fake_passes_the_conformance_kit() -> None:
    fakes: list[N8nFake] = []

    def setup(platform: FakePlatform) -> None:
        fakes.append(N8nFake(platform, answer="stream"))

    with fake_platform_in_thread(setup) as platform:

        class ConfiguredN8n(N8nRunner):
            config: ClassVar = {"webhook-url": platform.base_url + "/webhook/none", "auth-type": "none"}

            async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
                configured = ctx.model_copy(update={"config": {**ctx.config, **self.config}})
                async for result in super().run(configured, api):
                    yield result

        report = check_runner(ConfiguredN8n, profile=QUICK, seed=20261201)
        assert _problems(report) == {}
        assert report.ok
        assert platform.requests
    skipped = {rid for rid, r in report.results.items() if r.outcome is Outcome.SKIPPED}
    assert "capability.streaming.deltas-match-message" not in skipped
