"""``agentrunner.testing``: unit-test a runner without a host.

* :func:`make_context` builds a valid :class:`~agentrunner.AgentRunContext` in one call;
* :class:`FakeHost` is an in-memory double of the run API — state with per-key versions and compare-and-set
  (a lost CAS is ``invalid_argument`` with ``details.reason == "version_conflict"``, as on the host), storage,
  grants per scope and area, injected errors, handlers for any other action;
* :func:`collect` runs a runner on one context and returns a :class:`RunOutcome` (results, reply text, state
  updates, back-calls), checking the stream rules on the way.

It depends on nothing but the SDK::

    from agentrunner.testing import FakeHost, collect, make_context

    async def test_counts_turns():
        host = FakeHost()
        first = await collect(MyEcho(), make_context("hi"), host=host)
        second = await collect(MyEcho(), make_context("again"), host=host)
        assert first.completed and second.text == "again"
"""

from .contexts import DEFAULT_STATE_SCOPES, DEFAULT_STORAGE_AREAS, make_context
from .fake_host import MAX_STORAGE_VALUE_BYTES, FakeCall, FakeHost, Handler
from .outcomes import RunOutcome, StreamRuleError, collect, stream_problems

__all__ = (
    # contexts
    "make_context",
    "DEFAULT_STATE_SCOPES",
    "DEFAULT_STORAGE_AREAS",
    # the fake host
    "FakeHost",
    "FakeCall",
    "Handler",
    "MAX_STORAGE_VALUE_BYTES",
    # running and collecting
    "collect",
    "RunOutcome",
    "StreamRuleError",
    "stream_problems",
)
