#!/usr/bin/env bash
# The README's quick-start serve command, verbatim, on a stock Debian/Ubuntu Python: a fresh clone, the system
# python3 (/usr/bin/python3, marked EXTERNALLY-MANAGED as Debian ships it, so `pip install uv` is refused),
# a fresh HOME, PATH=/usr/bin:/bin with no uv on it, no PIP_*/UV_* settings (TLS trust and proxy kept). Then the echo runner answers a
# message over HTTP. This is a fresh environment on the CI machine, not a debootstrapped debian:12 chroot.
# Needs: git, /usr/bin/python3 >= 3.11 with pip (as root it installs python3 and python3-pip with apt when
# missing), and the PyPI registry. The serve command is the README's first quick-start line
# (tests/test_quick_start.py checks it is).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
SERVE_COMMAND='./uvw run --frozen agentrunner serve'

if [ ! -x /usr/bin/python3 ] || ! /usr/bin/python3 -m pip --version >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        apt-get install -y -qq python3 python3-pip >/dev/null
    else
        echo "quickstart: needs /usr/bin/python3 with pip" >&2
        exit 1
    fi
fi
marker="$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')/EXTERNALLY-MANAGED"
if [ ! -f "$marker" ]; then
    if [ "$(id -u)" = 0 ]; then
        # What Debian's python3.11 package ships; without it this would not be the PEP 668 case.
        printf '[externally-managed]\nError=managed by the system package manager\n' > "$marker"
        echo "quickstart: marked the system Python EXTERNALLY-MANAGED ($marker)"
    else
        echo "quickstart: the system Python is not EXTERNALLY-MANAGED and this is not root" >&2
        exit 1
    fi
fi

work="$(mktemp -d)"
server=""
cleanup() {
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
        kill -INT "$server" 2>/dev/null || true
        for _ in $(seq 1 60); do kill -0 "$server" 2>/dev/null || break; sleep 1; done
        kill -KILL "$server" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/home"
git clone -q "$repo" "$work/clone"
fresh=(env -i HOME="$work/home" PATH=/usr/bin:/bin LANG=C.UTF-8)
# Only the machine's network trust and proxy settings are kept (a CI machine behind a TLS-inspecting proxy
# cannot reach PyPI without them); nothing that configures pip or uv.
for name in SSL_CERT_FILE SSL_CERT_DIR http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    if [ -n "${!name:-}" ]; then fresh+=("$name=${!name}"); fi
done

if "${fresh[@]}" sh -c 'command -v uv' >/dev/null; then
    echo "quickstart: uv is on /usr/bin:/bin; this would not test the path without uv" >&2
    exit 1
fi
if "${fresh[@]}" /usr/bin/python3 -m pip install -q --dry-run uv >/dev/null 2>&1; then
    echo "quickstart: the system pip accepts installs; this would not be the PEP 668 case" >&2
    exit 1
fi

echo "quickstart: $SERVE_COMMAND (fresh HOME, system Python, no uv)"
(cd "$work/clone" && exec "${fresh[@]}" sh -c "exec $SERVE_COMMAND") > "$work/serve.log" 2>&1 &
server=$!
# The first start downloads the runtime packages from PyPI into the fresh HOME's cache: allow minutes.
"${fresh[@]}" /usr/bin/python3 - "$server" <<'PY' || { cat "$work/serve.log"; exit 1; }
import json, os, sys, time, urllib.request

server = int(sys.argv[1])
base = "http://127.0.0.1:8420"
deadline = time.monotonic() + 1200
while True:
    try:
        with urllib.request.urlopen(base + "/readyz", timeout=5) as answer:
            if answer.status == 200:
                break
    except OSError:
        pass
    try:
        os.kill(server, 0)
    except ProcessLookupError:
        sys.exit("quickstart: serve exited before it was ready")
    if time.monotonic() > deadline:
        sys.exit("quickstart: serve not ready after 20 minutes")
    time.sleep(1)
event = {"event_type": "message.received", "conversation_id": "c1", "input": {"text": "hello quick start"}}
request = urllib.request.Request(
    base + "/v1/events",
    data=json.dumps(event).encode(),
    headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
)
with urllib.request.urlopen(request, timeout=120) as answer:
    body = answer.read().decode()
if "hello quick start" not in body:
    sys.exit(f"quickstart: the echo runner did not answer: {body[:2000]}")
print("quickstart: the echo runner answered over HTTP")
PY
# The serve command installs the runtime group only (./uvw): no test or lint tool may be in the environment.
site="$(echo "$work"/clone/.venv/lib/python3*/site-packages)"
for tool in pytest hypothesis schemathesis playwright pyright ruff agentrunner_conformance; do
    if ls "$site" | grep -qi "^${tool}-.*dist-info$"; then
        echo "quickstart: the serve command installed the dev tool $tool" >&2
        exit 1
    fi
done
test -x "$work/clone/.tools/uv/bin/uv" || { echo "quickstart: uvw did not install uv with pip --target" >&2; exit 1; }
echo "quickstart: ok ($(du -sm "$work/clone/.venv" | cut -f1) MB in .venv, $("$work/clone/.venv/bin/python" -m pip --version >/dev/null 2>&1; ls "$work/clone/.venv/lib/"python3*/site-packages | grep -c dist-info) distributions)"
