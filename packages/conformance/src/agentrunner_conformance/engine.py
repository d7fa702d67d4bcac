"""The engine behind every front-end: :func:`check_runner` fuzzes one runner and returns a :class:`Report`.

A check runs a list of *probes*. Each probe is a Hypothesis search over one kind of scenario (text runs of
every event kind, runs whose back-calls fail, multimodal input, cancels, deadlines, the same input twice,
the concurrent state machine). When a search finds a violation, Hypothesis shrinks it to a minimal example;
the engine records it against its requirement, then searches again with that requirement ignored, so every
broken requirement gets its own minimal example and one bug never hides another.
"""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from agentrunner import (
    ActorContext,
    AgentEventContext,
    AgentInput,
    AgentResources,
    AgentRunContext,
    AgentRunner,
    AgentRunnerManifest,
    AgentRuntimeContext,
    AgentTrigger,
    ContextAccess,
    ContextAPICapabilities,
    ConversationContext,
    DeliveryContext,
    codec,
)
from hypothesis import HealthCheck, Phase, Verbosity, example, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky
from hypothesis.stateful import run_state_machine_as_test

from .execution import CancelPlan, drive_run
from .host import FAULT_CODES, CallBehaviour, FaultPlan, SimulatedHost
from .invariants import (
    Violation,
    check_equivalent_outputs,
    check_instance_unchanged,
    check_manifest,
    evaluate_run,
)
from .loop import ExampleTimeoutError, LoopThread
from .machine import MachineFinding, OutOfTime, ViolationFound, runner_machine
from .profiles import PROFILES, Profile
from .report import Outcome, Report, RequirementResult
from .requirements import REQUIREMENTS, Gate
from .strategies import EVENT_TYPES, MESSAGE_EVENT_TYPES, fault_plans, run_contexts

__all__ = ["PROBES", "Probe", "ProgressCallback", "check_runner", "runner_factory"]

_LIFECYCLE = frozenset(
    {
        "result.schema.valid",
        "result.type.known",
        "result.run-id.matches",
        "result.sequence.strictly-increasing",
        "result.terminal.exactly-one",
        "result.terminal.last",
        "result.output.present",
        "result.tool-calls.paired",
        "result.state-updated.valid",
        "result.action.idempotency-key",
        "backcall.errors-handled",
        "backcall.errors-reported",
        "backcall.authorized",
        "backcall.params-valid",
        "backcall.only-while-live",
        "capability.streaming.undeclared-deltas",
        "capability.streaming.deltas-match-message",
        "capability.platform-api.undeclared-actions",
        "capability.tool-calling.undeclared-calls",
        "capability.knowledge-retrieval.undeclared-calls",
    }
)
"""Requirements every run-based probe judges."""


class ProgressCallback(Protocol):
    """Told about each probe as the check goes: ``started``, ``passed``, ``failed <id>``, ``skipped``..."""

    def __call__(self, probe: str, status: str, /) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class _Env:
    factory: Callable[[], AgentRunner]
    manifest: AgentRunnerManifest
    profile: Profile
    failed: set[str] = field(default_factory=lambda: set[str]())
    """Requirements already failed in this check."""
    check_deadline: float = float("inf")
    """``time.monotonic()`` past which the check's budget is spent."""

    @property
    def cancel_grace(self) -> float:
        """The cancel grace period; once the runner is known to ignore cancels, later cancels wait only a
        moment, so a runner that never stops costs milliseconds per example instead of the grace period."""
        grace = self.profile.cancel_grace
        return min(grace, _KNOWN_LATE_GRACE) if "cancel.stops-within-grace" in self.failed else grace

    @property
    def deadline_grace(self) -> float:
        """The deadline grace period, shortened the same way once ``deadline.run-ends`` failed."""
        grace = self.profile.deadline_grace
        return min(grace, _KNOWN_LATE_GRACE) if "deadline.run-ends" in self.failed else grace


_KNOWN_LATE_GRACE = 0.02


