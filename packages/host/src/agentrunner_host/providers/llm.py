"""OpenAI-compatible models behind ``models.invoke`` / ``models.stream`` / ``models.rerank``.

Each model is configured by id (:class:`ModelConfig`): base URL, the provider's model name, the *name* of the
environment variable holding its API key, capabilities and limits. :class:`OpenAICompatibleModels` serves
them over plain HTTP (``httpx2``, whose built-in SSE reader handles streaming):

* chat completions (``POST {base}/chat/completions``), streamed or not, with OpenAI function tools; streamed
  tool-call fragments are assembled and handed out complete in the last chunk;
* images: an ``http(s)`` URL passes through as ``image_url``; an artifact-ref image is read from the artifact
  store (only when the run may read it) and sent as a ``data:`` URL. Base64 exists only on the provider
  wire, never in the protocol;
* rerank (``POST {base}/rerank`` in the Jina/Cohere/vLLM shape).

Upstream failures become the protocol's error codes (docs/providers.md has the table): 400/422 ``invalid_argument``, 401/403 ``model.auth_failed`` (not the
host's ``unauthorized``, which means "outside this run's grant"), 404
``not_found``, 413 ``payload_too_large``, 429 ``rate_limited``, timeouts and 5xx ``runtime_error``
(retryable). The API key never appears in a message or a log line: upstream text is scrubbed of it.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

import httpx2
from agentrunner import (
    APIError,
    ChatMessage,
    ImageContent,
    InvalidArgumentError,
    ModelAuthFailedError,
    ModelResource,
    ModelResponse,
    ModelStreamChunk,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    RerankResult,
    RuntimeAPIError,
    TextContent,
)
from agentrunner import codec as json
from agentrunner.actions import ModelInvokeParams, ModelRerankParams
from agentrunner.api_types import ModelToolCall, ModelUsage, RerankItem
from agentrunner.codec import JsonObject
from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from agentrunner_host.access import RunAccess
from agentrunner_host.stores.artifacts import ArtifactRecord, ArtifactStore

__all__ = [
    "DEFAULT_MAX_IMAGE_BYTES",
    "RESERVED_REQUEST_KEYS",
    "ModelCapability",
    "ModelConfig",
    "OpenAICompatibleModels",
]

log = logging.getLogger("agentrunner.host.models")

ModelCapability = Literal["vision", "tool_calling", "streaming"]

DEFAULT_MAX_IMAGE_BYTES: Final = 20 * 1024 * 1024
"""Largest artifact image sent to a provider (OpenAI's own limit)."""

RESERVED_REQUEST_KEYS: Final = frozenset({"model", "messages", "stream", "stream_options", "tools", "n"})
"""Request keys only the host sets: ``extra_args`` may not override them (a runner must not switch the
configured model, nor ask for several choices)."""

_ERROR_TEXT_LIMIT: Final = 300


class ModelConfig(BaseModel):
    """One configured model (LLM or reranker) of an OpenAI-compatible API."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    id: str = Field(min_length=1, max_length=200)
    """Model id runners see (``ModelResource.model_id``); opaque to them."""
    base_url: str
    """API base, e.g. ``https://api.openai.com/v1`` (``/chat/completions`` and ``/rerank`` are appended)."""
    model: str = Field(min_length=1)
    """The provider's model name sent as ``model``."""
    model_type: Literal["llm", "rerank"] = "llm"
    """``llm`` (chat completions) or ``rerank``."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key; ``None`` sends no key."""
    api_key_header: str = "Authorization"
    """Header carrying the key (``api-key`` for Azure OpenAI)."""
    api_key_prefix: str = "Bearer "
    """Text before the key in that header (empty for Azure OpenAI)."""
    provider: str | None = None
    """Provider name, for display."""
    label: str | None = None
    """Display name; defaults to ``model``."""
    capabilities: list[ModelCapability] = []
    """What the model supports; images need ``vision``, tools need ``tool_calling``."""
    context_window: int | None = Field(default=None, ge=1)
    """Context window in tokens (reported to runners for their own budgeting)."""
    max_output_tokens: int | None = Field(default=None, ge=1)
    """Output cap in tokens (reported to runners)."""
    extra_args: dict[str, JsonValue] = {}
    """Request fields merged into every call (``temperature``...); a call's own ``extra_args`` win."""
    timeout_seconds: float = Field(default=60.0, gt=0)
    """Per-request timeout (connect, and each read of a stream)."""
    headers: dict[str, str] = {}
    """Extra non-secret request headers."""
    stream_usage: bool = True
    """Ask for usage in streams (``stream_options.include_usage``); turn off for servers that reject it."""

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("base_url must be an http(s) URL")
        return value.rstrip("/")

    @field_validator("extra_args")
    @classmethod
    def _no_reserved(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        reserved = sorted(RESERVED_REQUEST_KEYS & value.keys())
        if reserved:
            raise ValueError(f"extra_args may not set {', '.join(reserved)}")
        return value

    def resource(self) -> ModelResource:
        """The catalog entry of this model (operations are granted per run by the snapshot)."""
        return ModelResource(
            model_id=self.id,
            model_type=self.model_type,
            provider=self.provider,
            name=self.label or self.model,
            capabilities=list(self.capabilities),
            context_window=self.context_window,
            max_output_tokens=self.max_output_tokens,
        )


@dataclass(slots=True)
class _PendingToolCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list[str])


class OpenAICompatibleModels:
    """A :class:`~agentrunner_host.providers.protocols.ModelProvider` over OpenAI-compatible HTTP APIs.

    Close it with :meth:`aclose` (it owns one pooled HTTP client).
    """

    def __init__(
        self,
        models: Iterable[ModelConfig],
        *,
        artifacts: ArtifactStore | None = None,
        environ: Mapping[str, str] | None = None,
        max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self.models: dict[str, ModelConfig] = {}
        """Configured models by id."""
        for model in models:
            if model.id in self.models:
                raise ValueError(f"model id {model.id!r} is configured twice")
            self.models[model.id] = model
        self._artifacts = artifacts
        self._environ = os.environ if environ is None else environ
        self._max_image_bytes = max_image_bytes
        self._client = httpx2.AsyncClient(transport=transport, follow_redirects=False)

    def resources(self) -> list[ModelResource]:
        """Catalog entries for :class:`~agentrunner_host.catalog.ResourceCatalog`."""
        return [m.resource() for m in self.models.values()]

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()

    # -- ModelProvider ---------------------------------------------------------------------------------------

    async def invoke(
        self, model: ModelResource, params: ModelInvokeParams, *, access: RunAccess
    ) -> ModelResponse:
        """One chat completion."""
        config = self._config(model.model_id, "llm")
        body = await self._chat_body(config, params, access=access, stream=False)
        data = await self._post_json(config, "/chat/completions", body)
        return _to_response(config, data)

    async def stream(
        self, model: ModelResource, params: ModelInvokeParams, *, access: RunAccess
    ) -> AsyncIterator[ModelStreamChunk]:
        """A streamed chat completion: text deltas, then one last chunk with tool calls, finish and usage.

        A model configured without ``streaming`` is invoked once and answered as a single chunk.
        """
        config = self._config(model.model_id, "llm")
        if "streaming" not in config.capabilities:
            yield _single_chunk(await self.invoke(model, params, access=access))
            return
        body = await self._chat_body(config, params, access=access, stream=True)
        pending: dict[int, _PendingToolCall] = {}
        finish_reason: str | None = None
        usage: ModelUsage | None = None
        done = False
        try:
            async with self._client.sse(
                self._url(config, "/chat/completions"),
                method="POST",
                json=body,
                headers=self._headers(config),
                timeout=_timeout(config),
            ) as source:
                response = source.response
                if response.status_code >= 400:
                    await response.aread()
                    raise _status_error(config, response, self._key(config))
                if not _is_event_stream(response):
                    # some compatible servers ignore "stream": take their whole answer as the one chunk
                    await response.aread()
                    yield _single_chunk(_to_response(config, _decode(config, response)))
                    return
                async for event in source:
                    if event.data.strip() == "[DONE]":
                        done = True
                        break
                    try:
                        decoded: JsonValue = json.loads(event.data)
                    except ValueError:
                        raise RuntimeAPIError(
                            f"model {config.id!r} streamed a malformed chunk", retryable=True
                        ) from None
                    chunk = _obj(decoded)  # a chunk that is not an object carries nothing: skipped
                    usage = _usage(chunk.get("usage")) or usage
                    for choice in map(_obj, _items(chunk.get("choices"))):
                        if choice.get("index", 0) != 0:
                            continue
                        delta = _obj(choice.get("delta"))
                        for fragment in _items(delta.get("tool_calls")):
                            _merge_fragment(pending, fragment)
                        text = delta.get("content")
                        finish_reason = _str(choice.get("finish_reason")) or finish_reason
                        if isinstance(text, str) and text:
                            yield ModelStreamChunk(delta=text)
        except httpx2.TimeoutException:
            raise RuntimeAPIError(f"model {config.id!r} timed out", retryable=True) from None
        except httpx2.HTTPError as exc:
            raise _transport_error(config, exc) from None
        if not done and finish_reason is None:
            # neither [DONE] nor a finish reason: the answer was cut off, not finished
            raise RuntimeAPIError(
                f"model {config.id!r} ended its stream before the answer was complete", retryable=True
            )
        calls = [
            _tool_call(
                config,
                {"id": p.id, "function": {"name": p.name, "arguments": "".join(p.arguments)}},
            )
            for _, p in sorted(pending.items())
        ]
        yield ModelStreamChunk(tool_calls=calls, finish_reason=finish_reason or "stop", usage=usage)

    async def rerank(
        self, model: ModelResource, params: ModelRerankParams, *, access: RunAccess
    ) -> RerankResult:
        """Rank documents against a query, best first."""
        config = self._config(model.model_id, "rerank")
        if not params.documents:
            return RerankResult()
        body: JsonObject = {
            **config.extra_args,
            "model": config.model,
            "query": params.query,
            "documents": [*params.documents],
            "top_n": params.top_k or len(params.documents),
        }
        data = await self._post_json(config, "/rerank", body)
        if not isinstance(data.get("results"), list):
            raise RuntimeAPIError(f"rerank model {config.id!r} returned no results", retryable=True)
        items: list[RerankItem] = []
        for entry in map(_obj, _items(data.get("results"))):
            index = entry.get("index")
            score = entry.get("relevance_score", entry.get("score"))
            if not isinstance(index, int) or not 0 <= index < len(params.documents):
                raise RuntimeAPIError(f"rerank model {config.id!r} returned an invalid document index")
            if not isinstance(score, int | float):
                raise RuntimeAPIError(f"rerank model {config.id!r} returned a result without a score")
            items.append(RerankItem(index=index, score=float(score), document=params.documents[index]))
        items.sort(key=lambda item: item.score, reverse=True)
        if params.top_k is not None:
            items = items[: params.top_k]
        return RerankResult(results=items)

    # -- requests --------------------------------------------------------------------------------------------

    def _config(self, model_id: str, kind: Literal["llm", "rerank"]) -> ModelConfig:
        config = self.models.get(model_id)
        if config is None:
            raise NotFoundError(f"model {model_id!r} is not configured on this host")
        if config.model_type != kind:
            what = "a rerank model" if config.model_type == "rerank" else "a chat model"
            raise InvalidArgumentError(f"model {model_id!r} is {what}")
        return config

    def _key(self, config: ModelConfig) -> str | None:
        if config.api_key_env is None:
            return None
        key = self._environ.get(config.api_key_env)
        if not key:
            raise RuntimeAPIError(
                f"model {config.id!r} has no API key: environment variable {config.api_key_env} is not set"
            )
        return key

    def _headers(self, config: ModelConfig) -> dict[str, str]:
        headers = dict(config.headers)
        key = self._key(config)
        if key is not None:
            headers[config.api_key_header] = f"{config.api_key_prefix}{key}"
        return headers

    @staticmethod
    def _url(config: ModelConfig, path: str) -> str:
        return config.base_url + path

    async def _post_json(self, config: ModelConfig, path: str, body: JsonObject) -> JsonObject:
        headers = self._headers(config)
        try:
            response = await self._client.post(
                self._url(config, path), json=body, headers=headers, timeout=_timeout(config)
            )
        except httpx2.TimeoutException:
            raise RuntimeAPIError(f"model {config.id!r} timed out", retryable=True) from None
        except httpx2.HTTPError as exc:
            raise _transport_error(config, exc) from None
        if response.status_code >= 400:
            raise _status_error(config, response, self._key(config))
        return _decode(config, response)

    async def _chat_body(
        self, config: ModelConfig, params: ModelInvokeParams, *, access: RunAccess, stream: bool
    ) -> JsonObject:
        overrides = dict(params.extra_args or {})
        reserved = sorted(RESERVED_REQUEST_KEYS & overrides.keys())
        if reserved:
            raise InvalidArgumentError(f"extra_args may not set {', '.join(reserved)}")
        body: JsonObject = {**config.extra_args, **overrides}
        body["model"] = config.model
        body["messages"] = [await self._message(config, m, access) for m in params.messages]
        if params.tools:
            if "tool_calling" not in config.capabilities:
                raise InvalidArgumentError(f"model {config.id!r} does not support tool calling")
            body["tools"] = [_function_tool(t) for t in params.tools]
        if stream:
            body["stream"] = True
            if config.stream_usage:
                body["stream_options"] = {"include_usage": True}
        return body

    async def _message(self, config: ModelConfig, message: ChatMessage, access: RunAccess) -> JsonObject:
        out: JsonObject = {"role": message.role}
        content = message.content
        if content is None or isinstance(content, str):
            out["content"] = content
        else:
            parts: list[JsonValue] = []
            for element in content:
                if isinstance(element, TextContent):
                    parts.append({"type": "text", "text": element.text})
                elif isinstance(element, ImageContent):
                    if "vision" not in config.capabilities:
                        raise InvalidArgumentError(f"model {config.id!r} does not accept images")
                    parts.append(
                        {"type": "image_url", "image_url": {"url": await self._image_url(element, access)}}
                    )
                else:
                    raise InvalidArgumentError(
                        f"model {config.id!r} accepts text and images only, not {element.type} content"
                    )
            out["content"] = parts
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps_str(call.arguments)},
                }
                for call in message.tool_calls
            ]
        if message.tool_call_id is not None:
            out["tool_call_id"] = message.tool_call_id
        if message.name is not None:
            out["name"] = message.name
        return out

    async def _image_url(self, image: ImageContent, access: RunAccess) -> str:
        if image.url is not None:
            return image.url
        assert image.artifact is not None  # the model guarantees a url or an artifact
        if self._artifacts is None:
            raise InvalidArgumentError("this host cannot send artifact images to models (no artifact store)")
        record = await self._artifacts.get(image.artifact.artifact_id)
        if record is None or not _may_read(access, record):
            raise NotFoundError("artifact not found")
        if record.size > self._max_image_bytes:
            raise PayloadTooLargeError(
                f"image artifact is {record.size} bytes; models accept at most {self._max_image_bytes}"
            )
        mime = record.mime_type or image.mime_type or image.artifact.mime_type or ""
        if not mime.startswith("image/"):
            raise InvalidArgumentError(f"artifact {record.artifact_id} is not an image")
        data = await self._artifacts.read_range(record, 0, record.size)
        return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


