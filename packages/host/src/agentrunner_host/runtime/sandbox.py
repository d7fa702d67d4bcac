"""Host-level isolation of plugin processes: another user, resource limits, and a host that keeps its secrets.

- :class:`PluginUser`: plugin processes run under a dedicated unprivileged account when the host runs as root.
  Another uid cannot read ``/proc/<host pid>/environ``, the host's memory, its data directory (0700) or the
  database (0600).
- :class:`ProcessLimits`: ``setrlimit`` quotas set in each plugin process before it runs any code: CPU
  seconds, address space, open files, bytes written to any one file. A process killed by its CPU or file-size limit ends its runs with
  :data:`QUOTA_EXCEEDED`.
- :func:`make_non_dumpable`: ``prctl(PR_SET_DUMPABLE, 0)`` on the host, so a process of the *same* uid cannot
  read its ``/proc`` files (environ, mem, maps) or attach a debugger to it.
- :func:`scrub_environ`: removes the variables the host has read its secrets from out of ``os.environ``, so
  nothing the host starts later inherits them by accident.

A container or cgroup adds what these cannot: a memory limit on resident memory (not address space), a limit
for a whole process tree, a private file-system view and network policy (docs/security.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import pwd
import resource
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Final

from agentrunner_host.errors import ConfigurationError

__all__ = [
    "DEFAULT_PLUGIN_USER",
    "QUOTA_EXCEEDED",
    "PluginUser",
    "ProcessLimits",
    "ensure_plugin_user",
    "is_dumpable",
    "make_non_dumpable",
    "quota_breach",
    "scrub_environ",
]

QUOTA_EXCEEDED: Final = "runtime.quota_exceeded"
"""Failure code of runs whose plugin process was stopped by one of its resource limits."""
DEFAULT_PLUGIN_USER: Final = "agentrunner-plugin"
"""Name of the dedicated account plugins run as (create it with ``useradd --system``)."""

_PR_SET_DUMPABLE: Final = 4
_QUOTA_SIGNALS: Final = {signal.SIGXCPU: "its CPU time limit", signal.SIGXFSZ: "its file size limit"}


@dataclass(frozen=True, slots=True)
class PluginUser:
    """The account plugin processes run as."""

    name: str
    """Login name."""
    uid: int
    """User id."""
    gid: int
    """Primary group id."""

    @classmethod
    def lookup(cls, name: str) -> PluginUser:
        """The account *name*; raises :class:`ConfigurationError` when it does not exist or is root."""
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise ConfigurationError(
                f"plugin user {name!r} does not exist (create it: useradd --system --no-create-home {name})"
            ) from None
        if entry.pw_uid == 0:
            raise ConfigurationError(f"plugin user {name!r} is root; plugins must run unprivileged")
        return cls(name=entry.pw_name, uid=entry.pw_uid, gid=entry.pw_gid)


@dataclass(frozen=True, kw_only=True, slots=True)
class ProcessLimits:
    """Resource limits of one plugin process (``None`` = inherited from the host)."""

    cpu_seconds: int | None = None
    """CPU time (``RLIMIT_CPU``); the process gets ``SIGXCPU`` when it is used up, ``SIGKILL`` a second later."""
    address_space_bytes: int | None = None
    """Virtual memory (``RLIMIT_AS``); allocations beyond it fail (``MemoryError`` in Python)."""
    open_files: int | None = None
    """Open file descriptors (``RLIMIT_NOFILE``)."""
    file_size_bytes: int | None = None
    """Largest file the process may write (``RLIMIT_FSIZE``); a larger write gets ``SIGXFSZ``."""
    core_dumps: bool = False
    """Whether the process may dump core (``RLIMIT_CORE``). Off: a core file would hold the plugin's memory,
    granted secrets included, and writing one delays the exit of a process killed by ``SIGXCPU``."""

    def _pairs(self) -> list[tuple[int, int, int]]:
        pairs: list[tuple[int, int, int]] = []
        if self.cpu_seconds is not None:
            # The hard limit a second later turns an ignored SIGXCPU into SIGKILL.
            pairs.append((resource.RLIMIT_CPU, self.cpu_seconds, self.cpu_seconds + 1))
        if self.address_space_bytes is not None:
            pairs.append((resource.RLIMIT_AS, self.address_space_bytes, self.address_space_bytes))
        if self.open_files is not None:
            pairs.append((resource.RLIMIT_NOFILE, self.open_files, self.open_files))
        if self.file_size_bytes is not None:
            pairs.append((resource.RLIMIT_FSIZE, self.file_size_bytes, self.file_size_bytes))
        if not self.core_dumps:
            pairs.append((resource.RLIMIT_CORE, 0, 0))
        return pairs

    @property
    def empty(self) -> bool:
        """No limit is set."""
        return not self._pairs()

    def preexec(self) -> Callable[[], None]:
        """A function for ``preexec_fn`` that sets these limits in the child between ``fork`` and ``exec``
        (after it has switched user, so the limits hold for the plugin's account).

        The host's ``prlimit(2)`` on an already started child would need ``CAP_SYS_RESOURCE`` once the child
        runs as another user, which containers usually drop. The function only calls ``setrlimit`` with
        values computed here: no import, no lock, nothing that could deadlock in a forked child."""
        pairs = self._pairs()
        setrlimit = resource.setrlimit
        getrlimit = resource.getrlimit
        infinity = resource.RLIM_INFINITY

        def apply() -> None:
            for which, soft, hard in pairs:
                current_soft, current_hard = getrlimit(which)
                # Never raise a limit: an unprivileged host cannot, and a stricter inherited one stays.
                if current_hard != infinity:
                    hard = min(hard, current_hard)
                    soft = min(soft, hard)
                if current_soft != infinity:
                    soft = min(soft, current_soft)
                setrlimit(which, (soft, hard))

        return apply


def quota_breach(returncode: int | None) -> str | None:
    """Which limit stopped a process that exited with *returncode*, or ``None``."""
    if returncode is None or returncode >= 0:
        return None
    with contextlib.suppress(ValueError):
        return _QUOTA_SIGNALS.get(signal.Signals(-returncode))
    return None


def make_non_dumpable() -> bool:
    """Mark this process non-dumpable (Linux); ``False`` where that is not possible."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        return libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def is_dumpable() -> bool | None:
    """Whether this process is dumpable (``None`` where unknown)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return bool(ctypes.CDLL(name).prctl(3, 0, 0, 0, 0))  # PR_GET_DUMPABLE
    except (OSError, AttributeError):
        return None


def scrub_environ(names: Iterable[str], environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Remove *names* from *environ* (default ``os.environ``); returns the names removed.

    ``/proc/<pid>/environ`` still shows the environment the process was started with: that is what
    :func:`make_non_dumpable` and another uid protect. This keeps the secrets out of every process the host
    starts later that would inherit ``os.environ`` (a library's subprocess, a stdio MCP server...)."""
    target = os.environ if environ is None else environ
    removed = [name for name in sorted(set(names)) if name in target]
    for name in removed:
        del target[name]
    return removed


def ensure_plugin_user(name: str = DEFAULT_PLUGIN_USER) -> PluginUser | None:
    """Create the system account *name* when it is missing and we are root (idempotent); ``None`` when it
    cannot exist here (not root, or no ``useradd``)."""
    with contextlib.suppress(ConfigurationError):
        return PluginUser.lookup(name)
    useradd = shutil.which("useradd")
    if os.geteuid() != 0 or useradd is None:
        return None
    nologin = shutil.which("nologin") or "/bin/false"
    subprocess.run(
        [useradd, "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", nologin, name],
        check=False,
        capture_output=True,
    )
    with contextlib.suppress(ConfigurationError):
        return PluginUser.lookup(name)
    return None
