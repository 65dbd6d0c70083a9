"""Background retry of queued candidates: the Huey ``retry`` task and the worker's loop run it.

A candidate is queued when the judge was down or the write lease busy; it is retried once its
``next_try`` passed (the backoff doubles per attempt up to queue.maxBackoffSeconds), each in
its own project, opened as a session start would open it.
"""

from __future__ import annotations

import json
from pathlib import Path

from realmem.app import Realmem
from realmem.config import Config
from realmem.events import log as evlog
from realmem.gate import availability
from realmem.gate.remember import back_off_or_drop, retry
from realmem.storage.lock import LockTimeout
from realmem.stores.project import detect, forget_cache
from realmem.write.attached import open_attached
from realmem.projections import queries


def retry_due(home: Path, *, force: bool = False) -> int:
    """Retry every project's due candidates (each opened in its own project); returns how many
    candidates were attempted.  A candidate whose project directory is gone, or now holds
    another project, is rescheduled with backoff and in the end dropped with the reason
    recorded, so it never comes back due at once (the worker would spin on it)."""
    cfg = Config(home)
    if availability.judge(cfg) is None and not _any_user_requested(home):
        return 0
    conn_app = Realmem(home, home)
    try:
        now = evlog.now_iso()
        rows = queries.pending_due(conn_app.conn, now, force=force)
        projects: dict[str | None, str] = {}
        gone: dict[str | None, tuple[str, list[tuple[str, int]]]] = {}
        forget_cache()  # a long-lived worker must see a first commit made since it started
        for cid, key, cwd, attempts in rows:
            if key in projects:
                continue
            reason = _project_gone(key, cwd)
            if reason is None:
                projects[key] = cwd
            else:
                gone.setdefault(key, (reason, []))[1].append((cid, attempts))
        for key, (reason, cands) in gone.items():
            back_off_or_drop(conn_app, key, reason, cands)
    finally:
        conn_app.close()
    attempted = 0
    for key, cwd in projects.items():
        try:
            app = open_attached(home, cwd)  # re-keys a path key that became a git key
        except LockTimeout:
            continue
        try:
            attempted += len(retry(app, force=force))
        finally:
            app.close()
    return attempted


def _project_gone(key: str | None, cwd: str) -> str | None:
    """Why a queued candidate's project cannot be opened now, or None if it can."""
    if not Path(cwd).is_dir():
        return f"its project directory {cwd} is gone"
    try:
        project = detect(Path(cwd))
    except Exception as exc:
        return f"its project at {cwd} cannot be read: {exc}"
    if project.key != key and project.path_key != key:  # the path key moves to the git key on open
        return f"{cwd} now holds another project ({project.key})"
    return None


def _any_user_requested(home: Path) -> bool:
    app = Realmem(home, home)
    try:
        for payload in queries.pending_payloads(app.conn):
            if json.loads(payload).get("user_requested"):
                return True
        return False
    finally:
        app.close()
