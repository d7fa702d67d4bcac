"""The harness tests reuse the scripted model-API fakes of tests/mcp (one copy of each fake)."""

from __future__ import annotations

import sys
from pathlib import Path

_MCP_TESTS = str(Path(__file__).resolve().parents[1] / "mcp")
if _MCP_TESTS not in sys.path:
    sys.path.append(_MCP_TESTS)
