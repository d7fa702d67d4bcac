"""harness-kit's CLI process group is signalled without the PID-reuse hazard: by number only while the CLI is
unreaped, and what the CLI left behind once it is reaped through each survivor's own pidfd."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from agentrunner.process_group import ProcessGroup
from agentrunner_harness import HarnessProcess
from harness_helpers import pid_alive

pytestmark = pytest.mark.asyncio


def _spy_killpg(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Record every ``killpg`` made after its group's leader was reaped (its number may belong to a stranger)."""
    real_killpg = os.killpg
    after_reap: list[tuple[int, int]] = []

    def killpg(pgid: int, sig: int) -> None:
        try:
            os.waitid(os.P_PID, pgid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            after_reap.append((pgid, sig))  # no child of ours holds that number any more
        real_killpg(pgid, sig)

    monkeypatch.setattr(os, "killpg", killpg)
    return after_reap


def _env() -> dict[str, str]:
    return {"PATH": os.environ["PATH"]}


async def test_what_the_cli_left_behind_is_killed_through_pidfds_after_it_is_reaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI exits and is reaped while a grandchild holds its stdout: the grandchild is killed (the run is
    not left waiting for it), and never through ``killpg`` on the freed group number."""
    after_reap = _spy_killpg(monkeypatch)
    grandchild_file = tmp_path / "gc.pid"
    argv = ["/bin/sh", "-c", f'sleep 300 & echo "$!" > "{grandchild_file}"; exit 0']
    async with HarnessProcess(argv, cwd=tmp_path, env=_env(), stdin=b"") as proc:
        assert await asyncio.wait_for(proc.read_all(), timeout=60) == b""
        assert await asyncio.wait_for(proc.wait(), timeout=60) == 0
        grandchild = int(grandchild_file.read_text())
        assert not pid_alive(grandchild)
    assert after_reap == []


async def test_a_live_cli_is_terminated_with_its_group_when_the_block_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Leaving the block while the CLI and its grandchild run signals the group by number (the unreaped CLI
    holds it), and both end."""
    after_reap = _spy_killpg(monkeypatch)
    grandchild_file = tmp_path / "gc.pid"
    argv = ["/bin/sh", "-c", f'sleep 300 & echo "$!" > "{grandchild_file}"; echo ready; wait']
    async with HarnessProcess(argv, cwd=tmp_path, env=_env(), stdin=b"") as proc:
        lines = proc.lines()
        assert await asyncio.wait_for(anext(lines), timeout=60) == b"ready"
        cli, grandchild = proc.pid, int(grandchild_file.read_text())
        assert pid_alive(cli) and pid_alive(grandchild)
    assert proc.returncode == -signal.SIGTERM
    assert not pid_alive(grandchild)
    assert after_reap == []


async def test_the_group_is_alive_while_a_member_runs_and_not_after_every_member_ended(
    tmp_path: Path,
) -> None:
    """``ProcessGroup.alive``: a running leader counts; once the leader is reaped only its survivors count,
    found in /proc (same group and session), never a process that took the leader's number."""
    proc = await asyncio.create_subprocess_exec(
        "/bin/sh",
        "-c",
        "sleep 300 >/dev/null & echo $!; exec sleep 300",
        stdout=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    group = ProcessGroup(proc.pid)
    try:
        assert proc.stdout is not None
        grandchild = int(await asyncio.wait_for(proc.stdout.readline(), timeout=60))
        assert group.alive(returncode=proc.returncode)
        os.kill(proc.pid, signal.SIGKILL)  # only the leader (the grandchild does not hold its stdout)
        await proc.wait()
        assert group.leader_reaped(returncode=proc.returncode)
        assert group.alive(returncode=proc.returncode)  # the grandchild still runs in the group
        group.signal(signal.SIGKILL, returncode=proc.returncode)
        assert not pid_alive(grandchild)
        assert not group.alive(returncode=proc.returncode)
    finally:
        group.close()
