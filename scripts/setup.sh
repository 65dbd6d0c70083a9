#!/usr/bin/env bash
# Set up everything from nothing: the Node packages of the Pi adapter (from the lockfile;
# among them the pinned Node that npm scripts and npx run on, node_modules/.bin/node), whose
# postinstall creates the Python virtual environment with realmem (setup-python.sh), and tmux
# for the terminal tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# tmux drives the real Pi TUI in the terminal tests (test-adapter/tmux.test.ts).
if ! command -v tmux >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq tmux >/dev/null
  else
    echo "warning: tmux is not installed; the terminal tests will fail until it is" >&2
  fi
fi
# A second try: npm's tar extraction can fail on a shared, concurrently written cache
# (ENOENT "Cannot cd into node_modules/..."); npm ci starts again from a clean node_modules.
npm ci --no-audit --no-fund --loglevel=error || { echo "npm ci failed; trying once more" >&2; npm ci --no-audit --no-fund --loglevel=error; }
test -x .venv/bin/realmem  # created by the postinstall
echo "realmem set up: .venv/bin/realmem, node_modules/.bin/pi on Node $(node_modules/.bin/node --version)"
