"""The measuring engine behind ``python -m bench``.

Method (the same as the floor study the goals cite, bench/FLOORS.md, so figures are comparable):

* A *sample* is the mean time of one operation over an inner loop long enough to dwarf the timer's cost.
  The garbage collector is paused inside the loop and run between samples (as :mod:`timeit` does).
* A *repeat* takes one sample of every variant of every measure of a suite, round-robin, so a measure and its
  floor always run side by side under the same machine conditions.
* Each row reports the median, min and max over repeats. The ratio is the median of the per-repeat ratios,
  not the ratio of medians, so a drift of the machine's speed between repeats cancels out.

A suite is a module exposing ``measures(ctx: SuiteContext) -> list[Measure]``; see ``bench/README.md``.
"""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import importlib
import inspect
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Literal, cast

__all__ = [
    "Goal",
    "Measure",
    "Mode",
    "Row",
    "Stats",
    "SuiteContext",
    "SuiteError",
    "SuiteRef",
    "environment",
    "render_table",
    "run_suites",
]

Operation = Callable[[], Any] | Callable[[], Awaitable[Any]]
"""One operation to time: a plain function, or an ``async def`` run on the suite's event loop."""

_TRACKED_PACKAGES = (
    "pydantic",
    "pydantic-core",
    "orjson",
    "sqlalchemy",
    "aiosqlite",
    "asyncpg",
    "mcp",
    "uvloop",
)


@dataclass(frozen=True, slots=True)
class Goal:
    """What a measure should achieve: at most ``ratio`` times its floor, or at most ``value`` in its unit."""

    kind: Literal["ratio", "value"]
    """Compare the ratio to the floor, or the value itself."""
    limit: float
    """The largest acceptable median."""
    source: str = ""
    """Where the goal comes from (e.g. ``perf-floors row A``); shown in the README, not the table."""

    @classmethod
    def ratio(cls, limit: float, *, source: str = "") -> Goal:
        """Median ratio to the floor at most *limit*."""
        return cls("ratio", limit, source)

    @classmethod
    def value(cls, limit: float, *, source: str = "") -> Goal:
        """Median value at most *limit* (in the measure's unit)."""
        return cls("value", limit, source)


@dataclass(frozen=True, slots=True)
class Measure:
    """One row of the table: a subject timed next to an optional floor measured in the same run."""

    name: str
    """Row label, unique across suites."""
    subject: Operation
    """The operation under test."""
    floor: Operation | None = None
    """The physical or library limit the subject is compared with."""
    floor_name: str = ""
    """What the floor does, shown under the table."""
    goal: Goal | None = None
    """Target, or ``None`` for an informational row."""
    unit: str = "µs/op"
    """Unit of value and floor."""
    per: int = 1
    """Divide each operation's time by this (e.g. 52 for ``µs/result`` of a 52-result stream)."""


@dataclass(frozen=True, slots=True)
class SuiteRef:
    """A registered suite: its short name, the module that builds it and a one-line description."""

    name: str
    """Name used by ``--only``."""
    module: str
    """Dotted module path; imported only when the suite runs."""
    description: str
    """What the suite measures."""


class SuiteError(Exception):
    """A suite could not be built or one of its operations raised."""


@dataclass(eq=False)
class SuiteContext:
    """What a suite's ``measures`` function receives: the run mode, an event loop and a cleanup stack."""

    quick: bool
    """``--quick``: build smaller fixtures if that matters; the engine already shortens the loops."""
    loop: asyncio.AbstractEventLoop
    """The loop async operations (and :meth:`run`) execute on; one per suite."""
    _cleanups: list[Callable[[], Any]] = field(default_factory=list[Callable[[], Any]])

    def run(self, awaitable: Awaitable[Any]) -> Any:
        """Run *awaitable* to completion on the suite's loop (for async set-up, e.g. creating tables)."""
        return self.loop.run_until_complete(_as_coroutine(awaitable))

    def add_cleanup(self, callback: Callable[[], Any]) -> None:
        """Call *callback* (sync, or returning an awaitable) after the suite, in reverse order of adding."""
        self._cleanups.append(callback)

    def close(self) -> None:
        """Run every cleanup (even after one fails), cancel left-over tasks, then close the loop.

        Raises :class:`SuiteError` naming the first cleanup that failed.
        """
        failure: BaseException | None = None
        while self._cleanups:
            callback = self._cleanups.pop()
            try:
                outcome = callback()
                if inspect.isawaitable(outcome):
                    self.run(outcome)
            except (Exception, SystemExit) as exc:
                failure = failure or SuiteError(f"cleanup {callback!r} raised {exc!r}")
        try:
            # Tasks a suite left running would otherwise be destroyed pending, with a warning.
            leftovers = asyncio.all_tasks(self.loop)
            for task in leftovers:
                task.cancel()
            if leftovers:
                self.loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.run_until_complete(self.loop.shutdown_default_executor())
        finally:
            self.loop.close()
        if failure is not None:
            raise failure


