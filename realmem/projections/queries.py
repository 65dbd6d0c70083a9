"""Named reads of the projection tables (memories, pending, problems, missing_paths, counters,
urgency, embeddings, imported_files, stores, projection_state).

Callers outside ``realmem/projections/`` ask these functions instead of writing SQL, so a
table's columns and the queries on it are in one place.  Each function takes an open
connection and runs one statement; none writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence

import apsw

from realmem.events import types as ev
from realmem.events.types import Key
from realmem.projections.state import Memory
from realmem.projections.tables import MEMORY_COLS, STORE_WIDE_PATHS, memory_from_row, rows_by_key


def _marks(values: Sequence[object]) -> str:
    return ",".join("?" * len(values))


# -- pending (the queue of candidates waiting for the judge) --------------------------------

# The next try of a candidate marked failed: never due, so only a forced retry takes it up.
NEVER = "9999-12-31T23:59:59.999Z"


def queued_count(conn: apsw.Connection, project_key: str | None) -> int:
    """How many candidates are queued, failed ones aside, for a project (None: without one)."""
    return conn.execute("SELECT count(*) FROM pending WHERE project_key IS ? AND next_try < ?",
                        (project_key, NEVER)).fetchone()[0]


def failed(conn: apsw.Connection, project_key: str | None) -> list[str]:
    """The reasons of a project's queued candidates marked failed, oldest first."""
    return [r for (r,) in conn.execute("SELECT reason FROM pending WHERE project_key IS ? AND next_try >= ? "
                                       "ORDER BY queued_seq", (project_key, NEVER))]


def any_due_by(conn: apsw.Connection, moment: str) -> bool:
    """Whether some queued candidate's next try falls at or before ``moment`` (ISO UTC)."""
    return conn.execute("SELECT 1 FROM pending WHERE next_try <= ? LIMIT 1", (moment,)).fetchone() is not None


def pending_for(conn: apsw.Connection, project_key: str | None) -> list[tuple[str, str]]:
    """(candidate id, next try) of a project's queued candidates, oldest first."""
    return conn.execute("SELECT candidate_id, next_try FROM pending WHERE project_key IS ? "
                        "ORDER BY queued_seq", (project_key,)).fetchall()


def pending_ids(conn: apsw.Connection, project_key: str) -> list[str]:
    """Ids of the candidates queued under exactly ``project_key`` (never the None key)."""
    return [cid for (cid,) in conn.execute("SELECT candidate_id FROM pending WHERE project_key=?",
                                           (project_key,))]


def pending_due(conn: apsw.Connection, now: str, *, force: bool) -> list[tuple[str, str | None, str, int]]:
    """(candidate id, project key, cwd, attempts) of every candidate due at ``now`` (``force``:
    all of them), in queue order."""
    return conn.execute(
        "SELECT candidate_id, project_key, cwd, attempts FROM pending WHERE ? OR next_try <= ? "
        "ORDER BY queued_seq", (1 if force else 0, now)).fetchall()


def pending_payloads(conn: apsw.Connection) -> list[str]:
    """The JSON payload of every queued candidate."""
    return [payload for (payload,) in conn.execute("SELECT payload FROM pending")]


def pending_entry(conn: apsw.Connection, candidate_id: str) -> tuple[str, str] | None:
    """(payload, next try) of one queued candidate, or None once it is no longer queued."""
    return conn.execute("SELECT payload, next_try FROM pending WHERE candidate_id=?", (candidate_id,)).fetchone()


def pending_attempts(conn: apsw.Connection, candidate_id: str) -> int | None:
    """How many times a queued candidate was tried, or None when it is not queued."""
    row = conn.execute("SELECT attempts FROM pending WHERE candidate_id=?", (candidate_id,)).fetchone()
    return None if row is None else row[0]


def is_pending(conn: apsw.Connection, candidate_id: str) -> bool:
    return conn.execute("SELECT 1 FROM pending WHERE candidate_id=?", (candidate_id,)).fetchone() is not None


# -- problems (fact files that could not be read) ------------------------------------------

