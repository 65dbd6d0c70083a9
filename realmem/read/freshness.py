"""Freshness: whether the code a memory is about changed after the memory was last written.

A memory whose specific paths were touched by commits after its ``updated`` time carries a
flag ("src/db changed in 7 commits since 2026-09-27; verify before relying on it") wherever
the agent sees it.  Project-wide facts (``.``, ``~``) are never flagged.

The path-note hook runs after every tool call, so git is asked once per HEAD, not per memory:
one ``git log --name-only`` is read into a map from every touched file and every directory
above it to the commits that touched it.  A memory's answer is then a few dict lookups (a glob
scans the touched files once per HEAD).  The map lives in the process (the rpc child keeps it
warm), keyed by the repository's HEAD, which is read from ``.git`` files without spawning git.
A new HEAD that descends from the old one only reads the new commits; a whole history is read
in a background thread (session start begins it), and the path-note hook never waits for it.

A commit that also carries the memory's own fact file is the commit that recorded the fact
with the code it describes, so it does not make the fact stale.
"""

from __future__ import annotations

import bisect
import functools
import subprocess
import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import apsw
import attrs

from realmem.stores import frames, paths
from realmem.read.escape import inline
from realmem.app import Realmem
from realmem.events.types import Key
from realmem.stores.project import GLOBAL, _git, _git_dirs, _git_env, _GitDirs, read_head
from realmem.projections.state import Memory
from realmem.words import count
from realmem.logs import get_logger
from realmem.projections import queries
from realmem.storage import db

logger = get_logger("realmem.read.freshness")

WHOLE = {".", "~"}
T = TypeVar("T")
MAX_COMMITS = 20_000  # a history scan reads at most this many commits; counts above it say "N+"
GIT_TIMEOUT = 30.0


@attrs.frozen
class Stale:
    """Commits after a memory's ``updated`` time that touched its paths."""

    paths: tuple[str, ...]  # the memory's own paths (its store's frame) that those commits touched
    commits: int
    since: str  # the memory's ``updated`` date, YYYY-MM-DD
    at_least: bool = False  # the scan stopped at MAX_COMMITS: there may be more
    message: str = attrs.field(init=False, eq=False)  # text(), rendered once: a note shows it on every touch

    def __attrs_post_init__(self) -> None:
        commits = count(self.commits, "commit")
        if self.at_least:  # "20000+ commits"
            commits = commits.replace(" ", "+ ", 1)
        object.__setattr__(self, "message", f"{', '.join(map(inline, self.paths))} changed in {commits} since {self.since}; "
                                            "verify before relying on it")

    def text(self) -> str:
        return self.message

    def to_json(self) -> dict[str, object]:
        return {"paths": list(self.paths), "commits": self.commits, "since": self.since, "at_least": self.at_least,
                "text": self.text()}


@attrs.frozen(cache_hash=True)  # the key of a history's result cache, looked up on every touch
class Subject:
    """What freshness needs of a memory, resolved once (path notes keep these, not memories)."""

    key: Key
    patterns: tuple[tuple[str, str], ...]  # (path in its store's frame, absolute pattern), specific ones
    updated: str
    own_file: str | None  # its fact file when it can be in the repository (project stores)

    @classmethod
    def of(cls, app: Realmem, m: Memory, home: Path | None = None) -> "Subject":
        return cls.of_row(app, (m.store, m.id), m.paths, m.updated, m.file, home)

    @classmethod
    def of_row(cls, app: Realmem, key: Key, stored: list[str], updated: str, file: str | None,
               home: Path | None = None, cache: dict[tuple[str, str], str | None] | None = None) -> "Subject":
        """From the columns a caller read, without a whole memory row (path notes); ``cache``:
        see ``resolve``."""
        home = home or frames.user_home()
        cache = {} if cache is None else cache
        pairs = tuple((p, a) for p in stored if p not in WHOLE and (a := resolve(app, key[0], p, home, cache)))
        # A file is a plain name in its store's directory: joined as text, as git's paths are.
        own = f"{app.store_dir(key[0])}/{file}" if pairs and key[0] != GLOBAL and file else None
        return cls(key, pairs, updated, own)


