"""The local agent's building blocks: manifest, entry point, config reading, think removal, token estimates."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest
import yaml
from agentrunner import ChatMessage, ImageContent, TextContent
from agentrunner_host.runtime.manifest import PluginManifest
from agentrunner_runner_local_agent import MANIFEST, RUNNER_ID, LocalAgentConfig, LocalAgentRunner
from agentrunner_runner_local_agent.think import ThinkFilter, strip_think
from agentrunner_runner_local_agent.tokens import IMAGE_TOKENS, estimate_message, estimate_text

PLUGIN_DIR = Path(__file__).resolve().parents[1]


def test_the_manifest_yaml_declares_the_same_runner_as_the_class() -> None:
    """Discovery from manifest.yaml (no import) shows exactly what the runner class declares."""
    plugin = PluginManifest.model_validate(yaml.safe_load((PLUGIN_DIR / "manifest.yaml").read_text()))
    [entry] = plugin.runner_entries()
    declared = plugin.runner_manifest(entry)
    assert declared.id == RUNNER_ID == "plugin:langbot/local-agent/default"
    assert declared.model_dump(exclude={"metadata"}) == MANIFEST.model_dump(exclude={"metadata"})
    assert entry.execution.python.ref == "agentrunner_runner_local_agent:LocalAgentRunner"


def test_the_manifest_is_honest_about_what_the_runner_uses() -> None:
    """Capabilities, permissions and context policy match the features; every field has en_US and zh_Hans labels."""
    caps = MANIFEST.capabilities
    assert (
        caps.streaming,
        caps.tool_calling,
        caps.knowledge_retrieval,
        caps.multimodal_input,
        caps.interrupt,
    ) == (
        True,
        True,
        True,
        True,
        True,
    )
    assert not caps.platform_api
    assert not caps.stateful_session
    perms = MANIFEST.permissions
    assert perms.models == ["invoke", "stream", "rerank"]
    assert perms.tools == ["detail", "call"]
    assert perms.history == ["page", "search"]
    assert perms.storage == ["plugin"]
    assert MANIFEST.context.supports_history_pull
    assert MANIFEST.context.owns_compaction
    types = {f.name: f.type for f in MANIFEST.config_schema}
    assert types["model"] == "model-fallback-selector"
    assert types["prompt"] == "prompt-editor"
    assert types["knowledge-bases"] == "knowledge-base-multi-selector"
    assert types["rerank-model"] == "rerank-model-selector"
    assert {"rerank-top-k", "retrieval-top-k", "history-turns", "history-token-budget"} <= set(types)
    assert {"max-tool-rounds", "remove-think", "timeout-seconds"} <= set(types)
    for field in MANIFEST.config_schema:
        assert field.label.en_US, field.name
        assert field.label.zh_Hans, field.name


def test_the_entry_point_loads_the_runner_class() -> None:
    """The installed distribution exposes the runner in the ``agentrunner.runners`` group."""
    [point] = [
        p for p in entry_points(group="agentrunner.runners") if p.name == "langbot/local-agent/default"
    ]
    assert point.load() is LocalAgentRunner


def test_config_reads_a_fallback_selector_and_skips_none_sentinels() -> None:
    """Primary then fallbacks, without sentinels or repeats; a plain string selects only a primary."""
    config = LocalAgentConfig.from_mapping(
        {"model": {"primary": "a", "fallbacks": ["__none__", "b", "a", "", "c"]}}
    )
    assert config.model_chain == ("a", "b", "c")
    assert LocalAgentConfig.from_mapping({"model": "solo"}).model_chain == ("solo",)
    assert LocalAgentConfig.from_mapping({"model": {"primary": "", "fallbacks": []}}).model_chain == ()


def test_config_values_a_form_cannot_produce_fall_back_to_defaults() -> None:
    """Wrong types become defaults and numbers are clamped, so a sloppy binding does not crash a run."""
    config = LocalAgentConfig.from_mapping(
        {
            "history-turns": "lots",
            "rerank-top-k": 10_000,
            "max-tool-rounds": -3,
            "remove-think": "true",
            "timeout-seconds": True,
            "prompt": [
                {"role": "system", "content": "Be brief."},
                {"role": "hacker", "content": "x"},
                "junk",
            ],
        }
    )
    defaults = LocalAgentConfig()
    assert config.history_turns == defaults.history_turns
    assert config.rerank_top_k == 50
    assert config.max_tool_rounds == 0
    assert config.remove_think is True
    assert config.timeout_seconds == defaults.timeout_seconds
    assert [(m.role, m.content) for m in config.prompt] == [("system", "Be brief.")]


@pytest.mark.parametrize(
    ("text", "visible"),
    [
        ("<think>plan</think>\n\nAnswer", "Answer"),
        ("Before <think>a < b</think>after", "Before after"),
        ("no tags at all, <thin but not a tag", "no tags at all, <thin but not a tag"),
        ("<think>never closed", ""),
        ("x<think>1</think>y<think>2</think>z", "xyz"),
    ],
)
def test_think_blocks_are_removed_whatever_the_chunk_borders(text: str, visible: str) -> None:
    """Splitting the text at every position, or char by char, gives the same visible text as one piece."""
    assert strip_think(text) == visible
    for cut in range(len(text) + 1):
        think = ThinkFilter()
        assert think.feed(text[:cut]) + think.feed(text[cut:]) + think.flush() == visible, cut
    think = ThinkFilter()
    assert "".join(think.feed(c) for c in text) + think.flush() == visible


def test_token_estimates_count_cjk_per_character_and_images_flat() -> None:
    """Latin text is about four characters a token, CJK one a character; an image costs a flat amount."""
    assert estimate_text("abcdefgh") == 2
    assert estimate_text("你好世界") == 4
    assert estimate_text("") == 0
    message = ChatMessage(
        role="user",
        content=[TextContent(text="abcd"), ImageContent(url="https://example.test/cat.png")],
    )
    assert estimate_message(message) == 4 + 1 + IMAGE_TOKENS
