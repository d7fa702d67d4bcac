"""The DashScope runner's declaration: manifest.yaml equals the class's manifest, the entry point, the id the
migration writes, the request body, and the conformance kit."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import ClassVar

import agentrunner_runner_dashscope
import yaml
from agentrunner import AgentRunAPI, AgentRunContext, AgentRunResult
from agentrunner_conformance import PROFILES, Outcome, Report, check_runner
from agentrunner_conformance.out_of_process import OutOfProcessTarget
from agentrunner_host.legacy.migration import LEGACY_RUNNERS
from agentrunner_host.runtime.manifest import PluginManifest
from agentrunner_http_kit.testing import FakePlatform, fake_platform_in_thread
from agentrunner_runner_dashscope import MANIFEST, RUNNER_ID, DashScopeConfig, DashScopeRunner
from agentrunner_runner_dashscope.runner import request_body
from dashscope_fake import AGENT_APP, DashScopeFake

# The quick profile with generous graces: the kit judges "stops within the grace" by the clock, and on a loaded
# machine a correct run (a child process to kill, a late-scheduled loop) overran quick's 0.2 s.
QUICK = dataclasses.replace(PROFILES["quick"], cancel_grace=2.0, deadline_grace=2.0)

PLUGIN_DIR = Path(__file__).resolve().parents[1]
_KEY = "conformance-key-5f1e"


def test_the_manifest_yaml_declares_the_same_runner_as_the_class() -> None:
    plugin = PluginManifest.model_validate(yaml.safe_load((PLUGIN_DIR / "manifest.yaml").read_text()))
    [entry] = plugin.runner_entries()
    declared = plugin.runner_manifest(entry)
    assert declared.id == RUNNER_ID == LEGACY_RUNNERS["dashscope-app-api"]
    assert declared.model_dump(exclude={"metadata"}) == MANIFEST.model_dump(exclude={"metadata"})
    assert entry.execution.python.ref == "agentrunner_runner_dashscope:DashScopeRunner"
    [point] = [
        e for e in entry_points(group="agentrunner.runners") if e.name == "langbot/dashscope-agent/default"
    ]
    assert point.load() is DashScopeRunner


def test_the_form_marks_the_key_secret_and_labels_every_field_in_two_languages() -> None:
    caps = MANIFEST.capabilities
    assert (caps.streaming, caps.stateful_session, caps.interrupt, caps.multimodal_input) == (
        True,
        True,
        True,
        False,
    )
    fields = {f.name: f for f in MANIFEST.config_schema}
    assert [n for n, f in fields.items() if f.secret] == ["api-key"]
    assert {"app-type", "api-key", "app-id", "references_quote", "base-url", "timeout"} == set(fields)
    for item in MANIFEST.config_schema:
        assert item.label.en_US
        assert item.label.zh_Hans
        assert item.description is not None
        assert item.description.en_US
        assert item.description.zh_Hans
    assert [o.name for o in fields["app-type"].options] == ["agent", "workflow"]


def test_the_request_body_follows_the_application_api() -> None:
    agent = DashScopeConfig.from_mapping({"api-key": "k", "app-id": "a"})
    workflow = DashScopeConfig.from_mapping({"api-key": "k", "app-id": "a", "app-type": "workflow"})
    assert request_body(agent, "hi", session_id="s", params={"x": 1}, stream=True) == {
        "input": {"prompt": "hi", "session_id": "s", "biz_params": {"x": 1}},
        "parameters": {"incremental_output": True, "has_thoughts": True},
        "debug": {},
    }
    assert request_body(workflow, "hi", session_id=None, params={}, stream=True)["parameters"] == {
        "incremental_output": True,
        "flow_stream_mode": "message_format",
    }
    assert request_body(workflow, "hi", session_id=None, params={}, stream=False)["parameters"] == {}


def _problems(report: Report) -> dict[str, str]:
    return {
        rid: f"{r.outcome.name}: {r.message}"
        for rid, r in report.results.items()
        if r.outcome not in (Outcome.PASS, Outcome.SKIPPED)
    }


def test_the_runner_passes_the_conformance_kit() -> None:
    report = check_runner(DashScopeRunner, profile=QUICK, seed=20261201)
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
    assert set(agentrunner_runner_dashscope.__all__) == {
        "MANIFEST",
        "RUNNER_ID",
        "SESSION_KEY",
        "DashScopeConfig",
        "DashScopeRunner",
    }


def test_the_runner_configured_against_its_fake_passes_the_conformance_kit() -> None:
    """The kit's fuzzed runs reach the fake, so streaming and successful runs are judged too."""

    def setup(platform: FakePlatform) -> None:
        DashScopeFake(_KEY, platform)

    with fake_platform_in_thread(setup) as platform:

        class Configured(DashScopeRunner):
            config: ClassVar = {
                "api-key": _KEY,
                "app-id": AGENT_APP,
                "base-url": platform.base_url + "/api/v1",
            }

            async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
                configured = ctx.model_copy(update={"config": {**ctx.config, **self.config}})
                async for result in super().run(configured, api):
                    yield result

        report = check_runner(Configured, profile=QUICK, seed=20261201)
        assert _problems(report) == {}
        assert report.ok
        assert platform.requests_to(f"/api/v1/apps/{AGENT_APP}/completion")
    skipped = {rid for rid, r in report.results.items() if r.outcome is Outcome.SKIPPED}
    assert "capability.streaming.deltas-match-message" not in skipped
