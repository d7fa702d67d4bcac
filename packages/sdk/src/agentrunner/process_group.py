"""A child's process group, signalled without the PID-reuse hazard (the host's plugin processes and the
harness runners' CLIs both use it).

The child is started in a new session, so its pid is also its process group id (pgid), recorded here at spawn.
A pgid names the group only while the kernel keeps that number allocated: as long as the leader is unreaped or
any member lives. Once the leader is reaped (asyncio reaps it on its own, from a watcher thread on 3.11) and the
group empties, the number is free, and with ``pid_max`` at 32768 a busy machine hands it out again; ``killpg`` on
it would then hit a stranger's group. So the group is signalled by number only while the leader is provably not
reaped — checked through a pidfd opened at spawn, which names that one process whatever its number becomes —
and after that, the members still alive are found in ``/proc`` and each signalled through its own pidfd.
A child that exits at once may be reaped before the caller records it; the pidfd cannot be opened then (or
names a process that is not this one's child), and the group counts as reaped from the start.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

__all__ = ["ProcessGroup"]

_PROC = Path("/proc")


class ProcessGroup:
    """The group a freshly spawned child leads (``start_new_session=True``)."""

    def __init__(self, leader_pid: int) -> None:
        self.pgid: int = leader_pid
        """The group's id, recorded at spawn (a session leader's pgid is its pid)."""
        self._leader_fd: int | None = None
        self._pidfds = hasattr(os, "pidfd_open")
        if not self._pidfds:
            return  # not Linux
        try:
            fd = os.pidfd_open(leader_pid)
        except ProcessLookupError:
            # A child that exits at once can be reaped by asyncio's watcher before its caller gets here.
            return
        except OSError:
            self._pidfds = False  # a kernel before 5.3
            return
        if _not_our_child(fd):
            # Reaped in between, and the number already names another process: never pin that one.
            os.close(fd)
            return
        self._leader_fd = fd

    def leader_reaped(self, *, returncode: int | None) -> bool:
        """Whether the leader's exit status has been collected (*returncode*: what asyncio knows so far)."""
        fd = self._leader_fd
        if fd is None:
            # With pidfds, no leader pidfd means it was reaped before it could be opened (or it was closed).
            return self._pidfds or returncode is not None
        try:
            # WNOWAIT: look, never reap (asyncio does that). ChildProcessError: it has been reaped already.
            os.waitid(os.P_PIDFD, fd, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        except OSError:
            return returncode is not None
        return False

    def alive(self, *, returncode: int | None) -> bool:
        """Whether a member of the group still runs (zombies do not count: an init that never reaps can keep
        them for good)."""
        if not self.leader_reaped(returncode=returncode):
            # The unreaped leader holds the number, so it names this group: look for a running member.
            if not _PROC.is_dir():
                try:
                    os.killpg(self.pgid, 0)
                except ProcessLookupError:
                    return False
                except PermissionError:  # a member changed uid; it still counts
                    pass
                return True
            return any(_running_in(self.pgid, pid) for pid in _pids())
        return bool(self._survivors())

    def signal(self, sig: int, *, returncode: int | None) -> None:
        """Send *sig* to every live member of the group (the leader included while it lives)."""
        if not self.leader_reaped(returncode=returncode):
            # The unreaped leader holds the number: it still names this group.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, sig)
            return
        for _ in range(5):  # a member may fork while the others are signalled: look again
            survivors = self._survivors()
            for pid in survivors:
                self._signal_member(pid, sig)
            if not survivors or sig != signal.SIGKILL:
                return

    def close(self) -> None:
        """Release the leader's pidfd (the group is no longer signalled)."""
        fd, self._leader_fd = self._leader_fd, None
        if fd is not None:
            os.close(fd)

    def _survivors(self) -> list[int]:
        """Members left after the leader was reaped (what it spawned), never a process holding the leader's pid:
        a live process with that number is a stranger (the number was reused), and then so is the group."""
        if not self._pidfds or not _PROC.is_dir():
            return []  # no safe way to find them: leave them rather than risk signalling a stranger
        if _stat(self.pgid) is not None:
            return []
        return [pid for pid in _pids() if _running_in(self.pgid, pid)]

    def _signal_member(self, pid: int, sig: int) -> None:
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return  # gone already
        try:
            # The number may have changed hands between the scan and the open: check the process now pinned.
            stat = _stat(pid)
            if stat is not None and stat[1] == self.pgid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    signal.pidfd_send_signal(fd, sig)
        finally:
            os.close(fd)


def _not_our_child(pidfd: int) -> bool:
    """Whether the process *pidfd* names is not (or no longer) an unreaped child of this process."""
    try:
        os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    except OSError:
        return False  # waitid cannot take a pidfd (a kernel before 5.4): trust the fresh open
    return False


def _pids() -> list[int]:
    return [int(entry.name) for entry in _PROC.iterdir() if entry.name.isdigit()]


def _running_in(pgid: int, pid: int) -> bool:
    """*pid* runs (is no zombie) in the group *pgid* of the session *pgid* (the one its leader started)."""
    stat = _stat(pid)
    return stat is not None and stat[1] == pgid and stat[2] == pgid and stat[0] != "Z"


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, pgid, sid) of a process from ``/proc/<pid>/stat``, or None when there is none."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses, so split after the last ")".
    fields = raw.rsplit(")", 1)[-1].split()
    try:
        return fields[0], int(fields[2]), int(fields[3])
    except (IndexError, ValueError):
        return None
