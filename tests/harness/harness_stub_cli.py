"""A stand-in harness CLI for the process-rule tests (a fake, named as one).

Run as ``python harness_stub_cli.py <mode>`` (the tests write a tiny executable wrapper). It records its argv,
stdin and environment in ``$STUB_RECORD`` (JSON) and then behaves as *mode* says:

* ``claude-json`` — one Claude ``result`` object naming a session; ``codex-jsonl`` — a Codex JSONL turn;
* ``exit3`` — a message on stderr (with a secret in it) and exit status 3; ``empty`` — nothing, exit 0;
* ``badjson`` — a line that is not JSON; ``sleep`` — sleeps far past any test timeout;
* ``grandchild`` — starts a long-sleeping grandchild (its pid in ``$STUB_GRANDCHILD``), prints a result, exits;
* ``grandchild-sleep`` — the same grandchild, then sleeps (the run times out);
* ``session-gone`` — when resuming, "No conversation found" on stderr and exit 1; else like ``claude-json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import orjson


def _dumps(value: object) -> str:
    return orjson.dumps(value).decode()


def _record() -> None:
    path = os.environ.get("STUB_RECORD")
    if not path:
        return
    entry = {"argv": sys.argv[1:], "stdin": sys.stdin.read(), "env": dict(os.environ), "cwd": os.getcwd()}
    runs = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            runs = json.load(fh)
    runs.append(entry)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(runs, fh)


def _claude_result(session: str = "stub-session-1") -> None:
    print(
        _dumps(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "result": "stub reply",
                "session_id": session,
                "num_turns": 1,
                "total_cost_usd": 0.001,
                "usage": {"input_tokens": 3, "output_tokens": 2},
                "permission_denials": [],
            }
        )
    )


def _grandchild() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.environ["STUB_GRANDCHILD"], "w", encoding="utf-8") as fh:
        fh.write(str(child.pid))


def main() -> int:
    mode = os.environ.get("STUB_MODE", "claude-json")
    _record()
    if mode == "claude-json":
        _claude_result()
    elif mode == "codex-jsonl":
        for line in (
            {"type": "thread.started", "thread_id": "stub-thread-1"},
            {"type": "turn.started"},
            {
                "type": "item.completed",
                "item": {"id": "item_0", "type": "agent_message", "text": "stub codex reply"},
            },
            {"type": "turn.completed", "usage": {"input_tokens": 4, "output_tokens": 2}},
        ):
            print(_dumps(line), flush=True)
    elif mode == "exit3":
        print("fatal: could not reach the API with key sk-stub-secret-0123456789", file=sys.stderr)
        return 3
    elif mode == "empty":
        return 0
    elif mode == "badjson":
        print("this is {not json")
    elif mode == "sleep":
        time.sleep(600)
    elif mode == "grandchild":
        _grandchild()
        _claude_result()
    elif mode == "grandchild-sleep":
        _grandchild()
        time.sleep(600)
    elif mode == "session-gone":
        if "--resume" in sys.argv:
            print(
                "No conversation found with session ID: " + sys.argv[sys.argv.index("--resume") + 1],
                file=sys.stderr,
            )
            return 1
        _claude_result("stub-session-fresh")
    return 0


if __name__ == "__main__":
    sys.exit(main())
