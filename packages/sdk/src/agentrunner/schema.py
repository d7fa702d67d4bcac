"""JSON Schema of Protocol v1, generated from the SDK's models.

The schema files under ``packages/sdk/schema/`` are committed so runners written in other languages can use
them without Python. Regenerate them after changing a model, and let CI check they are current::

    uv run python -m agentrunner.schema           # write packages/sdk/schema/
    uv run python -m agentrunner.schema --check   # exit 1 and name the stale files

Output is deterministic (sorted keys, two-space indent, one trailing newline), so a diff of the directory
shows exactly what a model change did to the wire. Schemas describe what a receiver **accepts**
(pydantic's validation mode): fields with a default are optional. The result union lists the nine known
types only; a receiver still has to ignore results of other types (PROTOCOL_V1 §3) before validating.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import orjson
from pydantic import BaseModel, TypeAdapter

from .actions import ACTIONS, BackCallRequest
from .context import AgentRunContext, AgentRunRequest
from .errors import AgentAPIError
from .manifest import AgentRunnerManifest, ListAgentRunnersResponse
from .results import AgentRunResult

__all__ = ["DEFAULT_SCHEMA_DIR", "JSON_SCHEMA_DIALECT", "check", "generate", "main", "write"]

JSON_SCHEMA_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"
"""The dialect pydantic generates, declared in every file's ``$schema``."""

DEFAULT_SCHEMA_DIR: Final = Path(__file__).resolve().parents[2] / "schema"
"""``packages/sdk/schema`` of a source checkout (an installed wheel has no such directory)."""

_TOP_LEVEL: Final[dict[str, type[BaseModel] | TypeAdapter[Any]]] = {
    "agent_run_context.json": AgentRunContext,
    "agent_run_result.json": TypeAdapter[AgentRunResult](AgentRunResult),
    "agent_runner_manifest.json": AgentRunnerManifest,
    "list_agent_runners_response.json": ListAgentRunnersResponse,
    "agent_run_request.json": AgentRunRequest,
    "agent_api_error.json": AgentAPIError,
    "back_call_request.json": BackCallRequest,
}


def _schema_of(target: type[BaseModel] | TypeAdapter[Any], title: str) -> dict[str, Any]:
    schema = target.json_schema() if isinstance(target, TypeAdapter) else target.model_json_schema()
    # A TypeAdapter of a union has no title of its own; give every file one so tools can name it.
    schema.setdefault("title", title)
    return {"$schema": JSON_SCHEMA_DIALECT, **schema}


def _encode(document: Any) -> str:
    return orjson.dumps(document, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2).decode() + "\n"


def generate() -> dict[str, str]:
    """Every schema file, as ``{relative path: file text}``.

    Top-level files hold the discovery, run and back-call envelopes; ``actions/<name>.params.json`` and
    ``actions/<name>.result.json`` hold each back-call action of :data:`~agentrunner.actions.ACTIONS`, and
    ``actions/index.json`` lists the actions with their flags.
    """
    files: dict[str, str] = {}
    for path, target in _TOP_LEVEL.items():
        title = "AgentRunResult" if isinstance(target, TypeAdapter) else target.__name__
        files[path] = _encode(_schema_of(target, title))
    index: dict[str, Any] = {}
    for name, spec in ACTIONS.items():
        params_path = f"actions/{name}.params.json"
        result_path = f"actions/{name}.result.json"
        files[params_path] = _encode(_schema_of(spec.params, spec.params.__name__))
        files[result_path] = _encode(_schema_of(spec.result, spec.result.__name__))
        index[name] = {
            "params": params_path.removeprefix("actions/"),
            "result": result_path.removeprefix("actions/"),
            "streaming": spec.streaming,
            "side_effecting": spec.side_effecting,
        }
    files["actions/index.json"] = _encode(index)
    return files


def _existing(directory: Path) -> set[str]:
    if not directory.is_dir():
        return set()
    return {path.relative_to(directory).as_posix() for path in directory.rglob("*.json")}


def _differences(directory: Path, expected: dict[str, str]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for path, text in expected.items():
        target = directory / path
        if not target.is_file():
            found.append((path, "missing"))
        elif target.read_text(encoding="utf-8") != text:
            found.append((path, "stale"))
    found.extend((path, "not generated any more") for path in sorted(_existing(directory) - expected.keys()))
    return found


def check(directory: Path = DEFAULT_SCHEMA_DIR) -> list[str]:
    """What differs between *directory* and :func:`generate`, as ``"<path> (<missing|stale|...>)"`` lines.

    An empty list means the committed schema is current.
    """
    return [f"{path} ({reason})" for path, reason in _differences(directory, generate())]


def write(directory: Path = DEFAULT_SCHEMA_DIR) -> list[str]:
    """Bring *directory* up to date with :func:`generate`, deleting ``.json`` files no model produces.

    Returns the relative paths that were written or deleted.
    """
    expected = generate()
    differences = _differences(directory, expected)
    for path, _reason in differences:
        target = directory / path
        if path not in expected:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(expected[path], encoding="utf-8")
    return [path for path, _ in differences]


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: write the schema, or with ``--check`` verify it; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m agentrunner.schema", description="Generate the Protocol v1 JSON Schema files."
    )
    parser.add_argument(
        "--check", action="store_true", help="do not write; exit 1 when the files are stale or missing"
    )
    parser.add_argument(
        "--out", type=Path, help=f"schema directory (default in a source checkout: {DEFAULT_SCHEMA_DIR})"
    )
    args = parser.parse_args(argv)
    directory: Path | None = args.out
    if directory is None:
        # Installed from a wheel, the default would point into site-packages' parent: refuse to guess.
        if not (DEFAULT_SCHEMA_DIR.parent / "pyproject.toml").is_file():
            parser.error("not running from a source checkout of agentrunner-sdk; pass --out DIR")
        directory = DEFAULT_SCHEMA_DIR
    if args.check:
        problems = check(directory)
        for problem in problems:
            print(f"schema out of date: {problem}", file=sys.stderr)
        if problems:
            print("run: uv run python -m agentrunner.schema", file=sys.stderr)
            return 1
        print(f"schema up to date ({len(generate())} files in {directory})")
        return 0
    changed = write(directory)
    print(f"wrote {directory}: {len(changed)} file(s) changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
