#!/usr/bin/env bash
# OpenAPI fuzzing of the HTTP API: starts `agentrunner serve` on a free loopback port with a temporary data
# directory and a bearer token, then runs schemathesis (a dev dependency from PyPI) against /openapi.json
# for a bounded number of examples per operation. Exits non-zero on any failure: 5xx answers, answers that
# do not match the document (status, content type, headers, body schema), accepted invalid data, ignored auth.
#
# SCHEMATHESIS_MAX_EXAMPLES (default 30) bounds the run; SCHEMATHESIS_SEED makes it reproducible.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"

MAX_EXAMPLES="${SCHEMATHESIS_MAX_EXAMPLES:-30}"
SEED="${SCHEMATHESIS_SEED:-$RANDOM}"
run=(uv run --frozen)

workdir="$(mktemp -d)"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$workdir"
}
trap cleanup EXIT

port="$("${run[@]}" python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
token="$("${run[@]}" python -c 'import secrets; print(secrets.token_urlsafe(24))')"
base="http://127.0.0.1:$port"

echo "== agentrunner serve on $base (data in $workdir)"
env -u AGENTRUNNER_CONFIG -u AGENTRUNNER_DATABASE_URL AGENTRUNNER_API_TOKEN="$token" \
    "${run[@]}" python -m agentrunner_host.cli serve --host 127.0.0.1 --port "$port" --data-dir "$workdir/data" \
    >"$workdir/serve.log" 2>&1 &
server_pid=$!

for _ in $(seq 1 300); do
    if curl -fsS -o /dev/null -H "Authorization: Bearer $token" "$base/readyz" 2>/dev/null; then
        break
    fi
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "serve exited before becoming ready:" >&2
        cat "$workdir/serve.log" >&2
        exit 1
    fi
    sleep 0.2
done
curl -fsS -o /dev/null -H "Authorization: Bearer $token" "$base/readyz"

echo "== schemathesis: $MAX_EXAMPLES examples per operation, seed $SEED"
status=0
# positive_data_acceptance is left out on purpose: schema-valid bodies may still be refused for what they
# mean (a binding naming an unknown agent, a conflicting binding), with a documented 409/422.
# Run from the temporary directory: schemathesis keeps a cache in ./.schemathesis.
(cd "$workdir" && uv run --frozen --project "$repo" schemathesis run "$base/openapi.json" \
    --header "Authorization: Bearer $token" \
    --checks all \
    --exclude-checks positive_data_acceptance \
    --max-examples "$MAX_EXAMPLES" \
    --seed "$SEED" \
    --workers 1 \
    --request-timeout 30 \
    --generation-database none \
    --suppress-health-check too_slow,filter_too_much \
    --no-color) || status=$?

if grep -q "Traceback" "$workdir/serve.log"; then
    echo "== the server logged tracebacks:" >&2
    grep -n -A60 "Traceback" "$workdir/serve.log" | grep -v "site-packages\|^[0-9]*-  *\^" | head -60 >&2
    status=1
fi
exit "$status"
