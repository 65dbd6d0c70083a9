#!/usr/bin/env bash
# Every test: Python unit + engine tests (real SQLite, git, processes, fake HTTP servers), the
# real agent clients (Gemini CLI, Codex) against fake model APIs, the TypeScript type check,
# and the adapter harness (a real Pi session with a faux model).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
# pytest exits 5 when it collects no tests; set -e makes that a failure too.
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
# The real Gemini CLI and Codex against fake model APIs (installed once into a cache dir).
./scripts/e2e-agents.sh
# The wheel, installed as pipx / uvx users install it, in a fresh environment outside the checkout.
./scripts/smoke-wheel.sh
npx tsc --noEmit
# The adapter's tests run without the bundled embedder (its cost per memory, not its
# behaviour: that is tested over the real rpc child in tests/read/test_local_embedder.py).
REALMEM_EMBEDDING_LOCAL=off npm run --silent test:adapter