def resolve(app: Realmem, store: str, stored: str, home: Path, cache: dict[tuple[str, str], str | None]) -> str | None:
    """``stored`` (a path in ``store``'s frame) as an absolute pattern, None when it cannot be
    one.  ``cache`` keeps the answers for a caller that resolves the same paths again (the
    path-note index, until the stores change)."""
    if (store, stored) not in cache:
        found = frames.absolute(app, store, [stored], home)
        cache[(store, stored)] = found[0] if found else None
    return cache[(store, stored)]


# Bounded small: a pass over every memory (the first history's reach, `realmem stale`) cycles
# through all their times, and a large cache held them in the rpc child for no later hit.
@functools.lru_cache(maxsize=4096)
def epoch(iso: str) -> float | None:
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError):
        return None


# --- reading HEAD without spawning git ---------------------------------------------------------


# --- one repository's history at one HEAD -------------------------------------------------------


class History:
    """Commits of a repository reachable from ``head`` and not older than ``since``: for every
    touched file and every directory above it (absolute), the indexes of the commits that
    touched it."""

    def __init__(self, root: Path, head: str, since: float | None) -> None:
        self.root = root
        self.head = head
        self.since = since  # None: read to the root commit (or MAX_COMMITS)
        self.times: list[float] = []
        self.hashes: dict[str, int] = {}
        self.touch: dict[str, list[int]] = {}
        self.files: dict[str, None] = {}
        self.capped = False
        self.results: dict[Subject, Stale | None] = {}
        self.by_pattern: dict[str, tuple[list[int], list[float]]] = {}  # see commits_for

    def covers(self, t: float) -> bool:
        return self.capped or self.since is None or t >= self.since

    def read(self, rev_range: list[str], since: float | None) -> list[tuple[str, list[str]]] | None:
        """Commits of ``git log`` as (hash, parents) in log order, recorded into the maps."""
        args = ["git", "log", "-z", "--no-renames", "--name-only", "--format=%x1e%H %P %ct", f"-n{MAX_COMMITS}"]
        if since is not None:
            # A day of slack: --since stops at the first older commit, and clocks disagree.
            args.append(f"--since={int(since) - 86400}")
        try:
            out = subprocess.run([*args, *rev_range, "--"], cwd=self.root, capture_output=True, timeout=GIT_TIMEOUT,
                                 env=_git_env())
        except (OSError, subprocess.TimeoutExpired) as exc:
            logger.warning("freshness.git_log_failed", root=str(self.root), error=type(exc).__name__)
            return None
        if out.returncode != 0:
            logger.warning("freshness.git_log_failed", root=str(self.root), code=out.returncode)
            return None
        text = out.stdout.decode("utf-8", "surrogateescape")
        records = [r for r in text.split("\x1e") if r]
        if len(records) >= MAX_COMMITS:
            self.capped = True
        listed: list[tuple[str, list[str]]] = []
        base = str(self.root).rstrip("/")
        for rec in records:
            header, _, rest = rec.partition("\0")
            fields = header.split()
            if len(fields) < 2:
                continue
            sha, ct, parents = fields[0], fields[-1], fields[1:-1]
            listed.append((sha, parents))
            if sha in self.hashes:
                continue
            idx = len(self.times)
            self.hashes[sha] = idx
            self.times.append(float(ct))
            marked: set[str] = set()
            for rel in rest.lstrip("\n").split("\0"):
                rel = rel.strip("\n")
                if not rel:
                    continue
                path = f"{base}/{rel}"
                self.files[path] = None
                while path not in marked and len(path) > len(base):
                    marked.add(path)
                    self.touch.setdefault(path, []).append(idx)
                    path = path[: path.rfind("/")]
        return listed

    def advance(self, new_head: str) -> bool:
        """Move to a HEAD that descends from this one, reading only the new commits; False
        when it does not descend (rebase, amend, checkout of another branch)."""
        listed = self.read([f"{self.head}..{new_head}"], None)
        # The old HEAD is an ancestor exactly when it is a parent of one of the new commits;
        # nothing listed means the new HEAD lies behind the old one (a reset).
        if not listed or not any(self.head in parents for _, parents in listed):
            return False
        self.head = new_head
        self.results.clear()
        self.by_pattern.clear()
        return True

    def commits_for(self, pattern: str) -> tuple[list[int], list[float]]:
        """The commits that touched ``pattern``, newest first, with their times negated (for
        ``bisect``), kept per pattern: ``stale`` runs for every note a tool call may show."""
        hits = self.by_pattern.get(pattern)
        if hits is None:
            if paths.has_glob(pattern):
                found: dict[int, None] = {}
                for f in self.files:
                    if paths.matches(pattern, f):
                        found.update(dict.fromkeys(self.touch[f]))
                listed = list(found)
            else:
                listed = self.touch.get(pattern, [])
            newest = sorted(listed, key=self.times.__getitem__, reverse=True)
            hits = self.by_pattern[pattern] = (newest, [-self.times[c] for c in newest])
        return hits

    def stale(self, s: Subject) -> Stale | None:
        if s in self.results:
            return self.results[s]
        result = None
        updated = epoch(s.updated)
        if updated is not None:
            own = set(self.touch.get(s.own_file, ())) if s.own_file else set()
            changed: list[str] = []
            commits: set[int] = set()
            for stored, pattern in s.patterns:
                newest, negated = self.commits_for(pattern)
                hits = set(newest[:bisect.bisect_left(negated, -updated)]).difference(own)
                if hits:
                    changed.append(stored)
                    commits |= hits
            if commits:
                result = Stale(tuple(changed), len(commits), s.updated[:10], self.capped)
        self.results[s] = result
        return result


