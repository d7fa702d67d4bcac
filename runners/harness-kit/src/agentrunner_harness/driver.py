"""One harness run, start to end: settings → workspace → projection → bridge → CLI → results.

:func:`run_harness` is the whole ``run()`` of both harness runners; a :class:`HarnessAdapter` supplies what
differs (command line, native parser, where skills go). The results follow runner-requirements §b.7: deltas
and tool telemetry while the CLI runs, then the native log and stderr tail as artifacts, one
``message.completed`` (with the run's metadata), the ``external.*`` state keys, and ``run.completed``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

import orjson
from agentrunner import AgentRunAPI, AgentRunContext, AgentRunner, AgentRunResult, ArtifactRef, ResultEmitter
from pydantic import JsonValue

from .environment import build_environment, parse_environment_json, redact
from .errors import HarnessFailure
from .mcp_pins import check_mcp_server, mcp_config_document, mcp_servers_of
from .native import (
    NativeParser,
    NativeResult,
    NativeSession,
    NativeText,
    NativeToolCompleted,
    NativeToolStarted,
    NativeUnknown,
)
from .process import HarnessProcess, OutputTooLargeError, ProcessLimits
from .projection import (
    ProjectedSkill,
    parse_skills,
    project_skills,
    prompt_text,
    verify_skills,
    write_context,
)
from .settings import HarnessSettings
from .workspace import (
    WorkspaceLease,
    WorkspacePolicy,
    context_directory,
    ensure_private_dir,
    resolve_working_directory,
    run_directory,
)

__all__ = [
    "HOST_BRIDGE_METADATA_KEY",
    "NATIVE_LOG_CAP",
    "SESSION_ID_KEY",
    "WORKING_DIRECTORY_KEY",
    "BridgeHandle",
    "HarnessAdapter",
    "HarnessPlan",
    "Invocation",
    "run_harness",
]

SESSION_ID_KEY: Final = "external.session_id"
"""Conversation-state key of the native session id."""
WORKING_DIRECTORY_KEY: Final = "external.working_directory"
"""Conversation-state key of the working directory."""
NATIVE_LOG_CAP: Final = 256 * 1024
"""Most bytes of native output kept as the run's audit artifact."""
_STDERR_ARTIFACT_CAP: Final = 64 * 1024
_STDERR_MESSAGE_CAP: Final = 2048
HOST_BRIDGE_METADATA_KEY: Final = "mcp_bridge"
"""``runtime.metadata`` key of the host's bridge registration (``agentrunner_mcp.HOST_BRIDGE_METADATA_KEY``)."""
_DEADLINE_MARGIN_SECONDS: Final = 1.0
_KILL_GRACE_SECONDS: Final = 2.0
log = logging.getLogger("agentrunner.harness")


class BridgeHandle(Protocol):
    """The parts of :class:`agentrunner_mcp.ExternalMCPBridge` a harness uses."""

    @property
    def tool_names(self) -> tuple[str, ...]: ...
    @property
    def env(self) -> dict[str, str]: ...
    @property
    def claude_allowed_tools(self) -> list[str]: ...
    def claude_mcp_config(self) -> dict[str, object]: ...
    def codex_cli_overrides(self) -> list[str]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class HarnessPlan:
    """Everything an adapter needs to build the command line of one attempt."""

    ctx: AgentRunContext
    """The run."""
    settings: HarnessSettings
    """Shared settings."""
    workdir: Path
    """Working directory (resolved, allowed)."""
    context_dir: Path
    """``<workdir>/<context-directory>``."""
    run_dir: Path
    """``<context_dir>/<run_id>``."""
    policy: WorkspacePolicy
    """The operator's workspace policy."""
    bridge: BridgeHandle | None
    """The run's MCP bridge (``None``: disabled or no tools)."""
    extra_mcp_servers: dict[str, dict[str, JsonValue]]
    """Allowlisted extra MCP servers."""
    resume_session: str | None
    """Native session to resume."""
    prompt: str
    """What goes to stdin."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Invocation:
    """One CLI start."""

    argv: list[str]
    """Command line."""
    env: dict[str, str]
    """Variables the adapter adds (credentials, base URLs, ``CODEX_HOME``)."""
    home: Path
    """``HOME`` of the CLI."""
    secrets: tuple[str, ...] = ()
    """Values masked in anything the run reports."""


class HarnessAdapter(Protocol):
    """What differs between Claude Code and Codex."""

    prefix: str
    """Error-code prefix (``claude_code``, ``codex``)."""
    default_command: str
    """``cli-command`` default."""

    def settings(self, config: Mapping[str, object]) -> HarnessSettings:
        """Parse (and check) the binding's config."""
        ...

    def skills_parent(self, workdir: Path, run_dir: Path) -> Path:
        """Directory that receives one subdirectory per skill."""
        ...

    def invocation(self, plan: HarnessPlan) -> Invocation:
        """The command line, environment and home of one attempt."""
        ...

    def parser(self, plan: HarnessPlan) -> NativeParser:
        """A fresh parser of the CLI's stdout."""
        ...

    def final_text(self, plan: HarnessPlan) -> str | None:
        """The reply from a side channel (Codex ``--output-last-message``), if any."""
        ...

    def session_missing(self, stderr: str, result: NativeResult | None) -> bool:
        """Whether a failed resume failed because the native session is gone."""
        ...


