"""The generated JSON Schema: current, deterministic, complete, and agreeing with the models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from agentrunner import ACTIONS, KNOWN_RESULT_TYPES
from agentrunner.schema import DEFAULT_SCHEMA_DIR, JSON_SCHEMA_DIALECT, check, generate, main, write
from jsonschema import Draft202012Validator

from . import payloads

_FILES = generate()


def _schema(path: str) -> dict[str, Any]:
    return orjson.loads(_FILES[path])


def _validator(path: str) -> Draft202012Validator:
    return Draft202012Validator(_schema(path))


def test_the_committed_schema_files_are_current() -> None:
    """``packages/sdk/schema`` matches the models; if not, run ``uv run python -m agentrunner.schema``."""
    problems = check()
    assert problems == [], "stale schema, run: uv run python -m agentrunner.schema\n" + "\n".join(problems)
    assert main(["--check"]) == 0


def test_check_mode_reports_missing_stale_and_left_over_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--check`` exits 1 naming each problem; writing fixes all three kinds, and then it exits 0."""
    assert main(["--check", "--out", str(tmp_path)]) == 1
    assert "agent_run_context.json (missing)" in capsys.readouterr().err
    write(tmp_path)
    (tmp_path / "agent_api_error.json").write_text("{}\n")
    (tmp_path / "actions" / "models.train.params.json").write_text("{}\n")
    assert check(tmp_path) == [
        "agent_api_error.json (stale)",
        "actions/models.train.params.json (not generated any more)",
    ]
    assert main(["--out", str(tmp_path)]) == 0
    assert check(tmp_path) == []
    assert not (tmp_path / "actions" / "models.train.params.json").exists()
    assert main(["--check", "--out", str(tmp_path)]) == 0


def test_generation_is_deterministic_sorted_and_newline_terminated() -> None:
    """Two runs give the same bytes; every file is sorted-key, indented JSON ending in one newline."""
    assert generate() == _FILES
    for path, text in _FILES.items():
        assert text.endswith("}\n"), path
        assert not text.endswith("\n\n"), path
        reencoded = orjson.dumps(orjson.loads(text), option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)
        assert reencoded.decode() + "\n" == text, path


def test_the_schema_covers_every_envelope_and_every_action() -> None:
    """Top-level messages plus params and result of each back-call action, all valid 2020-12 schemas."""
    expected = {
        "agent_run_context.json",
        "agent_run_result.json",
        "agent_runner_manifest.json",
        "list_agent_runners_response.json",
        "agent_run_request.json",
        "agent_api_error.json",
        "back_call_request.json",
        "actions/index.json",
    }
    for name in ACTIONS:
        expected |= {f"actions/{name}.params.json", f"actions/{name}.result.json"}
    assert set(_FILES) == expected
    for path in expected - {"actions/index.json"}:
        schema = _schema(path)
        assert schema["$schema"] == JSON_SCHEMA_DIALECT
        assert schema["title"]
        Draft202012Validator.check_schema(schema)


def test_the_action_index_lists_each_action_with_its_flags() -> None:
    """``actions/index.json`` names the files and the streaming / side-effect flags of every action."""
    index = _schema("actions/index.json")
    assert set(index) == set(ACTIONS)
    for name, spec in ACTIONS.items():
        assert index[name] == {
            "params": f"{name}.params.json",
            "result": f"{name}.result.json",
            "streaming": spec.streaming,
            "side_effecting": spec.side_effecting,
        }


def test_the_result_schema_is_a_union_discriminated_on_type() -> None:
    """The result schema maps each of the nine known types to its own definition."""
    schema = _schema("agent_run_result.json")
    assert schema["discriminator"]["propertyName"] == "type"
    assert set(schema["discriminator"]["mapping"]) == KNOWN_RESULT_TYPES
    assert len(schema["oneOf"]) == len(KNOWN_RESULT_TYPES)


def test_the_schema_accepts_what_the_models_accept() -> None:
    """The example context, manifest, results and action payloads all validate against their schema."""
    _validator("agent_run_context.json").validate(payloads.context())
    _validator("agent_runner_manifest.json").validate(payloads.manifest())
    results = _validator("agent_run_result.json")
    for result_type in sorted(KNOWN_RESULT_TYPES):
        results.validate(payloads.result(result_type))
    for name in ACTIONS:
        _validator(f"actions/{name}.params.json").validate(payloads.ACTION_PARAMS[name])
        _validator(f"actions/{name}.result.json").validate(payloads.ACTION_RESULTS[name])


def test_the_schema_rejects_what_the_models_reject() -> None:
    """A run.failed without ``code``, a ``global`` state scope and a context without an event all fail."""
    results = _validator("agent_run_result.json")
    failed = payloads.result("run.failed")
    del failed["data"]["code"]
    assert not results.is_valid(failed)
    global_state = payloads.result("state.updated")
    global_state["data"]["scope"] = "global"
    assert not results.is_valid(global_state)
    context = payloads.context()
    del context["event"]
    assert not _validator("agent_run_context.json").is_valid(context)


def test_the_default_directory_is_the_sdk_package_schema_folder() -> None:
    """The command writes next to the SDK's ``pyproject.toml`` in a source checkout."""
    assert DEFAULT_SCHEMA_DIR.name == "schema"
    assert (DEFAULT_SCHEMA_DIR.parent / "pyproject.toml").is_file()
