"""The run-path typing probe (``run_path_probe.py``) under strict pyright: every misuse it marks is an error
of the marked rule on the marked line, and there is no other error."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PROBE = Path(__file__).with_name("run_path_probe.py")
_MARK = re.compile(r"\s*# pyright: ignore\[([\w, ]+)\]$")
# Strict, as the repository is; a misspelt member also makes its type unknown, which is the same mistake twice.
_CONFIG = """{"typeCheckingMode": "strict", "pythonVersion": "3.11", "include": ["probe.py"],
 "reportUnknownMemberType": false}"""


def _errors(project: Path) -> list[tuple[int, str]]:
    """``(line, rule)`` of the errors pyright reports for *project*/probe.py (a rule once per line)."""
    (project / "pyrightconfig.json").write_text(_CONFIG, encoding="utf-8")
    pyright = shutil.which("pyright", path=str(Path(sys.executable).parent))
    assert pyright is not None, "pyright is in the dev environment"
    done = subprocess.run(
        [pyright, "--outputjson", "--pythonpath", sys.executable],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    report = json.loads(done.stdout)
    return sorted(
        {
            (d["range"]["start"]["line"] + 1, d.get("rule", "?"))
            for d in report["generalDiagnostics"]
            if d["severity"] == "error"
        }
    )


def test_a_misspelt_store_method_is_a_type_error(tmp_path: Path) -> None:
    expected: list[tuple[int, str]] = []
    lines: list[str] = []
    for number, line in enumerate(PROBE.read_text(encoding="utf-8").splitlines(), start=1):
        mark = _MARK.search(line)
        if mark:
            expected += [(number, rule.strip()) for rule in mark.group(1).split(",")]
            line = line[: mark.start()]
        lines.append(line)
    assert (18, "reportAttributeAccessIssue") in expected, "stores.runs.strat(...) stays in the probe"
    (tmp_path / "probe.py").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert _errors(tmp_path) == sorted(expected)


def test_the_probe_as_written_is_clean(tmp_path: Path) -> None:
    shutil.copy(PROBE, tmp_path / "probe.py")
    assert _errors(tmp_path) == []