@dataclass(slots=True)
class _Attempt:
    text: list[str] = field(default_factory=list[str])
    session_id: str | None = None
    result: NativeResult | None = None
    unknown: dict[str, int] = field(default_factory=dict[str, int])
    native_log: bytearray = field(default_factory=bytearray)
    log_truncated: bool = False
    tools: int = 0
    open_tools: dict[str, str] = field(default_factory=dict[str, str])
    returncode: int | None = None
    stderr: bytes = b""
    streamed: bool = False


@dataclass(frozen=True, slots=True)
class _Budget:
    ends_at: float
    """Wall-clock end of the CLI's time (``time.time()`` scale)."""
    seconds: float
    """The whole budget, for messages."""
    kill_grace: float
    """SIGTERM → SIGKILL delay that still ends before the deadline."""


def _budget(ctx: AgentRunContext, configured: int) -> _Budget:
    """timeout = min(config, deadline), less a margin so a run that hits the deadline reports the harness's
    own ``timeout`` (and its tree is gone) before the host's deadline ends it."""
    now = time.time()
    deadline = ctx.runtime.deadline_at
    if deadline is None:
        return _Budget(now + configured, float(configured), _KILL_GRACE_SECONDS)
    remaining = deadline - now
    margin = min(_DEADLINE_MARGIN_SECONDS, max(0.0, remaining) * 0.2)
    seconds = min(float(configured), remaining - margin)
    if seconds <= 0:
        raise HarnessFailure(
            "timeout", "the run's deadline passed before the CLI could start", retryable=True
        )
    return _Budget(now + seconds, seconds, min(_KILL_GRACE_SECONDS, max(0.05, margin / 2)))


def _extra_mcp_servers(settings: HarnessSettings, policy: WorkspacePolicy) -> dict[str, dict[str, JsonValue]]:
    documents: list[object] = []
    doc = mcp_config_document(settings.mcp_config_json)
    if doc is not None:
        documents.append(doc)
    if settings.mcp_config_file:
        path = policy.check_inside(Path(settings.mcp_config_file), what="mcp-config-file")
        try:
            documents.append(orjson.loads(path.read_bytes()))
        except (OSError, orjson.JSONDecodeError) as exc:
            raise HarnessFailure("config_invalid", f"mcp-config-file cannot be read as JSON: {exc}") from exc
    servers: dict[str, dict[str, JsonValue]] = {}
    for document in documents:
        for name, server in mcp_servers_of(document).items():
            servers[name] = check_mcp_server(name, server, policy.mcp_server_pins)
    return servers


