"""Expiry of the per-session workspaces code-executing runners work in (``<data_dir>/harness/sessions/*``).

The harness kit creates one directory per native session under the host's workspace root and keeps a marker
file in it, :data:`WORKSPACE_MARKER`: its modification time is the workspace's last use (the start and the end
of each run), and a run holds a shared ``flock`` on it while it lasts. :func:`sweep_workspaces` deletes a
workspace unused for longer than the TTL, after taking the marker's lock exclusively without waiting (a
workspace in use is skipped, whatever its age) and looking at its last use again under the lock. A run that
reaches a workspace while it is being deleted waits for the lock and then starts in a fresh directory.

Only directories the host's harness support created are swept: a binding's configured ``working-directory``
(inside an operator-allowed root) is never touched.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Final

__all__ = ["SESSIONS_DIRECTORY", "WORKSPACE_MARKER", "sweep_workspaces"]

log = logging.getLogger(__name__)

WORKSPACE_MARKER: Final = ".agentrunner-workspace"
"""The marker file of a session workspace (the harness kit's ``WORKSPACE_MARKER``; a test keeps them equal)."""
SESSIONS_DIRECTORY: Final = "sessions"
"""Where, under the workspace root, the per-session workspaces are."""


def _last_use(workspace: Path) -> float:
    marker = workspace / WORKSPACE_MARKER
    try:
        return marker.stat().st_mtime
    except FileNotFoundError:
        return workspace.stat().st_mtime  # made by a runner that predates the marker


def _writable(path: str) -> None:
    # Projected skills are read-only (directories r-x): rmtree needs write permission on every directory.
    for root, dirs, _files in os.walk(path):
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(root, name), stat.S_IRWXU, follow_symlinks=False)
    with contextlib.suppress(OSError):
        os.chmod(path, stat.S_IRWXU)


def _remove_if_unused(workspace: Path, *, last_use: float, ttl_seconds: float, now: float) -> bool:
    marker = workspace / WORKSPACE_MARKER
    existed = marker.exists()
    fd = os.open(marker, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a run holds it
        # A run may have ended (and marked its use) between the first look and the lock; a marker this sweep
        # created itself says nothing (creating it also moved the directory's own time).
        if existed:
            last_use = os.fstat(fd).st_mtime
        if now - last_use < ttl_seconds:
            return False
        _writable(str(workspace))
        shutil.rmtree(workspace)
        return True
    finally:
        os.close(fd)  # releases the lock; a run waiting on it then sees the marker gone and starts over


def sweep_workspaces(root: Path, *, ttl_seconds: float, now: float | None = None) -> list[str]:
    """Delete the session workspaces under *root* unused for *ttl_seconds* and not in use; their names.

    A workspace whose deletion fails is left for the next sweep (logged)."""
    sessions = root / SESSIONS_DIRECTORY
    if ttl_seconds <= 0 or not sessions.is_dir():
        return []
    moment = time.time() if now is None else now
    removed: list[str] = []
    for entry in sorted(sessions.iterdir()):
        if entry.is_symlink() or not entry.is_dir():
            continue
        try:
            last_use = _last_use(entry)
            if moment - last_use < ttl_seconds:
                continue
            if _remove_if_unused(entry, last_use=last_use, ttl_seconds=ttl_seconds, now=moment):
                removed.append(entry.name)
        except OSError as exc:
            log.warning("could not remove expired workspace %s: %s", entry.name, exc)
    return removed
