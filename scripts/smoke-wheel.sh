#!/usr/bin/env bash
# Build the wheel and use it the way pipx / uvx users do: a fresh virtual environment in a
# temp directory outside the checkout, then add, recall and the MCP server's tool list in a
# new git repository (scripts/smoke_wheel.py).
set -euo pipefail
cd "$(dirname "$0")/.."
CHECKOUT=$PWD
TMP=$(mktemp -d "${TMPDIR:-/tmp}/realmem-wheel-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
.venv/bin/python -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$TMP/dist" "$CHECKOUT"
python3 -m venv "$TMP/venv"
"$TMP/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$TMP"/dist/realmem-*.whl
mkdir "$TMP/repo" "$TMP/home"
cd "$TMP/repo"
git init -q . && git -c user.name=smoke -c user.email=smoke@example.invalid commit -q --allow-empty -m init
HOME="$TMP/home" REALMEM_HOME="$TMP/home/realmem" REALMEM_WORKER_AUTOSTART=0 \
  "$TMP/venv/bin/python" -I "$CHECKOUT/scripts/smoke_wheel.py"