# -- helpers -------------------------------------------------------------------------------------------------


def _to_response(config: ModelConfig, data: JsonObject) -> ModelResponse:
    choices = _items(data.get("choices"))
    choice = _obj(choices[0]) if choices else {}
    if not choice:
        raise RuntimeAPIError(f"model {config.id!r} returned no choices", retryable=True)
    message = _obj(choice.get("message"))
    tool_calls = [_tool_call(config, raw) for raw in _items(message.get("tool_calls"))]
    content = message.get("content")
    finish_reason = choice.get("finish_reason")
    return ModelResponse(
        model_id=config.id,
        message=ChatMessage(
            role="assistant", content=content if isinstance(content, str) else None, tool_calls=tool_calls
        ),
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
        usage=_usage(data.get("usage")) or ModelUsage(),
    )


def _single_chunk(response: ModelResponse) -> ModelStreamChunk:
    """A whole answer as the one chunk of a stream."""
    content = response.message.content
    return ModelStreamChunk(
        delta=content if isinstance(content, str) and content else None,
        tool_calls=response.message.tool_calls,
        finish_reason=response.finish_reason or "stop",
        usage=response.usage,
    )


def _decode(config: ModelConfig, response: httpx2.Response) -> JsonObject:
    try:
        decoded: JsonValue = json.loads(response.content)
    except ValueError:
        raise RuntimeAPIError(f"model {config.id!r} answered with malformed JSON", retryable=True) from None
    data = _obj(decoded)
    if not data:
        raise RuntimeAPIError(f"model {config.id!r} answered with unexpected JSON", retryable=True)
    return data


