"""``agentrunner.codec.loads_object``: a decoded JSON object, typed, or a ``ValueError`` naming what was
wrong."""

from __future__ import annotations

import orjson
import pytest
from agentrunner import codec


def test_an_object_decodes_to_a_dict_from_bytes_or_text() -> None:
    """Bytes, memoryview and str all decode; nested values come back as JSON values."""
    expected = {"a": [1, 2.5, None, True], "b": {"c": "d"}}
    raw = b'{"a": [1, 2.5, null, true], "b": {"c": "d"}}'
    assert codec.loads_object(raw) == expected
    assert codec.loads_object(memoryview(raw)) == expected
    assert codec.loads_object(raw.decode()) == expected


@pytest.mark.parametrize(
    ("document", "kind"),
    [
        ("[1]", "an array"),
        ('"x"', "a string"),
        ("1", "a number"),
        ("1.5", "a number"),
        ("true", "true or false"),
        ("null", "null"),
    ],
)
def test_a_document_that_is_not_an_object_is_refused_naming_what_it_is(document: str, kind: str) -> None:
    """Valid JSON of another kind is a ``ValueError`` too, not an object the caller has to re-check."""
    with pytest.raises(ValueError, match=f"^expected a JSON object, not {kind}$"):
        codec.loads_object(document)


def test_malformed_json_raises_the_decoders_error() -> None:
    """A ``ValueError`` like every refusal, so one ``except ValueError`` covers both."""
    with pytest.raises(orjson.JSONDecodeError, match="unexpected"):
        codec.loads_object(b'{"a": ')