# --- the per-process cache -------------------------------------------------------------------------
#
# One history per repository root.  ``_lock`` guards the maps and every use of a History (the rpc
# child serves two threads); it is never held while a whole history is read: that runs in a
# builder thread that touches no database, so the path-note hook never waits for it.

_lock = threading.Lock()
_histories: dict[str, History] = {}
_dirs: dict[str, _GitDirs | None] = {}
_building: dict[str, threading.Thread] = {}
_failed: dict[str, str] = {}  # root -> the HEAD whose history git could not give (not retried)
_warming: set[threading.Thread] = set()  # warm-up threads yet to start a build


def _root(app: Realmem) -> Path | None:
    p = app.project
    return p.root if p is not None and p.is_git else None


def _head(root: Path) -> str | None:
    key = str(root)
    if key not in _dirs:
        _dirs[key] = _git_dirs(root)
    return read_head(root, _dirs[key])


def _current(root: Path, needed_since: float) -> History | None:
    """The history at the current HEAD reaching back to ``needed_since``, if one is at hand
    (a HEAD that moved forward is caught up here: only the new commits are read).  Under _lock."""
    key = str(root)
    h = _histories.get(key)
    if h is None or not h.covers(needed_since):
        return None
    head = _head(root)
    if head is None:
        return None
    if h.head == head or h.advance(head):
        return h
    del _histories[key]  # rebased, reset or another branch: read it again
    return None


def _start_build(app: Realmem, root: Path, needed_since: float, oldest: float | None = None) -> threading.Thread | None:
    """Start (or find) the builder thread for ``root``; ``oldest``: the oldest update, when the
    caller has just read it (a second read is a full scan of the memories at 100k).  Under _lock."""
    key = str(root)
    running = _building.get(key)
    if running is not None:
        return running
    head = _head(root)
    if head is None or _failed.get(key) == head:
        return None
    previous = _histories.get(key)
    if previous is not None and previous.since is not None:
        reach = previous.since
    else:
        reach = oldest if oldest is not None else _oldest_update(app)
    since = min(needed_since, reach)

    def build() -> None:
        h = History(root, head, since)
        ok = h.read([head], since) is not None
        with _lock:
            if ok:
                _histories[key] = h
            else:
                _failed[key] = head
            del _building[key]

    thread = _building[key] = threading.Thread(target=build, name=f"realmem-freshness-{root.name}", daemon=True)
    thread.start()
    return thread


def _with_history(app: Realmem, needed_since: float, wait: bool,
                  use: Callable[[History], T], oldest: float | None = None) -> T | None:
    """``use(history)`` under the lock, once a history reaching ``needed_since`` is at hand;
    None when there is none (not git, no commit, git failed) or, with ``wait`` False, while it
    is being read."""
    root = _root(app)
    if root is None:
        return None
    with _lock:
        h = _current(root, needed_since)
        if h is not None:
            return use(h)
        thread = _start_build(app, root, needed_since, oldest)
    if thread is None or not wait:
        return None
    thread.join()
    with _lock:
        h = _current(root, needed_since)
        return use(h) if h is not None else None