def problems(conn: apsw.Connection, stores: Sequence[str]) -> list[tuple[str, str, str, str, int | None]]:
    """(store, file, problem, message, line) of the problems recorded in ``stores``."""
    return conn.execute(f"SELECT store, file, problem, message, line FROM problems WHERE store IN "
                        f"({_marks(stores)})", tuple(stores)).fetchall()


def escape_messages(conn: apsw.Connection, stores: Sequence[str]) -> list[str]:
    """Messages of the store-escape problems (a symlink out of the store) in ``stores``."""
    return [m for (m,) in conn.execute("SELECT message FROM problems WHERE problem='store-escape' AND store IN "
                                       f"({_marks(stores)})", tuple(stores))]


def unreadable_count(conn: apsw.Connection) -> int:
    """How many problems, in any store, are not store escapes or merge conflicts (fact files
    that could not be read; conflicts are named apart, ``conflict_files``)."""
    return conn.execute("SELECT count(*) FROM problems WHERE problem NOT IN ('store-escape', 'conflict')").fetchone()[0]


def conflict_files(conn: apsw.Connection, stores: Sequence[str]) -> list[tuple[str, str]]:
    """(store, file) of the fact files in ``stores`` with unresolved merge conflict markers."""
    return conn.execute(f"SELECT store, file FROM problems WHERE problem='conflict' AND store IN ({_marks(stores)}) "
                        "ORDER BY store, file", tuple(stores)).fetchall()


# -- missing_paths -------------------------------------------------------------------------

def missing_count(conn: apsw.Connection, stores: Sequence[str]) -> int:
    """How many memories in ``stores`` point at a path that no longer exists."""
    return conn.execute(f"SELECT coalesce(sum(flagged), 0) FROM store_sizes WHERE store IN ({_marks(stores)})",
                        tuple(stores)).fetchone()[0]


def missing_keys(conn: apsw.Connection) -> set[tuple[str, str]]:
    """Keys of every memory with a missing path."""
    return {(s, i) for s, i in conn.execute("SELECT DISTINCT store, id FROM missing_paths")}


def missing_paths(conn: apsw.Connection, key: tuple[str, str]) -> dict[str, str | None]:
    """One memory's missing paths, each with its suggested new location (or None)."""
    return {p: s for p, s in conn.execute("SELECT path, suggested FROM missing_paths WHERE store=? AND id=?",
                                          tuple(key))}


def path_scoped_values(conn: apsw.Connection, stores: Sequence[str]) -> list[tuple[str, str, int, int]]:
    """(store, paths JSON, how many memories have it, the newest ``last_seq`` among them) of the
    memories in ``stores``, quarantined ones too, with a path other than the store root: one
    row per distinct value."""
    return conn.execute(f"SELECT store, paths, count(*), max(last_seq) FROM memories WHERE store IN ({_marks(stores)}) "
                        f"AND paths NOT IN ({_marks(STORE_WIDE_PATHS)}) GROUP BY store, paths",
                        (*stores, *STORE_WIDE_PATHS)).fetchall()


# A memory's missing paths as one comparable text: path, then suggestion (or none), sorted by path.
_PATH, _SUGGESTED, _NONE = "\x1d", "\x1f", "\x1e"


def _flags_text(flags: Mapping[str, str | None]) -> str:
    # Python's str order is UTF-8's byte order, which SQLite's ORDER BY path follows.
    return _PATH.join(p + _SUGGESTED + (_NONE if s is None else s) for p, s in sorted(flags.items()))


def flags_differ(conn: apsw.Connection, expected: Mapping[tuple[str, str], Mapping[str, str | None]]
                 ) -> list[tuple[str, str, str]]:
    """(store, id, paths JSON) of the memories whose recorded missing paths differ from
    ``expected`` for their (store, paths JSON), every value of ``path_scoped_values`` given.
    SQLite compares them, walking the values (one JSON parameter) and each value's memories
    through their index: no row per memory comes to Python."""
    values = json.dumps([(st, ps, _flags_text(f)) for (st, ps), f in expected.items()])
    return conn.execute(
        "WITH e AS MATERIALIZED (SELECT value ->> 0 AS store, value ->> 1 AS paths, value ->> 2 AS flags "
        "FROM json_each(?)) "
        "SELECT m.store, m.id, m.paths FROM e CROSS JOIN memories m ON m.store = e.store AND m.paths = e.paths "
        "WHERE e.flags != coalesce((SELECT group_concat(p.path || ? || coalesce(p.suggested, ?), ? ORDER BY p.path) "
        "FROM missing_paths p WHERE p.store = m.store AND p.id = m.id), '')",
        (values, _SUGGESTED, _NONE, _PATH)).fetchall()