async def _as_coroutine(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


@dataclass(frozen=True, slots=True)
class Mode:
    """How long to measure."""

    repeats: int
    """Samples per variant."""
    sample_seconds: float
    """Target duration of one sample's inner loop."""
    suite_timeout: float = 1800
    """A suite still running after this many seconds is a hang: dump every thread's stack and exit 1 (the
    host suite took over 600 s at load ~20 on the shared 2-core VM while making progress)."""
    warmup: int = 3
    """Untimed calls of each operation before calibrating (first calls build validators, fill caches)."""

    @classmethod
    def full(cls) -> Mode:
        """The mode for ``bench/RESULTS.md``: 25 repeats of ~20 ms samples."""
        return cls(repeats=25, sample_seconds=0.02)

    @classmethod
    def quick(cls) -> Mode:
        """The CI mode: 5 repeats of ~2 ms samples (the figures are rough; the point is that it runs)."""
        return cls(repeats=5, sample_seconds=0.002, suite_timeout=120, warmup=1)


@dataclass(frozen=True, slots=True)
class Stats:
    """Median, min and max over repeats."""

    median: float
    minimum: float
    maximum: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Stats:
        """Summarise *values* (at least one)."""
        return cls(statistics.median(values), min(values), max(values))


@dataclass(frozen=True, slots=True)
class Row:
    """One measured row, ready to print."""

    suite: str
    """Suite name."""
    measure: Measure
    """What was measured."""
    value: Stats
    """Subject, in the measure's unit."""
    floor: Stats | None
    """Floor, in the measure's unit."""
    ratio: Stats | None
    """Per-repeat subject/floor ratios."""

    @property
    def verdict(self) -> str:
        """``meets``, ``misses``, or ``-`` without a goal."""
        goal = self.measure.goal
        if goal is None:
            return "-"
        if goal.kind == "ratio":
            if self.ratio is None:
                return "-"
            return "meets" if self.ratio.median <= goal.limit else "misses"
        return "meets" if self.value.median <= goal.limit else "misses"


class _Timer:
    """Times one operation: calibrates an inner-loop count once, then takes samples."""

    def __init__(self, operation: Operation, ctx: SuiteContext, mode: Mode, per: int, label: str) -> None:
        self._label = label
        self._per = per
        self._ctx = ctx
        self._async = inspect.iscoroutinefunction(operation)
        self._operation = operation
        self._loops = 1
        self._loop_ns(mode.warmup)
        self._calibrate(mode.sample_seconds)

    def _loop_ns(self, loops: int) -> int:
        operation = self._operation
        gc.collect()
        gc.disable()
        try:
            if self._async:
                step = cast(Callable[[], Awaitable[Any]], operation)

                async def inner() -> int:
                    start = time.perf_counter_ns()
                    for _ in range(loops):
                        await step()
                    return time.perf_counter_ns() - start

                return self._ctx.loop.run_until_complete(inner())
            start = time.perf_counter_ns()
            for _ in range(loops):
                operation()
            return time.perf_counter_ns() - start
        except Exception as exc:
            raise SuiteError(f"{self._label} raised {exc!r}") from exc
        finally:
            gc.enable()

    def _calibrate(self, target_seconds: float) -> None:
        loops = 1
        while True:
            elapsed = self._loop_ns(loops)
            if elapsed >= target_seconds * 1e9 / 10 or loops >= 1 << 24:
                break
            loops *= 10
        self._loops = max(1, round(loops * target_seconds * 1e9 / max(elapsed, 1)))

    def sample_us(self) -> float:
        """Mean microseconds per operation (divided by ``per``) over one inner loop."""
        return self._loop_ns(self._loops) / self._loops / self._per / 1000


def environment() -> dict[str, str]:
    """Machine and versions, for the header: results mean little without them."""
    info = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu count": str(os.cpu_count()),
        # Other work on the machine moves every figure; a report without it cannot be judged.
        "load average (1/5/15 min)": " / ".join(f"{load:.2f}" for load in os.getloadavg()),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
    }
    for package in _TRACKED_PACKAGES:
        try:
            info[package] = version(package)
        except PackageNotFoundError:
            continue
    return info


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _load(ref: SuiteRef) -> Callable[[SuiteContext], list[Measure]]:
    module = importlib.import_module(ref.module)
    build = getattr(module, "measures", None)
    if build is None:
        raise SuiteError(f"suite {ref.name!r}: module {ref.module} has no measures(ctx) function")
    return cast(Callable[[SuiteContext], list[Measure]], build)


