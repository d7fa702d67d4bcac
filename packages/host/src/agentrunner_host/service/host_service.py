"""``HostService``: a :class:`~agentrunner_host.host.Host` built from :class:`~agentrunner_host.config.Settings`.

Opening one: create the data directory → open the database and migrate it to head → open the stores → close
the runs a crash left ``running`` (``host_restarted``) → load runners (installed entry points in process,
plugin directories out of process) → build the model provider and the resource catalog → resolve agents and
bindings → ready. Closing it cancels live runs (each ends ``run.failed``/``cancelled`` and is recorded) and
releases everything in reverse order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Mapping
from contextlib import asynccontextmanager
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from agentrunner import (
    TERMINAL_RESULT_TYPES,
    AgentRunner,
    AgentRunnerManifest,
    InvalidRunnerIdError,
    RunnerId,
)
from agentrunner.wire import ENTRY_POINT_GROUP
from alembic.script import ScriptDirectory
from pydantic import JsonValue, ValidationError
from sqlalchemy.ext.asyncio import AsyncEngine

from agentrunner_host.admission import config_problems
from agentrunner_host.bindings import BindingSet
from agentrunner_host.cluster import Membership, Notifications, default_machine_name
from agentrunner_host.config import (
    ECHO_RUNNER_ID,
    LOCAL_AGENT_RUNNER_ID,
    ConfigFileError,
    Settings,
    is_env_ref,
    redact_config,
    token_weakness,
)
from agentrunner_host.datadir import prepare_data_dir
from agentrunner_host.definitions import AgentEventEnvelope
from agentrunner_host.errors import (
    BindingNotFoundError,
    ConfigurationError,
    DuplicateEventError,
    HostError,
    RunnerDisabledError,
    RunnerNotFoundError,
)
from agentrunner_host.facts_api import PullAPI
from agentrunner_host.harness import HarnessPolicy, refuse_code_execution
from agentrunner_host.host import Host
from agentrunner_host.redaction import ResultRedactor, known_secrets
from agentrunner_host.registry import PluginFailure, RunnerDescriptor
from agentrunner_host.runtime import RemoteRuntimeServer, RuntimeManager, RuntimeOptions
from agentrunner_host.stores import (
    AGENTS_CHANNEL,
    AuditFilter,
    AuditPage,
    HostRequest,
    HostStores,
    ResultRecord,
    RunnerControl,
    StateTTL,
)
from agentrunner_host.stores.engine import alembic_config, create_engine, current_revision, upgrade
from agentrunner_host.stores.tables import PG_RESULTS_CHANNEL
from agentrunner_host.workspaces import sweep_workspaces

if TYPE_CHECKING:
    from agentrunner_host.runtime.process import RuntimeOptions

from agentrunner_host.providers.wiring import open_providers

from .agents import AgentDirectory
from .errors import NotFoundError
from .feeds import QUIET, REPLAY_PAGE, ReplayItem, ResultBatch, RunFeed
from .installed import InstalledPlugins
from .run_view import RunView
from .runner_views import RunnerView, runner_view

__all__ = [
    "CURSOR_KEY_FILE",
    "HostService",
    "default_runner_for",
    "plugin_runtime_options",
    "installed_manifests",
    "installed_runner_ids",
]

log = logging.getLogger("agentrunner.service")

CURSOR_KEY_FILE: Final = "cursor.key"
"""File in the data directory holding the key that signs history cursors (so they survive restarts)."""
_POLL_SECONDS: Final = 0.25
"""Seconds between two reads of a run another process executes, where nothing announces its results (SQLite)."""
_FOLLOW_END_SECONDS: Final = 30.0
"""How long a reader of another host's run that saw its terminal waits for the run's end to be committed."""
_FOLLOW_SAFETY_SECONDS: Final = 5.0
"""Seconds a reader of another host's run waits for an announcement before it reads the store anyway."""
REQUESTS_CHANNEL: Final = "agentrunner_requests"
"""PostgreSQL ``NOTIFY`` channel telling a host that a stored request waits for it (payload: its host id)."""
ANSWERS_CHANNEL: Final = "agentrunner_answers"
"""PostgreSQL ``NOTIFY`` channel telling a host that its request was answered (payload: the request id)."""
_REQUESTS_POLL_SQLITE: Final = 0.25
"""Seconds between two looks for stored requests on SQLite (several processes on one file, no notifications)."""
_REQUESTS_POLL_LISTENING: Final = 2.0
"""Seconds between two looks for stored requests while PostgreSQL announces them (the safety net for a
notification lost while the listening connection was down)."""
_RETRY_SECONDS: Final = 1.0
"""Pause before a failed background write is tried again."""
_REQUESTS_PRUNE_SECONDS: Final = 60.0
"""How often a host deletes the requests and runtime attachments of hosts no longer registered."""
_PENDING_CANCEL_SECONDS: Final = 30.0
"""How long a cancel taken for a run this host owns in the store but has not registered yet is kept (another
host can see the run's committed start a moment before this host registers the run)."""
_PENDING_CANCEL_RETRY: Final = 0.05
"""Seconds between two tries of such a cancel."""
_HANDOFF_CLAIM_SECONDS: Final = 10.0
"""How long a host waits for the host with a plugin's runtime to take an event before it runs it itself."""
_HANDOFF_ANSWER_SECONDS: Final = 60.0
"""How long a host waits for the answer once the other host took the event."""
_START_REQUEST_TTL_SECONDS: Final = 2 * (_HANDOFF_CLAIM_SECONDS + _HANDOFF_ANSWER_SECONDS)
"""Age past which a stored ``start`` request is deleted by the request sweep: its sender waits at most
``_HANDOFF_ANSWER_SECONDS`` after sending it, so nobody reads its answer any more (a sender that died, or whose
client went away, never deletes it). Twice that, because ages are read on other hosts' clocks."""
_AGENTS_POLL_SQLITE: Final = 1.0
"""Seconds between two reads of the definitions' version counter on SQLite (no notifications there)."""
_AGENTS_POLL_LISTENING: Final = 30.0
"""Seconds between two version reads while PostgreSQL announces changes (a safety net)."""


def _cursor_key(data_dir: Path) -> bytes:
    path = data_dir / CURSOR_KEY_FILE
    try:
        key = path.read_bytes()
        if len(key) >= 32:
            return key
    except FileNotFoundError:
        pass
    key = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key)
    return key


