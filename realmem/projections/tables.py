"""Projection state <-> SQLite tables, plus the FTS5 index kept in step with memory rows.

``load`` reads the rows an event can touch; ``save`` writes them back (upsert or delete) and
re-indexes exactly the memories that changed.  Replay uses ``save`` with the whole state.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator, Sequence

import apsw

from realmem.events.types import Fields, Key
from realmem.projections import index
from realmem.projections.state import (
    Counter, Imported, Memory, Pending, Problem, State, Store, Urgency,
)

MEMORY_COLS = "store, id, caption, content, paths, created, updated, file, text, hash, source, quarantined, last_seq"


def memory_from_row(row: tuple) -> Memory:
    return Memory(row[0], row[1], Fields(row[2], row[3], json.loads(row[4]), row[5], row[6], row[7], row[8]),
                  row[9], row[10], row[11], row[12])


# The paths value of a store-wide memory (no specific path): json.dumps of ["."] or ["~"].
STORE_WIDE_PATHS = ('["."]', '["~"]')


def iter_memories(conn: apsw.Connection, stores: Sequence[str], *, path_scoped: bool = False,
                  include_quarantined: bool = False) -> Iterator[Memory]:
    """The memories of ``stores``, one row at a time (a large store's rows are never all held
    in memory at once); ``path_scoped``: leave out those whose only path is the store root."""
    q = f"SELECT {MEMORY_COLS} FROM memories WHERE store IN ({','.join('?' * len(stores))})"
    if not include_quarantined:
        q += " AND quarantined IS NULL"
    if path_scoped:
        q += f" AND paths NOT IN ({','.join('?' * len(STORE_WIDE_PATHS))})"
    for row in conn.execute(q, [*stores, *(STORE_WIDE_PATHS if path_scoped else ())]):
        yield memory_from_row(row)


def memories_by_key(conn: apsw.Connection, keys: Iterable[Key]) -> dict[Key, Memory]:
    """The rows of many memories, a query per 500 ids instead of one per memory (the gate
    reads up to gate.neighbors of them per candidate); keys that do not exist are absent."""
    wanted = set(keys)
    ids_ = sorted({k[1] for k in wanted})
    out: dict[Key, Memory] = {}
    for start in range(0, len(ids_), 500):
        chunk = ids_[start:start + 500]
        for row in conn.execute(f"SELECT {MEMORY_COLS} FROM memories WHERE id IN ({','.join('?' * len(chunk))})",
                                chunk):
            if (row[0], row[1]) in wanted:
                out[Key(row[0], row[1])] = memory_from_row(row)
    return out


def rows_by_key(conn: apsw.Connection, cols: str, table: str, keys: Sequence[Key]) -> Iterator[tuple]:
    """Rows of ``table`` (``store, id`` first, then ``cols``) for ``keys``: one query per store
    and 500 ids instead of one per key (a scan's batch loads 500 memories), each through the
    table's (store, id) primary key: ``id IN`` alone read the whole counters, urgency and
    missing_paths tables at every write."""
    by_store: dict[str, list[str]] = {}
    for store, mem_id in set(keys):
        by_store.setdefault(store, []).append(mem_id)
    for store, ids_ in by_store.items():
        ids_.sort()
        for start in range(0, len(ids_), 500):
            chunk = ids_[start:start + 500]
            yield from conn.execute(f"SELECT store, id, {cols} FROM {table} WHERE store=? AND id IN "
                                    f"({','.join('?' * len(chunk))})", (store, *chunk))


def load(conn: apsw.Connection, keys: Iterable[Key], small: Iterable[str] = ()) -> State:
    state = State()
    wanted = list(set(keys))
    if wanted:
        state.memories.update(memories_by_key(conn, wanted))
        found = list(state.memories)
        for k in found:
            state.counters[k] = Counter()
        # Counters and urgency of every key, not only the memories found: an absent memory's
        # (its file gone, ``state._observed``) wait there for its file to come back.
        for row in rows_by_key(conn, "used_count, path_inject_count", "counters", wanted):
            state.counters[(row[0], row[1])] = Counter(row[2], row[3])
        for row in rows_by_key(conn, "valid_for, score, probabilities, confidence, source", "urgency", wanted):
            state.urgency[(row[0], row[1])] = Urgency(row[2], row[3], json.loads(row[4]), row[5], row[6])
        for row in rows_by_key(conn, "path, suggested", "missing_paths", found):
            state.missing.setdefault((row[0], row[1]), {})[row[2]] = row[3]
    for name in small:
        _LOADERS[name](conn, state)
    return state


def _load_stores(conn: apsw.Connection, state: State) -> None:
    for row in conn.execute("SELECT store, kind, project_key, root, dir FROM stores"):
        state.stores[row[0]] = Store(*row)


def _load_pending(conn: apsw.Connection, state: State) -> None:
    for row in conn.execute("SELECT candidate_id, project_key, cwd, payload, reason, attempts, next_try, queued_seq FROM pending"):
        state.pending[row[0]] = Pending(row[0], row[1], row[2], json.loads(row[3]), row[4], row[5], row[6], row[7])


def _load_imported(conn: apsw.Connection, state: State) -> None:
    for row in conn.execute("SELECT path, project_key, hash, facts, time FROM imported_files"):
        state.imported[row[0]] = Imported(*row)


def _load_problems(conn: apsw.Connection, state: State) -> None:
    for row in conn.execute("SELECT store, file, problem, message, line, digest FROM problems"):
        state.problems[(row[0], row[1])] = Problem(*row)


_LOADERS = {"stores": _load_stores, "pending": _load_pending, "imported": _load_imported, "problems": _load_problems}


def save(conn: apsw.Connection, state: State, keys: Iterable[Key], small: Iterable[str] = ()) -> None:
    """Write the rows for ``keys`` (deleting those absent from state) and whole small tables,
    one statement per table for the whole batch (a scan saves 500 memories at a time)."""
    keys = list(dict.fromkeys(keys))
    prev = {(r[0], r[1]): r[2:] for r in rows_by_key(conn, "rowid, hash, paths, quarantined, caption",
                                                        "memories", keys)}
    was_flagged = {(r[0], r[1]) for r in rows_by_key(conn, "path", "missing_paths", list(prev))} if prev else set()
    gone = [k for k in keys if k not in state.memories]
    kept = [state.memories[k] for k in keys if k in state.memories]
    _count_changes(conn, state, keys, prev, was_flagged)
    for key in gone:
        if key in prev:
            index.drop(conn, prev[key][0])
    if gone:
        for table in ("memories", "missing_paths"):
            conn.executemany(f"DELETE FROM {table} WHERE store=? AND id=?", gone)
        # An absent memory keeps its counters and urgency rows (unchanged while it is absent).
        conn.executemany("DELETE FROM counters WHERE store=? AND id=?", [k for k in gone if k not in state.counters])
        conn.executemany("DELETE FROM urgency WHERE store=? AND id=?", [k for k in gone if k not in state.urgency])
    if kept:
        _upsert_memories(conn, state, kept, prev)
    for name in small:
        _SAVERS[name](conn, state)


def _sizes(state: State, keys: Iterable[Key]) -> dict[str, list[int]]:
    """Per store: [memories, quarantined, flagged] among ``keys`` as ``state`` holds them."""
    out: dict[str, list[int]] = {}
    for key in keys:
        m = state.memories.get(key)
        if m is not None:
            c = out.setdefault(key[0], [0, 0, 0])
            c[0] += 1
            c[1] += m.quarantined is not None
            c[2] += bool(state.missing.get(key))
    return out


def _count_changes(conn: apsw.Connection, state: State, keys: Sequence[Key], prev: dict[Key, tuple],
                   was_flagged: set[Key]) -> None:
    """Move the store_sizes counts by what saving ``keys`` changes (rows before: ``prev``)."""
    delta = _sizes(state, keys)
    for key, row in prev.items():
        c = delta.setdefault(key[0], [0, 0, 0])
        c[0] -= 1
        c[1] -= row[3] is not None
        c[2] -= key in was_flagged
    changed = [(s, *c) for s, c in delta.items() if any(c)]
    if changed:
        conn.executemany("INSERT INTO store_sizes VALUES (?,?,?,?) ON CONFLICT(store) DO UPDATE SET "
                         "memories=memories+excluded.memories, quarantined=quarantined+excluded.quarantined, "
                         "flagged=flagged+excluded.flagged", changed)
        # A store's last memory gone leaves no row, as a rebuild would.
        conn.executemany("DELETE FROM store_sizes WHERE store=? AND memories=0", [(s,) for s, c in delta.items() if c[0] < 0])


def _upsert_memories(conn: apsw.Connection, state: State, mems: list[Memory], prev: dict[Key, tuple]) -> None:
    rows = [(m.store, m.id, m.caption, m.content, json.dumps(m.paths, ensure_ascii=False), m.created, m.updated,
             m.file, m.text, m.hash, m.source, m.quarantined, m.last_seq) for m in mems]
    conn.executemany(
        f"INSERT INTO memories({MEMORY_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) "
        "ON CONFLICT(store, id) DO UPDATE SET caption=excluded.caption, content=excluded.content, "
        "paths=excluded.paths, created=excluded.created, updated=excluded.updated, file=excluded.file, "
        "text=excluded.text, hash=excluded.hash, source=excluded.source, quarantined=excluded.quarantined, "
        "last_seq=excluded.last_seq",
        rows,
    )
    new = [(m.store, m.id) for m in mems if (m.store, m.id) not in prev]
    rowids = {(r[0], r[1]): r[2] for r in rows_by_key(conn, "rowid", "memories", new)} if new else {}
    changed = []
    for m, row in zip(mems, rows):
        key = (m.store, m.id)
        p = prev.get(key)
        if p is None:
            changed.append((rowids[key], m, True))
        elif (p[1], p[2], p[3], p[4]) != (m.hash, row[4], m.quarantined, m.caption):
            changed.append((p[0], m, False))
    index.sync(conn, changed)
    conn.executemany(
        "INSERT INTO counters(store, id, used_count, path_inject_count) VALUES (?,?,?,?) "
        "ON CONFLICT(store, id) DO UPDATE SET used_count=excluded.used_count, path_inject_count=excluded.path_inject_count",
        [(m.store, m.id, c.used_count, c.path_inject_count)
         for m in mems for c in (state.counters.get((m.store, m.id), Counter()),)],
    )
    # A new memory has no urgency or missing-path rows yet (they go with the memory): only
    # the existing ones' are deleted before the current ones are written.
    old = [(m.store, m.id) for m in mems if (m.store, m.id) in prev]
    if old:
        conn.executemany("DELETE FROM urgency WHERE store=? AND id=?", old)
        conn.executemany("DELETE FROM missing_paths WHERE store=? AND id=?", old)
    urgent = [((m.store, m.id), u) for m in mems if (u := state.urgency.get((m.store, m.id))) is not None]
    if urgent:  # OR REPLACE: a memory back from absence still has its row
        conn.executemany("INSERT OR REPLACE INTO urgency VALUES (?,?,?,?,?,?,?)",
                         [(*k, u.valid_for, u.score, json.dumps(u.probabilities, sort_keys=True), u.confidence,
                           u.source) for k, u in urgent])
    missing = [(m.store, m.id, path, suggested) for m in mems
               for path, suggested in sorted((state.missing.get((m.store, m.id)) or {}).items())]
    if missing:
        conn.executemany("INSERT INTO missing_paths VALUES (?,?,?,?)", missing)


def save_all(conn: apsw.Connection, state: State) -> None:
    """Bulk-write a whole state into EMPTY tables (replay's fast path), then index it."""
    as_json: dict[tuple[str, ...], str] = {}  # most memories share a paths value ("." or a module)
    with _indexes_made_after(conn, "memories"):
        conn.executemany(
            f"INSERT INTO memories({MEMORY_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            # The fields read straight from the record, not through Memory's properties (a call
            # each, per row).
            [(m.store, m.id, f.caption, f.content,
              as_json.get(p) or as_json.setdefault(p, json.dumps(f.paths, ensure_ascii=False)), f.created, f.updated,
              f.file, f.text, m.hash, m.source, m.quarantined, m.last_seq)
             for m in state.memories.values() for f in (m.fields,) for p in (tuple(f.paths),)],
        )
    # Every key's, absent memories' included: the reducer keeps only those of memories that exist or are absent.
    conn.executemany("INSERT INTO counters VALUES (?,?,?,?)",
                     [(*k, c.used_count, c.path_inject_count) for k, c in state.counters.items()])
    conn.executemany("INSERT INTO urgency VALUES (?,?,?,?,?,?,?)",
                     [(*k, u.valid_for, u.score, json.dumps(u.probabilities, sort_keys=True), u.confidence, u.source)
                      for k, u in state.urgency.items()])
    conn.executemany("INSERT INTO missing_paths VALUES (?,?,?,?)",
                     [(*k, p, s) for k, flags in state.missing.items() if k in state.memories
                      for p, s in sorted(flags.items())])
    conn.executemany("INSERT INTO store_sizes VALUES (?,?,?,?)",
                     [(s, *c) for s, c in _sizes(state, state.memories).items()])
    for saver in _SAVERS.values():
        saver(conn, state)
    index.index_all(conn)


@contextlib.contextmanager
def _indexes_made_after(conn: apsw.Connection, table: str) -> Iterator[None]:
    """Drop the table's own indexes for a bulk insert and make them again from their stored
    definitions: one sort per index instead of a random b-tree insert per row and index.
    Inside the caller's transaction: an error rolls the drop back."""
    made = conn.execute("SELECT name, sql FROM sqlite_master WHERE type='index' AND tbl_name=? AND sql IS NOT NULL",
                        (table,)).fetchall()
    for name, _ in made:
        conn.execute(f'DROP INDEX "{name}"')
    yield
    for _, sql in made:
        conn.execute(sql)


def _save_stores(conn: apsw.Connection, state: State) -> None:
    conn.execute("DELETE FROM stores")
    conn.executemany("INSERT INTO stores VALUES (?,?,?,?,?)",
                     [(s.store, s.kind, s.project_key, s.root, s.dir) for s in state.stores.values()])


def _save_pending(conn: apsw.Connection, state: State) -> None:
    conn.execute("DELETE FROM pending")
    conn.executemany(
        "INSERT INTO pending VALUES (?,?,?,?,?,?,?,?)",
        [(p.candidate_id, p.project_key, p.cwd, json.dumps(p.payload, ensure_ascii=False, sort_keys=True),
          p.reason, p.attempts, p.next_try, p.queued_seq) for p in state.pending.values()],
    )


def _save_imported(conn: apsw.Connection, state: State) -> None:
    conn.execute("DELETE FROM imported_files")
    conn.executemany("INSERT INTO imported_files VALUES (?,?,?,?,?)",
                     [(i.path, i.project_key, i.hash, i.facts, i.time) for i in state.imported.values()])


def _save_problems(conn: apsw.Connection, state: State) -> None:
    conn.execute("DELETE FROM problems")
    conn.executemany("INSERT INTO problems VALUES (?,?,?,?,?,?)",
                     [(p.store, p.file, p.problem, p.message, p.line, p.digest) for p in state.problems.values()])


_SAVERS = {"stores": _save_stores, "pending": _save_pending, "imported": _save_imported, "problems": _save_problems}


def clear(conn: apsw.Connection) -> None:
    """Empty every projection table (replay starts from nothing)."""
    for table in ("memories", "counters", "urgency", "missing_paths", "store_sizes", "stores", "pending",
                  "imported_files", "problems"):
        conn.execute(f"DELETE FROM {table}")
    conn.execute("DELETE FROM meta WHERE key LIKE 'missing.checked:%'")  # what missing.check last read
    index.clear(conn)