def _is_event_stream(response: httpx2.Response) -> bool:
    return response.headers.get("content-type", "").partition(";")[0].strip().lower() == "text/event-stream"


def _obj(value: JsonValue) -> JsonObject:
    """*value* as a JSON object, or an empty one (provider JSON is untrusted)."""
    return value if isinstance(value, dict) else {}


def _items(value: JsonValue) -> list[JsonValue]:
    """*value* as a JSON array, or an empty one."""
    return value if isinstance(value, list) else []


def _str(value: JsonValue) -> str | None:
    return value if isinstance(value, str) else None


def _timeout(config: ModelConfig) -> httpx2.Timeout:
    return httpx2.Timeout(config.timeout_seconds, connect=min(config.timeout_seconds, 10.0))


def _may_read(access: RunAccess, record: ArtifactRecord) -> bool:
    # the same rule as the pull API's artifact reads: granted by id, the run's own, or its conversation's
    if record.artifact_id in access.artifact_ids:
        return True
    if record.owner.run_id is not None and record.owner.run_id == access.run_id:
        return True
    own = access.conversation
    return own is not None and record.owner.conversation_id == own.conversation_id


def _function_tool(tool: JsonObject) -> JsonObject:
    """Accept OpenAI's ``{"type": "function", "function": {...}}`` or the bare function schema."""
    function = _obj(tool.get("function")) if tool.get("type") == "function" else tool
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError("every tool needs a function name")
    return {"type": "function", "function": function}


