"""Legacy pipeline configuration migration (runner names → runner ids), on the reference's templates."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from agentrunner import RunnerId
from agentrunner import codec as json
from agentrunner_host.legacy import (
    LEGACY_RUNNERS,
    diff,
    expire_seconds,
    migrate_pipeline_config,
    resolve_runner_config,
    resolve_runner_id,
)

FIXTURES = Path(__file__).parent / "fixtures"
LOCAL = "plugin:langbot/local-agent/default"


def _load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_bytes())


def test_the_legacy_table_matches_the_official_plugins() -> None:
    """Every legacy runner maps to ``plugin:langbot/<x>-agent/default`` as OFFICIAL_RUNNER_PLUGINS §2 lists."""
    assert LEGACY_RUNNERS == {
        "local-agent": "plugin:langbot/local-agent/default",
        "dify-service-api": "plugin:langbot/dify-agent/default",
        "n8n-service-api": "plugin:langbot/n8n-agent/default",
        "coze-api": "plugin:langbot/coze-agent/default",
        "dashscope-app-api": "plugin:langbot/dashscope-agent/default",
        "langflow-api": "plugin:langbot/langflow-agent/default",
        "tbox-app-api": "plugin:langbot/tbox-agent/default",
    }
    assert all(RunnerId.is_valid(v) for v in LEGACY_RUNNERS.values())


def test_the_legacy_default_template_migrates_to_the_local_agent_runner_id() -> None:
    """The old default selects local-agent: its id is set and every legacy block moves under its runner id."""
    legacy = _load("default-pipeline-config.legacy.json")
    result = migrate_pipeline_config(legacy)
    ai = result.config["ai"]
    assert result.runner_id == LOCAL
    assert ai["runner"] == {"id": LOCAL, "expire-time": 0}
    assert ai["runner_config"][LOCAL] == legacy["ai"]["local-agent"]
    assert ai["runner_config"]["plugin:langbot/dify-agent/default"] == legacy["ai"]["dify-service-api"]
    assert set(ai["runner_config"]) == {
        LOCAL,
        "plugin:langbot/dify-agent/default",
        "plugin:langbot/dashscope-agent/default",
        "plugin:langbot/n8n-agent/default",
        "plugin:langbot/langflow-agent/default",
    }
    assert set(ai) == {"runner", "runner_config"}
    for section in ("trigger", "safety", "output"):
        assert result.config[section] == legacy[section]
    assert [(c.action, c.path) for c in result.changes] == [
        ("added", "ai.runner_config"),
        ("set", "ai.runner.id"),
        ("removed", "ai.runner.runner"),
        ("moved", "ai.local-agent"),
        ("moved", "ai.dify-service-api"),
        ("moved", "ai.n8n-service-api"),
        ("moved", "ai.dashscope-app-api"),
        ("moved", "ai.langflow-api"),
    ]
    assert result.warnings == []


def test_migration_is_idempotent() -> None:
    """Migrating a migrated configuration changes nothing."""
    once = migrate_pipeline_config(_load("default-pipeline-config.legacy.json"))
    twice = migrate_pipeline_config(once.config)
    assert twice.config == once.config
    assert not twice.changed and twice.warnings == []
    assert twice.runner_id == LOCAL


def test_the_input_is_never_edited() -> None:
    """The caller's dictionary is left exactly as it was."""
    legacy = _load("default-pipeline-config.legacy.json")
    before = copy.deepcopy(legacy)
    result = migrate_pipeline_config(legacy)
    assert legacy == before
    result.config["ai"]["runner_config"][LOCAL]["model"]["primary"] = "changed"
    assert legacy == before


def test_the_current_default_template_is_already_migrated() -> None:
    """The shipped current template has ``id == ''``, empty runner_config and no legacy block; nothing changes."""
    current = _load("default-pipeline-config.json")
    assert current["ai"]["runner"]["id"] == "" and current["ai"]["runner_config"] == {}
    assert "local-agent" not in current["ai"]
    result = migrate_pipeline_config(current)
    assert result.config == current and not result.changed
    assert result.runner_id is None


def test_the_flat_legacy_pipeline_template_has_no_ai_section_and_is_kept() -> None:
    """``legacy/pipeline.json`` has no ``ai`` section: it is returned unchanged, unknown keys included."""
    flat = _load("legacy-pipeline.json")
    result = migrate_pipeline_config(flat)
    assert result.config == flat and not result.changed
    assert result.config["msg-truncate"] == {"method": "round", "round": {"max-round": 10}}


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"ai": {}}, {"ai": {}}),
        ({"ai": {"runner": {"id": LOCAL}}}, {"ai": {"runner": {"id": LOCAL}}}),
        ({}, {}),
        ({"trigger": {}}, {"trigger": {}}),
        ({"ai": {"runner": "x", "runner_config": []}}, {"ai": {"runner": {}, "runner_config": {}}}),
        (
            {"ai": {"dify-service-api": {}}},
            {"ai": {"runner_config": {"plugin:langbot/dify-agent/default": {}}}},
        ),
    ],
)
def test_sections_are_created_only_when_something_moves_into_them(
    config: dict[str, Any], expected: dict[str, Any]
) -> None:
    """Nothing to migrate, nothing changed: no empty ``ai.runner`` / ``ai.runner_config`` is added; a section
    that is not an object is replaced (with a warning), and a legacy block gets the section it moves to."""
    result = migrate_pipeline_config(config)
    assert result.config == expected
    assert result.changed == (config != expected)


