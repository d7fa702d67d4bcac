"""Discovery (PROTOCOL_V1 §4): the runner manifest and the list response."""

from __future__ import annotations

import pytest
from agentrunner import (
    AgentRunnerCapabilities,
    AgentRunnerContextPolicy,
    AgentRunnerManifest,
    AgentRunnerPermissions,
    DynamicFormItemSchema,
    ListAgentRunnersResponse,
    RunnerId,
)
from pydantic import ValidationError

from . import payloads
from .helpers import assert_contains, round_trip


def test_a_full_manifest_round_trips_and_keeps_every_field() -> None:
    """A realistic manifest survives dump JSON → parse, and the dump contains the input."""
    manifest = AgentRunnerManifest.model_validate(payloads.manifest())
    round_trip(manifest)
    expected = payloads.manifest()
    expected["description"] = {"en_US": "Answers questions"}
    expected["config_schema"][0]["label"] = {"en_US": "Model"}
    assert_contains(expected["config_schema"][0], manifest.model_dump(mode="json")["config_schema"][0])
    assert_contains(expected["capabilities"], manifest.model_dump(mode="json")["capabilities"])
    assert manifest.runner_id == RunnerId("acme", "helper", "default")


def test_a_minimal_manifest_gets_the_spec_defaults() -> None:
    """Capabilities, permissions and context policy default to the values of PROTOCOL_V1 §4.3–4.5."""
    manifest = AgentRunnerManifest(id="plugin:a/b/c", name="c", label="C")  # pyright: ignore[reportArgumentType]
    assert manifest.protocol_version == "1"
    assert manifest.capabilities == AgentRunnerCapabilities()
    assert manifest.capabilities.event_context is True
    assert manifest.capabilities.self_managed_context is True
    assert manifest.capabilities.streaming is False
    assert manifest.permissions == AgentRunnerPermissions()
    assert manifest.context == AgentRunnerContextPolicy()
    assert manifest.context.supports_history_pull is True
    assert manifest.config_schema == []


def test_a_manifest_with_a_malformed_id_fails_naming_the_id() -> None:
    """The id is validated as a runner id and the error says what is wrong."""
    with pytest.raises(
        ValidationError,
        match="Value error, invalid runner id 'acme/helper/default': missing the 'plugin:' prefix",
    ) as info:
        AgentRunnerManifest.model_validate(payloads.manifest(id="acme/helper/default"))
    assert info.value.errors()[0]["loc"] == ("id",)
    assert "plugin:" in str(info.value)


@pytest.mark.parametrize(
    ("section", "value"),
    [
        ("permissions", {"models": ["train"]}),
        ("permissions", {"storage": ["global"]}),
        ("permissions", {"history": ["write"]}),
        ("capabilities", {"streaming": "sometimes"}),
    ],
)
def test_permissions_and_capabilities_are_closed_vocabularies(section: str, value: object) -> None:
    """Unknown permission operations and non-boolean capabilities are rejected, naming the section."""
    with pytest.raises(ValidationError) as info:  # noqa: PT011 - the error's location is checked below
        AgentRunnerManifest.model_validate(payloads.manifest(**{section: value}))
    assert info.value.errors()[0]["loc"][0] == section


def test_unknown_manifest_fields_are_ignored() -> None:
    """A newer runner's manifest with extra fields still parses in an older host."""
    raw = payloads.manifest(usages=["agent"])
    raw["capabilities"]["steering"] = True
    manifest = AgentRunnerManifest.model_validate(raw)
    assert "usages" not in manifest.model_dump()
    assert "steering" not in manifest.capabilities.model_dump()


def test_secret_config_fields_are_listed() -> None:
    """``secret_fields`` names the form items a host must redact."""
    manifest = AgentRunnerManifest.model_validate(payloads.manifest())
    assert manifest.secret_fields() == frozenset({"api_key"})


def test_a_form_item_needs_a_name_label_and_type() -> None:
    """Empty names and types are rejected; ``secret`` defaults to false."""
    item = DynamicFormItemSchema.model_validate({"name": "n", "label": "N", "type": "string"})
    assert item.secret is False
    assert item.default is None
    with pytest.raises(ValidationError, match="name"):
        DynamicFormItemSchema.model_validate({"name": "", "label": "N", "type": "string"})
    with pytest.raises(ValidationError, match="type"):
        DynamicFormItemSchema.model_validate({"name": "n", "label": "N", "type": ""})
    with pytest.raises(ValidationError, match="label"):
        DynamicFormItemSchema.model_validate({"name": "n", "type": "string"})


def test_the_list_response_round_trips() -> None:
    """``LIST_AGENT_RUNNERS`` answers with a list of manifests; an empty answer is valid."""
    response = ListAgentRunnersResponse.model_validate({"runners": [payloads.manifest()]})
    assert response.runners[0].name == "default"
    round_trip(response)
    assert ListAgentRunnersResponse.model_validate({}).runners == []