def _artifact(
    out: ResultEmitter, ctx: AgentRunContext, name: str, data: bytes, *, kind: str
) -> AgentRunResult:
    ref = ArtifactRef(
        artifact_id=f"{ctx.run_id}.{kind}",
        artifact_type="file",
        mime_type="application/x-ndjson" if kind == "native-log" else "text/plain",
        name=name,
        metadata={"purpose": "audit", "kind": kind},
    )
    return out.artifact(ref, content_base64=base64.b64encode(data).decode())


async def _run_attempt(
    adapter: HarnessAdapter, plan: HarnessPlan, attempt: _Attempt, out: ResultEmitter, budget: _Budget
) -> AsyncIterator[AgentRunResult]:
    settings, ctx = plan.settings, plan.ctx
    invocation = adapter.invocation(plan)
    granted = parse_environment_json(settings.environment_json)
    bridge_env = plan.bridge.env if plan.bridge is not None else {}
    env = build_environment(
        home=str(invocation.home), extra={**bridge_env, **invocation.env}, granted=granted
    )
    limits = ProcessLimits(
        cpu_seconds=settings.cpu_time_limit or None,
        address_space_bytes=settings.memory_limit_mb * 1024 * 1024 or None,
        kill_grace_seconds=budget.kill_grace,
    )
    parser = adapter.parser(plan)
    streaming = ctx.delivery.supports_streaming
    process = HarnessProcess(
        invocation.argv, cwd=plan.workdir, env=env, stdin=plan.prompt.encode(), limits=limits
    )
    try:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout_at(loop.time() + (budget.ends_at - time.time())):
            try:
                async with process:
                    async for line in process.lines():
                        _keep(attempt, line)
                        events = parser.feed(line)
                        for event in events:
                            for result in _apply(event, attempt, out, streaming=streaming):
                                yield result
                    for event in parser.finish():
                        for result in _apply(event, attempt, out, streaming=streaming):
                            yield result
                    attempt.returncode = await process.wait()
            finally:
                attempt.stderr = process.stderr_tail()
    except FileNotFoundError as exc:
        raise HarnessFailure(
            "command_not_found", f"the CLI {invocation.argv[0]!r} was not found ({exc.strerror})"
        ) from None
    except PermissionError as exc:
        raise HarnessFailure(
            "command_not_found", f"the CLI {invocation.argv[0]!r} cannot be run ({exc.strerror})"
        ) from None
    except OutputTooLargeError as exc:
        raise HarnessFailure("cli_error", str(exc)) from None
    except TimeoutError:
        raise HarnessFailure(
            "timeout",
            f"the CLI did not finish within {budget.seconds:.1f} s",
            retryable=True,
        ) from None
    for call_id, name in list(attempt.open_tools.items()):
        yield out.tool_completed(
            call_id, name, error_code="tool.unfinished", error_message="the CLI ended first"
        )
    attempt.open_tools.clear()


def _keep(attempt: _Attempt, line: bytes) -> None:
    if attempt.log_truncated:
        return
    if len(attempt.native_log) + len(line) + 1 > NATIVE_LOG_CAP:
        attempt.log_truncated = True
        return
    attempt.native_log += line + b"\n"


def _apply(event: object, attempt: _Attempt, out: ResultEmitter, *, streaming: bool) -> list[AgentRunResult]:
    match event:
        case NativeText(text=text):
            if not text:
                return []
            attempt.text.append(text)
            if streaming:
                attempt.streamed = True
                return [out.delta(text)]
            return []
        case NativeToolStarted(call_id=call_id, name=name, parameters=parameters):
            attempt.tools += 1
            attempt.open_tools[call_id] = name
            return [out.tool_started(call_id, name, parameters)]
        case NativeToolCompleted(call_id=call_id, name=name, preview=preview, error=error):
            results: list[AgentRunResult] = []
            started = attempt.open_tools.pop(call_id, None)
            if started is None:
                attempt.tools += 1
                results.append(out.tool_started(call_id, name))
            results.append(
                out.tool_completed(
                    call_id,
                    started or name,
                    result_preview={"text": preview[:500]} if preview else None,
                    error_code="tool.error" if error else None,
                    error_message=error[:500] if error else None,
                )
            )
            return results
        case NativeSession(session_id=session_id):
            attempt.session_id = session_id
            return []
        case NativeResult():
            attempt.result = event
            return []
        case NativeUnknown(kind=kind):
            attempt.unknown[kind] = attempt.unknown.get(kind, 0) + 1
            log.debug("ignored native event %s", kind)
            return []
        case _:
            return []