def _run_suite(ref: SuiteRef, mode: Mode, *, quick: bool) -> list[Row]:
    ctx = SuiteContext(quick=quick, loop=asyncio.new_event_loop())
    try:
        measures = _load(ref)(ctx)
        timers = [
            (
                _Timer(m.subject, ctx, mode, m.per, f"{m.name}"),
                None if m.floor is None else _Timer(m.floor, ctx, mode, m.per, f"{m.name} (floor)"),
            )
            for m in measures
        ]
        values: list[list[float]] = [[] for _ in measures]
        floors: list[list[float]] = [[] for _ in measures]
        ratios: list[list[float]] = [[] for _ in measures]
        for _ in range(mode.repeats):
            for index, (subject, floor) in enumerate(timers):
                value = subject.sample_us()
                values[index].append(value)
                if floor is not None:
                    floor_value = floor.sample_us()
                    floors[index].append(floor_value)
                    ratios[index].append(value / floor_value)
        return [
            Row(
                suite=ref.name,
                measure=m,
                value=Stats.of(values[i]),
                floor=Stats.of(floors[i]) if floors[i] else None,
                ratio=Stats.of(ratios[i]) if ratios[i] else None,
            )
            for i, m in enumerate(measures)
        ]
    finally:
        ctx.close()


def run_suites(
    suites: Iterable[SuiteRef],
    mode: Mode,
    *,
    quick: bool,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[Row], list[str]]:
    """Run *suites* one after the other; return the rows and the errors of suites that failed."""
    rows: list[Row] = []
    errors: list[str] = []
    for ref in suites:
        if progress is not None:
            progress(f"running {ref.name}: {ref.description}")
        started = time.perf_counter()
        # CI must never wait forever on a suite that deadlocks: the watchdog shows where it hangs and exits.
        faulthandler.dump_traceback_later(mode.suite_timeout, exit=True)
        try:
            rows.extend(_run_suite(ref, mode, quick=quick))
        except (Exception, SystemExit) as exc:  # one broken suite must not hide the others' figures
            errors.append(f"suite {ref.name!r} failed: {exc!r}")
        finally:
            faulthandler.cancel_dump_traceback_later()
        if progress is not None:
            progress(f"  {ref.name} took {time.perf_counter() - started:.1f} s")
    return rows, errors


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _spread(stats: Stats, suffix: str = "") -> str:
    return f"**{_number(stats.median)}{suffix}** ({_number(stats.minimum)}–{_number(stats.maximum)}{suffix})"


def _goal_text(measure: Measure) -> str:
    goal = measure.goal
    if goal is None:
        return "-"
    if goal.kind == "ratio":
        return f"≤ {_number(goal.limit)}x floor"
    return f"≤ {_number(goal.limit)} {measure.unit}"


def render_table(
    rows: Sequence[Row], env: dict[str, str], mode: Mode, *, quick: bool, errors: Sequence[str] = ()
) -> str:
    """The report as Markdown: the environment, one table of every row, what each floor is, and the suites
    that failed (a report silently missing a suite would read as complete)."""
    lines = ["# Benchmark results", ""]
    lines += [f"- {key}: {value}" for key, value in env.items()]
    lines += [
        f"- mode: {'quick' if quick else 'full'} ({mode.repeats} repeats, ~{mode.sample_seconds * 1000:g} ms"
        " per sample; median (min–max) over repeats; ratio = median of per-repeat ratios)",
        "",
        "| suite | measure | value | floor | ratio | goal | verdict |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for row in rows:
        unit = f" {row.measure.unit}"
        floor = "-" if row.floor is None else _spread(row.floor)
        ratio = "-" if row.ratio is None else _spread(row.ratio, "x")
        lines.append(
            f"| {row.suite} | {row.measure.name} | {_spread(row.value)}{unit} | {floor} | {ratio}"
            f" | {_goal_text(row.measure)} | {row.verdict} |"
        )
    floors = [row for row in rows if row.measure.floor is not None and row.measure.floor_name]
    if floors:
        lines += ["", "Floors (measured in the same run, interleaved with the subject):", ""]
        lines += [f"- *{row.measure.name}*: {row.measure.floor_name}" for row in floors]
    if errors:
        lines += ["", "Failed (no rows above):", ""]
        lines += [f"- {error}" for error in errors]
    return "\n".join(lines) + "\n"


def write_progress(message: str) -> None:
    """Progress goes to stderr so stdout holds only the table."""
    print(message, file=sys.stderr, flush=True)
