"""pytest plugin of the conformance kit (entry point ``pytest11``).

It loads in every pytest session of a project that installs the kit, so it is inert and lazy: at import it
touches nothing but pytest, it adds options and one marker, and it imports the engine (Hypothesis, anyio, the
SDK) only when a test asks for one of its fixtures or ``--agentrunner-runner`` is given.

* ``--agentrunner-runner TARGET`` adds one test per requirement, checking TARGET (see the CLI for the forms);
* the ``agentrunner_check`` fixture is :func:`~agentrunner_conformance.check_runner` with the command line's
  profile and seed applied; ``agentrunner_report`` checks the runner named by the ``agentrunner_runner``
  marker (``@pytest.mark.agentrunner_runner("pkg.module:MyRunner")``; a class goes through ``.with_args``,
  since pytest takes a lone class argument for the decorated object) and returns the report;
* ``--agentrunner-expected-failures FILE`` turns listed failures into xfails and stale entries into failures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from agentrunner import AgentRunner

    from .report import Report, RequirementResult

__all__ = ["agentrunner_check", "agentrunner_report"]

_REPORTS = pytest.StashKey[dict[object, "Report"]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agentrunner", "agentrunner conformance kit")
    group.addoption(
        "--agentrunner-runner",
        metavar="TARGET",
        help="check this runner (module:Class, plugin directory or runner id): one test per requirement",
    )
    group.addoption(
        "--agentrunner-profile",
        choices=("smoke", "quick", "default", "thorough"),
        default=None,
        help="search budget of conformance checks (default: quick inside pytest)",
    )
    group.addoption(
        "--agentrunner-seed", type=int, default=None, help="Hypothesis seed of conformance checks"
    )
    group.addoption(
        "--agentrunner-expected-failures",
        metavar="FILE",
        help="requirement ids expected to fail: they xfail, and pass as stale-entry failures",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "agentrunner_runner(target): the runner (module:Class, or a class via with_args) agentrunner_report checks",
    )
    config.stash[_REPORTS] = {}


def _check(config: pytest.Config, target: object) -> Report:
    """Check *target* once per session with the command line's profile and seed."""
    reports = config.stash[_REPORTS]
    if target not in reports:
        from .engine import check_runner
        from .loading import load_target

        runner: Any = load_target(target) if isinstance(target, str) else target
        reports[target] = check_runner(
            runner,
            profile=config.getoption("agentrunner_profile") or "quick",
            seed=config.getoption("agentrunner_seed"),
        )
    return reports[target]


@pytest.fixture
def agentrunner_check(request: pytest.FixtureRequest) -> Callable[..., Report]:
    """:func:`~agentrunner_conformance.check_runner` with ``--agentrunner-profile`` / ``--agentrunner-seed``."""
    from .engine import check_runner

    config = request.config

    def run(target: type[AgentRunner] | Callable[[], AgentRunner], **kwargs: Any) -> Report:
        kwargs.setdefault("profile", config.getoption("agentrunner_profile") or "quick")
        kwargs.setdefault("seed", config.getoption("agentrunner_seed"))
        return check_runner(target, **kwargs)

    return run


@pytest.fixture
def agentrunner_report(request: pytest.FixtureRequest) -> Report:
    """The report of the runner named by the test's ``agentrunner_runner`` marker (checked once per session)."""
    marker = request.node.get_closest_marker("agentrunner_runner")
    target: object = marker.args[0] if marker is not None and marker.args else None
    if target is None:
        target = request.config.getoption("agentrunner_runner")
    if target is None:
        pytest.fail(
            "agentrunner_report needs @pytest.mark.agentrunner_runner('module:Class') or --agentrunner-runner"
        )
    return _check(request.config, target)


class RequirementItem(pytest.Item):
    """One requirement of the ``--agentrunner-runner`` target, as a test."""

    def __init__(self, *, requirement_id: str, target: str, expected: frozenset[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)  # pyright: ignore[reportUnknownMemberType]
        self.requirement_id = requirement_id
        self.target = target
        self.expected = expected

    def runtest(self) -> None:
        result: RequirementResult = _check(self.config, self.target).results[self.requirement_id]
        outcome = result.outcome.value
        listed = self.requirement_id in self.expected
        if outcome == "SKIPPED":
            pytest.skip(result.message)
        if outcome == "FAIL" and listed:
            pytest.xfail(f"expected failure: {result.message}")
        if outcome == "PASS" and listed:
            pytest.fail(
                f"{self.requirement_id} passes now: remove it from the expected failures", pytrace=False
            )
        if outcome in {"FAIL", "BLOCKED"}:
            pytest.fail(
                f"{outcome} {self.requirement_id}: {result.message}\n{result.example or ''}\nseed: {result.seed}",
                pytrace=False,
            )

    def reportinfo(self) -> tuple[str, int | None, str]:
        return self.target, None, f"agentrunner conformance: {self.requirement_id}"


@pytest.hookimpl(tryfirst=True)  # before -k / -m deselection, so they apply to these items too
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    target = config.getoption("agentrunner_runner")
    if not target:
        return
    from .report import load_expected_failures
    from .requirements import REQUIREMENTS

    path = config.getoption("agentrunner_expected_failures")
    expected = frozenset[str]() if path is None else load_expected_failures(config.rootpath / path)
    items.extend(_items(session, str(target), expected, list(REQUIREMENTS)))


def _items(
    session: pytest.Session, target: str, expected: frozenset[str], ids: list[str]
) -> Iterator[pytest.Item]:
    for requirement_id in ids:
        yield RequirementItem.from_parent(  # pyright: ignore[reportUnknownMemberType]
            session,
            name=f"conformance[{requirement_id}]",
            requirement_id=requirement_id,
            target=target,
            expected=expected,
        )
