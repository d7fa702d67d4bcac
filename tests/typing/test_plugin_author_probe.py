"""The plugin-author typing probe (``plugin_author_probe.py``) checked as an author's project sees it: strict
pyright, outside this repository's configuration, against the installed SDK. The documented API type-checks
clean, and every misuse marked in the probe is an error of the marked rule, and nothing else is."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from agentrunner import codec

pytestmark = pytest.mark.slow

PROBE = Path(__file__).with_name("plugin_author_probe.py")
_EXPECTED = re.compile(r"\s*# pyright: ignore\[([\w, ]+)\]$")


def _pyright(project: Path) -> list[tuple[int, str]]:
    """``(line, rule)`` of every error pyright reports in *project*'s ``probe.py``."""
    config = {
        "typeCheckingMode": "strict",
        "pythonVersion": "3.11",
        "include": ["probe.py"],
        "reportUnnecessaryTypeIgnoreComment": "error",
    }
    (project / "pyrightconfig.json").write_text(codec.dumps_str(config), encoding="utf-8")
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
        (d["range"]["start"]["line"] + 1, d.get("rule", "?"))
        for d in report["generalDiagnostics"]
        if d["severity"] == "error"
    )


def _probe_lines() -> list[str]:
    return PROBE.read_text(encoding="utf-8").splitlines()


def test_the_marked_misuses_are_the_only_errors(tmp_path: Path) -> None:
    """Without its ignore comments the probe reports exactly the marked rules on the marked lines."""
    expected: list[tuple[int, str]] = []
    stripped: list[str] = []
    for number, line in enumerate(_probe_lines(), start=1):
        marked = _EXPECTED.search(line)
        if marked:
            expected += [(number, rule.strip()) for rule in marked.group(1).split(",")]
            line = line[: marked.start()]
        stripped.append(line)
    assert len({line for line, _ in expected}) >= 8, "the probe keeps its misuses"
    (tmp_path / "probe.py").write_text("\n".join(stripped) + "\n", encoding="utf-8")
    assert _pyright(tmp_path) == sorted(expected)


def test_the_documented_api_type_checks_clean(tmp_path: Path) -> None:
    """As written (every misuse acknowledged), the probe is clean under strict pyright."""
    shutil.copy(PROBE, tmp_path / "probe.py")
    assert _pyright(tmp_path) == []