def test_a_selected_non_default_runner_and_unknown_keys_are_kept() -> None:
    """A dify pipeline gets the dify id; expire-time and unknown keys survive."""
    legacy = {
        "ai": {
            "runner": {"runner": "dify-service-api", "expire-time": 3600, "note": "kept"},
            "dify-service-api": {"base-url": "https://dify.example/v1", "api-key": "k", "timeout": 30},
            "custom-block": {"x": 1},
        },
        "extra": True,
    }
    result = migrate_pipeline_config(legacy)
    ai = result.config["ai"]
    assert ai["runner"] == {"id": "plugin:langbot/dify-agent/default", "expire-time": 3600, "note": "kept"}
    assert ai["runner_config"]["plugin:langbot/dify-agent/default"]["timeout"] == 30
    assert ai["custom-block"] == {"x": 1} and result.config["extra"] is True
    assert expire_seconds(result.config) == 3600


def test_an_unknown_legacy_runner_is_left_with_a_warning() -> None:
    """A runner name with no official plugin is not guessed: it stays and is reported."""
    result = migrate_pipeline_config({"ai": {"runner": {"runner": "my-own-runner"}, "runner_config": {}}})
    assert result.config["ai"]["runner"] == {"runner": "my-own-runner"}
    assert result.runner_id is None
    assert result.warnings == [
        "legacy runner 'my-own-runner' has no official plugin; ai.runner.runner left unchanged"
    ]


def test_an_existing_runner_config_wins_over_a_legacy_block() -> None:
    """When ``runner_config[id]`` already exists the legacy block is kept in place and reported."""
    config = {
        "ai": {
            "runner": {"id": LOCAL, "runner": "dify-service-api"},
            "runner_config": {LOCAL: {"custom-option": 20}},
            "local-agent": {"model": "old"},
        }
    }
    result = migrate_pipeline_config(config)
    ai = result.config["ai"]
    assert ai["runner"] == {"id": LOCAL, "runner": "dify-service-api"}
    assert ai["runner_config"] == {LOCAL: {"custom-option": 20}}
    assert ai["local-agent"] == {"model": "old"}
    assert not result.changed and len(result.warnings) == 2


def test_diff_renders_a_dry_run_as_a_unified_diff_of_pretty_json() -> None:
    """The dry-run diff shows the new id and the moved blocks; equal configurations give an empty diff."""
    legacy = _load("default-pipeline-config.legacy.json")
    result = migrate_pipeline_config(legacy)
    text = diff(legacy, result.config)
    assert text.startswith("--- before\n+++ after\n")
    assert f'+      "id": "{LOCAL}"\n' in text
    assert '-      "runner": "local-agent"' in text
    assert '-  "local-agent": {' not in text  # blocks are nested under "ai" (indent 4)
    assert '-    "local-agent": {' in text
    assert diff(result.config, result.config) == ""


def test_the_runtime_reads_only_the_migrated_fields() -> None:
    """``resolve_runner_id`` ignores ``ai.runner.runner`` and ``resolve_runner_config`` ignores legacy blocks."""
    legacy = {"ai": {"runner": {"runner": "local-agent", "expire-time": 0}, "local-agent": {"model": "m"}}}
    assert resolve_runner_id(legacy) is None
    assert resolve_runner_config(legacy, LOCAL) == {}
    assert resolve_runner_id({}) is None and resolve_runner_config({}, LOCAL) == {}
    migrated = migrate_pipeline_config(legacy).config
    assert resolve_runner_id(migrated) == LOCAL
    assert resolve_runner_config(migrated, LOCAL) == {"model": "m"}


@pytest.mark.parametrize(
    ("value", "expected"), [(0, 0), (3600, 3600), (None, 0), ("60", 0), (-5, 0), (True, 0)]
)
def test_expire_time_is_read_in_seconds_with_zero_meaning_never(value: object, expected: int) -> None:
    """``ai.runner['expire-time']`` is returned as is; missing or invalid values mean no expiry."""
    config: dict[str, Any] = {"ai": {"runner": {} if value is None else {"expire-time": value}}}
    assert expire_seconds(config) == expected
    assert expire_seconds({}) == 0


@pytest.mark.parametrize(("legacy_name", "runner_id"), sorted(LEGACY_RUNNERS.items()))
def test_every_legacy_runner_name_migrates_even_next_to_an_empty_id(legacy_name: str, runner_id: str) -> None:
    """An empty ``id`` left by a half-migrated pipeline does not block the legacy name from being mapped."""
    config = {"ai": {"runner": {"id": "", "runner": legacy_name}, legacy_name: {"k": 1}}}
    result = migrate_pipeline_config(config)
    assert result.runner_id == runner_id
    assert result.config["ai"] == {"runner": {"id": runner_id}, "runner_config": {runner_id: {"k": 1}}}
