"""Secrets of a runner config are decided by the runner's schema (``secret: true``); names are only guessed
for keys the schema does not declare, and descriptor names such as ``auth-type`` are not guessed secret."""

from __future__ import annotations

from agentrunner import DynamicFormItemSchema, I18nObject
from agentrunner_host.config import find_literal_secrets, redact_config
from agentrunner_host.context_builder import is_secret_name


def _field(name: str, *, secret: bool = False) -> DynamicFormItemSchema:
    return DynamicFormItemSchema(name=name, type="string", label=I18nObject(en_US=name), secret=secret)


SCHEMA = [
    _field("auth-type"),
    _field("basic-username"),
    _field("basic-password", secret=True),
    _field("jwt-secret", secret=True),
    _field("header-name"),
    _field("header-value", secret=True),
    _field("api-key", secret=True),
]


def test_names_that_describe_a_credential_are_not_guessed_secret() -> None:
    assert not is_secret_name("auth-type")
    assert not is_secret_name("token_url")
    assert not is_secret_name("header-value")  # not by its name: n8n's schema marks it
    assert is_secret_name("basic-password")
    assert is_secret_name("jwt-secret")
    assert is_secret_name("api-key")
    assert is_secret_name("auth")


def test_the_schema_decides_which_literals_are_refused() -> None:
    config = {"auth-type": "header", "header-name": "X-Key", "header-value": "literal", "basic-username": "u"}
    found = find_literal_secrets(config, schema=SCHEMA)
    assert [path for path, _ in found] == [("header-value",)]
    assert "marked secret by the runner" in found[0][1]
    assert find_literal_secrets({"auth-type": "basic"}) == []
    assert find_literal_secrets({**config, "header-value": {"env": "N8N_HEADER"}}, schema=SCHEMA) == []
    # keys the schema does not declare are still judged by name, and token-like values everywhere
    undeclared = find_literal_secrets(
        {"extra_token": "x", "header-name": "sk-abcdefghijklmnop"}, schema=SCHEMA
    )
    assert sorted(path for path, _ in undeclared) == [("extra_token",), ("header-name",)]


def test_redaction_follows_the_schema() -> None:
    config = {"auth-type": "jwt", "jwt-secret": "s3cret-value", "header-value": "v4lue", "my_password": "pw"}
    assert redact_config(config, SCHEMA) == {
        "auth-type": "jwt",
        "jwt-secret": "***",
        "header-value": "***",
        "my_password": "***",
    }