def wait_for_builds() -> None:
    """Let every history being read finish (tests, and the benchmark's warm-up), and those a
    warm-up thread is still to start."""
    with _lock:
        warming = list(_warming)
    for thread in warming:
        thread.join()
    with _lock:
        running = list(_building.values())
    for thread in running:
        thread.join()


def _oldest_update(app: Realmem, conn: apsw.Connection | None = None) -> float:
    """The oldest ``updated`` of the visible path-scoped memories: one history read then serves
    every memory, not just the few the first caller asked about.  ``conn``: a thread's own."""
    oldest, others = queries.path_scoped_oldest_update(conn or app.conn, app.visible_stores())
    times = [t for t in map(epoch, others) if t is not None] + ([oldest] if oldest is not None else [])
    return min(times, default=float("inf"))


def enabled(app: Realmem) -> bool:
    return bool(app.config["freshness.enabled"])


def check(app: Realmem, items: Iterable[Memory | Subject], *, wait: bool = True) -> dict[Key, Stale]:
    """The stale ones among ``items`` (memories without specific paths never are).  With
    ``wait`` False (the path-note hook) a history not read yet is read in the background and
    nothing is flagged meanwhile."""
    if not enabled(app):
        return {}
    home = frames.user_home()  # once: looking it up costs more than resolving a path
    subjects = [i if isinstance(i, Subject) else Subject.of(app, i, home) for i in items]
    subjects = [s for s in subjects if s.patterns]
    times = [t for t in (epoch(s.updated) for s in subjects) if t is not None]
    if not times:
        return {}

    def flags(h: History) -> dict[Key, Stale]:
        found = ((s.key, h.stale(s)) for s in subjects)
        return {k: v for k, v in found if v is not None}

    return _with_history(app, min(times), wait, flags) or {}


def warm(app: Realmem, *, background: bool = False) -> None:
    """Read the history now (session start), so the first path note does not wait for git.
    ``background``: all of it on a thread of its own, the scan of the memories for the oldest
    update included (which the first prompt waited for otherwise)."""
    if not enabled(app) or _root(app) is None:
        return
    if not background:
        _warm(app, app.conn, wait=True)
        return

    def run() -> None:
        try:
            conn = db.connect(app.db_path, migrate=False)  # an apsw connection serves one thread at a time
            try:
                _warm(app, conn, wait=False)
            finally:
                conn.close()
        except (apsw.Error, OSError) as exc:  # the first path note that needs the history reads it
            logger.info("freshness.warm_failed", error=str(exc))
        finally:
            with _lock:
                _warming.discard(thread)

    thread = threading.Thread(target=run, name="realmem-freshness-warm", daemon=True)
    with _lock:
        _warming.add(thread)
    thread.start()


def _warm(app: Realmem, conn: apsw.Connection, *, wait: bool) -> None:
    oldest = _oldest_update(app, conn)
    if oldest != float("inf"):
        _with_history(app, oldest, wait, lambda h: None, oldest)


def flag(app: Realmem, m: Memory) -> Stale | None:
    return check(app, [m]).get((m.store, m.id))


def flags_text(app: Realmem, items: Iterable[Memory | Subject], *, wait: bool = True) -> dict[Key, str]:
    """Key -> the flag line, for renderers."""
    return {k: s.text() for k, s in check(app, items, wait=wait).items()}


def stale_memories(app: Realmem) -> list[tuple[Memory, Stale]]:
    """Every visible stale memory, most commits first (`realmem stale`)."""
    mems = app.memories()
    found = check(app, mems)
    rows = [(m, found[(m.store, m.id)]) for m in mems if (m.store, m.id) in found]
    rows.sort(key=lambda ms: (-ms[1].commits, ms[0].caption))
    return rows


def forget_cache() -> None:
    """Drop every cached history (tests, the benchmark)."""
    wait_for_builds()
    with _lock:
        _histories.clear()
        _dirs.clear()
        _failed.clear()