def last_paths_check(conn: apsw.Connection) -> int:
    """The seq of the newest PathsChecked event (through the events' type index), 0 if none."""
    return conn.execute("SELECT max(seq) FROM events WHERE type=?", (ev.PathsChecked.TYPE,)).fetchone()[0] or 0


def suggested_path(conn: apsw.Connection, key: tuple[str, str], path: str) -> tuple[str | None] | None:
    """The row (suggested,) for one missing path of a memory, or None when it is not flagged."""
    return conn.execute("SELECT suggested FROM missing_paths WHERE store=? AND id=? AND path=?",
                        (*key, path)).fetchone()


# -- counters, urgency, memories -----------------------------------------------------------

def all_counters(conn: apsw.Connection) -> dict[tuple[str, str], tuple[int, int]]:
    """(used count, path inject count) of every memory that has counters."""
    return {(s, i): (u, n) for s, i, u, n in conn.execute(
        "SELECT store, id, used_count, path_inject_count FROM counters")}


def urgency_row(conn: apsw.Connection, key: tuple[str, str]) -> tuple[float, str, float, str, str] | None:
    """(score, probabilities JSON, confidence, source, valid_for) of a memory's urgency judgement."""
    return conn.execute("SELECT score, probabilities, confidence, source, valid_for FROM urgency "
                        "WHERE store=? AND id=?", tuple(key)).fetchone()


def urgency_score(conn: apsw.Connection, key: tuple[str, str]) -> tuple[str, float] | None:
    """(valid_for, score) of a memory's urgency judgement, or None when never judged."""
    return conn.execute("SELECT valid_for, score FROM urgency WHERE store=? AND id=?", tuple(key)).fetchone()


def urgency_scores(conn: apsw.Connection, keys: Sequence[Key]) -> dict[Key, tuple[str, float]]:
    """``urgency_score`` of each of ``keys`` judged so far, in one query per store."""
    return {Key(store, mem_id): (valid_for, score)
            for store, mem_id, valid_for, score in rows_by_key(conn, "valid_for, score", "urgency", keys)}


def memories_per_store(conn: apsw.Connection) -> dict[str, int]:
    return dict(conn.execute("SELECT store, count(*) FROM memories GROUP BY store").fetchall())


def store_counts(conn: apsw.Connection, store: str) -> tuple[int, int]:
    """(memories, quarantined memories) in one store, as the projector keeps them counted."""
    row = conn.execute("SELECT memories, quarantined FROM store_sizes WHERE store=?", (store,)).fetchone()
    return (row[0], row[1]) if row else (0, 0)


# -- memories ------------------------------------------------------------------------------

# MEMORY_COLS qualified by the memories alias ``m``, for the reads that join another table.
_M_COLS = ", ".join("m." + c.strip() for c in MEMORY_COLS.split(","))


def neighbour_rows(conn: apsw.Connection, keys: Sequence[tuple[str, str]]) -> dict[Key, tuple[str, list[str], str | None]]:
    """(caption, paths, quarantined) of each of ``keys`` that exists: what the gate's trace
    lists of its up to 254 neighbours, without reading their texts."""
    return {Key(store, mem_id): (caption, json.loads(paths), quarantined) for store, mem_id, caption, paths, quarantined
            in rows_by_key(conn, "caption, paths, quarantined", "memories", keys)}


def memory(conn: apsw.Connection, key: tuple[str, str]) -> Memory | None:
    row = conn.execute(f"SELECT {MEMORY_COLS} FROM memories WHERE store=? AND id=?", tuple(key)).fetchone()
    return memory_from_row(row) if row else None


