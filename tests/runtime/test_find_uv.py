"""Which uv installs plugin environments: the README's `./uvw` may run uv from off PATH, and `uv run` says
where it is in ``$UV``; `agentrunner plugins install` under it must use that uv."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentrunner_host.runtime.plugin_envs import find_uv


def _executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\n", encoding="utf-8")
    path.chmod(0o755)
    return path


def test_the_uv_that_started_the_process_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTRUNNER_UV", raising=False)
    parent = _executable(tmp_path / "uv")
    monkeypatch.setenv("UV", str(parent))
    assert find_uv() == str(parent)


def test_agentrunner_uv_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UV", str(_executable(tmp_path / "uv")))
    monkeypatch.setenv("AGENTRUNNER_UV", "/opt/chosen/uv")
    assert find_uv() == "/opt/chosen/uv"


def test_a_uv_variable_naming_no_executable_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTRUNNER_UV", raising=False)
    monkeypatch.setenv("UV", str(tmp_path / "missing"))
    (tmp_path / "bin").mkdir()
    on_path = _executable(tmp_path / "bin" / "uv")
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert find_uv() != str(tmp_path / "missing")
