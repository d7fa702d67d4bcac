"""Loopback is decided by parsing the address; a non-loopback bind needs a long, high-entropy token."""

from __future__ import annotations

import secrets

import pytest
from agentrunner_host.config import ConfigFileError, is_loopback_host, token_weakness

from .conftest import TOKEN, SettingsFactory


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("127.0.0.1.example", False),
        ("127.evil.example", False),
        ("localhost.evil.example", False),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.1", False),
        ("", False),
    ],
)
def test_loopback_is_decided_by_parsing_the_address(host: str, loopback: bool) -> None:
    """``127.0.0.1.example`` is a host name, not a loopback address (the finding's string-prefix bug)."""
    assert is_loopback_host(host) is loopback


def test_a_prefix_lookalike_bind_needs_a_token(make_settings: SettingsFactory) -> None:
    """Binding ``127.0.0.1.example`` without a token is refused like any public bind."""
    settings = make_settings(environ={"AGENTRUNNER_HTTP_HOST": "127.0.0.1.example"})
    with pytest.raises(ConfigFileError, match="not a loopback address"):
        settings.require_token_for_bind()


@pytest.mark.parametrize(
    "weak",
    ["short-token", "a" * 64, "abcd" * 16, "0123456789" * 4, "password" * 5],
)
def test_weak_tokens_are_refused_for_a_public_bind(make_settings: SettingsFactory, weak: str) -> None:
    """Too short or too repetitive tokens are refused, naming the variable and how to make a good one."""
    settings = make_settings(environ={"AGENTRUNNER_HTTP_HOST": "0.0.0.0", "AGENTRUNNER_API_TOKEN": weak})
    with pytest.raises(ConfigFileError, match="AGENTRUNNER_API_TOKEN is too weak") as caught:
        settings.require_token_for_bind()
    assert weak not in str(caught.value)  # the refusal never echoes the token
    assert token_weakness(weak) is not None


def test_generated_tokens_pass_and_loopback_takes_any(make_settings: SettingsFactory) -> None:
    """``secrets.token_urlsafe(32)`` and ``token_hex(32)`` pass; on loopback any token (or none) is fine."""
    for token in (secrets.token_urlsafe(32), secrets.token_hex(32), TOKEN):
        assert token_weakness(token) is None
        make_settings(
            environ={"AGENTRUNNER_HTTP_HOST": "0.0.0.0", "AGENTRUNNER_API_TOKEN": token}
        ).require_token_for_bind()
    make_settings(environ={"AGENTRUNNER_API_TOKEN": "short"}).require_token_for_bind()
    make_settings().require_token_for_bind()