def _in_process_runners(failures: list[PluginFailure] | None = None) -> dict[str, list[AgentRunner]]:
    """Instances of every installed ``agentrunner.runners`` entry point, grouped by plugin id; each entry point
    that does not load is logged and, with *failures*, appended to it."""
    plugins: dict[str, list[AgentRunner]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            cls = ep.load()
            if not (isinstance(cls, type) and issubclass(cls, AgentRunner)):
                raise TypeError(f"{ep.value} is not an AgentRunner subclass")
            runner = cls()
            plugin_id = type(runner).manifest.runner_id.plugin_id
        except Exception as exc:
            log.warning("runner entry point %s (%s) not loaded: %s", ep.name, ep.value, exc)
            if failures is not None:
                failures.append(
                    PluginFailure(
                        plugin_id=_entry_point_plugin_id(ep.name),
                        reason=f"entry point {ep.name} ({ep.value}) not loaded: {type(exc).__name__}: {exc}",
                        source=f"entry-point:{ep.dist.name if ep.dist is not None else ep.name}",
                    )
                )
            continue
        plugins.setdefault(plugin_id, []).append(runner)
    return plugins


def _entry_point_plugin_id(name: str) -> str | None:
    try:
        return RunnerId.parse(f"plugin:{name}").plugin_id
    except InvalidRunnerIdError:
        return None


def _head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


class HostService:
    """A running host with its stores, runners, agents and live result feeds. Build with :meth:`open`."""

    def __init__(
        self,
        *,
        settings: Settings,
        engine: AsyncEngine,
        stores: HostStores,
        host: Host,
        directory: AgentDirectory,
        runtime: RuntimeManager | None = None,
        installed: InstalledPlugins | None = None,
        notifications: Notifications | None = None,
        membership: Membership | None = None,
    ) -> None:
        self.settings = settings
        """The settings it was built from."""
        self.engine = engine
        """The database engine."""
        self.stores = stores
        """The host stores."""
        self.host = host
        """The host."""
        self.directory = directory
        """Agents and bindings."""
        self.recovered_runs: list[str] = []
        """Runs closed as ``host_restarted`` when the service opened."""
        self._runtime = runtime
        self._installed = installed
        self._feeds: dict[str, RunFeed] = {}
        self._cancels: set[asyncio.Task[bool]] = set()
        self._pending_cancels: dict[str, float] = {}
        self._closing = False
        self.notifications = notifications or Notifications(engine)
        """Announcements from the other hosts of the database (PostgreSQL)."""
        self.membership = membership
        """This host's registration and lease (``None`` for a service built without :meth:`open`)."""
        self._agents_changed = asyncio.Event()
        self._run_watchers: dict[str, set[asyncio.Event]] = {}
        self.definitions_loaded = asyncio.Condition()
        """Notified every time agents and bindings changed elsewhere were loaded (tests wait on it)."""
        self._watchers: list[asyncio.Task[None]] = []
        self._requests_due = asyncio.Event()
        self._answers: dict[str, asyncio.Event] = {}
        self._starts: set[asyncio.Task[None]] = set()
        self.runtime_server: RemoteRuntimeServer | None = None
        """Where remote runtimes attach (``[runtime_server]``), when plugins are configured for it."""
        self._attachments_due = asyncio.Event()
        self.requests_taken = 0
        """Stored requests this host took so far (tests wait on it)."""

    # -- lifecycle ---------------------------------------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def open(
        cls, settings: Settings, *, recover: bool = True, discover: bool = True
    ) -> AsyncGenerator[HostService]:
        """Open the service (see the module docstring); closes it on exit. With *discover* every plugin is
        asked for its runners now (out-of-process plugins start), and each plugin that fails is logged with
        its reason; without it, plugins start on first use."""
        config = settings.config
        prepare_data_dir(settings.data_dir)
        engine = create_engine(settings.database_url)
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(engine.dispose)
            await upgrade(engine)
            stores = await HostStores.open(
                engine, data_dir=settings.data_dir, flush_window=config.result_flush_ms / 1000
            )
            stack.push_async_callback(stores.aclose)
            ttl = config.state
            scopes: dict[str, float] = {scope: seconds for scope, seconds in ttl.ttl_seconds.items()}
            stores.state.ttl = StateTTL(scopes=scopes, keys=ttl.key_ttl_seconds)
            cluster = config.cluster
            membership = Membership(
                stores.hosts,
                stores.runs,
                machine=cluster.host_name or default_machine_name(),
                heartbeat_seconds=cluster.heartbeat_seconds,
                lease_seconds=cluster.lease_seconds,
            )
            # only orphaned runs: this machine's previous incarnation's, and other hosts' once their lease expired
            recovered = await membership.join(recover=recover)
            stack.push_async_callback(membership.leave)
            if recovered:
                log.warning("closed %d run(s) interrupted by a restart: %s", len(recovered), recovered)
            failures: list[PluginFailure] = []
            plugins = _in_process_runners(failures) if config.runners.entry_points == "in_process" else {}
            providers = await open_providers(settings, engine=engine, stores=stores, stack=stack)
            host = Host.create(
                plugins=plugins,
                stores=stores,
                pull=PullAPI(stores, cursor_key=_cursor_key(settings.data_dir)),
                catalog=providers.catalog,
                models=providers.models,
                tools=providers.tools,
                knowledge=providers.knowledge,
                max_timeout_seconds=config.max_timeout_seconds,
                harness=_harness_policy(settings),
            )
            host.orchestrator.force_end_grace_seconds = config.runners.cancel_grace_seconds
            stack.push_async_callback(host.aclose)
            redactor = ResultRedactor(known_secrets(settings))
            host.orchestrator.secret_values = redactor if redactor else None
            runtime = None
            installed = InstalledPlugins(settings.data_dir)
            if settings.plugin_dirs or config.runners.entry_points == "subprocess" or installed.plugins:
                runners = config.runners
                runtime = RuntimeManager.from_directories(
                    settings.plugin_dirs,
                    host.dispatcher,
                    entry_points=runners.entry_points == "subprocess",
                    options=plugin_runtime_options(settings),
                )
                stack.push_async_callback(runtime.aclose)
                stack.push_async_callback(installed.aclose)
                failures += (
                    PluginFailure(plugin_id=w.plugin_id, reason=w.reason, source=w.path)
                    for w in runtime.discovery_warnings
                    if w.fatal
                )
                installed.register(runtime)
                for plugin_id in runtime.plugins:
                    # The runtime's connection is an async generator underneath; its annotation is looser.
                    host.registry.add(runtime.connection(plugin_id))
            failures += installed.failures
            for failure in failures:
                host.registry.record_failure(failure)
            if discover:
                await host.registry.refresh()
                installed.record_discovery(host.registry)
                for failure in host.registry.failures:
                    log.error(
                        "plugin %s failed to load: %s (%s)",
                        failure.plugin_id or "?",
                        failure.reason,
                        failure.source or "unknown source",
                    )
            # after discovery: a remote plugin has no runtime attached yet, and its listing fails at once
            runtime_server = await _open_runtime_server(settings, host, stack)
            _refuse_secret_literals(settings, plugins)
            default_runner, default_config = await _default_runner(host, settings)
            directory = AgentDirectory(
                config,
                store=stores.agents,
                data_dir=settings.data_dir,
                environ=settings.environ,
                default_runner_id=default_runner,
                default_runner_config=default_config,
            )
            await directory.import_file()
            await directory.refresh()
            host.orchestrator.bindings = directory.binding_set()
            await _admit_configured_agents(settings, host)
            await _check_code_executing_agents(host, directory)
            notifications = Notifications(engine)
            stack.push_async_callback(notifications.aclose)
            service = cls(
                settings=settings,
                engine=engine,
                stores=stores,
                host=host,
                directory=directory,
                runtime=runtime,
                installed=installed,
                notifications=notifications,
                membership=membership,
            )
            service.recovered_runs = recovered
            service.runtime_server = runtime_server
            if runtime_server is not None:
                runtime_server.on_change = service._attachment_changed
            await service._start_watching()
            stack.push_async_callback(service._stop_watching)
            stack.push_async_callback(service._drain)
            yield service

    async def _start_watching(self) -> None:
        notifications = self.notifications
        notifications.subscribe(AGENTS_CHANNEL, lambda _payload: self._agents_changed.set())
        notifications.subscribe(PG_RESULTS_CHANNEL, self._on_results)
        notifications.subscribe(REQUESTS_CHANNEL, self._on_request)
        notifications.subscribe(ANSWERS_CHANNEL, self._on_answer)
        notifications.on_reconnect(self._agents_changed.set)
        notifications.on_reconnect(self._wake_all)
        # requests announced while the connection was down were lost as notifications, never as rows
        notifications.on_reconnect(self._requests_due.set)
        await notifications.start()
        if self.membership is not None:
            self.membership.start()
        self._watchers.append(asyncio.create_task(self._watch_agents(), name="agentrunner-agents-watch"))
        self._watchers.append(asyncio.create_task(self._sweep(), name="agentrunner-sweep"))
        self._watchers.append(asyncio.create_task(self._watch_requests(), name="agentrunner-requests"))
        if self.runtime_server is not None:
            self._attachments_due.set()
            self._watchers.append(
                asyncio.create_task(self._watch_attachments(), name="agentrunner-attachments")
            )

    async def _stop_watching(self) -> None:
        for task in self._watchers:
            task.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)
        self._watchers.clear()
        if self._starts:
            await asyncio.gather(*self._starts, return_exceptions=True)

    # -- remote runtimes ---------------------------------------------------------------------------------------

    def _attachment_changed(self, plugin_id: str) -> None:
        server = self.runtime_server
        if server is not None and server.connection(plugin_id).connected:
            # discovered again on next lookup (a failed discovery while none was attached is forgotten)
            self.host.registry.add(server.connection(plugin_id))
        self._attachments_due.set()

    async def _watch_attachments(self) -> None:
        """Keep ``runtime_attachments`` equal to the runtimes connected here (other hosts send their events)."""
        server = self.runtime_server
        assert server is not None
        while True:
            await self._attachments_due.wait()
            self._attachments_due.clear()
            me = self.host_id
            if me is None:
                continue
            try:
                for plugin_id in server.plugin_ids:
                    if server.connection(plugin_id).connected:
                        await self.stores.requests.attach(plugin_id, me)
                    else:
                        await self.stores.requests.detach(plugin_id, me)
            except Exception as exc:
                log.error("could not record the attached remote runtimes: %s", exc)
                self._attachments_due.set()
                await asyncio.sleep(_RETRY_SECONDS)

    # -- requests from other hosts (stored, then announced) ----------------------------------------------------

    @property
    def host_id(self) -> str | None:
        """This incarnation's id in the host registry (``None`` for a service built without :meth:`open`)."""
        return None if self.membership is None else self.membership.host_id

    def _on_request(self, payload: str) -> None:
        if payload == self.host_id:
            self._requests_due.set()

    def _on_answer(self, payload: str) -> None:
        wake = self._answers.get(payload)
        if wake is not None:
            wake.set()

    async def _watch_requests(self) -> None:
        """Take the requests stored for this host: when announced, when the listening connection came back,
        and on a poll (the safety net on PostgreSQL, the only way on SQLite)."""
        poll = _REQUESTS_POLL_LISTENING if self.notifications.listening else _REQUESTS_POLL_SQLITE
        loop = asyncio.get_running_loop()
        pruned_at = loop.time()
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(poll):
                    await self._requests_due.wait()
            self._requests_due.clear()
            try:
                await self.take_requests()
                if loop.time() - pruned_at >= _REQUESTS_PRUNE_SECONDS:
                    pruned_at = loop.time()
                    # requests and attachments of hosts that left or were forgotten: nobody will take them
                    await self.stores.requests.prune()
                    await self.expire_start_requests()
            except Exception as exc:
                # the rows stay stored: the next round takes them
                log.error("could not take the requests stored for this host: %s", exc)

    async def expire_start_requests(self) -> int:
        """Delete the ``start`` requests older than any sender waits for their answer now (the request watcher
        does it every ``_REQUESTS_PRUNE_SECONDS``); returns how many."""
        created_before = int(time.time() * 1000) - int(_START_REQUEST_TTL_SECONDS * 1000)
        expired = await self.stores.requests.expire_starts(created_before=created_before)
        if expired:
            log.info("deleted %d start request(s) whose sender no longer waits for the answer", expired)
        return expired

    async def take_requests(self) -> int:
        """Act on every request stored for this host now (the watcher does it on its own); returns how many."""
        me = self.host_id
        if self._pending_cancels:
            await self._retry_pending_cancels()
        if me is None or not await self.stores.requests.has_pending(me):
            return 0
        taken = await self.stores.requests.take(me)
        for request in taken:
            if request.kind == "cancel" and request.run_id is not None:
                self._cancel_here(request.run_id)
            elif request.kind == "start":
                task = asyncio.create_task(
                    self._start_requested(request), name=f"agentrunner-start-{request.request_id}"
                )
                self._starts.add(task)
                task.add_done_callback(self._starts.discard)
        self.requests_taken += len(taken)
        return len(taken)

    def _cancel_here(self, run_id: str) -> None:
        if self.host.orchestrator.handle(run_id) is None:
            # Ended already, or not registered yet: the run's start is committed (the sender saw it running)
            # a moment before the orchestrator holds the run. The request row is gone, so the cancel is kept
            # here and tried again until the run is registered or the store says it is no longer ours to end.
            loop = asyncio.get_running_loop()
            self._pending_cancels.setdefault(run_id, loop.time() + _PENDING_CANCEL_SECONDS)
            loop.call_later(_PENDING_CANCEL_RETRY, self._requests_due.set)
            return
        self._pending_cancels.pop(run_id, None)
        task = asyncio.create_task(
            self.host.orchestrator.cancel(run_id, reason="cancelled through the API of another host"),
            name=f"agentrunner-cancel-{run_id}",
        )
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    async def _retry_pending_cancels(self) -> None:
        """Apply the cancels taken before their run was registered here (see :meth:`_cancel_here`)."""
        loop = asyncio.get_running_loop()
        for run_id, give_up in list(self._pending_cancels.items()):
            if self.host.orchestrator.handle(run_id) is not None:
                self._cancel_here(run_id)
                continue
            record = await self.stores.runs.get(run_id)
            ours = record is not None and record.status == "running" and record.owner_host == self.host_id
            if not ours:
                del self._pending_cancels[run_id]  # it ended, or another host runs it: nothing to cancel here
            elif loop.time() > give_up:
                del self._pending_cancels[run_id]
                log.warning(
                    "a cancel of run %s was dropped: the run is recorded as running on this host, which does"
                    " not hold it (its next start closes it as host_restarted)",
                    run_id,
                )
            else:
                loop.call_later(_PENDING_CANCEL_RETRY, self._requests_due.set)

    async def _start_requested(self, request: HostRequest) -> None:
        """Start the run of an event another host sent here (this host has the plugin's runtime attached) and
        answer with its id or the error."""
        body = request.body or {}
        answer: dict[str, JsonValue]
        try:
            event = AgentEventEnvelope.model_validate(body.get("event"))
            agent = body.get("agent_id")
            feed = await self.submit(event, agent_id=agent if isinstance(agent, str) else None)
            answer = {"run_id": feed.run_id}
        except DuplicateEventError as exc:
            answer = {"error": "duplicate_event", "event_id": exc.event_id, "run_id": exc.run_id}
        except BindingNotFoundError as exc:
            answer = {"error": "binding_not_found", "message": exc.message}
        except RunnerDisabledError as exc:
            answer = {"error": "runner_disabled", "message": exc.reason, "runner_id": exc.runner_id}
        except HostError as exc:
            answer = {"error": "host_error", "message": exc.message}
        except ValidationError as exc:
            answer = {
                "error": "host_error",
                "message": f"the forwarded event is invalid: {exc.error_count()} error(s)",
            }
        try:
            await self.stores.requests.answer(request.request_id, answer)
            await self.notifications.notify(ANSWERS_CHANNEL, request.request_id)
        except Exception as exc:
            log.error("could not answer the start request %s: %s", request.request_id, exc)

    async def _runtime_host_for(self, event: AgentEventEnvelope, agent_id: str | None) -> str | None:
        """The host to send *event* to: one with a runtime of the runner's plugin attached, when that plugin is
        served by remote runtimes and none is connected here. ``None``: run it here."""
        server = self.runtime_server
        if server is None:
            return None
        try:
            binding = (
                self.directory.direct_binding(agent_id)
                if agent_id is not None
                else self.refresh_bindings().resolve(event)
            )
            plugin_id = RunnerId.parse(binding.runner_id).plugin_id
        except (HostError, InvalidRunnerIdError):
            return None  # submitting here stores the event and reports why it cannot run
        if plugin_id not in server.plugin_ids or server.connection(plugin_id).connected:
            return None
        me = self.host_id
        return next((h for h in await self.stores.requests.attached(plugin_id) if h != me), None)

    async def _hand_off(self, target: str, event: AgentEventEnvelope, agent_id: str | None) -> str | None:
        """Send *event* to *target* and wait for the id of the run it started there (or its error, raised here).
        ``None`` when *target* did not take it in time (the caller then runs it here)."""
        body: dict[str, JsonValue] = {"event": event.model_dump(mode="json"), "agent_id": agent_id}
        requests = self.stores.requests
        request_id = await requests.ask(target, "start", body=body)
        wake = self._answers.setdefault(request_id, asyncio.Event())
        poll = _FOLLOW_SAFETY_SECONDS / 5 if self.notifications.listening else _POLL_SECONDS
        try:
            await self.notifications.notify(REQUESTS_CHANNEL, target)
            loop = asyncio.get_running_loop()
            claim_by = loop.time() + _HANDOFF_CLAIM_SECONDS
            answer_by = loop.time() + _HANDOFF_ANSWER_SECONDS
            while True:
                claimed, answer = await requests.answer_of(request_id)
                if answer is not None:
                    break
                if not claimed and loop.time() > claim_by and await requests.withdraw(request_id):
                    log.warning(
                        "host %s did not take event %s in time; running it here", target, event.event_id
                    )
                    return None
                if loop.time() > answer_by:
                    raise HostError(f"host {target} took event {event.event_id} but did not answer in time")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(poll):
                        await wake.wait()
                wake.clear()
        finally:
            self._answers.pop(request_id, None)
        await requests.drop(request_id)
        return _answered_run(answer)

    async def sweep_expired(self) -> tuple[int, int]:
        """Delete expired state values and artifacts now (the sweeper does it every
        ``[state] sweep_interval_seconds``); returns how many of each."""
        state = await self.stores.state.sweep_expired()
        artifacts = await self.stores.artifacts.sweep_expired()
        if state or artifacts:
            log.info("swept %d expired state value(s) and %d expired artifact(s)", state, artifacts)
        return state, artifacts

    async def sweep_idempotency_keys(self) -> int:
        """Forget the idempotency answers older than ``[state] idempotency_ttl_seconds`` now (the sweeper does
        it every ``sweep_interval_seconds``); returns how many."""
        ttl_ms = int(self.settings.config.state.idempotency_ttl_seconds * 1000)
        forgotten = await self.stores.idempotency.sweep(older_than=int(time.time() * 1000) - ttl_ms)
        if forgotten:
            log.info("forgot %d idempotency answer(s) older than the idempotency TTL", forgotten)
        return forgotten

    async def sweep_workspaces(self) -> list[str]:
        """Delete the harness session workspaces unused for ``[security] harness_workspace_ttl_seconds`` now
        (the sweeper does it every ``sweep_interval_seconds``); returns their names."""
        ttl = self.settings.config.security.harness_workspace_ttl_seconds
        removed = await asyncio.to_thread(
            sweep_workspaces, self.settings.data_dir / "harness", ttl_seconds=ttl
        )
        if removed:
            log.info("removed %d harness workspace(s) unused for %g s", len(removed), ttl)
        return removed

    async def _sweep(self) -> None:
        interval = self.settings.config.state.sweep_interval_seconds
        while True:
            try:
                await self.sweep_expired()
            except Exception as exc:
                # expired values stay unreadable meanwhile; the next round tries again
                log.error("sweeping expired state and artifacts failed: %s", exc)
            try:
                await self.sweep_idempotency_keys()
            except Exception as exc:
                # old answers only take space meanwhile; the next round tries again
                log.error("sweeping old idempotency answers failed: %s", exc)
            try:
                await self.sweep_workspaces()
            except Exception as exc:
                # expired workspaces only take space meanwhile; the next round tries again
                log.error("sweeping expired harness workspaces failed: %s", exc)
            await asyncio.sleep(interval)

    async def _watch_agents(self) -> None:
        """Reload agents and bindings changed by another host or process: when PostgreSQL announces it, else
        (SQLite, or a lost notification) on a poll of the version counter."""
        poll = _AGENTS_POLL_LISTENING if self.notifications.listening else _AGENTS_POLL_SQLITE
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(poll):
                    await self._agents_changed.wait()
            self._agents_changed.clear()
            try:
                await self.reload_definitions()
            except Exception as exc:
                # keep serving with the bindings loaded before; the change is retried on the next poll
                log.error("could not apply the changed agents and bindings: %s", exc)

    async def reload_definitions(self) -> bool:
        """Load agents and bindings changed by another host or process now (the watcher does it on its
        own within a bounded time); True when something changed."""
        if not await self.directory.refresh():
            return False
        self.host.orchestrator.bindings = self.directory.binding_set()
        async with self.definitions_loaded:
            self.definitions_loaded.notify_all()
        return True

    async def cancel_all(self, *, reason: str = "host shutting down") -> None:
        """Cancel every live run (each is recorded as cancelled); new events are refused from now on."""
        self._closing = True
        for run_id in list(self._feeds):
            await self.host.orchestrator.cancel(run_id, reason=reason)

    async def _drain(self) -> None:
        await self.cancel_all()
        feeds = [feed for feed in self._feeds.values() if not feed.done]
        if feeds:
            await asyncio.gather(*(feed.ended() for feed in feeds))

    # -- events and runs ---------------------------------------------------------------------------------------

    def refresh_bindings(self) -> BindingSet:
        """The binding set in use (changes made by other hosts or processes arrive through the watcher)."""
        bindings = self.host.orchestrator.bindings
        assert bindings is not None
        return bindings

    def apply_bindings(self, bindings: BindingSet) -> None:
        """Use a new binding set from the next event on."""
        self.host.orchestrator.bindings = bindings

    async def accept(
        self, event: AgentEventEnvelope, *, agent_id: str | None = None, minted: bool = False
    ) -> str:
        """Submit an event wherever its run can execute and return the run's id: here, or — when its runner's
        plugin is served by remote runtimes, none is attached here and one is attached to another host — on
        that host (the run is then followed like any run of another host). Raises what :meth:`submit` raises.
        *minted*: the event's id was just made up for it by this host (see :meth:`submit`).
        """
        if self._closing:
            raise HostError("the host is shutting down")
        target = await self._runtime_host_for(event, agent_id)
        if target is not None:
            run_id = await self._hand_off(target, event, agent_id)
            if run_id is not None:
                return run_id
        return (await self.submit(event, agent_id=agent_id, minted=minted)).run_id

    async def submit(
        self, event: AgentEventEnvelope, *, agent_id: str | None = None, minted: bool = False
    ) -> RunFeed:
        """Submit an event here and return the feed of its run; with *agent_id* the event goes to that agent
        directly instead of through the bindings. *minted*: the event's id was made up for this submission
        by this host (ids.ordered_hex: no client sent it), so the start skips its look for an earlier copy.

        Raises ``BindingNotFoundError``, ``DuplicateEventError`` (with the first run's id), ``RunnerNotFoundError``.
        """
        if self._closing:
            raise HostError("the host is shutting down")
        self.refresh_bindings()
        if self._installed is not None and self._runtime is not None:
            self._installed.sync(self._runtime, self.host.registry)
        try:
            if agent_id is not None:
                handle = await self.host.orchestrator.start(
                    event, self.directory.direct_binding(agent_id), minted=minted
                )
            else:
                handle = await self.host.orchestrator.submit(event, minted=minted)
        except DuplicateEventError as exc:
            if exc.run_id is None:
                exc.run_id = await self._run_for_event(event.event_id)
            raise
        run_id = handle.run_id
        runs = self.stores.runs

        async def replay(after: int, limit: int) -> list[ResultRecord]:
            return await runs.results_after(run_id, after_host_seq=after, limit=limit)

        feed = RunFeed(handle, event_id=event.event_id, replay=replay, on_end=self._feed_ended)
        self._feeds[handle.run_id] = feed
        return feed

    def _feed_ended(self, feed: RunFeed) -> None:
        # Dropped on the next loop turn, not now: a feed can end while it is made (a run that ended before
        # its start was acknowledged), and its submitter must still find it to read it.
        asyncio.get_running_loop().call_soon(self._feeds.pop, feed.run_id, None)

    async def _run_for_event(self, event_id: str) -> str | None:
        # A live run's row may not be written yet (its start is stored by the run's own task).
        for feed in self._feeds.values():
            if feed.event_id == event_id:
                return feed.run_id
        return await self.stores.runs.for_event(event_id)

    def feed(self, run_id: str) -> RunFeed | None:
        """The live feed of a run started by this process."""
        return self._feeds.get(run_id)

    async def run(self, run_id: str) -> RunView:
        """The status of a run; raises :class:`NotFoundError`."""
        feed = self._feeds.get(run_id)
        record = await self.stores.runs.get(run_id)
        if record is None:
            if feed is None:
                raise NotFoundError(f"run {run_id!r} does not exist")
            handle = feed.handle
            return RunView(
                run_id=run_id,
                status="running",
                runner_id=handle.snapshot.runner_id,
                binding_id=handle.binding.binding_id,
                event_id=feed.event_id,
                results=feed.delivered,
                live=True,
            )
        if feed is not None and record.status == "running":
            count = feed.delivered
        else:
            count = await self.stores.runs.result_count(run_id)
        return RunView.of(record, results=count, live=feed is not None)

    async def stored_results(self, run_id: str, *, after: int, limit: int) -> list[ReplayItem]:
        """Stored results after a cursor (a page)."""
        records = await self.stores.runs.results_after(run_id, after_host_seq=after, limit=limit)
        return [ReplayItem.of(r) for r in records]

    async def follow(self, run_id: str, *, after: int = 0) -> AsyncIterator[ReplayItem]:
        """Every result after *after*: replayed from the store, then live until the run ends.

        A run live in this process is read from its feed. A run another host (or process) is executing is
        read from the store, page by page, waking up when PostgreSQL announces a commit of its results; on
        SQLite, which announces nothing, the store is polled. Raises :class:`NotFoundError` for an unknown run.
        """
        async with contextlib.aclosing(self.batches(run_id, after=after)) as batches:
            async for batch in batches:
                for item in batch:
                    yield item

    def batches(
        self, run_id: str, *, after: int = 0, idle: float | None = None
    ) -> AsyncGenerator[ResultBatch]:
        """The results of :meth:`follow` in batches of those ready together; with *idle*, an empty batch when
        about *idle* seconds passed without a result. Raises :class:`NotFoundError` for an unknown run (as
        its first batch is read). The reader closes it when it stops early.

        A live run's feed hands out its own generator, not one wrapped around it: a wrapper cost an
        ``asend`` hop per batch, a context manager and a close of its own per reader."""
        feed = self._feeds.get(run_id)
        if feed is not None:
            return feed.batches(after=after, idle=idle)
        return self._stored_batches(run_id, after=after, idle=idle)

    async def _stored_batches(
        self, run_id: str, *, after: int, idle: float | None
    ) -> AsyncGenerator[ResultBatch]:
        if await self.stores.runs.get(run_id) is None:
            raise NotFoundError(f"run {run_id!r} does not exist")
        cursor = after
        loop = asyncio.get_running_loop()
        quiet_since = loop.time()
        with self._watching(run_id) as wake:
            while True:
                wake.clear()
                page = await self.stored_results(run_id, after=cursor, limit=REPLAY_PAGE)
                ends = _through_terminal(page)
                if page:
                    cursor = page[-1].host_seq
                    quiet_since = loop.time()
                    yield ResultBatch(page[:ends] if ends else page)
                if ends:
                    # A terminal the runner sent itself is committed with its results, and the run's end in
                    # the journal's next write: end the stream once the store says the run ended, so a reader
                    # of another host's run never sees its terminal with the run still running.
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(_FOLLOW_END_SECONDS):
                            while await self._still_running(run_id):
                                await self._wait_for_news(wake)
                                wake.clear()
                    return
                if len(page) == REPLAY_PAGE:
                    continue
                if not page and not await self._still_running(run_id):
                    # ended: its terminal is committed with its end, so one more read sees everything
                    rest = await self.stored_results(run_id, after=cursor, limit=REPLAY_PAGE)
                    if rest:
                        ends = _through_terminal(rest)
                        yield ResultBatch(rest[:ends] if ends else rest)
                    return
                await self._wait_for_news(wake)
                if idle is not None and loop.time() - quiet_since >= idle:
                    quiet_since = loop.time()
                    yield QUIET

    async def _still_running(self, run_id: str) -> bool:
        record = await self.stores.runs.get(run_id)
        return record is not None and record.status == "running"

    async def _wait_for_news(self, wake: asyncio.Event) -> None:
        interval = _FOLLOW_SAFETY_SECONDS if self.notifications.listening else _POLL_SECONDS
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(interval):
                await wake.wait()

    @contextlib.contextmanager
    def _watching(self, run_id: str) -> Generator[asyncio.Event]:
        """An event set whenever results of *run_id* are announced (or announcements may have been lost)."""
        wake = asyncio.Event()
        watchers = self._run_watchers.setdefault(run_id, set())
        watchers.add(wake)
        try:
            yield wake
        finally:
            watchers.discard(wake)
            if not watchers:
                self._run_watchers.pop(run_id, None)

    def _on_results(self, payload: str) -> None:
        run_id, _, _seq = payload.rpartition(" ")
        for wake in self._run_watchers.get(run_id, ()):
            wake.set()

    def _wake_all(self) -> None:
        for watchers in self._run_watchers.values():
            for wake in watchers:
                wake.set()

    async def wait_ended(self, run_id: str) -> None:
        """Wait until the run is no longer ``running`` in the store (whichever host executes it)."""
        feed = self._feeds.get(run_id)
        if feed is not None:
            await feed.outcome()
            return
        with self._watching(run_id) as wake:
            while await self._still_running(run_id):
                await self._wait_for_news(wake)
                wake.clear()

    async def cancel(self, run_id: str) -> bool:
        """Cancel a run: a live run here at once; a run another host (or process on the same SQLite file)
        executes through a request stored for that host, which takes it when announced (PostgreSQL), when its
        listening connection comes back, or on its next poll. False when the run is not running, or was
        started without an owner (by a version without the host registry). Raises :class:`NotFoundError` for
        an unknown run."""
        if await self.host.orchestrator.cancel(run_id, reason="cancelled through the API"):
            return True
        if self._feeds.get(run_id) is not None:
            return False
        record = await self.stores.runs.get(run_id)
        if record is None:
            raise NotFoundError(f"run {run_id!r} does not exist")
        owner = record.owner_host
        if record.status == "running" and owner is not None and owner != self.host_id:
            await self.stores.requests.ask(owner, "cancel", run_id=run_id)
            await self.notifications.notify(REQUESTS_CHANNEL, owner)
            return True
        return False

    # -- runners and health ------------------------------------------------------------------------------------

    async def runners(self) -> list[RunnerDescriptor]:
        """Every available runner."""
        return await self.host.registry.list()

    async def runner_schema(self, runner_id: str) -> RunnerDescriptor | None:
        """A runner's descriptor, or ``None`` when it is not available."""
        try:
            return await self.host.registry.get(runner_id)
        except HostError:
            return None

    async def redacted(self, runner_id: str, runner_config: Mapping[str, Any]) -> dict[str, Any]:
        """*runner_config* with the secret fields of the runner's form (and secret-looking keys) masked."""
        descriptor = await self.runner_schema(runner_id)
        return redact_config(runner_config, descriptor.manifest.config_schema if descriptor else None)

    async def runner_views(self) -> list[RunnerView]:
        """Every available runner as the admin surfaces show it: switch, risk view, process status, warnings."""
        self.refresh_bindings()
        controls = await self.stores.controls.disabled()
        agents = [entry.agent for entry in self.directory.agents()]
        registry = self.host.registry
        warnings = registry.warnings
        servers = [server.name for server in self.settings.config.security.harness_mcp_servers]
        return [
            runner_view(
                d,
                registry=registry,
                agents=agents,
                control=controls.get(d.runner_id),
                warnings=warnings,
                mcp_servers=servers,
            )
            for d in await self.runners()
        ]

    async def disable_runner(self, runner_id: str, *, reason: str, by: str | None = None) -> RunnerControl:
        """Disable an available runner: from now on no event starts a run of it (on any host sharing the
        database). Raises :class:`NotFoundError` for a runner that is not available."""
        descriptor = await self.runner_schema(runner_id)
        if descriptor is None:
            raise NotFoundError(f"runner {runner_id!r} is not available")
        control = await self.stores.controls.disable(descriptor.runner_id, reason=reason, by=by)
        log.warning("runner %s disabled (%s): %s", descriptor.runner_id, by or "unknown", reason)
        return control

    async def enable_runner(self, runner_id: str) -> bool:
        """Enable a runner again; False when it was not disabled."""
        enabled = await self.stores.controls.enable(runner_id)
        if enabled:
            log.warning("runner %s enabled", runner_id)
        return enabled

    async def audit(
        self, where: AuditFilter, *, cursor: int | None = None, limit: int = 100, order: str = "desc"
    ) -> AuditPage:
        """A page of the stored back-call audit."""
        return await self.stores.audit.page(
            where, cursor=cursor, limit=limit, order="asc" if order == "asc" else "desc"
        )

    def plugin_failures(self) -> list[PluginFailure]:
        """Plugins that yield no runner, with the reason (as of their last discovery)."""
        return self.host.registry.failures

    async def readiness(self) -> tuple[bool, str]:
        """Whether the database answers and is migrated to head, and why not; failed plugins are named in the
        detail but do not make the host unready (the other plugins keep working)."""
        try:
            current = await asyncio.wait_for(current_revision(self.engine), timeout=5)
        except Exception as exc:
            return False, f"database unreachable: {type(exc).__name__}"
        head = _head_revision()
        if current != head:
            return False, f"database at revision {current}, expected {head}"
        detail = f"database at revision {current}"
        failed = self.plugin_failures()
        if failed:
            names = ", ".join(f.plugin_id or f.source for f in failed)
            detail += f"; {len(failed)} plugin(s) failed to load: {names}"
        return True, detail


