"""Types the protocol references everywhere: i18n text, content elements, artifact and static references.

PROTOCOL_V1 names these types without defining them; their design is documented in ``docs/protocol.md``.
Binary data never travels inline: images, files and audio are carried as :class:`ArtifactRef` or as a
plain ``http(s)`` URL, never as base64 or ``data:`` URLs.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, ConfigDict, Field, GetJsonSchemaHandler, JsonValue, model_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from ._base import ProtocolModel

__all__ = [
    "ArtifactRef",
    "AudioContent",
    "ContentElement",
    "FileContent",
    "I18nObject",
    "ImageContent",
    "JsonValue",
    "RawEventRef",
    "StaticContextRef",
    "TextContent",
]


class I18nObject(ProtocolModel):
    """Text in several locales, keyed by locale name (``en_US``, ``zh_Hans``, ...).

    A plain string is accepted and becomes the ``en_US`` entry. At least one locale must be present.
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="allow")

    en_US: str | None = None
    """English (United States)."""
    zh_Hans: str | None = None
    """Simplified Chinese."""

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"en_US": value}
        return value

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # The JSON Schema must accept the plain-string shorthand too, or schema-driven tools reject manifests
        # the models accept.
        schema = handler(core_schema)
        if handler.mode == "validation":
            return {"anyOf": [{"type": "string", "minLength": 1}, schema]}
        return schema

    @model_validator(mode="after")
    def _not_empty(self) -> I18nObject:
        if not self.as_dict():
            raise ValueError("an I18nObject needs at least one locale")
        return self

    def as_dict(self) -> dict[str, str]:
        """All locales that have a value."""
        out: dict[str, str] = {}
        for key, value in self.model_dump().items():
            if isinstance(value, str) and value:
                out[key] = value
        return out

    def get(self, locale: str = "en_US") -> str:
        """The text for *locale*, else English, else any locale."""
        entries = self.as_dict()
        return entries.get(locale) or entries.get("en_US") or next(iter(entries.values()))


class ArtifactRef(ProtocolModel):
    """A handle to bytes the host stores: a file, an image, audio, a large tool result.

    Runners receive refs and read the bytes through ``api.artifacts`` when they need them. ``size`` and
    ``digest`` are computed by the host when it stores the bytes; a runner-declared value is never trusted.
    """

    artifact_id: str = Field(min_length=1, max_length=200)
    """Opaque id, unique within the host."""
    artifact_type: str = "file"
    """Coarse kind: ``file``, ``image``, ``audio``, ``video``, ``tool_result``, ..."""
    mime_type: str | None = None
    """MIME type, e.g. ``image/png``."""
    name: str | None = None
    """Display name (a file name); never a host path."""
    size: int | None = Field(default=None, ge=0)
    """Size in bytes, as measured by the host."""
    digest: str | None = None
    """Content digest as ``sha256:<hex>``, as computed by the host."""
    summary: str | None = None
    """A short text summary a runner can show a model instead of the bytes."""
    expires_at: int | None = None
    """Unix epoch milliseconds after which the host refuses to serve the bytes; ``None`` = no expiry."""
    permissions: list[Literal["metadata", "read"]] = Field(default_factory=lambda: ["metadata", "read"])
    """What this run may do with the artifact (subject to the run's authorization snapshot)."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Non-secret descriptive metadata."""


def _check_url(url: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise ValueError("only http(s) URLs are allowed; binary data travels as an artifact ref")
    return url


HttpUrlStr = Annotated[str, AfterValidator(_check_url)]
"""A URL that must be ``http(s)``: ``data:`` URLs and local paths are refused."""


class TextContent(ProtocolModel):
    """A text part of a message."""

    type: Literal["text"] = "text"
    """Discriminator."""
    text: str
    """The text."""


class ImageContent(ProtocolModel):
    """An image, by artifact ref (preferred) or by ``http(s)`` URL."""

    type: Literal["image"] = "image"
    """Discriminator."""
    artifact: ArtifactRef | None = None
    """The stored image."""
    url: HttpUrlStr | None = None
    """A public ``http(s)`` URL of the image."""
    mime_type: str | None = None
    """MIME type when known."""
    alt: str | None = None
    """Alternative text."""

    @model_validator(mode="after")
    def _has_source(self) -> ImageContent:
        if self.artifact is None and self.url is None:
            raise ValueError("an image needs an artifact or a url")
        return self


class FileContent(ProtocolModel):
    """A file, by artifact ref (preferred) or by ``http(s)`` URL."""

    type: Literal["file"] = "file"
    """Discriminator."""
    artifact: ArtifactRef | None = None
    """The stored file."""
    url: HttpUrlStr | None = None
    """A public ``http(s)`` URL of the file."""
    name: str | None = None
    """File name."""
    mime_type: str | None = None
    """MIME type when known."""

    @model_validator(mode="after")
    def _has_source(self) -> FileContent:
        if self.artifact is None and self.url is None:
            raise ValueError("a file needs an artifact or a url")
        return self


class AudioContent(ProtocolModel):
    """Audio, by artifact ref (preferred) or by ``http(s)`` URL."""

    type: Literal["audio"] = "audio"
    """Discriminator."""
    artifact: ArtifactRef | None = None
    """The stored audio."""
    url: HttpUrlStr | None = None
    """A public ``http(s)`` URL of the audio."""
    mime_type: str | None = None
    """MIME type when known."""
    duration_ms: int | None = Field(default=None, ge=0)
    """Duration when known."""

    @model_validator(mode="after")
    def _has_source(self) -> AudioContent:
        if self.artifact is None and self.url is None:
            raise ValueError("audio needs an artifact or a url")
        return self


ContentElement = Annotated[
    TextContent | ImageContent | FileContent | AudioContent, Field(discriminator="type")
]
"""One part of a multimodal input or message, discriminated by ``type``."""


class RawEventRef(ProtocolModel):
    """A reference to the raw platform payload of an event, kept by the host instead of inlining it."""

    ref_id: str
    """Opaque id."""
    source: str | None = None
    """Where the payload came from (adapter name)."""
    artifact: ArtifactRef | None = None
    """The payload stored as an artifact, when it is readable by this run."""
    size: int | None = Field(default=None, ge=0)
    """Size of the raw payload in bytes."""
    mime_type: str | None = "application/json"
    """Encoding of the payload."""


class StaticContextRef(ProtocolModel):
    """A reference to static context (system policy, tool schemas, resource manifest) by content hash.

    The hash stays the same across runs while the content does not change, so a runner can keep a KV cache
    warm and only fetch when the hash moves (AGENT_CONTEXT_PROTOCOL §6).
    """

    ref: str
    """What the reference names, e.g. ``tool_schemas``."""
    version: str | None = None
    """A human version label, when there is one."""
    hash: str
    """``sha256:<hex>`` of the canonical JSON of the content."""
