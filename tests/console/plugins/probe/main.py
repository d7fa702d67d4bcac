"""The ``tests/console-probe`` runner: what the console's browser tests need a runner to do.

The first word of the message picks the behaviour:

- ``gate <fifo>``: streams ``part one``, waits until the test writes to the named pipe *fifo*, streams
  ``part two``;
- ``hang``: streams ``working`` and then waits until it is cancelled;
- ``tools``: a tool call with parameters and result, a state update, an artifact, a message;
- ``xss``: replies with a ``<script>`` tag, ``javascript:`` links and a foreign image in Markdown.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerManifest,
    AgentRunResult,
    ArtifactRef,
)

XSS_REPLY = (
    "Hostile reply <script>window.__probe_xss = 1</script>\n\n"
    '[click me](javascript:window.__probe_xss=2) and <a href="javascript:window.__probe_xss=3">raw</a>\n\n'
    '<img src=x onerror="window.__probe_xss=4">\n\n'
    "![tracker](http://203.0.113.9/pixel.png) [ok link](https://example.org/)"
)


class Probe(AgentRunner):
    """See the module docstring."""

    manifest = AgentRunnerManifest.model_validate(
        {
            "id": "plugin:tests/console-probe/probe",
            "name": "probe",
            "label": {"en_US": "Console probe"},
            "capabilities": {"streaming": True, "interrupt": True},
        }
    )

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        """Behave as the first word of the message says."""
        out = self.emitter(ctx)
        words = "".join(ctx.input.text_parts()).split()
        command = words[0] if words else ""
        if command == "gate" and len(words) > 1:
            gate = Path(words[1])
            yield out.delta("part ")
            yield out.delta("one ")
            # *gate* is a FIFO: reading it blocks until the test writes to it, which releases the run.
            await asyncio.to_thread(gate.read_bytes)
            yield out.delta("part two")
            # no message.completed: the reply is the deltas alone, so a delta shown twice would show
            yield out.complete()
        elif command == "hang":
            yield out.delta("working")
            await asyncio.Event().wait()
        elif command == "tools":
            yield out.tool_started("call-1", "lookup", {"query": "weather", "limit": 2})
            yield out.tool_completed("call-1", "lookup", result_preview={"hits": 2, "top": "sunny"})
            yield out.state("conversation", "probe.calls", 1)
            content = base64.b64encode(b"probe report\n").decode()
            ref = ArtifactRef(artifact_id="probe-report", name="report.txt", mime_type="text/plain")
            yield out.artifact(ref, content_base64=content)
            yield out.message("tools **done**")
            yield out.complete()
        elif command == "xss":
            yield out.message(XSS_REPLY)
            yield out.complete()
        else:
            yield out.fail("probe.unknown", f"unknown probe command {command!r}")
