"""The Huey transport between realmem processes and the background worker.

Huey (``SqliteHuey`` at ``REALMEM_HOME/queue.sqlite``) only carries wake-up calls: "embed
what lacks a vector", "judge stale urgencies", "retry due candidates".  Each task takes the
home directory and re-derives its work from the database, so a lost, duplicated or deleted
task costs nothing: Huey is the transport, not the truth, and deleting its database loses
nothing, because a starting worker re-enqueues unfinished work from the event log.

One worker per REALMEM_HOME: the worker holds the ``worker`` LeaseLock while it runs;
``ensure_worker`` starts one (detached) only when no live holder exists, and a worker that
cannot take the lock exits at once.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from realmem.storage import fsutil
from realmem.logs import get_logger
from realmem.storage.lock import HOST, LeaseLock, pid_alive

if TYPE_CHECKING:
    from huey import SqliteHuey

    from realmem.app import Realmem

log = get_logger("realmem.queue")

WORKER_LOCK = "worker"
QUEUE_NAME = "realmem"  # Huey's queue name: the rows of its task table that are ours
SPAWN_GUARD_SECONDS = 5.0
_HUEYS: dict[str, tuple["SqliteHuey", dict[str, Any]]] = {}
# Huey reads queue.sqlite through the stdlib's SQLite, realmem through apsw's own copy.  Two
# copies of SQLite in one process must never have the same file open at once: closing one
# drops the POSIX locks the other holds, and another process may then reset the -shm file
# under its map (SIGBUS; sqlite.org/howtocorrupt.html, 2.2.1).  So once this process has a
# Huey for a home it counts through it; before that, apsw opens the file only under this
# lock, which creating a Huey also takes.
_QUEUE_LOCK = threading.Lock()


def queue_path(home: Path) -> Path:
    return Path(home) / "queue.sqlite"


def huey_for(home: Path) -> tuple["SqliteHuey", dict[str, Any]]:
    """The home's Huey instance and its three tasks (same names in every process)."""
    key = str(Path(home).resolve())
    with _QUEUE_LOCK:
        return _HUEYS[key] if key in _HUEYS else _new_huey(key)


def _new_huey(key: str) -> tuple["SqliteHuey", dict[str, Any]]:
    """Under _QUEUE_LOCK."""
    from huey import SqliteHuey
    fsutil.private_file(queue_path(Path(key)))  # before SQLite creates it with the umask's mode
    h = SqliteHuey(name=QUEUE_NAME, filename=str(queue_path(Path(key))), results=False,
                   store_none=False, utc=True)

    # The tasks' modules load the endpoint clients (httpx) and the gate: imported when a
    # task runs, so a front end that only sends wake-ups (`realmem status`) starts fast.
    def embed(home: str) -> None:
        from realmem.jobs.embed import run_embed  # lazy: see above
        run_embed(Path(home))

    def urgency(home: str) -> None:
        from realmem.jobs.urgency import run_urgency  # lazy: see above
        run_urgency(Path(home))

    def retry(home: str) -> None:
        from realmem.jobs.retry import retry_due  # lazy: see above
        retry_due(Path(home))

    tasks = {name: h.task(name=name)(fn) for name, fn in
             (("embed", embed), ("urgency", urgency), ("retry", retry))}
    _HUEYS[key] = (h, tasks)
    return _HUEYS[key]


def is_damaged(exc: BaseException) -> bool:
    """Whether Huey's error means its database file is damaged ("file is not a database",
    "database disk image is malformed"), not merely busy or locked."""
    import sqlite3  # Huey's driver, loaded with Huey already
    return isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)


def open_checked(home: Path) -> "SqliteHuey":
    """The home's Huey, its database checked (``quick_check``): a damaged queue.sqlite is moved
    aside and a new one made.  It only ever held wake-ups, so nothing is lost once the caller
    re-derives the work from the log (the worker does, at start)."""
    try:
        huey, _ = huey_for(home)
        rows = huey.storage.sql("PRAGMA quick_check", results=True)
        if [tuple(r) for r in rows] == [("ok",)]:
            return huey
        problem = "; ".join(str(r[0]) for r in rows[:3])
    except Exception as exc:
        if not is_damaged(exc):
            raise
        problem = f"{type(exc).__name__}: {exc}"
    set_aside(home, problem)
    return huey_for(home)[0]