def _merge_fragment(pending: dict[int, _PendingToolCall], raw: JsonValue) -> None:
    fragment = _obj(raw)
    index = fragment.get("index", 0)
    if not isinstance(index, int):
        return
    call = pending.setdefault(index, _PendingToolCall())
    call_id = fragment.get("id")
    if isinstance(call_id, str) and call_id:
        call.id = call_id
    function = _obj(fragment.get("function"))
    name = function.get("name")
    if isinstance(name, str) and name:
        call.name = name
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        call.arguments.append(arguments)


def _tool_call(config: ModelConfig, raw: JsonValue) -> ModelToolCall:
    call = _obj(raw)
    function = _obj(call.get("function"))
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise RuntimeAPIError(f"model {config.id!r} returned a malformed tool call", retryable=True)
    text = function.get("arguments") or "{}"
    arguments: JsonObject | None = None
    if isinstance(text, dict):
        arguments = text
    elif isinstance(text, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads_object(text)
    if arguments is None:
        raise RuntimeAPIError(
            f"model {config.id!r} returned tool-call arguments that are not a JSON object", retryable=True
        )
    call_id = call.get("id")
    return ModelToolCall(
        id=call_id if isinstance(call_id, str) and call_id else f"call_{name}",
        name=name,
        arguments=arguments,
    )


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def _usage(raw: JsonValue) -> ModelUsage | None:
    usage = _obj(raw)
    if not usage:
        return None
    prompt, completion = _int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens"))
    total = _int(usage.get("total_tokens")) or prompt + completion
    return ModelUsage(input_tokens=prompt, output_tokens=completion, total_tokens=total)


def _scrub(text: str, key: str | None) -> str:
    if key:
        text = text.replace(key, "***")
    text = " ".join(text.split())
    return text[:_ERROR_TEXT_LIMIT] + ("..." if len(text) > _ERROR_TEXT_LIMIT else "")


def _upstream_message(response: httpx2.Response) -> str:
    try:
        data = json.loads_object(response.content)
    except ValueError:
        return response.text
    error = data.get("error")
    if isinstance(error, str):
        return error
    message = _obj(error).get("message", data.get("message"))
    return message if isinstance(message, str) else response.text


def _status_error(config: ModelConfig, response: httpx2.Response, key: str | None) -> APIError:
    status = response.status_code
    detail = _scrub(_upstream_message(response), key)
    message = f"model {config.id!r}: provider answered {status}" + (f": {detail}" if detail else "")
    details: JsonObject = {"status": status}
    retry_after = response.headers.get("retry-after")
    if retry_after is not None:
        with contextlib.suppress(ValueError):
            details["retry_after"] = float(retry_after)
    log.info("model %s: provider answered %s", config.id, status)
    if status == 429:
        return RateLimitedError(message, details=details)
    if status in (400, 422):
        return InvalidArgumentError(message, details=details)
    if status in (401, 403):
        # The provider refused the host's key: the provider's (or operator's) fault, never the run's grant,
        # so not ``unauthorized`` — a runner falls back to its next model on this code.
        return ModelAuthFailedError(message, details=details)
    if status == 404:
        return NotFoundError(message, details=details)
    if status == 413:
        return PayloadTooLargeError(message, details=details)
    retryable = status >= 500 or status in (408, 409)
    return RuntimeAPIError(message, retryable=retryable, details=details)


def _transport_error(config: ModelConfig, exc: httpx2.HTTPError) -> APIError:
    # the exception text may carry the URL but never headers; still, name only the kind of failure
    log.info("model %s: transport failure %s", config.id, type(exc).__name__)
    return RuntimeAPIError(f"model {config.id!r} is unreachable ({type(exc).__name__})", retryable=True)
