"""A loopback fake of an n8n workflow webhook: one route per auth mode (none, basic, JWT, header), answering
as n8n's Webhook / Respond-to-Webhook nodes do (a JSON body, all items as a list, plain text, or the
"Streaming" response mode's begin/item/end objects split across writes) and recording every request."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

import jwt
from agentrunner_http_kit.testing import FakePlatform, FakeResponse, RecordedRequest

SENTINEL_PASSWORD = "n8n-SENTINEL-pass-4c2e9a"
SENTINEL_JWT_SECRET = "n8n-SENTINEL-jwt-secret-8b1d6f0a2c"
SENTINEL_HEADER_VALUE = "n8n-SENTINEL-header-3e7a5d"
USER = "bot"
HEADER_NAME = "X-N8N-Key"


def _dumps(value: object) -> str:
    return json.dumps(value)  # noqa: TID251 - the fake writes what n8n writes


@dataclass
class N8nFake:
    """Scripted webhook answers over a :class:`FakePlatform`."""

    platform: FakePlatform
    answer: str = "json"
    """``json``, ``json_nokey``, ``list``, ``text``, ``stream``, ``error_item``, ``500``, ``slow``, ``hold``."""
    reply: str = "Hello from n8n"

    def __post_init__(self) -> None:
        for mode in ("none", "basic", "jwt", "header"):
            self.platform.route("POST", f"/webhook/{mode}", self._handler(mode))

    def url(self, mode: str) -> str:
        return f"{self.platform.base_url}/webhook/{mode}"

    def _handler(self, mode: str):
        def handle(request: RecordedRequest) -> FakeResponse:
            refused = self._check(mode, request)
            return refused if refused is not None else self._respond()

        return handle

    def _check(self, mode: str, request: RecordedRequest) -> FakeResponse | None:
        header = request.headers.get("authorization", "")
        if mode == "basic":
            if not header:
                return FakeResponse.text("Authorization is required!", status=401)
            expected = base64.b64encode(f"{USER}:{SENTINEL_PASSWORD}".encode()).decode()
            if header != f"Basic {expected}":
                return FakeResponse.text("Authorization data is wrong!", status=403)
        elif mode == "jwt":
            if not header.startswith("Bearer "):
                return FakeResponse.text("No authorization token provided", status=401)
            try:
                claims = jwt.decode(header.removeprefix("Bearer "), SENTINEL_JWT_SECRET, algorithms=["HS256"])
            except jwt.PyJWTError:
                return FakeResponse.text("Authorization data is wrong!", status=403)
            if claims.get("sub") != "n8n-webhook" or "exp" not in claims:
                return FakeResponse.text("Authorization data is wrong!", status=403)
        elif mode == "header" and request.headers.get(HEADER_NAME.lower()) != SENTINEL_HEADER_VALUE:
            return FakeResponse.text("Authorization data is wrong!", status=403)
        return None

    def _stream(self, items: list[dict[str, object]], **options: object) -> FakeResponse:
        text = "".join(_dumps(item) + "\n" for item in items)
        # Cut at fixed offsets so objects (and the UTF-8 text inside them) straddle writes, as TCP may.
        chunks = [text[i : i + 7] for i in range(0, len(text), 7)]
        return FakeResponse(chunks=chunks, content_type="application/json; charset=utf-8", **options)  # type: ignore[arg-type]

    def _respond(self) -> FakeResponse:
        meta: dict[str, object] = {
            "nodeId": "n-1",
            "nodeName": "AI Agent",
            "itemIndex": 0,
            "runIndex": 0,
            "timestamp": 1,
        }
        pieces = ["Hello ", "from ", "n8n"]
        items: list[dict[str, object]] = [{"type": "begin", "metadata": meta}]
        items += [dict[str, object](type="item", content=p, metadata=meta) for p in pieces]
        match self.answer:
            case "json":
                return FakeResponse.json({"response": self.reply, "other": 1})
            case "json_nokey":
                return FakeResponse.json({"answer": self.reply})
            case "list":
                return FakeResponse.json([{"response": self.reply}])
            case "list_output":
                return FakeResponse.json([{"output": self.reply}])
            case "text":
                return FakeResponse.text(self.reply)
            case "stream":
                return self._stream([*items, {"type": "mystery", "x": 1}, {"type": "end", "metadata": meta}])
            case "error_item":
                return self._stream([*items, {"type": "error", "content": "node AI Agent failed"}])
            case "500":
                return FakeResponse.json({"message": "Error in workflow"}, status=500)
            case "slow":
                return FakeResponse.json({"response": self.reply}, delay=30)
            case "hold":
                return FakeResponse(chunks=[_dumps(items[0]) + "\n", _dumps(items[1]) + "\n"], hold=True)
            case other:
                raise AssertionError(other)