@dataclass(frozen=True, slots=True, kw_only=True)
class _Trial:
    violations: list[Violation]
    observed: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """One kind of scenario the engine searches."""

    name: str
    """Short name shown in progress and reports."""
    summary: str
    """What it exercises."""
    judges: frozenset[str]
    """Requirements a clean search of this probe passes."""
    gate: Gate | None = None
    """Run only for runners this gate applies to."""
    strategy: Callable[[_Env], st.SearchStrategy[Any]] | None = None
    """Examples (``None``: the stateful machine)."""
    trial: Callable[[_Env, Any], Awaitable[_Trial]] | None = None
    """Runs one example in the event loop."""
    describe: Callable[[Any], str] = repr
    """The example, for the report."""
    examples: Callable[[_Env], list[Any]] | None = None
    """Examples every search of this probe tries first, whatever the profile (Hypothesis's explicit phase)."""
    hang_requirement: str = "result.terminal.exactly-one"
    """What an example that outlives the profile's ``example_budget`` breaks (the run never ended)."""


def _ctx_text(ctx: AgentRunContext) -> str:
    return codec.dumps_str(ctx.model_dump(mode="json", exclude_defaults=True))


def _describe_plan(example: tuple[AgentRunContext, FaultPlan]) -> str:
    ctx, plan = example
    return f"context: {_ctx_text(ctx)}\nhost answers back-calls: {plan.describe()}"


def _single(crash_requirement: str) -> Callable[[_Env, Any], Awaitable[_Trial]]:
    async def trial(env: _Env, example: tuple[AgentRunContext, FaultPlan]) -> _Trial:
        ctx, plan = example
        record = await drive_run(
            env.factory(),
            ctx,
            SimulatedHost(),
            plan=plan,
            deadline_grace=env.deadline_grace,
            linger=0.002,
            crash_requirement=crash_requirement,
        )
        return _Trial(violations=evaluate_run(record, env.manifest), observed=record.describe())

    return trial


async def _cancel_trial(env: _Env, example: tuple[AgentRunContext, FaultPlan, int, float]) -> _Trial:
    ctx, plan, after, seconds = example
    record = await drive_run(
        env.factory(),
        ctx,
        SimulatedHost(),
        plan=plan,
        cancel=CancelPlan(after_results=after, after_seconds=seconds, grace=env.cancel_grace),
        linger=0.002,
    )
    return _Trial(violations=evaluate_run(record, env.manifest), observed=record.describe())


async def _deadline_trial(env: _Env, example: tuple[AgentRunContext, FaultPlan, float]) -> _Trial:
    ctx, plan, deadline_in = example
    runtime = ctx.runtime.model_copy(update={"deadline_at": time.time() + deadline_in})
    record = await drive_run(
        env.factory(),
        ctx.model_copy(update={"runtime": runtime}),
        SimulatedHost(),
        plan=plan,
        deadline_grace=env.deadline_grace,
        linger=0.002,
    )
    return _Trial(violations=evaluate_run(record, env.manifest), observed=record.describe())


def _fingerprint(runner: AgentRunner) -> dict[str, str]:
    values: dict[str, object] = dict(getattr(runner, "__dict__", {}))
    for name in getattr(type(runner), "__slots__", ()):
        if hasattr(runner, name):
            values[name] = getattr(runner, name)
    return {k: repr(v) for k, v in values.items()}


async def _isolation_trial(env: _Env, example: tuple[AgentRunContext, AgentRunContext]) -> _Trial:
    ctx_a, ctx_b = example
    fresh = env.factory()
    fresh_before = _fingerprint(fresh)
    record_fresh = await drive_run(fresh, ctx_a, SimulatedHost())
    used = env.factory()
    used_before = _fingerprint(used)
    record_b = await drive_run(used, ctx_b, SimulatedHost())
    record_again = await drive_run(used, ctx_a, SimulatedHost())
    violations = [v for r in (record_fresh, record_b, record_again) for v in evaluate_run(r, env.manifest)]
    violations += check_instance_unchanged(fresh_before, _fingerprint(fresh))
    violations += check_instance_unchanged(used_before, _fingerprint(used))
    violations += check_equivalent_outputs(record_fresh, record_again)
    observed = f"fresh instance: {record_fresh.describe()}; after another run: {record_again.describe()}"
    return _Trial(violations=violations, observed=observed)


