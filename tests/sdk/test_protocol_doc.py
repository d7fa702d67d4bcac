"""``docs/protocol.md`` stays in step with the code it documents."""

from __future__ import annotations

import re
from pathlib import Path

from agentrunner import ACTIONS, KNOWN_RESULT_TYPES
from agentrunner.errors import API_ERROR_CODES

DOC = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text(encoding="utf-8")


def _table_rows(first_column: re.Pattern[str]) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for line in DOC.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        match = first_column.fullmatch(cells[0]) if line.startswith("|") else None
        if match:
            rows[match.group(1)] = cells[1:]
    return rows


def test_the_action_table_matches_the_action_registry() -> None:
    """Every action of ``ACTIONS`` has one row naming its params and result models and its two flags."""
    rows = _table_rows(re.compile(r"`([a-z_]+\.[a-z_]+)`"))
    actions = {name: cells for name, cells in rows.items() if name in ACTIONS or len(cells) == 6}
    assert set(actions) == set(ACTIONS)
    for name, spec in ACTIONS.items():
        params, result, streaming, side_effecting = actions[name][:4]
        assert params == f"`{spec.params.__name__}`", name
        assert result == f"`{spec.result.__name__}`", name
        assert (streaming == "yes") is spec.streaming, name
        assert (side_effecting == "yes") is spec.side_effecting, name


def test_every_result_type_and_error_code_is_documented() -> None:
    """The result-type table and the error-code table name everything the SDK knows."""
    result_rows = _table_rows(re.compile(r"`([a-z]+\.[a-z.]+)`"))
    assert set(result_rows) >= KNOWN_RESULT_TYPES
    error_rows = _table_rows(re.compile(r"`([a-z_]+)`"))
    assert set(API_ERROR_CODES) <= set(error_rows)


def test_the_doc_gives_the_schema_command() -> None:
    """Readers learn how to regenerate and check the JSON Schema."""
    assert "uv run python -m agentrunner.schema" in DOC
    assert "uv run python -m agentrunner.schema --check" in DOC
