"""`realmem repair`: a damaged realmem.sqlite moved aside and rebuilt from the fact files.

Every memory's text lives in its fact file, id included, so a fresh database that registers
each known project's stores (``personal/<key>/project.json`` names its root) and scans them
gets every memory back under its own id.  What lived only in the database is lost: the event
log (the personal history of edits, forgets, decisions and judge traces), the use counters,
urgency judgements, approvals of quarantined memories and candidates queued but not yet
stored.  Embeddings are recomputed by the worker (queue.sqlite only carries wake-ups, and a
starting worker re-derives its work from the new log).  The damaged file is kept beside.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import apsw
import attrs

from realmem.app import Realmem
from realmem.errors import RealmemError
from realmem.logs import get_logger
from realmem.projections import queries
from realmem.storage import db, fsutil
from realmem.stores.project import store_kind
from realmem.write import observe

logger = get_logger("realmem")

LOST = ("the event log (personal history: edits, forgets, decisions, judge traces), use counters, "
        "urgency judgements, approvals of quarantined memories and queued candidates not yet stored")


@attrs.define
class Repaired:
    aside: Path
    problem: str
    memories: dict[str, int]  # kind (shared, personal, global) -> memories rebuilt
    projects: list[Path]
    missing: list[Path]  # roots of known projects that are gone: their personal files wait


def damage(path: Path) -> str | None:
    """Why the database at ``path`` is damaged, or None when it reads whole (quick_check)."""
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            rows = conn.execute("PRAGMA quick_check").fetchall()
        finally:
            conn.close()
    except db.DAMAGED_ERRORS as exc:
        return str(exc)
    if [tuple(r) for r in rows] == [("ok",)]:
        return None
    return "; ".join(str(r[0]) for r in rows[:3])


def known_roots(home: Path) -> list[Path]:
    """The project roots REALMEM_HOME has seen: each personal store's project.json."""
    roots = []
    for f in sorted((home / "personal").glob("*/project.json")):
        try:
            root = json.loads(f.read_text(encoding="utf-8"))["root"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(root, str):
            roots.append(Path(root))
    return roots


def repair(home: Path, cwd: Path) -> Repaired:
    """Move the damaged database aside and rebuild from the fact files of every known project
    (and ``cwd``'s).  Refused when the database reads whole: a rebuild would lose its log."""
    path = home / "realmem.sqlite"
    if not path.exists():
        raise RealmemError(f"{path} does not exist: nothing to repair")
    problem = damage(path)
    if problem is None:
        raise RealmemError(f"{path} reads whole (quick_check: ok), nothing to repair; "
                           "`realmem replay` rebuilds the tables and files from its log")
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    for suffix in ("", "-wal", "-shm", "-journal"):  # the WAL holds its latest pages: kept with it
        try:
            os.replace(f"{path}{suffix}", f"{aside}{suffix}")
        except FileNotFoundError:
            pass
    fsutil.fsync_dir(home)
    logger.warning("db.repaired", path=str(path), moved_to=str(aside), problem=problem)
    roots = [r for r in dict.fromkeys([*known_roots(home), cwd.resolve()])]
    projects = [r for r in roots if r.is_dir()]
    for root in projects:
        with observe.attach(Realmem.open(home, root), scan=False) as app:
            observe.scan_stores(app, full=True)
    counts: dict[str, int] = {}
    with Realmem.open(home, cwd) as app:
        for store, n in queries.memories_per_store(app.conn).items():
            counts[store_kind(store)] = counts.get(store_kind(store), 0) + n
    return Repaired(aside, problem, counts, projects, [r for r in roots if not r.is_dir()])