def memories_in(conn: apsw.Connection, stores: Sequence[str], *, include_quarantined: bool = False) -> list[Memory]:
    q = f"SELECT {MEMORY_COLS} FROM memories WHERE store IN ({_marks(stores)})"
    if not include_quarantined:
        q += " AND quarantined IS NULL"
    return [memory_from_row(r) for r in conn.execute(q, tuple(stores))]


def memory_keys(conn: apsw.Connection, stores: Sequence[str], *, include_quarantined: bool) -> list[tuple[str, str]]:
    q = f"SELECT store, id FROM memories WHERE store IN ({_marks(stores)})"
    if not include_quarantined:
        q += " AND quarantined IS NULL"
    return conn.execute(q, tuple(stores)).fetchall()


def file_used_by_other(conn: apsw.Connection, store: str, file: str, memory_id: str) -> bool:
    """Whether another memory of ``store`` than ``memory_id`` has the file name ``file``."""
    return conn.execute("SELECT 1 FROM memories WHERE store=? AND file=? AND id!=?",
                        (store, file, memory_id)).fetchone() is not None


def file_names(conn: apsw.Connection, store: str, *, exclude: str | None = None) -> set[str]:
    """The file names of the memories of ``store``, but memory ``exclude``'s."""
    return {r[0] for r in conn.execute("SELECT file FROM memories WHERE store=? AND id IS NOT ?", (store, exclude))}


def used_counts(conn: apsw.Connection, keys: Sequence[Key]) -> dict[Key, int]:
    """The used count of each of ``keys`` that has one (one query, not one per memory)."""
    return {Key(store, mem_id): used for store, mem_id, used in rows_by_key(conn, "used_count", "counters", keys)}


def counters(conn: apsw.Connection, key: tuple[str, str]) -> tuple[int, int]:
    """(used count, path inject count) of one memory, (0, 0) when it has none."""
    row = conn.execute("SELECT used_count, path_inject_count FROM counters WHERE store=? AND id=?",
                       tuple(key)).fetchone()
    return (row[0], row[1]) if row else (0, 0)


def memories_with_urgency(conn: apsw.Connection) -> Iterator[tuple[Memory, str | None]]:
    """Every unquarantined memory with the ``valid_for`` of its urgency judgement (None: never
    judged), one row at a time: the worker's check of a large store never holds them all."""
    rows = conn.execute(f"SELECT {_M_COLS}, u.valid_for FROM memories m LEFT JOIN urgency u "
                        "ON u.store = m.store AND u.id = m.id WHERE m.quarantined IS NULL")
    for row in rows:
        yield memory_from_row(row[:-1]), row[-1]


def unembedded(conn: apsw.Connection, fingerprint: str) -> list[tuple[str, str]]:
    """(store, id) of the unquarantined memories whose embedding is not cached in the space
    ``fingerprint``: keys, not rows (a first embedding of 100k memories would hold every fact)."""
    return conn.execute("SELECT m.store, m.id FROM memories m LEFT JOIN embeddings e ON e.hash = m.hash "
                        "AND e.fingerprint = ? WHERE e.hash IS NULL AND m.quarantined IS NULL",
                        (fingerprint,)).fetchall()


def most_used_store_wide(conn: apsw.Connection, stores: Sequence[str], limit: int) -> list[tuple[str, str, str]]:
    """(store, id, caption) of the ``limit`` most used unquarantined memories in ``stores`` whose
    every path is a store root ('.' or '~'), then most recently updated: the prompt's captions.
    The used ones come from the counters first (a few sorted rows, not every memory of a 100k
    store), the never-used ones only when they are too few."""
    # The store-wide values compared whole, as the path-scoped reads do: a json_each per memory
    # slowed this query in a large store.
    where = (f"m.quarantined IS NULL AND m.store IN ({_marks(stores)}) "
             f"AND m.paths IN ({_marks(STORE_WIDE_PATHS)})")
    rows = conn.execute(
        f"SELECT m.store, m.id, m.caption FROM counters c JOIN memories m ON m.store = c.store AND m.id = c.id "
        f"WHERE c.used_count > 0 AND {where} ORDER BY c.used_count DESC, m.updated DESC, m.id LIMIT ?",
        (*stores, *STORE_WIDE_PATHS, limit)).fetchall()
    if len(rows) < limit:
        rows += conn.execute(
            f"SELECT m.store, m.id, m.caption FROM memories m LEFT JOIN counters c ON c.store = m.store AND c.id = m.id "
            f"WHERE coalesce(c.used_count, 0) = 0 AND {where} ORDER BY m.updated DESC, m.id LIMIT ?",
            (*stores, *STORE_WIDE_PATHS, limit - len(rows))).fetchall()
    return rows


