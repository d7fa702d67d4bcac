"""The console's login rate limit: a client that sent too many wrong tokens within a window is refused
(429 with ``Retry-After``) until its oldest failure leaves the window; a right token clears its record.

Clients are told apart by the address uvicorn reports (``X-Forwarded-For`` counts only from the proxies in
``FORWARDED_ALLOW_IPS``). Memory is bounded: past ``max_clients`` addresses the least recently failing one
is forgotten.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Final

__all__ = ["DEFAULT_MAX_CLIENTS", "LoginThrottle"]

DEFAULT_MAX_CLIENTS: Final = 10_000
"""Client addresses remembered at most."""


class LoginThrottle:
    """Failed logins per client in a sliding window."""

    def __init__(
        self,
        *,
        max_failures: int,
        window_seconds: float,
        max_clients: int = DEFAULT_MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_failures = max_failures
        """Failures allowed within the window."""
        self.window_seconds = window_seconds
        """The window's length."""
        self._max_clients = max_clients
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def _recent(self, client: str, now: float) -> deque[float] | None:
        times = self._failures.get(client)
        if times is None:
            return None
        while times and times[0] <= now - self.window_seconds:
            times.popleft()
        if not times:
            del self._failures[client]
            return None
        return times

    def retry_after(self, client: str) -> int | None:
        """Whole seconds *client* must wait before it may try again, or ``None`` when it may try now."""
        now = self._clock()
        times = self._recent(client, now)
        if times is None or len(times) < self.max_failures:
            return None
        return max(1, math.ceil(times[0] + self.window_seconds - now))

    def failed(self, client: str) -> None:
        """Record a wrong token from *client*."""
        now = self._clock()
        times = self._recent(client, now)
        if times is None:
            times = self._failures[client] = deque(maxlen=self.max_failures)
        times.append(now)
        self._failures.move_to_end(client)
        while len(self._failures) > self._max_clients:
            self._failures.popitem(last=False)

    def succeeded(self, client: str) -> None:
        """A right token from *client*: forget its failures."""
        self._failures.pop(client, None)
