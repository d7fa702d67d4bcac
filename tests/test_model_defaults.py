"""Model fields that default to an empty dict or list: a fresh value per instance, built by a factory rather than
a deep copy of a shared default, with the same JSON schema as a literal ``= {}`` / ``= []`` default."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator

import agentrunner
from agentrunner import AgentInput, AgentRunState
from agentrunner_host.authorization import AuthorizationSnapshot
from agentrunner_host.definitions import AgentBinding, AgentEventEnvelope
from pydantic import BaseModel

_HOST_MODULES = ("agentrunner_host.definitions", "agentrunner_host.authorization")


def _models() -> Iterator[type[BaseModel]]:
    names = [m.name for m in pkgutil.walk_packages(agentrunner.__path__, "agentrunner.")]
    for name in [*names, *_HOST_MODULES]:
        if name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, BaseModel) and obj.__module__ == name:
                yield obj


def test_no_model_field_defaults_to_a_value_pydantic_must_deep_copy() -> None:
    """pydantic deep-copies an unhashable default on every instance (``copy.deepcopy``, several µs each on
    the run path); an empty dict or list default is a ``default_factory`` instead."""
    offenders = [
        f"{model.__module__}.{model.__qualname__}.{name}"
        for model in _models()
        for name, field in model.model_fields.items()
        if isinstance(field.default, dict | list | set)
    ]
    assert offenders == []


def test_factory_defaults_keep_the_literal_default_in_the_json_schema() -> None:
    """Clients reading the schema (OpenAPI, packages/sdk/schema) still see ``"default": {}`` / ``[]``."""
    event = AgentEventEnvelope.model_json_schema()["properties"]
    assert [event[k]["default"] for k in ("data", "params", "metadata")] == [{}, {}, {}]
    binding = AgentBinding.model_json_schema()["properties"]
    assert binding["filters"]["default"] == [] and binding["event_types"]["default"] == ["message.received"]
    assert AgentInput.model_json_schema()["properties"]["contents"]["default"] == []
    assert AgentRunState.model_json_schema()["properties"]["conversation"]["default"] == {}
    snapshot = AuthorizationSnapshot.model_json_schema()["properties"]
    assert snapshot["dangerous_tools"]["default"] == snapshot["withheld_tools"]["default"] == {}


def test_every_instance_gets_its_own_empty_value() -> None:
    """Mutating one instance's defaulted dict or list never shows in another instance."""
    first, second = (
        AgentEventEnvelope(event_id="e1", event_type="x"),
        AgentEventEnvelope(event_id="e2", event_type="x"),
    )
    first.data["k"] = 1
    first.input.contents.clear()
    assert second.data == {} and first.data is not second.data
    assert first.input.contents is not second.input.contents