def path_counts(conn: apsw.Connection, stores: Sequence[str]) -> list[tuple[str, int]]:
    """(paths JSON, how many unquarantined memories have it) for the memories in ``stores``
    with a path other than the store root: one row per distinct value, not per memory."""
    return conn.execute(f"SELECT paths, count(*) FROM memories WHERE quarantined IS NULL AND store IN "
                        f"({_marks(stores)}) AND paths NOT IN ({_marks(STORE_WIDE_PATHS)}) GROUP BY paths",
                        (*stores, *STORE_WIDE_PATHS)).fetchall()


def path_scoped_paths(conn: apsw.Connection, stores: Sequence[str]) -> Iterator[tuple[str, str, str]]:
    """(store, id, paths JSON) of the unquarantined memories in ``stores`` with a path other
    than the store root, one row at a time (the path-note index at 100k memories)."""
    yield from conn.execute(f"SELECT store, id, paths FROM memories WHERE quarantined IS NULL AND store IN "
                            f"({_marks(stores)}) AND paths NOT IN ({_marks(STORE_WIDE_PATHS)})",
                            (*stores, *STORE_WIDE_PATHS))


def path_scoped_oldest_update(conn: apsw.Connection, stores: Sequence[str]) -> tuple[float | None, list[str]]:
    """Of the unquarantined memories in ``stores`` with a path other than a store root: the
    oldest ``updated`` in UTC with a Z (as realmem writes them), as epoch seconds read by
    SQLite, and every distinct other value, for the caller to parse (Python reads more
    formats, and a time without a zone as local).  Parsing every memory's time in Python is
    slow in a large store."""
    where = (f"quarantined IS NULL AND store IN ({_marks(stores)}) "
             f"AND paths NOT IN ({_marks(STORE_WIDE_PATHS)})")
    args = (*stores, *STORE_WIDE_PATHS)
    (oldest,) = conn.execute(f"SELECT min(unixepoch(updated, 'subsec')) FROM memories WHERE {where} "
                             "AND substr(updated, -1) = 'Z'", args).fetchone()
    others = [r[0] for r in conn.execute(f"SELECT DISTINCT updated FROM memories WHERE {where} "
                                         "AND (substr(updated, -1) != 'Z' OR unixepoch(updated) IS NULL)", args)]
    return oldest, others


# -- imported_files, stores ------------------------------------------------------------

def imported_hash(conn: apsw.Connection, path: str) -> str | None:
    """The hash recorded when the context file at absolute ``path`` was imported."""
    row = conn.execute("SELECT hash FROM imported_files WHERE path=?", (path,)).fetchone()
    return None if row is None else row[0]


