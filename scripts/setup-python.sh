#!/usr/bin/env bash
# The Python core: a virtual environment in .venv with realmem installed (editable, with
# test extras).  Runs as the package's npm postinstall, so `npm install` sets up everything.
set -euo pipefail
cd "$(dirname "$0")/.."
# As an npm postinstall outside a git checkout (a package from the registry), the extension
# sets the core up on first use instead (extensions/realmem/setup.ts): an install with scripts
# disabled must work the same, and a missing Python must not fail `npm install`.
if [ "${1:-}" = "--postinstall" ] && [ ! -e .git ]; then
  exit 0
fi
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
# Bytecode for the package now, as a regular (non-editable) pip install writes it: where
# PYTHONDONTWRITEBYTECODE is set (container images often set it) Python would otherwise compile
# realmem's modules again in every process it starts: each `realmem` command, each agent
# hook and the adapter's rpc child (`realmem status` 0.46 -> 0.30 s of CPU on this machine).
.venv/bin/python -m compileall -q realmem
