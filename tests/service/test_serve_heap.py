"""``serve`` freezes its startup heap (``gc.freeze``) before it listens, so full collections no longer walk the
imports, the app and the service (bench/README.md says the bare floor does the same). Checked in a child
interpreter: a freeze in the test process would keep this whole pytest session's objects from collection."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_SCRIPT = """
import asyncio, gc, sys
from pathlib import Path
from agentrunner_host.config import load_settings
from agentrunner_host.http import server
from agentrunner_host.service import HostService

seen = []

async def not_serving(self, sockets=None):  # stands for uvicorn's serve: records what it starts with
    seen.append(gc.get_freeze_count())

server._Server.serve = not_serving

async def main():
    tmp = Path(sys.argv[1])
    settings = load_settings(None, environ={"AGENTRUNNER_DATA_DIR": str(tmp / "data")}, cwd=tmp)
    assert gc.get_freeze_count() == 0
    async with HostService.open(settings) as service:
        await server.serve(service, host="127.0.0.1", port=0, api_token=None, log_level="warning")
    print(seen[0])

asyncio.run(main())
"""


def test_serve_starts_serving_with_its_startup_heap_frozen(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    frozen = int(done.stdout.strip().splitlines()[-1])
    assert frozen > 10_000, frozen  # the imports alone are tens of thousands of objects
