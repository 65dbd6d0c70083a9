"""Search indexes: FTS5 (BM25) over memory rows, and the sqlite-vec vec0 cosine index over
the embeddings cache.

The FTS5 index is keyed by ``memories.rowid``.  The vector index is keyed by the embeddings
cache's rowid: it indexes cached vectors, not memories, so editing, moving or replaying
memories never touches it; a search joins vector -> content hash -> memories.  A memory
whose embedding is not cached yet simply has no vector until the worker embeds it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
import struct
from collections.abc import Iterator

import apsw

from realmem.storage import db
from realmem.projections.state import Memory
from realmem.projections.tokenize import index_text

VEC_TABLE = "memories_vec"
BIN_TABLE = "memories_bin"  # sign-quantized copy: a fast hamming prefilter for large spaces
CHUNK = 4096  # vec0 rows per chunk; larger chunks scan faster
FTS_AUTOMERGE = 4  # FTS5's default
FTS_HASHSIZE = 1024 * 1024  # FTS5's default: pending terms kept in memory before a segment is written
FTS_LOAD_HASHSIZE = 32 * 1024 * 1024  # while a whole index is loaded


def _token_key(caption: str, body: str) -> str:
    return hashlib.sha256(f"{caption}\0{body}".encode("utf-8", "surrogatepass")).hexdigest()


def sync(conn: apsw.Connection, rows: list[tuple[int, Memory, bool]]) -> None:
    """Index each (rowid, memory, new) (``new``: the row was just inserted, nothing to
    replace), through the token cache: one statement per table for the batch, and only the
    texts the cache does not hold are tokenized.  Paths are indexed so a query "db
    migrations" finds a fact about db/migrations."""
    conn.executemany("DELETE FROM memories_fts WHERE rowid=?", [(rowid,) for rowid, _, new in rows if not new])
    wanted = {}
    for rowid, m, _ in rows:
        if m.quarantined is None:
            body = m.content + "\n" + " ".join(m.paths)
            wanted[rowid] = (_token_key(m.caption, body), m.caption, body)
    later = _unwritten.get(conn)  # a scan's batches: the tokens go to the cache at its end
    needed = {k for k, _, _ in wanted.values()}
    cached: dict[str, tuple[str, str]] = {k: later[k] for k in needed if k in later} if later else {}
    keys = sorted(needed - cached.keys())
    for start in range(0, len(keys), 500):
        chunk = keys[start:start + 500]
        for k, c, b in conn.execute(f"SELECT key, caption, body FROM fts_tokens WHERE key IN ({','.join('?' * len(chunk))})",
                                    chunk):
            cached[k] = (c, b)
    fresh = {}
    for key, caption, body in wanted.values():
        if key not in cached:
            cached[key] = fresh[key] = (index_text(caption), index_text(body))
    if later is None:
        _cache_tokens(conn, fresh)
    else:
        later.update(fresh)
    conn.executemany("INSERT INTO memories_fts(rowid, caption, body) VALUES (?,?,?)",
                     [(rowid, *cached[key]) for rowid, (key, _, _) in wanted.items()])


_unwritten: dict[apsw.Connection, dict[str, tuple[str, str]]] = {}


@contextlib.contextmanager
def tokens_cached_at_end(conn: apsw.Connection) -> Iterator[None]:
    """The tokens that ``sync`` makes inside (a scan's batches) go to the cache in one
    transaction at the end.  The cache is keyed by a hash, so each batch's inserts touched
    most pages of its key index, and each commit wrote them to the WAL again.  It is only a
    cache: texts whose tokens a crash kept from it are tokenized again by the next replay."""
    if conn in _unwritten:  # nested: the outer one writes them
        yield
        return
    _unwritten[conn] = {}
    try:
        yield
    finally:
        fresh = _unwritten.pop(conn)
    if fresh:
        with db.transaction(conn):
            _cache_tokens(conn, fresh)


def _cache_tokens(conn: apsw.Connection, tokens: dict[str, tuple[str, str]]) -> None:
    """Put token key -> (caption, body) tokens in the cache."""
    conn.executemany("INSERT OR REPLACE INTO fts_tokens VALUES (?,?,?)", [(k, *t) for k, t in tokens.items()])


def drop(conn: apsw.Connection, rowid: int) -> None:
    conn.execute("DELETE FROM memories_fts WHERE rowid=?", (rowid,))


def clear(conn: apsw.Connection) -> None:
    """Empty the FTS5 index by dropping it and making it again from its stored definition:
    DELETE FROM removes one row at a time, tokenizing each again."""
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE type='table' AND name='memories_fts'").fetchone()
    conn.execute("DROP TABLE memories_fts")
    conn.execute(sql)


