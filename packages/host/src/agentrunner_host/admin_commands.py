"""The operator's commands of ``agentrunner``: the runner disable switch (``runners disable|enable``), the
runner risk view (``runners show``) and the back-call audit (``audit``).

The switch and the audit are read and written in the database directly, so they work with or without a
running server; a server sharing the database sees a switch at its next event.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from agentrunner import InvalidRunnerIdError, RunnerId
from agentrunner import codec as json

from agentrunner_host.config import Settings
from agentrunner_host.errors import HostError

if TYPE_CHECKING:
    # the database layer is imported when a command needs it, not when the CLI starts
    from agentrunner_host.service.runner_views import RunnerView
    from agentrunner_host.stores import AuditEntry, HostStores

__all__ = [
    "AdminCommandError",
    "add_audit_command",
    "add_runner_control_commands",
    "run_audit",
    "run_runner_control",
    "view_json",
]

T = TypeVar("T")


def add_runner_control_commands(runners: Any, common: argparse.ArgumentParser) -> None:
    """``runners disable|enable|show`` under the ``runners`` sub-parsers."""
    disable = runners.add_parser(
        "disable", parents=[common], help="disable a runner: events bound to it are refused"
    )
    disable.add_argument("runner_id")
    disable.add_argument("--reason", required=True, help="why (shown with every refused event)")
    runners.add_parser("enable", parents=[common], help="enable a disabled runner").add_argument("runner_id")
    show = runners.add_parser(
        "show", parents=[common], help="one runner: manifest, switch, risk view, process status"
    )
    show.add_argument("runner_id")


def add_audit_command(commands: Any, common: argparse.ArgumentParser) -> None:
    """``audit``: the stored back-call audit with filters."""
    audit = commands.add_parser(
        "audit", parents=[common], help="back-calls runners made into the host, allowed or refused"
    )
    audit.add_argument("--run", help="only this run")
    audit.add_argument("--runner", help="only runs of this runner (plugin:author/plugin/runner)")
    audit.add_argument("--plugin", help="only runs of this plugin (author/name)")
    audit.add_argument("--action", help="only this action (models.invoke, state.get...)")
    audit.add_argument("--outcome", help="allowed, denied (every refusal) or one refusal code")
    # parsed by argparse itself so a malformed time is a usage error (exit 2) like any other bad option
    audit.add_argument(
        "--since",
        type=_epoch_ms,
        help="calls at or after: ISO 8601 time with a zone, or Unix epoch milliseconds",
    )
    audit.add_argument(
        "--until", type=_epoch_ms, help="calls before: ISO 8601 time with a zone, or Unix epoch milliseconds"
    )
    audit.add_argument("--limit", type=int, default=50, help="page size (default 50)")
    audit.add_argument("--cursor", help="next_cursor printed by the previous page")
    audit.add_argument("--order", choices=["asc", "desc"], default="desc", help="desc: newest first")
    audit.add_argument("--json", action="store_true", help="one JSON document with entries and next_cursor")


class AdminCommandError(HostError):
    """A bad argument of an operator command (reported as one line, exit code 1)."""


@asynccontextmanager
async def _stores(settings: Settings) -> AsyncGenerator[HostStores]:
    from agentrunner_host.datadir import prepare_data_dir
    from agentrunner_host.stores import HostStores
    from agentrunner_host.stores.engine import create_engine, upgrade

    prepare_data_dir(settings.data_dir)
    engine = create_engine(settings.database_url)
    try:
        await upgrade(engine)
        stores = await HostStores.open(engine, data_dir=settings.data_dir)
        try:
            yield stores
        finally:
            await stores.aclose()
    finally:
        await engine.dispose()


def _with_stores(settings: Settings, work: Callable[[HostStores], Awaitable[T]]) -> T:
    async def main() -> T:
        async with _stores(settings) as stores:
            return await work(stores)

    return asyncio.run(main())


def _canonical_runner(value: str) -> str:
    try:
        return str(RunnerId.parse(value))
    except InvalidRunnerIdError as exc:
        raise AdminCommandError(f"{value!r} is not a runner id: {exc.reason}") from None


def run_runner_control(args: argparse.Namespace, settings: Settings, out: TextIO, *, known: set[str]) -> int:
    """``runners disable|enable``; *known* are the runner ids this host would load (disabling anything else
    is refused: a typo must not look like a switch that worked)."""
    runner_id = _canonical_runner(args.runner_id)
    if args.action == "disable":
        if runner_id not in known:
            raise AdminCommandError(
                f"runner {runner_id} is not installed here (see `agentrunner runners list`)"
            )
        reason: str = args.reason.strip()
        if not reason:
            raise AdminCommandError("--reason must not be empty")
        control = _with_stores(settings, lambda s: s.controls.disable(runner_id, reason=reason, by="cli"))
        out.write(f"{control.runner_id} disabled: {control.reason}\n")
        return 0
    enabled = _with_stores(settings, lambda s: s.controls.enable(runner_id))
    out.write(f"{runner_id} enabled\n" if enabled else f"{runner_id} was not disabled\n")
    return 0


def _epoch_ms(value: str) -> int:
    """``--since`` / ``--until``: Unix epoch milliseconds, or an ISO 8601 time that names its zone."""
    if value.isdigit():
        return int(value)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError("give an ISO 8601 time or Unix epoch milliseconds") from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError("give the time zone (e.g. 2026-12-01T10:00:00Z)")
    return int(moment.timestamp() * 1000)


def _entry_json(entry: AuditEntry) -> dict[str, object]:
    return {name: getattr(entry, name) for name in entry.__dataclass_fields__}


def _line(entry: AuditEntry) -> str:
    moment = datetime.fromtimestamp(entry.at / 1000).astimezone().isoformat(timespec="milliseconds")
    resource = entry.resource or "-"
    line = f"{moment}\t{entry.run_id}\t{entry.runner_id}\t{entry.action}\t{resource}\t{entry.decision}"
    if entry.detail is not None or entry.error is not None:
        # a harness tool: what it ran, and how it ended
        line += f"\t{entry.error or 'ok'}\t{entry.detail or '-'}"
    return line


def run_audit(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """``audit``."""
    from agentrunner_host.stores import MAX_AUDIT_PAGE, AuditFilter

    if not 1 <= args.limit <= MAX_AUDIT_PAGE:
        raise AdminCommandError(f"--limit must be between 1 and {MAX_AUDIT_PAGE}")
    if args.cursor is not None and not args.cursor.isdigit():
        raise AdminCommandError("--cursor must be a next_cursor printed by a previous page")
    where = AuditFilter(
        run_id=args.run,
        runner_id=None if args.runner is None else _canonical_runner(args.runner),
        plugin_id=args.plugin,
        action=args.action,
        outcome=args.outcome,
        since=args.since,
        until=args.until,
    )
    cursor = None if args.cursor is None else int(args.cursor)
    page = _with_stores(
        settings, lambda s: s.audit.page(where, cursor=cursor, limit=args.limit, order=args.order)
    )
    if args.json:
        out.write(
            json.dumps_str(
                {
                    "entries": [_entry_json(e) for e in page.entries],
                    "next_cursor": None if page.next_cursor is None else str(page.next_cursor),
                }
            )
            + "\n"
        )
        return 0
    for entry in page.entries:
        out.write(_line(entry) + "\n")
    if page.next_cursor is not None:
        sys.stderr.write(f"more: --cursor {page.next_cursor}\n")
    return 0


def view_json(view: RunnerView) -> dict[str, object]:
    """A runner's admin view as JSON (``runners list --json`` / ``runners show``)."""
    d = view.descriptor
    m = d.manifest
    control = view.control
    return {
        "runner_id": d.runner_id,
        "plugin_id": d.plugin_id,
        "label": m.label.model_dump(exclude_none=True),
        "protocol_version": m.protocol_version,
        "streaming": m.capabilities.streaming,
        "capabilities": m.capabilities.model_dump(mode="json"),
        "permissions": m.permissions.model_dump(mode="json"),
        "disabled": None
        if control is None
        else {
            "reason": control.reason,
            "disabled_by": control.disabled_by,
            "disabled_at": control.disabled_at,
        },
        "risk": {name: getattr(view.risk, name) for name in view.risk.__dataclass_fields__},
        "process": {name: getattr(view.process, name) for name in view.process.__dataclass_fields__},
        "warnings": view.warnings,
    }
