"""This host's membership among the hosts of one database: registration, heartbeat, and closing the runs of
hosts that are gone.

On start the host forgets its own machine's dead incarnations (same machine name, a process id that no
longer runs, or its own: a container restarted with the same pid), registers a new incarnation, and (with
recovery) closes every orphaned run: those of its previous incarnation at once, those of other hosts only
once their lease has expired. Then, every heartbeat, it renews its lease and closes the runs of hosts whose
lease expired since. A run is never closed while its owner's lease is live.

A host that could not renew in time (database unreachable, process stalled longer than the lease) may find
its runs closed by another host: it logs that loudly; the runs' own ends are then refused by the store
(``RunStateError``), so nothing is recorded twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from typing import Final

from agentrunner_host.stores import HostStore, RunStore

__all__ = ["Membership", "default_machine_name"]

log = logging.getLogger("agentrunner.cluster")

_RETRY_SECONDS: Final = 1.0


def default_machine_name() -> str:
    """The machine's host name."""
    return socket.gethostname() or "localhost"


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another account's process
    return True


class Membership:
    """Registration and heartbeat of this host (see the module docstring)."""

    def __init__(
        self,
        hosts: HostStore,
        runs: RunStore,
        *,
        machine: str,
        heartbeat_seconds: float,
        lease_seconds: float,
    ) -> None:
        self._hosts = hosts
        self._runs = runs
        self.machine = machine
        """Machine name recorded with the incarnation."""
        self.host_id = "host_" + uuid.uuid4().hex
        """This incarnation's id (recorded as the owner of its runs)."""
        self.heartbeat_seconds = heartbeat_seconds
        """Seconds between renewals."""
        self.lease_ms = int(lease_seconds * 1000)
        """Lease length, milliseconds."""
        self.closed_runs: list[str] = []
        """Runs of other (gone) hosts this host closed since it started."""
        self._task: asyncio.Task[None] | None = None
        self._reap = False

    async def join(self, *, recover: bool) -> list[str]:
        """Register this incarnation; with *recover*, forget this machine's dead incarnations, close the
        orphaned runs now (including those recorded without an owner) and keep closing those of hosts whose
        lease expires. Returns the runs closed."""
        pid = os.getpid()
        if recover:
            dead = [
                h.host_id
                for h in await self._hosts.registered(machine=self.machine)
                if h.pid == pid or not _process_alive(h.pid)
            ]
            if dead:
                log.info("previous incarnation(s) of this machine's host are gone: %s", ", ".join(dead))
            await self._hosts.forget(dead)
        await self._hosts.register(self.host_id, machine=self.machine, pid=pid, lease_ms=self.lease_ms)
        self._runs.owner_host = self.host_id
        self._reap = recover
        if not recover:
            return []
        return await self._runs.close_interrupted(
            ended_at=_now_ms(), where=self._hosts.orphaned(include_unowned=True)
        )

    def start(self) -> None:
        """Start the heartbeat task."""
        if self._task is None:
            self._task = asyncio.create_task(self._beat(), name="agentrunner-heartbeat")

    async def leave(self) -> None:
        """Stop the heartbeat and remove this incarnation (call after its runs ended)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        try:
            await self._hosts.leave(self.host_id)
        except Exception as exc:
            log.warning("could not deregister host %s: %s (its lease will expire)", self.host_id, exc)

    async def beat(self) -> list[str]:
        """One heartbeat: renew the lease, then close the runs of hosts whose lease expired."""
        if not await self._hosts.renew(self.host_id, lease_ms=self.lease_ms):
            log.error(
                "host %s renewed its lease too late: other hosts may have closed its runs as host_restarted",
                self.host_id,
            )
            with contextlib.suppress(Exception):
                await self._hosts.register(
                    self.host_id, machine=self.machine, pid=os.getpid(), lease_ms=self.lease_ms
                )
        if not self._reap:
            return []
        closed = await self._runs.close_interrupted(
            ended_at=_now_ms(),
            message="the host executing the run stopped renewing its lease",
            where=self._hosts.orphaned(include_unowned=False),
        )
        if closed:
            log.warning("closed %d run(s) of hosts whose lease expired: %s", len(closed), closed)
            self.closed_runs.extend(closed)
        await self._hosts.prune()
        return closed

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_seconds)
            try:
                await self.beat()
            except Exception as exc:
                log.warning("heartbeat of host %s failed: %s", self.host_id, exc)
                await asyncio.sleep(_RETRY_SECONDS)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
