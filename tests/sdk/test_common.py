"""Types the spec names without defining: i18n text, artifact refs, content elements, static refs."""

from __future__ import annotations

import pytest
from agentrunner import (
    ArtifactRef,
    AudioContent,
    ContentElement,
    FileContent,
    I18nObject,
    ImageContent,
    RawEventRef,
    StaticContextRef,
    TextContent,
)
from pydantic import TypeAdapter, ValidationError

from . import payloads
from .helpers import round_trip

_CONTENT: TypeAdapter[ContentElement] = TypeAdapter(ContentElement)


def test_a_plain_string_becomes_the_english_entry_of_an_i18n_object() -> None:
    """Manifests may write ``label: "Helper"``; it means ``{"en_US": "Helper"}``."""
    label = I18nObject.model_validate("Helper")
    assert label.en_US == "Helper"
    assert label.as_dict() == {"en_US": "Helper"}


def test_an_i18n_object_keeps_extra_locales_and_falls_back_to_english() -> None:
    """Locales beyond the two named fields are kept; ``get`` falls back to English, then to any locale."""
    label = I18nObject.model_validate({"en_US": "Hi", "ja_JP": "やあ"})
    assert label.get("ja_JP") == "やあ"
    assert label.get("de_DE") == "Hi"
    assert I18nObject.model_validate({"ja_JP": "やあ"}).get("de_DE") == "やあ"
    round_trip(label)


@pytest.mark.parametrize("raw", [{}, {"en_US": ""}, {"en_US": None, "zh_Hans": None}])
def test_an_i18n_object_without_any_text_is_rejected(raw: dict[str, object]) -> None:
    """At least one locale must have text."""
    with pytest.raises(ValidationError, match="at least one locale"):
        I18nObject.model_validate(raw)


def test_an_artifact_ref_round_trips_and_defaults_to_readable() -> None:
    """A bare id is a valid ref of a ``file`` with metadata and read permission."""
    ref = ArtifactRef(artifact_id="a")
    assert ref.artifact_type == "file"
    assert ref.permissions == ["metadata", "read"]
    round_trip(ArtifactRef.model_validate(payloads.ARTIFACT))


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"artifact_id": ""}, "artifact_id"),
        ({"artifact_id": "a" * 201}, "artifact_id"),
        ({"artifact_id": "a", "size": -1}, "size"),
        ({"artifact_id": "a", "permissions": ["write"]}, "permissions"),
    ],
)
def test_an_invalid_artifact_ref_fails_naming_the_field(raw: dict[str, object], field: str) -> None:
    """Empty or over-long ids, negative sizes and unknown permissions are rejected."""
    with pytest.raises(ValidationError) as info:  # noqa: PT011 - the error's location is checked below
        ArtifactRef.model_validate(raw)
    assert info.value.errors()[0]["loc"][0] == field


@pytest.mark.parametrize(
    "element",
    [
        TextContent(text="hi"),
        ImageContent(artifact=ArtifactRef(artifact_id="a"), alt="x"),
        ImageContent(url="https://example.org/i.png"),
        FileContent(url="http://example.org/f.txt", name="f.txt"),
        AudioContent(artifact=ArtifactRef(artifact_id="b"), duration_ms=10),
    ],
    ids=["text", "image-artifact", "image-url", "file-url", "audio-artifact"],
)
def test_content_elements_round_trip_through_the_discriminated_union(element: ContentElement) -> None:
    """Each kind of element is parsed back into its own class by ``type``."""
    again = _CONTENT.validate_json(_CONTENT.dump_json(element))
    assert type(again) is type(element)
    assert again == element


@pytest.mark.parametrize("kind", ["image", "file", "audio"])
@pytest.mark.parametrize(
    "url", ["data:application/octet-stream;base64,AAAA", "file:///etc/passwd", "/tmp/x", "ftp://h/x"]
)
def test_binary_content_by_anything_but_an_http_url_is_rejected(kind: str, url: str) -> None:
    """Images, files and audio come by artifact ref or ``http(s)`` URL; never inline or by local path."""
    with pytest.raises(
        ValidationError, match=r"only http\(s\) URLs are allowed; binary data travels as an artifact ref"
    ) as info:
        _CONTENT.validate_python({"type": kind, "url": url})
    assert info.value.errors()[0]["loc"] == (kind, "url")
    assert "http(s)" in str(info.value)


@pytest.mark.parametrize("kind", ["image", "file", "audio"])
def test_binary_content_needs_an_artifact_or_a_url(kind: str) -> None:
    """An image, file or audio element with no source at all is rejected."""
    with pytest.raises(ValidationError, match="needs an artifact or a url"):
        _CONTENT.validate_python({"type": kind})


def test_raw_event_and_static_context_refs_round_trip() -> None:
    """The two reference types keep their ids and hashes."""
    raw = round_trip(RawEventRef(ref_id="r", source="telegram", size=10))
    assert raw.mime_type == "application/json"
    static = round_trip(StaticContextRef(ref="tool_schemas", version="3", hash="sha256:00"))
    assert static.hash == "sha256:00"
