"""Back-calls are dispatched from one table, action → handler, checked against ``agentrunner.actions.ACTIONS``."""

from __future__ import annotations

import dataclasses

import pytest
from agentrunner import ACTIONS
from agentrunner.actions import ActionSpec, EmptyParams, EmptyResult
from agentrunner_host.dispatcher import HANDLERS, check_handlers


def test_every_action_has_exactly_one_handler_of_its_kind() -> None:
    assert set(HANDLERS) == set(ACTIONS)
    for name, handler in HANDLERS.items():
        spec = ACTIONS[name]
        assert handler.params is spec.params, name
        assert (handler.stream is not None) == spec.streaming, name
        assert (handler.call is None) == spec.streaming, name
    check_handlers(HANDLERS, ACTIONS)


def test_an_action_without_a_handler_is_refused() -> None:
    actions = {**ACTIONS, "widgets.spin": ActionSpec("widgets.spin", EmptyParams, EmptyResult)}
    with pytest.raises(RuntimeError, match=r"widgets\.spin: no handler"):
        check_handlers(HANDLERS, actions)


def test_a_handler_without_an_action_is_refused() -> None:
    actions = {name: spec for name, spec in ACTIONS.items() if name != "state.get"}
    with pytest.raises(RuntimeError, match=r"state\.get: a handler for no action"):
        check_handlers(HANDLERS, actions)


def test_a_handler_of_the_wrong_kind_or_params_is_refused() -> None:
    handlers = dict(HANDLERS)
    handlers["models.invoke"] = dataclasses.replace(HANDLERS["models.stream"], action="models.invoke")
    with pytest.raises(RuntimeError, match=r"models\.invoke: the handler is not unary"):
        check_handlers(handlers, ACTIONS)
    handlers = dict(HANDLERS)
    handlers["state.get"] = dataclasses.replace(HANDLERS["state.list"], action="state.get")
    with pytest.raises(RuntimeError, match=r"state\.get: the handler does not take StateGetParams"):
        check_handlers(handlers, ACTIONS)
