#!/usr/bin/env bash
# The real harness CLIs for the harness-runner tests: Claude Code and Codex from the npm registry, pinned,
# into a cache directory (idempotent: nothing is downloaded when the pinned versions are already there).
# Source it: it exports AGENTRUNNER_CLAUDE_BIN / AGENTRUNNER_CODEX_BIN and AGENTRUNNER_REQUIRE_HARNESS=1,
# so the real-CLI tests fail instead of skipping when a CLI is missing.
# Their binaries come as optionalDependency platform packages, so npm's install-script policy does not matter.
set -euo pipefail

CLAUDE_CODE_VERSION="2.1.197"
CODEX_VERSION="0.171.0"
HARNESS_CACHE="${AGENTRUNNER_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentrunner-ci}/harness-clis"

_harness_version() {
    local manifest="$HARNESS_CACHE/node_modules/$1/package.json"
    [ -f "$manifest" ] && sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$manifest" | head -n1
}

mkdir -p "$HARNESS_CACHE"
if [ "$(_harness_version @anthropic-ai/claude-code)" != "$CLAUDE_CODE_VERSION" ] \
    || [ "$(_harness_version @openai/codex)" != "$CODEX_VERSION" ]; then
    echo "== installing @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION and @openai/codex@$CODEX_VERSION into $HARNESS_CACHE"
    [ -f "$HARNESS_CACHE/package.json" ] || echo '{"name": "agentrunner-harness-clis", "private": true}' > "$HARNESS_CACHE/package.json"
    npm install --prefix "$HARNESS_CACHE" --no-audit --no-fund --loglevel=error \
        "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION"
fi
export AGENTRUNNER_CLAUDE_BIN="$HARNESS_CACHE/node_modules/.bin/claude"
export AGENTRUNNER_CODEX_BIN="$HARNESS_CACHE/node_modules/.bin/codex"
export AGENTRUNNER_REQUIRE_HARNESS=1
echo "== $("$AGENTRUNNER_CLAUDE_BIN" --version), $("$AGENTRUNNER_CODEX_BIN" --version)"