def _through_terminal(page: list[ReplayItem]) -> int:
    """How many of *page*'s results a reader gets: through its terminal result (0: it has none)."""
    for index, item in enumerate(page):
        if item.type in TERMINAL_RESULT_TYPES:
            return index + 1
    return 0


def _harness_policy(settings: Settings) -> HarnessPolicy:
    security = settings.config.security
    return HarnessPolicy(
        allow_code_executing_runners=security.allow_code_executing_runners,
        workspace_root=settings.data_dir / "harness",
        allowed_roots=tuple(security.harness_workspace_roots),
        mcp_servers=tuple(security.harness_mcp_servers),
        allow_danger_full_access=security.allow_danger_full_access,
        skills=None if security.harness_skills is None else tuple(security.harness_skills),
    )


async def _admit_configured_agents(settings: Settings, host: Host) -> None:
    """The admission of ``POST /v1/agents`` for the agents of the configuration file, at startup: each one's
    whole config must fit its runner's form (:func:`~agentrunner_host.admission.config_problems`), or the host
    refuses to start with every problem named ``agents[i] (agent id).runner_config.<field>``. An agent whose
    runner is not available now — its plugin failed to load (``/readyz`` says so), or it is served by a remote
    runtime not attached yet — cannot be checked here; its runs fail ``runner.unavailable`` until it is, and
    the runner refuses a bad config itself."""
    problems: list[str] = []
    for index, agent in enumerate(settings.config.agents):
        try:
            descriptor = await host.registry.get(agent.runner_id)
        except HostError as exc:
            log.warning("agent %s: its runner cannot be checked now (%s)", agent.agent_id, exc)
            continue
        runner = f"runner {agent.runner_id}"
        for problem in config_problems(
            descriptor.manifest.config_schema, agent.runner_config, runner_id=runner
        ):
            problems.append(f"agents[{index}] ({agent.agent_id}).{problem}")
    if problems:
        source = str(settings.config_path) if settings.config_path else "the configuration"
        raise ConfigFileError(source, problems)


