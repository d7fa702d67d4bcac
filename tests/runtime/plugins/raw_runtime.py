"""A hand-written misbehaving runtime (not the SDK's): it completes the handshake, then breaks the protocol the
way ``RAW_MODE`` says when the host starts a run: ``garbage`` (a line that is not JSON), ``oversized`` (a line
longer than ``RAW_SIZE`` bytes), ``overrun`` (more results than the credit the host granted)."""

from __future__ import annotations

import os
import sys

from agentrunner import codec


def _write(obj: object) -> None:
    sys.stdout.buffer.write(codec.dumps(obj) + b"\n")
    sys.stdout.buffer.flush()


def main() -> None:
    mode = os.environ.get("RAW_MODE", "garbage")
    for line in sys.stdin.buffer:
        frame = codec.loads(line)
        kind = frame.get("kind")
        if kind == "hello":
            _write({"kind": "welcome", "id": frame["id"], "wire_version": 1, "runtime": "raw"})
        elif kind == "run":
            run_id = frame["run_id"]
            if mode == "garbage":
                sys.stdout.buffer.write(b"this is not a frame\n")
            elif mode == "oversized":
                sys.stdout.buffer.write(
                    b'{"kind":"result","pad":"' + b"x" * int(os.environ["RAW_SIZE"]) + b'"}\n'
                )
            elif mode == "overrun":
                # One write under PIPE_BUF: the host reads every frame before its consumer could grant credit.
                lines = [
                    codec.dumps({"kind": "result", "run_id": run_id, "sequence": i + 1, "result": {"i": i}})
                    for i in range(frame["window"] + 5)
                ]
                sys.stdout.buffer.write(b"\n".join(lines) + b"\n")
            sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
