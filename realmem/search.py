"""Hybrid retrieval: BM25 over the FTS5 index, cosine KNN over vec0, fused with RRF.

Shared by recall and by the remember gate's neighbour step.  Results are memory keys with
per-modality ranks, so a trace can show cos / BM25 / RRF for each neighbour.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import apsw

from realmem.events.types import Key
from realmem.projections import index
from realmem.tokenize import fts_match

RRF_K = 60


@attrs.define
class Hit:
    key: Key
    bm25: float | None = None       # FTS5 bm25 (lower is better)
    bm25_rank: int | None = None    # 1-based
    cosine: float | None = None     # similarity, 1 = identical
    cos_rank: int | None = None
    rrf: float = 0.0


def _store_filter(stores: Sequence[str]) -> tuple[str, list[str]]:
    return f"m.store IN ({','.join('?' * len(stores))}) AND m.quarantined IS NULL", list(stores)


def bm25(conn: apsw.Connection, text: str, stores: Sequence[str], limit: int) -> list[tuple[Key, float]]:
    match = fts_match(text)
    if match is None:
        return []
    where, args = _store_filter(stores)
    # Rank inside FTS5 first, then join: joining every match before sorting costs more than
    # the ranking itself on large stores.  Over-fetch so other projects' hits cannot crowd out
    # the visible ones.
    rows = conn.execute(
        f"SELECT m.store, m.id, f.score FROM (SELECT rowid, bm25(memories_fts, 3.0, 1.0) AS score "
        f"FROM memories_fts WHERE memories_fts MATCH ? ORDER BY score LIMIT ?) f "
        f"JOIN memories m ON m.rowid = f.rowid WHERE {where} ORDER BY f.score LIMIT ?",
        (match, limit * 4, *args, limit),
    )
    return [((s, i), score) for s, i, score in rows]


PREFILTER_MIN = 20_000  # vectors in the space before the binary prefilter pays off
OVERSAMPLE = 4  # shortlist size per wanted result; vec0's cost grows with k, so keep it small


def knn(conn: apsw.Connection, vector: list[float], stores: Sequence[str], limit: int) -> list[tuple[Key, float]]:
    """Nearest memories by cosine similarity (empty when no vector index exists).

    Small spaces scan the float index exactly.  Large ones scan the sign-quantized index by
    hamming distance (several times faster at the same k), then re-rank that oversampled
    shortlist exactly by cosine from the cached float vectors."""
    dims = index.vec_dims(conn)
    if not dims or len(vector) != dims:
        return []
    where, args = _store_filter(stores)
    blob = index.pack(vector)
    # vec0 KNN cannot filter on columns of another table, so over-fetch then filter (cached
    # vectors of edited or forgotten memories also take a slot until pruned).
    k = min(4096, max(limit * 4, limit + 64))
    size = conn.execute("SELECT coalesce(max(rowid), 0) FROM embeddings").fetchone()[0]
    if size >= PREFILTER_MIN and index.has_binary(conn):
        k = min(4096, max(64, limit * OVERSAMPLE))
        rows = conn.execute(
            f"SELECT m.store, m.id, vec_distance_cosine(e.vector, ?) AS d FROM "
            f"(SELECT rowid FROM {index.BIN_TABLE} WHERE embedding MATCH vec_quantize_binary(?) AND k = ?) b "
            f"JOIN embeddings e ON e.rowid = b.rowid JOIN memories m ON m.hash = e.hash "
            f"WHERE {where} ORDER BY d, m.store, m.id LIMIT ?",
            (blob, blob, k, *args, limit),
        )
    else:
        rows = conn.execute(
            f"SELECT m.store, m.id, v.distance FROM (SELECT rowid, distance FROM {index.VEC_TABLE} "
            f"WHERE embedding MATCH ? AND k = ?) v JOIN embeddings e ON e.rowid = v.rowid "
            f"JOIN memories m ON m.hash = e.hash WHERE {where} ORDER BY v.distance, m.store, m.id LIMIT ?",
            (blob, k, *args, limit),
        )
    return [((s, i), 1.0 - dist) for s, i, dist in rows]


def fuse(bm25_lists: Sequence[list[tuple[Key, float]]], knn_lists: Sequence[list[tuple[Key, float]]],
         *, k: int = RRF_K, limit: int = 254) -> list[Hit]:
    """Reciprocal Rank Fusion of any number of ranked lists; best first."""
    hits: dict[Key, Hit] = {}
    for lst in bm25_lists:
        for rank, (key, score) in enumerate(lst, 1):
            h = hits.setdefault(key, Hit(key))
            if h.bm25_rank is None or rank < h.bm25_rank:
                h.bm25, h.bm25_rank = score, rank
            h.rrf += 1.0 / (k + rank)
    for lst in knn_lists:
        for rank, (key, cos) in enumerate(lst, 1):
            h = hits.setdefault(key, Hit(key))
            if h.cos_rank is None or rank < h.cos_rank:
                h.cosine, h.cos_rank = cos, rank
            h.rrf += 1.0 / (k + rank)
    return sorted(hits.values(), key=lambda h: (-h.rrf, h.key))[:limit]
