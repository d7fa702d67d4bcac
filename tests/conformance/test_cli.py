"""The CLI: one engine, report files, seeds, and exit codes with and without an expected-failures baseline."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from agentrunner_conformance import PROFILES
from agentrunner_conformance.cli import cli

GALLERY = str(Path(__file__).with_name("gallery.py"))


@pytest.fixture(autouse=True)
def _generous_graces(monkeypatch: pytest.MonkeyPatch) -> None:
    """The named profiles with 2 s graces: the kit judges "stops within the grace" by the clock, and the echo
    runner in its own process overran smoke's 0.2 s after its deadline on a loaded machine. These tests are
    about the CLI, not about how fast a process is scheduled."""
    for name, profile in list(PROFILES.items()):
        monkeypatch.setitem(
            PROFILES, name, dataclasses.replace(profile, cancel_grace=2.0, deadline_grace=2.0)
        )


def test_checking_the_echo_runner_passes_and_writes_both_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 0; the JSON and JUnit reports list every requirement; the seed is printed."""
    json_path, xml_path = tmp_path / "report.json", tmp_path / "report.xml"
    code = cli(
        [
            "check",
            "agentrunner_runner_echo:EchoRunner",
            "--profile",
            "smoke",
            "--seed",
            "7",
            "--json",
            str(json_path),
            "--junit-xml",
            str(xml_path),
        ]
    )
    assert code == 0
    captured = capsys.readouterr()
    assert "seed 7" in captured.err
    assert "lifecycle" in captured.err  # progress display
    report = json.loads(json_path.read_text())
    assert report["seed"] == 7
    outcomes = {r["id"]: r["outcome"] for r in report["requirements"]}
    assert outcomes["result.terminal.exactly-one"] == "PASS"
    assert outcomes["capability.multimodal-input.no-crash"] == "SKIPPED"
    suite = ET.fromstring(xml_path.read_text())
    assert suite.get("failures") == "0"
    assert len(suite.findall("testcase")) == len(outcomes)


def test_a_failure_exits_1_and_prints_the_minimal_example(capsys: pytest.CaptureFixture[str]) -> None:
    """A broken runner fails with its requirement id and example in the summary."""
    code = cli(["check", f"{GALLERY}:NoTerminal", "--profile", "smoke", "--seed", "1", "--quiet"])
    assert code == 1
    out = capsys.readouterr().out
    assert "FAIL     result.terminal.exactly-one" in out
    assert "| context:" in out


def test_json_to_stdout_keeps_stdout_machine_readable(capsys: pytest.CaptureFixture[str]) -> None:
    """--json - prints only JSON on stdout."""
    code = cli(
        ["check", f"{GALLERY}:EmptySuccess", "--profile", "smoke", "--seed", "1", "--json", "-", "--quiet"]
    )
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in report["requirements"] if r["outcome"] == "FAIL"] == ["result.output.present"]


@pytest.mark.parametrize(
    ("listed", "expected_code"),
    [
        (["result.terminal.exactly-one"], 0),  # exactly the known failure
        ([], 1),  # a new failure
        (["result.terminal.exactly-one", "result.terminal.last"], 1),  # a stale entry that now passes
    ],
)
def test_expected_failures_accept_known_failures_and_reject_new_and_stale_ones(
    tmp_path: Path, listed: list[str], expected_code: int
) -> None:
    """Exit 0 only when the failures are exactly the listed ones."""
    baseline = tmp_path / "expected.yaml"
    baseline.write_text("expected_failures: [" + ", ".join(listed) + "]\n")
    code = cli(
        [
            "check",
            f"{GALLERY}:NoTerminal",
            "--profile",
            "smoke",
            "--seed",
            "1",
            "--quiet",
            "--expected-failures",
            str(baseline),
        ]
    )
    assert code == expected_code


def test_an_expected_failures_file_with_an_unknown_id_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 and the unknown id named."""
    baseline = tmp_path / "expected.yaml"
    baseline.write_text("- result.nonsense\n")
    code = cli(["check", f"{GALLERY}:NoTerminal", "--expected-failures", str(baseline)])
    assert code == 2
    assert "result.nonsense" in capsys.readouterr().err


def test_a_target_that_is_not_a_runner_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 2 for an unknown installed id and for a module attribute that is not a runner."""
    assert cli(["check", "plugin:nobody/nothing/default"]) == 2
    assert cli(["check", "json:dumps"]) == 2
    assert "not" in capsys.readouterr().err


def test_only_restricts_the_report_to_the_named_requirements(capsys: pytest.CaptureFixture[str]) -> None:
    """--only checks and reports just those ids."""
    code = cli(
        [
            "check",
            "agentrunner_runner_echo:EchoRunner",
            "--only",
            "result.terminal.exactly-one",
            "--profile",
            "smoke",
            "--json",
            "-",
            "--quiet",
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in report["requirements"]] == ["result.terminal.exactly-one"]


def test_the_requirements_command_lists_every_requirement(capsys: pytest.CaptureFixture[str]) -> None:
    """One entry per requirement, with level and section."""
    from agentrunner_conformance import REQUIREMENTS

    assert cli(["requirements"]) == 0
    out = capsys.readouterr().out
    assert all(requirement_id in out for requirement_id in REQUIREMENTS)


def test_out_of_process_checks_a_plugin_directory_through_the_wire(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The runner runs in a child process; its defects are still caught and its back-calls still checked."""
    (tmp_path / "main.py").write_text(
        "from agentrunner import AgentRunner, AgentRunnerManifest, I18nObject\n"
        "\n"
        "class NoTerminal(AgentRunner):\n"
        "    manifest = AgentRunnerManifest(id='plugin:t/remote/default', name='default', label=I18nObject(en_US='x'))\n"
        "\n"
        "    async def run(self, ctx, api):\n"
        "        yield self.emitter(ctx).message('from the child')\n"
    )
    (tmp_path / "manifest.yaml").write_text(
        "apiVersion: agentrunner/v1\nkind: AgentRunner\n"
        "metadata: {author: t, name: remote, label: {en_US: x}}\n"
        "execution: {python: {path: ./main.py, attr: NoTerminal}}\n"
    )
    code = cli(
        ["check", str(tmp_path), "--out-of-process", "--profile", "smoke", "--seed", "1", "--json", "-"]
    )
    assert code == 1
    captured = capsys.readouterr()
    assert "in its own process" in captured.err
    report = json.loads(captured.out)
    assert [r["id"] for r in report["requirements"] if r["outcome"] == "FAIL"] == [
        "result.terminal.exactly-one"
    ]


def test_out_of_process_passes_the_echo_plugin_directory() -> None:
    """The echo runner, loaded from runners/echo/manifest.yaml into a child process, is conformant."""
    echo_dir = Path(__file__).resolve().parents[2] / "runners" / "echo"
    assert (
        cli(["check", str(echo_dir), "--out-of-process", "--profile", "smoke", "--seed", "2", "--quiet"]) == 0
    )


def test_a_spent_budget_blocks_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    """``--budget 0``: no probe runs, so the run-based requirements are BLOCKED and the exit code is 1."""
    code = cli(["check", "agentrunner_runner_echo:EchoRunner", "--budget", "0", "--json", "-", "--quiet"])
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    blocked = [r for r in report["requirements"] if r["outcome"] == "BLOCKED"]
    assert blocked
    assert all("budget ran out" in r["message"] for r in blocked)
