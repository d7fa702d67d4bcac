"""The ``agentrunner`` command: serve the host, chat with an agent, manage agents and bindings, inspect runs.

Exit codes: 0 success, 1 failure (the message says why), 2 usage error. Every command reads the same
configuration as ``serve`` (``--config`` / ``AGENTRUNNER_CONFIG`` / ``./agentrunner.toml``, then the
``AGENTRUNNER_*`` variables). Runner configs are printed with their secret fields redacted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Coroutine, Generator, Sequence
from pathlib import Path
from typing import Any, Final, TextIO, cast

from agentrunner import (
    AgentInput,
    AgentRunnerManifest,
    DeliveryContext,
    InvalidRunnerIdError,
    MessageCompletedResult,
    MessageDeltaResult,
    RunFailedResult,
    RunnerId,
    parse_result,
)
from agentrunner import codec as json
from pydantic import BaseModel, ValidationError

from agentrunner_host.admin_commands import (
    add_audit_command,
    add_runner_control_commands,
    run_audit,
    run_runner_control,
    view_json,
)
from agentrunner_host.admission import ID_PATTERN, AdmissionError, check_agent_config, is_valid_id
from agentrunner_host.config import (
    BindingSpec,
    ConfigFileError,
    Settings,
    find_literal_secrets,
    format_key_path,
    load_settings,
    redact_config,
)
from agentrunner_host.definitions import AgentConfig, AgentEventEnvelope, BindingScope
from agentrunner_host.errors import HostError
from agentrunner_host.ids import event_id as new_event_id

__all__ = [
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_USAGE",
    "HTTP_PORT_FILE",
    "RUNTIME_PORT_FILE",
    "build_parser",
    "cli",
    "cli_exit",
]

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_USAGE: Final = 2
HTTP_PORT_FILE: Final = "http.port"
"""File in the data directory holding the port ``serve`` listens on, while it does (useful with ``--port 0``)."""
RUNTIME_PORT_FILE: Final = "runtime.port"
"""File in the data directory holding the port of the ``[runtime_server]`` endpoint, while ``serve`` listens on it
(useful with ``runtime_server.port = 0``); absent when no plugin is configured for it."""

log = logging.getLogger("agentrunner.cli")


class CliError(Exception):
    """A failure reported as one line on stderr with exit code 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


# -- parser ----------------------------------------------------------------------------------------------------