async def _check_code_executing_agents(host: Host, directory: AgentDirectory) -> None:
    """Refuse, at load time, agents whose runner executes code while the operator has not enabled such
    runners; start the one MCP bridge when an agent's runner needs it."""
    harness = host.orchestrator.harness
    needs_bridge = False
    for entry in directory.agents():
        try:
            descriptor = await host.registry.get(entry.agent.runner_id)
        except HostError:
            continue  # unknown runners are reported when an event reaches them
        refuse_code_execution(descriptor, harness.policy if harness is not None else None)
        needs_bridge = needs_bridge or descriptor.manifest.capabilities.mcp_bridge
    if needs_bridge and harness is not None:
        await harness.start_bridge()


def plugin_runtime_options(settings: Settings) -> RuntimeOptions:
    """How plugin processes start, from ``[isolation]``: their account, command and resource limits; the
    variables they may inherit are read from the settings' environment (``os.environ`` may be scrubbed)."""
    from agentrunner_host.runtime.process import RuntimeOptions
    from agentrunner_host.runtime.sandbox import PluginUser, ProcessLimits

    isolation = settings.config.isolation
    user = None
    if isolation.plugin_user is not None:
        user = PluginUser.lookup(isolation.plugin_user)
        if os.geteuid() != 0 and user.uid != os.geteuid():
            raise ConfigurationError(
                f"isolation.plugin_user = {user.name!r}: the host must run as root to start plugins as another user"
            )
        if user.uid == os.geteuid():
            user = None  # already that account
    elif os.geteuid() == 0:
        log.warning(
            "the host runs as root and plugin processes run as root too: they can read its environment, "
            "memory and data; set [isolation] plugin_user (see docs/security.md)"
        )
    mib = 1024 * 1024
    limits = ProcessLimits(
        cpu_seconds=isolation.cpu_seconds,
        address_space_bytes=None if isolation.memory_mb is None else isolation.memory_mb * mib,
        open_files=isolation.open_files,
        file_size_bytes=None if isolation.file_size_mb is None else isolation.file_size_mb * mib,
    )
    base = RuntimeOptions()
    runners = settings.config.runners
    return RuntimeOptions(
        cancel_grace=runners.cancel_grace_seconds,
        ping_interval=runners.ping_interval_seconds or None,
        ping_timeout=runners.ping_timeout_seconds,
        command=list(isolation.plugin_command) or list(base.command),
        user=user,
        limits=None if limits.empty else limits,
        host_env=settings.environ,
    )