def _failure_message(attempt: _Attempt, secrets: tuple[str, ...]) -> str:
    tail = attempt.stderr[-_STDERR_MESSAGE_CAP:].decode("utf-8", "replace").strip()
    return redact(tail, secrets=secrets)


async def run_harness(
    adapter: HarnessAdapter, ctx: AgentRunContext, api: AgentRunAPI
) -> AsyncIterator[AgentRunResult]:
    """The run (see the module docstring). Every failure ends in one ``run.failed`` ``<prefix>.<kind>``."""
    out = AgentRunner.emitter(ctx)
    attempt = _Attempt()
    secrets: tuple[str, ...] = ()
    lease: WorkspaceLease | None = None
    try:
        settings = adapter.settings(ctx.config)
        budget = _budget(ctx, settings.timeout)
        secrets = tuple(s for s in (settings.api_key,) if s)
        policy = WorkspacePolicy.from_metadata(ctx.runtime.metadata)
        conversation = ctx.state.conversation
        stored_dir = conversation.get(WORKING_DIRECTORY_KEY)
        stored_session = conversation.get(SESSION_ID_KEY) if settings.resume else None
        session_key = str(
            ctx.runtime.metadata.get("session_key")
            or (ctx.conversation and ctx.conversation.conversation_id)
            or ctx.run_id
        )
        # A stored workspace that is gone (expired and swept by the host) took the native session's files
        # with it: start a fresh session rather than ask the CLI to resume one it cannot find.
        workspace_gone = _workspace_gone(settings, stored_dir)
        workdir = resolve_working_directory(
            policy,
            configured=settings.working_directory,
            stored=stored_dir if isinstance(stored_dir, str) else None,
            session_key=session_key,
        )
        lease = await WorkspaceLease.acquire(policy, workdir)
        context_dir = context_directory(workdir, settings.context_directory)
        run_dir = run_directory(context_dir, ctx.run_id)
        files = write_context(ctx, run_dir, working_directory=workdir) if settings.inject_context else None
        skills: list[ProjectedSkill] = []
        skills_dir: Path | None = None
        if settings.inject_skills:
            specs = parse_skills(settings.skills_json)
            if specs:
                verified = verify_skills(specs, policy.skill_pins)
                skills_dir = ensure_private_dir(adapter.skills_parent(workdir, run_dir))
                skills = project_skills(specs, skills_dir, verified=verified)
        extra_servers = _extra_mcp_servers(settings, policy)
        bridge_cm: AbstractAsyncContextManager[BridgeHandle | None] = contextlib.nullcontext(None)
        # Only the host's own bridge: without one (a host that does not register runs, the conformance kit)
        # the CLI runs without the host's tools rather than this run starting a bridge server of its own.
        hosted = HOST_BRIDGE_METADATA_KEY in ctx.runtime.metadata
        use_bridge = settings.enable_langbot_mcp and hosted and _has_bridge_tools(ctx)
        if use_bridge:
            bridge_cm = AgentRunner.create_external_mcp_bridge(ctx, api)
        async with bridge_cm as bridge:
            resume = stored_session if isinstance(stored_session, str) and stored_session else None
            fallback = False
            if resume is not None and workspace_gone:
                log.info("workspace of native session %s expired; starting a fresh session", resume)
                resume, fallback = None, True
            while True:
                plan = HarnessPlan(
                    ctx=ctx,
                    settings=settings,
                    workdir=workdir,
                    context_dir=context_dir,
                    run_dir=run_dir,
                    policy=policy,
                    bridge=bridge if bridge is not None and bridge.tool_names else None,
                    extra_mcp_servers=extra_servers,
                    resume_session=resume,
                    prompt=prompt_text(ctx.input.text, context_files=files, skills_dir=skills_dir),
                )
                attempt = _Attempt()
                async for result in _run_attempt(adapter, plan, attempt, out, budget):
                    yield result
                failed = attempt.returncode != 0 or (attempt.result is not None and attempt.result.is_error)
                stderr = attempt.stderr.decode("utf-8", "replace")
                if (
                    failed
                    and resume is not None
                    and not attempt.text
                    and adapter.session_missing(stderr, attempt.result)
                ):
                    log.info("native session %s is gone; starting a fresh one", resume)
                    resume, fallback = None, True
                    continue
                break
        for result in _audit_artifacts(out, ctx, attempt, adapter.prefix, secrets=secrets):
            yield result
        final = attempt.result
        if final is not None and final.is_error:
            message = redact(final.error_message or "the CLI reported an error", secrets=secrets)
            raise HarnessFailure(final.error_kind, message)
        if attempt.returncode != 0:
            detail = _failure_message(attempt, secrets) or f"the CLI exited with status {attempt.returncode}"
            raise HarnessFailure("cli_error", detail, details={"exit_code": attempt.returncode})
        text = (
            adapter.final_text(plan)
            or (final.text if final is not None and final.text else None)
            or "".join(attempt.text)
        )
        if not text.strip():
            raise HarnessFailure("empty_response", "the CLI finished without a reply")
        metadata: dict[str, JsonValue] = {
            "session_id": attempt.session_id,
            "working_directory": str(workdir),
            "tool_calls": attempt.tools,
            "resume_fallback": fallback,
            "langbot_mcp": use_bridge,
            "skills": [s.metadata() for s in skills],
            "unknown_native_events": dict[str, JsonValue](attempt.unknown),
            "native_log_truncated": attempt.log_truncated,
        }
        if final is not None:
            metadata.update(final.metadata)
        yield out.message(text, metadata=metadata)
        if attempt.session_id:
            yield out.state("conversation", SESSION_ID_KEY, attempt.session_id)
        yield out.state("conversation", WORKING_DIRECTORY_KEY, str(workdir))
        usage = dict(final.usage) if final is not None else {}
        yield out.complete(finish_reason=final.finish_reason if final is not None else "stop", usage=usage)
    except HarnessFailure as failure:
        details: dict[str, JsonValue] = {
            k: v for k, v in failure.details.items() if isinstance(v, str | int | float | bool)
        }
        yield out.fail(
            failure.code(adapter.prefix),
            redact(failure.message, secrets=secrets),
            retryable=failure.retryable,
            details=details,
        )
    except (OSError, ValueError) as exc:
        log.warning("harness run %s failed unexpectedly", ctx.run_id, exc_info=True)
        yield out.fail(
            f"{adapter.prefix}.unexpected_error", redact(f"{type(exc).__name__}: {exc}", secrets=secrets)
        )
    finally:
        if lease is not None:
            lease.release()


def _workspace_gone(settings: HarnessSettings, stored_dir: object) -> bool:
    """Whether the session workspace an earlier turn stored no longer exists (a configured one is not ours)."""
    return not settings.working_directory and isinstance(stored_dir, str) and not os.path.isdir(stored_dir)


def _has_bridge_tools(ctx: AgentRunContext) -> bool:
    resources, apis = ctx.resources, ctx.context.available_apis
    return bool(resources.tools or resources.knowledge_bases or apis.history_page or apis.event_get)


def _audit_artifacts(
    out: ResultEmitter, ctx: AgentRunContext, attempt: _Attempt, prefix: str, *, secrets: tuple[str, ...]
) -> list[AgentRunResult]:
    results: list[AgentRunResult] = []
    if attempt.native_log:
        results.append(
            _artifact(out, ctx, f"{prefix}-native.jsonl", bytes(attempt.native_log), kind="native-log")
        )
    if attempt.stderr:
        tail = redact(attempt.stderr[-_STDERR_ARTIFACT_CAP:].decode("utf-8", "replace"), secrets=secrets)
        results.append(_artifact(out, ctx, f"{prefix}-stderr.txt", tail.encode(), kind="stderr-tail"))
    return results
