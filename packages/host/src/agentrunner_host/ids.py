"""The ids the host makes for runs and events: opaque to everyone else, ordered by creation time."""

from __future__ import annotations

import secrets
import time

__all__ = ["ordered_hex"]


def ordered_hex() -> str:
    """32 lowercase hex digits (the shape of ``uuid4().hex``): the Unix time in milliseconds (12 digits), then
    80 random bits from :mod:`secrets`.

    Ids made later sort after earlier ones, so the indexes keyed by them (the runs' and results' primary
    keys, the events' unique id and run id) grow at their right edge: with random ids every insert dirtied a
    random leaf page of each of them, and each such page is one more WAL frame written at commit and one more
    page the checkpoint copies."""
    return f"{time.time_ns() // 1_000_000:012x}{secrets.token_hex(10)}"
