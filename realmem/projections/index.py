"""Search indexes derived from memory rows: FTS5 (BM25) and the sqlite-vec vec0 cosine index.

Both are keyed by ``memories.rowid``.  Vectors come from the embeddings cache only (replay
and reindex never call the embedder); a memory whose embedding is not cached yet simply has
no vector until the worker embeds it.
"""

from __future__ import annotations

import json
import struct

import apsw

from realmem.projections.state import Memory
from realmem.tokenize import index_text

VEC_TABLE = "memories_vec"


def _tokens(caption: str, content: str, paths: list[str]) -> tuple[str, str]:
    """(caption tokens, body tokens); paths are indexed so "db migrations" finds db/migrations."""
    return index_text(caption), index_text(content + "\n" + " ".join(paths))


def sync(conn: apsw.Connection, rowid: int, m: Memory, *, content_changed: bool) -> None:
    conn.execute("DELETE FROM memories_fts WHERE rowid=?", (rowid,))
    if m.quarantined is None:
        conn.execute("INSERT INTO memories_fts(rowid, caption, body) VALUES (?,?,?)",
                     (rowid, *_tokens(m.caption, m.content, m.paths)))
    if content_changed or m.quarantined is not None:
        refresh_vector(conn, rowid, m.hash if m.quarantined is None else None)


def drop(conn: apsw.Connection, rowid: int) -> None:
    conn.execute("DELETE FROM memories_fts WHERE rowid=?", (rowid,))
    if vec_dims(conn):
        conn.execute(f"DELETE FROM {VEC_TABLE} WHERE rowid=?", (rowid,))


def clear(conn: apsw.Connection) -> None:
    conn.execute("DELETE FROM memories_fts")
    if vec_dims(conn):
        conn.execute(f"DELETE FROM {VEC_TABLE}")


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


def vec_dims(conn: apsw.Connection) -> int:
    v = meta_get(conn, "vec.dims")
    return int(v) if v else 0


def active_fingerprint(conn: apsw.Connection) -> str | None:
    return meta_get(conn, "vec.fingerprint")


def pack(vector: list[float]) -> bytes:
    return struct.pack(f"{len(vector)}f", *vector)


def set_space(conn: apsw.Connection, fingerprint: str, dims: int) -> bool:
    """Make ``fingerprint`` the active embedding space.  A different space clears the cache
    and the vector index (spec: changing the embedding API clears it).  True if it changed."""
    if active_fingerprint(conn) == fingerprint and vec_dims(conn) == dims:
        return False
    conn.execute(f"DROP TABLE IF EXISTS {VEC_TABLE}")
    conn.execute("DELETE FROM embeddings WHERE fingerprint != ?", (fingerprint,))
    conn.execute(f"CREATE VIRTUAL TABLE {VEC_TABLE} USING vec0(embedding float[{dims}] distance_metric=cosine)")
    meta_set(conn, "vec.fingerprint", fingerprint)
    meta_set(conn, "vec.dims", str(dims))
    # Fill from whatever the cache already holds for this space.
    for rowid, h in conn.execute("SELECT rowid, hash FROM memories WHERE quarantined IS NULL").fetchall():
        refresh_vector(conn, rowid, h)
    return True


def cache_put(conn: apsw.Connection, content_hash: str, fingerprint: str, vector: list[float]) -> None:
    conn.execute(
        "INSERT INTO embeddings(hash, fingerprint, dims, vector) VALUES (?,?,?,?) "
        "ON CONFLICT(hash, fingerprint) DO UPDATE SET vector=excluded.vector, dims=excluded.dims",
        (content_hash, fingerprint, len(vector), pack(vector)),
    )


def cache_get(conn: apsw.Connection, content_hash: str, fingerprint: str) -> bytes | None:
    row = conn.execute("SELECT vector FROM embeddings WHERE hash=? AND fingerprint=?", (content_hash, fingerprint)).fetchone()
    return row[0] if row else None


def refresh_vector(conn: apsw.Connection, rowid: int, content_hash: str | None) -> None:
    """Put the cached vector for ``content_hash`` at ``rowid`` (or remove the row if none)."""
    if not vec_dims(conn):
        return
    conn.execute(f"DELETE FROM {VEC_TABLE} WHERE rowid=?", (rowid,))
    fp = active_fingerprint(conn)
    if content_hash is None or fp is None:
        return
    blob = cache_get(conn, content_hash, fp)
    if blob is not None:
        conn.execute(f"INSERT INTO {VEC_TABLE}(rowid, embedding) VALUES (?,?)", (rowid, blob))


def rebuild_vectors(conn: apsw.Connection) -> int:
    """Re-fill the vec0 index from the cache; returns how many memories have a vector."""
    if not vec_dims(conn):
        return 0
    conn.execute(f"DELETE FROM {VEC_TABLE}")
    fp = active_fingerprint(conn)
    conn.execute(
        f"INSERT INTO {VEC_TABLE}(rowid, embedding) SELECT m.rowid, e.vector FROM memories m "
        "JOIN embeddings e ON e.hash = m.hash AND e.fingerprint = ? WHERE m.quarantined IS NULL",
        (fp,),
    )
    return conn.execute(f"SELECT count(*) FROM {VEC_TABLE}").fetchone()[0]


def rebuild_fts(conn: apsw.Connection) -> int:
    conn.execute("DELETE FROM memories_fts")
    n = 0
    for row in conn.execute("SELECT rowid, caption, content, paths, quarantined FROM memories").fetchall():
        if row[4] is None:
            conn.execute("INSERT INTO memories_fts(rowid, caption, body) VALUES (?,?,?)",
                         (row[0], *_tokens(row[1], row[2], json.loads(row[3]))))
            n += 1
    return n