def _refuse_secret_literals(settings: Settings, plugins: Mapping[str, list[AgentRunner]]) -> None:
    """Refuse configured agents that give a literal value to a field their (in-process) runner marks secret;
    the names alone did not look secret, so the loader could not tell."""
    manifests = {type(r).manifest.id: type(r).manifest for runners in plugins.values() for r in runners}
    problems: list[str] = []
    for index, agent in enumerate(settings.config.agents):
        manifest = manifests.get(agent.runner_id)
        for name in sorted(manifest.secret_fields()) if manifest else ():
            value = agent.runner_config.get(name)
            if value not in (None, "") and not is_env_ref(value):
                problems.append(
                    f"agents[{index}].runner_config.{name}: marked secret by {agent.runner_id}; "
                    'give { env = "VAR" } instead of the value'
                )
    if problems:
        source = str(settings.config_path) if settings.config_path else "the configuration"
        raise ConfigFileError(source, problems)


def installed_manifests() -> dict[str, AgentRunnerManifest]:
    """The manifests of the installed ``agentrunner.runners`` entry points, by runner id (imports them)."""
    return {
        type(r).manifest.id: type(r).manifest for runners in _in_process_runners().values() for r in runners
    }


def installed_runner_ids() -> set[str]:
    """Runner ids of the installed entry points."""
    return set(installed_manifests())


