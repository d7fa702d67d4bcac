"""Suite-wide hooks. The suite runs in random order (pytest-randomly, a dev dependency): the header says
``Using --randomly-seed=N``, but ``-q`` hides the header, so the end of every run says the seed again and how
to repeat that order."""

from __future__ import annotations

import pytest


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("randomly"):
        return  # -p no:randomly: the order is the files' own
    seed = config.getoption("randomly_seed", default=None)
    if isinstance(seed, int):
        terminalreporter.write_line(f"random order: rerun it with -p randomly --randomly-seed={seed}")
