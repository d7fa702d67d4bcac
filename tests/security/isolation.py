"""Helpers for the plugin-isolation tests: the probe plugin in a world-readable place, the plugin account, an
interpreter that account can run, and ``agentrunner serve`` as a real process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Generator, Mapping
from contextlib import contextmanager
from pathlib import Path

from agentrunner_host.runtime.sandbox import PluginUser, ensure_plugin_user
from serve_ready import child_environ, serve_child

PROBE_SOURCE = Path(__file__).parent / "plugins" / "probe"


@contextmanager
def world_readable_probe() -> Generator[Path]:
    """A copy of the probe plugin that another account can read (pytest's own temp dirs are 0700)."""
    root = Path(tempfile.mkdtemp(prefix="agentrunner-probe-"))
    try:
        root.chmod(0o755)
        target = root / "probe"
        shutil.copytree(PROBE_SOURCE, target, ignore=shutil.ignore_patterns("__pycache__"))
        for path in (target, *target.rglob("*")):
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def plugin_account() -> PluginUser | None:
    """The dedicated plugin account (created when missing and we are root), or ``None``."""
    if os.geteuid() != 0:
        return None
    return ensure_plugin_user()


def _runs_as(user: PluginUser, command: list[str]) -> bool:
    try:
        done = subprocess.run(
            command,
            user=user.uid,
            group=user.gid,
            extra_groups=[],
            cwd="/",
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def plugin_command(user: PluginUser) -> list[str] | None:
    """A plugin-runtime command *user* can execute: the host's interpreter when that account can read it,
    else the system interpreter of the same version with the host's site-packages added."""
    probe = "import agentrunner.wire.plugin"
    if _runs_as(user, [sys.executable, "-c", probe]):
        return [sys.executable, "-m", "agentrunner.wire.plugin"]
    site = sysconfig.get_paths()["purelib"]
    boot = (
        f"import runpy, site, sys; site.addsitedir({site!r}); sys.argv[0] = 'agentrunner-plugin'; "
        "runpy.run_module('agentrunner.wire.plugin', run_name='__main__', alter_sys=True)"
    )
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/{version}", f"/usr/local/bin/{version}"):
        check = f"import site; site.addsitedir({site!r}); {probe}"
        if Path(candidate).is_file() and _runs_as(user, [candidate, "-c", check]):
            return [candidate, "-c", boot]
    return None


@contextmanager
def serving(config: Path, data_dir: Path, log: Path, *, env: Mapping[str, str]) -> Generator[tuple[str, int]]:
    """``agentrunner serve --port 0`` as a real process (its URL from the port file it writes in the data
    directory); yields its base URL and pid, stops it with SIGTERM."""
    environ = child_environ(env)
    token = environ.get("AGENTRUNNER_API_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with serve_child(data_dir, log, config=config, env=environ, headers=headers) as child:
        yield child.base, child.process.pid
        child.stop()
