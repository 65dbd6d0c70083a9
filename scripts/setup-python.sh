#!/usr/bin/env bash
# The Python core: a virtual environment in .venv with realmem installed (editable, with
# test extras).  Runs as the package's npm postinstall, so `npm install` sets up everything.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