def set_aside(home: Path, problem: str) -> Path:
    """Move a damaged queue.sqlite (and its -wal, -shm) aside, kept for a look, and forget this
    process's Huey on it; the next ``huey_for`` makes a new database.  Returns where it went."""
    key = str(Path(home).resolve())
    path = queue_path(Path(key))
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    with _QUEUE_LOCK:
        old = _HUEYS.pop(key, None)
        if old is not None:
            try:
                old[0].storage.close()
            except Exception:  # noqa: BLE001 (a damaged file may fail even this)
                pass
        for suffix in ("", "-wal", "-shm"):
            try:
                os.replace(f"{path}{suffix}", f"{aside}{suffix}")
            except FileNotFoundError:
                pass
        fsutil.fsync_dir(path.parent)
    log.warning("queue.damaged", path=str(path), moved_to=str(aside), problem=problem,
                reason="queue.sqlite only carries wake-ups: a new one is made and the work re-derived from the log")
    return aside


class EnqueueFailed(Exception):
    """A wake-up could not be sent (the queue database is unwritable or locked)."""


def enqueue(home: Path, name: str) -> bool:
    """Send the wake-up ``name`` (embed, urgency or retry); False when it could not be sent."""
    try:
        _, tasks = huey_for(home)
        tasks[name](str(Path(home).resolve()))
        return True
    except Exception as exc:  # best effort: the worker re-derives lost work at start
        log.warning("queue.enqueue_failed", task=name, error=f"{type(exc).__name__}: {exc}")
        return False


def enqueue_embed(app: "Realmem") -> bool:
    return enqueue(app.home, "embed")


def enqueue_urgency(app: "Realmem") -> bool:
    return enqueue(app.home, "urgency")


def enqueue_retry(app: "Realmem") -> bool:
    return enqueue(app.home, "retry")


def pending_tasks(home: Path) -> int:
    """Wake-ups waiting in the queue: through this process's Huey when it has one (see
    _QUEUE_LOCK), else straight from Huey's SQLite table (what its ``pending_count`` runs),
    read-only: importing Huey would slow `realmem status`."""
    key = str(Path(home).resolve())
    with _QUEUE_LOCK:  # see _QUEUE_LOCK: never beside a Huey of this process on the same file
        huey = _HUEYS.get(key)
        if huey is None:
            return _count_readonly(queue_path(Path(key)))
    try:
        return int(huey[0].pending_count())
    except Exception:  # a count for status: never fail it
        return 0


def _count_readonly(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            conn.set_busy_timeout(1000)
            return int(conn.execute("SELECT count(id) FROM task WHERE queue=?", (QUEUE_NAME,)).fetchone()[0])
        finally:
            conn.close()
    except apsw.Error:
        return 0


def status_for(home: Path) -> dict[str, Any]:
    db_path = Path(home) / "realmem.sqlite"
    alive, pid = False, None
    if db_path.exists():
        try:
            holder = LeaseLock(db_path, WORKER_LOCK).holder()
        except Exception:
            holder = None
        if holder is not None:
            fresh = holder["heartbeat_age"] <= holder["ttl"]
            same_host_dead = holder["host"] == HOST and not pid_alive(int(holder["pid"]))
            if fresh and not same_host_dead:
                alive, pid = True, int(holder["pid"])
    return {"alive": alive, "pid": pid, "pending_tasks": pending_tasks(home)}


def worker_status(app: "Realmem") -> dict[str, Any]:
    """{"alive", "pid", "pending_tasks"} for this REALMEM_HOME."""
    return status_for(app.home)


def worker_command(home: Path) -> list[str]:
    return [sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "worker"]


def ensure_worker(app: "Realmem") -> dict[str, Any]:
    """Start a detached worker when none is alive for this home; returns the status (with
    ``started`` set when this call spawned one).  A second worker started by a race exits at
    once because it cannot take the worker lock."""
    st = worker_status(app)
    if st["alive"]:
        return {**st, "started": False}
    guard = Path(app.home) / "worker.spawn"
    try:
        if time.time() - guard.stat().st_mtime < SPAWN_GUARD_SECONDS:
            return {**st, "started": False}
    except OSError:
        pass
    try:
        guard.touch()
        import subprocess  # lazily: only a spawn needs it, and status imports this module
        log_file = open(Path(app.home) / "worker.log", "ab")  # noqa: SIM115 (handed to the child)
        try:
            proc = subprocess.Popen(worker_command(app.home), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=log_file, start_new_session=True, close_fds=True,
                                    env={**os.environ, "REALMEM_HOME": str(app.home)})
        finally:
            log_file.close()
    except OSError as exc:
        log.warning("worker.spawn_failed", error=str(exc))
        return {**st, "started": False}
    import threading
    threading.Thread(target=proc.wait, name="realmem-worker-reaper", daemon=True).start()  # no zombie
    log.info("worker.spawned", pid=proc.pid)
    return {"alive": True, "pid": proc.pid, "pending_tasks": st["pending_tasks"], "started": True}
