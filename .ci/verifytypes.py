"""The SDK's type completeness as pyright sees it from a user's project: ``pyright --verifytypes agentrunner``.

Prints the score and fails below the floor. ``--ignoreexternal`` leaves out what pyright cannot know about
pydantic's own internals (without it, every model inherits pydantic's partially unknown metaclass and the score
measures pydantic, not us).

Usage (from the repository root): ``uv run --frozen python .ci/verifytypes.py [--floor 0.95]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--floor", type=float, default=0.95, help="lowest accepted score, 0..1 (default 0.95)"
    )
    parser.add_argument("--package", default="agentrunner")
    args = parser.parse_args()
    # pyright exits 1 when any symbol is incomplete; the score is what we hold the SDK to, so read the report.
    done = subprocess.run(
        ["pyright", "--verifytypes", args.package, "--ignoreexternal", "--outputjson"],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        report = json.loads(done.stdout)
        completeness = report["typeCompleteness"]
        score = float(completeness["completenessScore"])
    except (ValueError, KeyError, TypeError):
        print(
            f"pyright --verifytypes produced no report (exit {done.returncode}):\n{done.stdout}{done.stderr}"
        )
        return 2
    known = completeness["exportedSymbolCounts"]["withKnownType"]
    total = known + sum(
        completeness["exportedSymbolCounts"][k] for k in ("withAmbiguousType", "withUnknownType")
    )
    print(
        f"verifytypes {args.package}: {score:.1%} of {total} exported symbols known (floor {args.floor:.0%})"
    )
    if score < args.floor:
        for symbol in completeness["symbols"]:
            if not symbol["isTypeKnown"] or symbol["isTypeAmbiguous"]:
                print(f"  {symbol['name']}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
