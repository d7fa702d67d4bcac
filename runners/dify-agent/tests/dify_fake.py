"""A loopback fake of Dify's service API (``/v1/chat-messages``, ``/v1/workflows/run``, ``/v1/files/upload``),
answering with the event sequences Dify documents for each app type and recording every request."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from agentrunner_http_kit.testing import FakePlatform, FakeResponse, RecordedRequest, sse_frame

SENTINEL_KEY = "app-SENTINEL-dify-7f3a9c1e5b"
"""The API key the tests configure; it must never appear in errors, logs or transcripts."""


@dataclass
class DifyFake:
    """Scripted Dify behaviour over a :class:`FakePlatform`."""

    platform: FakePlatform
    mode: str = "chat"
    """``chat``, ``agent``, ``chatflow`` or ``workflow``: which event sequence to send."""
    failure: str | None = None
    """``error_event``, ``401``, ``500``, ``slow`` or ``hold`` (send one chunk, then keep the stream open)."""
    pieces: list[str] = field(default_factory=lambda: ["Hel", "lo ", "there"])
    """Answer pieces."""
    conversations: set[str] = field(default_factory=set[str])
    """Conversation ids this fake knows."""
    uploads: list[str] = field(default_factory=list[str])
    """Ids of uploaded files."""

    def __post_init__(self) -> None:
        self.platform.route("POST", "/v1/chat-messages", self._chat)
        self.platform.route("POST", "/v1/workflows/run", self._workflow)
        self.platform.route("POST", "/v1/files/upload", self._upload)

    @property
    def base_url(self) -> str:
        return self.platform.base_url + "/v1"

    def _refuse(self, request: RecordedRequest) -> FakeResponse | None:
        if request.headers.get("authorization") != f"Bearer {SENTINEL_KEY}":
            return FakeResponse.json(
                {"code": "unauthorized", "message": "Access token is invalid", "status": 401}, status=401
            )
        if self.failure == "401":
            return FakeResponse.json(
                {"code": "unauthorized", "message": f"Access token {SENTINEL_KEY} is invalid", "status": 401},
                status=401,
            )
        if self.failure == "500":
            return FakeResponse.json(
                {"code": "internal_server_error", "message": "boom", "status": 500}, status=500
            )
        return None

    def _frames(self, frames: list[str]) -> FakeResponse:
        if self.failure == "slow":
            return FakeResponse.sse(frames, delay=30)
        if self.failure == "hold":
            return FakeResponse.sse(frames[:2], hold=True)
        return FakeResponse.sse(frames)

    def _chat(self, request: RecordedRequest) -> FakeResponse:
        refused = self._refuse(request)
        if refused is not None:
            return refused
        body = request.json()
        conversation = body.get("conversation_id") or ""
        if conversation and conversation not in self.conversations:
            return FakeResponse.json(
                {"code": "not_found", "message": "Conversation Not Exists.", "status": 404}, status=404
            )
        conversation = conversation or str(uuid.uuid4())
        self.conversations.add(conversation)
        ids = {"conversation_id": conversation, "message_id": "m-1", "task_id": "t-1"}
        frames = [sse_frame({"event": "ping"})]
        if self.mode == "chatflow":
            frames.append(sse_frame({"event": "workflow_started", **ids, "data": {"id": "wr-1"}}))
            frames.append(
                sse_frame(
                    {
                        "event": "node_started",
                        **ids,
                        "data": {"node_id": "n-llm", "node_type": "llm", "title": "LLM"},
                    }
                )
            )
        if self.mode == "agent":
            frames.append(
                sse_frame(
                    {
                        "event": "agent_thought",
                        **ids,
                        "id": "th-1",
                        "thought": "",
                        "tool": "search",
                        "tool_input": '{"q": "x"}',
                        "observation": "",
                    }
                )
            )
            frames.append(
                sse_frame(
                    {
                        "event": "agent_thought",
                        **ids,
                        "id": "th-1",
                        "thought": "",
                        "tool": "search",
                        "tool_input": '{"q": "x"}',
                        "observation": "found",
                    }
                )
            )
        event = "agent_message" if self.mode == "agent" else "message"
        frames.append(sse_frame({"event": "brand_new_event", "x": 1}))
        frames += [sse_frame({"event": event, **ids, "answer": piece}) for piece in self.pieces]
        if self.failure == "error_event":
            frames.append(
                sse_frame(
                    {
                        "event": "error",
                        **ids,
                        "status": 400,
                        "code": "invalid_param",
                        "message": "model quota exceeded",
                    }
                )
            )
        if self.mode == "agent":
            frames.append(
                sse_frame(
                    {
                        "event": "message_file",
                        **ids,
                        "id": "f-1",
                        "type": "image",
                        "belongs_to": "assistant",
                        "url": "/files/tools/f-1.png",
                    }
                )
            )
        if self.mode == "chatflow":
            answer = "".join(self.pieces)
            frames.append(
                sse_frame(
                    {
                        "event": "node_finished",
                        **ids,
                        "data": {
                            "node_id": "n-llm",
                            "node_type": "llm",
                            "title": "LLM",
                            "status": "succeeded",
                        },
                    }
                )
            )
            frames.append(
                sse_frame(
                    {
                        "event": "node_finished",
                        **ids,
                        "data": {"node_id": "n-ans", "node_type": "answer", "outputs": {"answer": answer}},
                    }
                )
            )
            frames.append(
                sse_frame(
                    {
                        "event": "workflow_finished",
                        **ids,
                        "data": {"status": "succeeded", "outputs": {"answer": answer}},
                    }
                )
            )
        usage = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
        frames.append(sse_frame({"event": "message_end", **ids, "metadata": {"usage": usage}}))
        return self._frames(frames)

    def _workflow(self, request: RecordedRequest) -> FakeResponse:
        refused = self._refuse(request)
        if refused is not None:
            return refused
        run = {"workflow_run_id": "wr-1", "task_id": "t-1"}
        frames = [
            sse_frame({"event": "workflow_started", **run, "data": {"id": "wr-1"}}),
            sse_frame(
                {
                    "event": "node_started",
                    **run,
                    "data": {"node_id": "n-start", "node_type": "start", "title": "Start"},
                }
            ),
            sse_frame(
                {
                    "event": "node_started",
                    **run,
                    "data": {"node_id": "n-llm", "node_type": "llm", "title": "LLM"},
                }
            ),
            sse_frame({"event": "ping"}),
        ]
        frames += [sse_frame({"event": "text_chunk", **run, "data": {"text": p}}) for p in self.pieces]
        frames.append(
            sse_frame(
                {
                    "event": "node_finished",
                    **run,
                    "data": {"node_id": "n-llm", "node_type": "llm", "title": "LLM", "status": "succeeded"},
                }
            )
        )
        if self.failure == "error_event":
            frames.append(
                sse_frame(
                    {
                        "event": "workflow_finished",
                        **run,
                        "data": {"status": "failed", "error": "node crashed", "outputs": None},
                    }
                )
            )
        else:
            frames.append(
                sse_frame(
                    {
                        "event": "workflow_finished",
                        **run,
                        "data": {
                            "status": "succeeded",
                            "outputs": {"result": "".join(self.pieces)},
                            "total_tokens": 12,
                        },
                    }
                )
            )
        return self._frames(frames)

    async def _upload(self, request: RecordedRequest) -> FakeResponse:
        refused = self._refuse(request)
        if refused is not None:
            return refused
        form = await request.form()
        upload = form.files["file"]
        file_id = f"file-{len(self.uploads) + 1}"
        self.uploads.append(file_id)
        answer = {
            "id": file_id,
            "name": upload.filename,
            "size": len(upload.data),
            "extension": "png",
            "mime_type": upload.content_type,
        }
        return FakeResponse.json(answer, status=201)
