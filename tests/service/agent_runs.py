"""One event run to its end through a real service, the way the API surface submits it: the agent set-up and
the submit, follow and outcome steps the runner-control and host-pin tests share."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from agentrunner import AgentInput, DeliveryContext
from agentrunner_host import RunOutcome
from agentrunner_host.definitions import AgentConfig, AgentEventEnvelope
from agentrunner_host.service import HostService


async def put_agent(service: HostService, agent_id: str, runner_id: str) -> None:
    """Define agent *agent_id* on *runner_id* and apply it, as ``POST /v1/agents`` does."""
    saved = await service.directory.put_agent(
        AgentConfig(agent_id=agent_id, runner_id=runner_id), create=True
    )
    service.apply_bindings(saved)


def api_event(conversation_id: str, text: str = "go") -> AgentEventEnvelope:
    """A new message event from the API surface in *conversation_id*."""
    return AgentEventEnvelope(
        event_id="evt_" + uuid.uuid4().hex,
        event_type="message.received",
        source="api",
        conversation_id=conversation_id,
        input=AgentInput(text=text),
        delivery=DeliveryContext(surface="api"),
    )


@dataclass(frozen=True)
class EndedRun:
    run_id: str
    types: list[str]
    """The types of the run's results, in order."""
    outcome: RunOutcome


async def run_to_end(
    service: HostService, event: AgentEventEnvelope, *, agent_id: str | None = None
) -> EndedRun:
    """Submit *event* (to *agent_id*, else through the bindings), read every result and wait for its end."""
    feed = await service.submit(event, agent_id=agent_id)
    types = [item.type async for item in service.follow(feed.run_id)]
    return EndedRun(feed.run_id, types, await feed.outcome())
