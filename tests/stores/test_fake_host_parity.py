"""``agentrunner.testing.FakeHost`` answers state calls as the real host's pull API does: the same script of
calls gives the same values, versions and errors (code and details) on both."""

from __future__ import annotations

from typing import Any

from agentrunner import APIError
from agentrunner.actions import StateDeleteParams, StateGetParams, StateListParams, StateSetParams
from agentrunner.testing import FakeHost, make_context
from agentrunner_host.access import ConversationKey, StateOwner
from agentrunner_host.facts_api import PullAPI

from .helpers import access

# (action, params) in order; covers create-only CAS, a lost CAS, update at a version, delete, a missing
# key's CAS, an oversized value and an ungranted scope.
SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("state.get", {"scope": "conversation", "key": "k"}),
    ("state.set", {"scope": "conversation", "key": "k", "value": {"a": 1}, "expected_version": 0}),
    ("state.set", {"scope": "conversation", "key": "k", "value": {"a": 2}, "expected_version": 0}),
    ("state.set", {"scope": "conversation", "key": "k", "value": {"a": 2}, "expected_version": 1}),
    ("state.set", {"scope": "conversation", "key": "k", "value": {"a": 3}, "expected_version": 1}),
    ("state.set", {"scope": "conversation", "key": "k", "value": {"a": 3}}),
    ("state.get", {"scope": "conversation", "key": "k"}),
    ("state.set", {"scope": "conversation", "key": "absent", "value": 1, "expected_version": 4}),
    ("state.set", {"scope": "conversation", "key": "big", "value": "x" * 300_000}),
    ("state.list", {"scope": "conversation"}),
    ("state.delete", {"scope": "conversation", "key": "k"}),
    ("state.get", {"scope": "conversation", "key": "k"}),
    ("state.set", {"scope": "conversation", "key": "k", "value": 5, "expected_version": 0}),
    ("state.get", {"scope": "workspace", "key": "k"}),
]

_PARAMS = {
    "state.get": StateGetParams,
    "state.set": StateSetParams,
    "state.delete": StateDeleteParams,
    "state.list": StateListParams,
}


def _outcome(answer: dict[str, Any] | APIError) -> Any:
    if isinstance(answer, APIError):
        details = {k: v for k, v in answer.details.items() if k != "size"}
        return ("error", answer.code, details)
    # Timestamps differ between the two; everything else must not.
    if "items" in answer:
        return [(i["key"], i["version"]) for i in answer["items"]]
    return answer


async def test_the_fake_host_answers_state_calls_like_the_host(pull: PullAPI) -> None:
    """Value, version, exists and every error code/details agree, call by call."""
    real_access = access(
        ConversationKey("c1"),
        state_owners={"conversation": StateOwner("conversation", ("acme/echo:echo", "b1", "c1", ""))},
    )
    fake = FakeHost(state_scopes=["conversation"])
    api = fake.api(make_context(conversation_id="c1"))
    real: list[Any] = []
    doubled: list[Any] = []
    for action, params in SCRIPT:
        model = _PARAMS[action].model_validate(params)
        method = getattr(pull, action.replace(".", "_"))
        try:
            answer: dict[str, Any] | APIError = (await method(real_access, model)).model_dump(mode="json")
        except APIError as exc:
            answer = exc
        real.append(_outcome(answer))
        try:
            answer = await api.call_raw(action, params)
        except APIError as exc:
            answer = exc
        doubled.append(_outcome(answer))
    for step, (action_params, want, got) in enumerate(zip(SCRIPT, real, doubled, strict=True)):
        assert got == want, f"step {step} {action_params[0]}: host {want!r}, FakeHost {got!r}"
