"""Suite-wide hooks. The suite runs in random order (pytest-randomly, a dev dependency): the header says
``Using --randomly-seed=N``, but ``-q`` hides the header, so the end of every run says the seed again and how
to repeat that order."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pg_databases import temporary_pg_database


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("randomly"):
        return  # -p no:randomly: the order is the files' own
    seed = config.getoption("randomly_seed", default=None)
    if isinstance(seed, int):
        terminalreporter.write_line(f"random order: rerun it with -p randomly --randomly-seed={seed}")


@pytest.fixture
async def pg_database() -> AsyncIterator[str]:
    """The URL of a PostgreSQL database created for the test and dropped afterwards (a skip without
    ``AGENTRUNNER_TEST_PG_URL``)."""
    async with temporary_pg_database() as url:
        yield url
