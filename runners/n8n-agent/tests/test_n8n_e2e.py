"""The n8n runner through the real host (service + HTTP API) against a loopback fake of a workflow webhook."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agentrunner_http_kit.testing import FakePlatform, HostHarness, migrate_legacy
from agentrunner_runner_n8n import CONVERSATION_KEY, MANIFEST, RUNNER_ID, SESSION_KEY
from n8n_fake import (
    HEADER_NAME,
    SENTINEL_HEADER_VALUE,
    SENTINEL_JWT_SECRET,
    SENTINEL_PASSWORD,
    USER,
    N8nFake,
)

ENV = {"N8N_PW": SENTINEL_PASSWORD, "N8N_JWT": SENTINEL_JWT_SECRET, "N8N_HEADER": SENTINEL_HEADER_VALUE}
SENTINELS = (SENTINEL_PASSWORD, SENTINEL_JWT_SECRET, SENTINEL_HEADER_VALUE)


@pytest.fixture
async def n8n() -> AsyncIterator[N8nFake]:
    async with FakePlatform() as platform:
        yield N8nFake(platform)


def _config(fake: N8nFake, mode: str = "basic", **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"webhook-url": fake.url(mode), "auth-type": mode}
    if mode == "basic":
        config |= {"basic-username": USER, "basic-password": {"env": "N8N_PW"}}
    elif mode == "jwt":
        config |= {"jwt-secret": {"env": "N8N_JWT"}}
    elif mode == "header":
        config |= {"header-name": HEADER_NAME, "header-value": {"env": "N8N_HEADER"}}
    return config | extra


@pytest.fixture
async def host(tmp_path: Path, n8n: N8nFake) -> AsyncIterator[HostHarness]:
    async with HostHarness.open(
        tmp_path, runner_id=RUNNER_ID, runner_config=_config(n8n), environ=ENV
    ) as harness:
        yield harness


async def test_a_json_answer_without_streaming(host: HostHarness, n8n: N8nFake) -> None:
    reply = await host.send("hi there", params={"lang": "en", "chatInput": "not me"})
    assert reply.status == "completed", reply.run
    assert reply.text == "Hello from n8n" and reply.deltas == []
    [request] = n8n.platform.requests
    body = request.json()
    assert body["chatInput"] == body["message"] == body["user_message_text"] == "hi there"
    assert body["lang"] == "en"  # params are forwarded but never override the runner's keys
    assert body["session_id"] == body["sessionId"] and body["session_id"].startswith("n8n_session_")
    assert body["conversation_id"].startswith("n8n_conversation_")
    assert body["user_id"].startswith("user_")


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("json_nokey", '{"answer":"Hello from n8n"}'), ("list", "Hello from n8n"), ("text", "Hello from n8n")],
)
async def test_json_without_the_key_lists_and_text_bodies(
    host: HostHarness, n8n: N8nFake, answer: str, expected: str
) -> None:
    n8n.answer = answer
    reply = await host.send("hi")
    assert reply.status == "completed", reply.run
    assert reply.text == expected


async def test_list_answers_use_the_configured_output_key(tmp_path: Path, n8n: N8nFake) -> None:
    n8n.answer = "list_output"
    async with HostHarness.open(
        tmp_path, runner_id=RUNNER_ID, runner_config=_config(n8n, **{"output-key": "output"}), environ=ENV
    ) as host:
        reply = await host.send("hi")
    assert reply.text == "Hello from n8n"


async def test_a_streamed_answer_split_across_writes_arrives_as_increments(
    host: HostHarness, n8n: N8nFake
) -> None:
    n8n.answer = "stream"
    reply = await host.send("hi", stream=True)
    assert reply.status == "completed", reply.run
    assert reply.deltas == ["Hello ", "from ", "n8n"]  # an unknown item type was ignored
    assert reply.text == "Hello from n8n"


async def test_a_streamed_answer_without_streaming_delivery_is_one_message(
    host: HostHarness, n8n: N8nFake
) -> None:
    n8n.answer = "stream"
    reply = await host.send("hi")
    assert reply.text == "Hello from n8n" and reply.deltas == []


async def test_the_second_turn_reuses_the_session_ids(host: HostHarness, n8n: N8nFake) -> None:
    first = await host.send("one")
    second = await host.send("two")
    assert second.status == "completed"
    bodies = [r.json() for r in n8n.platform.requests]
    assert bodies[0]["sessionId"] == bodies[1]["sessionId"] == first.state_updates[SESSION_KEY]
    assert (
        bodies[0]["conversation_id"] == bodies[1]["conversation_id"] == first.state_updates[CONVERSATION_KEY]
    )
    assert second.state_updates == {}


async def test_an_error_item_fails_the_run(host: HostHarness, n8n: N8nFake) -> None:
    n8n.answer = "error_item"
    reply = await host.send("hi", stream=True)
    assert reply.code == "n8n.api_error"
    assert reply.failure is not None and "node AI Agent failed" in reply.failure["message"]
    assert reply.state_updates == {}  # ids are written only on success


@pytest.mark.parametrize("mode", ["basic", "jwt", "header"])
async def test_each_auth_mode_is_accepted(tmp_path: Path, n8n: N8nFake, mode: str) -> None:
    async with HostHarness.open(
        tmp_path, runner_id=RUNNER_ID, runner_config=_config(n8n, mode), environ=ENV
    ) as host:
        reply = await host.send("hi")
    assert reply.status == "completed", reply.run


async def test_missing_and_wrong_credentials_are_auth_errors_and_never_echoed(
    tmp_path: Path, n8n: N8nFake, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = {**ENV, "N8N_PW": "wrong-password", "N8N_JWT": "wrong-jwt-secret-0000000000000000"}
    async with HostHarness.open(
        tmp_path,
        runner_id=RUNNER_ID,
        runner_config=_config(n8n, "none", **{"webhook-url": n8n.url("basic")}),
        environ=wrong,
    ) as host:
        missing = await host.send("hi")
        await host.put_agent(RUNNER_ID, _config(n8n, "basic"))
        bad_basic = await host.send("hi")
        await host.put_agent(RUNNER_ID, _config(n8n, "jwt"))
        bad_jwt = await host.send("hi")
        await host.put_agent(RUNNER_ID, _config(n8n, "header", **{"header-name": "X-Other"}))
        bad_header = await host.send("hi")
        transcript = await host.transcript()
    assert missing.code == "n8n.auth_error" and missing.failure is not None
    assert missing.failure["details"]["status"] == 401
    for reply in (bad_basic, bad_jwt, bad_header):
        assert reply.code == "n8n.auth_error" and reply.failure is not None
        assert reply.failure["details"]["status"] == 403
        assert "Authorization data is wrong!" in reply.failure["message"]
    for seen in (
        missing.dump(),
        bad_basic.dump(),
        bad_jwt.dump(),
        bad_header.dump(),
        caplog.text,
        transcript,
    ):
        for secret in (*SENTINELS, "wrong-password", "wrong-jwt-secret-0000000000000000"):
            assert secret not in seen


async def test_500_and_404(host: HostHarness, n8n: N8nFake, tmp_path: Path) -> None:
    n8n.answer = "500"
    failed = await host.send("hi")
    assert failed.code == "n8n.http_error"
    assert failed.failure is not None and failed.failure["retryable"] is True
    await host.put_agent(
        RUNNER_ID, _config(n8n, "basic", **{"webhook-url": n8n.platform.base_url + "/webhook/gone"})
    )
    missing = await host.send("hi")
    assert missing.code == "n8n.http_error" and missing.failure is not None
    assert missing.failure["retryable"] is False and "workflow active" in missing.failure["message"]


async def test_a_reply_slower_than_the_timeout_fails_timeout(tmp_path: Path, n8n: N8nFake) -> None:
    n8n.answer = "slow"
    async with HostHarness.open(
        tmp_path, runner_id=RUNNER_ID, runner_config=_config(n8n, timeout=1), environ=ENV
    ) as host:
        reply = await host.send("hi")
    assert reply.code == "n8n.timeout"
    assert reply.failure is not None and reply.failure["retryable"] is True


async def test_missing_required_config_fails_before_any_request(tmp_path: Path, n8n: N8nFake) -> None:
    """What the form states is refused by the API (admission) and, stored past it, by the runner; what
    depends on another field (a header auth's value) only the runner can refuse."""
    oauth = {"webhook-url": n8n.url("none"), "auth-type": "oauth"}
    async with HostHarness.open(
        tmp_path, runner_id=RUNNER_ID, runner_config={"auth-type": "none"}, environ=ENV, admitted=False
    ) as host:
        refused_url = await host.refused_agent(RUNNER_ID, {"auth-type": "none"})
        refused_type = await host.refused_agent(RUNNER_ID, oauth)
        no_url = await host.send("hi")
        await host.put_agent(
            RUNNER_ID, {"webhook-url": n8n.url("header"), "auth-type": "header", "header-name": HEADER_NAME}
        )
        no_value = await host.send("hi")
        await host.put_agent(RUNNER_ID, oauth, admitted=False)
        bad_type = await host.send("hi")
    assert "runner_config.webhook-url: " in refused_url["message"]
    assert "runner_config.auth-type: expected one of none" in refused_type["message"]
    assert no_url.code == no_value.code == bad_type.code == "n8n.config_invalid"
    assert no_url.failure is not None and "'webhook-url'" in no_url.failure["message"]
    assert no_value.failure is not None and "'header-value'" in no_value.failure["message"]
    assert bad_type.failure is not None and "'auth-type'" in bad_type.failure["message"]
    assert n8n.platform.requests == []


async def test_cancelling_mid_stream_closes_the_connection(host: HostHarness, n8n: N8nFake) -> None:
    n8n.answer = "hold"
    run_id = await host.submit("hi")
    await n8n.platform.streaming.wait()
    await host.cancel(run_id)
    await n8n.platform.disconnected.wait()
    reply = await host.reply(run_id)
    assert reply.status == "failed" and reply.code == "cancelled"


async def test_a_legacy_n8n_pipeline_migrates_starts_and_answers(tmp_path: Path, n8n: N8nFake) -> None:
    legacy = {
        "ai": {
            "runner": {"runner": "n8n-service-api"},
            "n8n-service-api": {
                "webhook-url": n8n.url("header"),
                "auth-type": "header",
                "header-name": HEADER_NAME,
                "header-value": SENTINEL_HEADER_VALUE,
                "timeout": 120,
                "output-key": "response",
            },
        }
    }
    agent = migrate_legacy(legacy, MANIFEST)
    assert agent.runner_id == RUNNER_ID
    assert agent.runner_config["header-value"] == {"env": "N8N_AGENT_HEADER_VALUE"}
    assert agent.runner_config["auth-type"] == "header"  # a literal: the schema says it is not secret
    async with HostHarness.open(
        tmp_path, runner_id=agent.runner_id, runner_config=agent.runner_config, environ=agent.variables
    ) as host:
        reply = await host.send("hello from a legacy pipeline")
    assert reply.status == "completed", reply.run
    assert reply.text == "Hello from n8n"
