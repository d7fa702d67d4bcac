"""The pytest plugin: inert and lazy until used, options under --agentrunner-*, one test per requirement."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest_plugins = ["pytester"]

ECHO = "agentrunner_runner_echo:EchoRunner"


@pytest.fixture(autouse=True)
def _quiet_ini(request: pytest.FixtureRequest) -> None:
    """Inner sessions get the same asyncio loop scope as this repository, so they warn about nothing."""
    if "pytester" in request.fixturenames:
        pytester: pytest.Pytester = request.getfixturevalue("pytester")
        pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def test_the_plugin_module_imports_nothing_heavy() -> None:
    """Loading the plugin (as every pytest session does) pulls in neither Hypothesis, anyio nor the SDK."""
    code = (
        "import sys; import agentrunner_conformance.pytest_plugin;"
        "heavy = [m for m in ('hypothesis', 'anyio', 'agentrunner', 'agentrunner_conformance.engine', 'pydantic')"
        " if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_options_are_namespaced_in_an_agentrunner_group(pytester: pytest.Pytester) -> None:
    """--help shows the group and its --agentrunner-* options."""
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*agentrunner conformance kit*", "*--agentrunner-runner=TARGET*"])
    assert "--agentrunner-expected-failures" in result.stdout.str()


def test_an_unrelated_test_session_is_untouched(pytester: pytest.Pytester) -> None:
    """Without the options or fixtures, the plugin adds no tests and changes no outcome."""
    pytester.makepyfile("def test_plain():\n    assert True\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_the_runner_option_adds_one_test_per_requirement(pytester: pytest.Pytester) -> None:
    """The echo runner's requirements pass or skip, one item each."""
    from agentrunner_conformance import REQUIREMENTS

    result = pytester.runpytest(
        "--agentrunner-runner",
        ECHO,
        "--agentrunner-seed",
        "3",
        "--agentrunner-profile",
        "smoke",
        "-p",
        "no:cacheprovider",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0
    assert outcomes["passed"] + outcomes["skipped"] == len(REQUIREMENTS)


def test_expected_failures_xfail_and_stale_entries_fail(pytester: pytest.Pytester) -> None:
    """A listed failure is an xfail; a listed requirement that passes is reported as a failure."""
    pytester.makepyfile(
        broken="""
from agentrunner import AgentRunner, AgentRunnerManifest, I18nObject


class NoTerminal(AgentRunner):
    manifest = AgentRunnerManifest(id="plugin:t/broken/default", name="default", label=I18nObject(en_US="x"))

    async def run(self, ctx, api):
        yield self.emitter(ctx).message("hi")
"""
    )
    pytester.makefile(".yaml", expected="[result.terminal.exactly-one, result.terminal.last]\n")
    pytester.syspathinsert()
    result = pytester.runpytest(
        "--agentrunner-runner",
        "broken:NoTerminal",
        "--agentrunner-expected-failures",
        "expected.yaml",
        "--agentrunner-seed",
        "1",
        "--agentrunner-profile",
        "smoke",
        "-p",
        "no:cacheprovider",
    )
    outcomes = result.parseoutcomes()
    assert outcomes["xfailed"] == 1
    assert outcomes["failed"] == 1
    result.stdout.fnmatch_lines(["*result.terminal.last passes now*"])


def test_the_report_fixture_checks_the_runner_of_the_marker(pytester: pytest.Pytester) -> None:
    """@pytest.mark.agentrunner_runner plus agentrunner_report gives a Report to assert on."""
    pytester.makepyfile(
        """
import pytest
from agentrunner_runner_echo import EchoRunner


@pytest.mark.agentrunner_runner("agentrunner_runner_echo:EchoRunner")
def test_echo_is_conformant(agentrunner_report):
    assert agentrunner_report.ok, agentrunner_report.summary()
    assert agentrunner_report.profile == "quick"


def test_check_fixture(agentrunner_check):
    report = agentrunner_check(EchoRunner, only=["result.terminal.exactly-one"])
    assert report.failed_ids == set()
    assert report.seed == 5
"""
    )
    result = pytester.runpytest("--agentrunner-seed", "5", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
