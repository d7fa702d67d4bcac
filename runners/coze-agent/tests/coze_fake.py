"""A loopback fake of Coze's v3 chat API (``/v3/chat`` SSE with ``event:x``/``data:{...}`` frames and the
``done`` "[DONE]" frame) and ``/v1/files/upload``, recording every request."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentrunner_http_kit.testing import FakePlatform, FakeResponse, RecordedRequest, sse_frame

SENTINEL_TOKEN = "pat_SENTINEL_coze_6d2b8e4f1a9c"


def frame(event: str, data: object) -> str:
    return sse_frame(data, event=event, space=False)


@dataclass
class CozeFake:
    """Scripted Coze behaviour over a :class:`FakePlatform`."""

    platform: FakePlatform
    failure: str | None = None
    """``chat_failed``, ``json_error``, ``json_auth``, ``401``, ``500``, ``slow``, ``hold``, ``requires_action``."""
    reasoning: bool = False
    """Send reasoning deltas before the answer."""
    conversations: list[str] = field(default_factory=list[str])
    uploads: list[str] = field(default_factory=list[str])

    def __post_init__(self) -> None:
        self.platform.route("POST", "/v3/chat", self._chat)
        self.platform.route("POST", "/v1/files/upload", self._upload)

    def _refuse(self, request: RecordedRequest) -> FakeResponse | None:
        if request.headers.get("authorization") != f"Bearer {SENTINEL_TOKEN}" or self.failure == "401":
            return FakeResponse.json({"code": 4100, "msg": "authentication is invalid"}, status=401)
        if self.failure == "500":
            return FakeResponse.json({"code": 5000, "msg": "internal error"}, status=500)
        if self.failure == "json_auth":
            return FakeResponse.json({"code": 4100, "msg": f"token {SENTINEL_TOKEN} invalid"})
        if self.failure == "json_error":
            return FakeResponse.json({"code": 4000, "msg": "the bot is not published"})
        return None

    def _chat(self, request: RecordedRequest) -> FakeResponse:
        refused = self._refuse(request)
        if refused is not None:
            return refused
        conversation = request.query.get("conversation_id") or f"c-{len(self.conversations) + 1}"
        self.conversations.append(conversation)
        chat = {"id": "chat-1", "conversation_id": conversation, "bot_id": "bot-1"}
        frames = [
            frame("conversation.chat.created", {**chat, "status": "created"}),
            frame("conversation.chat.in_progress", {**chat, "status": "in_progress"}),
        ]
        if self.reasoning:
            for piece in ("think ", "hard"):
                frames.append(
                    frame(
                        "conversation.message.delta",
                        {
                            **chat,
                            "role": "assistant",
                            "type": "answer",
                            "content": "",
                            "reasoning_content": piece,
                            "content_type": "text",
                        },
                    )
                )
        frames.append(
            frame(
                "conversation.message.completed",
                {
                    **chat,
                    "id": "m-f",
                    "role": "assistant",
                    "type": "function_call",
                    "content": '{"name": "weather", "arguments": {"city": "x"}}',
                    "content_type": "text",
                },
            )
        )
        frames.append(
            frame(
                "conversation.message.completed",
                {
                    **chat,
                    "id": "m-t",
                    "role": "assistant",
                    "type": "tool_response",
                    "content": "sunny",
                    "content_type": "text",
                },
            )
        )
        frames.append(frame("conversation.audio.delta", {"brand": "new"}))
        for piece in ("Hi ", "from ", "Coze"):
            frames.append(
                frame(
                    "conversation.message.delta",
                    {**chat, "role": "assistant", "type": "answer", "content": piece, "content_type": "text"},
                )
            )
        if self.failure == "chat_failed":
            frames.append(
                frame(
                    "conversation.chat.failed",
                    {**chat, "status": "failed", "last_error": {"code": 4011, "msg": "quota exhausted"}},
                )
            )
        if self.failure == "requires_action":
            frames.append(frame("conversation.chat.requires_action", {**chat, "status": "requires_action"}))
        frames.append(
            frame(
                "conversation.message.completed",
                {
                    **chat,
                    "id": "m-a",
                    "role": "assistant",
                    "type": "answer",
                    "content": "Hi from Coze",
                    "content_type": "text",
                },
            )
        )
        frames.append(
            frame(
                "conversation.message.completed",
                {
                    **chat,
                    "id": "m-v",
                    "role": "assistant",
                    "type": "verbose",
                    "content": "{}",
                    "content_type": "text",
                },
            )
        )
        frames.append(
            frame(
                "conversation.message.completed",
                {
                    **chat,
                    "id": "m-u",
                    "role": "assistant",
                    "type": "follow_up",
                    "content": "Tell me more?",
                    "content_type": "text",
                },
            )
        )
        usage = {"token_count": 30, "output_count": 10, "input_count": 20}
        frames.append(frame("conversation.chat.completed", {**chat, "status": "completed", "usage": usage}))
        frames.append(frame("done", '"[DONE]"'))
        if self.failure == "slow":
            return FakeResponse.sse(frames, delay=30)
        if self.failure == "hold":
            return FakeResponse.sse(frames[:3], hold=True)
        return FakeResponse.sse(frames)

    async def _upload(self, request: RecordedRequest) -> FakeResponse:
        refused = self._refuse(request)
        if refused is not None:
            return refused
        form = await request.form()
        file = form.files["file"]
        file_id = f"file-{len(self.uploads) + 1}"
        self.uploads.append(file_id)
        return FakeResponse.json(
            {
                "code": 0,
                "msg": "",
                "data": {"id": file_id, "file_name": file.filename, "bytes": len(file.data)},
            }
        )
