"""The ids the host makes for runs and events: opaque to everyone else, ordered by creation time."""

from __future__ import annotations

import secrets
import time

__all__ = ["event_id", "ordered_hex"]


def ordered_hex() -> str:
    """32 lowercase hex digits (the shape of ``uuid4().hex``): the Unix time in milliseconds (12 digits), then
    80 random bits from :mod:`secrets`.

    Ids made later sort after earlier ones, so the indexes keyed by them (the runs' and results' primary
    keys, the events' unique id and run id) grow at their right edge: with random ids every insert dirtied a
    random leaf page of each of them, and each such page is one more WAL frame written at commit and one more
    page the checkpoint copies."""
    return f"{time.time_ns() // 1_000_000:012x}{secrets.token_hex(10)}"


def event_id() -> str:
    """An id for an event the host makes itself (a platform event submitted without one, a host record):
    ``evt_`` and :func:`ordered_hex`. One prefix for all of them: the events' unique index then grows at one
    right edge. With host records under ``host_`` and the rest under ``evt_``, the ``evt_`` entries were
    inserted just before the first ``host_`` one, in the middle of the index, whose splits there leave half
    filled pages behind (an echo request's commit wrote 2.9 WAL frames of that index)."""
    return "evt_" + ordered_hex()
