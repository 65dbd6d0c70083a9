"""Agent hooks as their clients run them: the documented hook input (tests/fixtures/<client>)
fed to the installed hook command, and a real per-home hook server on a Unix socket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from realmem.stores import ids
from realmem.write import memories
from realmem.agents import hookclient
from realmem.app import Realmem
from realmem.write.attached import open_attached

FIXTURES = Path(__file__).parents[1] / "fixtures"
HOOK = Path(hookclient.__file__)
WAIT = 60.0  # a hang guard only


def fixture(name: str, cwd: Path, session: str, client: str = "claude_code") -> dict[str, Any]:
    text = (FIXTURES / client / f"{name}.json").read_text(encoding="utf-8")
    text = text.replace("$CWD", str(cwd)).replace("$SESSION", session).replace("$HOME", os.environ["HOME"])
    return json.loads(text)


def run_hook(hook_input: dict[str, Any], home: Path, agent: str | None = None) -> dict[str, Any] | None:
    """The hook command exactly as installed (``--agent`` for clients other than Claude Code);
    None when it prints nothing."""
    cmd = [sys.executable, "-I", "-S", str(HOOK), *(["--agent", agent] if agent else [])]
    out = subprocess.run(cmd, input=json.dumps(hook_input).encode(),
                         capture_output=True, env={**os.environ, "REALMEM_HOME": str(home)}, timeout=WAIT)
    assert out.returncode == 0
    assert out.stderr == b"", out.stderr
    return json.loads(out.stdout) if out.stdout else None


def wait_socket(home: Path, proc: subprocess.Popen[bytes] | None = None) -> None:
    path = Path(hookclient.socket_path(str(home)))
    deadline = time.monotonic() + WAIT
    while not path.exists():
        assert proc is None or proc.poll() is None, "the hook server exited"
        assert time.monotonic() < deadline, "the hook server never listened"
        time.sleep(0.02)


@pytest.fixture
def server(home: Path) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "hook-server", "--idle", "600"],
                            env={**os.environ, "REALMEM_WORKER_AUTOSTART": "0"}, stderr=subprocess.DEVNULL)
    try:
        wait_socket(home, proc)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=WAIT)


@pytest.fixture
def project(repo: Path, home: Path) -> Iterator[tuple[Realmem, dict[str, Any]]]:
    for rel in ("src/db.py", "src/api/routes.py", "migrations/001.sql"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("x = 1\n", encoding="utf-8")
    app = open_attached(home, repo, scan=False)
    assert app.project is not None
    shared, personal = app.project.shared_store, app.project.personal_store
    mems = {
        "db": memories.add(app, "db module uses apsw", "src/db.py opens apsw with WAL.", store=shared,
                           stored_paths=["src/db.py"], source="add"),
        "api": memories.add(app, "routes are generated", "Edit routes.yaml, not routes.py.", store=shared,
                            stored_paths=["src/api"], source="add"),
        "sql": memories.add(app, "migrations are plain SQL", "No ORM migrations here.", store=personal,
                            stored_paths=["migrations/*.sql"], source="add"),
        "wide": memories.add(app, "tests run with pytest -q", "Run .venv/bin/python -m pytest -q.", store=shared,
                             stored_paths=["."], source="add"),
    }
    yield app, mems
    app.close()


def notes_output(*entries: Any, event: str = "PostToolUse") -> dict[str, Any]:
    lines = ["<realmem-path-notes>"]
    lines += [f"[{ids.short(m.id)}] {m.caption} ({', '.join(m.paths)})" for m in entries]
    lines += ["(read a caption's fact with realmem_recall ids=[...])", "</realmem-path-notes>"]
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": "\n".join(lines)}}


def section_output(text: str, event: str = "SessionStart") -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}
