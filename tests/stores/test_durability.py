"""Durability: what a killed host committed is there when it comes back."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

from agentrunner_host.access import ConversationKey
from agentrunner_host.stores import HOST_RESTARTED, HostStores
from agentrunner_host.stores.engine import create_engine, default_sqlite_url

CHILD = Path(__file__).with_name("durability_child.py")


def _start_then_kill_9(data_dir: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, str(CHILD), str(data_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        line = process.stdout.readline()
        assert line.strip() == "ready", process.stderr.read()
        process.send_signal(signal.SIGKILL)
        assert process.wait(30) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


async def test_a_run_committed_before_kill_9_survives_and_is_closed_on_restart(tmp_path: Path) -> None:
    """After SIGKILL the event, run and user item are on disk; close_interrupted fails the run replayably."""
    await asyncio.wait_for(asyncio.to_thread(_start_then_kill_9, tmp_path), timeout=90)

    engine = create_engine(default_sqlite_url(tmp_path))
    stores = await HostStores.open(engine, data_dir=tmp_path)
    try:
        conversation = ConversationKey("c-durable")
        stored = await stores.events.get("ev-durable", conversation=conversation)
        assert stored is not None and stored.seq == 1
        run = await stores.runs.get("run-durable")
        assert run is not None and run.status == "running"
        items, _ = await stores.transcript.page(conversation=conversation, limit=10)
        assert [i.item_id for i in items] == ["it-durable"]

        assert await stores.runs.close_interrupted(ended_at=99) == ["run-durable"]
        run = await stores.runs.get("run-durable")
        assert run is not None and (run.status, run.code) == ("failed", HOST_RESTARTED)
        replay = await stores.runs.results_after("run-durable", after_host_seq=0, limit=10)
        assert [(r.host_seq, r.type) for r in replay] == [(1, "run.failed")]
        payload = replay[0].payload
        assert isinstance(payload, dict)
        data = payload["data"]
        assert isinstance(data, dict) and data["code"] == HOST_RESTARTED
    finally:
        await stores.aclose()
        await engine.dispose()
