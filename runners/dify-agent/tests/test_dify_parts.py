"""The Dify runner's declaration (manifest.yaml = the class's manifest) and the conformance kit, run both
without configuration (every run a typed config_invalid) and configured against the loopback fake."""

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
from agentrunner_runner_dify import MANIFEST, RUNNER_ID, DifyRunner
from dify_fake import SENTINEL_KEY, DifyFake

# The quick profile with generous graces: the kit judges "stops within the grace" by the clock, and on a loaded
# machine a correct run (a child process to kill, a late-scheduled loop) overran quick's 0.2 s.
QUICK = dataclasses.replace(PROFILES["quick"], cancel_grace=2.0, deadline_grace=2.0)

PLUGIN_DIR = Path(__file__).resolve().parents[1]


def test_the_manifest_yaml_declares_the_same_runner_as_the_class() -> None:
    plugin = PluginManifest.model_validate(yaml.safe_load((PLUGIN_DIR / "manifest.yaml").read_text()))
    [entry] = plugin.runner_entries()
    declared = plugin.runner_manifest(entry)
    assert declared.id == RUNNER_ID == "plugin:langbot/dify-agent/default"
    assert declared.model_dump(exclude={"metadata"}) == MANIFEST.model_dump(exclude={"metadata"})
    assert entry.execution.python.ref == "agentrunner_runner_dify:DifyRunner"


def test_every_field_has_both_labels_and_the_key_is_secret() -> None:
    for item in MANIFEST.config_schema:
        assert item.label.en_US and item.label.zh_Hans, item.name
        assert item.description is not None and item.description.en_US and item.description.zh_Hans
    assert MANIFEST.secret_fields() == {"api-key"}
    caps = MANIFEST.capabilities
    assert caps.streaming and caps.multimodal_input and caps.stateful_session and caps.interrupt
    assert MANIFEST.permissions.artifacts == ["metadata", "read"]


def _problems(report: Report) -> dict[str, str]:
    return {
        rid: f"{r.outcome.name}: {r.message}"
        for rid, r in report.results.items()
        if r.outcome not in (Outcome.PASS, Outcome.SKIPPED)
    }


def test_the_unconfigured_runner_passes_the_conformance_kit() -> None:
    report = check_runner(DifyRunner, profile=QUICK, seed=20261201)
    assert _problems(report) == {}
    assert report.ok


def test_the_runner_configured_against_the_fake_passes_the_conformance_kit() -> None:
    def setup(platform: FakePlatform) -> None:
        DifyFake(platform)

    with fake_platform_in_thread(setup) as platform:

        class ConfiguredDify(DifyRunner):
            config: ClassVar = {"base-url": platform.base_url + "/v1", "api-key": SENTINEL_KEY}

            async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
                configured = ctx.model_copy(update={"config": {**ctx.config, **self.config}})
                async for result in super().run(configured, api):
                    yield result

        report = check_runner(ConfiguredDify, profile=QUICK, seed=20261201)
        assert _problems(report) == {}
        assert report.ok
        assert platform.requests_to("/v1/chat-messages")
    skipped = {rid for rid, r in report.results.items() if r.outcome is Outcome.SKIPPED}
    assert "capability.streaming.deltas-match-message" not in skipped
