"""The ids the host makes (runs, events): the shape of a uuid's hex, ordered by creation time."""

from __future__ import annotations

import re

import pytest
from agentrunner_host import ids


class FakeClock:
    """``time`` with a ``time_ns`` that answers the given instants in turn."""

    def __init__(self, *instants_ns: int) -> None:
        self._instants = list(instants_ns)

    def time_ns(self) -> int:
        return self._instants.pop(0)


def test_ids_made_later_sort_after_and_keep_the_shape_of_a_uuid_hex(monkeypatch: pytest.MonkeyPatch) -> None:
    """A later millisecond sorts after, whatever the random part; within one millisecond ids still differ."""
    ms = 1_796_613_977_916
    monkeypatch.setattr(ids, "time", FakeClock(ms * 1_000_000, (ms + 1) * 1_000_000, (ms + 1) * 1_000_000))
    first, second, third = ids.ordered_hex(), ids.ordered_hex(), ids.ordered_hex()
    for made in (first, second, third):
        assert re.fullmatch(r"[0-9a-f]{32}", made), made
    assert first < second
    assert first[:12] == f"{ms:012x}"
    assert second[:12] == third[:12]
    assert second != third
