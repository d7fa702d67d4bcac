"""Where a harness run works: a directory inside the operator's allowlist, checked after ``realpath``.

The working directory is, in order: the binding's ``working-directory``, the one stored in conversation
state (``external.working_directory``) from an earlier turn, or a directory the runner creates per native
session under the workspace root. Whatever the source, it must resolve (symlinks followed, ``..`` folded)
inside one of the allowed roots. The context directory is relative and stays inside the working directory.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Final, cast

from .errors import HarnessFailure
from .jsonvalues import as_list
from .mcp_pins import MCPServerPin, parse_pins
from .projection import SkillPin, parse_skill_pins

__all__ = [
    "HARNESS_METADATA_KEY",
    "WORKSPACE_MARKER",
    "WorkspaceLease",
    "WorkspacePolicy",
    "context_directory",
    "ensure_private_dir",
    "resolve_working_directory",
    "run_directory",
]

HARNESS_METADATA_KEY: Final = "harness"
"""Key of ``ctx.runtime.metadata`` under which the host passes the operator's workspace policy."""
_RUN_ID: Final = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")
WORKSPACE_MARKER: Final = ".agentrunner-workspace"
"""Marker file of a per-session workspace: its modification time is the last use, and a run holds a shared
lock on it; the host's sweep deletes a workspace unused past its TTL only under an exclusive lock."""
_LEASE_ATTEMPTS: Final = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspacePolicy:
    """The operator's rules for harness workspaces (``[security]`` of the host config)."""

    root: Path
    """Where per-session working directories are created."""
    allowed_roots: tuple[Path, ...] = ()
    """Directories a configured working directory may be inside (``root`` always is)."""
    mcp_server_pins: Mapping[str, MCPServerPin] = field(default_factory=dict[str, MCPServerPin])
    """Extra MCP servers a binding may add to the harness: name → what it must run or reach."""
    allow_danger_full_access: bool = False
    """Whether Codex's ``danger-full-access`` sandbox may be configured."""
    skill_pins: Mapping[str, SkillPin] | None = None
    """Skills the operator approved (name → digest, version); ``None``: skills are not verified."""

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, object]) -> WorkspacePolicy:
        """The policy the host put in ``runtime.metadata['harness']``; without one (a host that predates it,
        the conformance kit) a private directory under the system temp dir, and nothing else."""
        raw = metadata.get(HARNESS_METADATA_KEY)
        if not isinstance(raw, Mapping):
            return cls(root=Path(tempfile.gettempdir()) / f"agentrunner-harness-{os.getuid()}")
        data = cast(Mapping[str, object], raw)
        root = data.get("workspace_root")
        default_root = Path(tempfile.gettempdir()) / f"agentrunner-harness-{os.getuid()}"
        return cls(
            root=Path(root) if isinstance(root, str) else default_root,
            allowed_roots=tuple(Path(str(p)) for p in as_list(data.get("allowed_roots"))),
            mcp_server_pins=parse_pins(data.get("mcp_server_pins")),
            allow_danger_full_access=data.get("allow_danger_full_access") is True,
            skill_pins=parse_skill_pins(data.get("skill_pins")),
        )

    def roots(self) -> list[Path]:
        """The allowed roots, resolved (the workspace root first)."""
        return [Path(os.path.realpath(p)) for p in (self.root, *self.allowed_roots)]

    def check_inside(self, path: Path, *, what: str) -> Path:
        """*path* resolved; :class:`HarnessFailure` ``path_denied`` unless it lies inside an allowed root."""
        real = Path(os.path.realpath(path))
        for root in self.roots():
            if real == root or real.is_relative_to(root):
                return real
        raise HarnessFailure(
            "path_denied", f"{what} {str(path)!r} resolves outside the operator's allowed workspace roots"
        )


def ensure_private_dir(path: Path) -> Path:
    """Create *path* (owner-only) if needed."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def resolve_working_directory(
    policy: WorkspacePolicy, *, configured: str | None, stored: str | None, session_key: str
) -> Path:
    """The run's working directory (see the module docstring)."""
    if configured:
        path = Path(configured)
        if not path.is_absolute():
            path = policy.root / path
        real = policy.check_inside(path, what="working-directory")
        if not real.is_dir():
            raise HarnessFailure(
                "working_directory_not_found", f"working-directory {configured!r} does not exist"
            )
        return real
    if stored:
        path = Path(stored)
        real = policy.check_inside(path, what="stored working directory")
        if real.is_dir():
            return real
        # The directory was cleaned up since the last turn: start over in a fresh one.
    digest = hashlib.sha256(session_key.encode()).hexdigest()[:32]
    ensure_private_dir(policy.root)
    return policy.check_inside(ensure_private_dir(policy.root / "sessions" / digest), what="workspace")


def context_directory(workdir: Path, relative: str) -> Path:
    """``<workdir>/<relative>``, created; ``path_denied`` for an absolute path, ``..`` or a symlink that
    leads out of the working directory."""
    pure = PurePosixPath(relative)
    if pure.is_absolute() or Path(relative).is_absolute():
        raise HarnessFailure(
            "path_denied", f"context-directory {relative!r} must be relative to the working directory"
        )
    if ".." in pure.parts:
        raise HarnessFailure("path_denied", f"context-directory {relative!r} must not contain '..'")
    target = workdir / pure
    real = Path(os.path.realpath(target))
    if not (real == workdir or real.is_relative_to(workdir)):
        raise HarnessFailure(
            "path_denied", f"context-directory {relative!r} leads out of the working directory"
        )
    return ensure_private_dir(real)


def run_directory(context_dir: Path, run_id: str) -> Path:
    """``<context_dir>/<run_id>``, created owner-only."""
    if not _RUN_ID.match(run_id):
        raise HarnessFailure("context_injection_error", f"run id {run_id!r} cannot name a directory")
    return ensure_private_dir(context_dir / run_id)


async def _lock_shared(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        # a sweep holds it only while it deletes the workspace; wait for it off the event loop
        await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_SH)


def _same_file(path: Path, fd: int) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def _is_session_workspace(policy: WorkspacePolicy, workdir: Path) -> bool:
    return workdir.parent == Path(os.path.realpath(policy.root / "sessions"))


class WorkspaceLease:
    """A run's hold on its per-session workspace (:data:`WORKSPACE_MARKER`): the workspace's use is marked when
    the run starts and when it ends, and the host's expiry sweep never deletes it in between.

    Workspaces a binding configured (outside ``<root>/sessions``) are not the host's to expire and get no
    marker."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    @classmethod
    async def acquire(cls, policy: WorkspacePolicy, workdir: Path) -> WorkspaceLease:
        """Hold *workdir*; waits while a sweep is deleting it, then recreates it."""
        if not _is_session_workspace(policy, workdir):
            return cls(None)
        marker = workdir / WORKSPACE_MARKER
        for _ in range(_LEASE_ATTEMPTS):
            ensure_private_dir(workdir)
            try:
                fd = os.open(marker, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            except FileNotFoundError:
                continue  # swept between the mkdir and the open
            try:
                await _lock_shared(fd)
                current = _same_file(marker, fd)
            except BaseException:
                os.close(fd)  # cancelled while waiting: a lock taken later goes with the descriptor
                raise
            if current:
                os.utime(fd)
                return cls(fd)
            os.close(fd)  # the workspace was deleted while we waited: make it again
        raise HarnessFailure(
            "working_directory_not_found", f"workspace {workdir} kept disappearing", retryable=True
        )

    def release(self) -> None:
        """Mark the use's end and let the sweep have it once it expires."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.utime(fd)
        finally:
            os.close(fd)
