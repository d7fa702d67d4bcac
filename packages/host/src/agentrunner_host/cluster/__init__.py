"""Several hosts on one database: announcements between them (PostgreSQL ``LISTEN``/``NOTIFY``).

* :class:`Notifications` holds the host's listening connection (reconnecting) and sends notifications.
"""

from .notifications import KEEPALIVE_SECONDS, MAX_RECONNECT_DELAY, Notifications

__all__ = ["KEEPALIVE_SECONDS", "MAX_RECONNECT_DELAY", "Notifications"]
