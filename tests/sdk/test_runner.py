"""Defining an ``AgentRunner`` subclass: the manifest is checked when the class is created."""

from __future__ import annotations

import subprocess
import sys
from abc import abstractmethod
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest
from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerError,
    AgentRunnerManifest,
    AgentRunResult,
    RunCompletedResult,
    RunnerDefinitionError,
)

from . import payloads


class _Echo(AgentRunner):
    manifest = AgentRunnerManifest.model_validate(payloads.manifest())

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.complete(ctx.input.text)


async def test_a_well_defined_runner_yields_results_with_the_run_id() -> None:
    """A subclass with a manifest model and a ``run`` generator works, and ``emitter`` fills the run id."""
    ctx = AgentRunContext.model_validate(payloads.context())
    results = [r async for r in _Echo().run(ctx, AgentRunAPI(FakeSilentTransport(), run_id=ctx.run_id))]
    assert len(results) == 1
    assert isinstance(results[0], RunCompletedResult)
    assert results[0].run_id == ctx.run_id
    assert results[0].sequence == 1
    assert results[0].data.message is not None
    assert results[0].data.message.content == "what is in this picture?"


def test_a_runner_without_a_manifest_is_refused_when_defined() -> None:
    """Forgetting ``manifest`` is a ``RunnerDefinitionError`` (also a ``TypeError``) naming the class."""
    with pytest.raises(
        RunnerDefinitionError, match="NoManifest must declare a class attribute 'manifest'"
    ) as info:

        class NoManifest(AgentRunner):  # pyright: ignore[reportUnusedClass]
            async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
                yield self.emitter(ctx).complete()

    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, AgentRunnerError)


def test_a_dict_manifest_is_validated_into_a_model() -> None:
    """A plain dict is accepted and replaced by the validated ``AgentRunnerManifest``."""

    class FromDict(AgentRunner):
        manifest = payloads.manifest()  # pyright: ignore[reportAssignmentType]

        async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
            yield self.emitter(ctx).complete()

    assert isinstance(FromDict.manifest, AgentRunnerManifest)
    assert FromDict.manifest.id == "plugin:acme/helper/default"


def test_an_invalid_dict_manifest_is_refused_with_the_validation_error() -> None:
    """A dict that is not a valid manifest fails at class creation, naming the class and the field."""
    with pytest.raises(RunnerDefinitionError, match=r"BadId\.manifest is invalid(.|\n)*id") as info:

        class BadId(AgentRunner):  # pyright: ignore[reportUnusedClass]
            manifest = payloads.manifest(id="not-an-id")  # pyright: ignore[reportAssignmentType]

            async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
                yield self.emitter(ctx).complete()

    assert info.value.__cause__ is not None


def test_a_manifest_of_the_wrong_type_is_refused() -> None:
    """Anything other than a manifest model or dict is refused."""
    with pytest.raises(RunnerDefinitionError, match="must be an AgentRunnerManifest"):

        class WrongType(AgentRunner):  # pyright: ignore[reportUnusedClass]
            manifest = "plugin:acme/helper/default"  # pyright: ignore[reportAssignmentType]

            async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
                yield self.emitter(ctx).complete()


def test_an_intermediate_abstract_base_needs_no_manifest_but_its_subclasses_do() -> None:
    """A shared base that leaves ``run`` abstract is allowed; concrete subclasses are still checked."""

    class Base(AgentRunner):
        greeting: ClassVar[str] = "hi"

        @abstractmethod
        def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]: ...

    class Concrete(Base):
        manifest = AgentRunnerManifest.model_validate(payloads.manifest())

        async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
            yield self.emitter(ctx).complete(self.greeting)

    assert Concrete.manifest.name == "default"
    with pytest.raises(TypeError, match="abstract"):
        Base()  # pyright: ignore[reportAbstractUsage]
    with pytest.raises(RunnerDefinitionError, match="NoManifest"):

        class NoManifest(Base):  # pyright: ignore[reportUnusedClass]
            async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
                yield self.emitter(ctx).complete()


def test_a_subclass_inherits_its_parents_manifest() -> None:
    """A concrete subclass of a concrete runner reuses the parent's declaration."""

    class Child(_Echo):
        pass

    assert Child.manifest is _Echo.manifest


_WITHOUT_THE_BRIDGE = """
import sys
sys.modules[sys.argv[1]] = None  # `import` of a None entry raises ModuleNotFoundError, as when not installed
from agentrunner import AgentRunAPI, AgentRunContext, AgentRunner
from agentrunner.testing import make_context
ctx = make_context()
try:
    AgentRunner.create_external_mcp_bridge(ctx, AgentRunAPI(None, run_id=ctx.run_id))  # type: ignore
except ImportError as exc:
    print(repr(exc.name), exc)
"""


@pytest.mark.parametrize("missing", ["agentrunner_mcp", "mcp"])
def test_the_bridge_hook_names_the_package_to_install_when_it_is_missing(missing: str) -> None:
    """Without ``agentrunner-mcp-bridge`` (or its ``mcp``), the hook raises ``ImportError`` with the install
    command, not a definition error: the runner is fine, its environment lacks a package. (In a child
    process, so this process's imported modules stay as they are.)"""
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_THE_BRIDGE, missing], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"'{missing}") and "pip install agentrunner-mcp-bridge" in done.stdout


async def test_the_bridge_hook_is_the_bridge_packages_helper() -> None:
    """With the package installed, the hook returns its context manager, typed as its handle."""
    from agentrunner_mcp import ExternalMCPBridge

    ctx = AgentRunContext.model_validate(payloads.context())
    api = AgentRunAPI(FakeSilentTransport(), run_id=ctx.run_id)
    async with AgentRunner.create_external_mcp_bridge(ctx, api) as bridge:
        assert isinstance(bridge, ExternalMCPBridge)
        assert bridge.url.startswith("http://127.0.0.1:")
    assert bridge.closed


class FakeSilentTransport:
    """A transport for runners that make no back-calls: any call fails the test."""

    async def call(self, request: Any, *, timeout: float | None) -> dict[str, Any]:
        raise AssertionError("this runner makes no back-calls")

    def stream(self, request: Any, *, timeout: float | None) -> AsyncIterator[dict[str, Any]]:
        raise AssertionError("this runner makes no back-calls")
