"""The harness tier against small sample harness runners and a stub CLI (a Python script printing JSON lines)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import ClassVar

import pytest
from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerCapabilities,
    AgentRunnerManifest,
    AgentRunResult,
    I18nObject,
    codec,
)
from agentrunner_conformance.harness_tier import (
    HARNESS_TIER_REQUIREMENTS,
    HarnessLaunch,
    NativeFixture,
    check_harness_runner,
)

from .support import make_context

pytestmark = pytest.mark.asyncio

STUB = """
import json, os, sys, time
record_dir, script = sys.argv[1], sys.argv[2]
files = {a: os.stat(a).st_mode & 0o777 for a in sys.argv[3:] if os.path.isfile(a)}
with open(os.path.join(record_dir, f"{os.getpid()}.json"), "w") as out:
    json.dump({"pid": os.getpid(), "files": files}, out)
plan = json.load(open(script))
for line in plan["lines"]:
    print(line, flush=True)
while plan["hang"]:
    time.sleep(1)
"""

FIXTURES = {
    "answer": NativeFixture(
        lines=['{"type": "text", "text": "hello "}', '{"type": "text", "text": "world"}', '{"type": "done"}'],
        ends="completed",
    ),
    "error": NativeFixture(lines=['{"type": "error", "message": "model refused"}'], ends="failed"),
}


class Stub:
    """The stub CLI: ``python stub.py RECORD_DIR SCRIPT [FILES...]``; records each launch in RECORD_DIR."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.program = root / "stub.py"
        self.program.write_text(STUB)
        self.script = root / "script.json"
        self.records = root / "launches"
        self.records.mkdir()
        self.play([])

    def play(self, lines: Sequence[str], *, hang: bool = False) -> None:
        for old in self.records.iterdir():
            old.unlink()
        self.script.write_text(codec.dumps_str({"lines": list(lines), "hang": hang}))

    def launches(self) -> list[HarnessLaunch]:
        out: list[HarnessLaunch] = []
        for record in sorted(self.records.iterdir()):
            data = codec.loads(record.read_bytes())
            out.append(HarnessLaunch(pid=int(data["pid"]), files=dict(data["files"])))
        return out


class SampleHarnessRunner(AgentRunner):
    """Writes the harness a private config file, runs it, maps its JSON lines, and ends it on cancel."""

    manifest = AgentRunnerManifest(
        id="plugin:tier/sample/harness",
        name="harness",
        label=I18nObject(en_US="harness"),
        capabilities=AgentRunnerCapabilities(streaming=True, interrupt=True),
    )
    stub: ClassVar[Stub]
    leave_files: ClassVar[bool] = False
    leave_process: ClassVar[bool] = False
    left: ClassVar[list[asyncio.subprocess.Process]] = []

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        workdir = Path(tempfile.mkdtemp(prefix="harness-tier-"))
        config = workdir / "config.json"
        config.write_text("{}")
        config.chmod(0o600 if not self.leave_files else 0o644)
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(self.stub.program),
            str(self.stub.records),
            str(self.stub.script),
            str(config),
            stdout=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        text = ""
        try:
            assert process.stdout is not None
            async for raw in process.stdout:
                event = codec.loads(raw)
                if event["type"] == "text":
                    text += str(event["text"])
                    yield out.delta(str(event["text"]))
                elif event["type"] == "error":
                    yield out.fail("harness.error", str(event["message"]))
                    return
            yield out.complete(text)
        finally:
            if not self.leave_process and process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, 9)
            if self.leave_process:
                SampleHarnessRunner.left.append(process)
            else:
                await process.wait()
            if not self.leave_files:
                _remove(workdir)


def _remove(workdir: Path) -> None:
    for child in workdir.iterdir():
        child.unlink()
    workdir.rmdir()


def _runner(stub: Stub, **flags: bool) -> type[SampleHarnessRunner]:
    return type("Configured", (SampleHarnessRunner,), {"stub": stub, **flags})


async def test_a_correct_harness_runner_passes_every_tier_requirement(tmp_path: Path) -> None:
    stub = Stub(tmp_path)
    report = await check_harness_runner(
        _runner(stub), stub, fixtures=FIXTURES, context=lambda run_id: make_context(run_id=run_id)
    )
    assert report.ok, report.summary()
    assert set(report.results) == set(HARNESS_TIER_REQUIREMENTS)


async def test_leaked_files_and_processes_fail_their_requirements(tmp_path: Path) -> None:
    stub = Stub(tmp_path)
    report = await check_harness_runner(
        _runner(stub, leave_files=True, leave_process=True),
        stub,
        fixtures=FIXTURES,
        context=lambda run_id: make_context(run_id=run_id),
        grace=1.0,
    )
    for process in SampleHarnessRunner.left:  # clean up what the broken runner left
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 9)
        await process.wait()
    SampleHarnessRunner.left.clear()
    assert {"harness.projection.private", "harness.process.cleanup"} <= report.failed_ids, report.summary()
    assert "harness.output.mapped" not in report.failed_ids
