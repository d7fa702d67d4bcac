"""The child's environment allowlist and the redaction of its stderr."""

from __future__ import annotations

from agentrunner_host.runtime import DEFAULT_ENV_ALLOWLIST, Redactor, build_child_env


def test_only_allowlisted_granted_and_explicit_variables_reach_the_child() -> None:
    """Host variables outside the allowlist are dropped unless granted; explicit values win."""
    host = {
        "PATH": "/bin",
        "HOME": "/h",
        "AGENTRUNNER_TEST_SECRET": "x",
        "OPENAI_API_KEY": "sk-1",
        "LANG": "C",
    }
    env = build_child_env(host_env=host, granted=["OPENAI_API_KEY"], extra={"LANG": "C.UTF-8", "MODE": "1"})
    assert env == {"PATH": "/bin", "HOME": "/h", "OPENAI_API_KEY": "sk-1", "LANG": "C.UTF-8", "MODE": "1"}
    assert "AGENTRUNNER_TEST_SECRET" not in DEFAULT_ENV_ALLOWLIST


def test_secret_looking_values_are_masked() -> None:
    """Credentials in common shapes are replaced by *** while the rest of the line stays readable."""
    redact = Redactor()
    assert redact("calling with api_key=abc123def and user=bob") == "calling with api_key=*** and user=bob"
    assert redact('{"password": "hunter2!"}') == '{"password": "***"}'
    assert redact("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.x.y") == "Authorization: Bearer ***"
    assert redact("key sk-proj-ABCDEFGHIJKL used") == "key sk-*** used"
    assert redact("postgresql://app:pa55word@db:5432/x") == "postgresql://app:***@db:5432/x"
    assert redact("nothing to hide here") == "nothing to hide here"


def test_values_of_secret_named_variables_are_masked_verbatim() -> None:
    """A secret from the environment is masked wherever it appears, even without a telltale key."""
    redact = Redactor.for_environment(
        {"MY_SERVICE_TOKEN": "tok-very-private", "PWD": "/work/main", "HOME": "/root"}
    )
    assert redact("connected with tok-very-private in /work/main") == "connected with *** in /work/main"
