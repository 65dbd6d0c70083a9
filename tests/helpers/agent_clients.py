"""The real Gemini CLI and Codex, pinned (scripts/agent-clients/), run as a user runs them in
a project realmem was installed into, against a fake model API on 127.0.0.1.

``scripts/e2e-agents.sh`` installs the pinned clients into a cache directory and names its
``node_modules/.bin`` in ``E2E_AGENT_CLIENTS`` (not a ``REALMEM_*`` name: tests/conftest.py
clears those); without it the tests that need a client are skipped.  A client runs with an
environment built from nothing but the test's temporary HOME (so ~/.gemini, ~/.codex and
~/.pi are the test's own), the pinned Node 22 first on PATH, and in a process group of its
own, which is killed when it returns: the MCP servers it starts go with it.  Hook servers it
starts on demand live under the test's tmp dir and end with the test (tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
WAIT = 300.0  # a hang guard only: a client's start on a loaded 2-core machine is slow
_HOOK_CONTEXT = re.compile(r"<hook_context>(.*?)</hook_context>", re.DOTALL)


def client_bin(name: str) -> Path:
    """The pinned client's launcher, or a skip saying how to get it."""
    where = os.environ.get("E2E_AGENT_CLIENTS")
    if not where:
        pytest.skip("the real agent clients run through scripts/e2e-agents.sh")
    path = Path(where) / name
    if not path.exists():
        pytest.fail(f"E2E_AGENT_CLIENTS has no {name}: {where}")
    return path


def client_env(**extra: str) -> dict[str, str]:
    """The test's HOME, REALMEM_* and git settings; nothing of the developer's shell (no keys,
    no base URLs, no CODEX_HOME) reaches the client."""
    keep = ("HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep or k.startswith("REALMEM_")}
    path = [ROOT / "node_modules" / ".bin", Path(sys.executable).parent]  # Node >= 22 first; then realmem
    env["PATH"] = os.pathsep.join([*map(str, path), "/usr/local/bin", "/usr/bin", "/bin"])
    env.update(LANG="C.UTF-8", TERM="dumb", NO_COLOR="1", **extra)
    return env


def run_client(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a client to its end in its own process group; whatever is left in the group is
    killed, so nothing it started outlives the call."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=WAIT)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON value (a request body)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def gemini_hook_contexts(body: Any) -> list[str]:
    """What hooks added to a Gemini request: Gemini CLI wraps each hook's additionalContext in
    ``<hook_context>`` with ``<`` and ``>`` escaped (so a hook cannot close the wrapper)."""
    return [html.unescape(m) for s in strings(body) for m in _HOOK_CONTEXT.findall(s)]


def write_json(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
