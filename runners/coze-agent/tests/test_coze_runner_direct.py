"""The Coze runner driven directly (a fake host from ``agentrunner.testing``): URL inputs and a refused upload."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator

import pytest
from agentrunner import RunFailedResult
from agentrunner.testing import FakeHost
from agentrunner_http_kit.testing import FakePlatform, FakeResponse, run_context
from agentrunner_runner_coze import CozeRunner
from coze_fake import SENTINEL_TOKEN, CozeFake


@pytest.fixture
async def coze() -> AsyncIterator[CozeFake]:
    async with FakePlatform() as platform:
        yield CozeFake(platform)


def _config(coze: CozeFake) -> dict[str, object]:
    return {"api-base": coze.platform.base_url, "api-key": SENTINEL_TOKEN, "bot-id": "bot-1"}


async def test_a_url_image_is_sent_as_file_url(coze: CozeFake) -> None:
    ctx = run_context(
        config=_config(coze), text="", contents=[{"type": "image", "url": "https://images.example/cat.png"}]
    )
    results = [r async for r in CozeRunner().run(ctx, FakeHost().api(ctx))]
    assert results[-1].type == "run.completed"
    message = coze.platform.requests_to("/v3/chat")[0].json()["additional_messages"][0]
    assert message["content_type"] == "object_string"
    assert json.loads(message["content"]) == [{"type": "image", "file_url": "https://images.example/cat.png"}]


async def test_a_refused_upload_fails_before_the_chat(coze: CozeFake) -> None:
    coze.platform.route(
        "POST", "/v1/files/upload", FakeResponse.json({"code": 4000, "msg": "file too large"})
    )
    ctx = run_context(
        config=_config(coze), contents=[{"type": "image", "artifact": {"artifact_id": "art-1"}}]
    )
    host = FakeHost()
    data = base64.b64encode(b"\x89PNG....").decode()
    chunk = {
        "artifact_id": "art-1",
        "offset": 0,
        "length": 8,
        "size": 8,
        "data_base64": data,
        "mime_type": "image/png",
    }
    host.on("artifacts.read_range", lambda request: chunk)
    results = [r async for r in CozeRunner().run(ctx, host.api(ctx))]
    [failed] = results
    assert isinstance(failed, RunFailedResult)
    assert failed.data.code == "coze.api_error" and "file too large" in failed.data.message
    assert coze.platform.requests_to("/v3/chat") == []
