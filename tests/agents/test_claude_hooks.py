"""Claude Code hooks end to end: the real hook command (``python -I -S hookclient.py``) fed the
documented hook input JSON (tests/fixtures/claude_code, written from Claude Code's hooks
reference), a real per-home hook server on a Unix socket, a real git repo and SQLite store.
Outputs are compared exactly.  Every server a test starts is stopped and waited for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from realmem.read import prompt
from realmem.write import memories
from realmem.agents import hookclient
from realmem.agents.hookserver import LOCK
from realmem.events import types as ev
from realmem.jobs import queue
from realmem.storage.lock import LeaseLock
from realmem.write.attached import open_attached

from conftest import stop_pid
from helpers.hooks import HOOK, WAIT, fixture, notes_output, project, run_hook, section_output, server  # noqa: F401 (fixtures)


def test_session_start_and_path_notes_once_per_session(server: Any, project: Any, repo: Path, home: Path) -> None:
    app, m = project
    sid = "0b5e6f3c-1111-4a2b-9c3d-000000000001"
    section = prompt.section(app)
    assert "tests run with pytest -q" in section

    assert run_hook(fixture("session_start_startup", repo, sid), home) == section_output(section)

    read = fixture("post_tool_use_read", repo, sid)
    assert run_hook(read, home) == notes_output(m["db"])
    assert run_hook(read, home) is None  # once per session
    # Bash: words of the command that exist on disk; db.py was shown already, the SQL note is new.
    assert run_hook(fixture("post_tool_use_bash", repo, sid), home) == notes_output(m["sql"])
    assert run_hook(fixture("post_tool_use_edit", repo, sid), home) == notes_output(m["api"])
    assert run_hook(fixture("post_tool_use_websearch", repo, sid), home) is None  # a tool with no path
    own = {**read, "tool_name": "mcp__realmem__realmem_recall", "tool_input": {"paths": ["src/db.py"]}}
    assert run_hook(own, home) is None  # realmem's own tools get no notes about themselves

    # A new project-wide memory changes a fresh section, but this session keeps its bytes.
    memories.add(app, "release with make dist", "make dist builds the wheel.", store=app.project.shared_store,
                 stored_paths=["."], source="add")
    assert prompt.section(app) != section
    assert run_hook(fixture("session_start_resume", repo, sid), home) == section_output(section)
    assert run_hook(read, home) is None  # resume keeps the shown notes: they are still in the context

    # Compaction drops the notes from the context: they show again, the section stays the same.
    assert run_hook(fixture("session_start_compact", repo, sid), home) == section_output(section)
    assert run_hook(read, home) == notes_output(m["db"])
    assert run_hook(read, home) is None

    # Another session: its own section (with the new memory) and its own shown ids.
    other = "0b5e6f3c-1111-4a2b-9c3d-000000000002"
    assert run_hook(fixture("session_start_startup", repo, other), home) == section_output(prompt.section(app))
    assert run_hook(fixture("post_tool_use_read", repo, other), home) == notes_output(m["db"])

    # The events name Claude Code and the session as the actor.
    shown = [r for r in app.conn.execute("SELECT session FROM events WHERE type=?", (ev.PathNotesShown.TYPE,))]
    assert {r[0] for r in shown} == {f"claude-code#{sid}", f"claude-code#{other}"}


def test_bad_input_is_reported_on_stderr_and_never_blocks(server: Any, repo: Path, home: Path) -> None:
    for raw in (b"not json", b"[1, 2]", json.dumps({"hook_event_name": "Nope", "cwd": str(repo)}).encode(),
                json.dumps({"hook_event_name": "PostToolUse", "cwd": str(repo / "missing")}).encode()):
        out = subprocess.run([sys.executable, "-I", "-S", str(HOOK)], input=raw, capture_output=True,
                             env={**os.environ, "REALMEM_HOME": str(home)}, timeout=WAIT)
        assert out.returncode == 0 and out.stdout == b""
        assert out.stderr.startswith(b"realmem hook: bad hook input"), out.stderr
    assert server.poll() is None  # the server survives all of it


def test_the_hook_starts_the_server_on_demand_and_one_server_per_home(project: Any, repo: Path, home: Path) -> None:
    app, m = project
    sid = "on-demand"
    env = {**os.environ, "REALMEM_HOME": str(home), "REALMEM_WORKER_AUTOSTART": "0"}
    started = subprocess.run([sys.executable, "-I", "-S", str(HOOK)], capture_output=True, env=env, timeout=WAIT,
                             input=json.dumps(fixture("post_tool_use_read", repo, sid)).encode())
    holder = LeaseLock(home / "realmem.sqlite", LOCK).holder()
    assert holder is not None
    pid = int(holder["pid"])
    try:
        assert json.loads(started.stdout) == notes_output(m["db"])
        # A second server for the same home cannot take the lease and exits at once.
        second = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "hook-server"],
                                env=env, capture_output=True, timeout=WAIT)
        assert second.returncode == 0
        assert int(LeaseLock(home / "realmem.sqlite", LOCK).holder()["pid"]) == pid  # type: ignore[index]
    finally:
        stop_pid(pid)
    assert not Path(hookclient.socket_path(str(home))).exists()
    assert LeaseLock(home / "realmem.sqlite", LOCK).holder() is None


def test_the_server_exits_when_idle(home: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "hook-server", "--idle", "0.2"],
                            stderr=subprocess.DEVNULL)
    try:
        assert proc.wait(timeout=WAIT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not Path(hookclient.socket_path(str(home))).exists()


@pytest.fixture
def embedder_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """An embedding endpoint in the hook server's environment: set, never reached (following the
    log only queues work)."""
    monkeypatch.setenv("REALMEM_EMBEDDING_URL", "http://127.0.0.1:9")


def test_a_session_start_queues_the_work_its_scan_calls_for(embedder_set: None, server: Any, repo: Path,
                                                            home: Path) -> None:
    with open_attached(home, repo, scan=False) as app:
        store = app.store_dir(app.project.shared_store)  # type: ignore[union-attr]
    store.mkdir(parents=True, exist_ok=True)
    (store / "pulled.md").write_text("---\ncaption: Deploy with make ship\n---\n\nRun `make ship`.\n", encoding="utf-8")
    assert queue.pending_tasks(home) == 0
    run_hook(fixture("session_start_startup", repo, "s-follow"), home)
    assert queue.pending_tasks(home) == 1  # the pulled fact's embedding, without waiting for a worker's follow