def default_runner_for(settings: Settings, available: set[str]) -> tuple[str | None, dict[str, Any]]:
    """The runner (and config) of the zero-configuration binding, given the runner ids *available*:
    ``[defaults] runner_id`` when set; local-agent on the first configured LLM when a model is configured and
    local-agent is available; else the echo runner when available; else none."""
    defaults = settings.config.defaults
    if defaults.runner_id is not None:
        return defaults.runner_id, dict(defaults.runner_config)
    llms = [m.id for m in settings.config.models if m.model_type == "llm"]
    if llms and LOCAL_AGENT_RUNNER_ID in available:
        return LOCAL_AGENT_RUNNER_ID, {"model": llms[0], **defaults.runner_config}
    if ECHO_RUNNER_ID in available:
        return ECHO_RUNNER_ID, dict(defaults.runner_config)
    return None, {}


async def _default_runner(host: Host, settings: Settings) -> tuple[str | None, dict[str, Any]]:
    available: set[str] = set()
    for candidate in (LOCAL_AGENT_RUNNER_ID, ECHO_RUNNER_ID):
        with contextlib.suppress(RunnerNotFoundError):
            available.add((await host.registry.get(candidate)).runner_id)
    runner_id, config = default_runner_for(settings, available)
    if settings.config.models and runner_id == ECHO_RUNNER_ID:
        log.warning(
            "a model is configured but %s is not installed; the default stays echo", LOCAL_AGENT_RUNNER_ID
        )
    if runner_id is None and settings.config.defaults.binding:
        log.warning("no default runner is installed; events without a binding are refused")
    return runner_id, config


