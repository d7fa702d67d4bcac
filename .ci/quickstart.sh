#!/usr/bin/env bash
# The README's quick start, verbatim, the way a newcomer meets it: a fresh minimal Debian 12 root built here
# with mmdebstrap (variant minbase, plus python3, python3-pip and ca-certificates: "Python >= 3.11 and pip",
# Debian's own python3.11 with its EXTERNALLY-MANAGED marker, so `pip install uv` is refused), and curl for
# the README's try-it line. No uv, an empty HOME, `env -i`. Inside it, from a fresh clone of this repository:
#   1. the serve command; the README's curl line must get the echo answer; the environment must hold no test
#      or lint tool (serve installs the runtime group only);
#   2. the test command, in the same clone. Nothing the newcomer lacks is handed in, so the tests that need
#      PostgreSQL, chromium or the harness CLIs skip with their reasons here; `.ci/run` runs them for real.
# Only the machine's TLS trust (its CA bundle, as SSL_CERT_FILE points to) and proxy settings go in: without
# them a machine behind a TLS-inspecting proxy cannot reach PyPI.
# Needs: root (mmdebstrap, chroot, unshare), git, Debian's apt sources (it installs mmdebstrap with apt when
# missing and reads the mirror from /etc/apt), and the PyPI registry. About 1.5 minutes for the root, plus
# the serve start and one full test run (minutes).
# tests/test_quick_start.py checks that the three commands below are the README's, character for character.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
SERVE_COMMAND='./uvw run --frozen agentrunner serve'
TEST_COMMAND='./uvw run --frozen pytest'
TRY_COMMAND='curl -N -H '"'"'Content-Type: application/json'"'"' -H '"'"'Accept: text/event-stream'"'"' -d '"'"'{"event_type":"message.received","conversation_id":"c1","input":{"text":"hello"}}'"'"' http://127.0.0.1:8420/v1/events'

if [ "$(id -u)" != 0 ]; then
    echo "quickstart: needs root (mmdebstrap, chroot, a private mount namespace)" >&2
    exit 1
fi
if ! command -v mmdebstrap >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null
fi
sources=""
for candidate in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
    if [ -s "$candidate" ]; then sources="$candidate"; break; fi
done
if [ -z "$sources" ]; then
    echo "quickstart: no Debian apt sources on this machine to build the root from" >&2
    exit 1
fi

work="$(mktemp -d /tmp/agentrunner-quickstart.XXXXXX)"
root="$work/root"
cleanup() {
    # The mounts live in the namespace that ended with `unshare`; refuse to delete through one anyway.
    if findmnt -rn -o TARGET | grep -q "^$root"; then
        echo "quickstart: something is still mounted under $root; leaving $work" >&2
        return
    fi
    rm -rf --one-file-system "$work"
}
trap cleanup EXIT

started=$SECONDS
echo "quickstart: building a minimal Debian 12 root (mmdebstrap minbase) from $sources"
mmdebstrap --quiet --variant=minbase --include=python3,python3-pip,ca-certificates,curl \
    bookworm "$root" "$sources"
echo "quickstart: root ready in $((SECONDS - started)) s ($(du -sm "$root" | cut -f1) MB)"
git clone -q "$repo" "$root/root/agentrunner"
cp /etc/resolv.conf "$root/etc/resolv.conf"
inside=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8)
if [ -n "${SSL_CERT_FILE:-}" ] && [ -f "$SSL_CERT_FILE" ]; then
    mkdir -p "$root/$(dirname "$SSL_CERT_FILE")"
    cp "$SSL_CERT_FILE" "$root/$SSL_CERT_FILE"
    inside+=("SSL_CERT_FILE=$SSL_CERT_FILE")
fi
for name in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    if [ -n "${!name:-}" ]; then inside+=("$name=${!name}"); fi
done
printf '%s\n' "$SERVE_COMMAND" > "$root/root/serve-command"
printf '%s\n' "$TEST_COMMAND" > "$root/root/test-command"
printf '%s\n' "$TRY_COMMAND" > "$root/root/try-command"
cp "$repo/.ci/quickstart-inside.sh" "$root/root/quickstart-inside.sh"

# A private mount namespace, so nothing mounted for the root is seen outside or outlives the run. No PID
# namespace: its init would be a shell that never reaps the orphans some tests leave to be reaped.
unshare --mount --fork --propagation private /bin/sh -c '
    set -e
    root="$1"; shift
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs -o size=4g tmpfs "$root/tmp"
    exec chroot "$root" /usr/bin/env -i "$@" /bin/sh /root/quickstart-inside.sh
' quickstart "$root" "${inside[@]}"
echo "quickstart: ok in $((SECONDS - started)) s"
