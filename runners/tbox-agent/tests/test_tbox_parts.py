"""The Tbox runner's declaration: manifest.yaml equals the class's manifest, the entry point, the id the
migration writes, the form, and the conformance kit."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import ClassVar

import agentrunner_runner_tbox
import yaml
from agentrunner import AgentRunAPI, AgentRunContext, AgentRunResult
from agentrunner_conformance import PROFILES, Outcome, Report, check_runner
from agentrunner_conformance.out_of_process import OutOfProcessTarget
from agentrunner_host.legacy.migration import LEGACY_RUNNERS
from agentrunner_host.runtime.manifest import PluginManifest
from agentrunner_http_kit.testing import FakePlatform, fake_platform_in_thread
from agentrunner_runner_tbox import MANIFEST, RUNNER_ID, TboxRunner
from tbox_fake import APP_ID, TboxFake

# The quick profile with generous graces: the kit judges "stops within the grace" by the clock, and on a loaded
# machine a correct run (a child process to kill, a late-scheduled loop) overran quick's 0.2 s.
QUICK = dataclasses.replace(PROFILES["quick"], cancel_grace=2.0, deadline_grace=2.0)

PLUGIN_DIR = Path(__file__).resolve().parents[1]
_KEY = "conformance-key-5f1e"


def test_the_manifest_yaml_declares_the_same_runner_as_the_class() -> None:
    plugin = PluginManifest.model_validate(yaml.safe_load((PLUGIN_DIR / "manifest.yaml").read_text()))
    [entry] = plugin.runner_entries()
    declared = plugin.runner_manifest(entry)
    assert declared.id == RUNNER_ID == LEGACY_RUNNERS["tbox-app-api"]
    assert declared.model_dump(exclude={"metadata"}) == MANIFEST.model_dump(exclude={"metadata"})
    assert entry.execution.python.ref == "agentrunner_runner_tbox:TboxRunner"
    [point] = [e for e in entry_points(group="agentrunner.runners") if e.name == "langbot/tbox-agent/default"]
    assert point.load() is TboxRunner


def test_the_form_marks_the_key_secret_and_labels_every_field_in_two_languages() -> None:
    caps = MANIFEST.capabilities
    assert (caps.streaming, caps.stateful_session, caps.interrupt, caps.multimodal_input) == (
        True,
        True,
        True,
        True,
    )
    assert MANIFEST.permissions.artifacts == ["metadata", "read"]
    fields = {f.name: f for f in MANIFEST.config_schema}
    assert [n for n, f in fields.items() if f.secret] == ["api-key"]
    assert {"api-key", "app-id", "base-url", "timeout"} == set(fields)
    for item in MANIFEST.config_schema:
        assert item.label.en_US
        assert item.label.zh_Hans
        assert item.description is not None
        assert item.description.en_US
        assert item.description.zh_Hans


def _problems(report: Report) -> dict[str, str]:
    return {
        rid: f"{r.outcome.name}: {r.message}"
        for rid, r in report.results.items()
        if r.outcome not in (Outcome.PASS, Outcome.SKIPPED)
    }


def test_the_runner_passes_the_conformance_kit() -> None:
    report = check_runner(TboxRunner, profile=QUICK, seed=20261201)
    assert _problems(report) == {}
    assert report.ok
    assert report.counts()["PASS"] >= 20


def test_the_runner_passes_the_conformance_kit_in_its_own_plugin_process() -> None:
    target = OutOfProcessTarget(PLUGIN_DIR)
    assert target.manifest.id == RUNNER_ID
    report = check_runner(target.runner_class, profile=QUICK, seed=20261201, close=target.aclose)
    assert _problems(report) == {}
    assert report.ok


def test_the_public_names_are_pinned() -> None:
    assert set(agentrunner_runner_tbox.__all__) == {
        "MANIFEST",
        "RUNNER_ID",
        "CONVERSATION_KEY",
        "TboxConfig",
        "TboxRunner",
    }


def test_the_runner_configured_against_its_fake_passes_the_conformance_kit() -> None:
    """The kit's fuzzed runs reach the fake, so streaming and successful runs are judged too."""

    def setup(platform: FakePlatform) -> None:
        TboxFake(_KEY, platform)

    with fake_platform_in_thread(setup) as platform:

        class Configured(TboxRunner):
            config: ClassVar = {"api-key": _KEY, "app-id": APP_ID, "base-url": platform.base_url}

            async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
                configured = ctx.model_copy(update={"config": {**ctx.config, **self.config}})
                async for result in super().run(configured, api):
                    yield result

        report = check_runner(Configured, profile=QUICK, seed=20261201)
        assert _problems(report) == {}
        assert report.ok
        assert platform.requests_to("/api/chat")
    skipped = {rid for rid, r in report.results.items() if r.outcome is Outcome.SKIPPED}
    assert "capability.streaming.deltas-match-message" not in skipped
