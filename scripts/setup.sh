#!/usr/bin/env bash
# Set up everything from nothing: the Python virtual environment with realmem installed
# (editable, with test extras) and the Node packages of the Pi adapter (from the lockfile).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# tmux drives the real Pi TUI in the terminal tests (test-adapter/tmux.test.ts).
if ! command -v tmux >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq tmux >/dev/null
  else
    echo "warning: tmux is not installed; the terminal tests will fail until it is" >&2
  fi
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
else
  npm install --no-audit --no-fund --loglevel=error
fi
echo "realmem set up: .venv/bin/realmem, node_modules/.bin/pi"