def _common() -> _Parser:
    common = _Parser(add_help=False)
    common.add_argument(
        "--config",
        metavar="PATH",
        help="configuration file (default: $AGENTRUNNER_CONFIG, ./agentrunner.toml)",
    )
    common.add_argument(
        "--data-dir", metavar="DIR", help="data directory (overrides the file and $AGENTRUNNER_DATA_DIR)"
    )
    common.add_argument(
        "--database-url",
        metavar="URL",
        help="database URL (overrides the file and $AGENTRUNNER_DATABASE_URL)",
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``agentrunner``."""
    common = _common()
    parser = _Parser(prog="agentrunner", description="Run agent runners as a service.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    serve = commands.add_parser(
        "serve", parents=[common], help="run migrations, start the host and its HTTP API"
    )
    serve.add_argument("--host", help="bind address (default 127.0.0.1; anything else needs an API token)")
    serve.add_argument(
        "--port",
        type=int,
        help=f"port (default 8420; 0: one the kernel picks, printed and written to <data-dir>/{HTTP_PORT_FILE})",
    )

    chat = commands.add_parser("chat", parents=[common], help="chat with an agent in the terminal")
    chat.add_argument("--message", "-m", help="send one message, print the answer and exit")
    chat.add_argument("--json", action="store_true", help="print every result as one JSON line")
    chat.add_argument("--conversation", help="conversation id (default: a new one)")
    chat.add_argument("--agent", help="send to this agent directly instead of through the bindings")

    runners = commands.add_parser("runners", help="available runners").add_subparsers(
        dest="action", required=True
    )
    runners_list = runners.add_parser("list", parents=[common], help="list runners")
    runners_list.add_argument("--json", action="store_true")
    add_runner_control_commands(runners, common)

    plugins = commands.add_parser(
        "plugins", help="plugins installed in their own environments"
    ).add_subparsers(dest="action", required=True)
    install = plugins.add_parser(
        "install",
        parents=[common],
        help="install or upgrade a plugin (a directory, a wheel or a requirement) into its own environment",
    )
    install.add_argument("source", help="plugin directory, .whl file, or requirement such as acme-agent==1.2")
    install.add_argument(
        "--find-links",
        action="append",
        default=[],
        metavar="DIR",
        help="also look for packages here (repeatable)",
    )
    install.add_argument("--index-url", metavar="URL", help="package index to install from (default: uv's)")
    plugins.add_parser(
        "list", parents=[common], help="installed plugins and their last discovery"
    ).add_argument("--json", action="store_true")
    plugins.add_parser("remove", parents=[common], help="uninstall a plugin").add_argument(
        "plugin_id", help="author/plugin"
    )

    agents = commands.add_parser("agents", help="manage agents").add_subparsers(dest="action", required=True)
    agents.add_parser("list", parents=[common], help="list agents").add_argument(
        "--json", action="store_true"
    )
    agents.add_parser("show", parents=[common], help="show one agent").add_argument("agent_id")
    add_agent = agents.add_parser("add", parents=[common], help="add an agent")
    add_agent.add_argument("agent_id")
    add_agent.add_argument("--runner", required=True, help="runner id plugin:author/plugin/runner")
    add_agent.add_argument(
        "--runner-config", default="{}", help='runner config as JSON (secrets as {"env": "VAR"})'
    )
    add_agent.add_argument("--label")
    agents.add_parser("remove", parents=[common], help="remove an agent").add_argument("agent_id")

    bindings = commands.add_parser("bindings", help="manage bindings").add_subparsers(
        dest="action", required=True
    )
    bindings.add_parser("list", parents=[common], help="list bindings").add_argument(
        "--json", action="store_true"
    )
    bindings.add_parser("show", parents=[common], help="show one binding").add_argument("binding_id")
    add_binding = bindings.add_parser("add", parents=[common], help="add a binding")
    add_binding.add_argument("binding_id")
    add_binding.add_argument("--agent", required=True, help="agent id")
    add_binding.add_argument(
        "--scope", default="global", help="global, or TYPE:ID with TYPE workspace/bot/actor/conversation"
    )
    add_binding.add_argument(
        "--event-type",
        action="append",
        dest="event_types",
        help="event type (repeatable; default message.received)",
    )
    add_binding.add_argument("--priority", type=int, default=0)
    add_binding.add_argument("--disabled", action="store_true")
    bindings.add_parser("remove", parents=[common], help="remove a binding").add_argument("binding_id")

    runs = commands.add_parser("runs", help="inspect runs").add_subparsers(dest="action", required=True)
    for name, text in (("show", "show a run"), ("cancel", "cancel a live run")):
        sub = runs.add_parser(name, parents=[common], help=text)
        sub.add_argument("run_id")
        sub.add_argument("--url", help="base URL of a running server (default: from the configuration)")

    add_audit_command(commands, common)

    db = commands.add_parser("db", help="database maintenance").add_subparsers(dest="action", required=True)
    db.add_parser("upgrade", parents=[common], help="migrate the database to the newest revision")

    migrate = commands.add_parser(
        "migrate-config", parents=[common], help="convert legacy pipeline configurations (dry run)"
    )
    migrate.add_argument("file", nargs="+", help="legacy pipeline configuration (JSON), one per pipeline")
    migrate.add_argument(
        "--strict",
        action="store_true",
        help="exit non-zero when a pipeline's runner is not installed",
    )
    return parser


# -- helpers ---------------------------------------------------------------------------------------------------


def _settings(args: argparse.Namespace, **overrides: Any) -> Settings:
    return load_settings(
        getattr(args, "config", None),
        data_dir=getattr(args, "data_dir", None),
        database_url=getattr(args, "database_url", None),
        **overrides,
    )


def _print_json(value: Any, out: TextIO) -> None:
    out.write(json.dumps_str(value) + "\n")


def _model_json(model: BaseModel) -> Any:
    return model.model_dump(mode="json", exclude_defaults=False)


def _configure_logging(settings: Settings, *, level: str | None = None) -> None:
    from agentrunner_host.redaction import install_log_redaction, known_secrets

    logging.basicConfig(
        level=(level or settings.log_level).upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # Every record is masked before it is written: known secret values and credential shapes.
    install_log_redaction(known_secrets(settings))


@contextlib.contextmanager
def _offline_directory(
    settings: Settings,
) -> Generator[tuple[Any, Callable[[Coroutine[Any, Any, Any]], Any]]]:
    """The agent directory over the settings' database (migrated first), and a function that runs one of
    its coroutines; both are valid inside the ``with`` block only."""
    from agentrunner_host.datadir import prepare_data_dir
    from agentrunner_host.service.agents import AgentDirectory
    from agentrunner_host.service.host_service import default_runner_for, installed_runner_ids
    from agentrunner_host.stores import HostStores
    from agentrunner_host.stores.engine import create_engine, upgrade

    runner_id, runner_config = default_runner_for(settings, installed_runner_ids())
    prepare_data_dir(settings.data_dir)
    with asyncio.Runner() as loop:
        engine = create_engine(settings.database_url)
        try:
            loop.run(upgrade(engine))
            stores = loop.run(HostStores.open(engine, data_dir=settings.data_dir))
            try:
                directory = AgentDirectory(
                    settings.config,
                    store=stores.agents,
                    data_dir=settings.data_dir,
                    environ=settings.environ,
                    default_runner_id=runner_id,
                    default_runner_config=runner_config,
                )
                loop.run(directory.import_file())
                loop.run(directory.refresh())
                yield directory, loop.run
            finally:
                loop.run(stores.aclose())
        finally:
            loop.run(engine.dispose())


def _known_manifests(settings: Settings) -> dict[str, AgentRunnerManifest]:
    """Runner manifests available without starting anything: installed entry points (unless switched off)
    and the ``manifest.yaml`` of every plugin directory."""
    from agentrunner_host.runtime.discovery import discover_plugins
    from agentrunner_host.service.host_service import installed_manifests

    manifests = installed_manifests() if settings.config.runners.entry_points != "off" else {}
    for spec in discover_plugins(settings.plugin_dirs).plugins.values():
        for entry in spec.runners:
            if entry.manifest is not None:
                manifests.setdefault(entry.manifest.id, entry.manifest)
    return manifests


def _installed_plugin_manifest(settings: Settings, runner_id: str) -> AgentRunnerManifest | None:
    """The manifest of *runner_id* when a plugin installed with ``agentrunner plugins install`` has it: read
    from the plugin's own runtime, started once for the question (its environment is not the host's)."""
    from agentrunner_host.runtime.plugin_envs import installed_plugins, runner_manifests

    try:
        wanted = RunnerId.parse(runner_id)
    except InvalidRunnerIdError:
        return None
    plugins, _ = installed_plugins(settings.data_dir)
    for plugin in plugins:
        if plugin.plugin_id == wanted.plugin_id and any(r.name == wanted.runner for r in plugin.runners):
            try:
                manifests = asyncio.run(runner_manifests(plugin))
            except (HostError, TimeoutError, OSError) as exc:
                raise CliError(
                    f"plugin {plugin.plugin_id} is installed but its runtime did not answer: {exc}"
                ) from None
            return next((m for m in manifests if m.id == runner_id), None)
    return None


def _redacted_agent(agent: AgentConfig) -> dict[str, Any]:
    from agentrunner_host.service.host_service import installed_manifests

    manifest = installed_manifests().get(agent.runner_id)
    data = agent.model_dump(mode="json")
    data["runner_config"] = redact_config(agent.runner_config, manifest.config_schema if manifest else None)
    return data


# -- commands --------------------------------------------------------------------------------------------------


def _harden_process(settings: Settings) -> None:
    """Process-wide protections of ``serve`` (docs/security.md): private file modes, a non-dumpable process,
    and no secret left in ``os.environ`` once the settings hold it."""
    from agentrunner_host.redaction import secret_variables
    from agentrunner_host.runtime.sandbox import make_non_dumpable, scrub_environ

    # Whatever the host and its plugins create is private to its user unless made otherwise on purpose.
    os.umask(0o077)
    isolation = settings.config.isolation
    if isolation.non_dumpable and not make_non_dumpable():
        log.warning("could not mark the host non-dumpable; same-user processes can read its /proc files")
    if isolation.scrub_environment:
        removed = scrub_environ(secret_variables(settings))
        if removed:
            log.info("removed %d secret variable(s) from the host's environment: %s", len(removed), removed)


def _write_port(path: Path, port: int) -> None:
    """Write *port* to *path* whole, then rename it into place, so a reader never sees half a number."""
    partial = path.with_suffix(".tmp")
    partial.write_text(f"{port}\n", encoding="utf-8")
    partial.replace(path)


def _cmd_serve(args: argparse.Namespace, out: TextIO) -> int:
    settings = _settings(args, http_host=args.host, http_port=args.port)
    settings.require_token_for_bind()
    _configure_logging(settings)
    _harden_process(settings)
    from agentrunner_host.http import serve
    from agentrunner_host.service import HostService

    port_file = settings.data_dir / HTTP_PORT_FILE
    runtime_port_file = settings.data_dir / RUNTIME_PORT_FILE
    # a previous serve's ports must not be read as this one's
    port_file.unlink(missing_ok=True)
    runtime_port_file.unlink(missing_ok=True)

    def listening(port: int) -> None:
        # --port 0 binds a port the kernel picks: say which, on stdout and in the data directory
        _write_port(port_file, port)
        host = settings.http_host
        shown = f"[{host}]" if ":" in host else host
        print(f"agentrunner serve: listening on http://{shown}:{port}", file=out, flush=True)

    async def main() -> None:
        async with HostService.open(settings) as service:
            try:
                if service.runtime_server is not None:
                    # before the HTTP port: a reader that waited for /readyz finds this one written too
                    _write_port(runtime_port_file, service.runtime_server.port)
                await serve(
                    service,
                    host=settings.http_host,
                    port=settings.http_port,
                    api_token=settings.api_token,
                    log_level=settings.log_level,
                    graceful_shutdown_seconds=settings.config.http.graceful_shutdown_seconds,
                    on_listening=listening,
                )
            finally:
                port_file.unlink(missing_ok=True)
                runtime_port_file.unlink(missing_ok=True)

    try:
        asyncio.run(main())
    except SystemExit as exc:  # uvicorn exits this way when it cannot bind
        raise CliError(f"the server could not start (exit status {exc.code})") from None
    return EXIT_OK


def _cmd_chat(args: argparse.Namespace, out: TextIO) -> int:
    settings = _settings(args)
    _configure_logging(settings, level="warning")
    from agentrunner_host.service import HostService

    conversation = args.conversation or "cli-" + uuid.uuid4().hex[:12]
    if not is_valid_id(conversation):
        raise CliError(f"--conversation must match {ID_PATTERN}")
    interactive = args.message is None

    async def turn(service: HostService, text: str) -> bool:
        event = AgentEventEnvelope(
            event_id=new_event_id(),
            event_type="message.received",
            source="api",
            conversation_id=conversation,
            actor=None,
            input=AgentInput(text=text),
            delivery=DeliveryContext(surface="cli", supports_streaming=True),
        )
        feed = await service.submit(event, agent_id=args.agent)
        streamed = False
        ok = True
        async for item in service.follow(feed.run_id):
            if args.json:
                _print_json({"host_seq": item.host_seq, "type": item.type, "result": item.payload}, out)
                ok = item.type != "run.failed" and ok
                continue
            match parse_result(item.payload):
                case MessageDeltaResult(data=delta):
                    chunk = delta.chunk.content or ""
                    out.write(chunk)
                    out.flush()
                    streamed = streamed or bool(chunk)
                case MessageCompletedResult(data=done) if not streamed:
                    out.write(done.message.text())
                case RunFailedResult(data=failure):
                    ok = False
                    sys.stderr.write(f"\nrun failed: {failure.code}: {failure.message}\n")
                case _:
                    pass
        if not args.json:
            out.write("\n")
            out.flush()
        return ok

    async def main() -> int:
        # No crash recovery here: a server may be executing runs on the same database right now.
        async with HostService.open(settings, recover=False) as service:
            if not interactive:
                return EXIT_OK if await turn(service, args.message) else EXIT_FAILURE
            sys.stderr.write(f"conversation {conversation}; an empty line or Ctrl-D ends the chat\n")
            while True:
                try:
                    line = await asyncio.to_thread(input, "> ")
                except EOFError:
                    return EXIT_OK
                if not line.strip():
                    return EXIT_OK
                await turn(service, line)

    return asyncio.run(main())


def _cmd_runners(args: argparse.Namespace, out: TextIO) -> int:
    from agentrunner_host.service import HostService

    if args.action in {"disable", "enable"}:
        return run_runner_control(args, _settings(args), out, known=set(_known_runners(args)))
    settings = _settings(args)

    async def main() -> list[dict[str, Any]]:
        async with HostService.open(settings, recover=False) as service:
            available = [{"status": "available", **view_json(v)} for v in await service.runner_views()]
            failed = [
                {
                    "status": "failed",
                    "runner_id": None,
                    "plugin_id": f.plugin_id,
                    "source": f.source,
                    "error": f.reason,
                }
                for f in service.plugin_failures()
            ]
            return available + failed

    rows = asyncio.run(main())
    if args.action == "show":
        wanted = _canonical_runner_id(args.runner_id)
        found = next((r for r in rows if r["runner_id"] == wanted), None)
        if found is None:
            raise CliError(f"runner {wanted} is not available (see `agentrunner runners list`)")
        _print_json(found, out)
        return EXIT_OK
    if args.json:
        _print_json(rows, out)
    else:
        for row in rows:
            if row["status"] == "failed":
                who = f"plugin:{row['plugin_id']}/*" if row["plugin_id"] else row["source"]
                out.write(f"{who}\tFAILED\t{row['error']}\n")
                continue
            label = row["label"].get("en_US") or next(iter(row["label"].values()), "")
            switch = f"\tDISABLED: {row['disabled']['reason']}" if row["disabled"] else ""
            out.write(f"{row['runner_id']}\t{label}\trisk {row['risk']['level']}{switch}\n")
    return EXIT_OK


def _canonical_runner_id(value: str) -> str:
    from agentrunner import InvalidRunnerIdError, RunnerId

    try:
        return str(RunnerId.parse(value))
    except InvalidRunnerIdError as exc:
        raise CliError(f"{value!r} is not a runner id: {exc.reason}") from None


def _cmd_audit(args: argparse.Namespace, out: TextIO) -> int:
    return run_audit(args, _settings(args), out)


def _cmd_plugins(args: argparse.Namespace, out: TextIO) -> int:
    from agentrunner_host.runtime.plugin_envs import (
        check_loads,
        install_plugin,
        installed_plugins,
        plugin_status,
        remove_plugin,
    )

    settings = _settings(args)
    data_dir = settings.data_dir
    match args.action:
        case "install":
            record = install_plugin(
                data_dir,
                args.source,
                find_links=args.find_links,
                index_url=args.index_url,
                check=lambda candidate: asyncio.run(check_loads(candidate)),
            )
            runners = ", ".join(f"plugin:{record.plugin_id}/{r.name}" for r in record.runners)
            out.write(
                f"installed {record.plugin_id} {record.version or ''} (generation {record.generation}) "
                f"in {record.env_dir}\nrunners: {runners}\n"
            )
        case "list":
            plugins, broken = installed_plugins(data_dir)
            rows: list[dict[str, Any]] = []
            for plugin in plugins:
                status = plugin_status(plugin)
                error = (
                    status.error if status is not None and status.generation == plugin.generation else None
                )
                state = "unchecked" if status is None else ("failed" if error else "ok")
                rows.append(
                    {
                        "plugin_id": plugin.plugin_id,
                        "version": plugin.version,
                        "status": state,
                        "generation": plugin.generation,
                        "kind": plugin.kind,
                        "source": plugin.source,
                        "environment": str(plugin.env_dir),
                        "runners": [f"plugin:{plugin.plugin_id}/{r.name}" for r in plugin.runners],
                        "last_error": error,
                        "checked_at": None if status is None else status.checked_at,
                    }
                )
            rows += [
                {"plugin_id": None, "status": "failed", "source": str(path), "last_error": why}
                for path, why in broken
            ]
            if args.json:
                _print_json(rows, out)
            else:
                for row in rows:
                    line = (
                        f"{row['plugin_id'] or row['source']}\t{row.get('version') or '-'}\t{row['status']}"
                    )
                    line += f"\t{row.get('environment', '-')}"
                    if row["last_error"]:
                        line += f"\t{row['last_error']}"
                    out.write(line + "\n")
        case "remove":
            record = remove_plugin(data_dir, args.plugin_id)
            out.write(f"plugin {record.plugin_id} removed\n")
        case _:  # pragma: no cover - argparse restricts the choices
            raise CliError(f"unknown action {args.action}")
    return EXIT_OK


def _cmd_agents(args: argparse.Namespace, out: TextIO) -> int:
    settings = _settings(args)
    with _offline_directory(settings) as (directory, run):
        return _agents_action(args, settings, directory, run, out)


def _agents_action(
    args: argparse.Namespace,
    settings: Settings,
    directory: Any,
    run: Callable[[Coroutine[Any, Any, Any]], Any],
    out: TextIO,
) -> int:
    match args.action:
        case "list":
            rows = [{"source": e.source, **_redacted_agent(e.agent)} for e in directory.agents()]
            if args.json:
                _print_json(rows, out)
            else:
                for row in rows:
                    out.write(f"{row['agent_id']}\t{row['runner_id']}\t{row['source']}\n")
        case "show":
            entry = directory.agent(args.agent_id)
            _print_json({"source": entry.source, **_redacted_agent(entry.agent)}, out)
        case "add":
            runner_config = _json_object(args.runner_config, what="--runner-config")
            from agentrunner_host.service.host_service import installed_manifests

            manifest = installed_manifests().get(args.runner)
            schema = manifest.config_schema if manifest else None
            secrets = find_literal_secrets(runner_config, schema=schema)
            if secrets:
                where = ", ".join(format_key_path(p) for p, _ in secrets)
                raise CliError(
                    f'--runner-config holds literal secrets ({where}); give {{"env": "VAR"}} instead'
                )
            try:
                agent = AgentConfig(
                    agent_id=args.agent_id,
                    runner_id=args.runner,
                    runner_config=runner_config,
                    label=args.label,
                )
            except ValidationError as exc:
                raise CliError(_validation_message(exc)) from None
            manifest = _known_manifests(settings).get(agent.runner_id) or _installed_plugin_manifest(
                settings, agent.runner_id
            )
            try:
                check_agent_config(agent.runner_id, agent.runner_config, manifest)
            except AdmissionError as exc:
                raise CliError(f"{exc.code}: {exc.message}") from None
            run(directory.put_agent(agent, create=True))
            out.write(f"agent {agent.agent_id} added\n")
        case "remove":
            run(directory.remove_agent(args.agent_id))
            out.write(f"agent {args.agent_id} removed\n")
        case _:  # pragma: no cover - argparse restricts the choices
            raise CliError(f"unknown action {args.action}")
    return EXIT_OK


def _parse_scope(text: str) -> BindingScope:
    kind, _, ident = text.partition(":")
    if kind == "global" and not ident:
        return BindingScope()
    if kind not in {"workspace", "bot", "actor", "conversation"} or not ident:
        raise CliError(f"--scope {text!r}: use global or TYPE:ID (workspace, bot, actor, conversation)")
    return BindingScope.model_validate({"type": kind, "id": ident})


def _cmd_bindings(args: argparse.Namespace, out: TextIO) -> int:
    settings = _settings(args)
    with _offline_directory(settings) as (directory, run):
        return _bindings_action(args, directory, run, out)


def _bindings_action(
    args: argparse.Namespace, directory: Any, run: Callable[[Coroutine[Any, Any, Any]], Any], out: TextIO
) -> int:
    match args.action:
        case "list":
            rows = [{"source": e.source, **_model_json(e.binding)} for e in directory.bindings()]
            if args.json:
                _print_json(rows, out)
            else:
                for row in rows:
                    scope = row["scope"]["type"] + (
                        f":{row['scope']['id']}" if row["scope"].get("id") else ""
                    )
                    types = ",".join(row["event_types"])
                    out.write(f"{row['binding_id']}\t{row['agent_id']}\t{scope}\t{types}\t{row['source']}\n")
        case "show":
            entry = directory.binding(args.binding_id)
            _print_json({"source": entry.source, **_model_json(entry.binding)}, out)
        case "add":
            try:
                spec = BindingSpec(
                    binding_id=args.binding_id,
                    agent_id=args.agent,
                    scope=_parse_scope(args.scope),
                    event_types=args.event_types or ["message.received"],
                    priority=args.priority,
                    enabled=not args.disabled,
                )
            except ValidationError as exc:
                raise CliError(_validation_message(exc)) from None
            run(directory.put_binding(spec, create=True))
            out.write(f"binding {spec.binding_id} added\n")
        case "remove":
            run(directory.remove_binding(args.binding_id))
            out.write(f"binding {args.binding_id} removed\n")
        case _:  # pragma: no cover
            raise CliError(f"unknown action {args.action}")
    return EXIT_OK


def _json_object(raw: str | bytes, *, what: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise CliError(f"{what}: not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise CliError(f"{what}: expected a JSON object")
    return cast(dict[str, Any], value)


def _validation_message(exc: ValidationError) -> str:
    return "; ".join(f"{format_key_path(tuple(e['loc']))}: {e['msg']}" for e in exc.errors())


def _http(settings: Settings, method: str, url: str) -> Any:
    request = urllib.request.Request(url, method=method, headers={"Accept": "application/json"})
    if settings.api_token:
        request.add_header("Authorization", f"Bearer {settings.api_token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        body = exc.read()
        try:
            error = json.loads(body)["error"]
            message = f"{error['code']}: {error['message']}"
        except (ValueError, KeyError, TypeError):
            message = body.decode(errors="replace")[:200]
        finally:
            exc.close()
        raise CliError(f"{method} {url} answered {exc.code}: {message}") from None
    except urllib.error.URLError as exc:
        raise CliError(f"cannot reach {url}: {exc.reason}") from None


def _cmd_runs(args: argparse.Namespace, out: TextIO) -> int:
    settings = _settings(args)
    host = settings.http_host if settings.http_host not in {"0.0.0.0", "::"} else "127.0.0.1"
    base = (args.url or f"http://{host}:{settings.http_port}").rstrip("/")
    if args.action == "cancel":
        _print_json(_http(settings, "POST", f"{base}/v1/runs/{args.run_id}/cancel"), out)
        return EXIT_OK
    from agentrunner_host.service import RunView, stored_run_view

    if args.url:
        answer = _http(settings, "GET", f"{base}/v1/runs/{args.run_id}")
        try:
            view = RunView.model_validate(answer)
        except ValidationError as exc:
            raise CliError(
                f"{base} answered a run this version cannot read: {_validation_message(exc)}"
            ) from None
    else:
        from agentrunner_host.stores import HostStores
        from agentrunner_host.stores.engine import create_engine

        async def main() -> RunView | None:
            engine = create_engine(settings.database_url)
            try:
                stores = await HostStores.open(engine, data_dir=settings.data_dir)
                try:
                    return await stored_run_view(stores.runs, args.run_id)
                finally:
                    await stores.aclose()
            finally:
                await engine.dispose()

        found = asyncio.run(main())
        if found is None:
            raise CliError(f"run {args.run_id} does not exist")
        view = found
    # One printer for both sources: the same RunView, dumped the way the HTTP API serializes it.
    _print_json(_model_json(view), out)
    return EXIT_OK


def _cmd_db(args: argparse.Namespace, out: TextIO) -> int:
    from agentrunner_host.datadir import prepare_data_dir
    from agentrunner_host.stores.engine import create_engine, current_revision, upgrade

    settings = _settings(args)

    async def main() -> str | None:
        prepare_data_dir(settings.data_dir)
        engine = create_engine(settings.database_url)
        try:
            await upgrade(engine)
            return await current_revision(engine)
        finally:
            await engine.dispose()

    out.write(f"database at revision {asyncio.run(main())}\n")
    return EXIT_OK


def _known_runners(args: argparse.Namespace) -> dict[str, AgentRunnerManifest | None]:
    """Runner ids this host would load, with their manifests where known: installed entry points, the
    configured plugin directories, and plugins installed with ``agentrunner plugins install``."""
    from agentrunner_host.runtime import discover_plugins
    from agentrunner_host.runtime.plugin_envs import installed_plugins
    from agentrunner_host.service.host_service import installed_manifests

    known: dict[str, AgentRunnerManifest | None] = dict(installed_manifests())
    try:
        settings = _settings(args)
    except HostError as exc:
        sys.stderr.write(f"note: the configuration was not read ({exc}); only installed entry points count\n")
        return known
    for spec in discover_plugins(settings.plugin_dirs).plugins.values():
        for entry in spec.runners:
            known.setdefault(f"plugin:{spec.plugin_id}/{entry.name}", entry.manifest)
    plugins, _ = installed_plugins(settings.data_dir)
    for plugin in plugins:
        for runner in plugin.runners:
            known.setdefault(f"plugin:{plugin.plugin_id}/{runner.name}", None)
    return known


def _cmd_migrate_config(args: argparse.Namespace, out: TextIO) -> int:
    try:
        from agentrunner_host.legacy.migration import (
            diff,
            externalize_secrets,
            migrate_pipeline_config,
            redact_sources,
        )
    except ImportError:
        raise CliError(
            "migrate-config is not available in this build (agentrunner_host.legacy is missing)"
        ) from None
    from agentrunner_host.context_builder import is_secret_name

    manifests = _known_runners(args)

    def is_secret(runner_id: str, name: str) -> bool:
        # The installed runner's schema decides; a runner that is not installed gets the name guess.
        manifest = manifests.get(runner_id)
        if manifest is not None and any(item.name == name for item in manifest.config_schema):
            return name in manifest.secret_fields()
        return is_secret_name(name)

    taken: dict[str, str] = {}
    missing = 0
    for file in args.file:
        path = Path(file)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise CliError(f"{path}: {exc.strerror}") from None
        legacy = _json_object(raw, what=str(path))
        result = externalize_secrets(
            legacy, migrate_pipeline_config(legacy), is_secret=is_secret, taken=taken
        )
        if len(args.file) > 1:
            out.write(f"# {path}\n")
        if not result.changed:
            out.write("nothing to migrate\n")
        else:
            shown = redact_sources(legacy, result.env)
            out.write(diff(shown, result.config, old_name=f"{path} (before)", new_name=f"{path} (after)"))
        for warning in result.warnings:
            sys.stderr.write(f"warning: {path}: {warning}\n")
        if result.runner_id is None:
            sys.stderr.write(f"warning: {path}: no runner is configured\n")
        elif result.runner_id not in manifests:
            missing += 1
            sys.stderr.write(
                f"warning: {path}: runner {result.runner_id} is not installed; install its plugin before "
                "starting the host\n"
            )
        else:
            sys.stderr.write(f"{path}: runner {result.runner_id} is installed\n")
        for reference in result.env:
            where = ".".join(reference.source)
            sys.stderr.write(f"set {reference.variable}: the value of {where} in {path}\n")
    if missing and args.strict:
        return EXIT_FAILURE
    return EXIT_OK


_COMMANDS: Final = {
    "serve": _cmd_serve,
    "chat": _cmd_chat,
    "runners": _cmd_runners,
    "plugins": _cmd_plugins,
    "agents": _cmd_agents,
    "bindings": _cmd_bindings,
    "runs": _cmd_runs,
    "audit": _cmd_audit,
    "db": _cmd_db,
    "migrate-config": _cmd_migrate_config,
}


def cli(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Run ``agentrunner`` with *argv*; returns the exit code (0 ok, 1 failure, 2 usage)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    stream = out or sys.stdout
    try:
        return _COMMANDS[args.command](args, stream)
    except ConfigFileError as exc:
        sys.stderr.write(f"agentrunner: {exc.message}\n")
    except (CliError, HostError) as exc:
        sys.stderr.write(f"agentrunner: {exc}\n")
    except KeyboardInterrupt:
        sys.stderr.write("agentrunner: interrupted\n")
    return EXIT_FAILURE


def cli_exit() -> None:
    """Console-script entry point."""
    sys.exit(cli())


if __name__ == "__main__":
    cli_exit()
