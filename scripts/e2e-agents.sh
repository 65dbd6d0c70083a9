#!/usr/bin/env bash
# End to end with the real agent clients: Gemini CLI and Codex, pinned by
# scripts/agent-clients/package-lock.json, installed (once per lock) into a cache directory
# and run by tests/agents/test_real_clients.py against fake model APIs on 127.0.0.1.
# The clients need Node >= 22: the project's pinned Node (devDependency "node") comes first.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"
CACHE="${REALMEM_AGENT_CLIENTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/realmem/agent-clients}"
LOCK=scripts/agent-clients/package-lock.json
if ! cmp -s "$LOCK" "$CACHE/package-lock.json" || [ ! -x "$CACHE/node_modules/.bin/codex" ]; then
  rm -rf "$CACHE"
  mkdir -p "$CACHE"
  cp scripts/agent-clients/package.json "$LOCK" "$CACHE/"
  # No install scripts: keytar and node-pty (optional, interactive use only) would build from
  # source; Codex's native binary is a package of its own.
  (cd "$CACHE" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
E2E_AGENT_CLIENTS="$CACHE/node_modules/.bin" \
  .venv/bin/python -m pytest -q -p no:cacheprovider tests/agents/test_real_clients.py "$@"
