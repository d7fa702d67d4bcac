"""Several hosts on one database: announcements between them (PostgreSQL ``LISTEN``/``NOTIFY``).

* :class:`Notifications` holds the host's listening connection (reconnecting) and sends notifications.
* :class:`Membership` registers the host, renews its lease and closes the runs of hosts that are gone.
"""

from .membership import Membership, default_machine_name
from .notifications import KEEPALIVE_SECONDS, MAX_RECONNECT_DELAY, Notifications

__all__ = ["KEEPALIVE_SECONDS", "MAX_RECONNECT_DELAY", "Membership", "Notifications", "default_machine_name"]
