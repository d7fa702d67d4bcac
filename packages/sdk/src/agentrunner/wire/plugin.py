"""``agentrunner-plugin`` / ``python -m agentrunner.wire.plugin``: the program a plugin runtime process runs.

It speaks the wire protocol on its stdin/stdout. Before importing any plugin code it moves the real stdout to a
private descriptor for frames and points ``sys.stdout`` and fd 1 at stderr, so a runner's ``print()`` (or a
library writing to fd 1) lands in the host's log instead of corrupting the frame stream.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _protect_stdout() -> int:
    """Return a private descriptor on the real stdout; fd 1 and ``sys.stdout`` now write to stderr."""
    sys.stdout.flush()
    frame_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return frame_fd


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentrunner-plugin",
        description="Serve a plugin's agent runners over the wire protocol on stdio.",
    )
    parser.add_argument(
        "--plugin-dir", type=Path, help="plugin directory: put on sys.path; its manifest names the runners"
    )
    parser.add_argument(
        "--runner",
        action="append",
        default=[],
        metavar="REF",
        help="runner class as module:Class or file.py:Class (repeatable; file paths are relative to --plugin-dir)",
    )
    parser.add_argument(
        "--entry-points",
        action="store_true",
        help="load runners from the 'agentrunner.runners' entry-point group",
    )
    parser.add_argument(
        "--plugin-id", help="only entry points named <plugin-id>/<runner>; checks every runner's id"
    )
    parser.add_argument(
        "--connect",
        metavar="URL",
        help="serve a host over a WebSocket (ws:// or wss://) instead of stdio; the token is read from "
        "$AGENTRUNNER_RUNTIME_TOKEN (needs the 'websockets' package)",
    )
    parser.add_argument("--log-level", default="INFO")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the plugin runtime until the host closes stdin; 2 when the plugin cannot be loaded."""
    frame_fd = _protect_stdout()
    args = _parser().parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, level=str(args.log_level).upper(), format="%(levelname)s %(name)s: %(message)s"
    )
    # Imported after the stdout switch: plugin modules may print at import time.
    from .serve import load_runners, serve_stdio

    try:
        runners = load_runners(
            plugin_dir=args.plugin_dir,
            refs=list(args.runner),
            entry_points=bool(args.entry_points),
            plugin_id=args.plugin_id,
        )
    except Exception as exc:
        print(f"agentrunner-plugin: cannot load the plugin: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if args.connect:
        from .websocket import TOKEN_ENV, serve_websocket

        token = os.environ.get(TOKEN_ENV)
        if not token:
            print(f"agentrunner-plugin: --connect needs the runtime token in ${TOKEN_ENV}", file=sys.stderr)
            return 2
        try:
            asyncio.run(serve_websocket(runners, args.connect, token=token))
        except Exception as exc:
            print(
                f"agentrunner-plugin: cannot serve {args.connect}: {type(exc).__name__}: {exc}",
                file=sys.stderr,
            )
            return 1
        return 0
    asyncio.run(serve_stdio(runners, frame_fd=frame_fd))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
