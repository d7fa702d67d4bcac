"""Binding resolution and the runner registry."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import pytest
from agentrunner import AgentRunRequest
from agentrunner_host.bindings import BindingSet
from agentrunner_host.definitions import AgentBinding, BindingScope, EventFilter
from agentrunner_host.errors import (
    BindingConflictError,
    BindingNotFoundError,
    ConfigurationError,
    RunnerNotFoundError,
)
from agentrunner_host.registry import RunnerRegistry

from .fakes import binding, event, manifest


def test_the_most_specific_scope_wins() -> None:
    """conversation > actor > bot > workspace > global, whatever the declaration order."""
    ev = event(conversation_id="c1", bot_id="bot1", workspace_id="ws1")
    bindings = BindingSet(
        [
            binding(binding_id="global"),
            binding(binding_id="ws", scope=BindingScope(type="workspace", id="ws1")),
            binding(binding_id="bot", scope=BindingScope(type="bot", id="bot1")),
            binding(binding_id="actor", scope=BindingScope(type="actor", id="u-1")),
            binding(binding_id="conv", scope=BindingScope(type="conversation", id="c1")),
        ]
    )
    assert bindings.resolve(ev).binding_id == "conv"
    assert bindings.resolve(event(conversation_id="c2", bot_id="bot1")).binding_id == "actor"
    no_actor = event(conversation_id="c2", bot_id="bot1", actor=None)
    assert bindings.resolve(no_actor).binding_id == "bot"


def test_filters_and_explicit_event_types_make_a_binding_more_specific() -> None:
    """A filtered binding beats an unfiltered one of the same scope; an explicit type beats ``*``."""
    filtered = binding(binding_id="groups", event_types=["*"], scope=BindingScope(type="bot", id="b"))
    filtered = filtered.model_copy(update={"filters": [EventFilter(field="launcher_type", equals="group")]})
    plain = binding(binding_id="plain", event_types=["*"], scope=BindingScope(type="bot", id="b"))
    recall = binding(
        binding_id="recall", event_types=["message.recalled"], scope=BindingScope(type="bot", id="b")
    )
    bs = BindingSet([plain, filtered, recall])
    assert bs.resolve(event(bot_id="b", launcher_type="group")).binding_id == "groups"
    assert bs.resolve(event(bot_id="b", launcher_type="person")).binding_id == "plain"
    assert (
        bs.resolve(event(bot_id="b", event_type="message.recalled", launcher_type="person")).binding_id
        == "recall"
    )


def test_two_bindings_of_equal_precedence_are_a_configuration_error_at_load_time() -> None:
    """Ambiguity is reported when the set is built, naming both bindings."""
    with pytest.raises(BindingConflictError, match="'a' and 'b'"):
        BindingSet([binding(binding_id="a"), binding(binding_id="b")])


def test_disjoint_filters_or_event_types_are_not_a_conflict() -> None:
    """Bindings that can never match the same event may share a precedence."""
    groups = binding(binding_id="g").model_copy(
        update={"filters": [EventFilter(field="launcher_type", equals="group")]}
    )
    people = binding(binding_id="p").model_copy(
        update={"filters": [EventFilter(field="launcher_type", equals="person")]}
    )
    by_launcher = BindingSet([groups, people])
    assert by_launcher.resolve(event(launcher_type="group")).binding_id == "g"
    assert by_launcher.resolve(event(launcher_type="person")).binding_id == "p"
    by_type = BindingSet(
        [
            binding(binding_id="m", event_types=["message.received"]),
            binding(binding_id="r", event_types=["message.recalled"]),
        ]
    )
    assert by_type.resolve(event()).binding_id == "m"
    assert by_type.resolve(event(event_type="message.recalled")).binding_id == "r"


def test_disabled_bindings_never_match_and_no_match_is_a_typed_error() -> None:
    """No enabled binding → BindingNotFoundError; duplicates ids are refused."""
    off = binding(binding_id="off").model_copy(update={"enabled": False})
    with pytest.raises(BindingNotFoundError, match=r"message\.received"):
        BindingSet([off]).resolve(event())
    with pytest.raises(ConfigurationError, match="duplicate"):
        BindingSet([binding(binding_id="x", event_types=["a"]), binding(binding_id="x", event_types=["b"])])


def test_binding_runner_ids_are_validated() -> None:
    """A malformed runner id is refused when the binding is built."""
    with pytest.raises(ValueError, match="plugin:"):
        AgentBinding(binding_id="b", runner_id="local-agent")


class FakeConnection:
    """A plugin connection returning canned manifests (or failing)."""

    def __init__(self, plugin_id: str, manifests: list[dict[str, Any]], *, fail: bool = False) -> None:
        self._plugin_id = plugin_id
        self.manifests = manifests
        self.fail = fail
        self.calls = 0

    @property
    def plugin_id(self) -> str:
        return self._plugin_id

    async def list_runners(self) -> list[dict[str, Any]]:
        self.calls += 1
        if self.fail:
            raise ConnectionError("runtime not ready")
        return self.manifests

    async def run(
        self, request: AgentRunRequest
    ) -> AsyncGenerator[Any, None]:  # pragma: no cover - not used here
        raise NotImplementedError
        yield

    async def cancel(self, run_id: str) -> None:  # pragma: no cover
        pass

    async def aclose(self) -> None:  # pragma: no cover
        pass


def m(plugin: str, name: str, **kw: Any) -> dict[str, Any]:
    return manifest(name, plugin=plugin).model_dump(mode="json") | kw


async def test_one_bad_manifest_warns_and_never_hides_the_others() -> None:
    """Invalid, foreign, misnamed and incompatible manifests are skipped with a reason each."""
    conn = FakeConnection(
        "acme/bot",
        [
            m("acme/bot", "good"),
            {"id": "plugin:acme/bot/broken", "name": "broken"},  # no label
            m("other/plugin", "stolen"),
            m("acme/bot", "v2", protocol_version="2"),
            m("acme/bot", "renamed") | {"name": "different"},
        ],
    )
    registry = RunnerRegistry([conn, FakeConnection("zed/ok", [m("zed/ok", "default")])])
    runners = await registry.list()
    assert [d.runner_id for d in runners] == ["plugin:acme/bot/good", "plugin:zed/ok/default"]
    reasons = " | ".join(w.message for w in registry.warnings)
    assert (
        "label" in reasons
        and "own id space" in reasons
        and "protocol '2'" in reasons
        and "differs" in reasons
    )


async def test_a_failed_discovery_is_not_cached_as_no_runners() -> None:
    """After a transient failure the next lookup tries the plugin again and finds its runner."""
    conn = FakeConnection("acme/bot", [m("acme/bot", "default")], fail=True)
    registry = RunnerRegistry([conn])
    with pytest.raises(RunnerNotFoundError, match="discovery failed"):
        await registry.get("plugin:acme/bot/default")
    conn.fail = False
    found = await registry.get("plugin:acme/bot/default")
    assert found.plugin_id == "acme/bot"


async def test_install_and_remove_refresh_the_registry() -> None:
    """Runners of a removed plugin disappear; a newly added plugin is discovered on lookup."""
    registry = RunnerRegistry([FakeConnection("acme/bot", [m("acme/bot", "default")])])
    await registry.get("plugin:acme/bot/default")
    registry.remove("acme/bot")
    with pytest.raises(RunnerNotFoundError, match="not installed"):
        await registry.get("plugin:acme/bot/default")
    registry.add(FakeConnection("new/one", [m("new/one", "default")]))
    assert (await registry.get("plugin:new/one/default")).runner_id == "plugin:new/one/default"
    with pytest.raises(RunnerNotFoundError, match=r"invalid|prefix"):
        await registry.get("local-agent")