def imported_paths(conn: apsw.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT path FROM imported_files ORDER BY path")]


def store_locations(conn: apsw.Connection) -> list[tuple[str, str, str | None]]:
    """(store, dir, root) of every registered store."""
    return conn.execute("SELECT store, dir, root FROM stores").fetchall()



# -- observing fact files (write/observe.py's scan) ------------------------------------------

def file_stats(conn: apsw.Connection, store: str) -> dict[str, tuple[int, int]]:
    """File name -> (mtime_ns, size) as realmem last wrote or read each file of ``store``."""
    return {r[0]: (r[1], r[2]) for r in conn.execute("SELECT file, mtime_ns, size FROM file_stats WHERE store=?",
                                                     (store,))}


def file_stat(conn: apsw.Connection, store: str, file: str) -> tuple[int, int] | None:
    """One file's recorded (mtime_ns, size), None when none is."""
    row = conn.execute("SELECT mtime_ns, size FROM file_stats WHERE store=? AND file=?", (store, file)).fetchone()
    return (row[0], row[1]) if row else None


def file_stat_count(conn: apsw.Connection, store: str, *, exclude: str) -> int:
    """How many files of ``store`` have recorded stats, the entry named ``exclude`` not counted."""
    return conn.execute("SELECT count(*) FROM file_stats WHERE store=? AND file!=?", (store, exclude)).fetchone()[0]


def memory_files(conn: apsw.Connection, store: str) -> dict[str, str]:
    """Memory id -> file name of every memory of ``store`` (not their texts: a scan of a large
    store reads few files, and the texts were most of the time it took to start)."""
    return {r[0]: r[1] for r in conn.execute("SELECT id, file FROM memories WHERE store=?", (store,))}


def memory_text(conn: apsw.Connection, key: tuple[str, str]) -> str | None:
    """The file text a memory was last written or observed with."""
    row = conn.execute("SELECT text FROM memories WHERE store=? AND id=?", tuple(key)).fetchone()
    return row[0] if row else None


def files_with_hash(conn: apsw.Connection, store: str, content_hash: str) -> list[tuple[str, str]]:
    """(id, file name) of the memories of ``store`` with this content hash."""
    return conn.execute("SELECT id, file FROM memories WHERE store=? AND hash=?", (store, content_hash)).fetchall()


def memory_ids(conn: apsw.Connection, store: str) -> list[str]:
    """The ids of every memory of ``store``."""
    return [r[0] for r in conn.execute("SELECT id FROM memories WHERE store=?", (store,))]


def has_memories(conn: apsw.Connection, store: str) -> bool:
    return conn.execute("SELECT 1 FROM memories WHERE store=? LIMIT 1", (store,)).fetchone() is not None


def file_problems(conn: apsw.Connection, store: str) -> dict[str, tuple[str, str]]:
    """File name -> (digest, problem kind) of the problems recorded in ``store``."""
    return {r[0]: (r[1], r[2]) for r in conn.execute("SELECT file, digest, problem FROM problems WHERE store=?",
                                                     (store,))}


def store_registrations(conn: apsw.Connection) -> dict[str, tuple[str, str, str | None, str | None]]:
    """Store -> (kind, dir, project key, root) of every registered store."""
    return {r[0]: (r[1], r[2], r[3], r[4]) for r in conn.execute("SELECT store, kind, dir, project_key, root FROM stores")}


def caption_vectors(conn: apsw.Connection, fingerprint: str, dims: int, step: int, limit: int) -> list[tuple[str, bytes]]:
    """(caption, cached vector) of up to ``limit`` memories embedded in a space, every
    ``step``-th vector: the sample recall's floors are calibrated on (read/floor.py)."""
    return conn.execute(
        "SELECT min(m.caption), e.vector FROM embeddings e JOIN memories m ON m.hash = e.hash "
        "WHERE e.fingerprint = ? AND e.dims = ? AND e.rowid % ? = 0 GROUP BY e.rowid LIMIT ?",
        (fingerprint, dims, step, limit)).fetchall()


def space_size(conn: apsw.Connection, fingerprint: str) -> int:
    """Vectors cached in one embedding space."""
    return conn.execute("SELECT count(*) FROM embeddings WHERE fingerprint = ?", (fingerprint,)).fetchone()[0]


def space_vectors(conn: apsw.Connection, fingerprint: str, dims: int) -> tuple[int, Iterator[tuple[int, bytes]]]:
    """How many vectors of ``dims`` one space caches, and (rowid, vector) of each: the copy
    exact KNN scans (read/vectors.py) is filled from them without holding them all twice."""
    args = (fingerprint, dims)
    (n,) = conn.execute("SELECT count(*) FROM embeddings WHERE fingerprint = ? AND dims = ?", args).fetchone()
    return n, iter(conn.execute("SELECT rowid, vector FROM embeddings WHERE fingerprint = ? AND dims = ?", args))
