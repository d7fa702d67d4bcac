"""Child process of the kill -9 test: commits an event and a run start, says "ready", then waits to be killed.

Usage: ``python durability_child.py <data_dir>``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from agentrunner_host.access import ConversationKey
from agentrunner_host.stores import EventEntry, HostStores, RunStart, TranscriptEntry
from agentrunner_host.stores.engine import create_engine, default_sqlite_url, upgrade


async def main(data_dir: Path) -> None:
    engine = create_engine(default_sqlite_url(data_dir))
    await upgrade(engine)
    stores = await HostStores.open(engine, data_dir=data_dir)
    conversation = ConversationKey("c-durable")
    await stores.events.append(
        EventEntry(
            event_id="ev-durable", event_type="message.received", source="test", conversation_id="c-durable"
        )
    )
    await stores.runs.start(
        RunStart(
            run_id="run-durable",
            runner_id="acme/echo:echo",
            plugin_id="acme/echo",
            binding_id="b1",
            event_id="ev-durable",
            conversation=conversation,
            snapshot={"grants": []},
            snapshot_hash="sha256:0",
            deadline_at=None,
            started_at=1,
            user_turn=TranscriptEntry(
                item_id="it-durable", conversation=conversation, role="user", content="hi"
            ),
            start_events=[
                EventEntry(
                    event_id="run.started:run-durable",
                    event_type="run.started",
                    source="host",
                    kind="host",
                    conversation_id="c-durable",
                    run_id="run-durable",
                )
            ],
        )
    )
    print("ready", flush=True)
    await asyncio.sleep(120)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
