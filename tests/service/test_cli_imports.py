"""The ``agentrunner`` command starts without importing what only some of its commands use.

Importing the ``mcp`` client and Alembic took about 1.1 s of the command's 3 s of CPU before any command ran
(``agentrunner --help`` included; 6-10 s of wall time on the loaded 2-core CI machine). They are imported where
an MCP session starts and where a migration runs. Checked in a fresh interpreter, since this test process has
imported everything already."""

from __future__ import annotations

import subprocess
import sys

from agentrunner import codec

PROBE = (
    "import sys, json\n"
    "import agentrunner_host.cli\n"
    "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'alembic'})))\n"
)


def test_importing_the_cli_imports_neither_the_mcp_client_nor_alembic() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, check=True
    )
    assert codec.loads(done.stdout) == []
