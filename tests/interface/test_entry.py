"""The one way in (``realmem.interface.entry``): every front end opens, follows and maps its
errors through it.  Real SQLite homes, real git repos, a real read-only bind mount (or chmod)."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from realmem import errors
from realmem.agents import hookserver, mcp_server
from realmem.events import log
from realmem.interface import commands, rpc, tools
from realmem.interface.entry import Entry
from realmem.jobs import policy
from realmem.write import memories
from helpers import disks


def _add(app, caption: str) -> None:  # type: ignore[no-untyped-def]
    store, stored = memories.place(app, "shared", None)
    memories.add(app, caption, "kubectl apply", store=store, stored_paths=stored, source="add")


def test_a_failing_request_is_followed_too_and_fails_as_it_was(home: Path, repo: Path) -> None:
    with Entry(home) as entry:
        boom = RuntimeError("the command broke after its write")
        with pytest.raises(RuntimeError) as raised, entry.request() as request:
            app = request.app(repo)
            _add(app, "Deploys go through staging")
            raise boom
        assert raised.value is boom  # not a storage failure: left as it is
        assert policy.position(app.conn) == log.last_seq(app.conn)  # its write was followed all the same


def test_only_a_request_that_opened_an_app_and_asked_for_it_is_followed(home: Path, repo: Path) -> None:
    with Entry(home) as entry:
        with entry.request() as request:  # opens nothing (hello, settings): nothing to follow
            pass
        assert request.used is None and entry.apps == {}
        with entry.request(follow=False) as request:  # a hook's path notes call for no work
            app = request.app(repo)
            _add(app, "Deploys go through staging")
        assert policy.position(app.conn) < log.last_seq(app.conn)
        with entry.request() as request:
            assert request.app(repo) is app  # kept warm between requests
        assert policy.position(app.conn) == log.last_seq(app.conn)


def test_each_request_writes_as_its_own_session(home: Path, repo: Path) -> None:
    with Entry(home) as entry:
        for session in ("pi#one", "codex#two"):
            with entry.request() as request:
                _add(request.app(repo, session=session), f"Written by {session}")
        with entry.request() as request:
            app = request.app(repo)  # no session given: the last one stays (an rpc path note names none)
            assert app.session == "codex#two"
        by = {env.event.fields.caption: env.session for env in log.read(app.conn, 0)
              if env.event.TYPE == "memory_added"}
    assert by == {"Written by pi#one": "pi#one", "Written by codex#two": "codex#two"}


def test_a_disk_failure_leaves_the_request_as_the_storage_error_naming_the_file(home: Path, tmp_path: Path,
                                                                                repo: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    with Entry(home) as entry, disks.read_only(locked):
        with pytest.raises(errors.StorageError) as raised, entry.request() as request:
            request.app(repo)
            (locked / "notes.txt").write_text("x", encoding="utf-8")
    message = str(raised.value)
    assert message.startswith(f"{locked / 'notes.txt'}: cannot be written (") and "nothing was changed" in message
    assert isinstance(raised.value.__cause__, OSError)
    assert errors.code_of(raised.value) == errors.REFUSED


@pytest.fixture
def ignored_repo(repo: Path) -> Path:
    """A repo whose .gitignore hides the shared store: ``gitignore_fix`` appends to it."""
    (repo / ".gitignore").write_text(".pi/\n", encoding="utf-8")
    return repo


def test_a_storage_failure_reads_the_same_in_every_front_end(home: Path, ignored_repo: Path) -> None:
    """The same real failure (the repo read-only when the .gitignore fix is appended) through the
    CLI, the rpc child and the MCP server: one line, the same words, a refusal."""
    repo = ignored_repo
    env = {**os.environ, "REALMEM_HOME": str(home), "REALMEM_WORKER_AUTOSTART": "0"}
    cli = [sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "--cwd", str(repo)]
    assert subprocess.run([*cli, "status"], capture_output=True, env=env, timeout=120).returncode == 0
    server = rpc.Server(str(home), io.StringIO())
    backend = mcp_server.Backend(str(home), str(repo))
    server.handle({"jsonrpc": "2.0", "id": 1, "method": "status", "params": {"cwd": str(repo)}})
    backend.run(repo, "agent", tools.status)  # both warm, as a session keeps them
    try:
        with disks.read_only(repo):
            by_cli = subprocess.run([*cli, "fix-gitignore", "--yes"], capture_output=True, text=True, env=env,
                                    timeout=120)
            server.out = out = io.StringIO()
            server.handle({"jsonrpc": "2.0", "id": 2, "method": "gitignore_fix", "params": {"cwd": str(repo)}})
            with pytest.raises(errors.Error) as by_mcp:
                backend.run(repo, "agent", commands.gitignore_fix)
    finally:
        backend.close()
        for apps in server.all_apps:
            for app in apps.values():
                app.close()
    assert by_cli.returncode == errors.REFUSED and "Traceback" not in by_cli.stderr, by_cli.stderr
    line = by_cli.stderr.strip().removeprefix("realmem: ")
    assert line.startswith(f"{repo / '.gitignore'}: cannot be written (") and "\n" not in line, line
    assert json.loads(out.getvalue())["error"] == {"code": errors.REFUSED, "message": line}
    assert errors.code_of(by_mcp.value) == errors.REFUSED and errors.message_of(by_mcp.value, "tool") == line


def test_the_hook_server_answers_a_storage_failure_with_its_line(home: Path, repo: Path) -> None:
    """A hook's refusal or storage failure is its one line, not an internal error."""
    handler = hookserver.Handler(home)
    try:
        with disks.read_only(home):
            a, b = socket.socketpair()
            hook = {"hook_event_name": "SessionStart", "cwd": str(repo), "session_id": "s1", "source": "startup"}
            a.sendall(hookserver.HELLO + b" claude-code\n" + json.dumps(hook).encode())
            a.shutdown(1)
            hookserver._serve_one(b, handler)
            error = a.recv(65536).decode().partition("\n")[0]
    finally:
        handler.close()
    assert "internal error" not in error and "cannot be written" in error and str(home) in error, error