def _open_context() -> AgentRunContext:
    """A message run with every context API enabled: each back-call a runner could make is allowed."""
    return AgentRunContext(
        run_id="run-open",
        trigger=AgentTrigger(type="message.received", source="platform"),
        event=AgentEventContext(event_id="evt-open", event_type="message.received", source="telegram"),
        conversation=ConversationContext(conversation_id="conv-open"),
        actor=ActorContext(actor_type="user", actor_id="user-open"),
        input=AgentInput(text="hello"),
        delivery=DeliveryContext(surface="http.stream", supports_streaming=False),
        resources=AgentResources(),
        context=ContextAccess(
            conversation_id="conv-open",
            available_apis=ContextAPICapabilities.model_validate(
                {
                    name: True
                    for name, info in ContextAPICapabilities.model_fields.items()
                    if info.annotation is bool and name != "prompt_get"  # reserved: always false in v1
                }
            ),
        ),
        runtime=AgentRuntimeContext(trace_id="trace-open"),
    )


def _every_fault(env: _Env) -> list[Any]:
    """Each §9 code answering every back-call of an all-access run: every error branch runs, in every profile."""
    ctx = _open_context()
    return [(ctx, FaultPlan(default=CallBehaviour(error=code))) for code in FAULT_CODES]


def _text_contexts(env: _Env, **kwargs: Any) -> st.SearchStrategy[AgentRunContext]:
    return run_contexts(event_types=EVENT_TYPES, **kwargs)


PROBES: tuple[Probe, ...] = (
    Probe(
        name="lifecycle",
        summary="text runs of every event kind; some back-calls fail or answer slowly",
        judges=_LIFECYCLE | {"run.no-unhandled-exception"},
        strategy=lambda env: st.tuples(_text_contexts(env), fault_plans(error_weight=0.25)),
        trial=_single("run.no-unhandled-exception"),
        describe=_describe_plan,
    ),
    Probe(
        name="faults",
        summary="every back-call fails with a §9 error",
        judges=_LIFECYCLE | {"run.no-unhandled-exception"},
        strategy=lambda env: st.tuples(_text_contexts(env), fault_plans(error_weight=1.0)),
        examples=_every_fault,
        trial=_single("run.no-unhandled-exception"),
        describe=_describe_plan,
    ),
    Probe(
        name="multimodal",
        summary="images, files, audio and attachments in the input",
        judges=_LIFECYCLE | {"capability.multimodal-input.no-crash"},
        gate=Gate(capability="multimodal_input"),
        strategy=lambda env: st.tuples(
            run_contexts(event_types=sorted(MESSAGE_EVENT_TYPES), multimodal=True),
            fault_plans(error_weight=0.0),
        ),
        trial=_single("capability.multimodal-input.no-crash"),
        describe=_describe_plan,
    ),
    Probe(
        name="tools",
        summary="runs with and without granted tools",
        judges=_LIFECYCLE | {"capability.tool-calling.survives-absence"},
        gate=Gate(capability="tool_calling"),
        strategy=lambda env: st.tuples(
            st.booleans().flatmap(lambda granted: _text_contexts(env, tools=granted)),
            fault_plans(error_weight=0.25),
        ),
        trial=_single("capability.tool-calling.survives-absence"),
        describe=_describe_plan,
    ),
    Probe(
        name="knowledge",
        summary="runs with and without knowledge bases",
        judges=_LIFECYCLE | {"capability.knowledge-retrieval.survives-absence"},
        gate=Gate(capability="knowledge_retrieval"),
        strategy=lambda env: st.tuples(
            st.booleans().flatmap(lambda granted: _text_contexts(env, knowledge=granted)),
            fault_plans(error_weight=0.25),
        ),
        trial=_single("capability.knowledge-retrieval.survives-absence"),
        describe=_describe_plan,
    ),
    Probe(
        name="cancel",
        summary="the host cancels the run mid-stream or while it waits on a back-call",
        judges=_LIFECYCLE | {"cancel.stops-within-grace", "cancel.reports-cancelled"},
        gate=Gate(capability="interrupt"),
        strategy=lambda env: st.tuples(
            run_contexts(event_types=sorted(MESSAGE_EVENT_TYPES)),
            st.sampled_from(
                [
                    FaultPlan(default=CallBehaviour(delay=float("inf"))),
                    FaultPlan(default=CallBehaviour(delay=0.005)),
                ]
            ),
            st.integers(0, 3),
            st.sampled_from([0.0, 0.005, 0.02]),
        ),
        trial=_cancel_trial,
        hang_requirement="cancel.stops-within-grace",
        describe=lambda ex: (
            f"{_describe_plan((ex[0], ex[1]))}\ncancel after {ex[2]} result(s), {ex[3]:g}s or at the first wait"
        ),
    ),
    Probe(
        name="deadline",
        summary="the run's deadline passes while back-calls answer slowly or never",
        judges=_LIFECYCLE | {"deadline.run-ends", "run.no-unhandled-exception"},
        strategy=lambda env: st.tuples(
            run_contexts(event_types=sorted(MESSAGE_EVENT_TYPES)),
            st.sampled_from(
                [
                    FaultPlan(default=CallBehaviour(delay=float("inf"))),
                    FaultPlan(default=CallBehaviour(delay=0.05)),
                ]
            ),
            st.sampled_from([0.0, 0.01, 0.03]),
        ),
        trial=_deadline_trial,
        hang_requirement="deadline.run-ends",
        describe=lambda ex: f"{_describe_plan((ex[0], ex[1]))}\ndeadline_at: {ex[2]:g}s after the start",
    ),
    Probe(
        name="instance-state",
        summary="the same input on a fresh instance and after another run",
        judges=_LIFECYCLE | {"isolation.no-instance-state"},
        strategy=lambda env: st.tuples(_text_contexts(env), _text_contexts(env)),
        trial=_isolation_trial,
        describe=lambda ex: (
            f"input A: {_ctx_text(ex[0])}\ninput B (run first on the reused instance): {_ctx_text(ex[1])}"
        ),
    ),
    Probe(
        name="concurrency",
        summary="a state machine interleaving runs on one instance, with cancels and passing deadlines",
        judges=_LIFECYCLE
        | {
            "isolation.concurrent-runs",
            "deadline.run-ends",
            "cancel.stops-within-grace",
            "cancel.reports-cancelled",
        },
    ),
)
"""Every probe, in the order a check runs them."""


