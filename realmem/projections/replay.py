"""Rebuild every projection from the event log; or prove the live state equals a rebuild.

Replay folds the whole log into an empty ``State`` with the same reducer live updates use,
writes the tables in one transaction, then makes the fact files match byte for byte.  It
never reads a fact file's content as input and never calls a service (vectors come from the
embeddings cache).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import apsw
import attrs

from realmem.gcpause import gc_paused
from realmem.errors import LeaseLost
from realmem.storage import db
from realmem.storage.lock import LeaseLock
from realmem.events import log
from realmem.events.types import Key
from realmem.storage.fsutil import read_regular
from realmem.projections import files, index, projector, tables
from realmem.projections.state import State, apply

if TYPE_CHECKING:
    from realmem.app import Realmem

Progress = Callable[[int, int], None]


@attrs.define
class ReplayReport:
    events: int
    memories: int
    seconds: float
    files_written: int = 0
    files_deleted: int = 0
    differences: list[str] = attrs.Factory(list)

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else float("inf")


def fold(conn: apsw.Connection, progress: Progress | None = None) -> tuple[State, int, dict[Key, set[str]]]:
    """Fold the whole log; returns the state, the event count, and every file name each
    memory had in each store.  Those keys are every memory that ever had a file (only an
    event carrying fields makes one), so the file pass walks them, not every key an event
    named: a recall hit's keys never need a file looked at."""
    state = State()
    names: dict[Key, set[str]] = {}
    total = log.last_seq(conn)
    n = 0
    for env in log.read(conn):
        apply(state, env)
        e = env.event
        fields = getattr(e, "fields", None)
        if fields is not None:
            names.setdefault((getattr(e, "to_store", None) or e.store_id, e.memory_id), set()).add(fields.file)
        n += 1
        if progress and n % 5000 == 0:
            progress(env.seq, total)
    return state, n, names


def _write_tables(conn: apsw.Connection, state: State, last: int, lock: LeaseLock | None = None) -> None:
    """One transaction; ``lock``: the write lease, renewed in it (it is long in a large
    store, and the renewal thread waits behind it)."""
    with db.transaction(conn):
        tables.clear(conn)
        tables.save_all(conn, state)
        index.prune_token_cache(conn)
        # The files' position is recorded by the caller once it has written them.
        conn.execute("INSERT INTO projection_state(name, seq) VALUES ('tables', ?) "
                     "ON CONFLICT(name) DO UPDATE SET seq=excluded.seq", (last,))
        if lock is not None and not lock.renew(conn):
            raise LeaseLost("this process lost the write lease before the replay wrote its tables; nothing "
                            "was changed, try again")


@gc_paused()
def replay(app: "Realmem", progress: Progress | None = None) -> ReplayReport:
    start = time.perf_counter()
    settled = time.time_ns() - projector.SETTLED_NS
    # Nothing is caught up on entry: the rebuild below makes the tables and files match the
    # whole log, and ``known_stamps`` trusts no file whose step may not have run.
    with app.write_lease(heal=False), db.Checkpoints(app.conn) as behind:
        state, n, names = fold(app.conn, progress)
        last = log.last_seq(app.conn)
        known = app.projector.known_stamps(state)
        # The tables' checkpoint (a large WAL after a large store's rebuild, most of it an fsync)
        # runs on a thread while the files are compared and written.
        with db.one_checkpoint(app.conn, behind):
            _write_tables(app.conn, state, last, app.lock)
        app.load_store_dirs()
        written, deleted = app.projector.rebuild(state, names, last, known=known, settled=settled)
    return ReplayReport(n, len(state.memories), time.perf_counter() - start, written, deleted)


_COMPARED = {
    "memories": "store, id, caption, content, paths, created, updated, file, text, hash, source, quarantined, last_seq",
    "counters": "store, id, used_count, path_inject_count",
    "urgency": "store, id, valid_for, score, probabilities, confidence, source",
    "missing_paths": "store, id, path, suggested",
    "store_sizes": "store, memories, quarantined, flagged",
    "stores": "store, kind, project_key, root, dir",
    "pending": "candidate_id, project_key, cwd, payload, reason, attempts, next_try, queued_seq",
    "imported_files": "path, project_key, hash, facts, time",
    "problems": "store, file, problem, message, line, digest",
}


def _rows(conn: apsw.Connection, table: str) -> list[tuple]:
    cols = _COMPARED[table]
    return conn.execute(f"SELECT {cols} FROM {table} ORDER BY {cols}").fetchall()


def _fts_rows(conn: apsw.Connection) -> list[tuple]:
    return conn.execute("SELECT m.store, m.id, f.caption, f.body FROM memories_fts f JOIN memories m "
                        "ON m.rowid = f.rowid ORDER BY m.store, m.id").fetchall()


@gc_paused()
def check(app: "Realmem", progress: Progress | None = None) -> ReplayReport:
    """Rebuild into a scratch database and compare it, and the files it implies, with the live
    state.  Touches nothing live; ``differences`` lists every mismatch."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="realmem-replay-") as tmp:
        scratch = db.connect(Path(tmp) / "scratch.sqlite")
        with db.transaction(scratch):
            scratch.executemany(
                "INSERT INTO events(seq, time, type, version, memory_id, store, pid, session, payload) VALUES (?,?,?,?,?,?,?,?,?)",
                app.conn.execute("SELECT seq, time, type, version, memory_id, store, pid, session, payload FROM events"),
            )
        state, n, names = fold(scratch, progress)
        _write_tables(scratch, state, log.last_seq(scratch))
        diffs: list[str] = []
        for table in _COMPARED:
            live, built = set(_rows(app.conn, table)), set(_rows(scratch, table))
            for row in sorted(live - built, key=repr)[:20]:
                diffs.append(f"{table}: live row not reproduced by replay: {row[:3]}")
            for row in sorted(built - live, key=repr)[:20]:
                diffs.append(f"{table}: replay row missing from live state: {row[:3]}")
        if _fts_rows(app.conn) != _fts_rows(scratch):
            diffs.append("memories_fts: the live index differs from a rebuild (run `realmem reindex`)")
        scratch.close()
    for key, mem in sorted(state.memories.items()):
        if not app.files_reachable(mem.store):
            continue
        path = app.store_dir(mem.store) / mem.file
        try:
            on_disk = read_regular(path).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            diffs.append(f"file missing: {path}")
            continue
        if on_disk != mem.text:
            diffs.append(f"file differs from the log: {path}")
        for name in app.projector.old_names(names, mem):
            if app.projector.holds(mem.store, name, mem.id):
                diffs.append(f"file left behind by a rename: {app.store_dir(mem.store) / name} (now {mem.file})")
    report = ReplayReport(n, len(state.memories), time.perf_counter() - start, differences=diffs)
    return report