# --- vectors -----------------------------------------------------------------------------

def meta_get(conn: apsw.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
    return row[0] if row else None


def meta_set(conn: apsw.Connection, key: str, value: str | None) -> None:
    if value is None:
        conn.execute("DELETE FROM meta WHERE key=?", (key,))
    else:
        conn.execute("INSERT INTO meta(key, value) VALUES (?,?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                     (key, value))


VECTOR_STAMP = "vec.generation"


def touch_vectors(conn: apsw.Connection) -> None:
    """Stamp a change of the active space's vectors, for copies of them kept in memory
    (``read/vectors.py``): a random stamp, so a rolled-back change leaves none a copy has seen."""
    meta_set(conn, VECTOR_STAMP, secrets.token_hex(8))


def vector_stamp(conn: apsw.Connection) -> str | None:
    """The stamp ``touch_vectors`` left last; None in a database written before the stamps."""
    return meta_get(conn, VECTOR_STAMP)


def vec_dims(conn: apsw.Connection) -> int:
    v = meta_get(conn, "vec.dims")
    return int(v) if v else 0


def active_fingerprint(conn: apsw.Connection) -> str | None:
    return meta_get(conn, "vec.fingerprint")


def pack(vector: list[float]) -> bytes:
    return struct.pack(f"{len(vector)}f", *vector)


def unpack(blob: bytes) -> list[float]:
    return list(struct.unpack(f"{len(blob) // 4}f", blob))


def set_space(conn: apsw.Connection, fingerprint: str, dims: int) -> bool:
    """Make ``fingerprint`` the active embedding space.  A different space clears the cache
    and the vector index (spec: changing the embedding API clears it).  True if it changed."""
    if active_fingerprint(conn) == fingerprint and vec_dims(conn) == dims:
        return False
    conn.execute(f"DROP TABLE IF EXISTS {VEC_TABLE}")
    conn.execute(f"DROP TABLE IF EXISTS {BIN_TABLE}")
    conn.execute("DELETE FROM embeddings WHERE fingerprint != ?", (fingerprint,))
    conn.execute(f"CREATE VIRTUAL TABLE {VEC_TABLE} USING vec0(embedding float[{dims}] distance_metric=cosine, "
                 f"chunk_size={CHUNK})")
    if dims % 8 == 0:
        conn.execute(f"CREATE VIRTUAL TABLE {BIN_TABLE} USING vec0(embedding bit[{dims}], chunk_size={CHUNK})")
    meta_set(conn, "vec.fingerprint", fingerprint)
    meta_set(conn, "vec.dims", str(dims))
    rebuild_vectors(conn)
    return True


def cache_put(conn: apsw.Connection, content_hash: str, fingerprint: str, vector: list[float]) -> None:
    """Cache a vector and, in the active space, index it."""
    blob = pack(vector)
    conn.execute(
        "INSERT INTO embeddings(hash, fingerprint, dims, vector) VALUES (?,?,?,?) "
        "ON CONFLICT(hash, fingerprint) DO UPDATE SET vector=excluded.vector, dims=excluded.dims",
        (content_hash, fingerprint, len(vector), blob),
    )
    if fingerprint == active_fingerprint(conn) and len(vector) == vec_dims(conn):
        rowid = conn.execute("SELECT rowid FROM embeddings WHERE hash=? AND fingerprint=?",
                             (content_hash, fingerprint)).fetchone()[0]
        conn.execute(f"DELETE FROM {VEC_TABLE} WHERE rowid=?", (rowid,))
        conn.execute(f"INSERT INTO {VEC_TABLE}(rowid, embedding) VALUES (?,?)", (rowid, blob))
        if has_binary(conn):
            conn.execute(f"DELETE FROM {BIN_TABLE} WHERE rowid=?", (rowid,))
            conn.execute(f"INSERT INTO {BIN_TABLE}(rowid, embedding) VALUES (?, vec_quantize_binary(?))", (rowid, blob))
        touch_vectors(conn)


def cache_get(conn: apsw.Connection, content_hash: str, fingerprint: str) -> bytes | None:
    row = conn.execute("SELECT vector FROM embeddings WHERE hash=? AND fingerprint=?", (content_hash, fingerprint)).fetchone()
    return row[0] if row else None


def rebuild_vectors(conn: apsw.Connection) -> int:
    """Re-fill the vec0 index from the cache of the active space; returns its size."""
    if not vec_dims(conn):
        return 0
    args = (active_fingerprint(conn), vec_dims(conn))
    conn.execute(f"DELETE FROM {VEC_TABLE}")
    conn.execute(f"INSERT INTO {VEC_TABLE}(rowid, embedding) SELECT rowid, vector FROM embeddings "
                 "WHERE fingerprint = ? AND dims = ?", args)
    if has_binary(conn):
        conn.execute(f"DELETE FROM {BIN_TABLE}")
        conn.execute(f"INSERT INTO {BIN_TABLE}(rowid, embedding) SELECT rowid, vec_quantize_binary(vector) "
                     "FROM embeddings WHERE fingerprint = ? AND dims = ?", args)
    touch_vectors(conn)
    return conn.execute(f"SELECT count(*) FROM {VEC_TABLE}").fetchone()[0]


def has_binary(conn: apsw.Connection) -> bool:
    return vec_dims(conn) % 8 == 0 and conn.execute(
        "SELECT 1 FROM sqlite_master WHERE name=?", (BIN_TABLE,)).fetchone() is not None


def prune_embeddings(conn: apsw.Connection) -> int:
    """Drop cached vectors no memory uses any more (after edits and forgets); returns how many."""
    stale = [r[0] for r in conn.execute(
        "SELECT e.rowid FROM embeddings e LEFT JOIN memories m ON m.hash = e.hash WHERE m.hash IS NULL")]
    if vec_dims(conn):
        conn.executemany(f"DELETE FROM {VEC_TABLE} WHERE rowid=?", [(r,) for r in stale])
    if has_binary(conn):
        conn.executemany(f"DELETE FROM {BIN_TABLE} WHERE rowid=?", [(r,) for r in stale])
    conn.executemany("DELETE FROM embeddings WHERE rowid=?", [(r,) for r in stale])
    if stale and vec_dims(conn):
        touch_vectors(conn)
    return len(stale)


def prune_token_cache(conn: apsw.Connection) -> None:
    """Drop cached tokens no current memory uses (called after a full rebuild), once stale
    entries make up a fifth of the cache: hashing every memory on each replay costs more."""
    cached = conn.execute("SELECT count(*) FROM fts_tokens").fetchone()[0]
    if cached <= 1.25 * conn.execute("SELECT count(*) FROM memories").fetchone()[0] + 100:
        return
    live = set()
    for caption, content, paths in conn.execute("SELECT caption, content, paths FROM memories"):
        live.add(_token_key(caption, content + "\n" + " ".join(json.loads(paths))))
    stale = [k for (k,) in conn.execute("SELECT key FROM fts_tokens") if k not in live]
    conn.executemany("DELETE FROM fts_tokens WHERE key=?", [(k,) for k in stale])


def index_all(conn: apsw.Connection) -> int:
    """Index every memory row (replay, after the tables were bulk-written; reindex, after
    emptying the index); the number indexed."""
    rows = conn.execute("SELECT rowid, caption, content, paths FROM memories WHERE quarantined IS NULL").fetchall()
    cached = {k: (c, b) for k, c, b in conn.execute("SELECT key, caption, body FROM fts_tokens")}
    out, fresh = [], {}
    joined: dict[str, str] = {}  # most memories share a paths value ("." or a module)
    for rowid, caption, content, paths in rows:
        words = joined.get(paths)
        if words is None:
            words = joined[paths] = " ".join(json.loads(paths))
        body = content + "\n" + words
        key = _token_key(caption, body)
        toks = cached.get(key)
        if toks is None:
            toks = cached[key] = fresh[key] = index_text(caption), index_text(body)
        out.append((rowid, *toks))
    _cache_tokens(conn, fresh)
    # No merging while loading, and the pending terms flushed to a segment every 32 MB instead
    # of every 1 MB: the optimize below merges every segment into one anyway, and the
    # load and the optimize both take less time.  Then FTS5's
    # defaults again, as live writes expect.
    _fts_config(conn, automerge=0, hashsize=FTS_LOAD_HASHSIZE)
    conn.executemany("INSERT INTO memories_fts(rowid, caption, body) VALUES (?,?,?)", out)
    optimize_fts(conn)
    _fts_config(conn, automerge=FTS_AUTOMERGE, hashsize=FTS_HASHSIZE)
    return len(out)


def _fts_config(conn: apsw.Connection, **values: int) -> None:
    for key, value in values.items():
        conn.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES (?, ?)", (key, value))


def optimize_fts(conn: apsw.Connection) -> None:
    """Merge the FTS5 index into one segment after a bulk load.  A bulk insert leaves it in
    many segments, and a query walks every segment's doclist of each term: in a large store a
    common-word query reads many more pages than over one segment.  Same rows, same bm25 scores."""
    conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")


def rebuild_fts(conn: apsw.Connection) -> int:
    clear(conn)
    return index_all(conn)