def _answered_run(answer: Mapping[str, JsonValue]) -> str:
    """The run id in another host's answer to a start request, or its error raised as the host error."""
    run_id = answer.get("run_id")
    error = answer.get("error")
    message = str(answer.get("message") or "the other host refused the event")
    if error is None and isinstance(run_id, str):
        return run_id
    match error:
        case "duplicate_event":
            event_id = str(answer.get("event_id") or "?")
            raise DuplicateEventError(event_id, run_id=run_id if isinstance(run_id, str) else None)
        case "binding_not_found":
            raise BindingNotFoundError(message)
        case "runner_disabled":
            raise RunnerDisabledError(str(answer.get("runner_id") or "?"), message)
        case _:
            raise HostError(message)


async def _open_runtime_server(
    settings: Settings, host: Host, stack: contextlib.AsyncExitStack
) -> RemoteRuntimeServer | None:
    """Start the ``[runtime_server]`` endpoint when plugins are configured for it, and register each plugin's
    connection with the host (a run waits up to ``connect_timeout_seconds`` for its runtime)."""
    section = settings.config.runtime_server
    if not section.plugins:
        return None
    tokens: dict[str, str] = {}
    for plugin in section.plugins:
        token = settings.environ.get(plugin.token_env)
        if not token:
            raise ConfigurationError(
                f"runtime_server: the token of {plugin.plugin_id} (${plugin.token_env}) is not set"
            )
        weakness = token_weakness(token)
        if weakness is not None:
            raise ConfigurationError(
                f"runtime_server: the token of {plugin.plugin_id} is too weak: {weakness}"
            )
        tokens[plugin.plugin_id] = token
    runners = settings.config.runners
    server = RemoteRuntimeServer(
        host.dispatcher,
        tokens=tokens,
        host=section.host,
        port=section.port,
        connect_timeout=section.connect_timeout_seconds,
        ping_interval=runners.ping_interval_seconds or None,
        ping_timeout=runners.ping_timeout_seconds,
        cancel_grace=runners.cancel_grace_seconds,
        # discovery must not stall on a plugin whose runtime is attached to another host (or not yet)
        list_timeout=0,
    )
    await server.start()
    stack.push_async_callback(server.aclose)
    log.info("remote runtimes attach at %s (plugins: %s)", server.url, ", ".join(tokens))
    for plugin_id in tokens:
        host.registry.add(server.connection(plugin_id))
    return server
