"""Missing paths: memory paths that no longer exist, with a suggested new location taken
from git's rename history (spec: "Missing paths"), and what prune-paths would drop (the
writes are write/prune.py)."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from realmem.stores import frames, paths
from realmem.stores.project import _git_dirs, _history_rewritten, read_head
from realmem.storage.fsutil import keep_in_cache, read_cache
from realmem.app import Realmem
from realmem.events import log
from realmem.events import types as ev
from realmem.read.pathnotes import WHOLE
from realmem.projections.state import Memory
from realmem.projections import index, queries
from realmem.storage import db


RENAMES_FILE = "git-renames.json"
CHECKED_KEY = "missing.checked"  # meta row per project: the digest of what its last clean check read
MAX_CACHED_ROOTS = 32


def renames(root: Path, limit: int = 2000, cache: Path | None = None) -> dict[str, str]:
    """old path -> newest path, from `git log` rename records (newest first).  With ``cache``
    (a directory), kept in its git-renames.json per project for the HEAD it was read at: a
    commit's history never changes, and `git log -M` over 2000 commits ran at every session
    start that found a missing path."""
    dirs = _git_dirs(root) if cache is not None else None
    head = read_head(root, dirs) if dirs is not None else None
    if cache is None or dirs is None or head is None or _history_rewritten(dirs.common):
        return _renames(root, limit) or {}
    path = cache / RENAMES_FILE
    known = read_cache(path)
    entry = known.get(str(root))
    if isinstance(entry, dict) and entry.get("head") == head and entry.get("limit") == limit \
            and isinstance(entry.get("renames"), dict):
        return entry["renames"]
    mapping = _renames(root, limit)
    if mapping is None:  # git failed or timed out: nothing to keep, ask again next time
        return {}
    keep_in_cache(path, known, str(root), {"head": head, "limit": limit, "renames": mapping}, MAX_CACHED_ROOTS)
    return mapping


def _renames(root: Path, limit: int) -> dict[str, str] | None:
    try:
        out = subprocess.run(["git", "log", f"-n{limit}", "--format=", "--name-status", "-M", "--diff-filter=R"],
                             cwd=root, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    mapping: dict[str, str] = {}
    for line in out.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0].startswith("R"):
            old, new = parts[1], parts[2]
            mapping.setdefault(old, mapping.get(new, new))  # follow later renames of the new name
    return mapping


def suggest(stored: str, moved: dict[str, str]) -> str | None:
    if stored in moved:
        return moved[stored]
    prefix = stored.rstrip("/") + "/"
    for old, new in moved.items():  # a renamed directory: every file under it moved alike
        if old.startswith(prefix):
            suffix = old[len(prefix):]
            if new.endswith("/" + suffix):
                return new[: -len(suffix) - 1]
    return None


def _project_memories(app: Realmem) -> list[Memory]:
    if app.project is None:
        return []
    return [m for m in app.memories([app.project.shared_store, app.project.personal_store], include_quarantined=True)
            if any(p not in WHOLE for p in m.paths)]


def find_missing(app: Realmem, m: Memory, known: dict[tuple[str, str], bool] | None = None,
                 home: Path | None = None) -> list[str]:
    """``m``'s paths that no longer exist; ``known`` remembers answers across memories, by store
    and stored path (many share a module or a glob such as ``**/migrations/*.sql``, and each
    answer can walk the whole tree); ``home``: the user's home, looked up once by a caller
    checking many memories."""
    return _gone(app, m.store, m.paths, {} if known is None else known, frames.user_home() if home is None else home)


def _gone(app: Realmem, store: str, stored: list[str], known: dict[tuple[str, str], bool], home: Path) -> list[str]:
    out = []
    for p in stored:
        if p in WHOLE:
            continue
        if (store, p) not in known:
            try:
                absolute = paths.to_absolute(p, kind=frames.frame(store), root=app.store_root(store),
                                             home=home)
            except paths.PathError:
                known[store, p] = False
            else:
                known[store, p] = paths.exists(absolute)
        if not known[store, p]:
            out.append(p)
    return out


def check(app: Realmem) -> int:
    """Flag missing paths (PathsChecked events where the flags changed); returns how many
    memories have missing paths.

    Session start runs this, so its cost follows the distinct paths values, not the memories:
    each value is resolved once (many memories share a module or a glob such as
    ``**/migrations/*.sql``, and a glob can walk the whole tree), and SQLite picks the memories
    whose recorded flags differ (reading every memory's paths and flags in Python is slow in a
    large store).

    That comparison is skipped when the last check found every flag as expected, or wrote
    them so, and nothing it depends on has moved since: the same answers from the files, the
    same memories per paths value with no newer change among them, and no PathsChecked since
    (in a large store the comparison was a good part of the first prompt's wait)."""
    if app.project is None:
        return 0
    moved: dict[str, str] | None = None
    known: dict[tuple[str, str], bool] = {}
    home = frames.user_home()  # once: looking it up costs more than checking a path
    stores = [app.project.shared_store, app.project.personal_store]
    expected: dict[tuple[str, str], dict[str, str | None]] = {}
    flagged = 0
    last_check = queries.last_paths_check(app.conn)
    values = queries.path_scoped_values(app.conn, stores)
    for store, stored, n, last in values:
        gone = _gone(app, store, json.loads(stored), known, home)
        if gone and moved is None:
            moved = renames(app.project.root, cache=app.home) if app.project.is_git else {}
        expected[store, stored] = flags = {p: suggest(p, moved or {}) for p in gone}
        flagged += n if flags else 0
    key = f"{CHECKED_KEY}:{stores[0]}"
    digest = _digest(last_check, values, expected)
    if index.meta_get(app.conn, key) == digest:
        return flagged
    events = [ev.PathsChecked(store, mem_id, dict(expected[store, stored]))
              for store, mem_id, stored in queries.flags_differ(app.conn, expected)]
    written = app.emit(events) if events else []
    with db.transaction(app.conn):
        if written:
            # What the tables hold now, the flags just written included; unless another write
            # came in between (its memories were not compared): the next check compares again.
            if log.last_seq(app.conn) != written[-1].seq:
                return flagged
            digest = _digest(queries.last_paths_check(app.conn), queries.path_scoped_values(app.conn, stores), expected)
        if digest is not None:
            index.meta_set(app.conn, key, digest)
    return flagged


def _digest(last_check: int, values: list[tuple[str, str, int, int]],
            expected: dict[tuple[str, str], dict[str, str | None]]) -> str | None:
    """What a check depends on, as one text; None for a paths value it did not resolve."""
    inputs: list[object] = [last_check]
    for store, stored, n, last in values:
        flags = expected.get((store, stored))
        if flags is None:
            return None
        inputs.append((store, stored, n, last, sorted(flags.items())))
    return hashlib.sha256(json.dumps(inputs).encode("utf-8")).hexdigest()


def prune_plan(app: Realmem) -> list[tuple[Memory, list[str], list[str]]]:
    """(memory, gone paths, kept paths) for every memory with paths that no longer exist."""
    plan = []
    known: dict[tuple[str, str], bool] = {}
    for m in _project_memories(app):
        gone = find_missing(app, m, known)
        if gone:
            plan.append((m, gone, [p for p in m.paths if p not in gone]))
    return plan
