"""Runner ids ``plugin:<author>/<plugin>/<runner>``: parsing, formatting and validation errors."""

from __future__ import annotations

import dataclasses

import pytest
from agentrunner import InvalidRunnerIdError, RunnerId


def test_a_runner_id_parses_into_its_parts_and_formats_back() -> None:
    """Parsing and ``str`` are inverse; ``plugin_id`` is ``author/plugin``."""
    rid = RunnerId.parse("plugin:acme/local-agent/default")
    assert (rid.author, rid.plugin, rid.runner) == ("acme", "local-agent", "default")
    assert str(rid) == "plugin:acme/local-agent/default"
    assert rid.plugin_id == "acme/local-agent"
    assert RunnerId.parse(str(rid)) == rid


def test_parts_may_use_letters_digits_dots_underscores_and_dashes() -> None:
    """The allowed alphabet, with the longest allowed parts."""
    value = f"plugin:{'a' * 64}/v1.2_b-c/{'Z9' * 32}"
    assert str(RunnerId.parse(value)) == value
    assert RunnerId.is_valid(value)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("acme/helper/default", "missing the 'plugin:' prefix"),
        ("Plugin:acme/helper/default", "missing the 'plugin:' prefix"),
        ("plugin:acme/helper", "exactly 3 '/'-separated parts, got 2"),
        ("plugin:acme/helper/default/extra", "exactly 3 '/'-separated parts, got 4"),
        ("plugin:/helper/default", "author part is empty"),
        ("plugin:acme//default", "plugin part is empty"),
        ("plugin:acme/helper/", "runner part is empty"),
        ("plugin:ac me/helper/default", "author part 'ac me'"),
        ("plugin:acme/helper/default ", "runner part 'default '"),
        ("plugin:acme/help:er/default", "plugin part 'help:er'"),
        ("plugin:acme/helper/-lead", "runner part '-lead'"),
        ("plugin:acme/helper/" + "r" * 65, "runner part is longer than 64"),
        ("plugin:" + "/".join(["a" * 64] * 3) + "x" * 70, "longer than 255"),
        ("", "missing the 'plugin:' prefix"),
    ],
)
def test_an_invalid_runner_id_is_rejected_with_the_reason(value: str, reason: str) -> None:
    """Each malformed id fails with an ``InvalidRunnerIdError`` (a ``ValueError``) that says why."""
    with pytest.raises(InvalidRunnerIdError, match="invalid runner id") as info:
        RunnerId.parse(value)
    assert reason in str(info.value)
    assert info.value.runner_id == value
    assert "expected plugin:<author>/<plugin>/<runner>" in str(info.value)
    assert isinstance(info.value, ValueError)
    assert not RunnerId.is_valid(value)


def test_a_non_string_is_rejected() -> None:
    """Parsing something that is not a string fails cleanly instead of with an ``AttributeError``."""
    with pytest.raises(InvalidRunnerIdError, match="not a string"):
        RunnerId.parse(42)  # pyright: ignore[reportArgumentType]


def test_constructing_from_parts_validates_them_too() -> None:
    """The dataclass constructor applies the same part rules as ``parse`` (a '/' cannot sneak in)."""
    with pytest.raises(InvalidRunnerIdError, match="plugin part 'a/b'"):
        RunnerId("acme", "a/b", "default")
    with pytest.raises(InvalidRunnerIdError, match="author part is empty"):
        RunnerId("", "p", "r")


def test_a_runner_id_is_immutable_and_hashable() -> None:
    """Ids are frozen values usable as dict keys."""
    rid = RunnerId.parse("plugin:acme/helper/default")
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'runner'"):
        rid.runner = "other"  # pyright: ignore[reportAttributeAccessIssue]
    assert {rid: 1}[RunnerId("acme", "helper", "default")] == 1