@dataclass(slots=True, kw_only=True)
class _Finding:
    violation: Violation
    example: str
    flaky: bool = False
    note: str = ""


class _Found(Exception):
    pass


class _OutOfBudget(Exception):
    """The check's wall-clock budget ran out before the probe found anything."""


@dataclass(slots=True, kw_only=True)
class _Clock:
    """Wall-clock bounds of one search: the check's budget, and the shrink budget once something failed."""

    check_deadline: float
    shrink_budget: float
    first_found: float | None = None

    def found(self) -> None:
        if self.first_found is None:
            self.first_found = time.monotonic()

    def shrinking_over(self) -> bool:
        now = time.monotonic()
        if self.first_found is not None and now - self.first_found > self.shrink_budget:
            return True
        return self.first_found is not None and now > self.check_deadline

    def check_over(self) -> bool:
        return time.monotonic() > self.check_deadline


_SHRINK_CUT = " (shrinking stopped at its time budget: the smallest example found so far)"


def _settings(profile: Profile, *, stateful: bool) -> settings:
    return settings(
        max_examples=profile.stateful_examples if stateful else profile.max_examples,
        stateful_step_count=profile.stateful_steps,
        deadline=None,
        database=None,
        derandomize=False,
        report_multiple_bugs=False,
        suppress_health_check=cast(list[HealthCheck], list(HealthCheck)),
        verbosity=Verbosity.quiet,
        print_blob=False,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    )


