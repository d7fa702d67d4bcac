"""The data directory is private to the host: created (or tightened to) 0700, so the database, its WAL and
SHM files, artifacts and ``cursor.key`` inside it are unreachable for other users whatever
their own modes (they are 0600 too: see :mod:`agentrunner_host.stores.engine` and the stores)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

__all__ = ["prepare_data_dir"]

log = logging.getLogger("agentrunner.service")


def prepare_data_dir(path: Path) -> None:
    """Create *path* (and missing parents) with mode 0700, or tighten it to 0700 when we own it."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.stat()
    if info.st_mode & 0o077 and info.st_uid == os.geteuid():
        log.warning(
            "data directory %s was readable by others (mode %o); now 0700", path, info.st_mode & 0o777
        )
        path.chmod(0o700)
