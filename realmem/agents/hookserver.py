"""`realmem hook-server`: the long-lived per-home process that answers agent hooks over a Unix
socket, so a hook (run after every tool call) costs a process start of a stdlib-only client
plus one warm request, not an import of realmem and a store open.

One per REALMEM_HOME, guarded like the worker: the server holds the ``hooks`` lease lock
while it runs; a second one (a start race) cannot take it and exits at once.  It exits after
``worker.idleSeconds`` without a request, or when its home is removed.  Requests are served
one at a time: each is a few milliseconds, and the stores' apps stay open between them.

Wire: see ``realmem.agents.hookclient`` (a hello line naming the agent and the hook's input
bytes in; an error line and the hook's output bytes back).  The agent (``realmem.agents.clients``)
says what each event means; the event is the input's ``hook_event_name``, a field all three
clients send.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from realmem import errors, logs
from realmem.read import pathnotes
from realmem.storage import db
from realmem.interface.entry import Entry
from realmem.agents import clients, sessions
from realmem.agents.hookclient import HELLO, Refused, check_socket_dir, socket_path
from realmem.config import Config
from realmem.storage.lock import single_instance, stop_requested
from realmem.logs import get_logger

log = get_logger("realmem.hooks")

LOCK = "hooks"
LOCK_WAIT_SECONDS = 2.0
ACCEPT_POLL_SECONDS = 1.0
READ_TIMEOUT_SECONDS = 10.0


class Handler:
    """The hook events, with one warm app and path-note index per working directory."""

    def __init__(self, home: Path) -> None:
        self.entry = Entry(home)
        self.indexes: dict[str, pathnotes.NoteIndex] = {}

    def handle(self, agent: str, hook: dict[str, Any]) -> dict[str, Any] | None:
        """The hook's output object (None: print nothing); ValueError for input it cannot use."""
        client = clients.CLIENTS.get(agent)
        if client is None:
            raise ValueError(f"unknown agent {agent!r}")
        event = hook.get("hook_event_name")
        if event not in client.events():
            raise ValueError(f"unsupported hook event {event!r} for {agent}")
        cwd = hook.get("cwd") or os.getcwd()
        if not isinstance(cwd, str) or not Path(cwd).is_dir():
            raise ValueError(f"no such directory: {cwd!r}")
        sid = hook.get("session_id") if isinstance(hook.get("session_id"), str) else None
        # Followed after a session start only: its scan may call for work; a tool's path notes never do.
        with self.entry.request(follow=event == client.start) as request:
            app = request.app(str(Path(cwd).resolve()), session=sessions.actor(agent, sid))
            index = self.indexes.setdefault(str(app.cwd), pathnotes.NoteIndex())
            return clients.handle(client, app, index, hook)

    def close(self) -> None:
        self.entry.close()


def _serve_one(conn: socket.socket, handler: Handler) -> None:
    conn.settimeout(READ_TIMEOUT_SECONDS)
    chunks = []
    while chunk := conn.recv(65536):
        chunks.append(chunk)
    data = b"".join(chunks)
    error, output = "", None
    try:
        head, _, body = data.partition(b"\n")
        if not head.startswith(HELLO + b" "):
            raise ValueError("not a realmem hook request (client and server versions differ?)")
        hook = json.loads(body or b"{}")
        if not isinstance(hook, dict):
            raise ValueError("the hook input is not a JSON object")
        output = handler.handle(head[len(HELLO) + 1:].decode("utf-8", "replace"), hook)
    except ValueError as exc:
        error = f"bad hook input: {exc}"
    except errors.Error as exc:  # refused, or a read-only, full or damaged home (``Entry.fault``): its line
        error = str(exc)
    except Exception as exc:  # a bug must not kill the server: the agent goes on without notes
        log.error("hooks.failed", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
        error = f"internal error: {type(exc).__name__}: {exc}"
    body = json.dumps(output, ensure_ascii=False).encode() if output is not None else b""
    conn.sendall(" ".join(error.split()).encode() + b"\n" + body)


def _socket_dir(home: Path, path: Path) -> None:
    """Create a deep home's runtime dir 0700; Refused for one another user made first (or
    left open): whoever can write it can swap our socket for theirs."""
    if path.parent != home:
        try:
            os.mkdir(path.parent, 0o700)
        except FileExistsError:
            pass
    check_socket_dir(str(home), str(path))


def _listen(path: Path) -> socket.socket:
    try:
        path.unlink()  # a stale socket of a dead server: we hold the lease, so no live one owns it
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the socket is born 0600: only this user's agents may ask
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    sock.listen(64)
    sock.settimeout(ACCEPT_POLL_SECONDS)
    return sock


def run(home: Path, *, idle_seconds: float | None = None) -> int:
    logs.configure()
    home = Path(home).resolve()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = Path(socket_path(str(home)))
    try:
        _socket_dir(home, path)
    except Refused as exc:
        log.error("hooks.refused", error=str(exc))
        sys.stderr.write(f"realmem hook-server: {exc}\n")
        return 1
    db.connect(home / "realmem.sqlite").close()  # migrates before the lock table is used
    lock = single_instance(home / "realmem.sqlite", LOCK, timeout=LOCK_WAIT_SECONDS)
    if lock is None:
        log.info("hooks.already_running")
        return 0
    stopping = stop_requested()
    idle = float(idle_seconds if idle_seconds is not None else Config(home)["worker.idleSeconds"])
    handler = Handler(home)
    sock = _listen(path)
    log.info("hooks.started", pid=os.getpid(), socket=str(path), idle_seconds=idle)
    last = time.monotonic()
    try:
        while not stopping():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                if time.monotonic() - last >= idle or not home.is_dir():
                    break
                continue
            with conn:
                try:
                    _serve_one(conn, handler)
                except OSError as exc:  # the client went away mid-request
                    log.warning("hooks.client_gone", error=str(exc))
            last = time.monotonic()
    finally:
        sock.close()
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        handler.close()
        lock.release()
        log.info("hooks.stopped", pid=os.getpid())
    return 0