def _search(
    probe: Probe, env: _Env, loop: LoopThread, probe_seed: int, ignored: Collection[str]
) -> _Finding | None:
    """One Hypothesis search of *probe*; raises :class:`_OutOfBudget` when the check's time ran out first."""
    caps = env.manifest.capabilities
    clock = _Clock(check_deadline=env.check_deadline, shrink_budget=env.profile.shrink_budget)

    def applies(violation: Violation) -> bool:
        gate = REQUIREMENTS[violation.requirement_id].gate
        return violation.requirement_id not in ignored and (gate is None or gate.applies(caps))

    if probe.strategy is None or probe.trial is None:
        findings: list[MachineFinding] = []
        machine = runner_machine(
            env.factory,
            env.manifest,
            portal=loop,
            profile=env.profile,
            ignored=ignored,
            findings=findings,
            cancel_grace=lambda: env.cancel_grace,
            deadline_grace=lambda: env.deadline_grace,
            out_of_time=lambda: clock.shrinking_over() or clock.check_over(),
            on_found=clock.found,
        )
        seed(probe_seed)(machine)
        try:
            run_state_machine_as_test(machine, settings=_settings(env.profile, stateful=True))
        except ViolationFound:
            last = findings[-1]
            note = _SHRINK_CUT if clock.shrinking_over() else ""
            return _Finding(violation=last.violation, example="\n".join(last.steps), note=note)
        except OutOfTime:
            if findings:
                last = findings[-1]
                return _Finding(violation=last.violation, example="\n".join(last.steps), note=_SHRINK_CUT)
            raise _OutOfBudget from None
        except Flaky:
            if not findings:
                raise
            last = findings[-1]
            return _Finding(violation=last.violation, example="\n".join(last.steps), flaky=True)
        return None

    found: list[_Finding] = []
    trial, describe = probe.trial, probe.describe

    def test(example: Any) -> None:
        if found and clock.shrinking_over():
            raise _Found("budget")  # every replay "fails" at once: Hypothesis stops shrinking quickly
        if clock.check_over():
            raise _OutOfBudget
        try:
            result: _Trial = loop.call(trial, env, example, timeout=env.profile.example_budget)
        except ExampleTimeoutError:
            result = _Trial(
                violations=[
                    Violation(
                        requirement_id=probe.hang_requirement,
                        message=f"the run never ended: one example took over {env.profile.example_budget:g}s",
                    )
                ],
                observed="the example did not finish",
            )
        for violation in result.violations:
            if applies(violation):
                text = f"{describe(example)}\nobserved: {result.observed}"
                found.append(_Finding(violation=violation, example=text))
                clock.found()
                raise _Found(violation.requirement_id)

    wrapped = given(probe.strategy(env))(test)
    for explicit in reversed(probe.examples(env) if probe.examples is not None else []):
        wrapped = example(explicit)(wrapped)
    search = seed(probe_seed)(_settings(env.profile, stateful=False)(wrapped))
    try:
        search()
    except _Found:
        last = found[-1]
        if clock.shrinking_over():
            last.note = _SHRINK_CUT
        return last
    except _OutOfBudget:
        if found:
            found[-1].note = _SHRINK_CUT
            return found[-1]
        raise
    except Flaky:
        if not found:
            raise
        last = found[-1]
        return _Finding(violation=last.violation, example=last.example, flaky=True)
    return None


def runner_factory(
    target: type[AgentRunner] | Callable[[], AgentRunner],
) -> tuple[Callable[[], AgentRunner], AgentRunnerManifest]:
    """A zero-argument factory of fresh instances and the manifest, from a runner class or a factory."""
    if isinstance(target, type) and issubclass(target, AgentRunner):
        runner_class: type[AgentRunner] = target
        return runner_class, runner_class.manifest
    make = cast(Callable[[], AgentRunner], target)
    instance = make()
    return make, type(instance).manifest


def check_runner(
    target: type[AgentRunner] | Callable[[], AgentRunner],
    *,
    profile: str | Profile = "default",
    seed: int | None = None,
    only: Collection[str] | None = None,
    progress: ProgressCallback | None = None,
    close: Callable[[], Awaitable[None]] | None = None,
) -> Report:
    """Fuzz a runner against Protocol v1 and report every requirement as PASS, FAIL, SKIPPED or BLOCKED.

    *target* is an :class:`~agentrunner.AgentRunner` subclass or a factory returning fresh instances.
    *seed* makes the check reproducible (a random one is chosen and reported otherwise); *only* restricts the
    check to some requirement ids; *progress* is told about each probe as it runs; *close* is awaited on the
    check's event loop when it ends (to stop what the runner started there, such as its process).
    """
    started = time.monotonic()
    chosen = PROFILES[profile] if isinstance(profile, str) else profile
    check_seed = seed if seed is not None else random.SystemRandom().randrange(2**32)
    notify: ProgressCallback = progress or (lambda probe, status: None)
    wanted = frozenset(REQUIREMENTS if only is None else only)
    factory, manifest = runner_factory(target)
    caps = manifest.capabilities
    env = _Env(
        factory=factory, manifest=manifest, profile=chosen, check_deadline=started + chosen.check_budget
    )

    failures: dict[str, RequirementResult] = {}
    blocked: dict[str, str] = {}
    judged: set[str] = {"manifest.protocol-version"}
    for violation in check_manifest(manifest):
        failures[violation.requirement_id] = RequirementResult(
            requirement=REQUIREMENTS[violation.requirement_id],
            outcome=Outcome.FAIL,
            message=violation.message,
            example=f"manifest: {manifest.id}",
            probe="manifest",
            seed=check_seed,
        )

    construction_error: str | None = None
    try:
        factory()
    except Exception as exc:  # the runner cannot even be built: nothing run-based can be checked
        construction_error = f"could not construct the runner: {type(exc).__name__}: {exc}"

    loop = LoopThread()
    try:
        for probe in PROBES:
            if not (probe.judges & wanted) - failures.keys():
                continue  # nothing left for it to judge
            if probe.gate is not None and not probe.gate.applies(caps):
                verb = "does not declare" if probe.gate.declared else "declares"
                notify(probe.name, f"skipped (runner {verb} {probe.gate.capability})")
                continue
            if construction_error is not None:
                for requirement_id in probe.judges:
                    blocked.setdefault(requirement_id, construction_error)
                continue
            if time.monotonic() > env.check_deadline:
                for requirement_id in probe.judges:
                    blocked.setdefault(requirement_id, f"the check's {chosen.check_budget:g}s budget ran out")
                notify(probe.name, "blocked (out of time)")
                continue
            notify(probe.name, "started")
            probe_seed = check_seed ^ zlib.crc32(probe.name.encode())
            ignored = set(failures) | (REQUIREMENTS.keys() - wanted)
            while True:
                try:
                    finding = _search(probe, env, loop, probe_seed, ignored)
                except _OutOfBudget:
                    for requirement_id in probe.judges:
                        blocked.setdefault(
                            requirement_id,
                            f"the check's {chosen.check_budget:g}s budget ran out during probe {probe.name}",
                        )
                    notify(probe.name, "blocked (out of time)")
                    break
                except Exception as exc:  # a broken environment or kit must block, never pass
                    for requirement_id in probe.judges:
                        blocked.setdefault(requirement_id, f"probe {probe.name} could not run: {exc!r}")
                    notify(probe.name, "blocked")
                    break
                if finding is None:
                    judged.update(probe.judges)
                    notify(probe.name, "passed")
                    break
                requirement_id = finding.violation.requirement_id
                note = (" (flaky: did not always reproduce)" if finding.flaky else "") + finding.note
                failures[requirement_id] = RequirementResult(
                    requirement=REQUIREMENTS[requirement_id],
                    outcome=Outcome.FAIL,
                    message=finding.violation.message + note,
                    example=finding.example,
                    probe=probe.name,
                    seed=check_seed,
                )
                ignored.add(requirement_id)
                env.failed.add(requirement_id)
                notify(probe.name, f"failed {requirement_id}")
        if close is not None:
            loop.call(close, timeout=chosen.example_budget)
    finally:
        loop.close()

    report = Report(runner_id=manifest.id, seed=check_seed, profile=chosen.name)
    for requirement_id, req in REQUIREMENTS.items():
        if requirement_id not in wanted:
            continue
        if req.gate is not None and not req.gate.applies(caps):
            why = f"runner {'does not declare' if req.gate.declared else 'declares'} {req.gate.capability}"
            report.results[requirement_id] = RequirementResult(
                requirement=req, outcome=Outcome.SKIPPED, message=why
            )
        elif requirement_id in failures:
            report.results[requirement_id] = failures[requirement_id]
        elif requirement_id in judged:
            # Another probe may have been blocked, but one that ran judged this requirement in full.
            report.results[requirement_id] = RequirementResult(requirement=req, outcome=Outcome.PASS)
        elif requirement_id in blocked:
            report.results[requirement_id] = RequirementResult(
                requirement=req, outcome=Outcome.BLOCKED, message=blocked[requirement_id]
            )
        else:
            report.results[requirement_id] = RequirementResult(
                requirement=req, outcome=Outcome.BLOCKED, message="no probe that checks it could run"
            )
    report.duration = time.monotonic() - started
    return report
